/* Directory entries: "dirent" for lookups by name (O(log n)), "dircook"
 * for readdir in cookie order (stable offsets), and the inode's name rows
 * in "inode" (ilink: the change feed's paths, format.h). */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

int dbfs_name_check(const char *name, size_t len)
{
	if (len == 0)
		return -ENOENT;
	if (len > DBFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len))
		return -EINVAL;
	return 0;
}

static void dirent_key(unsigned char *kb, uint64_t dir, const char *name, size_t len,
		       MDB_val *k)
{
	dbfs_put_be64(kb, dir);
	memcpy(kb + 8, name, len);
	k->mv_size = 8 + len;
	k->mv_data = kb;
}

static void cookie_key(unsigned char *kb, uint64_t dir, uint64_t cookie, MDB_val *k)
{
	dbfs_put_be64(kb, dir);
	dbfs_put_be64(kb + 8, cookie);
	k->mv_size = 16;
	k->mv_data = kb;
}

void dbfs_ilink_key(unsigned char *kb, uint64_t ino, uint64_t dir, const char *name, size_t len,
		    MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	dbfs_put_be64(kb + 8, dir);
	memcpy(kb + 16, name, len);
	k->mv_size = 16 + len;
	k->mv_data = kb;
}

/* The reverse row of entry dir/name -> ino: add or (del) remove it. A
 * missing row is not an error: it only names paths in feed events. Kept
 * only while the feed is on (feed=off marks the table stale and the next
 * open with the feed rebuilds it, feed.c). */
static int ilink_set(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint32_t type, uint64_t dir,
		     const char *name, size_t len, bool del)
{
	unsigned char kb[16 + DBFS_NAME_MAX];
	MDB_val k, v = {0, NULL};
	if (!fs->feed)
		return 0;
	/* a directory's: its path and its descendants' */
	dbfs_feed_paths_changed(fs, S_ISDIR(type) ? 0 : ino);
	dbfs_ilink_key(kb, ino, dir, name, len, &k);
	if (!del && ino > fs->ilink_top) {
		/* a new inode's first name: most likely the table's last key
		 * (LMDB checks it; a shorter descent, no search) */
		fs->ilink_top = ino;
		int rc = dbfs_put(txn, fs->db_inode, &k, &v, MDB_APPEND);
		if (rc != MDB_KEYEXIST)
			return rc;
	}
	if (!del)
		return dbfs_put(txn, fs->db_inode, &k, &v, 0);
	int rc = dbfs_del(txn, fs->db_inode, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_dir_lookup(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t len,
		    struct dbfs_dirent_val *out)
{
	unsigned char kb[8 + DBFS_NAME_MAX];
	MDB_val k, v;
	if (len > DBFS_NAME_MAX)
		return -ENAMETOOLONG;
	dirent_key(kb, dir, name, len, &k);
	int rc = dbfs_get(txn, fs->db_dirent, &k, &v);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*out))
		return -EIO;
	memcpy(out, v.mv_data, sizeof(*out));
	return 0;
}

/* Write both records of an entry: dirent (with `put_flags`) and its dircook
 * twin. `append`: the cookie is new and likely the table's last key. */
static int put_entry(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t len,
		     const struct dbfs_dirent_val *dv, unsigned put_flags, bool append)
{
	unsigned char kb[8 + DBFS_NAME_MAX];
	MDB_val k, v = {sizeof(*dv), (void *)dv};
	dirent_key(kb, dir, name, len, &k);
	int rc = dbfs_put(txn, fs->db_dirent, &k, &v, put_flags);
	if (rc)
		return rc;

	unsigned char ck[16];
	cookie_key(ck, dir, dv->cookie, &k);
	v.mv_size = 12 + len;
	rc = dbfs_put(txn, fs->db_dircook, &k, &v, MDB_RESERVE | (append ? MDB_APPEND : 0));
	if (append && rc == MDB_KEYEXIST) /* not the last key of the table: insert */
		rc = dbfs_put(txn, fs->db_dircook, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	memcpy(v.mv_data, &dv->ino, 8);
	memcpy((char *)v.mv_data + 8, &dv->type, 4);
	memcpy((char *)v.mv_data + 12, name, len);
	return 0;
}

int dbfs_dir_add(struct dbfs *fs, MDB_txn *txn, uint64_t dir, struct dbfs_inode *din,
		 const char *name, size_t len, uint64_t ino, uint32_t type)
{
	struct dbfs_dirent_val dv = {.ino = ino, .cookie = din->next_cookie++, .type = type};
	int rc = put_entry(fs, txn, dir, name, len, &dv, MDB_NOOVERWRITE, true);
	if (!rc)
		rc = ilink_set(fs, txn, ino, type, dir, name, len, false);
	if (rc)
		return rc;
	din->nentries++;
	return 0;
}

int dbfs_dir_replace(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t len,
		     const struct dbfs_dirent_val *old, uint64_t ino, uint32_t type)
{
	struct dbfs_dirent_val dv = *old;
	dv.ino = ino;
	dv.type = type;
	int rc = put_entry(fs, txn, dir, name, len, &dv, 0, false);
	if (!rc)
		rc = ilink_set(fs, txn, old->ino, old->type, dir, name, len, true);
	if (!rc)
		rc = ilink_set(fs, txn, ino, type, dir, name, len, false);
	return rc;
}

int dbfs_dir_remove(struct dbfs *fs, MDB_txn *txn, uint64_t dir, struct dbfs_inode *din,
		    const char *name, size_t len, const struct dbfs_dirent_val *dv)
{
	unsigned char kb[8 + DBFS_NAME_MAX];
	MDB_val k;
	dirent_key(kb, dir, name, len, &k);
	int rc = dbfs_del(txn, fs->db_dirent, &k, NULL);
	if (rc)
		return rc;
	unsigned char ck[16];
	cookie_key(ck, dir, dv->cookie, &k);
	rc = dbfs_del(txn, fs->db_dircook, &k, NULL);
	if (!rc)
		rc = ilink_set(fs, txn, dv->ino, dv->type, dir, name, len, true);
	if (rc)
		return rc;
	if (din->nentries)
		din->nentries--;
	return 0;
}

int dbfs_dir_iter(struct dbfs *fs, MDB_txn *txn, uint64_t dir, uint64_t from, dbfs_dir_cb cb,
		  void *arg)
{
	unsigned char ck[16];
	MDB_cursor *c;
	MDB_val k, v;
	cookie_key(ck, dir, from, &k);
	int rc = mdb_cursor_open(txn, fs->db_dircook, &c);
	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0) {
		if (k.mv_size != 16 || dbfs_get_be64(k.mv_data) != dir)
			break;
		if (v.mv_size < 13) {
			rc = -EIO;
			break;
		}
		uint64_t ino;
		uint32_t type;
		memcpy(&ino, v.mv_data, 8);
		memcpy(&type, (char *)v.mv_data + 8, 4);
		rc = cb(arg, dbfs_get_be64((unsigned char *)k.mv_data + 8), ino, type,
			(const char *)v.mv_data + 12, v.mv_size - 12);
		if (rc)
			break;
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
