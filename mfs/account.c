/*
 * The accountant's thread (see account.h): sample, enqueue, dequeue, fold
 * into rates and the history. The records are cumulative samples; the
 * subscriber side turns consecutive ones into what each second added.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "account.h"
#include "cache_budget.h"
#include "dbfs/feed.h"
#include "governor.h"
#include "log.h"
#include "loop.h"
#include "queue/mfsq.h"
#include "usage_store.h"

#define RING 60        /* seconds of rates kept in memory */
#define LAT_WINDOW 10  /* seconds the latency percentiles cover */
#define GAUGE_EVERY 10 /* seconds between samples of space, cache and feed */
#define BATCH 256

/* A usage record: one DBFS's cumulative counters at one second. The
 * message payload on the queue "usage" (host order: memory-only). */
struct sample {
	uint32_t id;
	uint32_t gauges; /* 1: the gauge fields were sampled this time */
	char name[MFS_NAME_MAX + 1];
	uint64_t t; /* unix seconds */
	uint64_t ops, read_bytes, write_bytes, errors, throttled, feed_events;
	uint64_t busy_ns; /* time its requests spent from read to answer */
	uint64_t hist[MFS_LAT_BUCKETS];
	uint64_t bytes_used, inodes_used, cache_bytes, feed_lag;
};

struct second {
	uint64_t ops, read_bytes, write_bytes, errors, throttled, feed_events, busy_ns;
};

/* What the accountant keeps of one DBFS. */
struct acct_dbfs {
	uint32_t id;
	char name[MFS_NAME_MAX + 1];
	uint64_t last_tick; /* tick of its last record */
	bool have_prev;
	struct sample prev;
	struct second ring[RING];  /* by tick % RING */
	uint64_t ring_tick[RING];  /* which tick each slot holds */
	uint32_t lat[LAT_WINDOW][MFS_LAT_BUCKETS]; /* per-second histograms */
	uint64_t lat_tick[LAT_WINDOW];
	uint64_t gauge[4]; /* bytes_used, inodes_used, cache_bytes, feed_lag */
	uint64_t row_gauge[4]; /* as in its last history row */
	/* the minute being summed into a 1 min row */
	uint64_t min_t;
	bool min_active;
	struct second min;
	uint64_t min_hist[MFS_LAT_BUCKETS];
};

struct mfs_account {
	struct mfs_manager *mgr;
	struct mfs_account_conf conf;
	struct mfs_usage_store *st;
	mfsq_queue *q;
	mfsq_sub *sub;
	pthread_t thread;
	pthread_mutex_t lock; /* dbfs[], ticks */
	pthread_cond_t cond;
	bool stop;
	uint64_t ticks;
	uint64_t dropped_rows;
	struct acct_dbfs **dbfs; /* by id */
	uint32_t ndbfs;
	struct sample *out; /* this tick's records (thread only) */
	size_t nout, capout;
	struct sample *in; /* what the subscriber dequeued (thread only) */
	size_t nin, capin;
};

static struct mfs_account *_Atomic running;

struct mfs_account *mfs_account_running(void)
{
	return running;
}

int mfs_account_parse_duration(const char *s, uint64_t *sec)
{
	uint64_t v = 0, mul = 1;
	size_t n = strlen(s);

	if (n && strchr("smhd", s[n - 1])) {
		mul = s[n - 1] == 's' ? 1 : s[n - 1] == 'm' ? 60 : s[n - 1] == 'h' ? 3600 : 86400;
		n--;
	}
	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (1ull << 40))
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v * mul > (1ull << 40))
		return -EINVAL;
	*sec = v * mul;
	return 0;
}

static uint64_t pct_of(const uint64_t *h, uint64_t total, double pct)
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

static int lag_of(void *arg, const struct dbfs_feed_sub_info *i)
{
	uint64_t *worst = arg;
	if (i->lag > *worst)
		*worst = i->lag;
	return 0;
}

/* Sample one mounted DBFS. mgr->lock held. */
static void sample_one(struct mfs_dbfs *d, uint64_t t, bool gauges, struct sample *s)
{
	struct mfs_session_stats st;
	uint64_t errs[DBFS_ERRNOS];

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
	dbfs_errno_counts(d->fs, errs);
	for (int i = 0; i < DBFS_ERRNOS; i++)
		s->errors += errs[i];
	if (!gauges)
		return;
	/* Space, cache and feed take a read transaction or a short lock of
	 * the store: every GAUGE_EVERY seconds only. */
	struct dbfs_usage u;
	struct dbfs_feed_stats f;
	uint64_t cl, ct;
	s->gauges = 1;
	if (!dbfs_usage(d->fs, &u)) {
		s->bytes_used = u.bytes;
		s->inodes_used = u.inodes;
	}
	dbfs_cache_usage(d->fs, &s->cache_bytes, &cl, &ct);
	if (!dbfs_feed_stats(d->fs, &f)) {
		s->feed_events = f.enqueued;
		dbfs_feed_sub_list(d->fs, lag_of, &s->feed_lag);
	}
}

static int take_samples(struct mfs_account *a, uint64_t t, bool gauges)
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
		sample_one(d, t, gauges, &a->out[a->nout++]);
	}
	pthread_mutex_unlock(&mgr->lock);
	return 0;
}

/* Enqueue this tick's records as memory-only messages. */
static void enqueue_samples(struct mfs_account *a)
{
	struct mfsq_msg_in m[BATCH];

	for (size_t i = 0; i < a->nout;) {
		size_t n = 0;
		for (; n < BATCH && i < a->nout; n++, i++) {
			memset(&m[n], 0, sizeof(m[n]));
			m[n].data = &a->out[i];
			m[n].len = sizeof(a->out[i]);
			m[n].enqueuer = a->out[i].id;
			m[n].flags = MFSQ_MSG_BUFFERED;
		}
		int rc = mfsq_enqueue_batch(a->q, NULL, m, n, NULL);
		if (rc)
			mfs_warn("accounting: enqueue: %s", mfsq_strerror(rc));
	}
}

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
static void flush_minute(struct mfs_account *a, MDB_txn *txn, struct acct_dbfs *x)
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
	    .lat_p50_ns = pct_of(x->min_hist, total, 50),
	    .lat_p99_ns = pct_of(x->min_hist, total, 99),
	    .bytes_used = x->gauge[0], .inodes_used = x->gauge[1],
	    .cache_bytes = x->gauge[2], .feed_lag = x->gauge[3],
	};
	if (txn && mfs_usage_put(a->st, txn, x->name, MFS_RES_MIN, &r))
		a->dropped_rows++;
	x->min_active = false;
	memset(&x->min, 0, sizeof(x->min));
	memset(x->min_hist, 0, sizeof(x->min_hist));
}

/* Fold one record into x: the second's rates, its history row. a->lock
 * held. */
static void apply(struct mfs_account *a, MDB_txn *txn, const struct sample *s)
{
	struct acct_dbfs *x = slot(a, s->id, s->name);

	if (!x)
		return;
	if (!x->have_prev || s->ops < x->prev.ops) { /* first, or a new session */
		x->prev = *s;
		x->have_prev = true;
		if (s->gauges)
			memcpy(x->gauge, &s->bytes_used, sizeof(x->gauge));
		x->last_tick = a->ticks;
		return;
	}
	const struct sample *p = &x->prev;
	struct second d = {
	    .ops = s->ops - p->ops, .read_bytes = s->read_bytes - p->read_bytes,
	    .write_bytes = s->write_bytes - p->write_bytes, .errors = s->errors - p->errors,
	    .throttled = s->throttled - p->throttled, .busy_ns = s->busy_ns - p->busy_ns,
	    .feed_events = s->gauges && p->gauges && s->feed_events >= p->feed_events
				   ? s->feed_events - p->feed_events : 0,
	};
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
		flush_minute(a, txn, x);
	bool changed = memcmp(x->gauge, x->row_gauge, sizeof(x->gauge)) != 0;
	if (!d.ops && !d.errors && !d.throttled && !d.feed_events && !changed)
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
	for (int i = 0; i < MFS_LAT_BUCKETS; i++)
		x->min_hist[i] += h[i];
	struct mfs_usage_row r = {
	    .t = s->t, .span = 1,
	    .ops = d.ops, .read_bytes = d.read_bytes, .write_bytes = d.write_bytes,
	    .errors = d.errors, .throttled = d.throttled, .feed_events = d.feed_events,
	    .lat_p50_ns = pct_of(h, total, 50), .lat_p99_ns = pct_of(h, total, 99),
	    .bytes_used = x->gauge[0], .inodes_used = x->gauge[1],
	    .cache_bytes = x->gauge[2], .feed_lag = x->gauge[3],
	};
	memcpy(x->row_gauge, x->gauge, sizeof(x->gauge));
	if (txn && mfs_usage_put(a->st, txn, x->name, MFS_RES_SEC, &r))
		a->dropped_rows++;
}

/* Dequeue what this tick enqueued (and anything left) into a->in. */
static void drain(struct mfs_account *a)
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
		for (size_t i = 0; i < n; i++)
			if (m[i].len == sizeof(struct sample))
				memcpy(&a->in[a->nin++], m[i].data, sizeof(struct sample));
		mfsq_ack(a->sub, NULL, NULL);
	}
	if (rc && rc != EAGAIN && rc != MFSQ_LAGGED)
		mfs_warn("accounting: dequeue: %s", mfsq_strerror(rc));
}

/* DBFSs with no record for RING seconds (unmounted): forget them, after
 * writing their minute. a->lock held. */
static void forget_gone(struct mfs_account *a, MDB_txn *txn)
{
	for (uint32_t i = 0; i < a->ndbfs; i++) {
		struct acct_dbfs *x = a->dbfs[i];
		if (!x || a->ticks - x->last_tick < RING)
			continue;
		flush_minute(a, txn, x);
		free(x);
		a->dbfs[i] = NULL;
	}
}

/*
 * The governor's shares from the rates just folded in (governor.h): the
 * workers a busy DBFS may hold beyond its fair share, and the cache
 * memory of the manager's mem= by activity. mgr->lock, then a->lock.
 */
static void govern(struct mfs_account *a)
{
	struct mfs_manager *mgr = a->mgr;
	unsigned workers = mfs_loop_workers(mgr->loop);
	unsigned total_ceil = 0;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->sess)
			continue;
		struct mfs_rates r;
		mfs_account_rates(a, d->id, &r);
		d->demand = r.demand[1];
		total_ceil += d->demand > 0 ? (unsigned)d->demand + 1 : 0;
	}
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->sess)
			continue;
		unsigned own = d->demand > 0 ? (unsigned)d->demand + 1 : 0;
		mfs_loop_set_share(d->sess, mfs_worker_share(workers, d->demand, total_ceil - own));
	}
	mfs_cache_rebalance(mgr);
	pthread_mutex_unlock(&mgr->lock);
}

static void tick(struct mfs_account *a, uint64_t t)
{
	MDB_txn *txn = NULL;

	take_samples(a, t, a->ticks % GAUGE_EVERY == 0);
	enqueue_samples(a);
	/* The queue's own transactions (dequeue maintenance) must not run
	 * inside ours: dequeue everything first, then write. */
	drain(a);
	if (mfs_usage_begin(a->st, &txn))
		txn = NULL;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nin; i++)
		apply(a, txn, &a->in[i]);
	forget_gone(a, txn);
	a->ticks++;
	pthread_mutex_unlock(&a->lock);
	govern(a);
	if (txn && t % 60 == 0) {
		int n = mfs_usage_trim(a->st, txn, t - a->conf.fine_sec, t - a->conf.coarse_sec);
		if (n < 0)
			mfs_warn("accounting: trimming the history: %s", strerror(-n));
	}
	if (txn) {
		int rc = mfs_usage_commit(txn);
		if (rc) {
			mfs_warn("accounting: history: %s", strerror(-rc));
			a->dropped_rows++;
		}
	}
}

/*
 * Ticks at each second of the wall clock (so rows of every DBFS share
 * their times). Woken early to stop.
 */
static void *account_main(void *arg)
{
	struct mfs_account *a = arg;

	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		struct timespec now, until;
		clock_gettime(CLOCK_REALTIME, &now);
		until.tv_sec = now.tv_sec + 1;
		until.tv_nsec = 0;
		while (!a->stop && pthread_cond_timedwait(&a->cond, &a->lock, &until) != ETIMEDOUT)
			;
		if (a->stop)
			break;
		pthread_mutex_unlock(&a->lock);
		tick(a, (uint64_t)until.tv_sec);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int mfs_account_start(struct mfs_manager *mgr, const struct mfs_account_conf *conf,
		      struct mfs_account **out, char *err, size_t errlen)
{
	struct mfs_account *a = calloc(1, sizeof(*a));
	char dir[PATH_MAX + 8];
	struct mfsq_config qc;
	int rc;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->mgr = mgr;
	a->conf = *conf;
	mfsq_config_default(&qc);
	qc.nshards = 4;
	qc.retain_max = 4;
	snprintf(dir, sizeof(dir), "%s/usage", mgr->state_dir);
	rc = mfs_usage_open(dir, mfsq_dbs_needed(&qc), &a->st, err, errlen);
	if (rc)
		goto fail;
	rc = mfsq_open(mfs_usage_env(a->st), "usage", &qc, MFSQ_CREATE, &a->q);
	if (!rc)
		rc = mfsq_subscribe(a->q, NULL, 0, NULL, NULL, &a->sub);
	if (rc) {
		snprintf(err, errlen, "usage queue in %s: %s", dir, mfsq_strerror(rc));
		rc = rc > 0 ? -rc : -EIO;
		goto fail_q;
	}
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&a->thread, NULL, account_main, a);
	if (rc) {
		snprintf(err, errlen, "accounting thread: %s", strerror(-rc));
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
		goto fail_q;
	}
	*out = a;
	running = a;
	return 0;
fail_q:
	if (a->sub)
		mfsq_unsubscribe(a->sub);
	mfsq_close(a->q);
	mfs_usage_close(a->st);
fail:
	free(a);
	return rc;
}

void mfs_account_stop(struct mfs_account *a)
{
	if (!a)
		return;
	running = NULL;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	MDB_txn *txn = NULL;
	if (mfs_usage_begin(a->st, &txn))
		txn = NULL;
	for (uint32_t i = 0; i < a->ndbfs; i++) {
		if (a->dbfs[i])
			flush_minute(a, txn, a->dbfs[i]);
		free(a->dbfs[i]);
	}
	if (txn && mfs_usage_commit(txn))
		mfs_warn("accounting: history: last minute not saved");
	free(a->dbfs);
	free(a->out);
	free(a->in);
	mfsq_unsubscribe(a->sub);
	mfsq_close(a->q);
	mfs_usage_close(a->st);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a);
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
				sum.busy_ns += s->busy_ns;
			}
			r->demand[w] = (double)sum.busy_ns / 1e9 / win[w];
			r->ops[w] = (double)sum.ops / win[w];
			r->read_bytes[w] = (double)sum.read_bytes / win[w];
			r->write_bytes[w] = (double)sum.write_bytes / win[w];
			r->errors[w] = (double)sum.errors / win[w];
			r->throttled[w] = (double)sum.throttled / win[w];
			r->feed_events[w] = (double)sum.feed_events / win[w];
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
		r->lat_p50_ns = pct_of(h, total, 50);
		r->lat_p99_ns = pct_of(h, total, 99);
		r->feed_lag = x->gauge[3];
	}
	pthread_mutex_unlock(&a->lock);
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
