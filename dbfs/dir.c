/* Directory entries: "dirent" for lookups by name (O(log n)), "dircook"
 * for readdir in cookie order (stable offsets). */
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

int dbfs_dir_add(struct dbfs *fs, MDB_txn *txn, uint64_t dir, struct dbfs_inode *din,
		 const char *name, size_t len, uint64_t ino, uint32_t type)
{
	unsigned char kb[8 + DBFS_NAME_MAX];
	MDB_val k, v;
	struct dbfs_dirent_val dv = {.ino = ino, .cookie = din->next_cookie++, .type = type};
	dirent_key(kb, dir, name, len, &k);
	v.mv_size = sizeof(dv);
	v.mv_data = &dv;
	int rc = dbfs_put(txn, fs->db_dirent, &k, &v, MDB_NOOVERWRITE);
	if (rc)
		return rc;

	unsigned char ck[16];
	dbfs_put_be64(ck, dir);
	dbfs_put_be64(ck + 8, dv.cookie);
	k.mv_size = 16;
	k.mv_data = ck;
	v.mv_size = 12 + len;
	rc = dbfs_put(txn, fs->db_dircook, &k, &v, MDB_RESERVE | MDB_APPEND);
	if (rc == MDB_KEYEXIST) /* not the last key of the table: insert */
		rc = dbfs_put(txn, fs->db_dircook, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	memcpy(v.mv_data, &ino, 8);
	memcpy((char *)v.mv_data + 8, &type, 4);
	memcpy((char *)v.mv_data + 12, name, len);
	din->nentries++;
	return 0;
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
	dbfs_put_be64(ck, dir);
	dbfs_put_be64(ck + 8, dv->cookie);
	k.mv_size = 16;
	k.mv_data = ck;
	rc = dbfs_del(txn, fs->db_dircook, &k, NULL);
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
	dbfs_put_be64(ck, dir);
	dbfs_put_be64(ck + 8, from);
	k.mv_size = 16;
	k.mv_data = ck;
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
