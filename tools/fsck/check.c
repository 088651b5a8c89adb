/*
 * Pass 1, records: every record alone and what it points at directly.
 * Repairs here only drop records that cannot be right (malformed, dangling,
 * past EOF, owned by nobody) and rebuild dircook twins from their dirents;
 * the tree and counts passes then repair what the drops leave behind.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"

#define N(d, s) fsck_name((d)->key + 8, (d)->klen - 8, s)

static void check_inodes(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_inode, &c), "cursor on inode");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size > 16 && k.mv_size <= 16 + DBFS_NAME_MAX && f->sb.version >= 3 &&
		    dbfs_get_be64(k.mv_data) != 0)
			continue; /* a name row (ilink, format 3): feed.c checks them */
		if (k.mv_size != 8 || dbfs_get_be64(k.mv_data) == 0) {
			fsck_problem(f, "inode table: malformed key (%zu bytes)", k.mv_size);
			if (f->fixing)
				fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting inode key");
			continue;
		}
		struct fsck_inode *in = fsck_inode_find(f, dbfs_get_be64(k.mv_data));
		uint32_t mode = 0;
		if (v.mv_size >= 4)
			memcpy(&mode, v.mv_data, 4);
		if (in && in->bad)
			fsck_unfixable(f,
				       "inode %" PRIu64 ": malformed record (%zu bytes, mode %#o)",
				       in->ino, v.mv_size, mode);
		else if (in && S_ISREG(in->rec.mode) && in->rec.size > DBFS_MAX_FILE_SIZE)
			fsck_unfixable(f,
				       "inode %" PRIu64 ": size %" PRIu64 " above the maximum %llu",
				       in->ino, in->rec.size, DBFS_MAX_FILE_SIZE);
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading inode");
	mdb_cursor_close(c);
}

/* Dirents: well-formed, parent a directory, child existing and of the
 * recorded type, cookie in range. */
static void check_dirents(struct fsck *f)
{
	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		if (d->bad) {
			fsck_problem(f, "dirent %" PRIu64 "/'%s': malformed record (key %zu bytes)",
				     d->parent, d->klen >= 8 ? N(d, 0) : "?", d->klen);
			if (f->fixing)
				fsck_del_dirent(f, d);
			continue;
		}
		struct fsck_inode *p = fsck_inode_find(f, d->parent);
		struct fsck_inode *ch = fsck_inode_find(f, d->val.ino);
		if (p && p->bad)
			continue;
		if (!p || !S_ISDIR(p->rec.mode)) {
			fsck_problem(f, "dirent %" PRIu64 "/'%s' -> %" PRIu64 ": parent %s",
				     d->parent, N(d, 0), d->val.ino,
				     p ? "is not a directory" : "does not exist");
			if (f->fixing)
				fsck_del_dirent(f, d);
			continue;
		}
		if (!ch) {
			fsck_problem(f, "dirent %" PRIu64 "/'%s' -> %" PRIu64 ": no such inode",
				     d->parent, N(d, 0), d->val.ino);
			if (f->fixing)
				fsck_del_dirent(f, d);
			continue;
		}
		if (!ch->bad && d->val.type != (ch->rec.mode & S_IFMT)) {
			fsck_problem(f,
				     "dirent %" PRIu64 "/'%s' -> %" PRIu64 ": type %s, inode is %s",
				     d->parent, N(d, 0), d->val.ino, fsck_type_name(d->val.type),
				     fsck_type_name(ch->rec.mode));
			if (f->fixing) {
				MDB_val k = {d->klen, d->key}, v = {sizeof(d->val), &d->val};
				d->val.type = ch->rec.mode & S_IFMT;
				fsck_lmdb_check(mdb_put(f->txn, f->dbi_dirent, &k, &v, 0),
						"rewriting dirent");
			}
		}
		if (d->val.cookie < DBFS_COOKIE_FIRST || d->val.cookie >= p->rec.next_cookie)
			fsck_problem(f,
				     "dirent %" PRIu64 "/'%s': cookie %" PRIu64
				     " outside [%llu, next_cookie %" PRIu64 ")",
				     d->parent, N(d, 0), d->val.cookie, DBFS_COOKIE_FIRST,
				     p->rec.next_cookie);
	}
}

static bool cookie_ok(struct fsck *f, const struct fsck_dirent *d)
{
	struct fsck_inode *p = fsck_inode_find(f, d->parent);
	return p && d->val.cookie >= DBFS_COOKIE_FIRST && d->val.cookie < p->rec.next_cookie;
}

/* Each dircook record must be the exact twin of a valid dirent. */
static void check_dircook(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_dircook, &c), "cursor on dircook");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const unsigned char *val = v.mv_data;
		if (k.mv_size != 16 || v.mv_size < 13 || v.mv_size > 12 + DBFS_NAME_MAX) {
			fsck_problem(f, "dircook: malformed record (key %zu, value %zu bytes)",
				     k.mv_size, v.mv_size);
			if (f->fixing)
				fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting dircook");
			continue;
		}
		uint64_t parent = dbfs_get_be64(k.mv_data);
		uint64_t cookie = dbfs_get_be64((const unsigned char *)k.mv_data + 8);
		struct fsck_inode *p = fsck_inode_find(f, parent);
		uint64_t ino;
		uint32_t type;
		if (p && p->bad)
			continue; /* reported with the inode; not judged */
		memcpy(&ino, val, 8);
		memcpy(&type, val + 8, 4);
		struct fsck_dirent *d = fsck_dirent_find(f, parent, val + 12, v.mv_size - 12);
		const char *why = NULL;
		if (!d)
			why = "no such dirent";
		else if (d->val.cookie != cookie)
			why = "dirent has another cookie";
		else if (d->val.ino != ino || d->val.type != type)
			why = "inode or type differs from the dirent";
		else if (!cookie_ok(f, d))
			why = "cookie out of range";
		else if (d->twin)
			why = "duplicate";
		if (!why) {
			d->twin = true;
			continue;
		}
		fsck_problem(f, "dircook %" PRIu64 "/%" PRIu64 " '%s' -> %" PRIu64 ": %s", parent,
			     cookie, fsck_name(val + 12, v.mv_size - 12, 0), ino, why);
		if (f->fixing)
			fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting dircook");
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading dircook");
	mdb_cursor_close(c);

	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		struct fsck_inode *p = fsck_inode_find(f, d->parent);
		if (d->bad || d->gone || d->twin || !p || p->bad)
			continue;
		fsck_problem(f,
			     "dirent %" PRIu64 "/'%s' -> %" PRIu64 ": no matching dircook record",
			     d->parent, N(d, 0), d->val.ino);
		if (!f->fixing)
			continue;
		unsigned char ck[16];
		MDB_val kk = {16, ck}, vv;
		dbfs_put_be64(ck, d->parent);
		dbfs_put_be64(ck + 8, d->val.cookie);
		if (!cookie_ok(f, d) || mdb_get(f->txn, f->dbi_dircook, &kk, &vv) == 0) {
			/* The cookie is unusable: give the entry a fresh one. */
			if (p->rec.next_cookie < DBFS_COOKIE_FIRST)
				p->rec.next_cookie = DBFS_COOKIE_FIRST;
			if (p->rec.next_cookie <= p->max_cookie)
				p->rec.next_cookie = p->max_cookie + 1;
			d->val.cookie = p->rec.next_cookie++;
			fsck_put_inode(f, p);
			MDB_val dk = {d->klen, d->key}, dv = {sizeof(d->val), &d->val};
			fsck_lmdb_check(mdb_put(f->txn, f->dbi_dirent, &dk, &dv, 0),
					"rewriting dirent");
		}
		fsck_put_dircook(f, d->parent, d->val.cookie, d->val.ino, d->val.type, d->key + 8,
				 d->klen - 8);
		fsck_action(f, "dircook %" PRIu64 "/%" PRIu64 " written for '%s'", d->parent,
			    d->val.cookie, N(d, 0));
		d->twin = true;
	}
}

/* Data blocks: owned by a regular file, 1..block_size bytes, below EOF. */
static void check_data(struct fsck *f)
{
	const uint64_t bs = f->sb.block_size;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_data, &c), "cursor on data");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16) {
			fsck_problem(f, "data: malformed key (%zu bytes)", k.mv_size);
			if (f->fixing)
				fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting data");
			continue;
		}
		uint64_t ino = dbfs_get_be64(k.mv_data);
		uint64_t blk = dbfs_get_be64((const unsigned char *)k.mv_data + 8);
		struct fsck_inode *in = fsck_inode_find(f, ino);
		const char *why = NULL;
		char buf[96];
		if (in && in->bad)
			continue;
		if (!in)
			why = "no such inode";
		else if (!S_ISREG(in->rec.mode))
			why = "inode is not a regular file";
		else if (v.mv_size == 0 || v.mv_size > bs) {
			snprintf(buf, sizeof(buf), "length %zu outside 1..%" PRIu64, v.mv_size, bs);
			why = buf;
		} else if (blk >= (in->rec.size + bs - 1) / bs && !fsck_trim_waits(in, blk)) {
			snprintf(buf, sizeof(buf), "lies at or past the file size %" PRIu64,
				 in->rec.size);
			why = buf;
		}
		if (!why)
			continue;
		fsck_problem(f, "data block %" PRIu64 "/%" PRIu64 ": %s", ino, blk, why);
		if (f->fixing)
			fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting data");
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading data");
	mdb_cursor_close(c);
}

static void check_xattrs(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_xattr, &c), "cursor on xattr");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const unsigned char *key = k.mv_data;
		const char *why = NULL;
		uint64_t ino = k.mv_size >= 8 ? dbfs_get_be64(key) : 0;
		if (k.mv_size < 9 || k.mv_size > 8 + DBFS_XATTR_NAME_MAX ||
		    memchr(key + 8, 0, k.mv_size - 8))
			why = "malformed key";
		else if (!fsck_inode_find(f, ino))
			why = "no such inode";
		else if (v.mv_size > DBFS_XATTR_MAX)
			why = "value longer than DBFS_XATTR_MAX";
		if (!why)
			continue;
		fsck_problem(f, "xattr %" PRIu64 "/'%s': %s", ino,
			     k.mv_size > 8 ? fsck_name(key + 8, k.mv_size - 8, 0) : "", why);
		if (f->fixing)
			fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting xattr");
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading xattr");
	mdb_cursor_close(c);
}

static void check_orphans(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_orphan, &c), "cursor on orphan");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size == 8 && fsck_inode_find(f, dbfs_get_be64(k.mv_data)))
			continue;
		if (k.mv_size == 8)
			fsck_problem(f,
				     "orphan table lists inode %" PRIu64 ", which does not exist",
				     dbfs_get_be64(k.mv_data));
		else
			fsck_problem(f, "orphan table: malformed key (%zu bytes)", k.mv_size);
		if (f->fixing)
			fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting orphan");
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading orphan");
	mdb_cursor_close(c);
}

bool fsck_pass_records(struct fsck *f)
{
	unsigned long before = f->problems;

	check_inodes(f);
	check_dirents(f);
	check_dircook(f);
	check_data(f);
	check_xattrs(f);
	check_orphans(f);
	return f->fixing && f->problems != before;
}
