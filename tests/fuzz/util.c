/* Helpers shared by the fuzz targets (see fuzz.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

void fz_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("fuzz: property broken: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

bool fz_known(void)
{
	const char *v = getenv("MFS_FUZZ_KNOWN");
	return v && !strcmp(v, "1");
}

static char scratch[4096];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void fz_rmtree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void scratch_cleanup(void)
{
	if (scratch[0])
		fz_rmtree(scratch);
}

const char *fz_scratch(void)
{
	const char *base = getenv("MFS_FUZZ_TMP");

	if (scratch[0])
		return scratch;
	if (!base || !*base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	snprintf(scratch, sizeof(scratch), "%s/mfs-fuzz-XXXXXX", base);
	if (!mkdtemp(scratch)) {
		perror(scratch);
		abort();
	}
	atexit(scratch_cleanup);
	return scratch;
}

int fz_write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	const char *p = buf;

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		p += w;
		len -= (size_t)w;
	}
	return close(fd) ? -errno : 0;
}

int fz_read_file(const char *path, uint8_t **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, *buf + got, (size_t)st.st_size - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	*len = got;
	return 0;
}

uint8_t fz_u8(struct fz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

uint16_t fz_u16(struct fz_in *in)
{
	uint16_t v = fz_u8(in);
	return (uint16_t)(v << 8 | fz_u8(in));
}

uint32_t fz_u32(struct fz_in *in)
{
	uint32_t v = fz_u16(in);
	return v << 16 | fz_u16(in);
}

const uint8_t *fz_bytes(struct fz_in *in, size_t len, size_t *got)
{
	const uint8_t *p = in->p;

	*got = len < in->n ? len : in->n;
	in->p += *got;
	in->n -= *got;
	return p;
}

/* Position c on record index % entries; MDB_NOTFOUND on an empty db. */
static int seek_index(MDB_txn *txn, MDB_dbi db, MDB_cursor *c, unsigned idx, MDB_val *k,
		      MDB_val *v)
{
	MDB_stat st;
	int rc = mdb_stat(txn, db, &st);

	if (rc)
		return rc;
	if (!st.ms_entries)
		return MDB_NOTFOUND;
	idx %= st.ms_entries;
	rc = mdb_cursor_get(c, k, v, MDB_FIRST);
	while (!rc && idx--)
		rc = mdb_cursor_get(c, k, v, MDB_NEXT);
	return rc;
}

/* Replace record k with a copy of its value edited by the op (see fuzz.h). */
static int edit(MDB_txn *txn, MDB_dbi db, MDB_cursor *c, unsigned op, struct fz_in *in)
{
	unsigned idx = fz_u16(in);
	MDB_val k, v;
	int rc = seek_index(txn, db, c, idx, &k, &v);
	unsigned char kb[512];
	uint8_t *buf;
	size_t len = v.mv_size, extra = 0;
	const uint8_t *add = NULL;

	if (rc)
		return rc == MDB_NOTFOUND ? 0 : rc;
	if (k.mv_size > sizeof(kb))
		return 0;
	memcpy(kb, k.mv_data, k.mv_size);
	k.mv_data = kb;
	if (op == 3)
		return mdb_cursor_del(c, 0);
	if (op == 2 || op == 5)
		add = fz_bytes(in, fz_u8(in), &extra);
	buf = malloc(len + extra + 1);
	if (!buf)
		return ENOMEM;
	memcpy(buf, v.mv_data, len);
	switch (op) {
	case 0: {
		unsigned off = fz_u16(in);
		uint8_t x = fz_u8(in);
		if (len)
			buf[off % len] ^= x ? x : 0xff;
		break;
	}
	case 1:
		len = fz_u16(in) % (len + 1);
		break;
	case 2:
		memcpy(buf, add, extra);
		len = extra;
		break;
	case 5:
		memcpy(buf + len, add, extra);
		len += extra;
		break;
	case 6: {
		unsigned off = fz_u8(in);
		uint8_t x = fz_u8(in);
		rc = mdb_cursor_del(c, 0);
		if (!rc && k.mv_size)
			kb[off % k.mv_size] ^= x ? x : 0xff;
		break;
	}
	}
	MDB_val nv = {.mv_size = len, .mv_data = buf};
	if (!rc)
		rc = mdb_put(txn, db, &k, &nv, 0);
	free(buf);
	return rc;
}

int fz_mutate_records(MDB_txn *txn, const MDB_dbi *dbs, unsigned ndbs, struct fz_in *in,
		      unsigned max_ops)
{
	unsigned done = 0;

	while (in->n && done < max_ops) {
		unsigned op = fz_u8(in) % 8;
		if (op == 7)
			break;
		MDB_dbi db = dbs[fz_u8(in) % ndbs];
		MDB_cursor *c;
		int rc;

		if (op == 4) {
			size_t kl, vl;
			const uint8_t *kp = fz_bytes(in, fz_u8(in), &kl);
			const uint8_t *vp = fz_bytes(in, fz_u8(in), &vl);
			MDB_val k = {.mv_size = kl, .mv_data = (void *)kp};
			MDB_val v = {.mv_size = vl, .mv_data = (void *)vp};
			rc = kl ? mdb_put(txn, db, &k, &v, 0) : 0;
		} else {
			rc = mdb_cursor_open(txn, db, &c);
			if (!rc) {
				rc = edit(txn, db, c, op, in);
				mdb_cursor_close(c);
			}
		}
		/* A value LMDB refuses (MDB_BAD_VALSIZE) leaves the txn usable. */
		if (rc && rc != MDB_BAD_VALSIZE && rc != MDB_KEYEXIST)
			return -1;
		done++;
	}
	return (int)done;
}
