/* The power-loss recovery of a store: see dbfs/recover.h and dbfs/durable.c. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbfs/recover.h"

const char *dbfs_boot_id_override;
int dbfs_durable_fault;
unsigned long dbfs_recover_fallbacks, dbfs_recover_replayed;

/* The kernel's boot_id, read once: every record names it, and it does not
 * change while the process lives (an open, a read and a close of /proc per
 * durable point otherwise). */
static char boot_cached[40];
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

static void read_boot_id(void)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* no /proc: every open counts as a reboot (safe, slower) */
	ssize_t n = read(fd, boot_cached, 39);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (boot_cached[i] == '\n')
			boot_cached[i] = '\0';
}

void dbfs_boot_id(char out[40])
{
	memset(out, 0, 40);
	if (dbfs_boot_id_override) {
		snprintf(out, 40, "%s", dbfs_boot_id_override);
		return;
	}
	pthread_once(&boot_once, read_boot_id);
	memcpy(out, boot_cached, 40);
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

/* One slot of dbfs.durable as read: its record, where it is, and (a
 * listed record) its list. */
struct slot_rec {
	struct dbfs_drec r;
	off_t off;
	struct dbfs_drec_page *list;
	uint64_t n;
};

/* The record of version `version` at `off` (slot `slot`), if valid: 1. */
static int read_slot(int fd, off_t off, unsigned slot, uint32_t version, struct slot_rec *s)
{
	struct dbfs_drec *r = &s->r;
	s->off = off;
	s->list = NULL;
	s->n = 0;
	if (pread(fd, r, sizeof(*r), off) != (ssize_t)sizeof(*r))
		return 0;
	if (memcmp(r->magic, DBFS_DREC_MAGIC, 8) || r->version != version ||
	    (r->seq & 1) != slot)
		return 0;
	if (version == 1)
		return r->sum == dbfs_drec_sum(r);
	uint64_t n;
	if (pread(fd, &n, sizeof(n), off + DBFS_DREC_HEAD) != (ssize_t)sizeof(n) ||
	    n > DBFS_DREC_LIST_MAX)
		return 0;
	size_t len = (size_t)n * sizeof(*s->list);
	s->list = malloc(len ? len : 1);
	if (!s->list)
		return 0; /* counted as torn: the other slot, or LMDB, rules */
	if (pread(fd, s->list, len, off + DBFS_DREC_HEAD + 8) != (ssize_t)len ||
	    r->sum != dbfs_drec_list_sum(r, s->list, n)) {
		free(s->list);
		s->list = NULL;
		return 0;
	}
	s->n = n;
	return 1;
}

/* The valid records of dbfs.durable, newest first: how many (0..2).
 * Version 2's slots, or else version 1's (a store not yet upgraded). */
static int read_slots(int fd, struct slot_rec out[2])
{
	int n = 0;
	for (unsigned slot = 0; slot < 2; slot++)
		n += read_slot(fd, (off_t)slot * DBFS_DREC_SLOT2, slot, 2, &out[n]);
	for (unsigned slot = 0; slot < 2 && !n; slot++)
		n += read_slot(fd, (off_t)slot * DBFS_DREC_SLOT, slot, 1, &out[n]);
	if (n == 2 && out[1].r.seq > out[0].r.seq) {
		struct slot_rec t = out[0];
		out[0] = out[1];
		out[1] = t;
	}
	return n;
}

int dbfs_drec_read(int fd, struct dbfs_drec *out)
{
	struct slot_rec s[2];
	int n = read_slots(fd, s);
	if (n)
		*out = s[0].r;
	for (int i = 0; i < n; i++)
		free(s[i].list);
	return n > 0;
}

uint64_t dbfs_drec_page_hash(uint64_t pgno, const void *page, size_t psize)
{
	return dbfs_page_hash(0xcbf29ce484222325ull ^ pgno, page, psize);
}

/* Is every page that s lists in data.mdb (fd) with its hash? */
static bool pages_on_disk(int fd, const struct slot_rec *s)
{
	unsigned char *page = malloc(s->r.psize);
	bool ok = page != NULL;
	for (uint64_t i = 0; ok && i < s->n; i++) {
		uint64_t pgno = s->list[i].pgno;
		ok = pread(fd, page, s->r.psize, (off_t)(pgno * s->r.psize)) ==
			     (ssize_t)s->r.psize &&
		     dbfs_drec_page_hash(pgno, page, s->r.psize) == s->list[i].hash;
	}
	free(page);
	return ok;
}

/* The chain of imaged points that follows record r in dir's dbfs.images
 * (format.h), record by record: each one's sum is checked over all its
 * bytes before any of them is used, and (unless dry) its images are then
 * written over data.mdb (fd). *txnid and meta (DBFS_DREC_META bytes) end as
 * the newest point's, r's when the chain is empty; *count says how many
 * records. A missing file is an empty chain. 0 or a negative errno. */
static int replay_images(const char *dir, int fd, const struct dbfs_drec *r, bool dry,
			 uint64_t *txnid, unsigned char *meta, uint64_t *count)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/" DBFS_ILOG_FILE, dir);
	*txnid = r->txnid;
	memcpy(meta, r->meta, DBFS_DREC_META);
	*count = 0;
	int lfd = open(path, O_RDONLY | O_CLOEXEC);
	if (lfd < 0)
		return errno == ENOENT ? 0 : -errno;
	enum { BATCH = 64 };
	size_t ps = r->psize;
	uint64_t *pg = malloc(DBFS_DREC_LIST_MAX * sizeof(*pg));
	unsigned char *img = malloc(BATCH * ps);
	int rc = pg && img ? 0 : -ENOMEM;
	uint64_t off = 0;
	for (uint64_t lseq = 1; !rc; lseq++) {
		struct dbfs_irec h;
		if (pread(lfd, &h, sizeof(h), (off_t)off) != (ssize_t)sizeof(h) ||
		    memcmp(h.magic, DBFS_ILOG_MAGIC, 8) || h.version != DBFS_ILOG_VERSION ||
		    h.psize != ps || h.dseq != r->seq || h.lseq != lseq || h.base != *txnid ||
		    h.txnid <= h.base || h.n > DBFS_DREC_LIST_MAX ||
		    !dbfs_lmdb_meta_ok(h.meta, h.txnid))
			break;
		size_t plen = (size_t)h.n * sizeof(*pg);
		if (pread(lfd, pg, plen, (off_t)(off + sizeof(h))) != (ssize_t)plen)
			break;
		uint64_t head = dbfs_irec_head_len(h.n, (uint32_t)ps), sum = dbfs_irec_head_sum(&h, pg);
		/* pass 1: the sum; pass 2: the writes */
		for (int pass = 1; pass <= (dry ? 1 : 2) && !rc; pass++) {
			for (uint64_t i = 0; i < h.n && !rc;) {
				uint64_t k = h.n - i < BATCH ? h.n - i : BATCH;
				off_t at = (off_t)(off + head + i * ps);
				if (pread(lfd, img, k * ps, at) != (ssize_t)(k * ps)) {
					rc = pass == 1 ? 1 : -EIO; /* 1: a torn record */
					break;
				}
				for (uint64_t j = 0; j < k; j++, i++) {
					errno = 0;
					if (pass == 1)
						sum = dbfs_page_hash(sum, img + j * ps, ps);
					else if (pwrite(fd, img + j * ps, ps, (off_t)(pg[i] * ps)) !=
						 (ssize_t)ps)
						rc = errno ? -errno : -EIO;
				}
			}
			if (pass == 1 && !rc && sum != h.sum)
				rc = 1;
		}
		if (rc)
			break;
		*txnid = h.txnid;
		memcpy(meta, h.meta, DBFS_DREC_META);
		++*count;
		off += head + h.n * ps;
	}
	free(pg);
	free(img);
	close(lfd);
	return rc > 0 ? 0 : rc; /* the chain ends at a torn record */
}

/* Is `m` (meta page bytes after the page header) a meta of LMDB data
 * format 1 for transaction txnid? */
bool dbfs_lmdb_meta_ok(const unsigned char *m, uint64_t txnid)
{
	return get_u32(m) == DBFS_LMDB_META_MAGIC && get_u32(m + 4) == 1 &&
	       get_u64(m + DBFS_LMDB_META_TXNID) == txnid;
}

/* Make the record at `off` invalid and flush it: the one recovery found
 * wanting, so that the slot the next record goes to is its own and the
 * older, good record is never overwritten first. */
static int blank_slot(int dfd, off_t off)
{
	static const unsigned char zero[DBFS_DREC_HEAD];
	if (pwrite(dfd, zero, sizeof(zero), off) != (ssize_t)sizeof(zero))
		return errno ? -errno : -EIO;
	return fdatasync(dfd) < 0 ? -errno : 0;
}

int dbfs_durable_recover(const char *dir, bool read_only, int *restored, char *err,
			 size_t errlen)
{
	char path[4200];
	struct slot_rec s[2];
	*restored = 0;
	if (dbfs_durable_fault == DBFS_FAULT_NO_RECOVER)
		return 0;
	snprintf(path, sizeof(path), "%s/" DBFS_DREC_FILE, dir);
	int dfd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno; /* format 1, or a fresh store */
	int found = read_slots(dfd, s);
	char boot[40];
	dbfs_boot_id(boot);
	int rc = 0, fd = -1;
	/* No valid record: the file was being made, after a full sync of
	 * data.mdb (dbfs_durable_start). Trusted: LMDB's own meta is right. */
	if (!found || (s[0].r.flags & DBFS_DREC_TRUST_LMDB) || !strncmp(s[0].r.boot, boot, 40))
		goto out;
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(-rc));
		goto out;
	}
	/* The newest record whose pages are all there: a listed record was
	 * pushed before its pages were flushed, and power may have failed in
	 * between. The previous one's tree was still pinned then (durable.c). */
	int use = 0;
	while (use < found && s[use].r.psize >= 512 && s[use].r.psize <= (1u << 16) &&
	       (s[use].r.flags & DBFS_DREC_LISTED) && !pages_on_disk(fd, &s[use]))
		use++;
	dbfs_recover_fallbacks += use > 0;
	struct dbfs_drec *r = use < found ? &s[use].r : NULL;
	if (!r || r->psize < 512 || r->psize > (1u << 16) || !dbfs_lmdb_meta_ok(r->meta, r->txnid)) {
		snprintf(err, errlen, "store is damaged: %s/%s names no %s", dir, DBFS_DREC_FILE,
			 r ? "LMDB meta page" : "durable point whose pages are on the disk");
		rc = -EINVAL;
		goto out;
	}
	/* The point to restore: r's, or the newest of the imaged points
	 * that follow it. */
	uint64_t want, chain;
	unsigned char wmeta[DBFS_DREC_META];
	rc = replay_images(dir, fd, r, true, &want, wmeta, &chain);
	if (rc) {
		snprintf(err, errlen, "cannot read %s/%s: %s", dir, DBFS_ILOG_FILE, strerror(-rc));
		goto out;
	}
	/* Nothing to undo when the durable point is the newest meta and the
	 * other one is older (a clean close, or nothing written since), and
	 * no imaged point's pages are to be written back. */
	unsigned char m[2][DBFS_DREC_META];
	bool same = !chain;
	for (unsigned i = 0; i < 2; i++) {
		if (pread(fd, m[i], DBFS_DREC_META, (off_t)i * r->psize + 16) != DBFS_DREC_META)
			memset(m[i], 0, DBFS_DREC_META);
		uint64_t t = get_u64(m[i] + DBFS_LMDB_META_TXNID);
		if (i == (want & 1))
			same = same && !memcmp(m[i], wmeta, DBFS_LMDB_META_END);
		else
			same = same && dbfs_lmdb_meta_ok(m[i], t) && t <= want;
	}
	if (same && !use)
		goto out;
	if (read_only) {
		snprintf(err, errlen,
			 "store needs its power-loss recovery: open it read-write once");
		rc = -EROFS;
		goto out;
	}
	if (use && (rc = blank_slot(dfd, s[0].off))) {
		snprintf(err, errlen, "cannot blank the record of %s/%s: %s", dir,
			 DBFS_DREC_FILE, strerror(-rc));
		goto out;
	}
	if (same)
		goto out;
	if (chain && (rc = replay_images(dir, fd, r, false, &want, wmeta, &chain))) {
		snprintf(err, errlen, "cannot write the imaged pages of %s/%s into %s: %s", dir,
			 DBFS_ILOG_FILE, path, strerror(-rc));
		goto out;
	}
	dbfs_recover_replayed += chain;
	/* Both meta pages name the point, so that LMDB can pick no other. */
	for (unsigned i = 0; i < 2 && !rc; i++)
		if (pwrite(fd, wmeta, DBFS_DREC_META, (off_t)i * r->psize + 16) != DBFS_DREC_META)
			rc = -EIO;
	if (!rc && fdatasync(fd) < 0)
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "cannot restore the durable meta page of %s: %s", path,
			 strerror(-rc));
		goto out;
	}
	*restored = 1;
out:
	if (fd >= 0)
		close(fd);
	close(dfd);
	for (int i = 0; i < found; i++)
		free(s[i].list);
	return rc;
}
