/*
 * The reap queue: inodes the kernel forgot, to destroy if they have no
 * links left. They are reaped in the next write batch (commit.c takes the
 * queue), by statfs, dbfs_tick or close, so that an unlink does not cost a
 * second commit.
 */
#include <stdlib.h>

#include "dbfs/internal.h"
#include "dbfs/shared.h"

/* Append ino to the reap queue; returns the queue's length. */
static size_t reap_append(struct dbfs *fs, uint64_t ino)
{
	size_t n = 0;
	pthread_mutex_lock(&fs->reap_lock);
	if (fs->nreap == fs->capreap) {
		size_t cap = fs->capreap ? fs->capreap * 2 : 64;
		uint64_t *r = realloc(fs->reap, cap * sizeof(*r));
		if (r) {
			fs->reap = r;
			fs->capreap = cap;
		}
	}
	if (fs->nreap < fs->capreap) {
		if (!fs->nreap)
			fs->reap_since = dbfs_mono_sec();
		fs->reap[fs->nreap++] = ino;
	}
	n = fs->nreap;
	pthread_mutex_unlock(&fs->reap_lock);
	return n;
}

void dbfs_reap_queue(struct dbfs *fs, uint64_t ino)
{
	reap_append(fs, ino);
}

void dbfs_reap_later(struct dbfs *fs, uint64_t ino)
{
	/* Out of memory: the inode stays in the orphan table, reclaimed at
	 * the next mount. Many queued: reap them now, in one commit. */
	if (reap_append(fs, ino) >= 256)
		dbfs_reap_now(fs);
}

void dbfs_reap_due(struct dbfs *fs)
{
	/* Unlocked peek: a stale answer only delays the reap to a later call. */
	if (__atomic_load_n(&fs->nreap, __ATOMIC_RELAXED) &&
	    dbfs_mono_sec() - __atomic_load_n(&fs->reap_since, __ATOMIC_RELAXED) >= 1)
		dbfs_reap_now(fs);
}

int dbfs_reap_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	const struct dbfs_reap_list *l = arg;
	for (size_t i = 0; i < l->n; i++) {
		int rc = dbfs_op_reap(fs, txn, l->ino[i]);
		if (rc)
			return rc;
	}
	return 0;
}

static int noop_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	(void)fs;
	(void)txn;
	(void)arg;
	return 0;
}

struct orphans_ctx {
	uint64_t count;
	int more;
};

static int orphans_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct orphans_ctx *c = arg;
	return dbfs_orphans_reclaim(fs, txn, &c->count, &c->more);
}

/* A shared store's unlinked inodes wait in the orphan table while another
 * process holds the store (dbfs/shared.h). Alone now (no other holder of
 * dbfs.lock): those this kernel no longer holds go. A process opening the
 * store meanwhile cannot reach them: they have no name. */
static int shared_orphans(struct dbfs *fs)
{
	MDB_txn *t;
	MDB_stat st = {0};
	if (!fs->shared || !dbfs_lock_alone(fs->lock_fd))
		return 0;
	int rc = dbfs_read_begin(fs, &t);
	if (rc)
		return rc;
	rc = mdb_stat(t, fs->db_orphan, &st);
	dbfs_read_end(fs, t);
	struct orphans_ctx c = {0, 0};
	while (!rc && st.ms_entries && (rc = dbfs_write(fs, orphans_fn, &c)) == 0 && c.more)
		;
	return rc;
}

int dbfs_reap_now(struct dbfs *fs)
{
	/* The leader of the batch takes the queue (commit.c); a large file
	 * queues itself again until its data is gone (DBFS_FREE_MAX). A store
	 * read-only after an I/O error keeps its orphans for the next open
	 * (health.c): housekeeping must not fail on it every second. */
	if (dbfs_health_writable(fs))
		return 0;
	for (;;) {
		pthread_mutex_lock(&fs->reap_lock);
		size_t n = fs->nreap;
		pthread_mutex_unlock(&fs->reap_lock);
		if (!n)
			return shared_orphans(fs);
		int rc = dbfs_write(fs, noop_fn, NULL);
		if (rc)
			return rc;
	}
}
