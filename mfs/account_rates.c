/*
 * What readers ask of the accountant (account.h): the rates over the last
 * 1, 10 and 60 s and the recent latency percentiles from the ring that
 * account_fold.c fills, the totals of the last record, the governor's
 * weight, the tick count, and the retained history as text. Any thread; a->lock taken briefly.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "account_private.h"

uint64_t mfs_account_pct(const uint64_t *h, uint64_t total, double pct)
{
	uint64_t want = (uint64_t)((double)total * pct / 100.0), seen = 0;

	if (!total)
		return 0;
	if (want < 1)
		want = 1;
	for (int i = 0; i < MFS_LAT_BUCKETS; i++) {
		seen += h[i];
		if (seen >= want)
			return (uint64_t)1 << (i + 1);
	}
	return (uint64_t)1 << MFS_LAT_BUCKETS;
}

void mfs_account_rates(struct mfs_account *a, uint32_t id, struct mfs_rates *r)
{
	static const unsigned win[MFS_RATE_WINDOWS] = {1, 10, 60};

	memset(r, 0, sizeof(*r));
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	struct acct_dbfs *x = id < a->ndbfs ? a->dbfs[id] : NULL;
	uint64_t now = a->ticks; /* the last tick folded in is now - 1 */
	if (x && x->have_prev) {
		for (unsigned w = 0; w < MFS_RATE_WINDOWS; w++) {
			struct second sum = {0};
			for (unsigned i = 0; i < win[w] && i < now; i++) {
				uint64_t t = now - 1 - i;
				const struct second *s = &x->ring[t % RING];
				if (x->ring_tick[t % RING] != t)
					continue;
				if (w == MFS_RATE_WINDOWS - 1)
					r->seconds++;
				sum.ops += s->ops;
				sum.read_bytes += s->read_bytes;
				sum.write_bytes += s->write_bytes;
				sum.errors += s->errors;
				sum.throttled += s->throttled;
				sum.feed_events += s->feed_events;
				sum.flushes += s->flushes;
				sum.busy_ns += s->busy_ns;
			}
			r->demand[w] = (double)sum.busy_ns / 1e9 / win[w];
			r->ops[w] = (double)sum.ops / win[w];
			r->read_bytes[w] = (double)sum.read_bytes / win[w];
			r->write_bytes[w] = (double)sum.write_bytes / win[w];
			r->errors[w] = (double)sum.errors / win[w];
			r->throttled[w] = (double)sum.throttled / win[w];
			r->feed_events[w] = (double)sum.feed_events / win[w];
			r->flushes[w] = (double)sum.flushes / win[w];
		}
		uint64_t h[MFS_LAT_BUCKETS] = {0}, total = 0;
		for (unsigned i = 0; i < LAT_WINDOW && i < now; i++) {
			uint64_t t = now - 1 - i;
			if (x->lat_tick[t % LAT_WINDOW] != t)
				continue;
			for (int b = 0; b < MFS_LAT_BUCKETS; b++) {
				h[b] += x->lat[t % LAT_WINDOW][b];
				total += x->lat[t % LAT_WINDOW][b];
			}
		}
		r->lat_p50_ns = mfs_account_pct(h, total, 50);
		r->lat_p99_ns = mfs_account_pct(h, total, 99);
		r->feed_lag = x->gauge[3];
	}
	pthread_mutex_unlock(&a->lock);
}

int mfs_account_totals(struct mfs_account *a, uint32_t id, const char *name,
		       struct mfs_usage_totals *t)
{
	int rc = -ENOENT;

	memset(t, 0, sizeof(*t));
	if (!a)
		return rc;
	pthread_mutex_lock(&a->lock);
	struct acct_dbfs *x = id < a->ndbfs ? a->dbfs[id] : NULL;
	if (x && x->have_prev && !strcmp(x->name, name)) {
		const struct sample *s = &x->prev;
		t->t = s->t;
		t->ops = s->ops;
		t->read_bytes = s->read_bytes;
		t->write_bytes = s->write_bytes;
		t->errors = s->errors;
		t->flushes = s->flushes;
		t->commits = s->commits;
		t->busy_ns = s->busy_ns;
		memcpy(t->hist, s->hist, sizeof(t->hist));
		t->kinds = s->kinds;
		rc = 0;
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}

double mfs_account_weight(struct mfs_account *a, uint32_t id)
{
	struct mfs_rates r;

	mfs_account_rates(a, id, &r);
	return r.ops[1] + (r.read_bytes[1] + r.write_bytes[1]) / 4096;
}

uint64_t mfs_account_ticks(struct mfs_account *a)
{
	uint64_t n;

	if (!a)
		return 0;
	pthread_mutex_lock(&a->lock);
	n = a->ticks;
	pthread_mutex_unlock(&a->lock);
	return n;
}

int mfs_account_history(struct mfs_account *a, const char *name, struct mfs_buf *b)
{
	if (!a) {
		mfs_buf_printf(b, "# no usage history: accounting is off\n");
		return 0;
	}
	return mfs_usage_text(a->st, name, (uint64_t)time(NULL), a->conf.fine_sec, b);
}
