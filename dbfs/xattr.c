/* Extended attributes (table "xattr"), keyed by (ino, name). */
#include <errno.h>
#include <string.h>
#include <sys/xattr.h>

#include "dbfs/expire.h"
#include "dbfs/internal.h"

static int xattr_key(unsigned char *kb, uint64_t ino, const char *name, MDB_val *k)
{
	size_t len = strlen(name);
	if (len == 0)
		return -EINVAL;
	if (len > DBFS_XATTR_NAME_MAX)
		return -ERANGE;
	dbfs_put_be64(kb, ino);
	memcpy(kb + 8, name, len);
	k->mv_size = 8 + len;
	k->mv_data = kb;
	return 0;
}

int dbfs_xattr_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		   MDB_val *val)
{
	unsigned char kb[8 + DBFS_XATTR_NAME_MAX];
	MDB_val k;
	int rc = xattr_key(kb, ino, name, &k);
	if (rc)
		return rc == -ERANGE ? -ENODATA : rc;
	rc = dbfs_get(txn, fs->db_xattr, &k, val);
	return rc == MDB_NOTFOUND ? -ENODATA : rc;
}

int dbfs_xattr_set(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		   const void *val, size_t len, int flags)
{
	unsigned char kb[8 + DBFS_XATTR_NAME_MAX];
	MDB_val k, v;
	int rc = xattr_key(kb, ino, name, &k);
	if (rc)
		return rc;
	if (len > DBFS_XATTR_MAX)
		return -E2BIG;
	if (flags & (XATTR_CREATE | XATTR_REPLACE)) {
		rc = dbfs_get(txn, fs->db_xattr, &k, &v);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
		if ((flags & XATTR_CREATE) && rc == 0)
			return -EEXIST;
		if ((flags & XATTR_REPLACE) && rc == MDB_NOTFOUND)
			return -ENODATA;
	}
	v.mv_size = len;
	rc = dbfs_put(txn, fs->db_xattr, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	if (len)
		memcpy(v.mv_data, val, len);
	return 0;
}

int dbfs_xattr_remove(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name)
{
	unsigned char kb[8 + DBFS_XATTR_NAME_MAX];
	MDB_val k;
	int rc = xattr_key(kb, ino, name, &k);
	if (rc)
		return rc == -ERANGE ? -ENODATA : rc;
	rc = dbfs_del(txn, fs->db_xattr, &k, NULL);
	return rc == MDB_NOTFOUND ? -ENODATA : rc;
}

int dbfs_xattr_list(struct dbfs *fs, MDB_txn *txn, uint64_t ino, char *buf, size_t size,
		    size_t *need, int privileged)
{
	unsigned char kb[8];
	MDB_cursor *c;
	MDB_val k = {8, kb}, v;
	size_t total = 0;
	dbfs_put_be64(kb, ino);
	int rc = mdb_cursor_open(txn, fs->db_xattr, &c);
	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > 8 && dbfs_get_be64(k.mv_data) == ino) {
		const char *name = (const char *)k.mv_data + 8;
		size_t len = k.mv_size - 8;
		/* trusted.* is visible to privileged callers only, as on ext4. */
		if (privileged || len < 8 || memcmp(name, "trusted.", 8)) {
			if (size && total + len + 1 <= size) {
				memcpy(buf + total, name, len);
				buf[total + len] = '\0';
			}
			total += len + 1;
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	*need = total;
	if (size && total > size)
		return -ERANGE;
	return 0;
}

int dbfs_xattr_delete_all(struct dbfs *fs, MDB_txn *txn, uint64_t ino)
{
	unsigned char kb[8];
	MDB_cursor *c;
	MDB_val k = {8, kb}, v;
	dbfs_put_be64(kb, ino);
	int rc = mdb_cursor_open(txn, fs->db_xattr, &c);
	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size > 8 && dbfs_get_be64(k.mv_data) == ino) {
		/* a schedule goes with the inode (expire.c) */
		bool expiry = k.mv_size == 8 + sizeof(DBFS_EXPIRE_XATTR) - 1 &&
			      !memcmp((char *)k.mv_data + 8, DBFS_EXPIRE_XATTR, k.mv_size - 8);
		rc = dbfs_cursor_del(c);
		if (!rc && expiry)
			rc = dbfs_expire_cancel(fs, txn, ino);
		if (rc)
			break;
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
