/*
 * The change feed of a DBFS (dbfs/feed.h): its lifetime. Start at open
 * (the queue "feed" in the store's own LMDB environment, the totals, the
 * ilink table's check), stop at close, and the upgrade of an older store.
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
#include "queue/mfsq.h"
/* ---- open, close, upgrade ---- */

/* 'X' in the feed table: ilink is stale (the store was open with
 * feed=off, when dir.c does not keep it). */
static MDB_val key_stale = {1, (void *)"X"};

static void feed_config(struct mfsq_config *cfg)
{
	mfsq_config_default(cfg);
	cfg->nshards = 1;
	cfg->subshard_msgs = 32768;
	cfg->subshard_bytes = 32u << 20;
	cfg->retain_max = 80; /* 2.6 M events at the hard limit: above any floor */
	cfg->max_payload = DBFS_EV_REC_FIXED + 2 * PATH_BUF + DBFS_XATTR_NAME_MAX;
}

unsigned dbfs_feed_dbs_needed(void)
{
	struct mfsq_config cfg;
	feed_config(&cfg);
	return mfsq_dbs_needed(&cfg);
}

static int stale_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	MDB_val v = {0, NULL};
	if (arg) /* mark */
		return dbfs_put(txn, fs->db_feed, &key_stale, &v, 0);
	int rc = dbfs_del(txn, fs->db_feed, &key_stale, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Delete every name row (keys longer than an inode's) of the inode table. */
static int empty_ilink_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	(void)arg;
	dbfs_feed_paths_changed(fs, 0);
	int rc = mdb_cursor_open(txn, fs->db_inode, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 8 && (rc = dbfs_cursor_del(c)))
			break;
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Is ilink marked stale? */
static int ilink_stale(struct dbfs *fs, bool *stale)
{
	MDB_txn *txn;
	MDB_val v;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return rc;
	rc = dbfs_get(txn, fs->db_feed, &key_stale, &v);
	dbfs_read_end(fs, txn);
	*stale = rc == 0;
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_feed_start(struct dbfs *fs, char *err, size_t errlen)
{
	struct dbfs_feed *f;
	struct mfsq_config cfg;
	bool stale = false;
	int rc;

	/* read-only: no feed (its queue keeps files of its own it would write) */
	if (!fs->db_feed || fs->opt.read_only)
		return 0;
	if ((rc = ilink_stale(fs, &stale))) {
		snprintf(err, errlen, "cannot read the change feed's table");
		return dbfs_errno(rc);
	}
	if (!fs->opt.feed) {
		/* ilink is not kept without the feed: say so in the store */
		if (!stale && (rc = dbfs_errno(dbfs_write(fs, stale_fn, (void *)1)))) {
			snprintf(err, errlen, "cannot write the change feed's table: %s",
				 strerror(-rc));
			return rc;
		}
		return 0;
	}
	if (stale) {
		/* the store was used with feed=off: its names again, from dirent */
		rc = dbfs_write(fs, empty_ilink_fn, NULL);
		if (!rc)
			rc = dbfs_feed_upgrade(fs);
		if (!rc)
			rc = dbfs_write(fs, stale_fn, NULL);
		if ((rc = dbfs_errno(rc))) {
			snprintf(err, errlen, "cannot rebuild the change feed's names: %s",
				 strerror(-rc));
			return rc;
		}
	}
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
	feed_config(&cfg);
	for (int tries = 0;; tries++) {
		uint64_t seen = fs->map_size;
		/* every enqueue is in a batch's transaction: no enqueue log
		 * (its 1 MiB ring would be most of an idle DBFS's memory) */
		rc = mfsq_open(fs->env, DBFS_FEED_QUEUE, &cfg,
			       MFSQ_NO_LOG | (fs->opt.read_only ? 0 : MFSQ_CREATE), &f->q);
		if (rc != ENOSPC || tries >= 3 || dbfs_grow_map(fs, seen))
			break;
	}
	if (rc == ENOENT && fs->opt.read_only) {
		free(f);
		return 0; /* a read-only store without a feed yet: none */
	}
	if (rc) {
		free(f);
		snprintf(err, errlen, "cannot open the change feed: %s", mfsq_strerror(rc));
		return feed_q_errno(rc);
	}
	MDB_txn *txn;
	uint64_t floor = 1;
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
	if ((rc = feed_recount_tail(fs, f))) {
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
	free(f);
	fs->feed = NULL;
}

/* Format 2 -> 3: an ilink row for every dirent row, a piece per commit. */
struct upgrade_ctx {
	unsigned char last[8 + DBFS_NAME_MAX];
	size_t last_len; /* 0: from the start */
	int done;
};

static int upgrade_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct upgrade_ctx *c = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	dbfs_feed_paths_changed(fs, 0);
	int rc = mdb_cursor_open(txn, fs->db_dirent, &cur);
	if (rc)
		return rc;
	k.mv_size = c->last_len;
	k.mv_data = c->last;
	rc = c->last_len ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)
			 : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	if (!rc && c->last_len && k.mv_size == c->last_len &&
	    !memcmp(k.mv_data, c->last, k.mv_size))
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	int n = 0;
	for (; !rc && n < 20000; n++, rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct dbfs_dirent_val dv;
		if (k.mv_size <= 8 || k.mv_size > 8 + DBFS_NAME_MAX || v.mv_size != sizeof(dv))
			continue; /* damaged: dbfs-fsck's business */
		memcpy(&dv, v.mv_data, sizeof(dv));
		unsigned char kb[16 + DBFS_NAME_MAX];
		MDB_val ik, iv = {0, NULL};
		dbfs_ilink_key(kb, dv.ino, dbfs_get_be64(k.mv_data), (char *)k.mv_data + 8,
			       k.mv_size - 8, &ik);
		memcpy(c->last, k.mv_data, k.mv_size);
		c->last_len = k.mv_size;
		if ((rc = dbfs_put(txn, fs->db_inode, &ik, &iv, 0)))
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND) {
		c->done = 1;
		rc = 0;
	}
	return rc;
}

int dbfs_feed_upgrade(struct dbfs *fs)
{
	struct upgrade_ctx *c = calloc(1, sizeof(*c));
	int rc = 0;
	if (!c)
		return -ENOMEM;
	while (!rc && !c->done)
		rc = dbfs_write(fs, upgrade_fn, c);
	free(c);
	return rc;
}
