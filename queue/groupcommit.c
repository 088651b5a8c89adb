/* SPDX-License-Identifier: MIT */
/*
 * Group commit of enqueues and acknowledgements in the queue's own
 * transactions. LMDB has one
 * writer and a synced commit costs hundreds of microseconds, so concurrent
 * callers are combined: each call queues a request; one of them (the
 * leader) takes every queued request, writes them all in one transaction
 * in arrival order and commits once; every caller returns after the commit
 * that carried its messages, so durability per call is unchanged. If a
 * group fails as a whole (e.g. ENOSPC), its requests are retried one by
 * one so each caller gets its own outcome.
 *
 * An environment opened with MDB_NOMETASYNC (and without MDB_NOSYNC) makes
 * a commit cost one sync instead of two: the data pages are synced, the
 * meta page is written but not synced, so the commit is durable only after
 * the next sync of the file. Callers still return only once their commit
 * is durable: a group's callers wait for the next group's commit (its data
 * sync carries the previous meta page) or, when no group follows, for one
 * mdb_env_sync() by the last leader. Integrity is LMDB's: a meta page is
 * never written before the data it points to is on disk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Turns that write at least MFSQ_LEAD_BYTES of large values are led by the
 * flusher thread while more are queued (see hand_over()). */
#define MFSQ_LEAD_BYTES (128u << 10)
#define MFSQ_LARGE	2000 /* bytes: LMDB puts such a value on overflow pages */
/* Payload bytes of enqueues one turn takes (at least one request; see take()). */
#define MFSQ_TURN_BYTES (1u << 20)

struct mfsq_greq {
	mfsq_group_fn *op; /* NULL: an enqueue of m[0..n) */
	void *arg;
	const struct mfsq_msg_in *m;
	size_t n;
	uint64_t *seqs;
	struct mfsq_put *puts;
	size_t nputs;
	size_t large; /* payload bytes of large values */
	size_t bytes; /* payload bytes */
	int rc, done;
	int log; /* the enqueue log's records, up to (log_lsn, log_off) */
	uint64_t log_lsn, log_off;
	uint64_t group;		 /* deferred meta sync: durable once gsynced >= group */
	struct mfsq_greq *next;	 /* queued for the next turn, then in its batch */
	struct mfsq_greq *wnext; /* committed, waiting for a sync (q->gwait) */
	pthread_cond_t cv;
	int sleeping;
	_Atomic uint64_t poke; /* wake() moves it: what a spinning waiter watches */
};

static int run(mfsq_queue *q, struct mfsq_greq *batch)
{
	struct mfsq_loaded *ls = calloc(q->cfg.nshards, sizeof(*ls));
	struct mfsq_wtx w;
	int rc, enqueued = 0;

	if (!ls)
		return ENOMEM;
	for (;;) {
		rc = mfsq_wtx_begin(q, NULL, 0, &w);
		if (rc)
			break;
		for (struct mfsq_greq *r = batch; !rc && r; r = r->next) {
			rc = r->op ? r->op(q, &w, r->arg)
				   : mfsq_put_msgs(q, &w, r->m, r->n, r->seqs, r->puts, &r->nputs,
						   ls);
			if (!rc && r->log)
				rc = mfsq_enqlog_mark(q, w.txn, q->logi, r->log_lsn, r->log_off);
		}
		if (!rc)
			rc = mfsq_put_states(q, &w, ls);
		rc = mfsq_wtx_end(q, &w, rc);
		if (rc != MFSQ_RETRY)
			break;
		memset(ls, 0, q->cfg.nshards * sizeof(*ls));
	}
	if (!rc) {
		atomic_fetch_add(&q->c.groups, 1);
		for (uint32_t s = w.ld_lo; s < w.ld_hi; s++)
			if (ls[s].loaded) /* before the cache sees the new tails */
				atomic_store(&q->shards[s].tail_first, ls[s].st.tail_first);
		for (struct mfsq_greq *r = batch; r; r = r->next) {
			if (r->op)
				continue;
			enqueued = 1;
			atomic_fetch_add(&q->c.enqueued, r->n);
			if (!r->log) /* logged calls counted when they returned */
				atomic_fetch_add(&q->c.batches, 1);
			atomic_fetch_add(&q->c.delayed_enqueued, r->n - r->nputs);
			mfsq_cache_append(q, r->puts, r->nputs);
		}
		/* A group of acks alone has nothing to deliver: waking every
		 * waiting subscriber for it made each of 4 subscribers of a
		 * batch-1 stream run several empty dequeues per message. */
		if (enqueued)
			mfsq_put_committed(q, &w, ls, NULL, 0);
		else if (atomic_load(&q->retention_due))
			mfsq_retention(q);
	}
	free(ls);
	return rc;
}

/* Run @batch (leader, no lock held); sets rc of every request. Returns the
 * number of commits made. */
static int lead(mfsq_queue *q, struct mfsq_greq *batch)
{
	int rc = run(q, batch), commits = 0;

	if (rc && batch->next) {
		/* one by one: a failure belongs to the request that caused it */
		int logrc = 0;

		for (struct mfsq_greq *r = batch, *nx; r; r = nx) {
			nx = r->next;
			r->next = NULL;
			/* log records that cannot go in hold back every enqueue
			 * (the log comes first: one of them may be its enqueuer's
			 * earlier message); acknowledgements still go in */
			r->rc = logrc && !r->op ? logrc : mfsq_lmdb_err(run(q, r));
			if (r->log)
				logrc = r->rc;
			commits += !r->rc;
			r->next = nx;
		}
		return commits;
	}
	for (struct mfsq_greq *r = batch; r; r = r->next)
		r->rc = mfsq_lmdb_err(rc);
	return !rc;
}

/* Whether own commits leave their meta page unsynced (see the top). */
static int meta_deferred(mfsq_queue *q)
{
	unsigned fl = 0;

	mdb_env_get_flags(q->env, &fl);
	return (fl & MDB_NOMETASYNC) && !(fl & MDB_NOSYNC);
}

/* A request is finished once committed (or failed) and, with a deferred
 * meta sync, once a later sync made its commit durable. */
static int finished(mfsq_queue *q, struct mfsq_greq *r)
{
	if (!r->done || r->rc || r->group <= q->gsynced)
		return r->done;
	return 0;
}

/*
 * Waking: every request sleeps on its own condition variable and is woken
 * only when it is finished or is to lead the next turn; one broadcast to
 * all waiters per commit made them fight for the lock (perf: half of a
 * four-subscriber run was spent in wake-ups and context switches).
 */
static void wake(struct mfsq_greq *r)
{
	atomic_fetch_add(&r->poke, 1);
	if (r->sleeping)
		pthread_cond_signal(&r->cv);
}

/*
 * The requests of the next turn, under q->glock: every queued operation
 * (acknowledgements: a position record each) first, then the enqueues in
 * arrival order up to MFSQ_TURN_BYTES of payload (at least one); the rest
 * stays queued, in order, for the next turn. Taking everything made a
 * subscriber's acknowledgement wait for a commit of all its enqueuers'
 * batches (16 enqueuers of 256 4 KiB messages: 16 MiB), and then for its
 * own turn behind as many again: it read at a sixth of the enqueue rate
 * and fell behind its cache. Concurrent calls have no order among
 * themselves, and each enqueuer has one request queued at a time, so
 * moving operations ahead keeps every caller's order.
 */
static struct mfsq_greq *take(mfsq_queue *q, struct mfsq_greq *lr)
{
	struct mfsq_greq *batch = NULL, **bt = &batch, *rest = NULL, **rt = &rest, *nx;
	size_t bytes = 0;
	int full = 0;

	if (mfsq_enqlog_dirty(q)) {
		/* first: these calls returned before any queued one was made */
		memset(lr, 0, sizeof(*lr));
		lr->log = 1;
		lr->n = mfsq_enqlog_take_locked(q, &lr->m, &lr->puts, &lr->log_lsn, &lr->log_off);
		*bt = lr;
		bt = &lr->next;
	}
	for (struct mfsq_greq *r = q->ghead; r; r = nx) {
		nx = r->next;
		r->next = NULL;
		if (!r->op && (full || (bytes && bytes + r->bytes > MFSQ_TURN_BYTES))) {
			full = 1;
			*rt = r;
			rt = &r->next;
			continue;
		}
		bytes += r->bytes;
		*bt = r;
		bt = &r->next;
	}
	q->ghead = rest;
	q->gtail = rest ? rt : &q->ghead;
	return batch;
}

/* Leader's turn, called and returning with q->glock held. */
static void turn(mfsq_queue *q)
{
	struct mfsq_greq lr, *batch = take(q, &lr), **wp;
	int deferred = meta_deferred(q), commits = 0;
	size_t large = 0;
	uint64_t t0 = mfsq_mono_us(), dt;

	q->gleader = 1;
	for (struct mfsq_greq *b = batch; b; b = b->next)
		large += b->large;
	q->glarge = large >= MFSQ_LEAD_BYTES;
	pthread_mutex_unlock(&q->glock);
	if (batch)
		commits = lead(q, batch);
	pthread_mutex_lock(&q->glock);
	if (commits) {
		/* this turn's first data sync made every earlier group durable */
		q->gsynced = q->gcommitted;
		if (deferred)
			q->gcommitted++;
	}
	/* A finished request is woken here and not touched again: its caller
	 * may return (and its request, on its stack, go) as soon as the lock
	 * is released, which the sync below does. */
	for (struct mfsq_greq *b = batch, *nx; b; b = nx) {
		nx = b->next;
		if (b == &lr) { /* nobody waits for it */
			mfsq_enqlog_done_locked(q, lr.m, lr.n, lr.log_lsn, lr.log_off, lr.rc);
			continue;
		}
		b->group = deferred && !b->rc ? q->gcommitted : 0;
		b->done = 1;
		if (finished(q, b)) {
			wake(b);
		} else {
			b->wnext = q->gwait; /* until a later sync */
			q->gwait = b;
		}
	}
	if (q->gsynced < q->gcommitted && !q->ghead) {
		/* no group follows to carry the meta page: sync it now */
		uint64_t from = q->gsynced, upto = q->gcommitted;
		int rc;

		pthread_mutex_unlock(&q->glock);
		rc = mdb_env_sync(q->env, 1);
		atomic_fetch_add(&q->c.meta_syncs, 1);
		pthread_mutex_lock(&q->glock);
		if (rc) {
			q->gerr = rc;
			q->gerr_from = from;
			q->gerr_upto = upto;
		}
		if (q->gsynced < upto)
			q->gsynced = upto;
	}
	dt = mfsq_mono_us() - t0;
	atomic_store(&q->gturn_us, (atomic_load(&q->gturn_us) * 7 + dt) / 8);
	q->gleader = 0;
	for (wp = &q->gwait; *wp;) {
		struct mfsq_greq *w = *wp;

		if (finished(q, w)) {
			*wp = w->wnext;
			wake(w);
		} else {
			wp = &w->wnext;
		}
	}
}

/*
 * The flusher thread. The enqueue log's (enqlog.c): a caller that returned
 * with its records in the log leaves them to whoever leads next; when
 * nobody does, this thread leads turns until the log is empty, and sleeps.
 * It also leads the queued turns after one that wrote large values
 * (hand_over()). Started at the first such hand-over, stopped by
 * mfsq_close().
 */
static void *flusher(void *arg)
{
	mfsq_queue *q = arg;
	uint64_t retry = 0;

	pthread_mutex_lock(&q->glock);
	while (!q->log_stop) {
		if (!q->gleader && (mfsq_enqlog_dirty(q) || q->ghead) &&
		    (!q->log_err || mfsq_mono_us() >= retry)) {
			q->ghanded = 0;
			if (q->ghead)
				atomic_fetch_add(&q->c.committer_turns, 1);
			mfsq_active(1);
			turn(q);
			mfsq_active(-1);
			if (q->log_err) /* e.g. ENOSPC: the log waits, retried later */
				retry = mfsq_mono_us() + 100000;
			continue;
		}
		if (q->ghanded) {
			/* not leading now (another turn runs, or the log waits
			 * after an error): the callers lead again */
			q->ghanded = 0;
			if (q->ghead && !q->gleader)
				wake(q->ghead);
		}
		q->log_sleeping = 1;
		if (q->log_err) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&q->log_cv, &q->glock, &ts);
		} else {
			pthread_cond_wait(&q->log_cv, &q->glock);
		}
		q->log_sleeping = 0;
	}
	pthread_mutex_unlock(&q->glock);
	return NULL;
}

/* Wake the flusher thread (started on first use); 0 if there is none. */
static int flusher_wake(mfsq_queue *q)
{
	if (!q->log_thread_on)
		q->log_thread_on = !pthread_create(&q->log_thread, NULL, flusher, q);
	if (q->log_thread_on && q->log_sleeping)
		pthread_cond_signal(&q->log_cv);
	return q->log_thread_on;
}

/*
 * Under q->glock, by a leader that is done: who leads next. Usually the
 * first queued caller. After a turn that wrote large values, the flusher
 * thread leads the queued ones (to_flusher(), here and in submit()), and
 * goes on while there are any: LMDB
 * mallocs a transaction's overflow pages (one per large value) in the
 * arena of the thread that writes, and a different leader per turn made
 * each of many arenas grow into fresh pages and trim them again (perf, 16
 * enqueuers of 4 KiB messages in batches of 256: a third of the time in
 * page faults, sysmalloc and madvise; 195-269k msg/s with 4 subscribers,
 * 365-385k with one committing thread).
 */
static int to_flusher(mfsq_queue *q, const struct mfsq_greq *self)
{
	/* others queued: a lone caller goes on leading its own (no hop) */
	int others = q->ghead && (q->ghead != self || self->next);

	if (!q->glarge || !others || !flusher_wake(q))
		return 0;
	q->ghanded = 1; /* until the flusher leads: callers wait (submit()) */
	return 1;
}

static void hand_over(mfsq_queue *q)
{
	if (q->gleader || q->ghanded || to_flusher(q, NULL))
		return;
	if (q->ghead) {
		wake(q->ghead); /* it leads the next turn */
	} else if (mfsq_enqlog_dirty(q) && !flusher_wake(q)) {
		turn(q); /* no thread: this caller, then */
	}
}

/* An enqueue into the log: 0 or an error of its commit, or -1 to take the
 * commit path. */
static int logged(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n)
{
	uint64_t lsn, head, used;
	int rc = 0;

	if (q->logfd < 0)
		return -1;
	pthread_mutex_lock(&q->glock);
	lsn = q->log_next_lsn;
	head = q->log_head;
	used = q->log_used;
	if (mfsq_enqlog_put_locked(q, m, n)) {
		pthread_mutex_unlock(&q->glock);
		return -1;
	}
	if (!q->gleader) {
		/* nobody commits: this caller does (alone, it waits for its
		 * commit as before; the others find it leading and return) */
		uint64_t end = q->log_next_lsn;

		mfsq_active(1);
		turn(q);
		mfsq_active(-1);
		/* its own commit failed (e.g. ENOSPC): with nothing after its
		 * records, the call fails as a commit would have; else they
		 * wait in the log, in order, for a turn that fits them */
		if (q->log_tail_lsn < end && q->log_err &&
		    !mfsq_enqlog_unput_locked(q, m, n, lsn, head, used, end))
			rc = q->log_err;
	}
	hand_over(q);
	pthread_mutex_unlock(&q->glock);
	return rc;
}

void mfsq_group_close(mfsq_queue *q)
{
	if (q->log_thread_on) {
		pthread_mutex_lock(&q->glock);
		q->log_stop = 1;
		pthread_cond_signal(&q->log_cv);
		pthread_mutex_unlock(&q->glock);
		pthread_join(q->log_thread, NULL);
		q->log_thread_on = 0;
		q->ghanded = 0;
	}
	pthread_mutex_lock(&q->glock);
	while (q->logfd >= 0 && mfsq_enqlog_dirty(q) && !q->gleader) {
		turn(q); /* what fails stays in the file: replayed at the next open */
		if (q->log_err)
			break;
	}
	pthread_mutex_unlock(&q->glock);
}

static int submit(mfsq_queue *q, struct mfsq_greq *rp)
{
	struct mfsq_greq r = *rp;
	int spun = 0;

	pthread_cond_init(&r.cv, NULL);
	mfsq_active(1);
	pthread_mutex_lock(&q->glock);
	*q->gtail = &r;
	q->gtail = &r.next;
	while (!finished(q, &r)) {
		if (!q->gleader && !q->ghanded && (!r.done || q->ghead)) {
			/* ours to write, or committed and waiting for a sync that
			 * the next group's commit brings: lead that one */
			if (!to_flusher(q, &r))
				turn(q);
			continue;
		}
		if (!spun) {
			/* a commit without sync is over in microseconds: watch for
			 * wake() a little before sleeping (spin.c) */
			uint64_t p = atomic_load(&r.poke);

			pthread_mutex_unlock(&q->glock);
			spun = !mfsq_spin_while(&r.poke, p, mfsq_spin_us(q));
			pthread_mutex_lock(&q->glock);
			continue;
		}
		r.sleeping = 1;
		mfsq_active(-1);
		pthread_cond_wait(&r.cv, &q->glock);
		mfsq_active(1);
		r.sleeping = 0;
		spun = 0;
	}
	for (struct mfsq_greq **wp = &q->gwait; *wp; wp = &(*wp)->wnext)
		if (*wp == &r) {
			/* finished by a commit whose leader is syncing (lock
			 * released) and woken early, e.g. spuriously: r lives on
			 * this stack, so it must not stay on the list */
			*wp = r.wnext;
			break;
		}
	hand_over(q);
	if (!r.rc && r.group && r.group > q->gerr_from && r.group <= q->gerr_upto)
		r.rc = q->gerr; /* committed, but the sync that was to make it durable failed */
	pthread_mutex_unlock(&q->glock);
	mfsq_active(-1);
	pthread_cond_destroy(&r.cv);
	return r.rc;
}

int mfsq_group_enqueue(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n, uint64_t *seqs)
{
	struct mfsq_greq r = {.m = m, .n = n, .seqs = seqs};
	int rc;

	/* without seqs to return nothing needs the commit: the log will do */
	if (!seqs && (rc = logged(q, m, n)) >= 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		r.bytes += m[i].len;
		if (m[i].len >= MFSQ_LARGE)
			r.large += m[i].len;
	}
	r.puts = malloc(n * sizeof(*r.puts));
	if (!r.puts)
		return ENOMEM;
	rc = submit(q, &r);
	free(r.puts);
	return rc;
}

int mfsq_group_op(mfsq_queue *q, mfsq_group_fn *op, void *arg)
{
	struct mfsq_greq r = {.op = op, .arg = arg};

	return submit(q, &r);
}
