/*
 * The governor: pure decisions on how many workers a session may use and
 * whether its token buckets allow another request. No locks, no clocks of its
 * own: the loop calls these under its lock with a monotonic time in ns.
 *
 * Fair share: when `busy` sessions have work queued or in flight, each may
 * hold at most ceil(workers / busy) workers; when other sessions exist at all,
 * one worker stays free for them, so a quiet DBFS never waits for a noisy one
 * to finish a request. An idle session costs nothing.
 */
#ifndef MFS_GOVERNOR_H
#define MFS_GOVERNOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-DBFS limits; 0 everywhere means "none". */
struct mfs_limits {
	unsigned max_concurrent; /* requests in flight at once */
	uint64_t iops;           /* requests per second */
	uint64_t bandwidth;      /* read+write bytes per second */
};

/* A token bucket. rate 0: unlimited. Tokens may go negative (debt): a large
 * write is admitted and the session then waits until the debt is repaid. */
struct mfs_bucket {
	double rate;   /* tokens per second */
	double burst;  /* bucket size */
	double tokens;
	uint64_t last_ns;
};

/* (Re)configure; a full bucket of `burst` (0: rate/10, at least `min_burst`). */
void mfs_bucket_set(struct mfs_bucket *b, uint64_t rate, double min_burst, uint64_t now_ns);

/* Add what accrued since the last refill, up to the burst. */
void mfs_bucket_refill(struct mfs_bucket *b, uint64_t now_ns);

/* Spend n tokens (may go into debt). */
void mfs_bucket_take(struct mfs_bucket *b, double n);

/* True when the bucket is unlimited or not in debt. */
bool mfs_bucket_ok(const struct mfs_bucket *b);

/* Nanoseconds until the bucket is out of debt (0 when ok). */
uint64_t mfs_bucket_wait_ns(const struct mfs_bucket *b);

/*
 * How many requests a session may have in flight.
 * workers: pool size; sessions: sessions served; busy: sessions with work
 * queued or in flight (counting this one); cap: its max_concurrent (0: none).
 * Always at least 1.
 */
unsigned mfs_fair_limit(unsigned workers, unsigned sessions, unsigned busy, unsigned cap);

/*
 * CPU yielding: a heavy DBFS (its requests overlap: its clients run
 * concurrently) yields the CPU to light ones (a client waiting for each
 * request) while a light one is active: the workers processing its
 * requests run at SCHED_IDLE, so that a light DBFS's request, its client
 * and the ring thread serving it preempt them at once. The times are
 * mfs_now_ns() values kept by the loop:
 *
 *   heavy_until    the session counts as heavy until then
 *   light_until    some light session counts as active until then
 *   unyield_until  the starvation guard exempts the session until then
 *
 * Starvation guard: a request of a yielding session that took longer
 * than MFS_STARVE_NS from being read to its answer means the CPUs had no
 * idle time for it; the session then keeps normal priority for
 * MFS_UNYIELD_NS. A SCHED_IDLE thread still gets a small share of a busy
 * CPU (its weight is 3 against 1024 for nice 0), so a yielded request
 * always finishes; the guard bounds how long.
 */
#define MFS_STARVE_NS 20000000ull
#define MFS_UNYIELD_NS 10000000ull

/*
 * CPU share while yielding: priority alone does not keep a heavy DBFS's
 * work off a light one's CPU. Its clients (writers copying into the page
 * cache) and the kernel's copies of its payloads run at their own
 * priority, in the kernel, where nothing preempts them; they run as fast
 * as mfs answers the heavy DBFS. So while it yields, the CPU time its
 * requests take on mfs's workers is also limited to this percentage of
 * one CPU (a token bucket of nanoseconds, burst a tenth of a second's
 * worth): its clients then wait for their writes and syncs instead of
 * competing for the CPUs. 100: no limit (priority only).
 */
#define MFS_YIELD_SHARE_DEFAULT 10

/* Should a request of a session be processed at idle priority now? */
bool mfs_should_yield(uint64_t now_ns, uint64_t heavy_until, uint64_t light_until,
		      uint64_t unyield_until);

/* A request of a session that yielded took `ns` to answer: 0 when it was
 * served in time, else the new unyield_until (now_ns + MFS_UNYIELD_NS). */
uint64_t mfs_yield_guard(uint64_t now_ns, uint64_t ns);

/*
 * Shares that follow usage (the accountant's rates, account.h). Pure.
 *
 * Cache memory: split `total` bytes among n DBFSs: each gets a floor of a
 * quarter of the equal share, the rest goes by weight (its recent
 * activity: requests plus bytes / 4 KiB per second), and nobody gets more
 * than its own cap (cap[i] 0: none; what a cap leaves goes to the others
 * by weight, in equal parts when they are idle). One whose cap is at most
 * an equal share gets exactly its cap, busy or idle. All weights 0: equal
 * shares (what an idle set gets back).
 * out[i] is at least 1 when total > 0.
 */
void mfs_share_split(uint64_t total, size_t n, const double *weight, const uint64_t *cap,
		     uint64_t *out);

/*
 * Workers: the share a busy DBFS may hold beyond its instantaneous fair
 * share (mfs_fair_limit), from measured demand (Little's law: the time
 * its requests spent in service per second = how many it keeps busy on
 * average). It gets what the others do not need: workers minus, for
 * every other DBFS with demand, ceil(its demand) (at least 1), minus one
 * worker kept free; never more than ceil(demand) + 1. `others_ceil` is the
 * sum of ceil(d_j) over the other DBFSs with demand d_j > 0. 0: no share
 * (demand below one worker, or nothing left): mfs_fair_limit alone.
 */
unsigned mfs_worker_share(unsigned workers, double demand, unsigned others_ceil);

#endif
