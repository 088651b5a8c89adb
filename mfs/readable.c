/* Text of the readable attributes and status files (see readable.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "account.h"
#include "answer.h"
#include "loop.h"
#include "dbfs/expire.h"
#include "dbfs/feed.h"
#include "feed_line.h"
#include "feed_spec.h"
#include "readable.h"
#include "uring.h"
#include "verbs.h"

static void usage_of(struct mfs_dbfs *d, struct dbfs_usage *u)
{
	memset(u, 0, sizeof(*u));
	if (d->state == MFS_MOUNTED && d->fs)
		dbfs_usage(d->fs, u);
}

static void text_status(struct mfs_dbfs *d, struct mfs_buf *b)
{
	char why[160];
	mfs_buf_printf(b, "name=%s\nstate=%s\n", d->conf.name, mfs_state_name(d->state));
	if (d->state == MFS_MOUNTED && d->fs && dbfs_health(d->fs, why, sizeof(why)))
		mfs_buf_printf(b, "read_only=io-error\nio_error=%s\n", why);
	if (d->reason[0])
		mfs_buf_printf(b, "reason=%s\n", d->reason);
	mfs_buf_printf(b, "mountpoint=%s\nstore=%s\nowner=%u\n", d->conf.mountpoint, d->conf.store,
		       (unsigned)d->conf.owner);
	if (d->state == MFS_MOUNTED)
		mfs_buf_printf(b, "mounted_since=%llu\nconnection=%u\n",
			       (unsigned long long)d->mounted_at, d->conn);
}

static void text_config(struct mfs_dbfs *d, struct mfs_buf *b)
{
	mfs_buf_printf(b, "options=%s\nwant=%s\n", d->conf.opts,
		       d->conf.want_mounted ? "mounted" : "unmounted");
}

static int sub_line(void *arg, const struct dbfs_feed_sub_info *i)
{
	char t[MFS_FEED_TIME_MAX];
	mfs_feed_time_format(i->active_ns, t);
	mfs_buf_printf(arg, "feed_sub.%s=next=%llu,lag=%llu,gaps=%llu,lost=%llu,active=%s%s\n",
		       i->name, (unsigned long long)i->next_seq, (unsigned long long)i->lag,
		       (unsigned long long)i->gaps, (unsigned long long)i->lost, t,
		       i->open ? ",open" : "");
	return 0;
}

/* The change feed's lines of stats (dbfs/feed.h): its space apart from the
 * file system's, its positions and its durable subscriptions. */
static void text_feed(struct mfs_dbfs *d, struct mfs_buf *b)
{
	struct dbfs_feed_stats f;
	char uuid[33], t[MFS_FEED_TIME_MAX];

	if (d->state != MFS_MOUNTED || !d->fs)
		return;
	int rc = dbfs_feed_stats(d->fs, &f);
	mfs_feed_uuid_text(f.uuid, uuid);
	mfs_buf_printf(b, "feed=%s\nfeed_uuid=%s\n", f.enabled ? "on" : "off", uuid);
	if (rc)
		return;
	mfs_feed_time_format(f.oldest_ns, t);
	mfs_buf_printf(b,
		       "feed_first_seq=%llu\nfeed_next_seq=%llu\nfeed_events=%llu\nfeed_bytes=%llu\n"
		       "feed_oldest=%s\nfeed_enqueued=%llu\nfeed_trimmed=%llu\nfeed_gaps=%llu\n"
		       "feed_subs=%llu\nfeed_subs_expired=%llu\nfeed_max_events=%llu\n"
		       "feed_max_bytes=%llu\nfeed_max_age=%llu\nfeed_sub_idle=%llu\n",
		       (unsigned long long)f.first_seq, (unsigned long long)f.next_seq,
		       (unsigned long long)f.events, (unsigned long long)f.bytes,
		       f.oldest_ns ? t : "-", (unsigned long long)f.enqueued,
		       (unsigned long long)f.trimmed, (unsigned long long)f.gaps,
		       (unsigned long long)f.subs, (unsigned long long)f.subs_expired,
		       (unsigned long long)f.limits.max_events,
		       (unsigned long long)f.limits.max_bytes,
		       (unsigned long long)f.limits.max_age_sec,
		       (unsigned long long)f.limits.sub_idle_sec);
	dbfs_feed_sub_list(d->fs, sub_line, b);
}

/* Rates per second over the last 1, 10 and 60 s, from the accountant
 * (account.h), beside the totals: `ops_rate=1s,10s,60s`. */
static void text_rates(struct mfs_dbfs *d, const struct mfs_session_stats *st, struct mfs_buf *b)
{
	struct mfs_rates r;
	const struct {
		const char *name;
		const double *v;
	} rows[] = {
	    {"ops_rate", r.ops},
	    {"read_bytes_rate", r.read_bytes},
	    {"write_bytes_rate", r.write_bytes},
	    {"errors_rate", r.errors},
	    {"throttled_rate", r.throttled},
	    {"feed_events_rate", r.feed_events},
	};

	if (d->state != MFS_MOUNTED)
		return;
	mfs_account_rates(mfs_account_running(), d->id, &r);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		mfs_buf_printf(b, "%s=%.2f,%.2f,%.2f\n", rows[i].name, rows[i].v[0], rows[i].v[1],
			       rows[i].v[2]);
	mfs_buf_printf(b,
		       "rate_windows=1,10,60\nrate_seconds=%u\nrecent_latency_p50_us=%llu\n"
		       "recent_latency_p99_us=%llu\nfeed_lag=%llu\ndemand=%.2f,%.2f,%.2f\n"
		       "worker_share=%u\n",
		       r.seconds, (unsigned long long)r.lat_p50_ns / 1000,
		       (unsigned long long)r.lat_p99_ns / 1000, (unsigned long long)r.feed_lag,
		       r.demand[0], r.demand[1], r.demand[2], st->worker_share);
}

/* Delayed work's lines of stats: file expiry, deferred reclaim, settled
 * events (dbfs/expire.h). */
static void text_expire(struct mfs_dbfs *d, struct mfs_buf *b)
{
	struct dbfs_expire_stats e;
	if (d->state != MFS_MOUNTED || !d->fs || dbfs_expire_stats(d->fs, &e))
		return;
	mfs_buf_printf(b,
		       "expire_pending=%llu\nexpire_fired=%llu\nexpire_stale=%llu\n"
		       "expire_late_p50_us=%llu\nexpire_late_p99_us=%llu\nexpire_late_max_us=%llu\n"
		       "reclaim_files=%llu\nreclaim_bytes=%llu\nreclaimed=%llu\nreclaim_pieces=%llu\n"
		       "freed_txn_max=%llu\n",
		       (unsigned long long)e.pending, (unsigned long long)e.fired,
		       (unsigned long long)e.stale, (unsigned long long)e.late_p50_us,
		       (unsigned long long)e.late_p99_us, (unsigned long long)e.late_max_us,
		       (unsigned long long)e.reclaim_files, (unsigned long long)e.reclaim_bytes,
		       (unsigned long long)e.reclaimed, (unsigned long long)e.reclaim_pieces,
		       (unsigned long long)e.freed_txn_max);
	mfs_buf_printf(b, "settle_pending=%llu\nsettled=%llu\n",
		       (unsigned long long)e.settle_pending, (unsigned long long)e.settled);
}

/* A shared store's lines of stats (dbfs_shared_stats): none when the
 * store is open exclusively. */
static void text_shared(struct mfs_dbfs *d, struct mfs_buf *b)
{
	struct dbfs_shared_stats s;
	if (d->state != MFS_MOUNTED || !d->fs || dbfs_shared_stats(d->fs, &s) || !s.shared)
		return;
	mfs_buf_printf(b,
		       "shared_processes=%u\nshared_writer=%llx\nshared_events_received=%llu\n"
		       "shared_events_own=%llu\nshared_inval_entry=%llu\nshared_inval_inode=%llu\n"
		       "shared_inval_delete=%llu\nshared_inval_failed=%llu\nshared_wakes_sent=%llu\n"
		       "shared_close_timeouts=%llu\nshared_lag_p50_us=%llu\nshared_lag_p99_us=%llu\n"
		       "shared_lag_max_us=%llu\nshared_events_lost=%llu\n",
		       s.processes, (unsigned long long)s.writer,
		       (unsigned long long)s.events_received, (unsigned long long)s.events_own,
		       (unsigned long long)s.inval_entry, (unsigned long long)s.inval_inode,
		       (unsigned long long)s.inval_delete, (unsigned long long)s.inval_failed,
		       (unsigned long long)s.wakes_sent, (unsigned long long)s.close_timeouts,
		       (unsigned long long)s.lag_p50_us, (unsigned long long)s.lag_p99_us,
		       (unsigned long long)s.lag_max_us, (unsigned long long)s.events_lost);
}

static void text_stats(struct mfs_dbfs *d, struct mfs_buf *b)
{
	struct dbfs_usage u;
	struct dbfs_counters c = {0};
	struct mfs_session_stats st = {0};

	usage_of(d, &u);
	uint64_t cb = 0, cl = 0, ct = 0;
	if (d->state == MFS_MOUNTED && d->fs) {
		dbfs_counters(d->fs, &c);
		dbfs_cache_usage(d->fs, &cb, &cl, &ct);
	}
	if (d->state == MFS_MOUNTED && d->sess)
		mfs_loop_stats(d->sess, &st);
	mfs_buf_printf(
	    b,
	    "name=%s\nstate=%s\nrequests=%llu\nops=%llu\nerrors=%llu\n"
	    "read_bytes=%llu\nwrite_bytes=%llu\ncommits=%llu\nbatched_ops=%llu\n"
	    "latency_p50_us=%llu\nlatency_p99_us=%llu\nlatency_max_us=%llu\n"
	    "inflight=%u\npeak_inflight=%u\nthrottled=%llu\ncapped=%llu\nexpress=%llu\nring=%llu\n"
	    "yielded=%llu\nstarved=%llu\nyield_waits=%llu\nhandoffs=%llu\nreleases=%llu\n"
	    "bytes_used=%llu\nquota_bytes=%llu\ninodes_used=%llu\nquota_inodes=%llu\n"
	    "map_size=%llu\nfile_size=%llu\n"
	    "max_concurrent=%u\niops_limit=%llu\nbandwidth_limit=%llu\n"
	    "cache_bytes=%llu\ncache_limit=%llu\ncache_trimmed=%llu\n"
	    "flushes=%llu\nflushes_listed=%llu\nunsynced_age_ms=%llu\nunsynced_bytes=%llu\n",
	    d->conf.name, mfs_state_name(d->state), (unsigned long long)st.ops,
	    (unsigned long long)c.ops, (unsigned long long)c.errors,
	    (unsigned long long)st.read_bytes, (unsigned long long)st.write_bytes,
	    (unsigned long long)c.commits, (unsigned long long)c.batched_ops,
	    (unsigned long long)mfs_lat_percentile(&st, 50) / 1000,
	    (unsigned long long)mfs_lat_percentile(&st, 99) / 1000,
	    (unsigned long long)st.lat_max_ns / 1000, st.inflight, st.peak_inflight,
	    (unsigned long long)st.throttled, (unsigned long long)st.capped,
	    (unsigned long long)st.express, (unsigned long long)st.ring,
	    (unsigned long long)st.yielded, (unsigned long long)st.starved,
	    (unsigned long long)st.yield_waits, (unsigned long long)st.handoffs,
	    (unsigned long long)st.releases, (unsigned long long)u.bytes,
	    (unsigned long long)d->quota_bytes, (unsigned long long)u.inodes,
	    (unsigned long long)d->quota_inodes, (unsigned long long)u.map_size,
	    (unsigned long long)u.file_size, d->limits.max_concurrent,
	    (unsigned long long)d->limits.iops, (unsigned long long)d->limits.bandwidth,
	    (unsigned long long)cb, (unsigned long long)cl, (unsigned long long)ct,
	    (unsigned long long)c.flushes, (unsigned long long)c.flushes_listed,
	    (unsigned long long)c.unsynced_age_ms,
	    (unsigned long long)c.unsynced_bytes);
	text_rates(d, &st, b);
	text_feed(d, b);
	text_expire(d, b);
	text_shared(d, b);
}

/* NAME/usage: its history (usage_store.h's text). */
static void text_usage(struct mfs_dbfs *d, struct mfs_buf *b)
{
	mfs_account_history(mfs_account_running(), d->conf.name, b);
}

/* A line of list: its text before and after the usage figures, taken
 * under mgr->lock (offsets into one buffer), and the store's usage, read
 * after it with the DBFS pinned (mfs_dbfs_pin), as metrics does. */
struct list_row {
	struct mfs_dbfs *pinned;
	struct dbfs *fs;
	size_t head, mid, end; /* [head, mid) before bytes=, [mid, end) after */
	struct dbfs_usage u;
};

/* mgr->lock held: the texts of d's line into t; d pinned when mounted. */
static void list_take(struct mfs_dbfs *d, struct mfs_buf *t, struct list_row *r)
{
	memset(r, 0, sizeof(*r));
	r->head = t->len;
	mfs_buf_printf(t, "name=");
	mfs_buf_escaped(t, d->conf.name);
	mfs_buf_printf(t, ",state=%s", mfs_state_name(d->state));
	if (d->state == MFS_MOUNTED && d->fs && dbfs_health(d->fs, NULL, 0))
		mfs_buf_printf(t, ",read_only=io-error");
	mfs_buf_printf(t, ",mountpoint=");
	mfs_buf_escaped(t, d->conf.mountpoint);
	mfs_buf_printf(t, ",store=");
	mfs_buf_escaped(t, d->conf.store);
	r->mid = t->len;
	if (d->reason[0] && d->state == MFS_FAILED) {
		mfs_buf_printf(t, ",reason=");
		mfs_buf_escaped(t, d->reason);
	}
	r->end = t->len;
	if (d->state == MFS_MOUNTED && d->fs) {
		mfs_dbfs_pin(d);
		r->pinned = d;
		r->fs = d->fs;
	}
}

/* user.mfs.list. Takes mgr->lock itself, twice, never across a store read:
 * a read transaction can wait while a store's map grows, and the control
 * thread and every other status reader wait for the lock. */
static void list_attr(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b)
{
	struct mfs_buf t = {0};
	struct list_row *v = NULL;
	size_t n = 0, cap = 0;

	(void)who;
	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (n == cap) {
			size_t c2 = cap ? 2 * cap : 16;
			struct list_row *p = realloc(v, c2 * sizeof(*p));
			if (!p) {
				b->oom = true;
				break;
			}
			v = p;
			cap = c2;
		}
		list_take(d, &t, &v[n++]);
	}
	pthread_mutex_unlock(&mgr->lock);
	for (size_t i = 0; i < n; i++)
		if (v[i].fs)
			dbfs_usage(v[i].fs, &v[i].u);
	pthread_mutex_lock(&mgr->lock);
	for (size_t i = 0; i < n; i++)
		if (v[i].pinned)
			mfs_dbfs_unpin(mgr, v[i].pinned);
	pthread_mutex_unlock(&mgr->lock);
	b->oom |= t.oom;
	for (size_t i = 0; i < n && !b->oom; i++) {
		mfs_buf_put(b, t.p + v[i].head, v[i].mid - v[i].head);
		mfs_buf_printf(b, ",bytes=%llu,inodes=%llu", (unsigned long long)v[i].u.bytes,
			       (unsigned long long)v[i].u.inodes);
		mfs_buf_put(b, t.p + v[i].mid, v[i].end - v[i].mid);
		mfs_buf_putc(b, '\n');
	}
	mfs_buf_free(&t);
	free(v);
}

static unsigned count_dir(const char *path)
{
	DIR *dir = opendir(path);
	unsigned n = 0;

	if (!dir)
		return 0;
	for (struct dirent *e; (e = readdir(dir));)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static void text_manager(struct mfs_manager *mgr, struct mfs_buf *b)
{
	unsigned total = 0, mounted = 0;
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%*d %ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		total++;
		mounted += d->state == MFS_MOUNTED;
	}
	mfs_buf_printf(b,
		       "version=%s\npid=%d\nuptime=%llu\nmountpoint=%s\nstate_dir=%s\n"
		       "workers=%u\nthreads=%u\nrss_kib=%ld\nfds=%u\ndbfs=%u\nmounted=%u\n"
		       "uring_queues=%u\nuring_offered=%s\nuring_roams=%llu\n",
		       MFS_VERSION, (int)getpid(),
		       (unsigned long long)(time(NULL) - (time_t)mgr->started_at), mgr->mountpoint,
		       mgr->state_dir, mfs_loop_workers(mgr->loop), count_dir("/proc/self/task"),
		       pages * (sysconf(_SC_PAGESIZE) / 1024), count_dir("/proc/self/fd"), total,
		       mounted, mfs_uring_queues(mgr->uring),
		       mfs_uring_kernel_enabled() ? "yes" : "no",
		       (unsigned long long)mfs_uring_roams(mgr->uring));
}

/* user.mfs.dbfs.N and N/status + N/config together */
static void text_dbfs(struct mfs_dbfs *d, struct mfs_buf *b)
{
	text_status(d, b);
	text_config(d, b);
}

/* A manager-wide attribute's text; `who` asked. */
typedef void manager_text(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b);
/* A DBFS's text. mgr->lock held. */
typedef void dbfs_text(struct mfs_dbfs *d, struct mfs_buf *b);

static void status_attr(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b)
{
	(void)who;
	text_manager(mgr, b);
}

static void error_attr(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b)
{
	char text[400];

	(void)mgr;
	mfs_answer_last_refusal(who, text, sizeof(text));
	mfs_buf_printf(b, "%s", text);
}

#define ATTR_PREFIX "user.mfs."

/*
 * The readable attributes besides the verbs' usage: one row each, in the
 * order listxattr gives them. A row with `manager` is "user.mfs." name; a
 * row with `dbfs` is "user.mfs." name followed by a DBFS's name, one per
 * DBFS. `unlocked`: called without mgr->lock (it needs none, or takes it
 * itself).
 */
static const struct readable {
	const char *name;
	manager_text *manager;
	dbfs_text *dbfs;
	bool unlocked;
} readables[] = {
    /* clang-format off */
	{.name = "list", .manager = list_attr, .unlocked = true},
	{.name = "status", .manager = status_attr},
	{.name = "error", .manager = error_attr, .unlocked = true},
	{.name = "dbfs.", .dbfs = text_dbfs},
	{.name = "stats.", .dbfs = text_stats},
    /* clang-format on */
};
#define NREADABLES (sizeof(readables) / sizeof(readables[0]))

/* The row for `attr` (after the prefix), and in *arg what follows a DBFS
 * row's name; NULL when none. */
static const struct readable *readable_find(const char *attr, const char **arg)
{
	for (size_t i = 0; i < NREADABLES; i++) {
		const struct readable *r = &readables[i];
		size_t n = strlen(r->name);
		if (r->manager ? !strcmp(attr, r->name) : !strncmp(attr, r->name, n)) {
			*arg = attr + n;
			return r;
		}
	}
	return NULL;
}

int mfs_readable_attr(struct mfs_manager *mgr, const char *attr, const struct mfs_caller *who,
		      struct mfs_buf *out)
{
	const struct mfs_verb *v = mfs_verb_find(attr);
	const struct readable *r;
	const char *arg;
	int rc = 0;

	if (v) {
		mfs_buf_printf(out, "%s", v->usage);
		return 0;
	}
	if (strncmp(attr, ATTR_PREFIX, strlen(ATTR_PREFIX)))
		return -ENODATA;
	r = readable_find(attr + strlen(ATTR_PREFIX), &arg);
	if (!r)
		return -ENODATA;
	if (r->unlocked) {
		r->manager(mgr, who, out);
		return 0;
	}
	pthread_mutex_lock(&mgr->lock);
	if (r->manager) {
		r->manager(mgr, who, out);
	} else {
		struct mfs_dbfs *d = mfs_find(mgr, arg);
		if (d)
			r->dbfs(d, out);
		else
			rc = -ENODATA;
	}
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

const struct mfs_readable_file mfs_readable_files[MFS_NFILES] = {
    [MFS_FILE_STATUS] = {.name = "status", .text = text_status},
    [MFS_FILE_STATS] = {.name = "stats", .text = text_stats},
    [MFS_FILE_CONFIG] = {.name = "config", .text = text_config},
    [MFS_FILE_USAGE] = {.name = "usage", .text = text_usage},
};

int mfs_readable_file(struct mfs_manager *mgr, uint32_t id, enum mfs_file f, struct mfs_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (d)
		mfs_readable_files[f].text(d, out);
	else
		rc = -ENOENT;
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

void mfs_readable_names(struct mfs_manager *mgr, struct mfs_buf *out)
{
	for (size_t i = 0; i < mfs_nverbs; i++)
		mfs_buf_printf(out, ATTR_PREFIX "%s%c", mfs_verbs[i].name, '\0');
	for (size_t i = 0; i < NREADABLES; i++)
		if (readables[i].manager)
			mfs_buf_printf(out, ATTR_PREFIX "%s%c", readables[i].name, '\0');
	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d && out->len < 60000; d = d->next)
		for (size_t i = 0; i < NREADABLES; i++)
			if (readables[i].dbfs)
				mfs_buf_printf(out, ATTR_PREFIX "%s%s%c", readables[i].name,
					       d->conf.name, '\0');
	pthread_mutex_unlock(&mgr->lock);
}
