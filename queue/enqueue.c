/* SPDX-License-Identifier: MIT */
/*
 * The enqueue calls (mfsq_enqueue(), mfsq_enqueue_batch()): their checks,
 * memory-only messages (buffered.c, or spilled to the store under
 * pressure), and which transaction writes the messages (put.c): the
 * caller's, or a group commit of the queue's own (groupcommit.c), which in
 * a relaxed environment the enqueue log may stand in for (enqlog.c); and
 * the caller's word that its transaction committed (mfsq_txn_committed()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int enqueue_stored(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, size_t n,
			  uint64_t *seqs);

/* Batches up to these sizes keep their working arrays on the stack. */
#define SMALL_SHARDS 8
#define SMALL_MSGS   16

/* Memory-only messages go to the rings, or spill to the store under pressure. */
static int enqueue_mixed(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, size_t n,
			 uint64_t *seqs)
{
	struct mfsq_msg_in *st = malloc(n * sizeof(*st));
	size_t *idx = malloc(n * sizeof(*idx)), ns = 0;
	uint64_t *sseq = malloc(n * sizeof(*sseq));
	int pressure = mfsq_pressure_now() || !mfsq_budget_bytes(), rc = 0;

	if (!st || !idx || !sseq) {
		rc = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!(m[i].flags & MFSQ_MSG_BUFFERED) || pressure) {
			st[ns] = m[i];
			st[ns].flags = 0;
			idx[ns++] = i;
			if (m[i].flags & MFSQ_MSG_BUFFERED)
				atomic_fetch_add(&q->c.spilled, 1);
		}
	}
	if (ns)
		rc = enqueue_stored(q, txn, st, ns, sseq);
	for (size_t i = 0; !rc && i < ns; i++)
		if (seqs)
			seqs[idx[i]] = sseq[i];
	for (size_t i = 0; !rc && !pressure && i < n; i++)
		if (m[i].flags & MFSQ_MSG_BUFFERED)
			rc = mfsq_buffered_put(q, &m[i], seqs ? &seqs[i] : NULL);
	if (!rc && !pressure)
		mfsq_wake(q);
out:
	free(st);
	free(idx);
	free(sseq);
	return rc;
}

int mfsq_enqueue_batch(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, size_t n,
		       uint64_t *seqs)
{
	int buffered = 0;

	if (!q || (!m && n))
		return EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (m[i].prio > MFSQ_PRIO_MAX || (!m[i].data && m[i].len))
			return EINVAL;
		if (m[i].len > q->cfg.max_payload)
			return EMSGSIZE;
		if (m[i].flags & ~MFSQ_MSG_BUFFERED)
			return EINVAL;
		if (m[i].flags & MFSQ_MSG_BUFFERED) {
			if (m[i].deliver_us)
				return EINVAL;
			buffered = 1;
		}
	}
	if (buffered)
		return enqueue_mixed(q, txn, m, n, seqs);
	return enqueue_stored(q, txn, m, n, seqs);
}

static int enqueue_stored(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, size_t n,
			  uint64_t *seqs)
{
	struct mfsq_loaded *ls, ls_small[SMALL_SHARDS];
	struct mfsq_put *puts, puts_small[SMALL_MSGS];
	size_t nputs = 0;
	struct mfsq_wtx w;
	int rc;

	if (!n)
		return 0;
	if (!txn)
		return mfsq_group_enqueue(q, m, n, seqs); /* own transaction, grouped */
	if (q->logfd >= 0) {
		/* records of this process still in the enqueue log for the same
		 * shard may be this enqueuer's earlier messages: they go first,
		 * and the flusher needs the write lock this caller holds */
		int busy = 0;

		pthread_mutex_lock(&q->glock);
		for (size_t i = 0; i < n && !busy; i++)
			busy = mfsq_enqlog_pending_locked(q, mfsq_shard_of(q, m[i].enqueuer));
		pthread_mutex_unlock(&q->glock);
		if (busy)
			return EAGAIN;
	}
	/* the small batches of a file system's commits allocate nothing */
	if (q->cfg.nshards <= SMALL_SHARDS && n <= SMALL_MSGS) {
		ls = ls_small; /* uncleared: put.c reads only what it covered */
		puts = puts_small;
	} else {
		ls = malloc(q->cfg.nshards * sizeof(*ls));
		puts = malloc(n * sizeof(*puts));
	}
	rc = ls && puts ? mfsq_wtx_begin(q, txn, 0, &w) : ENOMEM;
	if (!rc) {
		rc = mfsq_put_msgs(q, &w, m, n, seqs, puts, &nputs, ls);
		if (!rc)
			rc = mfsq_put_states(q, &w, ls);
		mfsq_put_remember(q, &w, ls, !rc);
		rc = mfsq_wtx_end(q, &w, rc);
	}
	if (!rc) {
		atomic_fetch_add(&q->c.enqueued, n);
		atomic_fetch_add(&q->c.batches, 1);
		atomic_fetch_add(&q->c.delayed_enqueued, n - nputs);
	}
	if (ls != ls_small) {
		free(puts);
		free(ls);
	}
	return mfsq_lmdb_err(rc);
}

void mfsq_txn_committed(mfsq_queue *q, uint64_t txnid)
{
	if (q)
		atomic_store(&q->committed_txnid, txnid);
}

int mfsq_enqueue(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, uint64_t *seq)
{
	return mfsq_enqueue_batch(q, txn, m, 1, seq);
}
