/*
 * The map: where LMDB maps the store, and growing it. Growing remaps the
 * file, so it takes the map lock for writing (mdb_env_set_mapsize needs no
 * transaction active in this process).
 */
#include <string.h>
#include <time.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"

/*
 * Where LMDB mapped the store. mdb_env_info reports an address only for
 * MDB_FIXEDMAP, so derive it from a value read in the map: pages are
 * OS-page aligned and begin with their page number (MDB_page.mp_pgno).
 * Only used to prefault the map (space.c), where a wrong guess costs
 * nothing but speed. Call with no write transaction of this thread open.
 */
void dbfs_find_map(struct dbfs *fs)
{
	MDB_txn *t;
	MDB_val k = {2, (void *)"sb"}, v;
	MDB_envinfo info;
	MDB_stat st;
	fs->map_addr = NULL;
	dbfs_guard_maps(fs);
	mdb_env_info(fs->env, &info);
	mdb_env_stat(fs->env, &st);
	fs->map_size = info.me_mapsize;
	if (mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t))
		return;
	if (mdb_get(t, fs->db_super, &k, &v) == 0) {
		uintptr_t page = (uintptr_t)v.mv_data & ~(uintptr_t)(st.ms_psize - 1);
		uint64_t pgno;
		memcpy(&pgno, (void *)page, sizeof(pgno));
		if (pgno <= info.me_last_pgno)
			fs->map_addr = (const char *)(page - pgno * st.ms_psize);
	}
	mdb_txn_abort(t);
}

/* The map lock for writing, unless the store is lost (guard.c): a thread
 * cut short by a SIGBUS outside the read paths readtxn.c tracks may still
 * hold it for reading, so wait in steps and give up then. */
static int map_wrlock(struct dbfs *fs)
{
	struct timespec ts = {0, 0};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (;;) {
		if (atomic_load(&fs->map_lost))
			return EIO;
		ts.tv_nsec += 100 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_rwlock_clockwrlock(&fs->map_lock, CLOCK_MONOTONIC, &ts) == 0)
			break;
	}
	if (atomic_load(&fs->map_lost)) {
		pthread_rwlock_unlock(&fs->map_lock);
		return EIO; /* its map stays as it is */
	}
	return 0;
}

int dbfs_adopt_map(struct dbfs *fs)
{
	int rc = map_wrlock(fs);
	if (rc)
		return rc;
	rc = mdb_env_set_mapsize(fs->env, 0); /* the size the store's meta page says */
	if (!rc)
		dbfs_find_map(fs);
	pthread_rwlock_unlock(&fs->map_lock);
	return rc;
}

int dbfs_grow_map(struct dbfs *fs, uint64_t seen)
{
	int rc = map_wrlock(fs);
	if (rc)
		return rc;
	if (fs->map_size == seen) {
		uint64_t next = seen < (8ull << 30) ? seen * 2 : seen + (8ull << 30);
		rc = mdb_env_set_mapsize(fs->env, next);
		if (!rc) {
			dbfs_find_map(fs);
			fs->cnt.map_grows++;
		}
	}
	pthread_rwlock_unlock(&fs->map_lock);
	return rc;
}
