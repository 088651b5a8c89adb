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

/* Read (or, with `remove`, delete) the attribute `name` of `ino`. A name too
 * long to have been stored is simply not there: ENODATA, as on ext4. */
static int xattr_find(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		      MDB_val *val, int remove)
{
	unsigned char kb[8 + DBFS_XATTR_NAME_MAX];
	MDB_val k;
	int rc = xattr_key(kb, ino, name, &k);
	if (rc)
		return rc == -ERANGE ? -ENODATA : rc;
	rc = remove ? dbfs_del(txn, fs->db_xattr, &k, NULL) : dbfs_get(txn, fs->db_xattr, &k, val);
	return rc == MDB_NOTFOUND ? -ENODATA : rc;
}

int dbfs_xattr_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		   MDB_val *val)
{
	return xattr_find(fs, txn, ino, name, val, 0);
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
	return xattr_find(fs, txn, ino, name, NULL, 1);
}

/* Visit every attribute of `ino` in name order. `visit` gets the cursor on
 * it (it may delete the item: MDB_NEXT then yields the one that followed)
 * and returns 0 to go on, or an error that ends the walk. */
static int xattr_each(struct dbfs *fs, MDB_txn *txn, uint64_t ino,
		      int (*visit)(MDB_cursor *c, const char *name, size_t len, void *arg),
		      void *arg)
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
		rc = visit(c, (const char *)k.mv_data + 8, k.mv_size - 8, arg);
		if (rc)
			break;
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

struct name_list {
	char *buf;
	size_t size, total;
	int privileged;
};

static int list_one(MDB_cursor *c, const char *name, size_t len, void *arg)
{
	struct name_list *l = arg;
	(void)c;
	/* trusted.* is visible to privileged callers only, as on ext4. */
	if (!l->privileged && len >= 8 && !memcmp(name, "trusted.", 8))
		return 0;
	if (l->size && l->total + len + 1 <= l->size) {
		memcpy(l->buf + l->total, name, len);
		l->buf[l->total + len] = '\0';
	}
	l->total += len + 1;
	return 0;
}

int dbfs_xattr_list(struct dbfs *fs, MDB_txn *txn, uint64_t ino, char *buf, size_t size,
		    size_t *need, int privileged)
{
	struct name_list l = {buf, size, 0, privileged};
	int rc = xattr_each(fs, txn, ino, list_one, &l);
	if (rc)
		return rc;
	*need = l.total;
	if (size && l.total > size)
		return -ERANGE;
	return 0;
}

struct delete_ctx {
	struct dbfs *fs;
	MDB_txn *txn;
	uint64_t ino;
};

static int delete_one(MDB_cursor *c, const char *name, size_t len, void *arg)
{
	const struct delete_ctx *d = arg;
	/* a schedule goes with the inode (expire.c); the name is in the map:
	 * compared before the delete */
	bool expiry = len == sizeof(DBFS_EXPIRE_XATTR) - 1 && !memcmp(name, DBFS_EXPIRE_XATTR, len);
	int rc = dbfs_cursor_del(c);
	if (!rc && expiry)
		rc = dbfs_expire_cancel(d->fs, d->txn, d->ino);
	return rc;
}

int dbfs_xattr_delete_all(struct dbfs *fs, MDB_txn *txn, uint64_t ino)
{
	struct delete_ctx d = {fs, txn, ino};
	return xattr_each(fs, txn, ino, delete_one, &d);
}
