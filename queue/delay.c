/* SPDX-License-Identifier: MIT */
/*
 * The delay shard paired with each shard: one database whose key ranges are
 * bucket shards of bucket_us each (layout in format.h). A delayed message
 * waits there until due and is then promoted into its shard's stream in a
 * maintenance transaction, lower priority value first, then earliest due.
 *
 * Nothing per message is kept in memory: the shard state stores a lower
 * bound of the earliest due time (min_due). Promotion scans only the
 * buckets spanning up to now, plus the first later bucket to find its
 * minimum, so a restart replays nothing and delays are unlimited.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int mfsq_delay_put(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st,
		   const struct mfsq_disk_msg *h, const void *data, size_t len)
{
	unsigned char k[16];
	MDB_val key = {sizeof(k), k}, val = {sizeof(*h) + len, NULL};
	int rc;

	mfsq_be64_put(k, h->dlv_us / q->cfg.bucket_us);
	mfsq_be64_put(k + 8, st->next_dseq);
	rc = mdb_put(txn, q->shards[s].delay, &key, &val, MDB_RESERVE);
	if (rc)
		return rc;
	memcpy(val.mv_data, h, sizeof(*h));
	if (len)
		memcpy((char *)val.mv_data + sizeof(*h), data, len);
	st->next_dseq++;
	st->delay_pending++;
	if (h->dlv_us < st->min_due)
		st->min_due = h->dlv_us;
	return 0;
}

uint64_t mfsq_delay_next_due(mfsq_queue *q)
{
	uint64_t m = UINT64_MAX;

	for (uint32_t s = 0; s < q->cfg.nshards; s++) {
		uint64_t d = atomic_load(&q->shards[s].min_due);

		if (d < m)
			m = d;
	}
	return m;
}

uint64_t mfsq_next_due(mfsq_queue *q)
{
	return mfsq_delay_next_due(q);
}

struct due {
	uint8_t prio;
	uint64_t dlv;
	unsigned char key[16];
};

static int due_cmp(const void *a, const void *b)
{
	const struct due *x = a, *y = b;

	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	if (x->dlv != y->dlv)
		return x->dlv < y->dlv ? -1 : 1;
	return memcmp(x->key, y->key, sizeof(x->key));
}

/* Collect due messages of shard @s (at most MFSQ_PROMOTE_BATCH); *rest gets the
 * earliest due time of what stays. */
static int collect(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t now, struct due *d, size_t *nd,
		   uint64_t *rest)
{
	MDB_val key, val;
	MDB_cursor *c;
	uint64_t later = UINT64_MAX; /* the first bucket starting after now */
	int rc;

	*nd = 0;
	*rest = UINT64_MAX;
	rc = mdb_cursor_open(txn, q->shards[s].delay, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &key, &val, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		uint64_t b;
		struct mfsq_disk_msg h;

		if (key.mv_size != 16) { /* bucket u64, dseq u64 */
			rc = EBADMSG;
			break;
		}
		b = mfsq_be64_get(key.mv_data);
		if (b * q->cfg.bucket_us > now) {
			if (later == UINT64_MAX)
				later = b;
			else if (b != later)
				break;
		}
		rc = mfsq_msg_decode(&val, 0, &h, NULL, NULL);
		if (rc)
			break;
		if (h.dlv_us <= now && *nd < MFSQ_PROMOTE_BATCH) {
			d[*nd].prio = h.prio;
			d[*nd].dlv = h.dlv_us;
			memcpy(d[*nd].key, key.mv_data, 16);
			(*nd)++;
		} else if (h.dlv_us < *rest) {
			*rest = h.dlv_us;
		}
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Promote the due messages of shard @s whose state @stp is loaded in @w. */
static int promote_st(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *stp,
		      uint64_t now, struct due *d, unsigned char **buf, size_t *bufcap, int *moved)
{
	struct mfsq_disk_shard st = *stp;
	size_t nd;
	uint64_t rest;
	int rc = collect(q, w->txn, s, now, d, &nd, &rest);
	if (rc)
		return rc;
	qsort(d, nd, sizeof(*d), due_cmp);
	for (size_t i = 0; !rc && i < nd; i++) {
		MDB_val key = {16, d[i].key}, val;
		struct mfsq_put p = {.shard = s};

		rc = mdb_get(w->txn, q->shards[s].delay, &key, &val);
		if (rc)
			break;
		rc = mfsq_msg_decode(&val, 0, &p.h, NULL, &p.len);
		if (rc)
			break;
		/* copy out: the value may move while the stream is written */
		if (val.mv_size > *bufcap) {
			unsigned char *nb = realloc(*buf, val.mv_size);

			if (!nb) {
				rc = ENOMEM;
				break;
			}
			*buf = nb;
			*bufcap = val.mv_size;
		}
		memcpy(*buf, val.mv_data, val.mv_size);
		p.data = *buf + sizeof(p.h);
		rc = mdb_del(w->txn, q->shards[s].delay, &key, NULL);
		if (rc)
			break;
		st.delay_pending--;
		if (p.h.exp_us && p.h.exp_us <= now) {
			rc = mfsq_exception_put(q, w->txn, 'd', s, mfsq_be64_get(d[i].key + 8),
						MFSQ_REASON_EXPIRED_DELAYED, &p.h, p.data, p.len);
			if (!rc)
				atomic_fetch_add(&q->c.expired, 1);
			continue;
		}
		p.h.flags |= MFSQ_MSG_DELAYED;
		rc = mfsq_stream_put(q, w, &st, &p);
		if (!rc) {
			mfsq_late_record(q, now - p.h.dlv_us);
			(*moved)++;
		}
	}
	if (rc)
		return rc;
	/* a full batch leaves due messages behind: come back at once */
	st.min_due = nd == MFSQ_PROMOTE_BATCH && rest > now ? now : rest;
	if (now > st.last_us)
		st.last_us = now;
	*stp = st;
	return 0;
}

static int promote_shard(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, uint64_t now, struct due *d,
			 unsigned char **buf, size_t *bufcap, int *moved)
{
	struct mfsq_disk_shard st;
	int rc;

	if (!mfsq_shard_used(q, s))
		return 0; /* no delay handle here: a process that uses it promotes */
	rc = mfsq_shard_read_w(q, w, s, &st, NULL);
	if (rc)
		return rc;
	if (st.min_due <= now) {
		rc = promote_st(q, w, s, &st, now, d, buf, bufcap, moved);
		if (!rc)
			rc = mfsq_write_shard(q, w->txn, s, &st);
	}
	if (!rc)
		atomic_store(&q->shards[s].min_due, st.min_due);
	return rc;
}

/*
 * Inside an enqueue: promote what is due before appending, so a message
 * enqueued for "now" never overtakes a delayed one that was due earlier.
 */
int mfsq_delay_promote_loaded(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s,
			      struct mfsq_disk_shard *st, uint64_t now)
{
	struct due *d = malloc(MFSQ_PROMOTE_BATCH * sizeof(*d));
	unsigned char *buf = NULL;
	size_t bufcap = 0;
	int moved = 0, rc;

	if (!d)
		return ENOMEM;
	rc = promote_st(q, w, s, st, now, d, &buf, &bufcap, &moved);
	free(d);
	free(buf);
	if (!rc && moved)
		atomic_fetch_add(&q->c.delayed_promoted, (uint64_t)moved);
	return rc;
}

int mfsq_delay_promote(mfsq_queue *q)
{
	uint64_t now = mfsq_now_us();
	struct due *d;
	unsigned char *buf = NULL;
	size_t bufcap = 0;
	struct mfsq_wtx w;
	int rc, moved = 0;

	if (mfsq_delay_next_due(q) > now)
		return 0;
	d = malloc(MFSQ_PROMOTE_BATCH * sizeof(*d));
	if (!d)
		return ENOMEM;
	rc = mfsq_wtx_begin(q, NULL, 1, &w);
	if (rc) {
		free(d);
		return mfsq_lmdb_err(rc);
	}
	for (uint32_t s = 0; !rc && s < q->cfg.nshards; s++)
		if (atomic_load(&q->shards[s].min_due) <= now)
			rc = promote_shard(q, &w, s, now, d, &buf, &bufcap, &moved);
	rc = mfsq_wtx_end(q, &w, rc);
	free(d);
	free(buf);
	if (!rc && moved) {
		atomic_fetch_add(&q->c.delayed_promoted, (uint64_t)moved);
		mfsq_wake(q);
	}
	return mfsq_lmdb_err(rc);
}
