/* The Prometheus text exposition (see metrics.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "dbfs/feed.h"
#include "loop.h"
#include "metrics.h"

/* Histogram buckets: the loop's bucket i holds [2^i, 2^(i+1)) ns, so the
 * requests under le = 2^(i+1) ns are exactly those of buckets 0..i. From
 * 2^15 ns (32.8 us, the first bound at or below 50 us) to 2^32 ns (4.29 s). */
#define LE_FIRST 15
#define LE_LAST 32

struct snap {
	struct mfs_dbfs *pinned; /* its store in use outside mgr->lock (mfs_dbfs_pin) */
	struct dbfs *fs;
	char name[2 * MFS_NAME_MAX + 1]; /* escaped for a label value */
	char *mountpoint, *store;
	const char *state;
	bool mounted;
	struct mfs_session_stats st; /* live: throttled, capped, inflight */
	struct mfs_usage_totals tot; /* the counters, from the last usage record */
	struct dbfs_usage u;
	uint64_t quota_bytes, quota_inodes, cache_bytes, cache_limit;
	bool feed;
	uint64_t feed_events, feed_lag;
};

/* A label value, escaped as the format asks (\\, \", \n). */
static void label(struct mfs_buf *b, const char *v)
{
	if (!mfs_buf_reserve(b, 2 * strlen(v)))
		return;
	for (; *v; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n')
			b->p[b->len++] = '\\';
		b->p[b->len++] = *v == '\n' ? 'n' : *v;
	}
	b->p[b->len] = '\0';
}

static int lag_of(void *arg, const struct dbfs_feed_sub_info *i)
{
	uint64_t *worst = arg;
	if (i->lag > *worst)
		*worst = i->lag;
	return 0;
}

/* The counters as the accountant's last record of d carried them through
 * the queue (account.h): none yet, all 0 (up to a second after its mount).
 * Without an accountant (it failed to start: logged), the live counters
 * the record would have carried. mgr->lock held. */
static void take_totals(struct mfs_dbfs *d, struct snap *s)
{
	struct mfs_account *a = mfs_account_running();
	struct mfs_usage_totals *t = &s->tot;
	struct dbfs_counters c;

	if (a) {
		mfs_account_totals(a, d->id, d->conf.name, t);
		return;
	}
	memset(t, 0, sizeof(*t));
	t->ops = s->st.ops;
	t->read_bytes = s->st.read_bytes;
	t->write_bytes = s->st.write_bytes;
	t->busy_ns = s->st.lat_sum_ns;
	memcpy(t->hist, s->st.lat_hist, sizeof(t->hist));
	memcpy(t->kinds.ops, s->st.by_opcode, sizeof(t->kinds.ops));
	dbfs_errno_counts(d->fs, t->kinds.errs);
	dbfs_counters(d->fs, &c);
	t->flushes = c.flushes;
	t->commits = c.commits;
}

/* What needs no store work: names, states, the counters request paths
 * update without locks. mgr->lock held. A mounted DBFS is pinned for
 * take_store. */
static void take(struct mfs_dbfs *d, struct snap *s)
{
	struct mfs_buf nb = {0};

	memset(s, 0, sizeof(*s));
	label(&nb, d->conf.name);
	snprintf(s->name, sizeof(s->name), "%s", nb.p ? nb.p : "");
	mfs_buf_free(&nb);
	s->mountpoint = strdup(d->conf.mountpoint);
	s->store = strdup(d->conf.store);
	s->state = mfs_state_name(d->state);
	s->quota_bytes = d->quota_bytes;
	s->quota_inodes = d->quota_inodes;
	if (d->state != MFS_MOUNTED || !d->fs || !d->sess)
		return;
	s->mounted = true;
	mfs_loop_sample(d->sess, &s->st);
	take_totals(d, s);
	uint64_t trimmed;
	dbfs_cache_usage(d->fs, &s->cache_bytes, &s->cache_limit, &trimmed);
	mfs_dbfs_pin(d);
	s->pinned = d;
	s->fs = d->fs;
}

/* What takes a read transaction or a stat: space and the feed. Without
 * mgr->lock, the DBFS pinned. */
static void take_store(struct snap *s)
{
	if (!s->pinned)
		return;
	if (dbfs_usage(s->fs, &s->u))
		memset(&s->u, 0, sizeof(s->u));
	struct dbfs_feed_stats f;
	if (!dbfs_feed_stats(s->fs, &f)) {
		s->feed = true;
		s->feed_events = f.enqueued;
		dbfs_feed_sub_list(s->fs, lag_of, &s->feed_lag);
	}
}

/* The text is made of many short pieces (about 46 lines per DBFS): put
 * them without printf, whose parsing of the format was most of the time
 * with 1,000 DBFSs. */
static void put(struct mfs_buf *b, const char *s)
{
	mfs_buf_put(b, s, strlen(s));
}

static void put_u64(struct mfs_buf *b, uint64_t v)
{
	char t[20];
	size_t i = sizeof(t);

	do
		t[--i] = (char)('0' + v % 10);
	while (v /= 10);
	mfs_buf_put(b, t + i, sizeof(t) - i);
}

/* "} VALUE\n": the end of a series. */
static void value(struct mfs_buf *b, uint64_t v)
{
	mfs_buf_put(b, "} ", 2);
	put_u64(b, v);
	mfs_buf_putc(b, '\n');
}

static void head(struct mfs_buf *b, const char *name, const char *type, const char *help)
{
	mfs_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void dbfs_label(struct mfs_buf *b, const char *name, const struct snap *s)
{
	put(b, name);
	put(b, "{dbfs=\"");
	put(b, s->name);
	mfs_buf_putc(b, '"');
}

/* One series per mounted DBFS of a value picked by `off` (bytes into
 * struct snap, a uint64_t). */
static void family(struct mfs_buf *b, const struct snap *v, size_t n, const char *name,
		   const char *type, const char *help, size_t off, bool feed_only)
{
	head(b, name, type, help);
	for (size_t i = 0; i < n; i++) {
		if (!v[i].mounted || (feed_only && !v[i].feed))
			continue;
		dbfs_label(b, name, &v[i]);
		value(b, *(const uint64_t *)((const char *)&v[i] + off));
	}
}

#define F(field) offsetof(struct snap, field)

static void render(struct mfs_buf *b, const struct snap *v, size_t n)
{
	char le_text[LE_LAST + 1][32];

	for (int le = LE_FIRST; le <= LE_LAST; le++)
		snprintf(le_text[le], sizeof(le_text[le]), ",le=\"%.10g\"", (double)(1ull << le) / 1e9);
	mfs_buf_reserve(b, 2600 * n); /* what a DBFS takes, about: no regrowth */
	head(b, "mfs_dbfs_info", "gauge", "A DBFS the manager knows (1), with where it lives.");
	for (size_t i = 0; i < n; i++) {
		dbfs_label(b, "mfs_dbfs_info", &v[i]);
		mfs_buf_printf(b, ",mountpoint=\"");
		label(b, v[i].mountpoint ? v[i].mountpoint : "");
		mfs_buf_printf(b, "\",store=\"");
		label(b, v[i].store ? v[i].store : "");
		mfs_buf_printf(b, "\",state=\"%s\"} 1\n", v[i].state);
	}
	family(b, v, n, "mfs_requests_total", "counter", "FUSE requests served.", F(tot.ops), false);
	head(b, "mfs_operations_total", "counter", "FUSE requests served, by operation.");
	for (size_t i = 0; i < n; i++)
		for (unsigned op = 0; v[i].mounted && op < MFS_OPCODES; op++) {
			if (!v[i].tot.kinds.ops[op])
				continue;
			const char *on = mfs_op_name(op);
			dbfs_label(b, "mfs_operations_total", &v[i]);
			put(b, ",op=\"");
			put(b, on ? on : "other");
			mfs_buf_putc(b, '"');
			value(b, v[i].tot.kinds.ops[op]);
		}
	family(b, v, n, "mfs_read_bytes_total", "counter", "Bytes asked by read requests.",
	       F(tot.read_bytes), false);
	family(b, v, n, "mfs_written_bytes_total", "counter", "Bytes carried by write requests.",
	       F(tot.write_bytes), false);
	head(b, "mfs_errors_total", "counter", "Requests answered with an error, by errno.");
	for (size_t i = 0; i < n; i++)
		for (int e = 0; v[i].mounted && e < DBFS_ERRNOS; e++) {
			if (!v[i].tot.kinds.errs[e])
				continue;
			dbfs_label(b, "mfs_errors_total", &v[i]);
			put(b, ",errno=\"");
			put(b, mfs_errno_name((unsigned)e));
			mfs_buf_putc(b, '"');
			value(b, v[i].tot.kinds.errs[e]);
		}
	head(b, "mfs_request_duration_seconds", "histogram",
	     "Time from reading a request to its answer.");
	for (size_t i = 0; i < n; i++) {
		if (!v[i].mounted)
			continue;
		uint64_t cum = 0, total = 0;
		for (int k = 0; k < MFS_LAT_BUCKETS; k++)
			total += v[i].tot.hist[k];
		for (int k = 0; k < LE_FIRST - 1; k++)
			cum += v[i].tot.hist[k];
		for (int le = LE_FIRST; le <= LE_LAST; le++) {
			cum += v[i].tot.hist[le - 1];
			dbfs_label(b, "mfs_request_duration_seconds_bucket", &v[i]);
			put(b, le_text[le]);
			value(b, cum);
		}
		dbfs_label(b, "mfs_request_duration_seconds_bucket", &v[i]);
		put(b, ",le=\"+Inf\"");
		value(b, total);
		dbfs_label(b, "mfs_request_duration_seconds_sum", &v[i]);
		mfs_buf_printf(b, "} %.9f\n", (double)v[i].tot.busy_ns / 1e9);
		dbfs_label(b, "mfs_request_duration_seconds_count", &v[i]);
		value(b, total);
	}
	family(b, v, n, "mfs_throttled_total", "counter",
	       "Times a request was held back by an IOPS or bandwidth limit.", F(st.throttled),
	       false);
	family(b, v, n, "mfs_capped_total", "counter",
	       "Times a request was held back by the concurrency limit or fair share.",
	       F(st.capped), false);
	head(b, "mfs_inflight_requests", "gauge", "Requests being processed.");
	for (size_t i = 0; i < n; i++)
		if (v[i].mounted) {
			dbfs_label(b, "mfs_inflight_requests", &v[i]);
			value(b, v[i].st.inflight);
		}
	family(b, v, n, "mfs_commits_total", "counter", "LMDB write transactions committed.",
	       F(tot.commits), false);
	family(b, v, n, "mfs_flushes_total", "counter", "Durable points made.", F(tot.flushes),
	       false);
	family(b, v, n, "mfs_used_bytes", "gauge", "Bytes the DBFS's files use.", F(u.bytes), false);
	family(b, v, n, "mfs_used_inodes", "gauge", "Inodes in use.", F(u.inodes), false);
	family(b, v, n, "mfs_quota_bytes", "gauge", "Space quota (0: none).", F(quota_bytes), false);
	family(b, v, n, "mfs_quota_inodes", "gauge", "Inode quota (0: none).", F(quota_inodes),
	       false);
	family(b, v, n, "mfs_store_file_bytes", "gauge", "Bytes data.mdb takes on disk.",
	       F(u.file_size), false);
	family(b, v, n, "mfs_cache_bytes", "gauge", "Kernel page cache held for the DBFS.",
	       F(cache_bytes), false);
	family(b, v, n, "mfs_cache_limit_bytes", "gauge", "Its cache limit (0: none).",
	       F(cache_limit), false);
	family(b, v, n, "mfs_feed_events_total", "counter",
	       "Change events written to the feed.", F(feed_events), true);
	family(b, v, n, "mfs_feed_lag_events", "gauge",
	       "Events the furthest-behind durable subscription has not acknowledged.",
	       F(feed_lag), true);
}

void mfs_metrics_text(struct mfs_manager *mgr, struct mfs_buf *b)
{
	struct snap *v = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (n == cap) {
			size_t c2 = cap ? 2 * cap : 16;
			struct snap *p = realloc(v, c2 * sizeof(*p));
			if (!p) {
				b->oom = true;
				break;
			}
			v = p;
			cap = c2;
		}
		take(d, &v[n++]);
	}
	pthread_mutex_unlock(&mgr->lock);
	for (size_t i = 0; i < n; i++)
		take_store(&v[i]);
	pthread_mutex_lock(&mgr->lock);
	for (size_t i = 0; i < n; i++)
		if (v[i].pinned)
			mfs_dbfs_unpin(mgr, v[i].pinned);
	pthread_mutex_unlock(&mgr->lock);
	if (!b->oom)
		render(b, v, n);
	for (size_t i = 0; i < n; i++) {
		free(v[i].mountpoint);
		free(v[i].store);
	}
	free(v);
}
