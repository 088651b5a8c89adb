/*
 * Deferred reclaim of large files (issue 19): a file of DBFS_RECLAIM_MIN
 * or more whose last link went while nobody holds it is not destroyed by
 * the operation that let it go (the unlink, or the reap after the
 * kernel's forget): that transaction only marks it in the orphan table
 * (value "R": a reclaim is queued) and enqueues a message "reclaim" in the
 * queue "later" (expire_run.c), deliverable at once. The queue's thread
 * then frees its blocks in transactions of DBFS_FREE_MAX each
 * (dbfs_inode_destroy), none shared with a request, and acknowledges the
 * message in the transaction that deletes the inode. Until then the inode
 * and what it still holds count in the usage record, so statfs, quotas
 * and stats are exact at every commit, falling piece by piece; stats show
 * what waits (dbfs_expire_stats: reclaim_files, reclaim_bytes). After a
 * crash the message comes again and the freeing goes on where the last
 * piece committed; dbfs_open leaves "R" orphans to it instead of freeing
 * them before the mount.
 *
 * Truncation is not deferred: a shrinking truncate frees its blocks in
 * pieces before it returns (dbfs_op_free_piece).
 */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

static void orphan_key(uint64_t ino, unsigned char kb[8], MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	k->mv_size = 8;
	k->mv_data = kb;
}

bool dbfs_reclaim_marked(const MDB_val *orphan_val)
{
	return orphan_val->mv_size == 1 && *(const char *)orphan_val->mv_data == 'R';
}

int dbfs_reclaim_defer(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		       bool *deferred)
{
	unsigned char kb[8];
	MDB_val k, v;
	*deferred = false;
	if (!fs->expire || in->alloc < DBFS_RECLAIM_MIN)
		return 0;
	orphan_key(ino, kb, &k);
	int rc = dbfs_get(txn, fs->db_orphan, &k, &v);
	if (rc == 0 && dbfs_reclaim_marked(&v)) {
		*deferred = true; /* queued already: the thread has it */
		return 0;
	}
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	v.mv_size = 1;
	v.mv_data = "R";
	if ((rc = dbfs_put(txn, fs->db_orphan, &k, &v, 0)) ||
	    (rc = dbfs_later_enqueue(fs, txn, DBFS_LATER_RECLAIM, ino, 0)))
		return rc;
	*deferred = true;
	return 0;
}

int dbfs_reclaim_piece(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int *more)
{
	unsigned char kb[8];
	MDB_val k, v;
	struct dbfs_inode in;
	*more = 0;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc == -ENOENT)
		return 0; /* gone already (a piece committed before a crash) */
	if (rc)
		return rc;
	if (in.nlink)
		return 0; /* cannot be: a deferred file has no link; leave it */
	orphan_key(ino, kb, &k);
	rc = dbfs_get(txn, fs->db_orphan, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0; /* not ours to free */
	if (rc)
		return rc;
	return dbfs_inode_destroy(fs, txn, ino, more);
}

int dbfs_reclaim_pending(struct dbfs *fs, MDB_txn *txn, uint64_t *files, uint64_t *bytes)
{
	MDB_cursor *c;
	MDB_val k, v;
	*files = *bytes = 0;
	int rc = mdb_cursor_open(txn, fs->db_orphan, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct dbfs_inode in;
		if (k.mv_size != 8 || !dbfs_reclaim_marked(&v))
			continue;
		if (dbfs_inode_get(fs, txn, dbfs_get_be64(k.mv_data), &in))
			continue;
		(*files)++;
		*bytes += in.alloc;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
