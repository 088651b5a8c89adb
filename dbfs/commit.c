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
 * MDB_MAP_FULL aborts, grows the map and retries; so does a queue error
 * EAGAIN from an operation (a bounded number of times), or from the
 * enqueue of the batch's change-feed events (feed_outbox.c), which runs in the
 * batch's transaction after its operations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"

#define BATCH_MAX 64

struct dbfs_wop {
	struct dbfs_wop *next;
	dbfs_write_fn fn;
	void *arg;
	size_t bytes;
	struct dbfs_caller who; /* for its change feed event */
	int rc;
	int done;
};

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

/* Times a batch runs again when the queue answers EAGAIN inside it (its
 * message cache was refilling under memory pressure, say) before the
 * operations get -EAGAIN. */
#define QUEUE_RETRIES 8

/*
 * A transaction of the batch ended in `failed`, and was aborted. May the
 * batch run again? Yes when the map was full and has grown, or when the
 * queue asked for a retry (DBFS_QUEUE_ERR(EAGAIN)) fewer than QUEUE_RETRIES
 * times; otherwise *rc is what the batch returns.
 */
static bool may_retry(struct dbfs *fs, int failed, uint64_t seen, int *tries, int *rc)
{
	if (failed == MDB_MAP_FULL) {
		*rc = dbfs_grow_map(fs, seen);
		return *rc == 0;
	}
	if (failed == MDB_MAP_RESIZED) { /* by another process (a shared store) */
		*rc = dbfs_adopt_map(fs);
		return *rc == 0;
	}
	*rc = failed;
	return failed == DBFS_QUEUE_ERR(EAGAIN) && ++*tries < QUEUE_RETRIES;
}

/* Run ops [0, n) in one transaction. Returns 0 when committed (each op's rc
 * set), or the store failure or queue error that aborted the batch. */
static int run_batch(struct dbfs *fs, struct dbfs_wop **ops, int n)
{
	int tries = 0, failed, rc;
	uint64_t seen;
	if (atomic_load(&fs->map_lost))
		return EIO; /* its maps faulted (guard.c): never read them again */
	dbfs_space_refresh(fs);
	do {
		MDB_txn *txn;
		pthread_rwlock_rdlock(&fs->map_lock);
		seen = fs->map_size;
		rc = mdb_txn_begin(fs->env, NULL, 0, &txn);
		if (rc == MDB_MAP_RESIZED) {
			pthread_rwlock_unlock(&fs->map_lock);
			failed = rc;
			continue; /* to may_retry */
		}
		if (rc) {
			pthread_rwlock_unlock(&fs->map_lock);
			dbfs_health_check(fs, rc, "commit");
			return rc;
		}
		fs->wtxn = txn; /* for the guard (guard.c) */
		fs->txn_gen++;
		failed = 0;
		dbfs_feed_batch_begin(fs, txn);
		for (int i = 0; i < n && !failed; i++) {
			dbfs_feed_batch_op(fs, &ops[i]->who);
			int r = ops[i]->fn(fs, txn, ops[i]->arg);
			ops[i]->rc = r;
			/* A refusal changed nothing; a store failure or a queue
			 * error may have left partial changes (internal.h). */
			if (r && !dbfs_is_refusal(r))
				failed = r;
		}
		if (!failed) /* the events, in the same transaction (feed_outbox.c) */
			failed = dbfs_feed_batch_end(fs, txn);
		if (failed) {
			fs->wtxn = NULL;
			mdb_txn_abort(txn);
			pthread_rwlock_unlock(&fs->map_lock);
			continue; /* to may_retry */
		}
		failed = mdb_txn_commit(txn);
		fs->wtxn = NULL;
		MDB_envinfo info; /* read from the map: before the map lock goes */
		mdb_env_info(fs->env, &info); /* a commit that changed nothing keeps its id */
		if (!failed)
			dbfs_held_committed(fs, &info); /* reads the map too */
		pthread_rwlock_unlock(&fs->map_lock);
		if (!failed) {
			uint64_t txnid = info.me_last_txnid;
			/* Before any owner is told: an fsync after the reply
			 * must find this commit among those to make durable. */
			size_t bytes = 0;
			for (int i = 0; i < n; i++)
				bytes += ops[i]->bytes;
			dbfs_durable_committed(fs, txnid, bytes);
			dbfs_feed_batch_committed(fs);
			dbfs_expire_committed(fs); /* wakes the delayed work's thread */
			fs->cnt.commits++;
			if (n > 1)
				fs->cnt.batched_ops += n;
			return 0;
		}
		dbfs_health_check(fs, failed, "commit");
		if (failed != MDB_MAP_FULL)
			failed = commit_error(fs, failed);
	} while (may_retry(fs, failed, seen, &tries, &rc));
	return rc;
}

/* Take op out of the queue if no leader took it yet (wq_lock held). */
static bool unqueue(struct dbfs *fs, struct dbfs_wop *op)
{
	for (struct dbfs_wop **p = &fs->wq_head; *p; p = &(*p)->next) {
		if (*p == op) {
			*p = op->next;
			if (!*p)
				fs->wq_tail = p;
			return true;
		}
	}
	return false;
}

static void lead(struct dbfs *fs, struct dbfs_wop **ops, int n)
{
	int rc = run_batch(fs, ops, n);
	if (rc && n > 1 && dbfs_health_writable(fs) == 0) {
		for (int i = 0; i < n; i++) {
			rc = run_batch(fs, &ops[i], 1);
			if (rc)
				ops[i]->rc = rc;
		}
	} else if (rc) {
		for (int i = 0; i < n; i++) /* all met the I/O error (health.c) */
			ops[i]->rc = rc;
	}
}

/* lead() the reap of its own (if any), then the batch; a SIGBUS in the
 * store's maps (guard.c) ends them: every operation in the batch gets EIO. */
static void lead_guarded(struct dbfs *fs, struct dbfs_wop **reap_first, struct dbfs_wop **ops,
			 int n)
{
	struct dbfs_guard g;
	dbfs_guard_push(&g, fs);
	if (sigsetjmp(g.jb, 0)) {
		dbfs_guard_end_write(fs);
		dbfs_guard_recovered(&g);
		for (int i = 0; i < n; i++)
			ops[i]->rc = -EIO;
		return;
	}
	if (reap_first)
		lead(fs, reap_first, 1);
	lead(fs, ops, n);
	dbfs_guard_pop(&g);
}

int dbfs_write(struct dbfs *fs, dbfs_write_fn fn, void *arg)
{
	return dbfs_write_sized(fs, fn, arg, 0);
}

int dbfs_write_sized(struct dbfs *fs, dbfs_write_fn fn, void *arg, size_t bytes)
{
	struct dbfs_wop op = {.fn = fn, .arg = arg, .bytes = bytes};
	if (fs->feed)
		dbfs_caller_current(&op.who);

	if (fs->opt.read_only)
		return -EROFS;
	if (dbfs_health_writable(fs))
		return -EROFS;
	pthread_mutex_lock(&fs->wq_lock);
	*fs->wq_tail = &op;
	fs->wq_tail = &op.next;
	while (!op.done) {
		if (fs->wq_leader && atomic_load(&fs->map_lost) && unqueue(fs, &op)) {
			op.rc = -EIO; /* the leader may be gone with the store (guard.c) */
			break;
		}
		if (fs->wq_leader) {
			pthread_cond_wait(&fs->wq_cond, &fs->wq_lock);
			continue;
		}
		fs->wq_leader = 1;
		struct dbfs_wop *batch[BATCH_MAX];
		int n = 0;
		size_t sum = 0;
		/* A batch stays within the space reserve (space.c). */
		while (fs->wq_head && n < BATCH_MAX &&
		       (n == 0 || sum + fs->wq_head->bytes <= DBFS_BATCH_BYTES)) {
			sum += fs->wq_head->bytes;
			batch[n++] = fs->wq_head;
			fs->wq_head = fs->wq_head->next;
		}
		if (!fs->wq_head)
			fs->wq_tail = &fs->wq_head;
		pthread_mutex_unlock(&fs->wq_lock);

		/* Inodes forgotten since the last batch are reaped in this one;
		 * on a full disk in a commit of their own before it, so that
		 * the room they free is there for the batch (space.c). */
		struct dbfs_reap_list reap = {NULL, 0};
		struct dbfs_wop reap_op = {.fn = dbfs_reap_fn, .arg = &reap};
		struct dbfs_wop *reap_first = &reap_op;
		pthread_mutex_lock(&fs->reap_lock);
		if (fs->nreap && n < BATCH_MAX) {
			reap.ino = fs->reap;
			reap.n = fs->nreap;
			fs->reap = NULL;
			fs->nreap = fs->capreap = 0;
		}
		pthread_mutex_unlock(&fs->reap_lock);

		if (reap.ino && !fs->space_full)
			batch[n++] = &reap_op;
		lead_guarded(fs, reap.ino && fs->space_full ? &reap_first : NULL, batch, n);
		free(reap.ino); /* a failed reap leaves the inodes in the orphan table */
		if (batch[n - 1] == &reap_op)
			n--;

		pthread_mutex_lock(&fs->wq_lock);
		for (int i = 0; i < n; i++)
			batch[i]->done = 1;
		fs->wq_leader = 0;
		pthread_cond_broadcast(&fs->wq_cond);
	}
	pthread_mutex_unlock(&fs->wq_lock);
	dbfs_held_throttle(fs); /* the disk behind: wait for it (held.c) */
	return op.rc;
}
