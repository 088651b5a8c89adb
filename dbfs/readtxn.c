/*
 * The read-transaction pool: read transactions are reset and kept in a
 * small pool rather than freed, since renewing keeps the LMDB reader slot
 * and skips an allocation. A reset transaction holds no snapshot, so a
 * pooled one keeps no page from being reused.
 */
#include "dbfs/internal.h"

int dbfs_read_begin(struct dbfs *fs, MDB_txn **txn)
{
	MDB_txn *t = NULL;
	pthread_rwlock_rdlock(&fs->map_lock);
	pthread_mutex_lock(&fs->rpool_lock);
	if (fs->rpool_n)
		t = fs->rpool[--fs->rpool_n];
	pthread_mutex_unlock(&fs->rpool_lock);
	if (t) {
		if (mdb_txn_renew(t) == 0) {
			*txn = t;
			return 0;
		}
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
	if (rc)
		pthread_rwlock_unlock(&fs->map_lock);
	return rc;
}

void dbfs_read_end(struct dbfs *fs, MDB_txn *txn)
{
	mdb_txn_reset(txn);
	pthread_mutex_lock(&fs->rpool_lock);
	if (fs->rpool_n < DBFS_RPOOL) {
		fs->rpool[fs->rpool_n++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&fs->rpool_lock);
	if (txn)
		mdb_txn_abort(txn);
	pthread_rwlock_unlock(&fs->map_lock);
}
