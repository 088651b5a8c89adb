/*
 * The pages a durable point's pin keeps from reuse, and the point they ask
 * for when there are too many of them (durable.c).
 *
 * LMDB 0.9 keeps the pages each commit freed in one free-list record under
 * that commit's id, and reuses a record only when every reader's snapshot
 * is newer (mdb_page_alloc: records with key < the oldest reader). The pin
 * of the durable point T is such a reader, so no page freed after T is
 * reused before the next point, not even one that a commit after T wrote
 * and a later one freed again (T's tree never had it): the two kinds share
 * their records, LMDB 0.9 keeps no page's writer, and a write transaction
 * may not change FREE_DBI (mdb_cursor_open: EINVAL), so they cannot be told
 * apart or moved. Every copy-on-write of a burst then takes a new page at
 * the end of the file: a tar -x of 5,000 small files (27,000 commits, 11
 * pages each) grew data.mdb from 2.6 MB to 1.2 GB within one
 * commit_interval, where a flush per commit needs 29 MB.
 *
 * So the pin's price is bounded the way libmdbx bounds its own (gc-get.c:
 * when reclaiming stops at the last steady point and the file would have
 * to grow, it makes a steady point first): the leader counts the pages each
 * commit freed (its free-list record, read through a read transaction of
 * its own, reset between commits), and once those freed since the durable
 * point pass the limit (DBFS_HELD_MIN pages, or an eighth of the pages the
 * file uses, at most DBFS_HELD_MAX), it asks its owner once for a point
 * (the callback; the owner's dbfs_tick makes it, on a thread that may wait
 * for the disk, while the writers go on). After that point, everything freed before
 * its pin is reused, so the file holds about two limits of churn more than
 * its live pages. A writer that frees pages faster than the disk takes
 * them (a burst's copy-on-write is written once per point: 1.2 GB for that
 * tar) would outrun the points: past DBFS_HELD_HARD limits, each writer
 * waits for the point in progress after its commit, and makes one itself
 * if the pages are still over (dbfs_held_throttle), as the kernel holds
 * back a process that dirties pages faster than they are written back. A
 * point asked for this way is an ordinary one: the power-loss promise is
 * the same, only made sooner.
 */
#include <string.h>

#include "dbfs/internal.h"

#define FREE_DBI 0 /* lmdb.h keeps it private */

/* The limit for a file whose last used page is last_pgno. */
static uint64_t held_limit(uint64_t last_pgno)
{
	uint64_t l = (last_pgno + 1) / 8;
	return l < DBFS_HELD_MIN ? DBFS_HELD_MIN : l > DBFS_HELD_MAX ? DBFS_HELD_MAX : l;
}

/* Pages that the records (after, upto] of t's free list name. 0 when the
 * list cannot be read (the pressure is then the next commit's to see). */
static uint64_t freed_between(struct dbfs *fs, MDB_txn *t, uint64_t after, uint64_t upto)
{
	MDB_cursor *c = fs->held_cur;
	if (c ? mdb_cursor_renew(t, c) : mdb_cursor_open(t, FREE_DBI, &c))
		return 0;
	fs->held_cur = c;
	size_t from = (size_t)after + 1, key, n;
	uint64_t sum = 0;
	MDB_val k = {sizeof(from), &from}, v;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != sizeof(key) || v.mv_size < sizeof(n))
			break;
		memcpy(&key, k.mv_data, sizeof(key));
		if (key > upto)
			break;
		memcpy(&n, v.mv_data, sizeof(n));
		sum += n;
	}
	return sum;
}

void dbfs_held_committed(struct dbfs *fs, const MDB_envinfo *info)
{
	uint64_t txnid = info->me_last_txnid;
	if (fs->dur_trust || fs->dur_fd < 0 || !fs->held_cb || txnid <= fs->held_counted)
		return;
	MDB_txn *t = fs->held_txn;
	if (t ? mdb_txn_renew(t) : mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t))
		return;
	fs->held_txn = t;
	/* the snapshot is txnid's: this thread is the only writer */
	fs->held_total += freed_between(fs, t, fs->held_counted, txnid);
	mdb_txn_reset(t);
	fs->held_counted = txnid;
	uint64_t held = fs->held_total - atomic_load(&fs->held_base);
	uint64_t limit = held_limit(info->me_last_pgno);
	if (held >= DBFS_HELD_HARD * limit && !atomic_load(&fs->held_hard))
		atomic_store(&fs->held_hard, true); /* writers wait (dbfs_held_throttle) */
	if (atomic_load(&fs->held_asked) || held < limit)
		return;
	atomic_store(&fs->held_asked, true);
	fs->cnt.flushes_held++;
	fs->held_cb(fs->held_cb_arg);
}

void dbfs_held_throttle(struct dbfs *fs)
{
	if (!atomic_load(&fs->held_hard))
		return;
	/* The point in progress, if any, may bring the pages under the
	 * limit: wait for it first (dur_lock is held across a point). */
	pthread_mutex_lock(&fs->dur_lock);
	pthread_mutex_unlock(&fs->dur_lock);
	if (atomic_load(&fs->held_hard))
		(void)dbfs_durable_point(fs); /* a failure: health.c has it */
}

void dbfs_held_pinned(struct dbfs *fs)
{
	fs->held_at_pin = fs->held_total;
}

void dbfs_held_moved(struct dbfs *fs)
{
	atomic_store(&fs->held_base, fs->held_at_pin);
	atomic_store(&fs->held_asked, false);
	atomic_store(&fs->held_hard, false); /* the next commit sees again */
}

bool dbfs_held_due(struct dbfs *fs)
{
	return atomic_load(&fs->held_asked);
}

void dbfs_held_start(struct dbfs *fs, uint64_t txnid)
{
	fs->held_counted = txnid;
}

void dbfs_held_stop(struct dbfs *fs)
{
	if (fs->held_cur)
		mdb_cursor_close(fs->held_cur);
	if (fs->held_txn)
		mdb_txn_abort(fs->held_txn);
	fs->held_cur = NULL;
	fs->held_txn = NULL;
}

void dbfs_set_point_callback(struct dbfs *fs, void (*cb)(void *arg), void *arg)
{
	pthread_mutex_lock(&fs->wq_lock); /* the leader reads them */
	while (fs->wq_leader)
		pthread_cond_wait(&fs->wq_cond, &fs->wq_lock);
	fs->held_cb = cb;
	fs->held_cb_arg = arg;
	pthread_mutex_unlock(&fs->wq_lock);
}

bool dbfs_point_wanted(struct dbfs *fs)
{
	return dbfs_held_due(fs);
}
