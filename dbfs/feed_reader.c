/*
 * Readers of the change feed (dbfs/feed.h): open, read, wait, acknowledge,
 * close. A reader wraps a libmfsq subscriber (durable: a subscription's,
 * feed_subs.c; ephemeral: one of its own). Every queue call that may write
 * runs under the map lock held shared (the map must not grow under it)
 * and, when the queue's own transaction found the map full (ENOSPC), grows
 * the map and runs again. Acknowledgements are written in dbfs_write
 * transactions (mfsq_ack with the caller's transaction), so that they go
 * through the group commit like every other change. A reader meeting a
 * message below the retention floor skips it and reports the gap. It
 * hands out in feed seq order what it holds (the events of several
 * shards, feed_shards.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbfs/feed.h"
#include "dbfs/feed_private.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

/* ---- readers ---- */

int dbfs_feed_open(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
		   struct dbfs_feed_reader **out)
{
	struct dbfs_feed *f = fs->feed;
	struct dbfs_feed_reader *r;
	int rc;
	*out = NULL;
	if (!f)
		return -EOPNOTSUPP;
	if (sub && !feed_sub_name_ok(sub))
		return -EINVAL;
	if ((rc = feed_check_start(fs, start)))
		return rc;
	if (sub && fs->opt.read_only)
		return -EROFS;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fs = fs;
	r->hand_qseq = calloc(f->nshards, sizeof(*r->hand_qseq));
	r->hand_fseq = calloc(f->nshards, sizeof(*r->hand_fseq));
	if (!r->hand_qseq || !r->hand_fseq) {
		rc = -ENOMEM;
		goto fail;
	}
	if (sub) {
		struct dbfs_feed_sub_info info;
		uint64_t row_acked;
		if ((rc = feed_sub_get(fs, sub, &info, &row_acked)))
			goto fail;
		if (info.open) {
			rc = -EBUSY;
			goto fail;
		}
		snprintf(r->name, sizeof(r->name), "%s", sub);
		QCALL(fs, rc, mfsq_subscribe(f->q, sub, MFSQ_SUB_DURABLE, NULL, NULL, &r->s));
		if (rc) {
			rc = rc == EBUSY ? -EBUSY : feed_q_write_errno(fs, rc);
			goto fail;
		}
		/* from the last ack this feed wrote: if the queue moved the
		 * subscriber past it (retention), the jump is the gap record */
		r->next = r->acked = row_acked;
		if (start && (rc = feed_seek_to(fs, r->s, start, &r->next, &r->min_ns, true)))
			goto fail_sub;
		struct row_ctx c = {.name = sub, .update = true, .set_acked = start != NULL};
		c.rec.active_ns = feed_now_ns();
		if (start)
			c.rec.acked = r->acked = r->next;
		if ((rc = dbfs_errno(dbfs_write(fs, feed_row_fn, &c))))
			goto fail_sub;
	} else {
		QCALL(fs, rc, mfsq_subscribe(f->q, NULL, 0, NULL, NULL, &r->s));
		if (rc) {
			rc = feed_q_errno(rc);
			goto fail;
		}
		struct dbfs_feed_start now = {.from = DBFS_FEED_NOW};
		if ((rc = feed_seek_to(fs, r->s, start ? start : &now, &r->next, &r->min_ns, false)))
			goto fail_sub;
	}
	pthread_mutex_lock(&f->lock);
	r->next_r = f->readers;
	f->readers = r;
	pthread_mutex_unlock(&f->lock);
	*out = r;
	return 0;
fail_sub:
	mfsq_unsubscribe(r->s);
fail:
	feed_held_free(r);
	free(r);
	return rc;
}

/* Hand out what is held: gap records, events, in feed seq order; a hole
 * at the front is a gap only once a dequeue found nothing more (or too
 * much is held behind it). Returns the count. */
static size_t hand_out(struct dbfs_feed_reader *r, struct dbfs_event *ev, size_t max,
			       int *err)
{
	struct dbfs_feed *f = r->fs->feed;
	size_t k = 0;
	uint64_t fl = atomic_load(&f->floor);
	while (r->ihead < r->nheld && k < max) {
		const struct feed_held *h = &r->held[r->ihead];
		if (h->seq < fl || h->seq < r->next) {
			/* below retention (a gap follows), or seen already: its
			 * shard's queue position may pass it (dbfs_feed_ack) */
			r->hand_qseq[h->shard] = h->qseq;
			r->hand_fseq[h->shard] = h->seq;
			r->ihead++;
			continue;
		}
		if (h->seq > r->next) {
			if (!r->drained && r->nheld - r->ihead < FEED_HELD_MAX)
				break; /* its turn may still come */
			ev[k] = (struct dbfs_event){
			    .seq = r->next, .op = DBFS_EV_GAP, .gap_next = h->seq, .path = ""};
			ev[k].time_ns = feed_now_ns();
			r->gaps++;
			r->lost += h->seq - r->next;
			atomic_fetch_add(&f->gaps, 1);
			r->next = h->seq;
			k++;
			continue;
		}
		int rc = dbfs_ev_decode(h->rec, h->len, &ev[k]);
		if (rc) {
			if (!k)
				*err = rc;
			break; /* stay before it */
		}
		ev[k].seq = h->seq;
		ev[k].writer = h->writer;
		ev[k].shard = h->shard;
		r->ihead++;
		r->next = h->seq + 1;
		r->hand_qseq[h->shard] = h->qseq;
		r->hand_fseq[h->shard] = h->seq;
		if (r->min_ns && ev[k].time_ns < r->min_ns)
			continue;
		r->min_ns = 0;
		r->delivered = h->seq;
		k++;
	}
	return k;
}

static void wait_commit(struct dbfs_feed *f, uint64_t gen, const struct timespec *until)
{
	pthread_mutex_lock(&f->lock);
	while (f->gen == gen) {
		if (!until) {
			pthread_cond_wait(&f->cond, &f->lock);
		} else if (pthread_cond_timedwait(&f->cond, &f->lock, until)) {
			break;
		}
	}
	pthread_mutex_unlock(&f->lock);
}

int dbfs_feed_read(struct dbfs_feed_reader *r, struct dbfs_event *ev, size_t max, size_t *n,
		   int timeout_ms)
{
	struct dbfs_feed *f = r->fs->feed;
	struct timespec until;
	int err = 0;
	*n = 0;
	if (!max)
		return -EINVAL;
	if (timeout_ms > 0) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
	}
	feed_held_release(r); /* the last read's events pointed into them */
	for (;;) {
		*n = hand_out(r, ev, max, &err);
		if (*n || err)
			return err;
		pthread_mutex_lock(&f->lock);
		uint64_t gen = f->gen;
		pthread_mutex_unlock(&f->lock);
		size_t got = 0;
		int rc;
		QCALL(r->fs, rc, mfsq_dequeue(r->s, r->msg, READ_MAX, &got, 0));
		if (rc == 0) {
			if (feed_hold(r, r->msg, got))
				return -ENOMEM;
			/* an ephemeral reader holds no retention behind what it read */
			if (!r->name[0])
				mfsq_ack(r->s, NULL, NULL);
			continue;
		}
		if (rc == MFSQ_LAGGED)
			continue; /* it moved on: the seq jump makes the gap record */
		if (rc != EAGAIN)
			return rc == EBADMSG ? -EBADMSG : feed_q_errno(rc);
		if (!r->drained && r->ihead < r->nheld) {
			r->drained = true; /* everything committed is held: holes are gaps */
			continue;
		}
		r->drained = true;
		if (timeout_ms == 0)
			return -EAGAIN;
		if (timeout_ms > 0) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > until.tv_sec ||
			    (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
				return -ETIMEDOUT;
		}
		/* the queue is polled again at least every second: a commit of
		 * another process (a shared store) wakes nobody here */
		struct timespec cap;
		clock_gettime(CLOCK_MONOTONIC, &cap);
		cap.tv_sec += 1;
		if (timeout_ms > 0 && (until.tv_sec < cap.tv_sec ||
				       (until.tv_sec == cap.tv_sec && until.tv_nsec < cap.tv_nsec)))
			cap = until;
		wait_commit(f, gen, &cap);
	}
}

bool dbfs_feed_ready(struct dbfs_feed_reader *r)
{
	if (r->ihead < r->nheld && r->held[r->ihead].seq <= r->next)
		return true;
	return dbfs_feed_last_seq(r->fs) >= r->next;
}

int dbfs_feed_ack(struct dbfs_feed_reader *r, uint64_t seq)
{
	if (!r->name[0])
		return 0;
	if (seq == 0 || seq + 1 <= r->acked)
		return 0;
	if (seq > r->delivered)
		return -ERANGE;
	struct row_ctx c = {.name = r->name, .update = true, .ack_sub = r->s, .ack_r = r};
	c.rec.active_ns = feed_now_ns();
	c.rec.acked = seq + 1;
	c.rec.gaps = r->gaps;
	c.rec.lost = r->lost;
	int rc = dbfs_errno(dbfs_write(r->fs, feed_row_fn, &c));
	if (!rc) {
		r->acked = seq + 1;
		r->gaps = r->lost = 0;
	}
	return rc;
}

int dbfs_feed_sub_ack(struct dbfs *fs, const char *sub, uint64_t seq)
{
	if (!fs->feed)
		return -EOPNOTSUPP;
	if (!feed_sub_name_ok(sub))
		return -EINVAL;
	if (fs->opt.read_only)
		return -EROFS;
	if (seq > dbfs_feed_last_seq(fs))
		return -ERANGE;
	if (seq == 0)
		return 0;
	struct row_ctx c = {.name = sub, .update = true, .ack_name = true};
	c.rec.active_ns = feed_now_ns();
	c.rec.acked = seq + 1;
	return dbfs_errno(dbfs_write(fs, feed_row_fn, &c));
}

uint64_t dbfs_feed_reader_next(const struct dbfs_feed_reader *r)
{
	return r->next;
}

void dbfs_feed_close(struct dbfs_feed_reader *r)
{
	if (!r)
		return;
	struct dbfs_feed *f = r->fs->feed;
	pthread_mutex_lock(&f->lock);
	for (struct dbfs_feed_reader **p = &f->readers; *p; p = &(*p)->next_r)
		if (*p == r) {
			*p = r->next_r;
			break;
		}
	pthread_mutex_unlock(&f->lock);
	if (r->name[0] && !r->fs->opt.read_only) {
		struct row_ctx c = {.name = r->name, .update = true};
		c.rec.active_ns = feed_now_ns();
		c.rec.gaps = r->gaps;
		c.rec.lost = r->lost;
		dbfs_write(r->fs, feed_row_fn, &c); /* counts only: a failure loses them */
	}
	int rc;
	QCALL(r->fs, rc, (mfsq_unsubscribe(r->s), 0));
	(void)rc;
	feed_held_free(r);
	free(r);
}
