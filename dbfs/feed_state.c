/*
 * The change feed's state (dbfs/feed.h): its table's rows (the running
 * totals 'M', the retention floor 'F', one row per DBFS_FEED_BLOCK events
 * with the byte count before the block and its first commit time), the
 * count of the tail block at open, the limits, and the small accessors.
 * The bottom of the feed's files (feed_private.h): it calls none of them.
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
/* ---- the feed table ---- */

MDB_val feed_key_meta = {1, (void *)"M"};
MDB_val feed_key_floor = {1, (void *)"F"};

int feed_read_meta(struct dbfs *fs, MDB_txn *txn, struct dbfs_feed_meta *m, uint64_t *floor)
{
	MDB_val v;
	int rc = dbfs_get(txn, fs->db_feed, &feed_key_meta, &v);
	memset(m, 0, sizeof(*m));
	m->next_seq = 1;
	if (rc == 0 && v.mv_size == sizeof(*m))
		memcpy(m, v.mv_data, sizeof(*m));
	else if (rc == 0)
		return -EIO;
	else if (rc != MDB_NOTFOUND)
		return rc;
	*floor = 1;
	rc = dbfs_get(txn, fs->db_feed, &feed_key_floor, &v);
	if (rc == 0 && v.mv_size == 8)
		memcpy(floor, v.mv_data, 8);
	else if (rc == 0)
		return -EIO;
	else if (rc != MDB_NOTFOUND)
		return rc;
	return 0;
}


int feed_limits_ok(const struct dbfs_feed_limits *l)
{
	return (l->max_events || l->max_bytes || l->max_age_sec) &&
	       l->max_events <= DBFS_FEED_EVENTS_MAX && l->max_bytes <= DBFS_FEED_BYTES_MAX;
}

/* Write the totals (a batch operation: f->meta is the leader's). */
static int meta_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	(void)arg;
	if (fs->shared)
		return 0; /* every batch writes them (feed_outbox.c, shared_meta) */
	MDB_val v = {sizeof(fs->feed->meta), &fs->feed->meta};
	return dbfs_put(txn, fs->db_feed, &feed_key_meta, &v, 0);
}

int feed_save_meta(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	uint64_t next = atomic_load(&f->last_seq) + 1;
	if (next == f->saved_seq)
		return 0;
	int rc = dbfs_write(fs, meta_fn, NULL);
	if (!rc)
		f->saved_seq = next;
	return rc;
}

/* ---- small public pieces ---- */

void dbfs_feed_uuid(struct dbfs *fs, uint8_t uuid[16])
{
	memcpy(uuid, fs->uuid, 16);
}

bool dbfs_feed_enabled(struct dbfs *fs)
{
	return fs->feed != NULL;
}

unsigned dbfs_feed_shards(struct dbfs *fs, unsigned *shard)
{
	*shard = fs->feed ? fs->feed->shard : 0;
	return fs->feed ? fs->feed->nshards : 0;
}

uint64_t dbfs_feed_last_seq(struct dbfs *fs)
{
	return fs->feed ? atomic_load(&fs->feed->last_seq) : 0;
}

void dbfs_feed_set_notify(struct dbfs *fs, void (*cb)(void *arg, uint64_t last_seq), void *arg)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->cb = cb;
	f->cb_arg = arg;
	pthread_mutex_unlock(&f->lock);
}

int dbfs_feed_set_limits(struct dbfs *fs, const struct dbfs_feed_limits *l)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return -EOPNOTSUPP;
	if (!feed_limits_ok(l))
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	f->lim = *l;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void dbfs_feed_get_limits(struct dbfs *fs, struct dbfs_feed_limits *l)
{
	struct dbfs_feed *f = fs->feed;
	if (!f) {
		*l = (struct dbfs_feed_limits){fs->opt.feed_max_events, fs->opt.feed_max_bytes,
					       fs->opt.feed_max_age, fs->opt.feed_sub_idle};
		return;
	}
	pthread_mutex_lock(&f->lock);
	*l = f->lim;
	pthread_mutex_unlock(&f->lock);
}
