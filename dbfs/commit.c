/*
 * Group commit.
 *
 * LMDB allows one writer per environment and a synced commit costs hundreds
 * of microseconds on a disk, so concurrent write operations share commits:
 * each writer queues its operation; whoever finds no leader becomes the
 * leader, takes every queued operation, runs them in one transaction,
 * commits once and wakes their owners. Operations that arrive meanwhile
 * form the next batch. No timer: a lone writer commits at once.
 *
 * An operation checks everything that can fail for a logical reason before
 * its first change (see dbfs_write_fn); when one still fails after changing
 * something (an LMDB error), the whole batch is aborted and every operation
 * is run again alone, so one failure never leaks into another's commit.
 * MDB_MAP_FULL aborts, grows the map and retries.
 */
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "dbfs/internal.h"

#define BATCH_MAX 64

struct dbfs_wop {
	struct dbfs_wop *next;
	dbfs_write_fn fn;
	void *arg;
	int rc;
	int done;
};

static int grow_map(struct dbfs *fs, uint64_t seen)
{
	int rc = 0;
	pthread_rwlock_wrlock(&fs->map_lock);
	if (fs->map_size == seen) {
		uint64_t next = seen < (1ull << 30) ? seen * 2 : seen + (1ull << 30);
		rc = mdb_env_set_mapsize(fs->env, next);
		if (!rc) {
			MDB_envinfo info;
			mdb_env_info(fs->env, &info);
			fs->map_size = info.me_mapsize;
			fs->map_addr = info.me_mapaddr;
			fs->cnt.map_grows++;
		}
	}
	pthread_rwlock_unlock(&fs->map_lock);
	return rc;
}

/* LMDB reports a short write of its pages as EIO; when the store's file
 * system is out of space, that is ENOSPC to the writer. */
static int commit_error(struct dbfs *fs, int rc)
{
	struct statvfs sv;
	if (rc == EIO && statvfs(fs->dir, &sv) == 0 &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < (16u << 20))
		return ENOSPC;
	return rc;
}

/*
 * Space reserve. LMDB extends its file by writing pages past the end, and a
 * full file system turns that into a failed commit; worse, even a delete
 * needs fresh pages (copy-on-write), so a store that filled its disk could
 * not free anything. We keep a reserve (reserve_for) allocated past the last
 * page LMDB uses; when the reserve cannot be restored, operations that
 * need space fail with ENOSPC before they change anything (see
 * dbfs_space_check) while deletes proceed inside the reserve.
 */
#define RESERVE_MIN (256u << 10)
#define RESERVE_MAX (8u << 20)

/* The reserve scales with the store, so that a thousand small stores do
 * not pin gigabytes, and a large one can still delete. */
static uint64_t reserve_for(uint64_t used)
{
	uint64_t r = used / 8;
	return r < RESERVE_MIN ? RESERVE_MIN : r > RESERVE_MAX ? RESERVE_MAX : r;
}

/* Bytes in LMDB's free list (pages that deletes gave back). */
static uint64_t free_bytes(struct dbfs *fs, unsigned psize)
{
	if (!psize) {
		MDB_stat st;
		mdb_env_stat(fs->env, &st);
		psize = st.ms_psize;
	}
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t pages = 0;
	if (dbfs_read_begin(fs, &t))
		return 0;
	if (mdb_cursor_open(t, 0 /* FREE_DBI */, &c) == 0) {
		while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
			if (v.mv_size >= sizeof(size_t))
				pages += *(size_t *)v.mv_data;
		mdb_cursor_close(c);
	}
	dbfs_read_end(fs, t);
	return pages * psize;
}

uint64_t dbfs_slack_bytes(struct dbfs *fs)
{
	MDB_envinfo info;
	MDB_stat st;
	struct stat sb;
	int fd;
	if (mdb_env_get_fd(fs->env, &fd) || fstat(fd, &sb))
		return 0;
	mdb_env_info(fs->env, &info);
	mdb_env_stat(fs->env, &st);
	uint64_t used = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
	uint64_t tail = (uint64_t)sb.st_size > used ? (uint64_t)sb.st_size - used : 0;
	return tail + free_bytes(fs, st.ms_psize);
}

static void space_refresh(struct dbfs *fs)
{
	MDB_envinfo info;
	MDB_stat st;
	struct stat sb;
	int fd;
	if (mdb_env_get_fd(fs->env, &fd) || fstat(fd, &sb))
		return;
	mdb_env_info(fs->env, &info);
	mdb_env_stat(fs->env, &st);
	uint64_t used = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
	uint64_t have = (uint64_t)sb.st_size > used ? (uint64_t)sb.st_size - used : 0;
	uint64_t want = reserve_for(used);
	if (have >= want) {
		fs->space_low = 0;
		return;
	}
	/* Allocate twice the shortfall so this runs once per reserve's worth
	 * of growth, not at every commit. */
	if (fallocate(fd, 0, sb.st_size, (off_t)(2 * want - have)) == 0 ||
	    fallocate(fd, 0, sb.st_size, (off_t)(want - have)) == 0) {
		fs->space_low = 0;
		return;
	}
	if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
		fs->space_low = free_bytes(fs, st.ms_psize) < 2 * want;
	/* EOPNOTSUPP and friends: no reserve on this file system; the EIO to
	 * ENOSPC mapping at commit is all we have. */
}

/* Run ops [0, n) in one transaction. Returns 0 when committed (each op's rc
 * set), or the store error that aborted the batch. */
static int run_batch(struct dbfs *fs, struct dbfs_wop **ops, int n)
{
	space_refresh(fs);
	for (;;) {
		MDB_txn *txn;
		pthread_rwlock_rdlock(&fs->map_lock);
		uint64_t seen = fs->map_size;
		int rc = mdb_txn_begin(fs->env, NULL, 0, &txn);
		if (rc) {
			pthread_rwlock_unlock(&fs->map_lock);
			return rc;
		}
		int failed = 0;
		for (int i = 0; i < n && !failed; i++) {
			int r = ops[i]->fn(fs, txn, ops[i]->arg);
			ops[i]->rc = r;
			/* A logical refusal (negative errno) changed nothing; a store
			 * error may have left partial changes. */
			if (r && !(r < 0 && r > -4096))
				failed = r;
		}
		if (failed) {
			mdb_txn_abort(txn);
			pthread_rwlock_unlock(&fs->map_lock);
			if (failed == MDB_MAP_FULL) {
				rc = grow_map(fs, seen);
				if (rc)
					return rc;
				continue;
			}
			return failed;
		}
		rc = mdb_txn_commit(txn);
		pthread_rwlock_unlock(&fs->map_lock);
		if (rc == MDB_MAP_FULL) {
			rc = grow_map(fs, seen);
			if (rc)
				return rc;
			continue;
		}
		if (rc)
			return commit_error(fs, rc);
		fs->cnt.commits++;
		if (n > 1)
			fs->cnt.batched_ops += n;
		return 0;
	}
}

static void lead(struct dbfs *fs, struct dbfs_wop **ops, int n)
{
	int rc = run_batch(fs, ops, n);
	if (rc && n > 1) {
		for (int i = 0; i < n; i++) {
			rc = run_batch(fs, &ops[i], 1);
			if (rc)
				ops[i]->rc = rc;
		}
	} else if (rc) {
		ops[0]->rc = rc;
	}
}

int dbfs_write(struct dbfs *fs, dbfs_write_fn fn, void *arg)
{
	struct dbfs_wop op = {.fn = fn, .arg = arg};

	if (fs->opt.read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->wq_lock);
	*fs->wq_tail = &op;
	fs->wq_tail = &op.next;
	while (!op.done) {
		if (fs->wq_leader) {
			pthread_cond_wait(&fs->wq_cond, &fs->wq_lock);
			continue;
		}
		fs->wq_leader = 1;
		struct dbfs_wop *batch[BATCH_MAX];
		int n = 0;
		while (fs->wq_head && n < BATCH_MAX) {
			batch[n++] = fs->wq_head;
			fs->wq_head = fs->wq_head->next;
		}
		if (!fs->wq_head)
			fs->wq_tail = &fs->wq_head;
		pthread_mutex_unlock(&fs->wq_lock);

		lead(fs, batch, n);

		pthread_mutex_lock(&fs->wq_lock);
		for (int i = 0; i < n; i++)
			batch[i]->done = 1;
		fs->wq_leader = 0;
		pthread_cond_broadcast(&fs->wq_cond);
	}
	pthread_mutex_unlock(&fs->wq_lock);
	return op.rc;
}
