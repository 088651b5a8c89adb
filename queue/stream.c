/* SPDX-License-Identifier: MIT */
/*
 * Appending one message to a shard's stream in a write transaction: the
 * next sequence number, the tail subshard (rolled to the spare when full),
 * the tail's counts in the shard record the caller holds. Used by the
 * enqueue (put.c) and by the promotion of delayed messages (delay.c).
 */
#include <errno.h>
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
