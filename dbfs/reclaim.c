/*
 * Deferred reclaim of large files (issue 19): a file of DBFS_RECLAIM_MIN
 * or more whose last link went while nobody holds it is not destroyed by
 * the operation that let it go (the unlink, or the reap after the
 * kernel's forget): that transaction only marks it in the orphan table
 * (value "R": a reclaim is queued) and tells the delivery thread of the
 * queue "later" (expire_run.c) at its commit. The thread then frees its
 * blocks in transactions of DBFS_FREE_MAX each, or of DBFS_FREE_NS where
 * the pages must come from the disk (dbfs_reclaim_step), none
 * shared with a request, one piece per turn of its round over the
 * stores; the last piece deletes the inode and its row. Until then the inode
 * and what it still holds count in the usage record, so statfs, quotas
 * and stats are exact at every commit, falling piece by piece; stats show
 * what waits (dbfs_expire_stats: reclaim_files, reclaim_bytes). After a
 * crash the rows are still there and the freeing goes on where the last
 * piece committed; dbfs_open leaves "R" orphans to it instead of freeing
 * them before the mount.
 *
 * A truncate that frees as much is deferred too, with rows of its own
 * (trim.c); the thread takes those after the orphans.
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
	if ((rc = dbfs_put(txn, fs->db_orphan, &k, &v, 0)))
		return rc;
	dbfs_later_reclaim_noted(fs);
	*deferred = true;
	return 0;
}

/* The first orphan marked "R": 0 with *ino, MDB_NOTFOUND, or a failure. */
static int first_marked(struct dbfs *fs, MDB_txn *txn, uint64_t *ino)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, fs->db_orphan, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size == 8 && dbfs_reclaim_marked(&v)) {
			*ino = dbfs_get_be64(k.mv_data);
			break;
		}
	mdb_cursor_close(c);
	return rc;
}

/* One piece of the reclaim of the unlinked file `ino`. */
static int orphan_piece(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int *finished)
{
	unsigned char kb[8];
	MDB_val k;
	struct dbfs_inode in;
	int more, rc = dbfs_inode_get(fs, txn, ino, &in);
	*finished = 0;
	if (rc && rc != -ENOENT)
		return rc;
	if (rc || in.nlink) {
		/* gone, or linked (cannot be): the row is stale, not ours */
		orphan_key(ino, kb, &k);
		return dbfs_del(txn, fs->db_orphan, &k, NULL);
	}
	if ((rc = dbfs_inode_destroy(fs, txn, ino, &more)))
		return rc;
	*finished = !more;
	return 0;
}

int dbfs_reclaim_step(struct dbfs *fs, MDB_txn *txn, int *did, int *finished)
{
	uint64_t ino = 0;
	*did = *finished = 0;
	int rc = first_marked(fs, txn, &ino);
	if (rc == 0) {
		*did = 1;
		return orphan_piece(fs, txn, ino, finished);
	}
	if (rc != MDB_NOTFOUND)
		return rc;
	return dbfs_trim_step(fs, txn, did, finished); /* truncated files' blocks (trim.c) */
}

void dbfs_reclaim_prefetch(struct dbfs *fs, uint64_t bytes)
{
	MDB_txn *txn;
	uint64_t ino = 0;
	if (dbfs_read_begin(fs, &txn))
		return;
	int rc = first_marked(fs, txn, &ino);
	if (rc == 0) /* dbfs_inode_destroy frees from the first block up */
		dbfs_data_prefetch(fs, txn, ino, 0, UINT64_MAX, false, bytes);
	else if (rc == MDB_NOTFOUND)
		dbfs_trim_prefetch(fs, txn, bytes);
	dbfs_read_end(fs, txn);
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
	if (rc != MDB_NOTFOUND)
		return rc;
	uint64_t tf, tb;
	if ((rc = dbfs_trim_pending(fs, txn, &tf, &tb)))
		return rc;
	*files += tf;
	*bytes += tb;
	return 0;
}
