/*
 * The accountant's insides, shared by its files (see account.h for what
 * it does):
 *   account.c         the thread: start, stop, the tick at each second
 *   account_govern.c  the governor's shares from the rates just folded in
 *   account_sample.c  the queue's two ends: sample the DBFSs and enqueue
 *                     their records; dequeue them as the subscriber
 *   account_gauges.c  the gauge reader's thread: space, cache and feed
 *   account_fold.c    fold a record into the rates and the history rows
 *   account_rates.c   what readers ask: rates, weights, ticks, history
 * A file calls only files on rows below it (tests/unit/layering.sh).
 * Not for other files of mfs: they use account.h.
 */
#ifndef MFS_ACCOUNT_PRIVATE_H
#define MFS_ACCOUNT_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "account.h"
#include "loop.h"
#include "queue/mfsq.h"
#include "usage_kinds.h"
#include "usage_store.h"

#define RING 60        /* seconds of rates kept in memory */
#define LAT_WINDOW 10  /* seconds the latency percentiles cover */
#define GAUGE_EVERY 10 /* seconds between samples of space, cache and feed */
#define BATCH 256

/* A usage record: one DBFS's cumulative counters at one second. On the
 * queue "usage" (memory-only messages, host order) as account_sample.c
 * encodes it: the fields before `kinds` as they are, then the kinds in
 * usage_kinds.h's encoding (`kinds` stays the last field). */
struct sample {
	uint32_t id;
	uint32_t gauges; /* 1: the gauge fields were sampled this time */
	char name[MFS_NAME_MAX + 1];
	uint64_t t; /* unix seconds */
	uint64_t ops, read_bytes, write_bytes, errors, throttled, feed_events;
	uint64_t busy_ns; /* time its requests spent from read to answer */
	uint64_t hist[MFS_LAT_BUCKETS];
	uint64_t bytes_used, inodes_used, cache_bytes, feed_lag;
	uint64_t flushes, commits;    /* durable points, LMDB write transactions */
	struct mfs_usage_kinds kinds; /* requests by operation, errors by errno */
};

/* What one second added. */
struct second {
	uint64_t ops, read_bytes, write_bytes, errors, throttled, feed_events, busy_ns;
	uint64_t flushes, commits;
};

/* A DBFS's gauges as the gauge reader read them (account_gauges.c). */
struct account_gauge {
	uint32_t id;
	uint32_t fresh; /* published and not yet taken into a record */
	char name[MFS_NAME_MAX + 1];
	uint64_t bytes_used, inodes_used, cache_bytes, feed_events, feed_lag;
};

/* A DBFS and its store while the gauge reader reads it without mgr->lock. */
struct account_pin {
	struct mfs_dbfs *d;
	struct dbfs *fs; /* d->fs when pinned (d->fs is NULL once unmounting) */
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
	struct mfs_usage_kinds min_kinds;
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
	unsigned char *wire; /* BATCH records encoded for the queue (thread only) */
	struct sample *in; /* what the subscriber dequeued (thread only) */
	size_t nin, capin;
	/* the gauge reader (account_gauges.c) */
	pthread_t gthread;
	pthread_mutex_t glock; /* gask, gstop, gpub */
	pthread_cond_t gcond;
	bool gask, gstop;
	struct account_gauge *gpub; /* published, by DBFS id */
	uint32_t npub;
	struct account_pin *gpin; /* the DBFSs being read (its thread only) */
	struct account_gauge *gread;
	size_t gcap;
};

/* The latency under which `pct` percent of the histogram's `total`
 * requests fall (a bucket's upper bound, ns); 0 when total is 0. Pure. */
uint64_t mfs_account_pct(const uint64_t *h, uint64_t total, double pct);

/* account_sample.c, the accountant's thread only. Sample every mounted
 * DBFS into a->out (takes mgr->lock; no store work), with the gauges the
 * gauge reader published since the last record of each. */
void mfs_account_take_samples(struct mfs_account *a, uint64_t t);
/* Enqueue a->out as memory-only messages (a failure is logged). */
void mfs_account_enqueue(struct mfs_account *a);
/* Dequeue everything waiting into a->in (losses are logged). */
void mfs_account_drain(struct mfs_account *a);

/* account_gauges.c. Start / stop (join) the gauge reader's thread: the
 * thread that starts / stops the accountant; start: 0 or -errno (-EAGAIN).
 * Ask it to read the gauges (it reads once more if it is reading now):
 * the accountant's thread, no lock held. Take the gauges published for
 * s's DBFS since they were last taken, if any, into s (setting s->gauges):
 * takes a->glock; mgr->lock may be held. */
int mfs_account_gauges_start(struct mfs_account *a);
void mfs_account_gauges_stop(struct mfs_account *a);
void mfs_account_gauges_ask(struct mfs_account *a);
void mfs_account_gauges_take(struct mfs_account *a, struct sample *s);

/* account_fold.c, a->lock held. Fold one record into its DBFS's rates and
 * history rows (written in `txn`, or not when NULL). */
void mfs_account_apply(struct mfs_account *a, MDB_txn *txn, const struct sample *s);
/* Write the 1 min row x was summing, if anything happened. */
void mfs_account_flush_minute(struct mfs_account *a, MDB_txn *txn, struct acct_dbfs *x);
/* Forget DBFSs with no record for RING seconds, after writing their minute. */
void mfs_account_forget_gone(struct mfs_account *a, MDB_txn *txn);

/* account_govern.c: the shares from the rates just folded in. Takes
 * mgr->lock, then a->lock (through mfs_account_rates). Accountant thread. */
void mfs_account_govern(struct mfs_account *a);

#endif
