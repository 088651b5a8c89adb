/* SPDX-License-Identifier: MIT */
/*
 * A queue's lifetime: mfsq_open() (checking the name and configuration,
 * creating the layout of a new queue, opening its databases, its logs),
 * mfsq_shard_use() (a shard's layout and databases, with MFSQ_LAZY_SHARDS)
 * and mfsq_close().
 *
 * Why lazy shards: LMDB loops over every named-database slot the
 * environment ever opened in each transaction's begin and commit, so each
 * shard's three handles (delay table, tail, spare) cost every transaction
 * of the environment, also those that never touch the queue. A queue whose
 * process writes into one shard of many opens that one only; readers open a
 * subshard's handle when they find messages in it (dbi.c), and a shard no
 * process used has no databases at all (its record's tail_id is 0).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* A shard's first subshard (the tail) and its spare, in @st. */
static int lay_out(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st)
{
	int rc = mfsq_subshard_roll(q, w, s, st);

	if (!rc)
		rc = mfsq_subshard_spare(q, w, s, st);
	if (!rc)
		rc = mfsq_write_shard(q, w->txn, s, st);
	return rc;
}

/* A lazy queue's shards get only their record (tail_id 0: no databases). */
static int create_layout(mfsq_queue *q, struct mfsq_wtx *w)
{
	MDB_txn *txn = w->txn;
	int rc = mfsq_config_store(q, txn);

	for (uint32_t s = 0; !rc && s < q->cfg.nshards; s++) {
		struct mfsq_disk_shard st = {
		    .next_seq = 1,
		    .head_first = 1,
		    .min_due = UINT64_MAX,
		    .next_id = 1,
		};

		rc = q->lazy ? mfsq_write_shard(q, txn, s, &st) : lay_out(q, w, s, &st);
	}
	return rc;
}

/* Shard @s's delay table and the handles of its tail and spare (a lazy
 * shard never laid out gets its layout first), in maintenance transaction
 * @w; the delay handle in *delay, valid once @w commits. */
static int open_shard(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, MDB_dbi *delay)
{
	char nm[MFSQ_NAME_MAX + 32];
	struct mfsq_disk_shard st = {0};
	MDB_dbi dbi;
	int rc = mfsq_shard_row(q, w->txn, s, &st);

	if (!rc && !st.tail_id)
		rc = lay_out(q, w, s, &st);
	snprintf(nm, sizeof(nm), "%s/d/%u", q->name, s);
	if (!rc)
		rc = mdb_dbi_open(w->txn, nm, MDB_CREATE, delay);
	if (!rc)
		rc = mfsq_shard_read_w(q, w, s, &st, NULL);
	/* shared handles for the tail and the spare: enqueues inside
	 * callers' transactions then never need to open one */
	if (!rc)
		rc = mfsq_wtx_subshard(q, w, s, st.tail_id, 0, &dbi);
	if (!rc && st.spare_id)
		rc = mfsq_wtx_subshard(q, w, s, st.spare_id, 0, &dbi);
	if (!rc) {
		q->shards[s].min_due = st.min_due;
		q->shards[s].tail_first = st.tail_first;
		q->shards[s].next_seq = st.next_seq;
	}
	return rc;
}

static int open_dbs(mfsq_queue *q, struct mfsq_wtx *w, unsigned flags)
{
	MDB_txn *txn = w->txn;
	char nm[MFSQ_NAME_MAX + 32];
	unsigned cf = (flags & MFSQ_CREATE) ? MDB_CREATE : 0;
	int create = 0, rc;

	snprintf(nm, sizeof(nm), "%s/m", q->name);
	rc = mdb_dbi_open(txn, nm, cf, &q->meta);
	if (rc)
		return rc; /* MDB_NOTFOUND: no such queue, ENOENT */
	/* The stored configuration, checked (version, then ranges), decides
	 * the shard count: nothing is allocated for it before. */
	rc = mfsq_config_load(q, txn);
	if (rc == MDB_NOTFOUND && (flags & MFSQ_CREATE))
		create = 1;
	else if (rc)
		return rc; /* MDB_NOTFOUND: no such queue, ENOENT */
	if (!create && (rc = mfsq_config_upgrade(q, txn)))
		return rc;
	q->shards = calloc(q->cfg.nshards, sizeof(*q->shards));
	if (!q->shards)
		return ENOMEM;
	rc = create ? create_layout(q, w) : 0;
	if (!rc) {
		snprintf(nm, sizeof(nm), "%s/x", q->name);
		rc = mdb_dbi_open(txn, nm, MDB_CREATE, &q->exc);
	}
	for (uint32_t s = 0; !rc && s < q->cfg.nshards; s++) {
		struct mfsq_disk_shard st = {0};

		if (!q->lazy) {
			rc = open_shard(q, w, s, &q->shards[s].delay);
			continue;
		}
		/* lazy: nothing opened; its delayed messages are promoted by a
		 * process that uses it (min_due stays "never" here) */
		rc = mfsq_shard_row(q, txn, s, &st);
		if (!rc) {
			q->shards[s].min_due = UINT64_MAX;
			q->shards[s].tail_first = st.tail_first;
			q->shards[s].next_seq = st.next_seq;
		}
	}
	return rc;
}

int mfsq_shard_use(mfsq_queue *q, uint32_t shard)
{
	struct mfsq_wtx w;
	MDB_dbi delay;
	int rc;

	if (shard >= q->cfg.nshards)
		return EINVAL;
	if (mfsq_shard_used(q, shard))
		return 0;
	rc = mfsq_wtx_begin(q, NULL, 1, &w);
	if (rc)
		return mfsq_lmdb_err(rc);
	rc = mfsq_wtx_end(q, &w, open_shard(q, &w, shard, &delay));
	if (!rc) {
		q->shards[shard].delay = delay;
		atomic_store(&q->shards[shard].used, 1);
	}
	return mfsq_lmdb_err(rc);
}

/* The queue's locks and condition variables; mfsq_close() destroys them. */
static void locks_init(mfsq_queue *q)
{
	pthread_condattr_t ca;
	pthread_rwlockattr_t ra;

	pthread_rwlock_init(&q->droplock, NULL);
	pthread_mutex_init(&q->dbi_lock, NULL);
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->append_lock, NULL);
	pthread_mutex_init(&q->glock, NULL);
	pthread_mutex_init(&q->acklock, NULL);
	pthread_cond_init(&q->log_cv, NULL);
	/* waits on it take CLOCK_MONOTONIC deadlines (dequeue.c: wait_for) */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	/* writer-preferring: appends and accounting must not wait behind a
	 * stream of subscribers' shared holds */
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&q->cache_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
}

int mfsq_open(MDB_env *env, const char *name, const struct mfsq_config *cfg, unsigned flags,
	      mfsq_queue **out)
{
	mfsq_queue *q;
	struct mfsq_wtx w;
	size_t nl = name ? strlen(name) : 0;
	int rc;

	*out = NULL;
	if (!env || nl == 0 || nl > MFSQ_NAME_MAX || strchr(name, '/'))
		return EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return ENOMEM;
	memcpy(q->name, name, nl);
	if (cfg)
		q->cfg = *cfg;
	else
		mfsq_config_default(&q->cfg);
	if (!mfsq_config_valid(&q->cfg)) {
		free(q);
		return EINVAL;
	}
	q->env = env;
	locks_init(q);
	q->ackfd = -1;
	q->logfd = -1;
	q->gtail = &q->ghead;
	q->cache_target = mfsq_budget_bytes();

	q->lazy = !!(flags & MFSQ_LAZY_SHARDS);
	if (q->lazy && !(flags & MFSQ_NO_LOG)) {
		mfsq_close(q);
		return EINVAL; /* a log's replay enqueues into any shard */
	}
	rc = mfsq_wtx_begin(q, NULL, 1, &w);
	if (!rc)
		rc = mfsq_wtx_end(q, &w, open_dbs(q, &w, flags));
	if (rc) {
		mfsq_close(q);
		return mfsq_lmdb_err(rc);
	}
	for (uint32_t s = 0; !q->lazy && s < q->cfg.nshards; s++)
		atomic_store(&q->shards[s].used, 1);
	mfsq_acklog_open(q); /* after the configuration: slots hold nshards positions */
	if (flags & MFSQ_NO_LOG) {
		if (!q->lazy)		     /* a lazy queue never had a log (it needs NO_LOG) */
			mfsq_enqlog_reap(q); /* a dead process's log still goes in */
	} else
		mfsq_enqlog_open(q);
	*out = q;
	return 0;
}

void mfsq_close(mfsq_queue *q)
{
	if (!q)
		return;
	mfsq_group_close(q); /* the log's records into the store, its thread stopped */
	mfsq_enqlog_close(q);
	mfsq_acklog_close(q);
	mfsq_cache_free_all(q);
	mfsq_buffered_free_all(q);
	if (q->shards) {
		for (uint32_t s = 0; s < q->cfg.nshards; s++)
			free(q->shards[s].dbis);
		free(q->shards);
	}
	pthread_rwlock_destroy(&q->droplock);
	pthread_mutex_destroy(&q->dbi_lock);
	pthread_mutex_destroy(&q->lock);
	pthread_rwlock_destroy(&q->cache_lock);
	pthread_mutex_destroy(&q->append_lock);
	pthread_mutex_destroy(&q->glock);
	pthread_mutex_destroy(&q->acklock);
	pthread_cond_destroy(&q->log_cv);
	pthread_cond_destroy(&q->cond);
	free(q);
}
