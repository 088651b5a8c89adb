/*
 * Folding the accountant's records (account.h): consecutive cumulative
 * samples of a DBFS become what each second added, kept in a ring of
 * RING seconds for the rates, and rows of the retained history (1 s rows
 * for busy seconds, a 1 min row per busy minute; usage_store.h). a->lock
 * held throughout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account_private.h"

static struct acct_dbfs *slot(struct mfs_account *a, uint32_t id, const char *name)
{
	if (id >= a->ndbfs) {
		uint32_t n = a->ndbfs ? a->ndbfs : 16;
		while (n <= id)
			n *= 2;
		struct acct_dbfs **p = realloc(a->dbfs, n * sizeof(*p));
		if (!p)
			return NULL;
		memset(p + a->ndbfs, 0, (n - a->ndbfs) * sizeof(*p));
		a->dbfs = p;
		a->ndbfs = n;
	}
	struct acct_dbfs *x = a->dbfs[id];
	if (x && strcmp(x->name, name)) { /* the id went to another DBFS */
		free(x);
		x = a->dbfs[id] = NULL;
	}
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return NULL;
		x->id = id;
		snprintf(x->name, sizeof(x->name), "%s", name);
		a->dbfs[id] = x;
	}
	return x;
}

/* Write a 1 min row for the minute x was summing, if anything happened. */
void mfs_account_flush_minute(struct mfs_account *a, MDB_txn *txn, struct acct_dbfs *x)
{
	if (!x->min_active)
		return;
	uint64_t total = 0;
	for (int i = 0; i < MFS_LAT_BUCKETS; i++)
		total += x->min_hist[i];
	struct mfs_usage_row r = {
	    .t = x->min_t + 60, .span = 60,
	    .ops = x->min.ops, .read_bytes = x->min.read_bytes,
	    .write_bytes = x->min.write_bytes, .errors = x->min.errors,
	    .throttled = x->min.throttled, .feed_events = x->min.feed_events,
	    .lat_p50_ns = mfs_account_pct(x->min_hist, total, 50),
	    .lat_p99_ns = mfs_account_pct(x->min_hist, total, 99),
	    .bytes_used = x->gauge[0], .inodes_used = x->gauge[1],
	    .cache_bytes = x->gauge[2], .feed_lag = x->gauge[3],
	    .flushes = x->min.flushes, .commits = x->min.commits, .kinds = x->min_kinds,
	};
	if (txn && mfs_usage_put(a->st, txn, x->name, MFS_RES_MIN, &r))
		a->dropped_rows++;
	x->min_active = false;
	memset(&x->min, 0, sizeof(x->min));
	memset(x->min_hist, 0, sizeof(x->min_hist));
	memset(&x->min_kinds, 0, sizeof(x->min_kinds));
}

/* Fold one record into x: the second's rates, its history row. a->lock
 * held. */
void mfs_account_apply(struct mfs_account *a, MDB_txn *txn, const struct sample *s)
{
	struct acct_dbfs *x = slot(a, s->id, s->name);

	if (!x)
		return;
	if (!x->have_prev || s->ops < x->prev.ops) {
		/* first, or a new session: its counters started at 0 when it
		 * was mounted (the accountant samples every mounted DBFS at
		 * every tick, so it never loses sight of one still mounted), and
		 * what it did before this record belongs to this second */
		memset(&x->prev, 0, sizeof(x->prev));
		x->have_prev = true;
	}
	const struct sample *p = &x->prev;
	struct second d = {
	    .ops = s->ops - p->ops, .read_bytes = s->read_bytes - p->read_bytes,
	    .write_bytes = s->write_bytes - p->write_bytes, .errors = s->errors - p->errors,
	    .throttled = s->throttled - p->throttled, .busy_ns = s->busy_ns - p->busy_ns,
	    .feed_events = s->gauges && p->gauges && s->feed_events >= p->feed_events
				   ? s->feed_events - p->feed_events : 0,
	    .flushes = s->flushes - p->flushes, .commits = s->commits - p->commits,
	};
	struct mfs_usage_kinds dk;
	mfs_usage_kinds_sub(&dk, &s->kinds, &p->kinds);
	uint64_t h[MFS_LAT_BUCKETS], total = 0;
	for (int i = 0; i < MFS_LAT_BUCKETS; i++) {
		h[i] = s->hist[i] - p->hist[i];
		total += h[i];
	}
	unsigned k = (unsigned)(a->ticks % RING), l = (unsigned)(a->ticks % LAT_WINDOW);
	x->ring[k] = d;
	x->ring_tick[k] = a->ticks;
	for (int i = 0; i < MFS_LAT_BUCKETS; i++)
		x->lat[l][i] = h[i] > UINT32_MAX ? UINT32_MAX : (uint32_t)h[i];
	x->lat_tick[l] = a->ticks;
	if (s->gauges) {
		memcpy(x->gauge, &s->bytes_used, sizeof(x->gauge));
		struct sample keep = *s;
		x->prev = keep;
	} else { /* keep the last gauges and feed count */
		uint64_t fe = x->prev.feed_events;
		int g = (int)x->prev.gauges;
		x->prev = *s;
		x->prev.feed_events = fe;
		x->prev.gauges = (uint32_t)g;
	}
	x->last_tick = a->ticks;

	/* history: the minute row, then this second's (idle seconds: none) */
	uint64_t minute = s->t - s->t % 60;
	if (x->min_active && x->min_t != minute)
		mfs_account_flush_minute(a, txn, x);
	bool changed = memcmp(x->gauge, x->row_gauge, sizeof(x->gauge)) != 0;
	if (!d.ops && !d.errors && !d.throttled && !d.feed_events && !d.flushes && !d.commits &&
	    !changed)
		return;
	if (!x->min_active) {
		x->min_active = true;
		x->min_t = minute;
	}
	x->min.ops += d.ops;
	x->min.read_bytes += d.read_bytes;
	x->min.write_bytes += d.write_bytes;
	x->min.errors += d.errors;
	x->min.throttled += d.throttled;
	x->min.feed_events += d.feed_events;
	x->min.flushes += d.flushes;
	x->min.commits += d.commits;
	mfs_usage_kinds_add(&x->min_kinds, &dk);
	for (int i = 0; i < MFS_LAT_BUCKETS; i++)
		x->min_hist[i] += h[i];
	struct mfs_usage_row r = {
	    .t = s->t, .span = 1,
	    .ops = d.ops, .read_bytes = d.read_bytes, .write_bytes = d.write_bytes,
	    .errors = d.errors, .throttled = d.throttled, .feed_events = d.feed_events,
	    .lat_p50_ns = mfs_account_pct(h, total, 50), .lat_p99_ns = mfs_account_pct(h, total, 99),
	    .bytes_used = x->gauge[0], .inodes_used = x->gauge[1],
	    .cache_bytes = x->gauge[2], .feed_lag = x->gauge[3],
	    .flushes = d.flushes, .commits = d.commits, .kinds = dk,
	};
	memcpy(x->row_gauge, x->gauge, sizeof(x->gauge));
	if (txn && mfs_usage_put(a->st, txn, x->name, MFS_RES_SEC, &r))
		a->dropped_rows++;
}

/* DBFSs with no record for RING seconds (unmounted): forget them, after
 * writing their minute. a->lock held. */
void mfs_account_forget_gone(struct mfs_account *a, MDB_txn *txn)
{
	for (uint32_t i = 0; i < a->ndbfs; i++) {
		struct acct_dbfs *x = a->dbfs[i];
		if (!x || a->ticks - x->last_tick < RING)
			continue;
		mfs_account_flush_minute(a, txn, x);
		free(x);
		a->dbfs[i] = NULL;
	}
}
