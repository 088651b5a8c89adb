/*
 * The accountant's two ends of the queue "usage" (account.h): once a
 * second, sample every mounted DBFS's counters into one record each (with
 * the space, cache and feed the gauge reader published since its last
 * record: account_gauges.c) and enqueue them as memory-only messages;
 * then, as the queue's subscriber, dequeue what is waiting for
 * account_fold.c. Accountant thread only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account_private.h"
#include "log.h"

/* Sample one mounted DBFS's counters (no system call, no store work; the
 * durable points' short lock in dbfs_counters). mgr->lock held. */
static void sample_one(struct mfs_dbfs *d, uint64_t t, struct sample *s)
{
	struct mfs_session_stats st;
	struct dbfs_counters c;

	memset(s, 0, sizeof(*s));
	s->id = d->id;
	snprintf(s->name, sizeof(s->name), "%s", d->conf.name);
	s->t = t;
	mfs_loop_sample(d->sess, &st);
	s->ops = st.ops;
	s->read_bytes = st.read_bytes;
	s->write_bytes = st.write_bytes;
	s->throttled = st.throttled + st.capped + st.yield_waits;
	s->busy_ns = st.lat_sum_ns;
	memcpy(s->hist, st.lat_hist, sizeof(s->hist));
	memcpy(s->kinds.ops, st.by_opcode, sizeof(s->kinds.ops));
	dbfs_errno_counts(d->fs, s->kinds.errs);
	for (int i = 0; i < DBFS_ERRNOS; i++)
		s->errors += s->kinds.errs[i];
	dbfs_counters(d->fs, &c);
	s->flushes = c.flushes;
	s->commits = c.commits;
}

void mfs_account_take_samples(struct mfs_account *a, uint64_t t)
{
	struct mfs_manager *mgr = a->mgr;

	a->nout = 0;
	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->fs || !d->sess)
			continue;
		if (a->nout == a->capout) {
			size_t cap = a->capout ? 2 * a->capout : 64;
			struct sample *p = realloc(a->out, cap * sizeof(*p));
			if (!p)
				break;
			a->out = p;
			a->capout = cap;
		}
		sample_one(d, t, &a->out[a->nout]);
		mfs_account_gauges_take(a, &a->out[a->nout++]);
	}
	pthread_mutex_unlock(&mgr->lock);
}

/*
 * A record on the queue: the sample's fields before its kinds as they are,
 * then the kinds encoded (usage_kinds.h: only the non-zero ones, 10 bytes
 * each), so a record takes about 700 bytes instead of the 2.2 KB of the
 * whole struct.
 */
#define WIRE_HEAD offsetof(struct sample, kinds)
#define WIRE_MAX (WIRE_HEAD + MFS_USAGE_KINDS_MAX)

/* Enqueue this tick's records as memory-only messages. */
void mfs_account_enqueue(struct mfs_account *a)
{
	struct mfsq_msg_in m[BATCH];

	if (!a->wire && !(a->wire = malloc(BATCH * WIRE_MAX))) {
		mfs_warn("accounting: out of memory: records of a second lost");
		return;
	}
	for (size_t i = 0; i < a->nout;) {
		size_t n = 0;
		for (; n < BATCH && i < a->nout; n++, i++) {
			unsigned char *w = a->wire + n * WIRE_MAX;
			memcpy(w, &a->out[i], WIRE_HEAD);
			memset(&m[n], 0, sizeof(m[n]));
			m[n].data = w;
			m[n].len = WIRE_HEAD + mfs_usage_kinds_put(w + WIRE_HEAD, &a->out[i].kinds);
			m[n].enqueuer = a->out[i].id;
			m[n].flags = MFSQ_MSG_BUFFERED;
		}
		int rc = mfsq_enqueue_batch(a->q, NULL, m, n, NULL);
		if (rc)
			mfs_warn("accounting: enqueue: %s", mfsq_strerror(rc));
	}
}

/* Dequeue what this tick enqueued (and anything left) into a->in. */
void mfs_account_drain(struct mfs_account *a)
{
	struct mfsq_msg m[BATCH];
	size_t n;
	int rc;

	a->nin = 0;
	while ((rc = mfsq_dequeue(a->sub, m, BATCH, &n, 0)) == 0 || rc == MFSQ_LAGGED) {
		if (rc == MFSQ_LAGGED) {
			mfs_warn("accounting: records lost (the queue dropped them)");
			continue;
		}
		if (a->nin + n > a->capin) {
			size_t cap = a->capin ? a->capin : 64;
			while (cap < a->nin + n)
				cap *= 2;
			struct sample *p = realloc(a->in, cap * sizeof(*p));
			if (!p) {
				mfs_warn("accounting: out of memory: records of a second lost");
				break;
			}
			a->in = p;
			a->capin = cap;
		}
		for (size_t i = 0; i < n; i++) {
			struct sample *s = &a->in[a->nin];
			const unsigned char *w = m[i].data;
			if (m[i].len < WIRE_HEAD)
				continue;
			memcpy(s, w, WIRE_HEAD);
			if (!mfs_usage_kinds_get(w + WIRE_HEAD, m[i].len - WIRE_HEAD, &s->kinds))
				a->nin++;
		}
		mfsq_ack(a->sub, NULL, NULL);
	}
	if (rc && rc != EAGAIN && rc != MFSQ_LAGGED)
		mfs_warn("accounting: dequeue: %s", mfsq_strerror(rc));
}
