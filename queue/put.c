/* SPDX-License-Identifier: MIT */
/*
 * Writing a batch of enqueued messages in a write transaction (the
 * caller's, a group commit's, a log replay's): each message into its
 * shard's stream (stream.c) or its delay shard, with its stream time; then
 * the shard records where needed (shardstate.c); and after an own commit,
 * the runtime state, the cache and the wake-up. All messages of one
 * enqueuer land in one shard (affinity.c) in commit order, so that order
 * holds for every subscriber; sequence numbers and stream times are
 * assigned under LMDB's single writer, so two processes enqueueing into
 * one shard still produce one gap-free, time-ordered stream.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

/*
 * The state of shard @s as a caller's transaction T left it (and its
 * record's next_seq, which may lag: shardstate.c), when it is what @txn
 * would read: T committed (the caller said so,
 * mfsq_txn_committed()) and @txn is the very next transaction (its id is
 * T's + 1: nobody, in any process, committed in between). An aborted T
 * never counts, even though LMDB gives its id to the next transaction.
 * Saves reading the record and the tail in every caller's transaction of
 * a lone writer (the file system's outbox).
 */
static int remembered(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_loaded *l)
{
	struct mfsq_shard_rt *sh = &q->shards[s];
	uint64_t t = sh->wst_txnid;

	if (!t || t != atomic_load(&q->committed_txnid) || (uint64_t)mdb_txn_id(txn) != t + 1)
		return 0;
	l->st = sh->wst;
	l->stored_next = sh->wst_stored_next;
	return 1;
}

void mfsq_put_remember(mfsq_queue *q, const struct mfsq_wtx *w, const struct mfsq_loaded *ls,
		       int ok)
{
	uint64_t id = ok ? (uint64_t)mdb_txn_id(w->txn) : 0;

	for (uint32_t s = w->ld_lo; s < w->ld_hi; s++) {
		if (!ls[s].loaded)
			continue;
		q->shards[s].wst = ls[s].st;
		q->shards[s].wst_stored_next = ls[s].stored_next;
		q->shards[s].wst_txnid = id;
	}
}

/* Widen w's range of loaded shards to @s; the entries it newly covers are
 * not loaded (ls needs no clearing before: only its range is read). */
static void cover(struct mfsq_wtx *w, struct mfsq_loaded *ls, uint32_t s)
{
	uint32_t lo = w->ld_lo, hi = w->ld_hi;

	if (lo >= hi) {
		w->ld_lo = s;
		w->ld_hi = s + 1;
		ls[s].loaded = 0;
		return;
	}
	for (; s < lo; lo--)
		ls[lo - 1].loaded = 0;
	for (; s >= hi; hi++)
		ls[hi].loaded = 0;
	w->ld_lo = lo;
	w->ld_hi = hi;
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

		cover(w, ls, s);
		if (!ls[s].loaded && !w->own && remembered(q, w->txn, s, &ls[s])) {
			ls[s].st0 = *st; /* as mfsq_shard_read_w() would read it */
			ls[s].loaded = 1;
		}
		if (!ls[s].loaded && !mfsq_shard_used(q, s)) {
			rc = EINVAL; /* a lazy queue: mfsq_shard_use() first */
			break;
		}
		if (!ls[s].loaded) {
			rc = mfsq_shard_read_w(q, w, s, st, &ls[s].stored_next);
			ls[s].st0 = *st;
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

/* Did a field change that the tail cannot tell (all but next_seq,
 * tail_count, tail_bytes and last_us: shardstate.c)? */
static int record_needed(const struct mfsq_disk_shard *a, const struct mfsq_disk_shard *b)
{
	return a->head_first != b->head_first || a->tail_first != b->tail_first ||
	       a->next_dseq != b->next_dseq || a->delay_pending != b->delay_pending ||
	       a->min_due != b->min_due || a->nlive != b->nlive || a->tail_id != b->tail_id ||
	       a->next_id != b->next_id || a->spare_id != b->spare_id;
}

int mfsq_put_states(mfsq_queue *q, struct mfsq_wtx *w, struct mfsq_loaded *ls)
{
	int rc = 0;

	for (uint32_t s = w->ld_lo; !rc && s < w->ld_hi; s++) {
		struct mfsq_loaded *l = &ls[s];

		if (!l->loaded)
			continue;
		/* messages appended to the tail alone leave the record behind
		 * (shardstate.c), by MFSQ_STATE_LAG at most */
		if (!record_needed(&l->st0, &l->st) &&
		    l->st.next_seq - l->stored_next < MFSQ_STATE_LAG)
			continue;
		rc = mfsq_write_shard(q, w->txn, s, &l->st);
		if (!rc)
			l->stored_next = l->st.next_seq;
	}
	return rc;
}

/* After an own commit: runtime state, cache, waiters, maintenance. */
void mfsq_put_committed(mfsq_queue *q, const struct mfsq_wtx *w, const struct mfsq_loaded *ls,
			const struct mfsq_put *puts, size_t nputs)
{
	for (uint32_t s = w->ld_lo; s < w->ld_hi; s++) {
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
