/* SPDX-License-Identifier: MIT */
/*
 * A shard's state as it is now: its stored record ('S', format.h) caught
 * up with the tail subshard. An enqueue that only appends to the tail
 * does not rewrite the record (a page of the meta table and its row in
 * LMDB's main table per commit: a fifth of what the change feed costs a
 * file system's metadata operation), so the record's per-message fields
 * (next_seq, tail_count, tail_bytes, last_us) may stand for an earlier
 * message of its tail: the messages from its next_seq on are in that
 * tail, and the record is rewritten whenever any other field changes
 * (a roll, a delayed message, a drop, a spare) and once it lags by
 * MFSQ_STATE_LAG messages (put.c). Every reader of next_seq reads it here.
 */
#include <errno.h>

#include "internal.h"

/* Payload bytes and enqueue time of a stream value; a damaged header
 * (the dequeue refuses the message itself with EBADMSG) counts its bytes
 * past a header's size and no time, so that a damaged message never keeps
 * the shard from being read or written. */
static void msg_facts(const MDB_val *v, size_t *len, uint64_t *enq_us)
{
	struct mfsq_disk_msg h;

	*enq_us = 0;
	if (mfsq_msg_decode(v, 0, &h, NULL, len) == 0)
		*enq_us = h.enq_us;
	else
		*len = v->mv_size > sizeof(h) ? v->mv_size - sizeof(h) : 0;
}

int mfsq_shard_catch_up(MDB_txn *txn, MDB_dbi tail, struct mfsq_disk_shard *st, int bytes)
{
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t newest_us, t;
	size_t len;
	int rc = mdb_cursor_open(txn, tail, &c);

	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
	if (rc == MDB_NOTFOUND) {
		rc = 0; /* an empty tail: nothing past the record */
		goto out;
	}
	if (!rc && k.mv_size != 8)
		rc = EBADMSG;
	if (rc)
		goto out;
	uint64_t last = mfsq_be64_get(k.mv_data);

	if (last < st->next_seq)
		goto out; /* the record is up to date */
	uint64_t n = last + 1 - st->next_seq, sum;

	msg_facts(&v, &len, &newest_us);
	sum = len;
	/* payload bytes of the messages past the record (at most
	 * MFSQ_STATE_LAG of them unless an older writer left more); a hole
	 * (mfsq_check reports it) ends the count */
	for (uint64_t i = 1; bytes && i < n; i++) {
		rc = mdb_cursor_get(c, &k, &v, MDB_PREV);
		if (rc == MDB_NOTFOUND ||
		    (!rc && (k.mv_size != 8 || mfsq_be64_get(k.mv_data) != last - i))) {
			rc = 0;
			break;
		}
		if (rc)
			goto out;
		msg_facts(&v, &len, &t);
		sum += len;
	}
	st->next_seq = last + 1;
	st->tail_count += n;
	if (bytes)
		st->tail_bytes += sum;
	if (newest_us > st->last_us) /* stream times never go back */
		st->last_us = newest_us;
out:
	mdb_cursor_close(c);
	return rc;
}

int mfsq_shard_read_w(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st,
		      uint64_t *stored_next)
{
	MDB_dbi dbi;
	int rc = mfsq_shard_row(q, w->txn, s, st);

	if (!rc && stored_next)
		*stored_next = st->next_seq;
	if (!rc && !st->tail_id)
		return 0; /* a lazy queue's shard never used: no databases */
	if (!rc)
		rc = mfsq_wtx_subshard(q, w, s, st->tail_id, 0, &dbi);
	if (!rc)
		rc = mfsq_shard_catch_up(w->txn, dbi, st, 1);
	return rc;
}

int mfsq_shard_read_r(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st,
		      uint64_t *rid)
{
	MDB_dbi dbi;
	int rc = mfsq_shard_row(q, txn, s, st);

	if (!rc && !st->tail_id)
		return 0; /* a lazy queue's shard never used: no databases */
	if (!rc)
		rc = mfsq_dbi_for(q, txn, s, st->tail_id, &dbi);
	if (rc == MFSQ_RETRY && rid)
		*rid = st->tail_id;
	if (!rc)
		rc = mfsq_shard_catch_up(txn, dbi, st, 0);
	return rc;
}

int mfsq_shard_read_rtxn(mfsq_queue *q, uint32_t s, struct mfsq_disk_shard *st)
{
	for (;;) {
		uint64_t rid = 0;
		MDB_txn *txn;
		MDB_dbi dbi;
		int rc;

		pthread_rwlock_rdlock(&q->droplock);
		rc = mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn);
		if (!rc) {
			rc = mfsq_shard_read_r(q, txn, s, st, &rid);
			mdb_txn_abort(txn);
		}
		pthread_rwlock_unlock(&q->droplock);
		if (rc != MFSQ_RETRY)
			return rc;
		rc = mfsq_dbi_get(q, s, rid, &dbi); /* outside the lock */
		if (rc)
			return rc;
	}
}
