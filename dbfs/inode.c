/* Inode records (table "inode") and their life cycle (table "orphan"). */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

/* The size of the fixed part of records written in this store: format 4
 * and older lack name_cookie (read as 0; a read-write open upgrades them
 * first, upgrade5.c, and writes the new size while it does). */
static size_t inode_fixed(const struct dbfs *fs)
{
	return fs->sb_version >= 5 || fs->upgrading ? sizeof(struct dbfs_inode)
						    : DBFS_INODE_V4_SIZE;
}

/* ... and of the record `v` read: below format 5 either size (an upgrade
 * in pieces, format.h). */
static size_t record_fixed(const struct dbfs *fs, const MDB_val *v)
{
	if (fs->sb_version >= 5)
		return sizeof(struct dbfs_inode);
	return dbfs_inode_fixed_mixed(v->mv_data, v->mv_size);
}

/* The inode record of `ino`, checked to hold at least its fixed part,
 * copied into *in; *v points at it in the map. */
static int inode_record(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
			MDB_val *v)
{
	unsigned char kb[8];
	dbfs_put_be64(kb, ino);
	MDB_val k = {8, kb};
	int rc = dbfs_get(txn, fs->db_inode, &k, v);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return rc;
	size_t fixed = record_fixed(fs, v);
	if (v->mv_size < fixed)
		return -EIO;
	if (fixed < sizeof(*in))
		memset(in, 0, sizeof(*in));
	memcpy(in, v->mv_data, fixed);
	return 0;
}

int dbfs_inode_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in)
{
	MDB_val v;
	return inode_record(fs, txn, ino, in, &v);
}

int dbfs_inode_get_link(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char **target,
			size_t *len)
{
	struct dbfs_inode in;
	MDB_val v;
	int rc = inode_record(fs, txn, ino, &in, &v);
	if (rc)
		return rc;
	if (!S_ISLNK(in.mode))
		return -EINVAL;
	*target = (const char *)v.mv_data + record_fixed(fs, &v);
	*len = v.mv_size - record_fixed(fs, &v);
	return 0;
}

int dbfs_inode_put_link(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
			const char *target, size_t len)
{
	unsigned char kb[8];
	dbfs_put_be64(kb, ino);
	size_t fixed = inode_fixed(fs);
	MDB_val k = {8, kb}, v = {fixed + len, NULL};
	int rc = dbfs_put(txn, fs->db_inode, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	memcpy(v.mv_data, in, fixed);
	if (len)
		memcpy((char *)v.mv_data + fixed, target, len);
	return 0;
}

int dbfs_inode_put(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in)
{
	if (S_ISLNK(in->mode)) {
		/* Keep the target that follows the fixed part. */
		unsigned char kb[8];
		dbfs_put_be64(kb, ino);
		MDB_val k = {8, kb}, v;
		int rc = dbfs_get(txn, fs->db_inode, &k, &v);
		if (rc && rc != MDB_NOTFOUND)
			return rc; /* not a symlink without its target */
		size_t fixed = rc == 0 ? record_fixed(fs, &v) : 0;
		if (rc == 0 && v.mv_size > fixed) {
			char tmp[DBFS_SYMLINK_MAX + 1];
			size_t len = v.mv_size - fixed;
			if (len > DBFS_SYMLINK_MAX)
				return MDB_CORRUPTED; /* a store failure: aborts the batch */
			memcpy(tmp, (char *)v.mv_data + fixed, len);
			return dbfs_inode_put_link(fs, txn, ino, in, tmp, len);
		}
	}
	return dbfs_inode_put_link(fs, txn, ino, in, NULL, 0);
}

void dbfs_inode_to_stat(const struct dbfs_inode *in, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = (off_t)in->size;
	if (S_ISDIR(in->mode))
		st->st_size = (off_t)((in->nentries + 2) * 32);
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)(in->alloc / 512);
	st->st_atim.tv_sec = in->atime_sec;
	st->st_atim.tv_nsec = in->atime_nsec;
	st->st_mtim.tv_sec = in->mtime_sec;
	st->st_mtim.tv_nsec = in->mtime_nsec;
	st->st_ctim.tv_sec = in->ctime_sec;
	st->st_ctim.tv_nsec = in->ctime_nsec;
}

static int orphan_key(uint64_t ino, unsigned char *kb, MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	k->mv_size = 8;
	k->mv_data = kb;
	return 0;
}

int dbfs_inode_destroy(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int *more)
{
	struct dbfs_inode in;
	int64_t dalloc = 0;
	unsigned char kb[8];
	MDB_val k, v = {0, NULL};
	*more = 0;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	/* blocks a truncate left to the reclaim go with the rest (trim.c) */
	if ((rc = dbfs_trim_drop(fs, txn, ino, &in)) ||
	    (rc = dbfs_data_delete_some(fs, txn, ino, &dalloc, more)))
		return rc;
	orphan_key(ino, kb, &k);
	if (*more) {
		/* The rest goes in later transactions; until then the inode, with
		 * what it still holds, waits in the orphan table (also across a
		 * crash: dbfs_open goes on). */
		in.alloc += (uint64_t)dalloc;
		if ((rc = dbfs_inode_put(fs, txn, ino, &in)))
			return rc;
		/* an orphan row stays as it is: its mark says who frees it */
		rc = dbfs_put(txn, fs->db_orphan, &k, &v, MDB_NOOVERWRITE);
		if (rc && rc != MDB_KEYEXIST)
			return rc;
		return dbfs_usage_add(fs, txn, dalloc, 0);
	}
	if ((rc = dbfs_xattr_delete_all(fs, txn, ino)))
		return rc;
	if ((rc = dbfs_del(txn, fs->db_inode, &k, NULL)))
		return rc;
	rc = dbfs_del(txn, fs->db_orphan, &k, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	return dbfs_usage_add(fs, txn, -(int64_t)in.alloc, -1);
}

int dbfs_inode_unlinked(struct dbfs *fs, MDB_txn *txn, uint64_t ino)
{
	/* shared: another process may hold it open; an open or close that
	 * finds the store no longer shared reclaims it (dbfs/shared.h) */
	if (!fs->shared && dbfs_lookups_count(&fs->lookups, ino) == 0) {
		struct dbfs_inode in;
		bool later = false;
		int more, rc = dbfs_inode_get(fs, txn, ino, &in);
		if (!rc)
			rc = dbfs_reclaim_defer(fs, txn, ino, &in, &later);
		if (rc || later)
			return rc; /* a large file: freed in the background (reclaim.c) */
		rc = dbfs_inode_destroy(fs, txn, ino, &more);
		if (!rc && more)
			dbfs_reap_queue(fs, ino);
		return rc;
	}
	unsigned char kb[8];
	MDB_val k, v = {0, NULL};
	orphan_key(ino, kb, &k);
	return dbfs_put(txn, fs->db_orphan, &k, &v, 0);
}

int dbfs_orphans_reclaim(struct dbfs *fs, MDB_txn *txn, uint64_t *count, int *more)
{
	*more = 0;
	unsigned char from[8] = {0};
	for (;;) {
		MDB_cursor *c;
		MDB_val k = {8, from}, v;
		int rc = mdb_cursor_open(txn, fs->db_orphan, &c);
		if (rc)
			return rc;
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		/* those marked for the background reclaim (reclaim.c) go on there */
		while (rc == 0 && k.mv_size == 8 && dbfs_reclaim_marked(&v) && fs->db_expire)
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		uint64_t ino = rc == 0 && k.mv_size == 8 ? dbfs_get_be64(k.mv_data) : 0;
		mdb_cursor_close(c);
		if (ino)
			dbfs_put_be64(from, ino);
		if (rc == MDB_NOTFOUND)
			return 0;
		if (rc)
			return rc;
		if (!ino)
			return -EIO;
		if (fs->shared && dbfs_lookups_count(&fs->lookups, ino)) {
			dbfs_put_be64(from, ino + 1); /* this kernel holds it: later */
			continue;
		}
		if ((rc = dbfs_inode_destroy(fs, txn, ino, more)) || *more)
			return rc;
		/* destroy deletes the orphan key only if the inode existed */
		unsigned char kb[8];
		orphan_key(ino, kb, &k);
		rc = dbfs_del(txn, fs->db_orphan, &k, NULL);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
		(*count)++;
	}
}
