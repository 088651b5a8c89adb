/*
 * An inode's names, for the change feed's paths and the expiry's unlink
 * (format 5, dbfs/format.h "inode"): the first name lives in the inode's
 * own record (parent and name_cookie, the entry's key in dircook), every
 * other name (extra hard links) is an ilink row right after the record.
 * A create or an unlink of a file's only name therefore writes no row of
 * its own: the record it writes anyway carries the name. Kept whether the
 * feed is on or off. Also the upgrade of an older store (format 4 had a
 * row for every name, none while the feed was off), which rebuilds them
 * all from dirent.
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

/* ---- format 4 -> 5 ---- */

/* Every record in the new size, without names; every row gone. */
static int records_fn(struct dbfs *fs, MDB_txn *txn)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, fs->db_inode, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8) {
			if ((rc = dbfs_cursor_del(c)))
				break;
			continue;
		}
		struct dbfs_inode in;
		size_t tail = 0, fixed = v.mv_size;
		if (v.mv_size < DBFS_INODE_V4_SIZE)
			continue; /* damaged: dbfs-fsck's business */
		memset(&in, 0, sizeof(in));
		memcpy(&in, v.mv_data, DBFS_INODE_V4_SIZE);
		if (S_ISLNK(in.mode) && in.size <= DBFS_SYMLINK_MAX && in.size < v.mv_size)
			tail = in.size;
		fixed -= tail;
		if (fixed == sizeof(in)) /* done in an earlier attempt */
			memcpy(&in, v.mv_data, sizeof(in));
		else if (fixed != DBFS_INODE_V4_SIZE)
			continue; /* damaged */
		in.name_cookie = 0;
		char buf[sizeof(in) + DBFS_SYMLINK_MAX];
		memcpy(buf, &in, sizeof(in));
		memcpy(buf + sizeof(in), (const char *)v.mv_data + fixed, tail);
		MDB_val nv = {sizeof(in) + tail, buf};
		unsigned char kb[8]; /* not the page's bytes: the put moves them */
		memcpy(kb, k.mv_data, 8);
		k.mv_data = kb;
		if ((rc = mdb_cursor_put(c, &k, &nv, MDB_CURRENT)))
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Every entry names its inode: the first in the record, the rest rows. */
static int entries_fn(struct dbfs *fs, MDB_txn *txn)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, fs->db_dirent, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct dbfs_dirent_val dv;
		struct dbfs_inode in;
		if (k.mv_size <= 8 || k.mv_size > 8 + DBFS_NAME_MAX || v.mv_size != sizeof(dv))
			continue; /* damaged: dbfs-fsck's business */
		memcpy(&dv, v.mv_data, sizeof(dv));
		int r = dbfs_inode_get(fs, txn, dv.ino, &in);
		if (r == -ENOENT || r == -EIO)
			continue;
		if ((rc = r))
			break;
		uint64_t dir = dbfs_get_be64(k.mv_data);
		if (!in.name_cookie && (!S_ISDIR(in.mode) || in.parent == dir)) {
			in.parent = dir;
			in.name_cookie = dv.cookie;
			rc = dbfs_inode_put(fs, txn, dv.ino, &in);
		} else {
			rc = row_set(fs, txn, dv.ino, dir, (const char *)k.mv_data + 8,
				     k.mv_size - 8, false);
		}
		if (rc)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int upgrade_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	(void)arg;
	uint32_t was = fs->sb_version;
	int rc = records_fn(fs, txn);
	fs->sb_version = DBFS_FORMAT_VERSION; /* records read in the new size */
	if (!rc)
		rc = entries_fn(fs, txn);
	if (!rc && fs->db_feed) {
		/* format 3 and 4's mark of rows not kept (feed=off): rebuilt */
		MDB_val x = {1, (void *)"X"};
		rc = dbfs_del(txn, fs->db_feed, &x, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (!rc)
		rc = dbfs_super_upgrade_fn(fs, txn, NULL);
	if (rc)
		fs->sb_version = was;
	return rc;
}

int dbfs_names_upgrade(struct dbfs *fs)
{
	if (fs->feed)
		dbfs_feed_paths_changed(fs, 0);
	return dbfs_write(fs, upgrade_fn, NULL);
}
