/*
 * The writes --repair makes, all inside f->txn. Every write reads the
 * current record from the transaction first, so a pass may call these after
 * earlier writes made its model stale; the next pass reloads the model.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsck.h"

static const char lost_found[] = "lost+found";

static bool get_inode(struct fsck *f, uint64_t ino, struct dbfs_inode *rec)
{
	unsigned char kb[8];
	MDB_val k = {8, kb}, v;
	int rc;

	dbfs_put_be64(kb, ino);
	rc = mdb_get(f->txn, f->dbi_inode, &k, &v);
	if (rc == MDB_NOTFOUND || (rc == 0 && v.mv_size < fsck_inode_fixed(f, &v)))
		return false;
	fsck_lmdb_check(rc, "reading inode");
	memset(rec, 0, sizeof(*rec));
	memcpy(rec, v.mv_data, fsck_inode_fixed(f, &v));
	return true;
}

/* Replace the fixed part of an inode record, keeping a symlink's target. */
static void put_rec(struct fsck *f, uint64_t ino, const struct dbfs_inode *rec)
{
	unsigned char kb[8];
	MDB_val k = {8, kb}, v;
	unsigned char *buf;
	size_t len = f->inode_fixed; /* older formats: without name_cookie */
	int rc;

	dbfs_put_be64(kb, ino);
	rc = mdb_get(f->txn, f->dbi_inode, &k, &v);
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading inode");
	size_t fixed = rc == 0 ? fsck_inode_fixed(f, &v) : f->inode_fixed; /* its own size */
	if (rc == 0 && v.mv_size > len)
		len = v.mv_size;
	if (fixed > len)
		len = fixed;
	buf = calloc(1, len);
	if (!buf)
		fsck_fatal("out of memory");
	if (rc == 0)
		memcpy(buf, v.mv_data, v.mv_size < len ? v.mv_size : len);
	memcpy(buf, rec, fixed);
	v.mv_size = len;
	v.mv_data = buf;
	fsck_lmdb_check(mdb_put(f->txn, f->dbi_inode, &k, &v, 0), "writing inode");
	free(buf);
}

void fsck_put_inode(struct fsck *f, const struct fsck_inode *in)
{
	put_rec(f, in->ino, &in->rec);
}

void fsck_del_key(struct fsck *f, MDB_dbi dbi, const void *key, size_t klen)
{
	MDB_val k = {klen, (void *)key};
	int rc = mdb_del(f->txn, dbi, &k, NULL);

	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "deleting a record");
}

void fsck_put_dircook(struct fsck *f, uint64_t parent, uint64_t cookie, uint64_t ino, uint32_t type,
		      const void *name, size_t len)
{
	unsigned char kb[16], vb[12 + DBFS_NAME_MAX];
	MDB_val k = {16, kb}, v = {12 + len, vb};

	dbfs_put_be64(kb, parent);
	dbfs_put_be64(kb + 8, cookie);
	memcpy(vb, &ino, 8);
	memcpy(vb + 8, &type, 4);
	memcpy(vb + 12, name, len);
	fsck_lmdb_check(mdb_put(f->txn, f->dbi_dircook, &k, &v, 0), "writing dircook");
}

void fsck_del_dirent(struct fsck *f, struct fsck_dirent *d)
{
	fsck_del_key(f, f->dbi_dirent, d->key, d->klen);
	d->gone = true;
	fsck_action(f, "dirent %" PRIu64 "/'%s' dropped", d->parent,
		    d->klen >= 8 ? fsck_name(d->key + 8, d->klen - 8, 1) : "?");
	if (d->bad)
		return;
	/* Its dircook twin goes too, if it is one. */
	unsigned char kb[16];
	MDB_val k = {16, kb}, v;
	dbfs_put_be64(kb, d->parent);
	dbfs_put_be64(kb + 8, d->val.cookie);
	int rc = mdb_get(f->txn, f->dbi_dircook, &k, &v);
	if (rc == MDB_NOTFOUND)
		return;
	fsck_lmdb_check(rc, "reading dircook");
	if (v.mv_size == 12 + d->klen - 8 &&
	    !memcmp((const unsigned char *)v.mv_data + 12, d->key + 8, d->klen - 8))
		fsck_del_key(f, f->dbi_dircook, kb, 16);
}

/* Delete every record of `dbi` whose key starts with ino (BE). */
static void del_prefix(struct fsck *f, MDB_dbi dbi, uint64_t ino)
{
	unsigned char kb[8];
	MDB_val k = {8, kb}, v;
	MDB_cursor *c;
	int rc;

	dbfs_put_be64(kb, ino);
	fsck_lmdb_check(mdb_cursor_open(f->txn, dbi, &c), "cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     rc == 0 && k.mv_size >= 8 && dbfs_get_be64(k.mv_data) == ino;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting a record");
	if (rc != 0 && rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading");
	mdb_cursor_close(c);
}

void fsck_delete_inode(struct fsck *f, uint64_t ino)
{
	unsigned char kb[8];

	dbfs_put_be64(kb, ino);
	fsck_del_key(f, f->dbi_inode, kb, 8);
	fsck_del_key(f, f->dbi_orphan, kb, 8);
	del_prefix(f, f->dbi_data, ino);
	del_prefix(f, f->dbi_xattr, ino);
	del_prefix(f, f->dbi_dirent, ino);
	del_prefix(f, f->dbi_dircook, ino);
}

static bool dirent_get(struct fsck *f, uint64_t parent, const char *name,
		       struct dbfs_dirent_val *out)
{
	unsigned char kb[8 + DBFS_NAME_MAX];
	size_t len = strlen(name);
	MDB_val k = {8 + len, kb}, v;
	int rc;

	dbfs_put_be64(kb, parent);
	memcpy(kb + 8, name, len);
	rc = mdb_get(f->txn, f->dbi_dirent, &k, &v);
	if (rc == MDB_NOTFOUND)
		return false;
	fsck_lmdb_check(rc, "reading dirent");
	if (out && v.mv_size == sizeof(*out))
		memcpy(out, v.mv_data, sizeof(*out));
	return true;
}

/* Add entry `name` -> ino (of type `type`) to directory `dir`. */
static void link_entry(struct fsck *f, uint64_t dir, const char *name, uint64_t ino, uint32_t type)
{
	struct dbfs_inode drec;
	struct dbfs_dirent_val dv = {.ino = ino, .type = type};
	unsigned char kb[8 + DBFS_NAME_MAX];
	size_t len = strlen(name);
	MDB_val k = {8 + len, kb}, v = {sizeof(dv), &dv};

	if (!get_inode(f, dir, &drec))
		fsck_fatal("directory %" PRIu64 " vanished during repair", dir);
	if (drec.next_cookie < DBFS_COOKIE_FIRST)
		drec.next_cookie = DBFS_COOKIE_FIRST;
	dv.cookie = drec.next_cookie++;
	drec.nentries++;
	if (type == S_IFDIR)
		drec.nlink++;
	put_rec(f, dir, &drec);
	dbfs_put_be64(kb, dir);
	memcpy(kb + 8, name, len);
	fsck_lmdb_check(mdb_put(f->txn, f->dbi_dirent, &k, &v, 0), "writing dirent");
	fsck_put_dircook(f, dir, dv.cookie, ino, type, name, len);
}

static uint64_t lost_found_dir(struct fsck *f)
{
	struct dbfs_dirent_val dv;
	struct dbfs_inode rec;
	struct timespec now;
	unsigned char kb[2] = {'s', 'b'};
	MDB_val k = {2, kb}, v = {sizeof(f->sb), &f->sb};
	uint64_t ino;

	if (dirent_get(f, DBFS_ROOT_INO, lost_found, &dv)) {
		if (get_inode(f, dv.ino, &rec) && S_ISDIR(rec.mode))
			return dv.ino;
		fsck_unfixable(f, "/lost+found exists and is not a directory: cannot reconnect");
		return 0;
	}
	ino = f->sb.next_ino++;
	fsck_lmdb_check(mdb_put(f->txn, f->dbi_super, &k, &v, 0), "writing superblock");
	clock_gettime(CLOCK_REALTIME, &now);
	memset(&rec, 0, sizeof(rec));
	rec.mode = S_IFDIR | 0700;
	rec.nlink = 2;
	rec.atime_sec = rec.mtime_sec = rec.ctime_sec = rec.btime_sec = now.tv_sec;
	rec.atime_nsec = rec.mtime_nsec = rec.ctime_nsec = rec.btime_nsec = (uint32_t)now.tv_nsec;
	rec.next_cookie = DBFS_COOKIE_FIRST;
	rec.parent = DBFS_ROOT_INO;
	put_rec(f, ino, &rec);
	link_entry(f, DBFS_ROOT_INO, lost_found, ino, S_IFDIR);
	if (f->usage_ok) {
		MDB_val uk = {5, "usage"}, uv = {sizeof(f->usage), &f->usage};
		f->usage.inodes++;
		fsck_lmdb_check(mdb_put(f->txn, f->dbi_super, &uk, &uv, 0), "writing usage");
	}
	fsck_action(f, "created /lost+found (inode %" PRIu64 ")", ino);
	return ino;
}

bool fsck_attach_lost_found(struct fsck *f, uint64_t ino)
{
	struct dbfs_inode rec;
	char name[64];
	uint64_t lf = lost_found_dir(f);

	if (!lf || !get_inode(f, ino, &rec))
		return false;
	snprintf(name, sizeof(name), "#%" PRIu64, ino);
	for (unsigned i = 1; dirent_get(f, lf, name, NULL); i++)
		snprintf(name, sizeof(name), "#%" PRIu64 ".%u", ino, i);
	if (S_ISDIR(rec.mode))
		rec.parent = lf;
	else if (rec.nlink == 0)
		rec.nlink = 1;
	put_rec(f, ino, &rec);
	link_entry(f, lf, name, ino, rec.mode & S_IFMT);
	fsck_action(f, "inode %" PRIu64 " moved to /lost+found/%s", ino, name);
	return true;
}
