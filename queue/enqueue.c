/* SPDX-License-Identifier: MIT */
/*
 * The enqueue path (mfsq_enqueue(), mfsq_enqueue_batch()): checks, the
 * messages put into their shards' streams or delay shards with sequence
 * numbers and stream times, and the shard state records updated. All
 * messages of one enqueuer land in one shard (affinity.c) in commit order,
 * so that order holds for every subscriber; sequence numbers and stream
 * times are assigned under LMDB's single writer, so two processes
 * enqueueing into one shard still produce one gap-free, time-ordered
 * stream.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int tail_full(const mfsq_queue *q, const struct mfsq_disk_shard *st, size_t len)
{
	return st->tail_count >= q->cfg.subshard_msgs ||
	       (st->tail_count && st->tail_bytes + len > q->cfg.subshard_bytes);
}

int mfsq_stream_put(mfsq_queue *q, struct mfsq_wtx *w, struct mfsq_disk_shard *st,
		    struct mfsq_put *p)
{
	unsigned char k[8];
	MDB_val key = {sizeof(k), k}, val;
	MDB_dbi dbi;
	int rc;

	if (tail_full(q, st, p->len)) {
		rc = mfsq_subshard_roll(q, w, p->shard, st);
		if (rc == MFSQ_RETRY || rc == EAGAIN)
			atomic_store(&q->retention_due, 1); /* overfill; maintenance rolls */
		else if (rc)
			return rc;
	}
	rc = mfsq_wtx_subshard(q, w, p->shard, st->tail_id, 0, &dbi);
	if (rc)
		return rc;
	p->seq = st->next_seq;
	p->sub_first = st->tail_first;
	mfsq_be64_put(k, p->seq);
	val.mv_size = sizeof(p->h) + p->len;
	rc = mdb_put(w->txn, dbi, &key, &val, MDB_APPEND | MDB_RESERVE);
	if (rc)
		return rc;
	memcpy(val.mv_data, &p->h, sizeof(p->h));
	if (p->len)
		memcpy((char *)val.mv_data + sizeof(p->h), p->data, p->len);
	st->next_seq++;
	st->tail_count++;
	st->tail_bytes += p->len;
	return 0;
}

int mfsq_put_msgs(mfsq_queue *q, struct mfsq_wtx *w, const struct mfsq_msg_in *m, size_t n,
		  uint64_t *seqs, struct mfsq_put *puts, size_t *nputs, struct mfsq_loaded *ls)
{
	uint64_t now = mfsq_now_us();
	int rc = 0;

	*nputs = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		uint32_t s = mfsq_shard_of(q, m[i].enqueuer);
		struct mfsq_disk_shard *st = &ls[s].st;
		struct mfsq_disk_msg h = {0};
		uint64_t t;

		if (!ls[s].loaded) {
			rc = mfsq_read_shard(q, w->txn, s, st);
			if (!rc && st->min_due <= now)
				rc = mfsq_delay_promote_loaded(q, w, s, st, now);
			if (rc)
				break;
			ls[s].loaded = 1;
		}
		t = now > st->last_us ? now : st->last_us;
		st->last_us = t;
		h.enq_us = t;
		h.exp_us = m[i].expire_us;
		h.enqueuer = m[i].enqueuer;
		h.prio = m[i].prio;
		h.tag = m[i].tag;
		/* a delayed message due already goes through the delay shard
		 * too while earlier due ones wait there (promotion moves at most
		 * MFSQ_PROMOTE_BATCH per transaction): it must not overtake them.
		 * Enqueues from the log (enqlog.c) are committed late, a replay
		 * seconds late, so "due already" is no rare case there. */
		if (m[i].deliver_us > t || (m[i].deliver_us && st->min_due <= t)) {
			h.dlv_us = m[i].deliver_us;
			h.flags = MFSQ_MSG_DELAYED;
			rc = mfsq_delay_put(q, w->txn, s, st, &h, m[i].data, m[i].len);
			if (seqs)
				seqs[i] = 0;
			continue;
		}
		h.dlv_us = t;
		struct mfsq_put *p = &puts[(*nputs)++];

		p->shard = s;
		p->h = h;
		p->data = m[i].data;
		p->len = m[i].len;
		rc = mfsq_stream_put(q, w, st, p);
		if (!rc && seqs)
			seqs[i] = p->seq;
	}
	return rc;
}

int mfsq_put_states(mfsq_queue *q, struct mfsq_wtx *w, const struct mfsq_loaded *ls)
{
	int rc = 0;

	for (uint32_t s = 0; !rc && s < q->cfg.nshards; s++)
		if (ls[s].loaded)
			rc = mfsq_write_shard(q, w->txn, s, &ls[s].st);
	return rc;
}

/* After an own commit: runtime state, cache, waiters, maintenance. */
void mfsq_put_committed(mfsq_queue *q, const struct mfsq_loaded *ls, const struct mfsq_put *puts,
			size_t nputs)
{
	for (uint32_t s = 0; s < q->cfg.nshards; s++) {
		if (!ls[s].loaded)
			continue;
		atomic_store(&q->shards[s].tail_first, ls[s].st.tail_first);
		atomic_store(&q->shards[s].min_due, ls[s].st.min_due);
	}
	mfsq_cache_append(q, puts, nputs);
	mfsq_wake(q);
	if (atomic_load(&q->retention_due))
		mfsq_retention(q); /* best effort: a spare for the next roll */
}

static int enqueue_stored(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, size_t n,
			  uint64_t *seqs);

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
	struct mfsq_loaded *ls;
	struct mfsq_put *puts;
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
	ls = calloc(q->cfg.nshards, sizeof(*ls));
	puts = malloc(n * sizeof(*puts));
	rc = ls && puts ? mfsq_wtx_begin(q, txn, 0, &w) : ENOMEM;
	if (!rc) {
		rc = mfsq_put_msgs(q, &w, m, n, seqs, puts, &nputs, ls);
		if (!rc)
			rc = mfsq_put_states(q, &w, ls);
		rc = mfsq_wtx_end(q, &w, rc);
	}
	if (!rc) {
		atomic_fetch_add(&q->c.enqueued, n);
		atomic_fetch_add(&q->c.batches, 1);
		atomic_fetch_add(&q->c.delayed_enqueued, n - nputs);
	}
	free(puts);
	free(ls);
	return mfsq_lmdb_err(rc);
}

int mfsq_enqueue(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, uint64_t *seq)
{
	return mfsq_enqueue_batch(q, txn, m, 1, seq);
}
