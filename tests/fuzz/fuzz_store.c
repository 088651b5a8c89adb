/*
 * Fuzz target "store": dbfs_open on a damaged store, a bounded walk of its
 * tree with libdbfs's read API, a few writes, dbfs_close.
 *
 * LLVMFuzzerInitialize builds a small seed store (directories, files with
 * one and several blocks and a hole, an empty file, a symlink, a hard link,
 * xattrs) with libdbfs itself and keeps a compacted copy of its data.mdb.
 * Each input starts from that copy in a scratch directory and damages it:
 *
 *   byte 0  flags: bit 0 open read-only, bit 1 writemap=0, bit 2 no writes
 *   then    record operations (fz_mutate_records in fuzz.h) on the seven
 *           DBFS databases (super inode dirent dircook data xattr orphan),
 *           made through the LMDB API, up to an END op;
 *   then    file operations on data.mdb, each op u8 (mod 2):
 *           0 TRUNC length u32 (mod the file's size)   the file cut short
 *           1 META  page u8, field u8, byte u8, xor u8 a meta page byte
 *                   (meta_fields: flags, magic, version, map size, page
 *                   size; not the roots, txnid or last page, see there)
 *
 * What LMDB 0.9.24 (Debian 12) checks when it opens and reads a file (read
 * in mdb.c): each of the two meta pages must read whole, carry P_META, the
 * magic and the data version (else MDB_INVALID / MDB_VERSION_MISMATCH);
 * the one with the larger txnid wins, with no checksum. A page number at or
 * past the meta's last_pg is MDB_PAGE_NOTFOUND, and a B-tree search must end
 * on a leaf (MDB_CORRUPTED). Nothing else is checked: not the node offsets,
 * key sizes, overflow page counts or branch contents inside a page, nor the
 * file size against last_pg. Damage inside a B-tree page therefore makes
 * LMDB read out of bounds, loop, or trip its own asserts, in LMDB's code,
 * before ours sees a byte; this target does not damage pages. The META op
 * damages only meta fields LMDB checks or need not trust (meta_fields): it
 * proves that a refused meta page is refused cleanly, not that LMDB
 * survives a meta page pointing at the wrong pages (it does not).
 *
 * So this target proves: dbfs_open, orphan reclaim, the read paths (lookup,
 * readdir, read, readlink, xattrs, statfs, usage) and the writes it makes
 * (create, write, unlink in the root, write to a damaged file) survive
 * every record value, record length, missing or extra record, and renamed
 * key our format can hold, and a store cut short or with a damaged meta
 * page, without a crash, a sanitizer report, or a hang. It does not prove
 * anything about damage inside LMDB pages (LMDB has no page checksums) or
 * that a damaged store is reported as damaged: a walk of garbage that does
 * not crash passes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "fuzz.h"

#define WALK_INODES  64
#define WALK_ENTRIES 64

static char seed_dir[4200], work_dir[4200];
static uint8_t *seed;
static size_t seed_len;
static const char *const db_names[] = {DBFS_DB_SUPER,   DBFS_DB_INODE, DBFS_DB_DIRENT,
					DBFS_DB_DIRCOOK, DBFS_DB_DATA,  DBFS_DB_XATTR,
					DBFS_DB_ORPHAN};
#define NDBS (sizeof(db_names) / sizeof(db_names[0]))

static void must(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "fuzz_store: seed: %s: %d\n", what, rc);
		abort();
	}
}

/* ---- the seed store ---- */

static int mk(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name, uint32_t mode,
	      const char *link, uint64_t *ino)
{
	static const struct dbfs_cred cr = {.uid = 1000, .gid = 1000, .umask = 022};
	struct dbfs_inode in;
	return dbfs_op_mknod(fs, txn, &cr, parent, name, mode, 0, link, ino, &in);
}

static int seed_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	static char block[10000];
	uint64_t d, e, f, g, h, x;
	int rc;

	(void)arg;
	for (size_t i = 0; i < sizeof(block); i++)
		block[i] = (char)('a' + i % 26);
	if ((rc = mk(fs, txn, DBFS_ROOT_INO, "d", S_IFDIR | 0755, NULL, &d)) ||
	    (rc = mk(fs, txn, d, "e", S_IFDIR | 0700, NULL, &e)) ||
	    (rc = mk(fs, txn, d, "f", S_IFREG | 0644, NULL, &f)) ||
	    (rc = mk(fs, txn, DBFS_ROOT_INO, "g", S_IFREG | 0600, NULL, &g)) ||
	    (rc = mk(fs, txn, DBFS_ROOT_INO, "hole", S_IFREG | 0644, NULL, &h)) ||
	    (rc = mk(fs, txn, e, "empty", S_IFREG | 0644, NULL, &x)) ||
	    (rc = mk(fs, txn, DBFS_ROOT_INO, "l", S_IFLNK | 0777, "d/f", &x)) ||
	    (rc = mk(fs, txn, e, "fifo", S_IFIFO | 0644, NULL, &x)))
		return rc;
	if ((rc = dbfs_op_write(fs, txn, f, 0, block, sizeof(block), 0)) ||
	    (rc = dbfs_op_write(fs, txn, g, 0, "hello\n", 6, 0)) ||
	    (rc = dbfs_op_write(fs, txn, h, 200000, "end", 3, 0)))
		return rc;
	struct dbfs_inode in;
	if ((rc = dbfs_op_link(fs, txn, g, e, "g2", &in)))
		return rc;
	if ((rc = dbfs_op_setxattr(fs, txn, f, "user.colour", "blue", 4, 0)) ||
	    (rc = dbfs_op_setxattr(fs, txn, d, "user.empty", "", 0, 0)) ||
	    (rc = dbfs_op_setxattr(fs, txn, f, "trusted.t", block, 300, 0)))
		return rc;
	return 0;
}

static void seed_store(void)
{
	struct dbfs_options o;
	struct dbfs *fs;
	char err[256], path[4300];
	MDB_env *env;

	snprintf(seed_dir, sizeof(seed_dir), "%s/seed", fz_scratch());
	snprintf(work_dir, sizeof(work_dir), "%s/work", fz_scratch());
	must(mkdir(seed_dir, 0700) ? -errno : 0, "mkdir");
	must(mkdir(work_dir, 0700) ? -errno : 0, "mkdir");
	dbfs_options_init(&o);
	o.create = true;
	o.durability = DBFS_DURABLE_NORMAL;
	o.initial_map_size = 4 << 20;
	must(dbfs_open(seed_dir, &o, &fs, err, sizeof(err)), err);
	must(dbfs_write(fs, seed_fn, NULL), "populate");
	dbfs_close(fs);

	/* A compacted copy: only the pages in use, a few dozen KiB. */
	snprintf(path, sizeof(path), "%s/compact", fz_scratch());
	must(mkdir(path, 0700) ? -errno : 0, "mkdir");
	must(mdb_env_create(&env), "env");
	must(mdb_env_set_maxdbs(env, 16), "maxdbs");
	must(mdb_env_open(env, seed_dir, MDB_RDONLY, 0600), "open seed");
	must(mdb_env_copy2(env, path, MDB_CP_COMPACT), "compact");
	mdb_env_close(env);
	snprintf(path, sizeof(path), "%s/compact/data.mdb", fz_scratch());
	must(fz_read_file(path, &seed, &seed_len), "read seed");

	/* A read-only open needs dbfs.lock and lock.mdb (neither is created
	 * then): make them once; LMDB resets lock.mdb at each open by a sole
	 * user. */
	snprintf(path, sizeof(path), "%s/dbfs.lock", work_dir);
	must(fz_write_file(path, "", 0), "lock file");
	snprintf(path, sizeof(path), "%s/data.mdb", work_dir);
	must(fz_write_file(path, seed, seed_len), "write work");
	must(mdb_env_create(&env), "env");
	must(mdb_env_set_maxdbs(env, 16), "maxdbs");
	must(mdb_env_open(env, work_dir, 0, 0600), "open work");
	mdb_env_close(env);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	seed_store();
	return 0;
}

/* ---- damage ---- */

static int damage_records(struct fz_in *in)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbs[NDBS];
	int rc;

	if (mdb_env_create(&env))
		return -1;
	mdb_env_set_maxdbs(env, 16);
	mdb_env_set_mapsize(env, 64 << 20);
	rc = mdb_env_open(env, work_dir, MDB_NOSYNC | MDB_NOLOCK, 0600);
	if (!rc)
		rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc) {
		mdb_env_close(env);
		return -1;
	}
	for (unsigned i = 0; i < NDBS && !rc; i++)
		rc = mdb_dbi_open(txn, db_names[i], 0, &dbs[i]);
	if (!rc && fz_mutate_records(txn, dbs, NDBS, in, 64) < 0)
		rc = -1;
	if (rc)
		mdb_txn_abort(txn);
	else
		rc = mdb_txn_commit(txn);
	mdb_env_close(env);
	return rc ? -1 : 0;
}

/*
 * Fields of an LMDB 0.9.24 meta page (x86-64: 16-byte page header, then
 * MDB_meta) that the META op damages: those LMDB checks (flags, magic,
 * version) or does not need to trust (the map size: dbfs sets its own).
 * Not the others: LMDB follows the roots, the txnid (which picks the meta
 * page, hence the snapshot) and the last page as given, so a damaged one
 * makes it read another tree or an older snapshot whose pages have been
 * reused, and LMDB does not bound what it reads then (an overflow run past
 * the end of the file: SIGBUS in mdb_dbi_open, found by this target). That
 * is LMDB's domain, not ours. LMDB also trusts the page size kept in the
 * free database's md_pad (a damaged one made mdb_env_open read past the
 * end of the file: S1, regress/store): dbfs_open checks both meta pages'
 * page size and last page first (dbfs/metacheck.c).
 */
static const struct {
	unsigned off, len;
} meta_fields[] = {
	{10, 2}, /* mp_flags: P_META checked */
	{16, 4}, /* mm_magic: checked */
	{20, 4}, /* mm_version: checked */
	{32, 8}, /* mm_mapsize */
	{40, 4}, /* mm_dbs[FREE].md_pad = page size: dbfs_open checks it */
};
#define NMETA (sizeof(meta_fields) / sizeof(meta_fields[0]))

static void damage_file(struct fz_in *in)
{
	char path[4300];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/data.mdb", work_dir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	for (int ops = 0; in->n && ops < 16; ops++) {
		if (fstat(fd, &st) || !st.st_size)
			break;
		if (fz_u8(in) % 2 == 0) {
			uint32_t len = fz_u32(in);
			if (ftruncate(fd, (off_t)(len % (uint64_t)st.st_size)))
				break;
		} else {
			/* A byte of one field of one of the two meta pages (the
			 * seed's page size is 4096): which page, which field,
			 * which byte of it, what to xor. */
			unsigned page = fz_u8(in) % 2, f = fz_u8(in) % NMETA, at = fz_u8(in);
			uint8_t x = fz_u8(in), b;
			off_t off = (off_t)(page * 4096 + meta_fields[f].off + at % meta_fields[f].len);
			if (pread(fd, &b, 1, off) != 1)
				continue;
			b ^= x ? x : 0xff;
			if (pwrite(fd, &b, 1, off) != 1)
				break;
		}
	}
	close(fd);
}

/* ---- the walk ---- */

struct ent {
	uint64_t ino;
	uint32_t type;
	size_t len;
	char name[DBFS_NAME_MAX + 1];
};

struct dir_ctx {
	struct ent *ents;
	size_t n;
	uint64_t last_cookie;
};

static int dir_cb(void *arg, uint64_t cookie, uint64_t ino, uint32_t type, const char *name,
		  size_t len)
{
	struct dir_ctx *c = arg;
	struct ent *e = &c->ents[c->n++];

	e->ino = ino;
	e->type = type;
	e->len = len > DBFS_NAME_MAX ? DBFS_NAME_MAX : len;
	memcpy(e->name, name, e->len); /* ASan: the name must lie in the map */
	e->name[e->len] = '\0';
	c->last_cookie = cookie;
	return c->n == WALK_ENTRIES;
}

static uint64_t sink;

static void walk_file(struct dbfs *fs, MDB_txn *t, uint64_t ino, const struct dbfs_inode *in)
{
	static uint8_t buf[1 << 17];
	struct iovec iov[16];
	size_t got;
	uint64_t size = in->size;

	if (!dbfs_data_read(fs, t, ino, in, 0, sizeof(buf), buf, &got))
		for (size_t i = 0; i < got && i < sizeof(buf); i += 512)
			sink += buf[i];
	if (size > 100)
		dbfs_data_read(fs, t, ino, in, size - 100, 200, buf, &got);
	int n = 0;
	if (dbfs_data_map(fs, t, ino, in, 0, 1 << 20, iov, 16, &got, &n))
		n = 0;
	for (int i = 0; i < n; i++)
		if (iov[i].iov_len) /* ASan: each piece must lie in the map */
			sink += ((const uint8_t *)iov[i].iov_base)[0] +
				((const uint8_t *)iov[i].iov_base)[iov[i].iov_len - 1];
}

static void walk_xattrs(struct dbfs *fs, MDB_txn *t, uint64_t ino)
{
	static char names[8192];
	size_t need;
	MDB_val v;

	if (dbfs_xattr_list(fs, t, ino, names, sizeof(names), &need, 1))
		return;
	if (need > sizeof(names))
		fz_fail("xattr list claims %zu bytes in a %zu byte buffer", need, sizeof(names));
	for (size_t off = 0; off < need;) {
		const char *nm = names + off;
		size_t l = strnlen(nm, need - off);
		if (l == need - off)
			break; /* not NUL-terminated: let the list check say so */
		if (!dbfs_xattr_get(fs, t, ino, nm, &v) && v.mv_size)
			sink += ((const uint8_t *)v.mv_data)[v.mv_size - 1];
		off += l + 1;
	}
}

/* Breadth-first from the root, at most WALK_INODES inodes and WALK_ENTRIES
 * entries a directory; returns the first regular file met, for the writes. */
static uint64_t walk(struct dbfs *fs, char *first_name, size_t cap)
{
	uint64_t queue[WALK_INODES], file = 0;
	size_t nq = 1;
	struct ent *ents = calloc(WALK_ENTRIES, sizeof(*ents));
	struct ent *ents2 = calloc(WALK_ENTRIES, sizeof(*ents));
	MDB_txn *t;

	first_name[0] = '\0';
	if (!ents || !ents2)
		abort();
	queue[0] = DBFS_ROOT_INO;
	if (dbfs_read_begin(fs, &t)) {
		free(ents);
		free(ents2);
		return 0;
	}
	for (size_t i = 0; i < nq; i++) {
		uint64_t ino = queue[i];
		struct dbfs_inode in;
		struct stat st;

		if (dbfs_inode_get(fs, t, ino, &in))
			continue;
		dbfs_inode_to_stat(&in, ino, &st);
		walk_xattrs(fs, t, ino);
		if (S_ISREG(in.mode)) {
			walk_file(fs, t, ino, &in);
			continue;
		}
		if (S_ISLNK(in.mode)) {
			const char *target;
			size_t len;
			if (!dbfs_inode_get_link(fs, t, ino, &target, &len) && len)
				sink += (uint8_t)target[len - 1];
			continue;
		}
		if (!S_ISDIR(in.mode))
			continue;
		struct dir_ctx c = {.ents = ents};
		dbfs_dir_iter(fs, t, ino, 0, dir_cb, &c);
		if (c.n > 1) { /* a readdir resumed from the middle */
			struct dir_ctx c2 = {.ents = ents2};
			dbfs_dir_iter(fs, t, ino, c.last_cookie, dir_cb, &c2);
		}
		for (size_t j = 0; j < c.n; j++) {
			struct ent *e = &ents[j];
			struct dbfs_dirent_val dv;
			struct dbfs_inode cin;
			uint64_t cino;

			dbfs_dir_lookup(fs, t, ino, e->name, e->len, &dv);
			if (dbfs_op_lookup(fs, t, ino, e->name, &cino, &cin))
				continue;
			if (!file && S_ISREG(cin.mode) && ino == DBFS_ROOT_INO) {
				file = cino;
				snprintf(first_name, cap, "%s", e->name);
			}
			bool seen = false;
			for (size_t k = 0; k < nq; k++)
				seen |= queue[k] == cino;
			if (!seen && nq < WALK_INODES)
				queue[nq++] = cino;
		}
		uint64_t dummy;
		struct dbfs_inode din;
		dbfs_op_lookup(fs, t, ino, "..", &dummy, &din);
	}
	dbfs_read_end(fs, t);
	free(ents);
	free(ents2);
	return file;
}

/* ---- writes on the damaged store ---- */

struct wr {
	uint64_t file;
	const char *name;
	int step;
};

static int write_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	static const struct dbfs_cred cr = {.uid = 0, .gid = 0, .umask = 022};
	static const char data[5000] = "x";
	struct wr *w = arg;
	struct dbfs_inode in;
	uint64_t ino;

	switch (w->step) {
	case 0:
		return dbfs_op_mknod(fs, txn, &cr, DBFS_ROOT_INO, "new", S_IFREG | 0644, 0, NULL,
				     &ino, &in);
	case 1:
		return dbfs_op_write(fs, txn, w->file, 3000, data, sizeof(data), 0);
	case 2:
		return dbfs_op_setxattr(fs, txn, w->file, "user.colour", "red", 3, 0);
	case 3:
		return dbfs_op_rename(fs, txn, DBFS_ROOT_INO, w->name, DBFS_ROOT_INO, "moved", 0);
	case 4:
		return dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "moved", 0);
	case 5:
		return dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, "d", 1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = {.p = data, .n = size};
	struct dbfs_options o;
	struct dbfs *fs;
	char err[256], path[4300], name[DBFS_NAME_MAX + 1];
	unsigned flags = fz_u8(&in);
	int rc;

	if (!seed)
		seed_store();
	snprintf(path, sizeof(path), "%s/data.mdb", work_dir);
	if (fz_write_file(path, seed, seed_len))
		abort();
	if (in.n && damage_records(&in))
		return 0;
	damage_file(&in);

	dbfs_options_init(&o);
	o.durability = DBFS_DURABLE_NORMAL;
	o.read_only = flags & 1;
	o.writemap = !(flags & 2);
	o.initial_map_size = 4 << 20;
	memset(err, 0, sizeof(err));
	rc = dbfs_open(work_dir, &o, &fs, err, sizeof(err));
	if (getenv("MFS_FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_store: dbfs_open: %d %s\n", rc, err);
	if (rc) {
		if (rc > 0 || rc < -4095 || !memchr(err, '\0', sizeof(err)))
			fz_fail("dbfs_open returned %d", rc);
		return 0;
	}
	uint64_t file = walk(fs, name, sizeof(name));
	struct dbfs_usage u;
	struct statvfs sv;
	dbfs_usage(fs, &u);
	dbfs_statfs(fs, &sv);
	if (!o.read_only && !(flags & 4)) {
		for (int step = 0; step < 6; step++) {
			struct wr w = {.file = file, .name = name, .step = step};
			if (step >= 1 && step <= 3 && !file)
				continue;
			rc = dbfs_write(fs, write_fn, &w);
			if (getenv("MFS_FUZZ_VERBOSE"))
				fprintf(stderr, "fuzz_store: write step %d: %d\n", step, rc);
		}
		walk(fs, name, sizeof(name));
		dbfs_tick(fs);
	}
	dbfs_close(fs);
	return 0;
}
