/* The stats of a DBFS (see stats_text.h). */
#include <stdio.h>
#include <string.h>

#include "account.h"
#include "dbfs/expire.h"
#include "dbfs/feed.h"
#include "feed_fs.h"
#include "feed_line.h"
#include "feed_spec.h"
#include "loop.h"
#include "stats_text.h"

/* What the text needs of the DBFS, copied under mgr->lock. */
struct view {
	char name[MFS_NAME_MAX + 1];
	enum mfs_state state;
	uint32_t id;
	uint64_t quota_bytes, quota_inodes;
	struct mfs_limits limits;
	struct mfs_session_stats st;
	struct mfs_dbfs *pinned; /* mounted: pinned, fs usable without the lock */
	struct dbfs *fs;
};

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
static void text_feed(struct dbfs *fs, struct mfs_buf *b)
{
	struct dbfs_feed_stats f;
	char uuid[33], t[MFS_FEED_TIME_MAX];

	int rc = dbfs_feed_stats(fs, &f);
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
	unsigned readers;
	uint64_t held;
	mfs_feed_held(fs, &readers, &held);
	mfs_buf_printf(b, "feed_readers=%u\nfeed_reader_bytes=%llu\n", readers,
		       (unsigned long long)held);
	dbfs_feed_sub_list(fs, sub_line, b);
}

/* Rates per second over the last 1, 10 and 60 s, from the accountant
 * (account.h), beside the totals: `ops_rate=1s,10s,60s`. */
static void text_rates(const struct view *v, struct mfs_buf *b)
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
	    {"flushes_rate", r.flushes},
	};

	mfs_account_rates(mfs_account_running(), v->id, &r);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		mfs_buf_printf(b, "%s=%.2f,%.2f,%.2f\n", rows[i].name, rows[i].v[0], rows[i].v[1],
			       rows[i].v[2]);
	mfs_buf_printf(b,
		       "rate_windows=1,10,60\nrate_seconds=%u\nrecent_latency_p50_us=%llu\n"
		       "recent_latency_p99_us=%llu\nfeed_lag=%llu\ndemand=%.2f,%.2f,%.2f\n"
		       "worker_share=%u\n",
		       r.seconds, (unsigned long long)r.lat_p50_ns / 1000,
		       (unsigned long long)r.lat_p99_ns / 1000, (unsigned long long)r.feed_lag,
		       r.demand[0], r.demand[1], r.demand[2], v->st.worker_share);
}

/* The totals of the last usage record (account.h): when it was taken,
 * requests by operation and errors by errno, as they came through the
 * queue. Nothing before the first record. */
static void text_record(const struct view *v, struct mfs_buf *b)
{
	struct mfs_usage_totals t;

	if (mfs_account_totals(mfs_account_running(), v->id, v->name, &t))
		return;
	mfs_buf_printf(b,
		       "record_time=%llu\nrecord_requests=%llu\nrecord_errors=%llu\n"
		       "record_flushes=%llu\nrecord_commits=%llu\nrecord_ops_by_kind=",
		       (unsigned long long)t.t, (unsigned long long)t.ops,
		       (unsigned long long)t.errors, (unsigned long long)t.flushes,
		       (unsigned long long)t.commits);
	mfs_usage_kinds_text(b, &t.kinds, 0);
	mfs_buf_printf(b, "\nrecord_errors_by_errno=");
	mfs_usage_kinds_text(b, &t.kinds, 1);
	mfs_buf_putc(b, '\n');
}

/* Delayed work's lines of stats: file expiry, deferred reclaim, settled
 * events (dbfs/expire.h). */
static void text_expire(struct dbfs *fs, struct mfs_buf *b)
{
	struct dbfs_expire_stats e;
	if (dbfs_expire_stats(fs, &e))
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
static void text_shared(struct dbfs *fs, struct mfs_buf *b)
{
	struct dbfs_shared_stats s;
	if (dbfs_shared_stats(fs, &s) || !s.shared)
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
	/* the feed's shards: this process's, and those of every process now */
	mfs_buf_printf(b, "shared_shard=%u\nshared_shards=", s.shard);
	const char *sep = "";
	for (unsigned i = 0; i < 64; i++)
		if (s.shards_used & (1ull << i)) {
			mfs_buf_printf(b, "%s%u", sep, i);
			sep = ",";
		}
	mfs_buf_printf(b, "\n");
}

/* The text, without mgr->lock: the store is reachable through v->fs
 * (pinned) only when mounted. */
static void render(const struct view *v, struct mfs_buf *b)
{
	struct dbfs_usage u = {0};
	struct dbfs_counters c = {0};
	uint64_t cb = 0, cl = 0, ct = 0;

	if (v->fs) {
		if (dbfs_usage(v->fs, &u))
			memset(&u, 0, sizeof(u));
		dbfs_counters(v->fs, &c);
		dbfs_cache_usage(v->fs, &cb, &cl, &ct);
	}
	const struct mfs_session_stats *st = &v->st;
	mfs_buf_printf(
	    b,
	    "name=%s\nstate=%s\nrequests=%llu\nops=%llu\nerrors=%llu\n"
	    "read_bytes=%llu\nwrite_bytes=%llu\ncommits=%llu\nbatched_ops=%llu\n"
	    "latency_p50_us=%llu\nlatency_p99_us=%llu\nlatency_max_us=%llu\n"
	    "inflight=%u\npeak_inflight=%u\nthrottled=%llu\ncapped=%llu\nexpress=%llu\nring=%llu\n"
	    "yielded=%llu\nstarved=%llu\nyield_waits=%llu\nhandoffs=%llu\nreleases=%llu\n"
	    "colocations=%llu\n"
	    "bytes_used=%llu\nquota_bytes=%llu\ninodes_used=%llu\nquota_inodes=%llu\n"
	    "map_size=%llu\nfile_size=%llu\n"
	    "max_concurrent=%u\niops_limit=%llu\nbandwidth_limit=%llu\n"
	    "cache_bytes=%llu\ncache_limit=%llu\ncache_trimmed=%llu\n"
	    "flushes=%llu\nflushes_listed=%llu\nflushes_imaged=%llu\nflushes_held=%llu\n"
	    "unsynced_age_ms=%llu\n"
	    "unsynced_bytes=%llu\n"
	    "readers_cleared=%llu\n",
	    v->name, mfs_state_name(v->state), (unsigned long long)st->ops,
	    (unsigned long long)c.ops, (unsigned long long)c.errors,
	    (unsigned long long)st->read_bytes, (unsigned long long)st->write_bytes,
	    (unsigned long long)c.commits, (unsigned long long)c.batched_ops,
	    (unsigned long long)mfs_lat_percentile(st, 50) / 1000,
	    (unsigned long long)mfs_lat_percentile(st, 99) / 1000,
	    (unsigned long long)st->lat_max_ns / 1000, st->inflight, st->peak_inflight,
	    (unsigned long long)st->throttled, (unsigned long long)st->capped,
	    (unsigned long long)st->express, (unsigned long long)st->ring,
	    (unsigned long long)st->yielded, (unsigned long long)st->starved,
	    (unsigned long long)st->yield_waits, (unsigned long long)st->handoffs,
	    (unsigned long long)st->releases, (unsigned long long)st->colocations,
	    (unsigned long long)u.bytes,
	    (unsigned long long)v->quota_bytes, (unsigned long long)u.inodes,
	    (unsigned long long)v->quota_inodes, (unsigned long long)u.map_size,
	    (unsigned long long)u.file_size, v->limits.max_concurrent,
	    (unsigned long long)v->limits.iops, (unsigned long long)v->limits.bandwidth,
	    (unsigned long long)cb, (unsigned long long)cl, (unsigned long long)ct,
	    (unsigned long long)c.flushes, (unsigned long long)c.flushes_listed,
	    (unsigned long long)c.flushes_imaged, (unsigned long long)c.flushes_held,
	    (unsigned long long)c.unsynced_age_ms, (unsigned long long)c.unsynced_bytes,
	    (unsigned long long)c.readers_cleared);
	if (v->state != MFS_MOUNTED)
		return;
	text_rates(v, b);
	text_record(v, b);
	if (!v->fs)
		return;
	text_feed(v->fs, b);
	text_expire(v->fs, b);
	text_shared(v->fs, b);
}

void mfs_stats_text(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b)
{
	struct view v;

	memset(&v, 0, sizeof(v));
	snprintf(v.name, sizeof(v.name), "%s", d->conf.name);
	v.state = d->state;
	v.id = d->id;
	v.quota_bytes = d->quota_bytes;
	v.quota_inodes = d->quota_inodes;
	v.limits = d->limits;
	if (d->state == MFS_MOUNTED && d->sess)
		mfs_loop_stats(d->sess, &v.st);
	if (d->state == MFS_MOUNTED && d->fs) {
		mfs_dbfs_pin(d);
		v.pinned = d;
		v.fs = d->fs;
	}
	pthread_mutex_unlock(&mgr->lock);
	render(&v, b);
	pthread_mutex_lock(&mgr->lock);
	if (v.pinned)
		mfs_dbfs_unpin(mgr, v.pinned);
}
