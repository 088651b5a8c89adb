/*
 * An inode's names, for the change feed's paths and the expiry's unlink
 * (format 5, dbfs/format.h "inode"): the first name lives in the inode's
 * own record (parent and name_cookie, the entry's key in dircook), every
 * other name (extra hard links) is an ilink row right after the record.
 * A create or an unlink of a file's only name therefore writes no row of
 * its own: the record it writes anyway carries the name. Kept whether the
 * feed is on or off. (An older store's names: upgrade5.c.)
 */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

int dbfs_first_name(struct dbfs *fs, MDB_txn *txn, const struct dbfs_inode *in, uint64_t *dir,
		    const char **name, size_t *len)
{
	unsigned char kb[16];
	MDB_val k = {16, kb}, v;
	if (!in->name_cookie)
		return MDB_NOTFOUND;
	dbfs_put_be64(kb, in->parent);
	dbfs_put_be64(kb + 8, in->name_cookie);
	int rc = dbfs_get(txn, fs->db_dircook, &k, &v);
	if (rc)
		return rc; /* MDB_NOTFOUND: damaged (dbfs-fsck's business) */
	if (v.mv_size <= 12 || v.mv_size > 12 + DBFS_NAME_MAX)
		return MDB_NOTFOUND;
	*dir = in->parent;
	*name = (const char *)v.mv_data + 12;
	*len = v.mv_size - 12;
	return 0;
}

static int row_set(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t dir, const char *name,
		   size_t len, bool del)
{
	unsigned char kb[16 + DBFS_NAME_MAX];
	MDB_val k, v = {0, NULL};
	dbfs_ilink_key(kb, ino, dir, name, len, &k);
	if (!del)
		return dbfs_put(txn, fs->db_inode, &k, &v, 0);
	int rc = dbfs_del(txn, fs->db_inode, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_name_added(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		    uint64_t dir, uint64_t cookie, const char *name, size_t len)
{
	/* a directory's: its path and its descendants' */
	if (fs->feed)
		dbfs_feed_paths_changed(fs, S_ISDIR(in->mode) ? 0 : ino);
	if (!in->name_cookie) {
		in->parent = dir;
		in->name_cookie = cookie;
		return 0;
	}
	return row_set(fs, txn, ino, dir, name, len, false);
}

/* The first name went: the lowest row (parent, then name) takes its place. */
static int promote(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in)
{
	unsigned char kb[16 + DBFS_NAME_MAX];
	MDB_val k = {8, kb}, v;
	MDB_cursor *c;
	dbfs_put_be64(kb, ino);
	int rc = mdb_cursor_open(txn, fs->db_inode, &c);
	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (!rc && k.mv_size == 8 && dbfs_get_be64(k.mv_data) == ino)
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	if (!rc && (k.mv_size <= 16 || k.mv_size > 16 + DBFS_NAME_MAX ||
		    dbfs_get_be64(k.mv_data) != ino))
		rc = MDB_NOTFOUND;
	struct dbfs_dirent_val dv;
	size_t klen = 0;
	if (!rc) {
		klen = k.mv_size;
		memcpy(kb, k.mv_data, klen);
		rc = dbfs_cursor_del(c);
	}
	mdb_cursor_close(c);
	if (rc)
		return rc == MDB_NOTFOUND ? 0 : rc; /* no other name */
	uint64_t dir = dbfs_get_be64(kb + 8);
	rc = dbfs_dir_lookup(fs, txn, dir, (const char *)kb + 16, klen - 16, &dv);
	if (rc == -ENOENT)
		return 0; /* a stale row (damage): the inode has no name left */
	if (rc)
		return rc;
	in->parent = dir;
	in->name_cookie = dv.cookie;
	return 0;
}

int dbfs_name_removed(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		      uint64_t dir, uint64_t cookie, const char *name, size_t len)
{
	if (fs->feed)
		dbfs_feed_paths_changed(fs, S_ISDIR(in->mode) ? 0 : ino);
	if (in->name_cookie != cookie || in->parent != dir)
		return row_set(fs, txn, ino, dir, name, len, true);
	in->name_cookie = 0;
	/* nlink still counts the name going: a file's only name, or a
	 * directory's (never more than one), leaves no row behind */
	if (S_ISDIR(in->mode) || in->nlink <= 1)
		return 0;
	return promote(fs, txn, ino, in);
}
