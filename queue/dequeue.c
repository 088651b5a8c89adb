/* SPDX-License-Identifier: MIT */
/*
 * Dequeue: a k-way merge of the shards' streams at the subscriber's
 * positions, by delivery time (ties: lower shard first). Each shard's head
 * comes from the message cache when it holds it, else from the store, where
 * a subshard read may be restored into the cache (msgcache.c decides).
 * Payloads are copied into the subscriber's buffer, so nothing points into
 * the map or the cache once the call returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define MAX_EXPIRED 64
#define MAX_SKIPPED 4096 /* messages a rule may pass over in one read */
/* merge(): going on needs the cache lock exclusively (a restore) */
#define EXCLUSIVE (-30602)

struct src {
	uint32_t shard;
	int active, have;
	uint64_t pos, end;
	struct mfsq_disk_msg h;
	const unsigned char *data;
	size_t len;
	struct mfsq_centry *pin; /* cache entry holding data, kept while have */
	MDB_cursor *cur;
	uint64_t sub_first, sub_end;
};

/* A shard's memory-only ring at the subscriber's position. */
struct bsrc {
	uint64_t pos, end;
	struct mfsq_cmsg *m;
};

struct dq {
	mfsq_sub *s;
	MDB_txn *txn;
	struct src *src;
	struct bsrc *bsrc;
	uint32_t *act; /* merge(): active shards */
	uint64_t now;
	uint32_t rs; /* handle to resolve on MFSQ_RETRY */
	uint64_t rid;
	size_t nexp;
	struct {
		uint32_t shard;
		uint64_t seq;
	} exp[MAX_EXPIRED];
	int progressed, lagged;
	int tended; /* read_once() trimmed and shrank the cache if due */
	int shared; /* merge() runs under a shared hold of the cache lock */
	uint64_t hits, misses;
	size_t skipped; /* by the rule in this read */
	uint64_t *enq_delta;
	uint64_t *got; /* account(): messages delivered per shard */
};

static int src_from_store(struct dq *d, struct src *r)
{
	mfsq_queue *q = d->s->q;
	MDB_val key, val;
	unsigned char k[8];
	int rc;

	if (!r->cur || r->pos < r->sub_first || r->pos >= r->sub_end) {
		uint64_t first, id, end;
		MDB_dbi dbi;

		/* a restore into the cache changes it: not under a shared hold
		 * (nothing is changed yet, the merge goes on exclusively) */
		if (d->shared && mfsq_cache_enabled(q))
			return EXCLUSIVE;
		if (r->cur)
			mdb_cursor_close(r->cur);
		r->cur = NULL;
		rc = mfsq_subshard_locate(q, d->txn, r->shard, r->pos, &first, &id, &end);
		if (rc)
			return rc;
		rc = mfsq_dbi_for(q, d->txn, r->shard, id, &dbi);
		if (rc == MFSQ_RETRY) {
			d->rs = r->shard;
			d->rid = id;
		}
		if (rc)
			return rc;
		rc = mdb_cursor_open(d->txn, dbi, &r->cur);
		if (rc)
			return rc;
		r->sub_first = first;
		r->sub_end = end;
		/* restore the rest of the subshard into the cache if it is wanted
		 * (never under a shared hold: the budget is not under the lock,
		 * so caching may have come on since the check above) */
		if (!d->shared &&
		    mfsq_cache_load(q, r->cur, r->shard, first, r->pos, end < r->end ? end : r->end,
				    end != UINT64_MAX) == 0) {
			struct mfsq_cmsg *cm = mfsq_cache_find(q, r->shard, r->pos, &r->pin);

			if (cm) {
				r->h = cm->h;
				r->data = cm->data;
				r->len = cm->len;
				r->have = 1;
				return 0;
			}
		}
	}
	mfsq_be64_put(k, r->pos);
	key.mv_size = sizeof(k);
	key.mv_data = k;
	rc = mdb_cursor_get(r->cur, &key, &val, MDB_SET_KEY);
	if (rc)
		return rc == MDB_NOTFOUND ? EBADMSG : rc; /* missing from its subshard */
	d->misses++;
	rc = mfsq_msg_decode(&val, 0, &r->h, &r->data, &r->len);
	if (rc)
		return rc;
	r->have = 1;
	return 0;
}

static int src_fill(struct dq *d, struct src *r)
{
	struct mfsq_centry *e = r->pin;
	struct mfsq_cmsg *cm = NULL;

	if (r->pos >= r->end) {
		r->active = 0;
		return 0;
	}
	/* the entry pinned for the previous message usually holds this one:
	 * a reader that keeps up walks the shard's entry list once per entry */
	if (e && e->lo <= r->pos && r->pos < e->hi)
		cm = e->v[r->pos - e->lo];
	if (!cm) {
		mfsq_cache_unpin(&r->pin);
		cm = mfsq_cache_find(d->s->q, r->shard, r->pos, &r->pin);
	}
	if (cm) {
		d->hits++; /* counted once per read: a shared counter per message
			      bounced between the subscribers' CPUs */
		r->h = cm->h;
		r->data = cm->data;
		r->len = cm->len;
		r->have = 1;
		return 0;
	}
	return src_from_store(d, r);
}

/* Room for @add more payload bytes. Allocates even for none: emit() and
 * the fix-up of data pointers do arithmetic on s->buf, undefined on NULL
 * (a subscriber's first message may have an empty payload). */
static int buf_reserve(mfsq_sub *s, size_t add)
{
	if (!s->buf || s->buflen + add > s->bufcap) {
		size_t nc = s->bufcap ? s->bufcap : 4096;
		unsigned char *nb;

		while (nc < s->buflen + add)
			nc *= 2;
		nb = realloc(s->buf, nc);
		if (!nb)
			return ENOMEM;
		s->buf = nb;
		s->bufcap = nc;
	}
	return 0;
}

/* Copy the winner into out[*n]; the payload offset goes to data. */
static int emit(struct dq *d, struct mfsq_msg *out, size_t *n, uint32_t shard, uint64_t seq,
		const struct mfsq_disk_msg *h, const unsigned char *data, size_t len)
{
	struct mfsq_msg *m = &out[*n];
	int rc = buf_reserve(d->s, len);

	if (rc)
		return rc;
	mfsq_msg_from_disk(m, shard, seq, h, len);
	m->data = (void *)(uintptr_t)d->s->buflen; /* offset, fixed later */
	memcpy(d->s->buf + d->s->buflen, data, len);
	d->s->buflen += len;
	(*n)++;
	return 0;
}

/* Whether the subscriber's rule takes the message (header only: no payload
 * is read or copied for a message the rule passes over). */
static int rule_takes(struct dq *d, uint32_t shard, uint64_t seq, const struct mfsq_disk_msg *h,
		      size_t len)
{
	struct mfsq_msg m;

	if (!d->s->rule)
		return 1;
	mfsq_msg_from_disk(&m, shard, seq, h, len);
	if (mfsq_rule_match(d->s->rule, &m, d->now))
		return 1;
	d->skipped++;
	atomic_fetch_add(&d->s->q->c.filtered, 1);
	return 0;
}

/* The next memory-only message of each shard (ring positions move on). */
static struct bsrc *bbest(struct dq *d, struct bsrc *cur)
{
	mfsq_queue *q = d->s->q;

	for (uint32_t i = 0; i < q->cfg.nshards; i++) {
		struct bsrc *b = &d->bsrc[i];

		if (!b->m && b->pos < b->end) {
			if (b->pos < mfsq_buffered_first(q, i))
				b->pos = mfsq_buffered_first(q, i); /* dropped unread */
			b->m = mfsq_buffered_at(q, i, b->pos);
		}
		if (b->m && (!cur || b->m->h.dlv_us < cur->m->h.dlv_us))
			cur = b;
	}
	return cur;
}

/*
 * The merge loop, under q->cache_lock: shared (d->shared) until a source
 * needs a restore into the cache, then it returns EXCLUSIVE and is called
 * again under an exclusive hold; it goes on where it stopped (the sources
 * that have a message keep it: pinned in the cache, or in the map of the
 * read transaction).
 */
static int merge(struct dq *d, struct mfsq_msg *out, size_t max, size_t *n)
{
	uint32_t ns = d->s->q->cfg.nshards, nact = 0;
	uint32_t *act = d->act; /* the active shards, in shard order (ties) */
	int rc = 0, buffered = 0;

	/* Only the shards with something to read are scanned per message, and
	 * the memory-only rings only when one holds something: with one
	 * enqueuer, 16 shards and 4 subscribers the scan of every shard for
	 * every message was most of the dequeue's own time. */
	for (uint32_t i = 0; i < ns; i++) {
		if (d->src[i].active)
			act[nact++] = i;
		buffered |= d->bsrc[i].pos < d->bsrc[i].end;
	}
	while (*n < max && d->skipped < MAX_SKIPPED) {
		struct src *best = NULL;
		struct bsrc *bb = NULL;

		for (uint32_t k = 0; k < nact; k++) {
			struct src *r = &d->src[act[k]];

			if (!r->have) {
				rc = src_fill(d, r);
				if (rc)
					return rc;
				if (!r->active) { /* read to its end */
					memmove(&act[k], &act[k + 1],
						(nact - k - 1) * sizeof(*act));
					nact--;
					k--;
					continue;
				}
			}
			if (r->have && (!best || r->h.dlv_us < best->h.dlv_us))
				best = r;
		}
		if (buffered)
			bb = bbest(d, NULL);
		if (bb && (!best || bb->m->h.dlv_us < best->h.dlv_us)) {
			struct mfsq_cmsg *m = bb->m;

			bb->m = NULL;
			bb->pos++;
			d->progressed = 1;
			if (m->h.exp_us && m->h.exp_us <= d->now) {
				atomic_fetch_add(&d->s->q->c.expired, 1);
				continue;
			}
			if (!rule_takes(d, (uint32_t)(bb - d->bsrc), m->seq, &m->h, m->len))
				continue;
			rc = emit(d, out, n, (uint32_t)(bb - d->bsrc), m->seq, &m->h, m->data,
				  m->len);
			if (rc)
				return rc;
			continue;
		}
		if (!best)
			break;
		best->have = 0;
		uint64_t seq = best->pos++;
		int expired = best->h.exp_us && best->h.exp_us <= d->now;

		d->progressed = 1;
		if (expired) {
			mfsq_cache_unpin(&best->pin);
			if (d->nexp == MAX_EXPIRED) {
				best->pos--; /* next call */
				break;
			}
			d->exp[d->nexp].shard = best->shard;
			d->exp[d->nexp].seq = seq;
			d->nexp++;
			continue;
		}
		if (!rule_takes(d, best->shard, seq, &best->h, best->len))
			continue;
		/* the pin stays until the source leaves its entry or the call ends */
		rc = emit(d, out, n, best->shard, seq, &best->h, best->data, best->len);
		if (rc)
			return rc;
	}
	return 0;
}

static int start(struct dq *d)
{
	mfsq_sub *s = d->s;
	mfsq_queue *q = s->q;

	for (uint32_t i = 0; i < q->cfg.nshards; i++) {
		struct mfsq_disk_shard st;
		struct src *r = &d->src[i];
		int rc = mfsq_shard_read_r(q, d->txn, i, &st, &d->rid);

		if (rc == MFSQ_RETRY)
			d->rs = i;
		if (rc)
			return rc;
		if (mfsq_shard_used(q, i)) /* others: promoted where used */
			atomic_store(&q->shards[i].min_due, st.min_due);
		uint64_t old = atomic_exchange(&q->shards[i].next_seq, st.next_seq);

		d->enq_delta[i] = old && st.next_seq > old ? st.next_seq - old : 0;
		atomic_store(&q->shards[i].tail_first, st.tail_first);
		r->shard = i;
		r->pos = s->pos[i];
		r->end = st.next_seq;
		if (r->pos < st.head_first) {
			/* retention dropped what this subscriber had not read */
			d->lagged = 1;
			r->pos = st.head_first;
		}
		r->active = r->pos < r->end;
	}
	return 0;
}

/* Record expired messages in the exception queue (own transaction). */
static int expire(struct dq *d)
{
	mfsq_queue *q = d->s->q;
	struct mfsq_wtx w;
	int rc = mfsq_wtx_begin(q, NULL, 0, &w);

	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < d->nexp; i++) {
		uint64_t first, id, end;
		unsigned char k[8];
		MDB_val key = {8, k}, val;
		MDB_dbi dbi;

		rc = mfsq_subshard_locate(q, w.txn, d->exp[i].shard, d->exp[i].seq, &first, &id,
					  &end);
		if (rc == MDB_NOTFOUND) {
			rc = 0; /* dropped meanwhile */
			continue;
		}
		if (!rc)
			rc = mfsq_wtx_subshard(q, &w, d->exp[i].shard, id, 0, &dbi);
		if (rc)
			break;
		mfsq_be64_put(k, d->exp[i].seq);
		rc = mdb_get(w.txn, dbi, &key, &val);
		if (rc == MDB_NOTFOUND) {
			rc = 0;
			continue;
		}
		if (!rc) {
			struct mfsq_disk_msg h;
			const unsigned char *data;
			size_t len;

			rc = mfsq_msg_decode(&val, 0, &h, &data, &len);
			if (!rc)
				rc = mfsq_exception_put(q, w.txn, 's', d->exp[i].shard,
							d->exp[i].seq, MFSQ_REASON_EXPIRED, &h,
							data, len);
		}
	}
	rc = mfsq_wtx_end(q, &w, rc);
	if (!rc)
		atomic_fetch_add(&q->c.expired, d->nexp);
	return rc;
}

/*
 * Rates and lags of a read, under q->lock (short: what can be worked out
 * before is). The same as a rate_add() and an average step per message:
 * all of a read's messages share d->now, so a shard's count goes in as its
 * first message (which may close a window) and then the rest; the
 * average's steps are folded into one multiply and add.
 */
static void account(struct dq *d, const struct mfsq_msg *out, size_t n)
{
	mfsq_sub *s = d->s;
	mfsq_queue *q = s->q;
	uint32_t ns = q->cfg.nshards;
	double f = 1, sum = 0, f1 = 1, sum1 = 0; /* all steps; all but the first */

	memset(d->got, 0, ns * sizeof(*d->got));
	for (size_t i = n; i-- > 0;) {
		double b = (double)(out[i].len + sizeof(struct mfsq_cmsg));

		d->got[out[i].shard]++;
		if (i) {
			sum1 += 0.01 * b * f1;
			f1 *= 0.99;
		}
		sum += 0.01 * b * f;
		f *= 0.99;
	}
	pthread_mutex_lock(&q->lock);
	for (uint32_t i = 0; i < ns; i++)
		if (d->got[i]) {
			mfsq_rate_add(&s->rate[i], 1, d->now);
			if (d->got[i] > 1)
				mfsq_rate_add(&s->rate[i], (double)(d->got[i] - 1), d->now);
		}
	/* started from the first value: no bias towards 0 early on */
	if (n)
		q->avg_msg_bytes =
		    q->avg_msg_bytes > 0
			? q->avg_msg_bytes * f + sum
			: (double)(out[0].len + sizeof(struct mfsq_cmsg)) * f1 + sum1;
	for (uint32_t i = 0; i < ns; i++)
		if (d->enq_delta[i])
			mfsq_rate_add(&q->shards[i].enq, (double)d->enq_delta[i], d->now);
	for (uint32_t i = 0; i < ns; i++) {
		double lag = (double)(d->src[i].end - d->src[i].pos);

		/* a slowly decaying peak: what the cache must bridge */
		s->peak_lag[i] = lag > s->peak_lag[i] ? lag : s->peak_lag[i] * 0.99 + lag * 0.01;
	}
	pthread_mutex_unlock(&q->lock);
}

/* One attempt: 0 with *n >= 0, MFSQ_RETRY (resolve and call again), errors. */
static int read_once(mfsq_sub *s, struct mfsq_msg *out, size_t max, size_t *n, struct dq *d)
{
	mfsq_queue *q = s->q;
	uint32_t ns = q->cfg.nshards;
	int rc;

	*n = 0;
	s->buflen = 0;
	d->tended = 0;
	d->now = mfsq_now_us();
	memset(d->src, 0, ns * sizeof(*d->src));
	pthread_rwlock_rdlock(&q->droplock);
	rc = mfsq_rtxn_begin(q, &s->rtxn, &d->txn);
	if (!rc) {
		rc = start(d);
		if (!rc && !d->lagged) {
			/* The merge copies under a shared hold: subscribers read
			 * the cache side by side (under one mutex, four of them
			 * queued behind each other's merges and copies). */
			pthread_rwlock_rdlock(&q->cache_lock);
			d->shared = 1;
			for (uint32_t i = 0; i < ns; i++) {
				d->bsrc[i].pos = s->bpos[i];
				d->bsrc[i].end = mfsq_buffered_end(q, i);
				d->bsrc[i].m = NULL;
			}
			rc = merge(d, out, max, n);
			if (rc == EXCLUSIVE) {
				pthread_rwlock_unlock(&q->cache_lock);
				pthread_rwlock_wrlock(&q->cache_lock);
				d->shared = 0;
				/* a ring may have dropped them meanwhile; pinned
				 * entries stay */
				for (uint32_t i = 0; i < ns; i++)
					d->bsrc[i].m = NULL;
				rc = merge(d, out, max, n);
			}
			for (uint32_t i = 0; !rc && i < ns; i++)
				s->bpos[i] = d->bsrc[i].pos;
			for (uint32_t i = 0; i < ns; i++)
				mfsq_cache_unpin(&d->src[i].pin);
			if (!rc) {
				/* after the unpins: a reader that finds everybody
				 * past an entry finds it unpinned too (see
				 * mfsq_cache_shrink_due()) */
				for (uint32_t i = 0; i < ns; i++)
					s->pos[i] = d->src[i].pos;
				/* the exclusive hold only when there is something
				 * to free: taking it for every read queued the
				 * subscribers behind each other again */
				if (d->shared && mfsq_cache_shrink_due(q)) {
					pthread_rwlock_unlock(&q->cache_lock);
					pthread_rwlock_wrlock(&q->cache_lock);
					d->shared = 0;
				}
				if (!d->shared) {
					mfsq_buffered_trim(q);
					mfsq_cache_shrink_locked(q);
				}
				d->tended = 1;
			}
			pthread_rwlock_unlock(&q->cache_lock);
			d->shared = 0;
		}
		for (uint32_t i = 0; i < ns; i++)
			if (d->src[i].cur)
				mdb_cursor_close(d->src[i].cur);
		mfsq_rtxn_end(&s->rtxn, d->txn);
	}
	pthread_rwlock_unlock(&q->droplock);
	if (d->hits)
		atomic_fetch_add(&q->c.hits, d->hits);
	if (d->misses)
		atomic_fetch_add(&q->c.misses, d->misses);
	d->hits = d->misses = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < *n; i++)
		out[i].data = s->buf + (uintptr_t)out[i].data;
	if (d->lagged) {
		/* nothing was delivered: the lost range counts as acknowledged */
		pthread_mutex_lock(&q->lock);
		for (uint32_t i = 0; i < ns; i++)
			if (s->acked[i] < d->src[i].pos)
				s->acked[i] = d->src[i].pos;
		pthread_mutex_unlock(&q->lock);
	}
	for (uint32_t i = 0; i < ns; i++)
		s->pos[i] = d->src[i].pos;
	if (!d->tended) { /* lagged: nothing was read */
		pthread_rwlock_wrlock(&q->cache_lock);
		mfsq_buffered_trim(q);
		mfsq_cache_shrink_locked(q);
		pthread_rwlock_unlock(&q->cache_lock);
	}
	account(d, out, *n);
	if (d->nexp) {
		/* the messages were skipped either way; a failure to record them
		 * must not take the delivered ones back from the caller */
		rc = expire(d);
		if (rc) {
			atomic_fetch_add(&q->c.maint_errors, 1);
			atomic_store(&q->last_maint_error, rc);
		}
		d->nexp = 0;
	}
	return 0;
}

/* Apply the subscriber's rule; rejected messages are dropped from out[]. */
static size_t apply_filter(mfsq_sub *s, struct mfsq_msg *out, size_t n)
{
	size_t k = 0;

	if (!s->filter)
		return n;
	for (size_t i = 0; i < n; i++) {
		if (s->filter(&out[i], s->arg))
			out[k++] = out[i];
		else
			atomic_fetch_add(&s->q->c.filtered, 1);
	}
	return k;
}

static void wait_for(mfsq_queue *q, uint64_t gen, uint64_t until_us)
{
	uint64_t now = mfsq_now_us();
	struct timespec ts;
	uint64_t dt;

	if (until_us <= now)
		return;
	dt = until_us - now;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(dt / 1000000u);
	ts.tv_nsec += (long)(dt % 1000000u) * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	mfsq_active(-1);
	pthread_mutex_lock(&q->lock);
	while (q->gen == gen)
		if (pthread_cond_timedwait(&q->cond, &q->lock, &ts))
			break;
	pthread_mutex_unlock(&q->lock);
	mfsq_active(1);
}

/* When delayed messages are due next, as far as waiting is concerned. */
static uint64_t next_due(mfsq_queue *q)
{
	uint64_t d = mfsq_delay_next_due(q), r = atomic_load(&q->maint_retry_us);

	return d > r ? d : r;
}

static void dq_free(struct dq *d)
{
	if (d) {
		void *per_shard[] = {d->src, d->bsrc, d->enq_delta, d->act, d->got};

		for (size_t i = 0; i < sizeof(per_shard) / sizeof(per_shard[0]); i++)
			free(per_shard[i]);
	}
	free(d);
}

int mfsq_dequeue(mfsq_sub *s, struct mfsq_msg *out, size_t max, size_t *n, int timeout_ms)
{
	mfsq_queue *q = s->q;
	uint64_t deadline =
	    timeout_ms < 0 ? UINT64_MAX : mfsq_now_us() + (uint64_t)timeout_ms * 1000u;
	struct dq *d;
	int rc;

	*n = 0;
	if (!max)
		return EINVAL;
	d = calloc(1, sizeof(*d));
	if (d) {
		d->src = calloc(q->cfg.nshards, sizeof(*d->src));
		d->bsrc = calloc(q->cfg.nshards, sizeof(*d->bsrc));
		d->enq_delta = calloc(q->cfg.nshards, sizeof(*d->enq_delta));
		d->act = calloc(q->cfg.nshards, sizeof(*d->act));
		d->got = calloc(q->cfg.nshards, sizeof(*d->got));
	}
	if (!d || !d->src || !d->bsrc || !d->enq_delta || !d->act || !d->got) {
		dq_free(d);
		return ENOMEM;
	}
	d->s = s;
	mfsq_active(1);
	for (;;) {
		uint64_t gen, now = mfsq_now_us(), wake;

		mfsq_housekeeping(q, now, &s->rtxn);
		gen = atomic_load(&q->gen);
		d->progressed = 0;
		d->lagged = 0;
		d->skipped = 0;
		rc = read_once(s, out, max, n, d);
		if (rc == MFSQ_RETRY) {
			MDB_dbi dbi;

			rc = mfsq_dbi_get(q, d->rs, d->rid, &dbi);
			if (rc)
				break;
			continue;
		}
		if (rc)
			break;
		if (d->lagged) {
			s->lagging = 1;
			*n = 0;
			rc = MFSQ_LAGGED;
			break;
		}
		*n = apply_filter(s, out, *n);
		if (*n) {
			atomic_fetch_add(&q->c.dequeued, *n);
			break;
		}
		if (d->progressed)
			continue;
		now = mfsq_now_us();
		if (timeout_ms == 0) {
			rc = EAGAIN;
			break;
		}
		if (now >= deadline) {
			rc = ETIMEDOUT;
			break;
		}
		if (s->fold_due_us && mfsq_mono_us() >= s->fold_due_us)
			mfsq_sub_fold(s); /* idle: acknowledgements into the store */
		wake = now + MFSQ_POLL_US;
		if (next_due(q) < wake)
			wake = next_due(q);
		if (deadline < wake)
			wake = deadline;
		if (mfsq_coalesce(q, wake > now ? wake - now : 0))
			continue;
		wait_for(q, gen, wake);
	}
	mfsq_active(-1);
	dq_free(d);
	return mfsq_lmdb_err(rc);
}
