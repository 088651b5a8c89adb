/*
 * The accountant (ARCHITECTURE mechanism 6, resource accounting): a thread
 * that, once a second, samples every mounted DBFS's counters (without the
 * locks its request paths take: mfs_loop_sample, dbfs_errno_counts,
 * dbfs_counters), turns them into one usage record per DBFS (its totals
 * since the mount: requests, requests by operation, bytes, errors, errors
 * by errno, throttled requests, the latency histogram, commits, flushes;
 * and every 10 s the gauges: space, inodes, cache, feed, which a thread of
 * its own reads from the stores, so that a slow store holds no record of
 * the second: account_gauges.c), enqueues the
 * records as memory-only messages on the queue "usage" (libmfsq) and, as
 * that queue's subscriber, feeds what it dequeues into
 *   - the rates of the last 1, 10 and 60 s (memory: stats, top, the
 *     governor) and the last record's totals (stats, metrics);
 *   - the retained history (usage_store.h: 1 s rows for the last
 *     `usage_fine` seconds, 1 min rows for the last `usage_coarse`
 *     seconds, persistent in STATE/usage).
 * A request path never waits for it: it reads counters that request paths
 * update with relaxed stores, and takes mgr->lock (which no DBFS request
 * takes) only to walk the list.
 *
 * Lock order: mgr->lock, then the accountant's own lock (readers call in
 * with mgr->lock held; the thread never takes mgr->lock while holding its
 * own).
 */
#ifndef MFS_ACCOUNT_H
#define MFS_ACCOUNT_H

#include <stdint.h>

#include "buf.h"
#include "loop.h"
#include "manager.h"
#include "usage_kinds.h"

struct mfs_account;

/* Retention, in seconds, of the two resolutions (defaults: 1 h, 7 days). */
struct mfs_account_conf {
	uint64_t fine_sec;   /* -o usage_fine=: 1 s rows kept this long (60..86400) */
	uint64_t coarse_sec; /* -o usage_coarse=: 1 min rows (3600..366 days) */
};
#define MFS_USAGE_FINE_DEFAULT 3600
#define MFS_USAGE_COARSE_DEFAULT (7 * 86400)

/* Parse a duration: N, Ns, Nm, Nh or Nd (seconds, minutes, hours, days)
 * into seconds. -EINVAL when malformed or above 2^40 s. Pure. */
int mfs_account_parse_duration(const char *s, uint64_t *sec);

/* Rates per second over the last 1, 10 and 60 s (index 0, 1, 2). */
#define MFS_RATE_WINDOWS 3
struct mfs_rates {
	double ops[MFS_RATE_WINDOWS];
	double read_bytes[MFS_RATE_WINDOWS];
	double write_bytes[MFS_RATE_WINDOWS];
	double errors[MFS_RATE_WINDOWS];
	double throttled[MFS_RATE_WINDOWS];
	double feed_events[MFS_RATE_WINDOWS];
	double flushes[MFS_RATE_WINDOWS]; /* durable points */
	double demand[MFS_RATE_WINDOWS]; /* workers kept busy on average (Little's law) */
	uint64_t lat_p50_ns, lat_p99_ns; /* of the requests of the last 10 s; 0: none */
	uint64_t feed_lag;               /* worst durable subscriber's lag (events) */
	unsigned seconds;                /* seconds sampled so far (up to 60) */
};

/*
 * Open STATE/usage (created if missing), its queue and history, and start
 * the thread. `mgr` must outlive the accountant. On error nothing runs and
 * *out is NULL; mfs serves without accounting (the caller logs `err`).
 * Errors: -ENOMEM, -EAGAIN (thread), or the store's (usage_store.h).
 * The thread that sets the process up.
 */
int mfs_account_start(struct mfs_manager *mgr, const struct mfs_account_conf *conf,
		      struct mfs_account **out, char *err, size_t errlen);

/* Stop the thread (the records of the current second are lost), close the
 * queue and the history. NULL: nothing. Not from the accountant thread;
 * mgr->lock not held. */
void mfs_account_stop(struct mfs_account *a);

/* The rates of DBFS `id`; all 0 when the accountant has no record of it
 * (just mounted, or `a` NULL). mgr->lock held (or not: it takes only the
 * accountant's lock). Any thread. */
void mfs_account_rates(struct mfs_account *a, uint32_t id, struct mfs_rates *r);

/* A DBFS's totals since it was mounted, as its last usage record carried
 * them through the queue (at most a second old). */
struct mfs_usage_totals {
	uint64_t t; /* unix seconds the record was taken */
	uint64_t ops, read_bytes, write_bytes, errors, flushes, commits;
	uint64_t busy_ns;                 /* sum of the requests' latencies */
	uint64_t hist[MFS_LAT_BUCKETS];   /* latencies (loop.h's buckets) */
	struct mfs_usage_kinds kinds;     /* requests by operation, errors by errno */
};

/* The totals of DBFS `id`, named `name`, from its last record. 0, or
 * -ENOENT when the accountant has none (just mounted: up to a second;
 * not mounted; `a` NULL). As mfs_account_rates. */
int mfs_account_totals(struct mfs_account *a, uint32_t id, const char *name,
		       struct mfs_usage_totals *t);

/* Append the retained history of DBFS `name` as text (usage_text.c's
 * format) to `b`, oldest first: the 1 min rows older than the 1 s rows,
 * then the 1 s rows. Returns 0, or -EIO (the history cannot be read; a
 * line saying so is in `b`). Any thread; no lock held needed. */
int mfs_account_history(struct mfs_account *a, const char *name, struct mfs_buf *b);

/* The accountant running in this process, or NULL. Any thread; the
 * pointer stays valid until mfs_account_stop, which runs after every
 * session is gone. */
struct mfs_account *mfs_account_running(void);

/* The governor's weight of DBFS `id`: its requests plus its bytes / 4 KiB
 * per second over the last 10 s; 0 when idle or unknown. As
 * mfs_account_rates. */
double mfs_account_weight(struct mfs_account *a, uint32_t id);

/* Samples taken (ticks of the thread); for tests and status. Any thread. */
uint64_t mfs_account_ticks(struct mfs_account *a);

#endif
