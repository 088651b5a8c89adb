/* The power-loss recovery of a store: see dbfs/recover.h and dbfs/durable.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dbfs/recover.h"

const char *dbfs_boot_id_override;
int dbfs_durable_fault;

void dbfs_boot_id(char out[40])
{
	memset(out, 0, 40);
	if (dbfs_boot_id_override) {
		snprintf(out, 40, "%s", dbfs_boot_id_override);
		return;
	}
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* no /proc: every open counts as a reboot (safe, slower) */
	ssize_t n = read(fd, out, 39);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\n')
			out[i] = '\0';
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Read the newest valid record of the file `fd`: 1 found, 0 none. */
int dbfs_drec_read(int fd, struct dbfs_drec *out)
{
	int found = 0;
	for (unsigned slot = 0; slot < 2; slot++) {
		struct dbfs_drec r;
		if (pread(fd, &r, sizeof(r), (off_t)slot * DBFS_DREC_SLOT) != (ssize_t)sizeof(r))
			continue;
		if (memcmp(r.magic, DBFS_DREC_MAGIC, 8) || r.version != 1 ||
		    r.sum != dbfs_drec_sum(&r) || (r.seq & 1) != slot)
			continue;
		if (!found || r.seq > out->seq)
			*out = r;
		found = 1;
	}
	return found;
}

/* Is `m` (meta page bytes after the page header) a meta of LMDB data
 * format 1 for transaction txnid? */
bool dbfs_lmdb_meta_ok(const unsigned char *m, uint64_t txnid)
{
	return get_u32(m) == DBFS_LMDB_META_MAGIC && get_u32(m + 4) == 1 &&
	       get_u64(m + DBFS_LMDB_META_TXNID) == txnid;
}

int dbfs_durable_recover(const char *dir, bool read_only, int *restored, char *err,
			 size_t errlen)
{
	char path[4200];
	struct dbfs_drec r;
	*restored = 0;
	if (dbfs_durable_fault == DBFS_FAULT_NO_RECOVER)
		return 0;
	snprintf(path, sizeof(path), "%s/" DBFS_DREC_FILE, dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* format 1, or a fresh store */
	int found = dbfs_drec_read(fd, &r);
	close(fd);
	char boot[40];
	dbfs_boot_id(boot);
	/* No valid record: the file was being made, after a full sync of
	 * data.mdb (dbfs_durable_start). Trusted: LMDB's own meta is right. */
	if (!found || (r.flags & DBFS_DREC_TRUST_LMDB) || !strncmp(r.boot, boot, 40))
		return 0;
	if (r.psize < 512 || r.psize > (1u << 16) || !dbfs_lmdb_meta_ok(r.meta, r.txnid)) {
		snprintf(err, errlen, "store is damaged: %s names no LMDB meta page", path);
		return -EINVAL;
	}

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
		return -e;
	}
	/* Nothing to undo when the durable point is the newest meta and the
	 * other one is older (a clean close, or nothing written since). */
	unsigned char m[2][DBFS_DREC_META];
	bool same = true;
	for (unsigned i = 0; i < 2; i++) {
		if (pread(fd, m[i], DBFS_DREC_META, (off_t)i * r.psize + 16) != DBFS_DREC_META)
			memset(m[i], 0, DBFS_DREC_META);
		uint64_t t = get_u64(m[i] + DBFS_LMDB_META_TXNID);
		if (i == (r.txnid & 1))
			same = same && !memcmp(m[i], r.meta, DBFS_LMDB_META_END);
		else
			same = same && dbfs_lmdb_meta_ok(m[i], t) && t <= r.txnid;
	}
	int rc = 0;
	if (same) {
		close(fd);
		return 0;
	}
	if (read_only) {
		snprintf(err, errlen,
			 "store needs its power-loss recovery: open it read-write once");
		close(fd);
		return -EROFS;
	}
	/* Both meta pages name T, so that LMDB can pick no other. */
	for (unsigned i = 0; i < 2 && !rc; i++)
		if (pwrite(fd, r.meta, DBFS_DREC_META, (off_t)i * r.psize + 16) != DBFS_DREC_META)
			rc = -EIO;
	if (!rc && fdatasync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc) {
		snprintf(err, errlen, "cannot restore the durable meta page of %s: %s", path,
			 strerror(-rc));
		return rc;
	}
	*restored = 1;
	return 0;
}

