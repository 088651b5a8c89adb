/*
 * Unit tests of the DBFS core (no FUSE): every operation on a temporary
 * LMDB store, its error paths, and a failing LMDB call injected at each step
 * of multi-step operations (the store must be unchanged after each failure).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "dbfs/recover.h"

static char dir[256];
/* What an open store's directory holds: LMDB's, DBFS's, the queues': the
 * feed's (opened MFSQ_NO_LOG: no enqueue log) and delayed work's. */
#define STORE_FILES                                                                                \
	"data.mdb,dbfs.durable,dbfs.lock,lock.mdb,mfsq-feeds.acks,mfsq-later.acks,mfsq-later.log0"
static struct dbfs *fs;
static const struct dbfs_cred cred = {1000, 1000, 022};

static void rm_store(void)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static void open_store(void)
{
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	o.durability = DBFS_DURABLE_NORMAL;
	o.initial_map_size = 8 << 20;
	int rc = dbfs_open(dir, &o, &fs, err, sizeof(err));
	ck_assert_msg(rc == 0, "dbfs_open: %d %s", rc, err);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/dbfs-unit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	open_store();
}

static void teardown(void)
{
	dbfs_fault_disk_full = false;
	dbfs_close(fs);
	fs = NULL;
	rm_store();
}

static MDB_txn *txn_begin(void)
{
	MDB_txn *t;
	ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, 0, &t), 0);
	return t;
}

static int txn_end(MDB_txn *t, int rc)
{
	if (rc)
		mdb_txn_abort(t);
	else
		ck_assert_int_eq(mdb_txn_commit(t), 0);
	return rc;
}

/* Run a core call in its own write transaction; commit on success. */
#define RUN(expr)                                                                          \
	({                                                                                 \
		MDB_txn *txn = txn_begin();                                                \
		txn_end(txn, (expr));                                                      \
	})

static uint64_t mk(uint64_t parent, const char *name, uint32_t mode)
{
	uint64_t ino;
	struct dbfs_inode in;
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, parent, name, mode, 0, NULL, &ino, &in)),
			 0);
	return ino;
}

static int lookup(uint64_t parent, const char *name, uint64_t *ino, struct dbfs_inode *in)
{
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	int rc = dbfs_op_lookup(fs, t, parent, name, ino, in);
	dbfs_read_end(fs, t);
	return rc;
}

static struct dbfs_inode iget(uint64_t ino)
{
	struct dbfs_inode in;
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, ino, &in), 0);
	dbfs_read_end(fs, t);
	return in;
}

static struct dbfs_usage_rec usage(void)
{
	struct dbfs_usage_rec u;
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_usage_get(fs, t, &u), 0);
	dbfs_read_end(fs, t);
	return u;
}

/* Read [off, off+len) into buf; returns bytes read. */
/* Read like the FUSE adapter, in rounds of at most 64 iovecs. */
static size_t rd(uint64_t ino, uint64_t off, void *buf, size_t len)
{
	struct iovec iov[64];
	size_t got, total = 0;
	MDB_txn *t;
	struct dbfs_inode in;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, ino, &in), 0);
	do {
		int n;
		ck_assert_int_eq(dbfs_data_map(fs, t, ino, &in, off + total, len - total, iov, 64,
					       &got, &n),
				 0);
		size_t at = 0;
		for (int i = 0; i < n; i++) {
			memcpy((char *)buf + total + at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
		ck_assert_uint_eq(at, got);
		total += got;
	} while (got && total < len);
	dbfs_read_end(fs, t);
	return total;
}

/* What a file of `size` bytes written from offset 0 has allocated. */
static uint64_t alloc_of(uint64_t size)
{
	uint64_t bs = fs->block_size;
	return size / bs * dbfs_alloc_round(bs) + dbfs_alloc_round(size % bs);
}

/* A hash of every record of every table: equal hashes, equal stores. */
static uint64_t store_hash(void)
{
	MDB_dbi dbs[] = {fs->db_super, fs->db_inode, fs->db_dirent, fs->db_dircook,
			 fs->db_data, fs->db_xattr, fs->db_orphan};
	uint64_t h = 1469598103934665603ull;
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]); i++) {
		MDB_cursor *c;
		MDB_val k, v;
		ck_assert_int_eq(mdb_cursor_open(t, dbs[i], &c), 0);
		while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) {
			for (size_t j = 0; j < k.mv_size; j++)
				h = (h ^ ((unsigned char *)k.mv_data)[j]) * 1099511628211ull;
			for (size_t j = 0; j < v.mv_size; j++)
				h = (h ^ ((unsigned char *)v.mv_data)[j]) * 1099511628211ull;
			h = (h ^ 0xff) * 1099511628211ull;
		}
		mdb_cursor_close(c);
		h = (h ^ 0xfe) * 1099511628211ull;
	}
	dbfs_read_end(fs, t);
	return h;
}

/* ---- store life cycle ---- */

START_TEST(test_reopen_and_lock)
{
	uint64_t a = mk(DBFS_ROOT_INO, "a", S_IFREG | 0644);
	struct dbfs *other;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "in use"));
	dbfs_close(fs);
	open_store();
	uint64_t ino;
	struct dbfs_inode in;
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "a", &ino, &in), 0);
	ck_assert_uint_eq(ino, a);
	ck_assert(S_ISREG(in.mode));
}
END_TEST

/* A store restored from a backup of data.mdb alone (mdb_copy): a
 * read-only open makes the dbfs.lock it lacks, and holds it. */
START_TEST(test_ro_open_without_lock)
{
	struct dbfs *ro, *other;
	struct dbfs_options o;
	char err[256], p[300];
	mk(DBFS_ROOT_INO, "a", S_IFREG | 0644);
	dbfs_close(fs);
	fs = NULL;
	snprintf(p, sizeof(p), "%s/dbfs.lock", dir);
	ck_assert_int_eq(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/lock.mdb", dir);
	unlink(p);
	dbfs_options_init(&o);
	o.read_only = true;
	ck_assert_msg(dbfs_open(dir, &o, &ro, err, sizeof(err)) == 0, "%s", err);
	snprintf(p, sizeof(p), "%s/dbfs.lock", dir);
	ck_assert_int_eq(access(p, F_OK), 0);
	o.read_only = false;
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EBUSY);
	dbfs_close(ro);
	open_store();
	uint64_t ino;
	struct dbfs_inode in;
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "a", &ino, &in), 0);
}
END_TEST

START_TEST(test_open_errors)
{
	struct dbfs *other;
	struct dbfs_options o;
	char err[256], d2[300];
	dbfs_options_init(&o);
	snprintf(d2, sizeof(d2), "%s/sub", dir);
	ck_assert_int_eq(mkdir(d2, 0700), 0);
	ck_assert_int_eq(dbfs_open(d2, &o, &other, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "create"));
	snprintf(d2, sizeof(d2), "%s/missing", dir);
	ck_assert_int_eq(dbfs_open(d2, &o, &other, err, sizeof(err)), -ENOENT);

	/* Wrong format version. */
	MDB_txn *t = txn_begin();
	MDB_val k = {2, (void *)"sb"}, v;
	ck_assert_int_eq(mdb_get(t, fs->db_super, &k, &v), 0);
	struct dbfs_super sb;
	memcpy(&sb, v.mv_data, sizeof(sb));
	sb.version = 99;
	v.mv_data = &sb;
	ck_assert_int_eq(mdb_put(t, fs->db_super, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	dbfs_close(fs);
	fs = NULL;
	o.create = true;
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "version 99"));

	/* Truncated data file. */
	char p[300];
	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	ck_assert_int_eq(truncate(p, 8192), 0);
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "damaged"));

	/* Garbage data file. */
	int fd = open(p, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	char junk[16384];
	memset(junk, 0xa5, sizeof(junk));
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "damaged"));
	rm_store();
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	open_store();
}
END_TEST

/* One byte of data.mdb xored with x (pread/pwrite). */
static void xor_byte(const char *path, off_t off, unsigned char x)
{
	unsigned char b;
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= x;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* LMDB trusts the meta pages' page size and last page; dbfs_open checks
 * them first (metacheck.c). Meta page i is at i * 4096 (this machine's
 * page size); its page size at byte 40, its last page at 136, its txnid at 144. */
START_TEST(test_meta_pages)
{
	static const struct {
		off_t off;
		unsigned char x;
		const char *why;
	} cases[] = {
	    {40 + 1, 0x01, "page size 4352"},	       /* meta 0: not a power of two */
	    {40 + 1, 0x30, "is not a meta page"},      /* meta 0: 16384, page 1 is not there */
	    {4096 + 40 + 1, 0x30, "disagree"},	       /* meta 1: 16384 */
	    {4096 + 40 + 3, 0x80, "page size"},	       /* meta 1: 2^31 + 4096 */
	    {16, 0xff, "magic"},			       /* meta 0 */
	    {4096 + 20, 0x02, "format version 3"},     /* meta 1 */
	    {4096 + 10, 0x08, "is not a meta page"},   /* meta 1: P_META cleared */
	};
	struct dbfs *other;
	struct dbfs_options o;
	char err[256], p[300];
	dbfs_options_init(&o);
	ck_assert_int_eq(getpagesize(), 4096);
	mk(DBFS_ROOT_INO, "a", S_IFREG | 0644);
	dbfs_close(fs);
	fs = NULL;
	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		xor_byte(p, cases[i].off, cases[i].x);
		err[0] = '\0';
		ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EINVAL);
		ck_assert_msg(strstr(err, "store is damaged") && strstr(err, cases[i].why),
			      "case %zu: %s", i, err);
		o.read_only = true; /* the same before a read-only open */
		ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EINVAL);
		o.read_only = false;
		xor_byte(p, cases[i].off, cases[i].x);
	}
	/* the last page of the newer meta page beyond the end of the file */
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	int fd = open(p, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint64_t txn[2], last, saved;
	ck_assert_int_eq(pread(fd, &txn[0], 8, 144), 8);
	ck_assert_int_eq(pread(fd, &txn[1], 8, 4096 + 144), 8);
	off_t at = (txn[1] > txn[0] ? 4096 : 0) + 136;
	ck_assert_int_eq(pread(fd, &saved, 8, at), 8);
	last = (uint64_t)st.st_size / 4096;
	ck_assert_int_eq(pwrite(fd, &last, 8, at), 8);
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "store is damaged"));
	ck_assert_ptr_nonnull(strstr(err, "names page"));
	ck_assert_int_eq(pwrite(fd, &saved, 8, at), 8);
	close(fd);
	open_store();
	uint64_t ino;
	struct dbfs_inode in;
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "a", &ino, &in), 0);
}
END_TEST

START_TEST(test_options)
{
	struct dbfs_options o;
	char err[128];
	dbfs_options_init(&o);
	ck_assert_int_eq(dbfs_option_parse(&o, "quota_bytes", "8M", err, sizeof(err)), 0);
	ck_assert_uint_eq(o.quota_bytes, 8u << 20);
	ck_assert_int_eq(dbfs_option_parse(&o, "durability", "full", err, sizeof(err)), 0);
	ck_assert_int_eq(o.durability, DBFS_DURABLE_FULL);
	ck_assert_int_eq(dbfs_option_parse(&o, "durability", "sometimes", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "quota_bytes", "-1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "quota_bytes", "1Q", err, sizeof(err)), -EINVAL);
	/* digits only: strtoull would skip the space and take the sign (2^64-1) */
	ck_assert_int_eq(dbfs_option_parse(&o, "quota_bytes", " -1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "quota_inodes", "+5", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "max_readers", " 64", err, sizeof(err)), -EINVAL);
	ck_assert_uint_eq(o.quota_bytes, 8u << 20);
	ck_assert_int_eq(dbfs_option_parse(&o, "map_size", "99999999999999999999", err,
					   sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "bogus", "1", err, sizeof(err)), -ENOENT);
	ck_assert_int_eq(dbfs_option_parse(&o, "attr_timeout", "nan", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "attr_timeout", "+.5", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "entry_timeout", " 1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "entry_timeout", "-0", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&o, "entry_timeout", "0.5", err, sizeof(err)), 0);
	/* a refused rw= leaves read_only as it was (it read an unset bool) */
	ck_assert_int_eq(dbfs_option_parse(&o, "rw", "no", err, sizeof(err)), 0);
	ck_assert(o.read_only);
	err[0] = '\0';
	ck_assert_int_eq(dbfs_option_parse(&o, "rw", "maybe", err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "invalid value 'maybe' for option 'rw'");
	ck_assert(o.read_only);
	ck_assert_int_eq(dbfs_option_parse(&o, "rw", NULL, err, sizeof(err)), 0);
	ck_assert(!o.read_only);
}
END_TEST

/* ---- names ---- */

START_TEST(test_mknod_lookup_errors)
{
	uint64_t ino;
	struct dbfs_inode in;
	uint64_t d = mk(DBFS_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t f = mk(d, "f", S_IFREG | 0666);
	in = iget(f);
	ck_assert_uint_eq(in.mode, S_IFREG | 0644); /* umask 022 applied */
	ck_assert_uint_eq(in.uid, 1000);
	ck_assert_uint_eq(iget(d).nlink, 2);
	ck_assert_uint_eq(iget(DBFS_ROOT_INO).nlink, 3);
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, d, "f", S_IFREG | 0644, 0, NULL, &ino,
					   &in)), -EEXIST);
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, f, "x", S_IFREG | 0644, 0, NULL, &ino,
					   &in)), -ENOTDIR);
	char longname[300];
	memset(longname, 'n', 256);
	longname[256] = '\0';
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, d, longname, S_IFREG | 0644, 0, NULL,
					   &ino, &in)), -ENAMETOOLONG);
	longname[255] = '\0';
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, d, longname, S_IFREG | 0644, 0, NULL,
					   &ino, &in)), 0);
	ck_assert_int_eq(lookup(d, "nope", &ino, &in), -ENOENT);
	ck_assert_int_eq(lookup(f, "x", &ino, &in), -ENOTDIR);
	ck_assert_int_eq(lookup(d, "..", &ino, &in), 0);
	ck_assert_uint_eq(ino, DBFS_ROOT_INO);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "d", 0)), -EISDIR);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "d", 1)), -ENOTEMPTY);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, d, "f", 1)), -ENOTDIR);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, d, "missing", 0)), -ENOENT);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, d, "f", 0)), 0);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, d, longname, 0)), 0);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "d", 1)), 0);
	ck_assert_uint_eq(iget(DBFS_ROOT_INO).nlink, 2);
	ck_assert_uint_eq(iget(DBFS_ROOT_INO).nentries, 0);
	struct dbfs_usage_rec u = usage();
	ck_assert_uint_eq(u.inodes, 1);
	/* A removed directory refuses new entries. */
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, d, "late", S_IFREG | 0644, 0, NULL,
					   &ino, &in)), -ENOENT);
}
END_TEST

START_TEST(test_symlink_and_link)
{
	uint64_t ino, f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	struct dbfs_inode in;
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, DBFS_ROOT_INO, "l", S_IFLNK | 0777, 0,
					   "target/path", &ino, &in)), 0);
	MDB_txn *t;
	const char *tg;
	size_t len;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get_link(fs, t, ino, &tg, &len), 0);
	ck_assert_uint_eq(len, 11);
	ck_assert(!memcmp(tg, "target/path", 11));
	dbfs_read_end(fs, t);
	/* Updating a symlink's inode keeps its target. */
	struct stat st = {.st_uid = 5};
	ck_assert_int_eq(RUN(dbfs_op_setattr(fs, txn, ino, &st, DBFS_SET_UID, &in)), 0);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get_link(fs, t, ino, &tg, &len), 0);
	ck_assert_uint_eq(len, 11);
	dbfs_read_end(fs, t);

	ck_assert_int_eq(RUN(dbfs_op_link(fs, txn, f, DBFS_ROOT_INO, "g", &in)), 0);
	ck_assert_uint_eq(iget(f).nlink, 2);
	ck_assert_int_eq(RUN(dbfs_op_link(fs, txn, f, DBFS_ROOT_INO, "g", &in)), -EEXIST);
	ck_assert_int_eq(RUN(dbfs_op_link(fs, txn, DBFS_ROOT_INO, DBFS_ROOT_INO, "r", &in)),
			 -EPERM);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "f", 0)), 0);
	ck_assert_uint_eq(iget(f).nlink, 1);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "g", 0)), 0);
	MDB_txn *t2;
	ck_assert_int_eq(dbfs_read_begin(fs, &t2), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t2, f, &in), -ENOENT);
	dbfs_read_end(fs, t2);
}
END_TEST

START_TEST(test_rename)
{
	uint64_t a = mk(DBFS_ROOT_INO, "a", S_IFDIR | 0755);
	uint64_t b = mk(a, "b", S_IFDIR | 0755);
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	uint64_t g = mk(DBFS_ROOT_INO, "g", S_IFREG | 0644);
	uint64_t ino;
	struct dbfs_inode in;
	/* Into its own subtree. */
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "a", b, "x", 0)), -EINVAL);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "a", a, "x", 0)), -EINVAL);
	/* Type mismatches. */
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "f", a, "b", 0)), -EISDIR);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, a, "b", DBFS_ROOT_INO, "f", 0)), -ENOTDIR);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "f", DBFS_ROOT_INO, "g",
					    RENAME_NOREPLACE)), -EEXIST);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "f", DBFS_ROOT_INO, "zz",
					    RENAME_EXCHANGE)), -ENOENT);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "nope", DBFS_ROOT_INO, "zz",
					    0)), -ENOENT);
	/* Over an existing file. */
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "f", DBFS_ROOT_INO, "g", 0)),
			 0);
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "g", &ino, &in), 0);
	ck_assert_uint_eq(ino, f);
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "f", &ino, &in), -ENOENT);
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, g, &in), -ENOENT);
	dbfs_read_end(fs, t);
	/* A directory across directories: link counts and parent follow. */
	uint64_t c = mk(DBFS_ROOT_INO, "c", S_IFDIR | 0755);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, a, "b", c, "b2", 0)), 0);
	ck_assert_uint_eq(iget(a).nlink, 2);
	ck_assert_uint_eq(iget(c).nlink, 3);
	ck_assert_uint_eq(iget(b).parent, c);
	/* Over an empty directory, then refused over a non-empty one. */
	mk(DBFS_ROOT_INO, "e", S_IFDIR | 0755);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "e", DBFS_ROOT_INO, "c", 0)),
			 -ENOTEMPTY);
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "a", DBFS_ROOT_INO, "e", 0)),
			 0);
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "e", &ino, &in), 0);
	ck_assert_uint_eq(ino, a);
	/* Exchange a file and a directory in different parents. */
	ck_assert_int_eq(RUN(dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "g", c, "b2",
					    RENAME_EXCHANGE)), 0);
	ck_assert_int_eq(lookup(c, "b2", &ino, &in), 0);
	ck_assert_uint_eq(ino, f);
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "g", &ino, &in), 0);
	ck_assert_uint_eq(ino, b);
	ck_assert_uint_eq(iget(b).parent, DBFS_ROOT_INO);
	ck_assert_uint_eq(iget(c).nlink, 2);
	ck_assert_uint_eq(iget(DBFS_ROOT_INO).nlink, 2 + 3); /* e(a), c, g(b) */
}
END_TEST

/* ---- data ---- */

static int wr(uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	return RUN(dbfs_op_write(fs, txn, ino, off, buf, len, 0));
}

START_TEST(test_data)
{
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	static unsigned char buf[300000], got[300000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	ck_assert_int_eq(wr(f, 100, buf, 200000), 0);
	struct dbfs_inode in = iget(f);
	ck_assert_uint_eq(in.size, 200100);
	ck_assert_uint_eq(rd(f, 0, got, sizeof(got)), 200100);
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(got[i], 0);
	ck_assert(!memcmp(got + 100, buf, 200000));
	ck_assert_uint_eq(in.alloc, usage().bytes);
	ck_assert_uint_eq(in.alloc, alloc_of(200100));

	/* A hole far out: sparse, reads zeros. */
	ck_assert_int_eq(wr(f, 5ull << 30, "xyz", 3), 0);
	in = iget(f);
	ck_assert_uint_eq(in.size, (5ull << 30) + 3);
	ck_assert_uint_lt(in.alloc, 300000);
	ck_assert_uint_eq(rd(f, (4ull << 30), got, 1000), 1000);
	for (int i = 0; i < 1000; i++)
		ck_assert_uint_eq(got[i], 0);
	ck_assert_uint_eq(rd(f, (5ull << 30) + 1, got, 100), 2);
	ck_assert(!memcmp(got, "yz", 2));

	/* Truncate down into the middle of a block. */
	struct stat st = {.st_size = 70000};
	ck_assert_int_eq(RUN(dbfs_op_setattr(fs, txn, f, &st, DBFS_SET_SIZE, &in)), 0);
	ck_assert_uint_eq(in.size, 70000);
	ck_assert_uint_eq(in.alloc, alloc_of(70000));
	ck_assert_uint_eq(usage().bytes, in.alloc);
	/* Up again: the cut bytes read as zeros. */
	st.st_size = 80000;
	ck_assert_int_eq(RUN(dbfs_op_setattr(fs, txn, f, &st, DBFS_SET_SIZE, &in)), 0);
	ck_assert_uint_eq(rd(f, 69990, got, 100), 100);
	ck_assert(!memcmp(got, buf + 69890, 10));
	for (int i = 10; i < 100; i++)
		ck_assert_uint_eq(got[i], 0);

	/* Punch a hole across a block boundary. */
	ck_assert_int_eq(RUN(dbfs_op_fallocate(fs, txn, f, FALLOC_FL_PUNCH_HOLE |
					       FALLOC_FL_KEEP_SIZE, 1000, 65536)), 0);
	ck_assert_uint_eq(rd(f, 0, got, 80000), 80000);
	ck_assert(!memcmp(got + 100, buf, 900));
	for (int i = 1000; i < 66536; i++)
		ck_assert_uint_eq(got[i], 0);
	ck_assert(!memcmp(got + 66536, buf + 66436, 70000 - 66536));
	ck_assert_uint_eq(iget(f).alloc, usage().bytes);
	ck_assert_int_eq(RUN(dbfs_op_fallocate(fs, txn, f, FALLOC_FL_PUNCH_HOLE, 0, 10)),
			 -EOPNOTSUPP);
	ck_assert_int_eq(RUN(dbfs_op_fallocate(fs, txn, f, FALLOC_FL_COLLAPSE_RANGE, 0, 65536)),
			 -EOPNOTSUPP);

	/* Allocate extends and materialises zeros. */
	uint64_t a0 = iget(f).alloc;
	ck_assert_int_eq(RUN(dbfs_op_fallocate(fs, txn, f, 0, 0, 1 << 20)), 0);
	in = iget(f);
	ck_assert_uint_eq(in.size, 1 << 20);
	ck_assert_uint_eq(in.alloc, alloc_of(1 << 20));
	ck_assert_uint_gt(in.alloc, a0);
	ck_assert_uint_eq(rd(f, 100, got, 10), 10);
	ck_assert(!memcmp(got, buf, 10));

	/* Limits. */
	ck_assert_int_eq(wr(f, DBFS_MAX_FILE_SIZE, "a", 1), -EFBIG);
	st.st_size = (off_t)DBFS_MAX_FILE_SIZE + 1;
	ck_assert_int_eq(RUN(dbfs_op_setattr(fs, txn, f, &st, DBFS_SET_SIZE, &in)), -EFBIG);
	ck_assert_int_eq(wr(DBFS_ROOT_INO, 0, "a", 1), -EISDIR);

	/* Unlink frees everything. */
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "f", 0)), 0);
	ck_assert_uint_eq(usage().bytes, 0);
	ck_assert_uint_eq(usage().inodes, 1);
}
END_TEST

/* statfs counts LMDB's free pages from the B-trees' sizes instead of
 * reading the free list: the two must agree, also with a named database
 * DBFS does not know; a plain record in the main database turns the
 * count off. */
START_TEST(test_free_pages_counted)
{
	static unsigned char buf[100000];
	char name[16];
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		uint64_t f = mk(DBFS_ROOT_INO, name, S_IFREG | 0644);
		memset(buf, i, sizeof(buf));
		ck_assert_int_eq(wr(f, 0, buf, sizeof(buf) - (size_t)i * 1000), 0);
		if (i % 3 == 0)
			ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, name, 0)), 0);
	}
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	uint64_t listed = dbfs_free_pages_listed(t);
	int64_t counted = dbfs_free_pages_counted(fs, t);
	dbfs_read_end(fs, t);
	ck_assert_uint_gt(listed, 0);
	ck_assert_int_eq(counted, (int64_t)listed);

	MDB_dbi extra;
	t = txn_begin();
	ck_assert_int_eq(mdb_dbi_open(t, "extra", MDB_CREATE, &extra), 0);
	txn_end(t, 0);
	/* a named database of its own (the change feed's queue has many) is
	 * counted from its record in the main database */
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_free_pages_counted(fs, t), (int64_t)dbfs_free_pages_listed(t));
	dbfs_read_end(fs, t);
	/* a plain record in the main database turns the count off */
	t = txn_begin();
	ck_assert_int_eq(mdb_put(t, 1 /* MAIN_DBI */, &(MDB_val){5, "plain"},
				 &(MDB_val){3, "abc"}, 0),
			 0);
	txn_end(t, 0);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_free_pages_counted(fs, t), -1);
	dbfs_read_end(fs, t);
}
END_TEST

/* statfs counts an inode waiting to be reaped as gone, without committing
 * the reap (a synced commit per statfs on a disk). */
START_TEST(test_statfs_pending_reap)
{
	static unsigned char buf[100000];
	struct statvfs s0, s1, s2;
	uint64_t f = mk(DBFS_ROOT_INO, "big", S_IFREG | 0644);
	ck_assert_int_eq(wr(f, 0, buf, sizeof(buf)), 0);
	uint64_t alloc = iget(f).alloc;
	ck_assert_uint_gt(alloc, sizeof(buf) - 1);
	ck_assert_int_eq(dbfs_statfs(fs, &s0), 0);
	ck_assert_uint_eq((s0.f_blocks - s0.f_bfree) * 4096, usage().bytes);
	ck_assert_uint_eq(s0.f_files - s0.f_ffree, 2);

	ck_assert_int_eq(dbfs_lookups_ref(&fs->lookups, f, 1), 0); /* open in the kernel */
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "big", 0)), 0);
	ck_assert_uint_eq(dbfs_lookups_unref(&fs->lookups, f, 1), 0); /* last close */
	dbfs_reap_later(fs, f);
	ck_assert_int_eq(dbfs_statfs(fs, &s1), 0);
	ck_assert_uint_eq(fs->nreap, 1); /* nothing committed */
	ck_assert_uint_eq(s1.f_blocks - s1.f_bfree, (s0.f_blocks - s0.f_bfree) - alloc / 4096);
	ck_assert_uint_eq(s1.f_files - s1.f_ffree, 1);

	ck_assert_int_eq(dbfs_reap_now(fs), 0);
	ck_assert_uint_eq(fs->nreap, 0);
	ck_assert_int_eq(dbfs_statfs(fs, &s2), 0);
	ck_assert_uint_eq(s2.f_blocks - s2.f_bfree, s1.f_blocks - s1.f_bfree);
	ck_assert_uint_eq(s2.f_files - s2.f_ffree, 1);
}
END_TEST

static uint64_t orphans(void)
{
	MDB_txn *t;
	MDB_stat st;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(mdb_stat(t, fs->db_orphan, &st), 0);
	dbfs_read_end(fs, t);
	return st.ms_entries;
}

/* A file holding more than one transaction may free (DBFS_FREE_MAX) is
 * destroyed over several, waiting in the orphan table in between. In one
 * transaction, a 9 GB file on a full disk needed more fresh pages (its
 * free-list record alone is 18 MB) than the space reserve: mfs died of
 * SIGBUS at the reap, and again at every mount, reclaiming the orphan. */
START_TEST(test_destroy_in_pieces)
{
	static unsigned char buf[1 << 20];
	const uint64_t size = DBFS_FREE_MAX + (DBFS_FREE_MAX >> 1);
	uint64_t base = usage().bytes;
	memset(buf, 0x5a, sizeof(buf));
	while (fs->map_size < (512u << 20)) /* RUN does not grow the map */
		ck_assert_int_eq(dbfs_grow_map(fs, fs->map_size), 0);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t f = mk(DBFS_ROOT_INO, "big", S_IFREG | 0644);
		for (uint64_t off = 0; off < size; off += sizeof(buf))
			ck_assert_int_eq(wr(f, off, buf, sizeof(buf)), 0);
		uint64_t alloc = iget(f).alloc;
		ck_assert_uint_ge(alloc, size);
		if (pass == 0) {
			/* Not open: unlink frees what one transaction may, queues the
			 * rest (the reap's own way: without the queue of delayed work,
			 * which would take a file this large, reclaim.c) */
			struct dbfs_expire *ex = fs->expire;
			fs->expire = NULL;
			ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "big", 0)), 0);
			struct dbfs_inode in = iget(f);
			ck_assert_uint_eq(in.nlink, 0);
			ck_assert_uint_le(alloc - in.alloc, DBFS_FREE_MAX);
			ck_assert_uint_gt(in.alloc, 0);
			ck_assert_uint_eq(usage().bytes, base + in.alloc);
			ck_assert_uint_eq(orphans(), 1);
			ck_assert_uint_eq(fs->nreap, 1);
			ck_assert_int_eq(dbfs_reap_now(fs), 0);
			ck_assert_uint_eq(fs->nreap, 0);
			fs->expire = ex;
		} else {
			/* Open at a crash: the next mount reclaims it, in pieces. */
			ck_assert_int_eq(dbfs_lookups_ref(&fs->lookups, f, 1), 0);
			ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "big", 0)), 0);
			ck_assert_uint_eq(orphans(), 1);
			fs->opt.read_only = true; /* dbfs_close must not reclaim it */
			dbfs_close(fs);
			open_store();
		}
		struct dbfs_inode in;
		MDB_txn *t;
		ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
		ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), -ENOENT);
		dbfs_read_end(fs, t);
		ck_assert_uint_eq(orphans(), 0);
		ck_assert_uint_eq(usage().bytes, base);
	}
}
END_TEST

static int64_t free_clock_now;
static int64_t free_clock_step(void)
{
	return free_clock_now += DBFS_FREE_NS + 1; /* each reading: past a budget */
}

struct drop_ctx {
	uint64_t ino, freed;
	int more;
};

static int drop_all(MDB_txn *txn, struct drop_ctx *c)
{
	struct dbfs_inode in;
	int rc = dbfs_inode_get(fs, txn, c->ino, &in);
	return rc ?: dbfs_data_drop(fs, txn, c->ino, &in, 0, UINT64_MAX, &c->freed, &c->more) ?:
		     dbfs_inode_put(fs, txn, c->ino, &in);
}

/* A bounded delete stops when its transaction has spent DBFS_FREE_NS,
 * whatever bytes it may still free: a piece whose pages must come from a
 * busy disk held the writer for seconds (create+unlink up to 3.2 s during
 * a 10 GiB reclaim). With a clock that passes the budget at every
 * reading, each call frees one batch (64 blocks) and says more. */
START_TEST(test_free_time_bound)
{
	static unsigned char buf[1 << 20];
	memset(buf, 7, sizeof(buf));
	uint64_t f = mk(DBFS_ROOT_INO, "slow", S_IFREG | 0644), base = usage().bytes;
	for (uint64_t off = 0; off < (2u << 20); off += sizeof(buf))
		ck_assert_int_eq(wr(f, off, buf, sizeof(buf)), 0);
	const uint64_t blocks = ((2u << 20) + fs->block_size - 1) / fs->block_size;
	const uint64_t per = dbfs_alloc_round(fs->block_size), alloc = iget(f).alloc;
	ck_assert_uint_eq(alloc, blocks * per);
	int64_t (*saved)(void) = dbfs_free_clock;
	dbfs_free_clock = free_clock_step;
	struct drop_ctx c = {f, 0, 0};
	int passes = 0;
	do {
		ck_assert_int_eq(RUN(drop_all(txn, &c)), 0);
		passes++;
		uint64_t left = iget(f).alloc;
		ck_assert_uint_eq(usage().bytes, base + left);
		if (c.more)
			ck_assert_uint_eq(c.freed, 64 * per);
	} while (c.more && passes < 100);
	dbfs_free_clock = saved;
	ck_assert_uint_eq(iget(f).alloc, 0);
	ck_assert_uint_eq(passes, (blocks + 63) / 64);
}
END_TEST

/* Pages of the blocks [0, n) of `ino` in the page cache, from the map
 * (mincore), and the number of pages looked at in *total. */
static size_t resident(MDB_txn *t, uint64_t ino, uint64_t n, size_t *total)
{
	const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t in = 0;
	*total = 0;
	for (uint64_t b = 0; b < n; b++) {
		unsigned char kb[16], vec;
		dbfs_put_be64(kb, ino);
		dbfs_put_be64(kb + 8, b);
		MDB_val k = {16, kb}, v;
		ck_assert_int_eq(mdb_get(t, fs->db_data, &k, &v), 0);
		uintptr_t a = (uintptr_t)v.mv_data & ~(ps - 1);
		ck_assert_int_eq(mincore((void *)a, ps, &vec), 0);
		in += vec & 1;
		(*total)++;
	}
	return in;
}

/* The reclaim reads ahead what its next piece frees (dbfs_data_prefetch):
 * pages of a file's blocks that left the page cache come back without
 * anything reading them. Freeing a block reads its page: a piece found
 * them on the disk and held the writer while it read 64 MiB. Needs a
 * store on a disk (pages written, not mapped, can be dropped); on tmpfs it
 * says so and checks nothing. */
START_TEST(test_prefetch_reads_ahead)
{
	static unsigned char buf[1 << 20];
	if (fs->writemap) {
		fprintf(stderr, "test_prefetch_reads_ahead: store in memory, not checked\n");
		return;
	}
	memset(buf, 3, sizeof(buf));
	uint64_t f = mk(DBFS_ROOT_INO, "cold", S_IFREG | 0644);
	for (uint64_t off = 0; off < (4u << 20); off += sizeof(buf))
		ck_assert_int_eq(wr(f, off, buf, sizeof(buf)), 0);
	const uint64_t n = (4u << 20) / fs->block_size;
	char path[300];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fdatasync(fd), 0); /* clean pages can be dropped */
	/* no read-around: the lookups below would fault the leaves in, and
	 * with them the data pages next to them */
	ck_assert_int_eq(madvise((void *)(uintptr_t)fs->map_addr, fs->map_size, MADV_RANDOM), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	MDB_txn *t;
	size_t total;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	size_t before = resident(t, f, n, &total);
	ck_assert_msg(before * 4 < total, "%zu of %zu pages still cached after DONTNEED", before,
		      total);
	dbfs_data_prefetch(fs, t, f, 0, UINT64_MAX, false, DBFS_FREE_MAX);
	size_t now = before;
	for (int i = 0; i < 1000 && now < total; i++) { /* 10 s at most */
		usleep(10000);
		now = resident(t, f, n, &total);
	}
	dbfs_read_end(fs, t);
	madvise((void *)(uintptr_t)fs->map_addr, fs->map_size, MADV_NORMAL);
	ck_assert_msg(now == total, "%zu of %zu pages read ahead (%zu before)", now, total, before);
}
END_TEST

/* A truncate or a hole punch that frees more than one transaction may is
 * done in pieces (dbfs_op_free_piece), each freeing at most DBFS_FREE_MAX,
 * each leaving a consistent file: truncated part of the way (size at the
 * piece's start, the bytes below it intact), or with part of the hole. */
START_TEST(test_trim_in_pieces)
{
	static unsigned char buf[1 << 20], got[1 << 20];
	const uint64_t size = 2 * DBFS_FREE_MAX + (DBFS_FREE_MAX >> 1) + 12345;
	const uint64_t target = 1000, bs = fs->block_size;
	uint64_t base = usage().bytes;
	while (fs->map_size < (768u << 20))
		ck_assert_int_eq(dbfs_grow_map(fs, fs->map_size), 0);
	for (int punch = 0; punch < 2; punch++) {
		uint64_t f = mk(DBFS_ROOT_INO, punch ? "p" : "t", S_IFREG | 0644);
		for (uint64_t off = 0; off < size; off += sizeof(buf)) {
			memset(buf, (int)(off >> 20) + 1, sizeof(buf));
			size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
			ck_assert_int_eq(wr(f, off, buf, n), 0);
		}
		uint64_t end = punch ? size - 5000 : UINT64_MAX;
		struct dbfs_inode prev = iget(f);
		int more, pieces = 0;
		do {
			ck_assert_int_eq(RUN(dbfs_op_free_piece(fs, txn, f, target, end, &more)), 0);
			struct dbfs_inode in = iget(f);
			ck_assert_uint_le(prev.alloc - in.alloc, DBFS_FREE_MAX);
			if (more) {
				pieces++;
				ck_assert_uint_lt(in.alloc, prev.alloc);
				ck_assert_uint_eq(in.size, punch ? size : in.size);
				if (!punch) {
					ck_assert_uint_lt(in.size, prev.size);
					ck_assert_uint_eq(in.size % bs, 0);
					ck_assert_uint_gt(in.size, target);
					/* the last bytes left are the file's own */
					ck_assert_uint_eq(rd(f, in.size - 10, got, 10), 10);
					ck_assert_int_eq(got[9], (int)((in.size - 1) >> 20) + 1);
				}
			} else {
				ck_assert_uint_eq(in.alloc, prev.alloc); /* nothing changed */
			}
			ck_assert_uint_eq(usage().bytes, base + in.alloc);
			prev = in;
		} while (more);
		ck_assert_int_ge(pieces, 2);
		/* what is left fits in one transaction: the operation itself */
		struct dbfs_inode out = iget(f);
		if (punch) {
			ck_assert_int_eq(RUN(dbfs_op_fallocate(fs, txn, f,
				FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, target, end - target)), 0);
		} else {
			struct stat st = {.st_size = (off_t)target};
			ck_assert_int_eq(RUN(dbfs_op_setattr(fs, txn, f, &st, DBFS_SET_SIZE, &out)), 0);
		}
		out = iget(f);
		ck_assert_uint_le(prev.alloc - out.alloc, DBFS_FREE_MAX);
		ck_assert_uint_eq(out.size, punch ? size : target);
		ck_assert_uint_eq(rd(f, 0, got, (size_t)target), target);
		ck_assert_int_eq(got[0], 1);
		ck_assert_int_eq(got[target - 1], 1);
		if (punch) {
			ck_assert_uint_eq(rd(f, target, got, 4096), 4096);
			for (int i = 0; i < 4096; i++)
				ck_assert_int_eq(got[i], 0);
			ck_assert_uint_eq(rd(f, end, got, 5000), 5000);
			ck_assert_int_eq(got[4999], (int)((size - 1) >> 20) + 1);
			ck_assert_uint_lt(out.alloc, 3 * bs + 2 * DBFS_ALLOC_UNIT);
		} else {
			ck_assert_uint_eq(out.alloc, dbfs_alloc_round(target));
		}
		ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, punch ? "p" : "t", 0)),
				 0);
	}
	ck_assert_int_eq(dbfs_reap_now(fs), 0);
	ck_assert_uint_eq(usage().bytes, base);
	/* a sparse file of a terabyte with two blocks: nothing to split */
	uint64_t f = mk(DBFS_ROOT_INO, "sparse", S_IFREG | 0644);
	ck_assert_int_eq(wr(f, 0, buf, 10), 0);
	ck_assert_int_eq(wr(f, 1ull << 40, buf, 10), 0);
	int more = 1;
	ck_assert_int_eq(RUN(dbfs_op_free_piece(fs, txn, f, 0, UINT64_MAX, &more)), 0);
	ck_assert_int_eq(more, 0);
	ck_assert_int_eq(RUN(dbfs_op_free_piece(fs, txn, f, 5, 1ull << 40, &more)), 0);
	ck_assert_int_eq(more, 0);
}
END_TEST

/* Several partial writes of small files in one transaction: their blocks
 * share leaf pages, which the puts rewrite while old bytes are read. */
START_TEST(test_small_writes_one_txn)
{
	uint64_t f[8];
	char name[8], got[64], want[64];
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		f[i] = mk(DBFS_ROOT_INO, name, S_IFREG | 0644);
		memset(want, 'a' + i, 40);
		ck_assert_int_eq(wr(f[i], 0, want, 40), 0);
	}
	MDB_txn *txn = txn_begin();
	fs->txn_gen++; /* a new transaction, as the batch leader counts them */
	size_t len = 40;
	for (int round = 0; round < 3; round++, len += 3)
		for (int i = 0; i < 8; i++)
			ck_assert_int_eq(dbfs_op_write(fs, txn, f[i], len - 2, "XYZ01", 5, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	for (int i = 0; i < 8; i++) {
		memset(want, 'a' + i, 40);
		for (int round = 0; round < 3; round++)
			memcpy(want + 38 + round * 3, "XYZ01", 5);
		ck_assert_uint_eq(rd(f[i], 0, got, sizeof(got)), len);
		ck_assert_msg(!memcmp(got, want, len), "file %d: %.49s", i, got);
	}
}
END_TEST

START_TEST(test_copy_range)
{
	uint64_t a = mk(DBFS_ROOT_INO, "a", S_IFREG | 0644);
	uint64_t b = mk(DBFS_ROOT_INO, "b", S_IFREG | 0644);
	static unsigned char buf[200000], got[200000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i % 251);
	ck_assert_int_eq(wr(a, 0, buf, sizeof(buf)), 0);
	size_t copied;
	ck_assert_int_eq(RUN(dbfs_op_copy_range(fs, txn, a, 1000, b, 5, 150000, &copied)), 0);
	ck_assert_uint_eq(copied, 150000);
	ck_assert_uint_eq(rd(b, 0, got, sizeof(got)), 150005);
	ck_assert(!memcmp(got + 5, buf + 1000, 150000));
	/* Overlapping ranges in one file are refused. */
	ck_assert_int_eq(RUN(dbfs_op_copy_range(fs, txn, a, 0, a, 10, 100, &copied)), -EINVAL);
	/* Past the end copies nothing. */
	ck_assert_int_eq(RUN(dbfs_op_copy_range(fs, txn, a, 300000, b, 0, 100, &copied)), 0);
	ck_assert_uint_eq(copied, 0);
}
END_TEST

/* ---- xattrs and ACLs ---- */

START_TEST(test_xattr)
{
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	static char big[DBFS_XATTR_MAX + 1];
	MDB_val v;
	MDB_txn *t;
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "user.a", "1", 1, XATTR_REPLACE)),
			 -ENODATA);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "user.a", "1", 1, XATTR_CREATE)), 0);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "user.a", "2", 1, XATTR_CREATE)),
			 -EEXIST);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "user.a", "22", 2, XATTR_REPLACE)), 0);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "trusted.t", "x", 1, 0)), 0);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "user.big", big, DBFS_XATTR_MAX, 0)), 0);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "user.big", big, DBFS_XATTR_MAX + 1, 0)),
			 -E2BIG);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "bogus.a", "1", 1, 0)), -EOPNOTSUPP);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, "system.other", "1", 1, 0)),
			 -EOPNOTSUPP);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, f, "user.a", &v), 0);
	ck_assert_uint_eq(v.mv_size, 2);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, f, "user.none", &v), -ENODATA);
	char list[100];
	size_t need;
	ck_assert_int_eq(dbfs_xattr_list(fs, t, f, list, sizeof(list), &need, 1), 0);
	ck_assert_uint_eq(need, sizeof("trusted.t") + sizeof("user.a") + sizeof("user.big"));
	ck_assert_int_eq(dbfs_xattr_list(fs, t, f, list, sizeof(list), &need, 0), 0);
	ck_assert_uint_eq(need, sizeof("user.a") + sizeof("user.big"));
	ck_assert_int_eq(dbfs_xattr_list(fs, t, f, list, 3, &need, 1), -ERANGE);
	dbfs_read_end(fs, t);
	ck_assert_int_eq(RUN(dbfs_op_removexattr(fs, txn, f, "user.a")), 0);
	ck_assert_int_eq(RUN(dbfs_op_removexattr(fs, txn, f, "user.a")), -ENODATA);
	/* user.* is refused on special files. */
	uint64_t p = mk(DBFS_ROOT_INO, "p", S_IFIFO | 0644);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, p, "user.a", "1", 1, 0)), -EPERM);
	/* Unlinking drops them. */
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "f", 0)), 0);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, f, "user.big", &v), -ENODATA);
	dbfs_read_end(fs, t);
}
END_TEST

static size_t acl(unsigned char *b, const uint16_t (*e)[3], int n)
{
	uint32_t ver = 2;
	memcpy(b, &ver, 4);
	for (int i = 0; i < n; i++) {
		uint16_t tag = e[i][0], perm = e[i][1];
		uint32_t id = e[i][2];
		memcpy(b + 4 + i * 8, &tag, 2);
		memcpy(b + 6 + i * 8, &perm, 2);
		memcpy(b + 8 + i * 8, &id, 4);
	}
	return 4 + (size_t)n * 8;
}

START_TEST(test_acl)
{
	uint64_t d = mk(DBFS_ROOT_INO, "d", S_IFDIR | 0755);
	unsigned char b[128];
	const uint16_t ent[][3] = {{1, 7, 0}, {2, 6, 1234}, {4, 5, 0}, {0x10, 5, 0}, {0x20, 0, 0}};
	size_t len = acl(b, ent, 5);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, d, DBFS_ACL_DEFAULT, b, len, 0)), 0);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, d, DBFS_ACL_ACCESS, b, len, 0)), 0);
	ck_assert_uint_eq(iget(d).mode & 0777, 0750);
	/* A new file inherits the default ACL; the umask is not applied. */
	uint64_t f = mk(d, "f", S_IFREG | 0666);
	ck_assert_uint_eq(iget(f).mode & 0777, 0640);
	MDB_txn *t;
	MDB_val v;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, f, DBFS_ACL_ACCESS, &v), 0);
	ck_assert_uint_eq(v.mv_size, len);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, f, DBFS_ACL_DEFAULT, &v), -ENODATA);
	dbfs_read_end(fs, t);
	uint64_t sub = mk(d, "sub", S_IFDIR | 0777);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, sub, DBFS_ACL_DEFAULT, &v), 0);
	dbfs_read_end(fs, t);
	/* chmod rewrites the mask entry. */
	struct stat st = {.st_mode = 0700};
	struct dbfs_inode in;
	ck_assert_int_eq(RUN(dbfs_op_setattr(fs, txn, f, &st, DBFS_SET_MODE, &in)), 0);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_xattr_get(fs, t, f, DBFS_ACL_ACCESS, &v), 0);
	uint16_t mask_perm;
	memcpy(&mask_perm, (char *)v.mv_data + 4 + 3 * 8 + 2, 2);
	ck_assert_uint_eq(mask_perm, 0);
	dbfs_read_end(fs, t);
	/* Malformed ACLs are refused. */
	const uint16_t bad[][3] = {{1, 7, 0}, {2, 6, 1234}, {4, 5, 0}, {0x20, 0, 0}};
	len = acl(b, bad, 4);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, DBFS_ACL_ACCESS, b, len, 0)), -EINVAL);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, DBFS_ACL_ACCESS, b, 5, 0)), -EINVAL);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, f, DBFS_ACL_DEFAULT, b, 4, 0)), -EACCES);
}
END_TEST

/* ---- life cycle of unlinked inodes, quotas, map growth ---- */

START_TEST(test_orphans)
{
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	ck_assert_int_eq(wr(f, 0, "data", 4), 0);
	ck_assert_int_eq(dbfs_lookups_ref(&fs->lookups, f, 1), 0); /* open in the kernel */
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "f", 0)), 0);
	struct dbfs_inode in = iget(f); /* still readable */
	ck_assert_uint_eq(in.nlink, 0);
	ck_assert_uint_eq(usage().inodes, 2);
	/* The daemon dies: reopening reclaims it. */
	dbfs_close(fs);
	open_store();
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), -ENOENT);
	dbfs_read_end(fs, t);
	ck_assert_uint_eq(usage().inodes, 1);
	ck_assert_uint_eq(usage().bytes, 0);

	/* Forget after unlink reaps. */
	f = mk(DBFS_ROOT_INO, "g", S_IFREG | 0644);
	ck_assert_int_eq(dbfs_lookups_ref(&fs->lookups, f, 2), 0);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "g", 0)), 0);
	ck_assert_int_eq(RUN(dbfs_op_reap(fs, txn, f)), 0);
	iget(f); /* still referenced */
	ck_assert_uint_eq(dbfs_lookups_unref(&fs->lookups, f, 2), 0);
	ck_assert_int_eq(RUN(dbfs_op_reap(fs, txn, f)), 0);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), -ENOENT);
	dbfs_read_end(fs, t);

	/* Queued reaps ride on the next write batch; a linked inode stays. */
	uint64_t a = mk(DBFS_ROOT_INO, "a", S_IFREG | 0644);
	uint64_t b = mk(DBFS_ROOT_INO, "b", S_IFREG | 0644);
	ck_assert_int_eq(dbfs_lookups_ref(&fs->lookups, a, 1), 0);
	ck_assert_int_eq(wr(a, 0, "xyz", 3), 0);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "a", 0)), 0);
	ck_assert_uint_eq(dbfs_lookups_unref(&fs->lookups, a, 1), 0);
	dbfs_reap_later(fs, a);
	dbfs_reap_later(fs, b);
	iget(a); /* not yet */
	ck_assert_int_eq(dbfs_tick(fs), 0);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, a, &in), -ENOENT);
	dbfs_read_end(fs, t);
	ck_assert_uint_eq(iget(b).nlink, 1);
	ck_assert_uint_eq(usage().bytes, 0);
}
END_TEST

START_TEST(test_quota)
{
	uint64_t ino;
	struct dbfs_inode in;
	dbfs_set_quota(fs, 200000, 3);
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	mk(DBFS_ROOT_INO, "g", S_IFREG | 0644);
	ck_assert_int_eq(RUN(dbfs_op_mknod(fs, txn, &cred, DBFS_ROOT_INO, "h", S_IFREG | 0644, 0,
					   NULL, &ino, &in)), -EDQUOT);
	static char buf[300000];
	ck_assert_int_eq(wr(f, 0, buf, 150000), 0);
	ck_assert_int_eq(wr(f, 150000, buf, 100000), -EDQUOT);
	ck_assert_uint_eq(iget(f).size, 150000);
	/* Overwriting allocated bytes needs no new space. */
	ck_assert_int_eq(wr(f, 0, buf, 100000), 0);
	dbfs_set_quota(fs, 0, 0);
	ck_assert_int_eq(wr(f, 150000, buf, 100000), 0);
}
END_TEST

struct wa {
	uint64_t ino, off;
	const void *buf;
	size_t len;
};

static int write_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	struct wa *w = arg;
	return dbfs_op_write(f, txn, w->ino, w->off, w->buf, w->len, 0);
}

START_TEST(test_map_grows_commit)
{
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	static char buf[1 << 20], got[1 << 20];
	uint64_t before = fs->map_size;
	for (int i = 0; i < 24; i++) {
		memset(buf, 'a' + i, sizeof(buf));
		struct wa w = {f, (uint64_t)i << 20, buf, sizeof(buf)};
		ck_assert_int_eq(dbfs_write(fs, write_fn, &w), 0);
	}
	ck_assert_uint_gt(fs->map_size, before);
	ck_assert_uint_gt(fs->cnt.map_grows, 0);
	for (int i = 0; i < 24; i++) {
		ck_assert_uint_eq(rd(f, (uint64_t)i << 20, got, sizeof(got)), sizeof(got));
		ck_assert(got[0] == 'a' + i && got[sizeof(got) - 1] == 'a' + i);
	}
}
END_TEST

/* ---- fault injection: a failing LMDB call at each step ---- */

typedef int (*scenario_fn)(MDB_txn *txn);
static uint64_t s_dir, s_file, s_other;

static void scenario_setup(void)
{
	static char buf[150000];
	memset(buf, 'z', sizeof(buf));
	s_dir = mk(DBFS_ROOT_INO, "dir", S_IFDIR | 0755);
	s_file = mk(s_dir, "file", S_IFREG | 0644);
	s_other = mk(DBFS_ROOT_INO, "other", S_IFREG | 0644);
	ck_assert_int_eq(wr(s_file, 0, buf, sizeof(buf)), 0);
	ck_assert_int_eq(wr(s_other, 0, buf, 1000), 0);
	ck_assert_int_eq(RUN(dbfs_op_setxattr(fs, txn, s_other, "user.k", "v", 1, 0)), 0);
}

static int sc_mknod(MDB_txn *txn)
{
	uint64_t ino;
	struct dbfs_inode in;
	return dbfs_op_mknod(fs, txn, &cred, s_dir, "new", S_IFDIR | 0755, 0, NULL, &ino, &in);
}

static int sc_rename_over(MDB_txn *txn)
{
	return dbfs_op_rename(fs, txn, s_dir, "file", DBFS_ROOT_INO, "other", 0);
}

static int sc_exchange(MDB_txn *txn)
{
	return dbfs_op_rename(fs, txn, DBFS_ROOT_INO, "dir", DBFS_ROOT_INO, "other",
			      RENAME_EXCHANGE);
}

static int sc_unlink(MDB_txn *txn)
{
	return dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "other", 0);
}

static int sc_write(MDB_txn *txn)
{
	static char buf[200000];
	return dbfs_op_write(fs, txn, s_file, 30000, buf, sizeof(buf), 0);
}

static int sc_truncate(MDB_txn *txn)
{
	struct stat st = {.st_size = 1000};
	struct dbfs_inode in;
	return dbfs_op_setattr(fs, txn, s_file, &st, DBFS_SET_SIZE, &in);
}

static int sc_link(MDB_txn *txn)
{
	struct dbfs_inode in;
	return dbfs_op_link(fs, txn, s_file, DBFS_ROOT_INO, "hard", &in);
}

static const struct {
	const char *name;
	scenario_fn fn;
} scenarios[] = {
	{"mknod", sc_mknod},     {"rename over", sc_rename_over}, {"exchange", sc_exchange},
	{"unlink", sc_unlink},   {"write", sc_write},             {"truncate", sc_truncate},
	{"link", sc_link},
};

START_TEST(test_fault_injection)
{
	const char *name = scenarios[_i].name;
	scenario_setup();
	int steps = 0;
	for (long n = 1; n < 10000; n++) {
		uint64_t before = store_hash();
		MDB_txn *txn = txn_begin();
		dbfs_fail_countdown = n;
		int rc = scenarios[_i].fn(txn);
		long left = dbfs_fail_countdown;
		dbfs_fail_countdown = 0;
		if (rc == 0 && left > 0) {
			/* Ran to completion before the Nth call. */
			ck_assert_int_eq(mdb_txn_commit(txn), 0);
			ck_assert_msg(store_hash() != before, "%s changed nothing", name);
			break;
		}
		mdb_txn_abort(txn);
		ck_assert_msg(dbfs_errno(rc) == -EIO, "%s: step %ld returned %d", name, n, rc);
		ck_assert_msg(store_hash() == before, "%s: step %ld left a change", name, n);
		steps++;
	}
	ck_assert_msg(steps >= 3, "%s: only %d injected steps", name, steps);
}
END_TEST

/* ---- the error convention (internal.h) ---- */

START_TEST(test_errno_boundary)
{
	ck_assert_int_eq(dbfs_errno(0), 0);
	ck_assert_int_eq(dbfs_errno(-ENOENT), -ENOENT);
	ck_assert_int_eq(dbfs_errno(-EDQUOT), -EDQUOT);
	ck_assert_int_eq(dbfs_errno(MDB_NOTFOUND), -ENOENT);
	ck_assert_int_eq(dbfs_errno(MDB_KEYEXIST), -EEXIST);
	ck_assert_int_eq(dbfs_errno(MDB_MAP_FULL), -ENOSPC);
	ck_assert_int_eq(dbfs_errno(MDB_CORRUPTED), -EIO);
	ck_assert_int_eq(dbfs_errno(EIO), -EIO);
	ck_assert_int_eq(dbfs_errno(ENOSPC), -ENOSPC);
	ck_assert_int_eq(dbfs_errno(dbfs_queue_err(EAGAIN)), -EAGAIN);
	ck_assert_int_eq(dbfs_errno(dbfs_queue_err(ENOMEM)), -ENOMEM);
	ck_assert_int_eq(dbfs_queue_err(0), 0);

	ck_assert(dbfs_is_refusal(-ENOENT) && dbfs_is_refusal(-4095));
	ck_assert(!dbfs_is_refusal(0) && !dbfs_is_refusal(EIO) && !dbfs_is_refusal(MDB_NOTFOUND));
	ck_assert(!dbfs_is_refusal(dbfs_queue_err(EAGAIN)));
	ck_assert(dbfs_is_queue_err(dbfs_queue_err(1)) && dbfs_is_queue_err(dbfs_queue_err(4095)));
	ck_assert(!dbfs_is_queue_err(EAGAIN) && !dbfs_is_queue_err(-EAGAIN));
	ck_assert(!dbfs_is_queue_err(MDB_NOTFOUND) && !dbfs_is_queue_err(MDB_LAST_ERRCODE));
	ck_assert_int_eq(dbfs_queue_errno(dbfs_queue_err(EAGAIN)), EAGAIN);
}
END_TEST

/* A write operation that makes a file, then fails with a queue error
 * `fails` times, as an enqueue in the same transaction would. */
struct queue_op {
	const char *name;
	int err, fails, calls;
};

static int queue_op_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	struct queue_op *q = arg;
	struct dbfs_inode in;
	uint64_t ino;
	q->calls++;
	int rc = dbfs_op_mknod(f, txn, &cred, DBFS_ROOT_INO, q->name, S_IFREG | 0644, 0, NULL, &ino,
			       &in);
	if (rc)
		return rc;
	if (q->fails) {
		q->fails--;
		return dbfs_queue_err(q->err);
	}
	return 0;
}

static int exists(const char *name)
{
	struct dbfs_inode in;
	uint64_t ino;
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	int rc = dbfs_op_lookup(fs, t, DBFS_ROOT_INO, name, &ino, &in);
	dbfs_read_end(fs, t);
	ck_assert(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

START_TEST(test_queue_error_in_batch)
{
	/* EAGAIN from the queue: the batch runs again; what the failed runs
	 * wrote is gone, what the last run wrote is committed once. */
	struct queue_op a = {"again", EAGAIN, 2, 0};
	ck_assert_int_eq(dbfs_write(fs, queue_op_fn, &a), 0);
	ck_assert_int_eq(a.calls, 3);
	ck_assert(exists("again"));

	/* Another queue error is not retried and changes nothing. */
	struct queue_op b = {"nomem", ENOMEM, 1, 0};
	int rc = dbfs_write(fs, queue_op_fn, &b);
	ck_assert_int_eq(dbfs_errno(rc), -ENOMEM);
	ck_assert_int_eq(b.calls, 1);
	ck_assert(!exists("nomem"));

	/* EAGAIN for ever: bounded, then -EAGAIN, and nothing committed. */
	struct queue_op c = {"never", EAGAIN, 1000, 0};
	rc = dbfs_write(fs, queue_op_fn, &c);
	ck_assert_int_eq(dbfs_errno(rc), -EAGAIN);
	ck_assert_int_gt(c.calls, 1);
	ck_assert_int_lt(c.calls, 1000);
	ck_assert(!exists("never"));
}
END_TEST

/* The names in directory `d`, sorted, comma-separated ("" when empty). */
static const char *listing(const char *d)
{
	static char out[1024];
	struct dirent **names;
	int n = scandir(d, &names, NULL, alphasort);
	ck_assert_int_ge(n, 0);
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
			if (out[0])
				strcat(out, ",");
			strcat(out, names[i]->d_name);
		}
		free(names[i]);
	}
	free(names);
	return out;
}

/* issue 15 point 7: a refused or failed open leaves nothing behind. */
START_TEST(test_refused_open_leaves_nothing)
{
	struct dbfs *other = NULL;
	struct dbfs_options o;
	char err[256], d2[300], p[400];
	snprintf(d2, sizeof(d2), "%s/plain", dir);
	ck_assert_int_eq(mkdir(d2, 0700), 0);

	/* A plain directory, no create: read-write and read-only. */
	dbfs_options_init(&o);
	ck_assert_int_eq(dbfs_open(d2, &o, &other, err, sizeof(err)), -ENOENT);
	ck_assert_str_eq(listing(d2), "");
	o.read_only = true;
	ck_assert_int_eq(dbfs_open(d2, &o, &other, err, sizeof(err)), -ENOENT);
	ck_assert_str_eq(listing(d2), "");

	/* One that holds something else. */
	snprintf(p, sizeof(p), "%s/keep", d2);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	dbfs_options_init(&o);
	ck_assert_int_eq(dbfs_open(d2, &o, &other, err, sizeof(err)), -ENOENT);
	ck_assert_str_eq(listing(d2), "keep");
	ck_assert_int_eq(unlink(p), 0);

	/* A create that fails after LMDB made its files (a map no machine
	 * has), with and without MDB_WRITEMAP. */
	for (int wm = 0; wm < 2; wm++) {
		dbfs_options_init(&o);
		o.create = true;
		o.writemap = wm;
		o.initial_map_size = 16000000ull << 40;
		int rc = dbfs_open(d2, &o, &other, err, sizeof(err));
		ck_assert_msg(rc < 0, "writemap=%d: open of a 16000000T map succeeded", wm);
		ck_assert_msg(!strcmp(listing(d2), ""), "writemap=%d: left %s (%s)", wm,
			      listing(d2), err);
	}

	/* A damaged store: refused, and its file is all that is left, as it
	 * was. */
	snprintf(p, sizeof(p), "%s/data.mdb", d2);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	char junk[16384];
	memset(junk, 0xa5, sizeof(junk));
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	for (int wm = 0; wm < 2; wm++) {
		dbfs_options_init(&o);
		o.create = true;
		o.writemap = wm;
		ck_assert_int_eq(dbfs_open(d2, &o, &other, err, sizeof(err)), -EINVAL);
		ck_assert_str_eq(listing(d2), "data.mdb");
		struct stat sb;
		ck_assert_int_eq(stat(p, &sb), 0);
		ck_assert_int_eq(sb.st_size, (off_t)sizeof(junk));
	}
	ck_assert_ptr_null(other);
}
END_TEST

/* The lock file of a store that opened stays (only what a failed open
 * made goes), and a second open of it is refused without removing it. */
START_TEST(test_open_keeps_lock_of_store)
{
	struct dbfs *other;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	ck_assert_int_eq(dbfs_open(dir, &o, &other, err, sizeof(err)), -EBUSY);
	ck_assert_str_eq(listing(dir), STORE_FILES);
	dbfs_close(fs);
	fs = NULL;
	ck_assert_str_eq(listing(dir), STORE_FILES);
	open_store();
}
END_TEST

/* ---- a full disk (issue 15 point 9) ---- */

static uint64_t avail_blocks(void)
{
	struct statvfs s;
	ck_assert_int_eq(dbfs_statfs(fs, &s), 0);
	return s.f_bavail;
}

struct small {
	const char *name;
	uint64_t ino;
};

static int small_create_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	struct small *sm = arg;
	struct dbfs_inode in;
	return dbfs_op_mknod(f, txn, &cred, DBFS_ROOT_INO, sm->name, S_IFREG | 0644, 0, NULL,
			     &sm->ino, &in);
}

/* Make a 2-byte file through the write path, as the FUSE adapter would;
 * returns the first error. */
static int small_file(const char *name)
{
	struct small sm = {name, 0};
	int rc = dbfs_write(fs, small_create_fn, &sm);
	if (rc)
		return rc;
	struct wa w = {sm.ino, 0, "xy", 2};
	return dbfs_write(fs, write_fn, &w);
}

/* Write 1 MiB pieces of `ino` from `off` on until a write fails (at most
 * `max` pieces); returns that write's result. */
static int fill(uint64_t ino, uint64_t off, int max)
{
	static char buf[1 << 20];
	memset(buf, 'f', sizeof(buf));
	for (int i = 0; i < max; i++) {
		struct wa w = {ino, off + ((uint64_t)i << 20), buf, sizeof(buf)};
		int rc = dbfs_write(fs, write_fn, &w);
		if (rc)
			return rc;
	}
	return 0;
}

/* statfs's f_bavail is the truth: a write gets ENOSPC exactly when it is 0. */
static void check_avail_truth(const char *name)
{
	uint64_t a = avail_blocks();
	int rc = small_file(name);
	ck_assert_msg(rc == 0 || rc == -ENOSPC, "%s: %d", name, rc);
	ck_assert_msg((rc == 0) == (a > 0), "%s: create %s with %llu blocks available", name,
		      rc ? "refused" : "made", (unsigned long long)a);
}

/* Each commit's free-list record is read (statfs's "freed by the newest
 * commit", which the next transaction cannot reuse): the records of every
 * commit add up to the whole list. mdb_get on the free list is EINVAL in
 * LMDB 0.9, which made them all read as 0. */
START_TEST(test_free_pages_of)
{
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	ck_assert_int_eq(fill(f, 0, 4), 0);
	ck_assert_int_eq(fill(f, 0, 4), 0); /* the old blocks and pages go */
	MDB_txn *t;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	uint64_t sum = 0, listed = dbfs_free_pages_listed(t);
	for (size_t id = 1; id <= mdb_txn_id(t); id++)
		sum += dbfs_free_pages_of(t, id);
	dbfs_read_end(fs, t);
	ck_assert_uint_gt(listed, 0);
	ck_assert_uint_eq(sum, listed);
}
END_TEST

START_TEST(test_full_disk)
{
	uint64_t big = mk(DBFS_ROOT_INO, "big", S_IFREG | 0644);
	ck_assert_int_eq(fill(big, 0, 4), 0);
	dbfs_fault_disk_full = true; /* from now on the store cannot grow */
	ck_assert_int_eq(fill(big, 4 << 20, 256), -ENOSPC);
	ck_assert_uint_eq(avail_blocks(), 0);
	check_avail_truth("refused");

	/* Delete the file as the kernel does (unlink, then forget): the
	 * next create gets its room at once. */
	ck_assert_int_eq(dbfs_lookups_ref(&fs->lookups, big, 1), 0);
	ck_assert_int_eq(RUN(dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "big", 0)), 0);
	ck_assert_uint_eq(dbfs_lookups_unref(&fs->lookups, big, 1), 0);
	dbfs_reap_later(fs, big);
	ck_assert_uint_gt(avail_blocks(), 0);
	ck_assert_int_eq(small_file("after-delete"), 0);

	/* Fill again, then rewrite the file in place: statfs stays true. */
	uint64_t f = mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	ck_assert_int_eq(fill(f, 0, 256), -ENOSPC);
	check_avail_truth("full");
	char name[32];
	for (int round = 0; round < 8; round++) {
		fill(f, 0, 4);
		snprintf(name, sizeof(name), "rewrite%d", round);
		check_avail_truth(name);
	}
	dbfs_fault_disk_full = false;
}
END_TEST

/* A new store's root belongs to the file-system ids of the thread that made
 * it (a daemon acting for a caller, or a daemon that is not root). */
START_TEST(test_root_owner_is_maker)
{
	char d2[300], err[256];
	struct dbfs_options o;
	struct dbfs *other;
	struct dbfs_inode in;
	snprintf(d2, sizeof(d2), "%s/mine", dir);
	ck_assert_int_eq(chmod(dir, 0755), 0); /* mkdtemp made it 0700 */
	ck_assert_int_eq(mkdir(d2, 0777), 0);
	ck_assert_int_eq(chmod(d2, 0777), 0);
	dbfs_options_init(&o);
	o.create = true;
	o.initial_map_size = 8 << 20;
	uid_t uid = geteuid() == 0 ? 65534 : geteuid();
	gid_t gid = geteuid() == 0 ? 65534 : getegid();
	setfsgid(gid);
	setfsuid(uid);
	int rc = dbfs_open(d2, &o, &other, err, sizeof(err));
	setfsuid(geteuid());
	setfsgid(getegid());
	ck_assert_msg(rc == 0, "dbfs_open: %d %s", rc, err);
	MDB_txn *t;
	ck_assert_int_eq(mdb_txn_begin(other->env, NULL, MDB_RDONLY, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(other, t, DBFS_ROOT_INO, &in), 0);
	mdb_txn_abort(t);
	dbfs_close(other);
	ck_assert_uint_eq(in.uid, uid);
	ck_assert_uint_eq(in.gid, gid);
}
END_TEST


/* ---- durable points (dbfs/durable.c) ---- */

struct mk_ctx {
	const char *name;
	uint64_t ino;
};

static int mk_fn(struct dbfs *f, MDB_txn *t, void *arg)
{
	struct mk_ctx *c = arg;
	struct dbfs_inode in;
	return dbfs_op_mknod(f, t, &cred, DBFS_ROOT_INO, c->name, S_IFREG | 0644, 0, NULL, &c->ino,
			     &in);
}

/* Through the group commit, as the FUSE handlers do. */
static void mk_committed(const char *name)
{
	struct mk_ctx c = {name, 0};
	ck_assert_int_eq(dbfs_write(fs, mk_fn, &c), 0);
}

static void copy_file(const char *from_dir, const char *to_dir, const char *name)
{
	char a[400], b[400];
	static char buf[1 << 16];
	snprintf(a, sizeof(a), "%s/%s", from_dir, name);
	snprintf(b, sizeof(b), "%s/%s", to_dir, name);
	int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	ssize_t n;
	off_t off = 0;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		static const char zero[sizeof(buf)];
		if (memcmp(buf, zero, (size_t)n))
			ck_assert_int_eq(pwrite(out, buf, (size_t)n, off), n);
		off += n;
	}
	ck_assert_int_eq(ftruncate(out, off), 0);
	close(in);
	close(out);
}

/* A copy of the store's files as the page cache holds them now, made
 * while the store is open: what a disk would hold if every dirty page
 * had been written back and then the power failed. */
static void snapshot_store(const char *to)
{
	ck_assert_int_eq(mkdir(to, 0700), 0);
	copy_file(dir, to, "data.mdb");
	copy_file(dir, to, DBFS_DREC_FILE);
	char p[400];
	snprintf(p, sizeof(p), "%s/" DBFS_ILOG_FILE, dir);
	if (access(p, F_OK) == 0) /* imaged points were made */
		copy_file(dir, to, DBFS_ILOG_FILE);
}

static int lookup_in(struct dbfs *f, const char *name)
{
	MDB_txn *t;
	uint64_t ino;
	struct dbfs_inode in;
	ck_assert_int_eq(dbfs_read_begin(f, &t), 0);
	int rc = dbfs_op_lookup(f, t, DBFS_ROOT_INO, name, &ino, &in);
	dbfs_read_end(f, t);
	return rc;
}

/* After a reboot the store opens at its last durable point; within one
 * boot (a process crash) it keeps everything. Fails without the recovery
 * (dbfs_durable_recover): the newest meta then names pages that LMDB has
 * since reused or never flushed. */
START_TEST(test_durable_point_after_reboot)
{
	struct dbfs_counters c0, c1;
	dbfs_counters(fs, &c0);
	mk_committed("synced");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes + 1);
	ck_assert_int_eq(dbfs_sync(fs), 0); /* nothing new: no flush */
	dbfs_counters(fs, &c0);
	ck_assert_uint_eq(c0.flushes, c1.flushes);
	ck_assert_uint_eq(c0.unsynced_age_ms, 0);
	for (int i = 0; i < 20; i++) {
		char n[32];
		snprintf(n, sizeof(n), "later%d", i);
		mk_committed(n);
	}
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes); /* commits flush nothing */

	char same[300], reboot[300];
	snprintf(same, sizeof(same), "%s/same", dir);
	snprintf(reboot, sizeof(reboot), "%s/reboot", dir);
	snapshot_store(same);
	snapshot_store(reboot);

	struct dbfs *f;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	ck_assert_int_eq(dbfs_open(same, &o, &f, err, sizeof(err)), 0);
	ck_assert_int_eq(lookup_in(f, "synced"), 0);
	ck_assert_int_eq(lookup_in(f, "later19"), 0);
	dbfs_close(f);

	dbfs_boot_id_override = "another-boot";
	int rc = dbfs_open(reboot, &o, &f, err, sizeof(err));
	dbfs_boot_id_override = NULL;
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(lookup_in(f, "synced"), 0);
	ck_assert_int_eq(lookup_in(f, "later0"), -ENOENT);
	dbfs_close(f);
}
END_TEST

/* Set the format version in the superblock of the closed store in d;
 * returns the version it had. */
static uint32_t set_format(const char *d, uint32_t version)
{
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	MDB_val k = {2, (void *)"sb"}, v;
	struct dbfs_super sb;
	ck_assert_int_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	mdb_env_set_mapsize(env, 8 << 20);
	ck_assert_int_eq(mdb_env_open(env, d, 0, 0600), 0); /* synced: as a clean close */
	ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_SUPER, 0, &dbi), 0);
	ck_assert_int_eq(mdb_get(t, dbi, &k, &v), 0);
	memcpy(&sb, v.mv_data, sizeof(sb));
	uint32_t was = sb.version;
	sb.version = version;
	v.mv_data = &sb;
	ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);
	return was;
}

/* A store of format 1 (no dbfs.durable) opens and is upgraded in place;
 * a read-only open leaves it as it is. */
START_TEST(test_upgrade_format_1)
{
	mk_committed("kept");
	dbfs_close(fs);
	fs = NULL;
	/* Make it a format-1 store, as the code before issue 16 left it. */
	ck_assert_uint_eq(set_format(dir, 1), DBFS_FORMAT_VERSION);
	char p[300];
	snprintf(p, sizeof(p), "%s/" DBFS_DREC_FILE, dir);
	ck_assert_int_eq(unlink(p), 0);

	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.read_only = true;
	ck_assert_int_eq(dbfs_open(dir, &o, &fs, err, sizeof(err)), 0);
	ck_assert_uint_eq(fs->sb_version, 1);
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "kept", &(uint64_t){0}, &(struct dbfs_inode){0}),
			 0);
	dbfs_close(fs);
	ck_assert_int_eq(access(p, F_OK), -1);

	open_store();
	ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
	ck_assert_int_eq(access(p, F_OK), 0);
	ck_assert_int_eq(lookup(DBFS_ROOT_INO, "kept", &(uint64_t){0}, &(struct dbfs_inode){0}),
			 0);
	/* The upgraded store has a durable point: a reboot keeps it all. */
	mk_committed("after");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	char reboot[300];
	snprintf(reboot, sizeof(reboot), "%s/reboot", dir);
	snapshot_store(reboot);
	struct dbfs *f;
	o.read_only = false;
	dbfs_boot_id_override = "another-boot";
	int rc = dbfs_open(reboot, &o, &f, err, sizeof(err));
	dbfs_boot_id_override = NULL;
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(lookup_in(f, "kept"), 0);
	ck_assert_int_eq(lookup_in(f, "after"), 0);
	dbfs_close(f);
}
END_TEST

/* Reopen the test's store with listed points on, whatever /tmp is (and
 * imaged points off: they would come first). */
static void reopen_listed(void)
{
	dbfs_close(fs);
	dbfs_durable_test_listed = 1;
	dbfs_durable_test_imaged = 0;
	open_store();
}

/* The newest record of the store in d: its head, and a copy of its list. */
static struct dbfs_drec newest_record(const char *d, struct dbfs_drec_page *list, uint64_t *n)
{
	char p[400];
	struct dbfs_drec r;
	snprintf(p, sizeof(p), "%s/" DBFS_DREC_FILE, d);
	int fd = open(p, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dbfs_drec_read(fd, &r), 1);
	*n = 0;
	if (r.version == DBFS_DREC_VERSION) {
		off_t off = (off_t)(r.seq & 1) * DBFS_DREC_SLOT2 + DBFS_DREC_HEAD;
		ck_assert_int_eq(pread(fd, n, 8, off), 8);
		ck_assert_uint_le(*n, DBFS_DREC_LIST_MAX);
		ssize_t len = (ssize_t)(*n * sizeof(*list));
		ck_assert_int_eq(pread(fd, list, (size_t)len, off + 8), len);
	}
	close(fd);
	return r;
}

/* A listed point is one flush; after a reboot whose disk misses one page
 * that the newest (listed) record names, the store opens at the point
 * before, and that record is blanked so that the next one takes its slot.
 * Fails without the fallback ("names no durable point whose pages are on
 * the disk") and with the newest record trusted blindly (finds "b"). */
START_TEST(test_listed_point_falls_back)
{
	static struct dbfs_drec_page list[DBFS_DREC_LIST_MAX];
	struct dbfs_counters c0, c1;
	reopen_listed();
	mk_committed("a");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	mk_committed("b");
	dbfs_counters(fs, &c0);
	ck_assert_int_eq(dbfs_sync(fs), 0);
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes + 1);
	ck_assert_uint_eq(c1.flushes_listed, c0.flushes_listed + 1);

	char whole[300], torn[300];
	snprintf(whole, sizeof(whole), "%s/whole", dir);
	snprintf(torn, sizeof(torn), "%s/torn", dir);
	snapshot_store(whole);
	snapshot_store(torn);
	uint64_t n;
	struct dbfs_drec r = newest_record(torn, list, &n);
	ck_assert_uint_ne(r.flags & DBFS_DREC_LISTED, 0);
	ck_assert_uint_gt(n, 0);
	char p[400];
	snprintf(p, sizeof(p), "%s/data.mdb", torn);
	int fd = open(p, O_RDWR);
	ck_assert_int_ge(fd, 0);
	static const char zero[4096];
	ck_assert_int_eq(pwrite(fd, zero, r.psize, (off_t)(list[n - 1].pgno * r.psize)),
			 (ssize_t)r.psize);
	close(fd);

	struct dbfs *f;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	dbfs_boot_id_override = "another-boot";
	int rc = dbfs_open(whole, &o, &f, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(lookup_in(f, "b"), 0);
	dbfs_close(f);
	unsigned long fell = dbfs_recover_fallbacks;
	int restored;
	ck_assert_int_eq(dbfs_durable_recover(torn, true, &restored, err, sizeof(err)), -EROFS);
	ck_assert_int_eq(dbfs_durable_recover(torn, false, &restored, err, sizeof(err)), 0);
	ck_assert_uint_eq(dbfs_recover_fallbacks, fell + 2);
	/* The record found wanting is blanked: the older one rules now. */
	struct dbfs_drec after = newest_record(torn, list, &n);
	ck_assert_uint_eq(after.seq, r.seq - 1);
	rc = dbfs_open(torn, &o, &f, err, sizeof(err));
	dbfs_boot_id_override = NULL;
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(lookup_in(f, "a"), 0);
	ck_assert_int_eq(lookup_in(f, "b"), -ENOENT);
	dbfs_close(f);
	dbfs_durable_test_listed = -1;
	dbfs_durable_test_imaged = -1;
}
END_TEST

static off_t file_size(const char *d, const char *name)
{
	char p[400];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", d, name);
	ck_assert_int_eq(stat(p, &st), 0);
	return st.st_size;
}

/* Open the store copy d after a reboot: 0 or the open's error. */
static int open_rebooted(const char *d, struct dbfs **f)
{
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	dbfs_boot_id_override = "another-boot";
	int rc = dbfs_open(d, &o, f, err, sizeof(err));
	dbfs_boot_id_override = NULL;
	if (rc)
		fprintf(stderr, "open_rebooted %s: %s\n", d, err);
	return rc;
}

/* An imaged point is one flush, of dbfs.images alone: data.mdb is not
 * flushed, and after a reboot the chain of imaged points is written over
 * it. The copies hold data.mdb as the open's checkpoint left it (nothing
 * written back since) with dbfs.images whole, with a sector of its last
 * record never written (torn), or without that record's end (short): the
 * store opens at the newest whole record. A clean
 * close makes a checkpoint, after which nothing is replayed. Fails
 * without the replay ("a" missing, or the store unreadable) and with
 * torn records counted. */
START_TEST(test_imaged_points)
{
	dbfs_close(fs);
	dbfs_durable_test_listed = 0;
	open_store(); /* its record: a checkpoint (data.mdb flushed) */
	char ck[300], whole[300], torn[300], shrt[300];
	snprintf(ck, sizeof(ck), "%s/ck", dir);
	snprintf(shrt, sizeof(shrt), "%s/short", dir);
	snprintf(whole, sizeof(whole), "%s/whole", dir);
	snprintf(torn, sizeof(torn), "%s/torn", dir);
	ck_assert_int_eq(mkdir(ck, 0700), 0);
	copy_file(dir, ck, "data.mdb");

	struct dbfs_counters c0, c1;
	dbfs_counters(fs, &c0);
	mk_committed("a");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	off_t len_a = (off_t)fs->img_tail, size_a = file_size(dir, DBFS_ILOG_FILE);
	mk_committed("b");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	off_t len_b = (off_t)fs->img_tail;
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes + 2);
	ck_assert_uint_eq(c1.flushes_imaged, c0.flushes_imaged + 2);
	ck_assert_uint_eq(c1.flushes_listed, c0.flushes_listed);
	ck_assert_int_gt(len_a, 0);
	ck_assert_int_gt(len_b, len_a);
	/* The file grew ahead of the records, by a MiB of zeros: the second
	 * record overwrote them and left the file's size as it was. */
	ck_assert_int_eq(size_a % (off_t)DBFS_ILOG_GROW, 0);
	ck_assert_int_ge(size_a, len_b);
	ck_assert_int_eq(file_size(dir, DBFS_ILOG_FILE), size_a);
	mk_committed("c"); /* never made durable */

	/* whole: the checkpoint's data.mdb and the chain as written */
	ck_assert_int_eq(mkdir(whole, 0700), 0);
	copy_file(ck, whole, "data.mdb");
	copy_file(dir, whole, DBFS_DREC_FILE);
	copy_file(dir, whole, DBFS_ILOG_FILE);
	/* torn: the same, the last record cut in the middle of its images */
	ck_assert_int_eq(mkdir(torn, 0700), 0);
	copy_file(ck, torn, "data.mdb");
	copy_file(dir, torn, DBFS_DREC_FILE);
	copy_file(dir, torn, DBFS_ILOG_FILE);
	char p[400];
	snprintf(p, sizeof(p), "%s/" DBFS_ILOG_FILE, torn);
	int fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	static char junk[512];
	memset(junk, 0xa5, sizeof(junk));
	off_t mid = (len_a + (len_b - len_a) / 2) / 512 * 512;
	ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), mid), (ssize_t)sizeof(junk));
	close(fd);
	/* short: the last record's end never reached the file */
	ck_assert_int_eq(mkdir(shrt, 0700), 0);
	copy_file(ck, shrt, "data.mdb");
	copy_file(dir, shrt, DBFS_DREC_FILE);
	copy_file(dir, shrt, DBFS_ILOG_FILE);
	snprintf(p, sizeof(p), "%s/" DBFS_ILOG_FILE, shrt);
	ck_assert_int_eq(truncate(p, mid), 0);

	struct dbfs *f;
	unsigned long replayed = dbfs_recover_replayed;
	ck_assert_int_eq(open_rebooted(whole, &f), 0);
	ck_assert_uint_ge(dbfs_recover_replayed, replayed + 2);
	ck_assert_int_eq(lookup_in(f, "a"), 0);
	ck_assert_int_eq(lookup_in(f, "b"), 0);
	ck_assert_int_eq(lookup_in(f, "c"), -ENOENT);
	dbfs_close(f);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(open_rebooted(i ? shrt : torn, &f), 0);
		ck_assert_int_eq(lookup_in(f, "a"), 0);
		ck_assert_int_eq(lookup_in(f, "b"), -ENOENT);
		dbfs_close(f);
	}

	/* A clean close: a checkpoint; the next open replays nothing. */
	dbfs_counters(fs, &c0);
	dbfs_close(fs);
	fs = NULL;
	replayed = dbfs_recover_replayed;
	ck_assert_int_eq(open_rebooted(dir, &fs), 0);
	ck_assert_uint_eq(dbfs_recover_replayed, replayed);
	ck_assert_int_eq(lookup_in(fs, "c"), 0);
	dbfs_durable_test_listed = -1;
}
END_TEST

/* An imaged point whose flush of dbfs.images fails fails the sync with
 * EIO (never a success for what may not be on the disk), turns the store
 * read-only, and leaves the chain's tail where it was: the failed record's
 * place is the next one's. */
START_TEST(test_imaged_flush_fails)
{
	mk_committed("a");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	if (fs->dur_trust)
		return; /* a store in memory makes no points */
	uint64_t tail = fs->img_tail, lseq = fs->img_lseq;
	ck_assert_uint_gt(lseq, 0);
	mk_committed("b");
	dbfs_durable_fault = DBFS_FAULT_IMAGES_EIO;
	ck_assert_int_eq(dbfs_sync(fs), -EIO);
	ck_assert_int_eq(dbfs_durable_fault, 0);
	ck_assert_uint_eq(fs->img_tail, tail);
	ck_assert_uint_eq(fs->img_lseq, lseq);
	struct mk_ctx c = {"c", 0};
	ck_assert_int_eq(dbfs_write(fs, mk_fn, &c), -EROFS);
}
END_TEST

/* A store of format 6 (no imaged points: a build of 6 would not replay
 * them) is upgraded to 7 by a read-write open, and the open makes no
 * imaged point: its last point is a checkpoint, whose tree (named by
 * dbfs.durable) holds version 7, so that a build of 6 refuses the store
 * from then on; points are imaged after it. Fails if the open's points
 * are imaged (dbfs.images made, the record naming an older tree). */
START_TEST(test_upgrade_to_imaged)
{
	mk_committed("kept");
	dbfs_close(fs);
	fs = NULL;
	set_format(dir, 6);
	char p[400];
	snprintf(p, sizeof(p), "%s/" DBFS_ILOG_FILE, dir);
	unlink(p); /* a build of 6 made none */
	open_store();
	ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
	ck_assert_uint_eq(DBFS_FORMAT_VERSION, 7);
	struct dbfs_counters c0, c1;
	dbfs_counters(fs, &c0);
	ck_assert_uint_eq(c0.flushes_imaged, 0);
	ck_assert_int_eq(access(p, F_OK), -1);
	if (!fs->dur_trust) {
		/* the record names LMDB's newest commit: the upgrade's */
		uint64_t n;
		static struct dbfs_drec_page list[DBFS_DREC_LIST_MAX];
		struct dbfs_drec r = newest_record(dir, list, &n);
		MDB_envinfo info;
		mdb_env_info(fs->env, &info);
		ck_assert_uint_eq(r.txnid, info.me_last_txnid);
		mk_committed("after");
		ck_assert_int_eq(dbfs_sync(fs), 0);
		dbfs_counters(fs, &c1);
		ck_assert_uint_eq(c1.flushes_imaged, 1);
		ck_assert_int_eq(access(p, F_OK), 0);
	}
}
END_TEST

/* A listed record whose flush failed may be on the disk without its
 * pages: the next record must take its slot again, never the slot of the
 * point before, which a recovery would still need. Fails without the
 * roll-back of dur_seq (the close's point lands on the older slot). */
START_TEST(test_failed_flush_keeps_previous)
{
	static struct dbfs_drec_page list[DBFS_DREC_LIST_MAX];
	reopen_listed();
	mk_committed("a");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	uint64_t n;
	struct dbfs_drec good = newest_record(dir, list, &n);
	mk_committed("b");
	dbfs_durable_fault = DBFS_FAULT_FLUSH_AFTER_PUSH;
	ck_assert_int_eq(dbfs_sync(fs), -EIO);
	ck_assert_int_eq(dbfs_durable_fault, 0);
	/* the store is read-only now; closing it makes a last point */
	dbfs_close(fs);
	fs = NULL;
	char p[400];
	struct dbfs_drec r;
	snprintf(p, sizeof(p), "%s/" DBFS_DREC_FILE, dir);
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &r, sizeof(r), (off_t)(good.seq & 1) * DBFS_DREC_SLOT2),
			 (ssize_t)sizeof(r));
	close(fd);
	ck_assert_uint_eq(r.seq, good.seq);
	ck_assert_uint_eq(r.txnid, good.txnid);
	open_store(); /* for teardown */
	dbfs_durable_test_listed = -1;
	dbfs_durable_test_imaged = -1;
}
END_TEST

/* A store whose dbfs.durable is of version 1 (main's code before listed
 * records, format 3) recovers from it after a reboot, and its next
 * read-write open lays the file out as version 2. */
START_TEST(test_upgrade_durable_v1)
{
	static struct dbfs_drec_page list[DBFS_DREC_LIST_MAX];
	mk_committed("synced");
	ck_assert_int_eq(dbfs_sync(fs), 0);
	mk_committed("later0");
	char reboot[300], p[400];
	snprintf(reboot, sizeof(reboot), "%s/reboot", dir);
	snapshot_store(reboot);
	uint64_t n;
	struct dbfs_drec r = newest_record(reboot, list, &n);
	/* As the code before wrote it: 2 slots of 512 bytes, no list. */
	r.version = 1;
	r.flags &= ~DBFS_DREC_LISTED;
	r.sum = dbfs_drec_sum(&r);
	snprintf(p, sizeof(p), "%s/" DBFS_DREC_FILE, reboot);
	int fd = open(p, O_RDWR | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 2 * DBFS_DREC_SLOT), 0);
	ck_assert_int_eq(pwrite(fd, &r, sizeof(r), (off_t)(r.seq & 1) * DBFS_DREC_SLOT),
			 (ssize_t)sizeof(r));
	close(fd);

	struct dbfs *f;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.read_only = true;
	dbfs_boot_id_override = "another-boot";
	ck_assert_int_eq(dbfs_open(reboot, &o, &f, err, sizeof(err)), -EROFS);
	o.read_only = false;
	int rc = dbfs_open(reboot, &o, &f, err, sizeof(err));
	dbfs_boot_id_override = NULL;
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(lookup_in(f, "synced"), 0);
	ck_assert_int_eq(lookup_in(f, "later0"), -ENOENT);
	ck_assert_uint_eq(f->sb_version, DBFS_FORMAT_VERSION);
	dbfs_close(f);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_size, DBFS_DREC_FILE_SIZE);
	r = newest_record(reboot, list, &n);
	ck_assert_uint_eq(r.version, DBFS_DREC_VERSION);
}
END_TEST

/* commit_interval: dbfs_tick makes a point once the oldest change not
 * durable is that old (the clock is the test's). */
static int64_t test_ns;
static int64_t test_clock(void)
{
	return test_ns;
}

START_TEST(test_commit_interval_tick)
{
	struct dbfs_counters c0, c1;
	int64_t (*saved)(void) = dbfs_durable_clock;
	dbfs_durable_clock = test_clock;
	test_ns = 1000000000000ll;
	dbfs_set_commit_interval(fs, 5);
	ck_assert_int_eq(dbfs_sync(fs), 0);
	dbfs_counters(fs, &c0);
	mk_committed("x");
	test_ns += 3000000000ll; /* 3 s: not yet (a tick's second early is 4 s) */
	ck_assert_int_eq(dbfs_tick(fs), 0);
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes);
	ck_assert_uint_eq(c1.unsynced_age_ms, 3000);
	test_ns += 1000000000ll;
	ck_assert_int_eq(dbfs_tick(fs), 0);
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes + 1);
	ck_assert_uint_eq(c1.unsynced_age_ms, 0);
	dbfs_set_commit_interval(fs, 60); /* live */
	mk_committed("y");
	test_ns += 30000000000ll;
	ck_assert_int_eq(dbfs_tick(fs), 0);
	dbfs_counters(fs, &c0);
	ck_assert_uint_eq(c0.flushes, c1.flushes);
	dbfs_durable_clock = saved;
}
END_TEST

/* Concurrent fsyncs share one durable point: eight callers, one flush. */
static void *sync_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)dbfs_sync(fs);
}

START_TEST(test_sync_shared)
{
	struct dbfs_counters c0, c1;
	pthread_t th[8];
	mk_committed("shared");
	dbfs_counters(fs, &c0);
	ck_assert_uint_gt(c0.unsynced_age_ms + 1, 0);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, sync_thread, NULL), 0);
	for (int i = 0; i < 8; i++) {
		void *rc;
		pthread_join(th[i], &rc);
		ck_assert_int_eq((intptr_t)rc, 0);
	}
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes, c0.flushes + 1);
	ck_assert_uint_eq(c1.unsynced_bytes, 0);
}
END_TEST

static Suite *core_suite(void)
{
	Suite *s = suite_create("dbfs-core");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_reopen_and_lock);
	tcase_add_test(tc, test_ro_open_without_lock);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_meta_pages);
	tcase_add_test(tc, test_refused_open_leaves_nothing);
	tcase_add_test(tc, test_open_keeps_lock_of_store);
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_mknod_lookup_errors);
	tcase_add_test(tc, test_symlink_and_link);
	tcase_add_test(tc, test_rename);
	tcase_add_test(tc, test_data);
	tcase_add_test(tc, test_small_writes_one_txn);
	tcase_add_test(tc, test_free_pages_counted);
	tcase_add_test(tc, test_statfs_pending_reap);
	tcase_add_test(tc, test_destroy_in_pieces);
	tcase_add_test(tc, test_trim_in_pieces);
	tcase_add_test(tc, test_free_time_bound);
	tcase_add_test(tc, test_prefetch_reads_ahead);
	tcase_add_test(tc, test_copy_range);
	tcase_add_test(tc, test_xattr);
	tcase_add_test(tc, test_acl);
	tcase_add_test(tc, test_orphans);
	tcase_add_test(tc, test_quota);
	tcase_add_test(tc, test_map_grows_commit);
	tcase_add_test(tc, test_free_pages_of);
	tcase_add_test(tc, test_full_disk);
	tcase_add_test(tc, test_durable_point_after_reboot);
	tcase_add_test(tc, test_upgrade_format_1);
	tcase_add_test(tc, test_listed_point_falls_back);
	tcase_add_test(tc, test_imaged_points);
	tcase_add_test(tc, test_upgrade_to_imaged);
	tcase_add_test(tc, test_imaged_flush_fails);
	tcase_add_test(tc, test_failed_flush_keeps_previous);
	tcase_add_test(tc, test_upgrade_durable_v1);
	tcase_add_test(tc, test_commit_interval_tick);
	tcase_add_test(tc, test_sync_shared);
	tcase_add_test(tc, test_errno_boundary);
	tcase_add_test(tc, test_root_owner_is_maker);
	tcase_add_test(tc, test_queue_error_in_batch);
	tcase_add_loop_test(tc, test_fault_injection, 0,
			    (int)(sizeof(scenarios) / sizeof(scenarios[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(core_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
