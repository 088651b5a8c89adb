/*
 * The read-transaction pool: read transactions are reset and kept in a
 * small pool rather than freed, since renewing keeps the LMDB reader slot
 * and skips an allocation. A reset transaction holds no snapshot, so a
 * pooled one keeps no page from being reused.
 *
 * Each transaction taken is noted for the map guard (guard.c), which gives
 * it and its map lock back when a SIGBUS cuts the request short; a store
 * whose maps faulted is not read again (-EIO).
 */
#include "dbfs/guard.h"
#include "dbfs/internal.h"

int dbfs_read_begin(struct dbfs *fs, MDB_txn **txn)
{
	MDB_txn *t = NULL;
	if (atomic_load(&fs->map_lost))
		return -EIO;
	pthread_rwlock_rdlock(&fs->map_lock);
	pthread_mutex_lock(&fs->rpool_lock);
	if (fs->rpool_n)
		t = fs->rpool[--fs->rpool_n];
	pthread_mutex_unlock(&fs->rpool_lock);
	dbfs_guard_read_taken(fs, t);
	if (t) {
		if (mdb_txn_renew(t) == 0) {
			*txn = t;
			return 0;
		}
		dbfs_guard_read_txn(NULL); /* a fault in the abort leaks it, never twice */
		mdb_txn_abort(t);
	}
	int rc = mdb_txn_begin(fs->env, NULL, MDB_RDONLY, txn);
	if (rc == MDB_MAP_RESIZED) {
		/* Another process grew the map (shared stores). */
		pthread_rwlock_unlock(&fs->map_lock);
		pthread_rwlock_wrlock(&fs->map_lock);
		mdb_env_set_mapsize(fs->env, 0);
		dbfs_find_map(fs);
		pthread_rwlock_unlock(&fs->map_lock);
		pthread_rwlock_rdlock(&fs->map_lock);
		rc = mdb_txn_begin(fs->env, NULL, MDB_RDONLY, txn);
	}
	if (rc) {
		/* LMDB refuses every transaction after a failed meta page write
		 * (its own or the change feed's queue's): the store has failed */
		if (rc == MDB_PANIC)
			dbfs_health_check(fs, rc, "a write of the store");
		dbfs_guard_read_given(NULL);
		pthread_rwlock_unlock(&fs->map_lock);
	} else {
		dbfs_guard_read_txn(*txn);
	}
	return rc;
}

void dbfs_read_end(struct dbfs *fs, MDB_txn *txn)
{
	MDB_txn *t = txn;
	mdb_txn_reset(txn);
	pthread_mutex_lock(&fs->rpool_lock);
	if (fs->rpool_n < DBFS_RPOOL) {
		fs->rpool[fs->rpool_n++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&fs->rpool_lock);
	if (txn)
		mdb_txn_abort(txn);
	dbfs_guard_read_given(t);
	pthread_rwlock_unlock(&fs->map_lock);
}
