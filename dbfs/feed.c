/*
 * The change feed of a DBFS (dbfs/feed.h): its lifetime. Start at open
 * (the queue "feed" in the store's own LMDB environment, the totals), stop
 * at close. (An older store's names are upgraded by names.c.)
 * The feed's other parts, each in a file of its own (feed_private.h draws
 * who calls whom): retention (feed_retain.c), readers (feed_reader.c),
 * durable subscriptions (feed_subs.c), the outbox (feed_outbox.c), and the
 * feed's state and table (feed_state.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbfs/feed.h"
#include "dbfs/feed_private.h"
#include "dbfs/internal.h"
#include "dbfs/shared.h"
#include "queue/mfsq.h"
/* ---- open, close, upgrade ---- */

static void feed_config(struct mfsq_config *cfg, bool sharded)
{
	mfsq_config_default(cfg);
	cfg->nshards = sharded ? FEED_SHARDS : 1;
	cfg->subshard_msgs = 32768;
	cfg->subshard_bytes = 32u << 20;
	cfg->retain_max = 80; /* 2.6 M events at the hard limit: above any floor */
	cfg->max_payload = DBFS_EV_REC_FIXED + 2 * PATH_BUF + DBFS_XATTR_NAME_MAX;
	if (sharded)
		cfg->max_payload += FEED_PREFIX;
}

unsigned dbfs_feed_dbs_needed(void)
{
	struct mfsq_config one, sh;
	feed_config(&one, false);
	feed_config(&sh, true);
	return mfsq_dbs_needed(&one) + mfsq_dbs_needed(&sh); /* both while migrating */
}

/* Open queue `name` (created when `create`), growing the map when full. */
static int open_queue(struct dbfs *fs, const char *name, bool sharded, bool create, mfsq_queue **q)
{
	struct mfsq_config cfg;
	int rc;
	/* every enqueue is in a batch's transaction: no enqueue log (its 1
	 * MiB ring would be most of an idle DBFS's memory); the shards'
	 * databases opened only where used: each handle costs every
	 * transaction of the store (mfsq.h, MFSQ_LAZY_SHARDS; use_shard) */
	unsigned flags =
	    MFSQ_NO_LOG | (sharded ? MFSQ_LAZY_SHARDS : 0) | (create ? MFSQ_CREATE : 0);
	feed_config(&cfg, sharded);
	for (int tries = 0;; tries++) {
		uint64_t seen = fs->map_size;
		rc = mfsq_open(fs->env, name, &cfg, flags, q);
		if (rc != ENOSPC || tries >= 3 || dbfs_grow_map(fs, seen))
			return rc;
	}
}

/* Make shard `shard` of the sharded queue ready for this process's
 * enqueues (its databases made if new, its handles opened), growing the
 * map when full; an mfsq error. */
static int use_shard(struct dbfs *fs, mfsq_queue *q, uint32_t shard)
{
	for (int tries = 0;; tries++) {
		uint64_t seen = fs->map_size;
		int rc = mfsq_shard_use(q, shard);
		if (rc != ENOSPC || tries >= 3 || dbfs_grow_map(fs, seen))
			return rc;
	}
}

/* Has the sharded queue replaced an older store's one-shard queue (the
 * row 'V' of the table "feed", feed_migrate.c)? */
static bool migrated(struct dbfs *fs)
{
	MDB_txn *txn;
	MDB_val v;
	bool done = false;
	if (dbfs_read_begin(fs, &txn))
		return false;
	done = dbfs_get(txn, fs->db_feed, &feed_key_migrated, &v) == 0;
	dbfs_read_end(fs, txn);
	return done;
}

/* Open the sharded queue (0 or -errno with err); an older store's
 * one-shard queue is migrated into it first, by an open that no other
 * process shares. */
static int open_queues(struct dbfs *fs, struct dbfs_feed *f, char *err, size_t errlen)
{
	mfsq_queue *old = NULL;
	int rc = 0;
	if (!migrated(fs))
		rc = open_queue(fs, DBFS_FEED_QUEUE, false, false, &old);
	if (rc && rc != ENOENT) {
		snprintf(err, errlen, "cannot open the change feed: %s", mfsq_strerror(rc));
		return feed_q_errno(rc);
	}
	if (old && fs->shared && !dbfs_lock_alone(fs->lock_fd)) {
		/* only an open alone migrates (feed_migrate.c): another one is
		 * migrating now (one that failed to did not open) */
		mfsq_close(old);
		snprintf(err, errlen,
			 "another process is moving the store's change feed into its sharded "
			 "queue (an older store's upgrade): open again once it is open");
		return -EBUSY;
	}
	rc = open_queue(fs, DBFS_FEED_QUEUE_SHARDED, true, true, &f->q);
	if (rc) {
		mfsq_close(old);
		snprintf(err, errlen, "cannot open the change feed: %s", mfsq_strerror(rc));
		return feed_q_errno(rc);
	}
	if (old && (rc = use_shard(fs, f->q, 0))) { /* the move's shard */
		mfsq_close(old);
		mfsq_close(f->q);
		f->q = NULL;
		snprintf(err, errlen, "cannot open the change feed: %s", mfsq_strerror(rc));
		return feed_q_errno(rc);
	}
	if (old) {
		f->nshards = FEED_SHARDS;
		rc = feed_migrate(fs, f, old, err, errlen);
		mfsq_close(old);
		if (rc) {
			mfsq_close(f->q);
			f->q = NULL;
		}
	}
	return rc;
}

int dbfs_feed_start(struct dbfs *fs, char *err, size_t errlen)
{
	struct dbfs_feed *f;
	struct mfsq_config cfg;
	int rc;

	/* read-only: no feed (its queue keeps files of its own it would write) */
	if (!fs->db_feed || fs->opt.read_only)
		return 0;
	if (!fs->opt.feed)
		return 0; /* the names are kept all the same (names.c) */
	f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->lim = (struct dbfs_feed_limits){fs->opt.feed_max_events, fs->opt.feed_max_bytes,
					   fs->opt.feed_max_age, fs->opt.feed_sub_idle};
	if (!feed_limits_ok(&f->lim)) {
		free(f);
		snprintf(err, errlen,
			 "feed_events, feed_bytes and feed_age cannot all be 0 "
			 "(the feed would be unbounded)");
		return -EINVAL;
	}
	if ((rc = open_queues(fs, f, err, errlen))) {
		free(f);
		return rc;
	}
	mfsq_get_config(f->q, &cfg);
	f->nshards = cfg.nshards;
	/* this process's shard: its slot's among the sharing processes (a
	 * shard holds several only beyond FEED_SHARDS of them) */
	if (fs->shared && fs->shared->slot >= 0)
		f->shard = (uint32_t)fs->shared->slot % f->nshards;
	else if (fs->shared)
		f->shard = (uint32_t)(fs->shared->writer % f->nshards);
	f->enqueuer = mfsq_enqueuer_in_shard(f->q, f->shard, 0);
	MDB_txn *txn;
	uint64_t floor = 1;
	if ((rc = use_shard(fs, f->q, f->shard))) {
		mfsq_close(f->q);
		free(f);
		snprintf(err, errlen, "cannot open the change feed's shard: %s", mfsq_strerror(rc));
		return feed_q_errno(rc);
	}
	rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = feed_read_meta(fs, txn, &f->meta, &floor);
		dbfs_read_end(fs, txn);
	}
	if (rc) {
		mfsq_close(f->q);
		free(f);
		snprintf(err, errlen, "cannot read the change feed's records");
		return dbfs_errno(rc);
	}
	fs->feed = f;
	if ((rc = feed_recount_sharded(fs, f))) {
		fs->feed = NULL;
		mfsq_close(f->q);
		free(f);
		snprintf(err, errlen, "cannot read the change feed's newest events: %s",
			 strerror(-rc));
		return rc;
	}
	fs->feed = NULL;
	f->pub = f->meta;
	f->saved_seq = 0; /* the first tick writes it */
	atomic_store(&f->last_seq, f->meta.next_seq - 1);
	atomic_store(&f->floor, floor);
	f->ticked_seq = 0; /* the first tick runs the queue's maintenance */
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &ca);
	pthread_condattr_destroy(&ca);
	fs->feed = f;
	return 0;
}

void dbfs_feed_stop(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return;
	while (f->readers) /* the owner should have closed them */
		dbfs_feed_close(f->readers);
	if (!fs->opt.read_only)
		feed_save_meta(fs); /* a failure: the next open counts from the queue */
	mfsq_close(f->q);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f->pend);
	free(f->arena);
	free(f->rec);
	free(f->msgs);
	free(f->seqs);
	free(f->qseqs);
	free(f);
	fs->feed = NULL;
}
