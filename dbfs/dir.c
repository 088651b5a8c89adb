/* Directory entries: "dirent" for lookups by name (O(log n)), "dircook"
 * for readdir in cookie order (stable offsets), and the child inode's
 * names (names.c: in its record, or an ilink row). */
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
		 const char *name, size_t len, uint64_t ino, struct dbfs_inode *cin)
{
	struct dbfs_dirent_val dv = {.ino = ino, .cookie = din->next_cookie++,
				     .type = cin->mode & S_IFMT};
	int rc = put_entry(fs, txn, dir, name, len, &dv, MDB_NOOVERWRITE, true);
	if (!rc)
		rc = dbfs_name_added(fs, txn, ino, cin, dir, dv.cookie, name, len);
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
	return put_entry(fs, txn, dir, name, len, &dv, 0, false);
}

int dbfs_dir_remove(struct dbfs *fs, MDB_txn *txn, uint64_t dir, struct dbfs_inode *din,
		    const char *name, size_t len, const struct dbfs_dirent_val *dv,
		    struct dbfs_inode *cin)
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
		rc = dbfs_name_removed(fs, txn, dv->ino, cin, dir, dv->cookie, name, len);
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
