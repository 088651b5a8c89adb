/*
 * The change feed's retention and statistics (dbfs/feed.h), run from
 * dbfs_tick. It computes the retention floor from the limits (events,
 * bytes, age: the block rows of the table "feed" give bytes and times
 * without reading events), writes it to the queue (mfsq_retain_floor:
 * each shard's, from its 'Q' rows, feed_shards.c),
 * which then drops whole subshards below it whatever the subscribers hold
 * and keeps the rest for replays even with no subscriber; it trims the
 * block rows below the floor and expires idle subscriptions.
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

/* ---- stats ---- */

int dbfs_feed_stats(struct dbfs *fs, struct dbfs_feed_stats *st)
{
	struct dbfs_feed *f = fs->feed;
	memset(st, 0, sizeof(*st));
	memcpy(st->uuid, fs->uuid, 16);
	if (!f)
		return -EOPNOTSUPP;
	st->enabled = true;
	MDB_txn *txn;
	struct dbfs_feed_meta m;
	uint64_t floor;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return dbfs_errno(rc);
	feed_pub_meta(f, &m, &floor);
	if (!rc) {
		unsigned char kb[9];
		MDB_val k, v;
		feed_block_key(kb, feed_block_of(floor), &k);
		st->next_seq = m.next_seq;
		st->first_seq = floor < m.next_seq ? floor : m.next_seq;
		st->events = m.next_seq - st->first_seq;
		int g = dbfs_get(txn, fs->db_feed, &k, &v);
		if (g == 0 && v.mv_size == sizeof(struct dbfs_feed_block)) {
			struct dbfs_feed_block b;
			memcpy(&b, v.mv_data, sizeof(b));
			/* the block's bytes before the floor are counted: they
			 * stay until their subshard goes */
			st->bytes = m.bytes > b.bytes_before ? m.bytes - b.bytes_before : 0;
			st->oldest_ns = st->events ? b.first_ns : 0;
		} else {
			st->bytes = st->events ? m.bytes : 0;
		}
		st->bytes += st->events * REC_OVERHEAD;
	}
	dbfs_read_end(fs, txn);
	if (rc)
		return dbfs_errno(rc);
	st->enqueued = atomic_load(&f->enqueued);
	st->trimmed = atomic_load(&f->trimmed);
	st->gaps = atomic_load(&f->gaps);
	st->subs_expired = atomic_load(&f->subs_expired);
	char(*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
	if (feed_sub_names(fs, &names, &n) == 0) {
		st->subs = n;
		free(names);
	}
	dbfs_feed_get_limits(fs, &st->limits);
	return 0;
}

/* ---- retention and expiry (dbfs_tick) ---- */

struct trim_ctx {
	uint64_t floor;
	uint64_t *qfloor; /* each shard's (feed_shard_positions) */
};

static int trim_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct trim_ctx *c = arg;
	MDB_val v = {8, &c->floor};
	int rc = dbfs_put(txn, fs->db_feed, &feed_key_floor, &v, 0);
	if (rc)
		return rc;
	struct dbfs_feed *f = fs->feed;
	if ((rc = feed_shard_positions(fs, txn, c->floor, c->qfloor)) ||
	    (rc = feed_shard_trim(fs, txn, c->floor)))
		return rc;
	for (uint32_t i = 0; !rc && i < f->nshards; i++)
		rc = mfsq_retain_floor(f->q, txn, i, c->qfloor[i]);
	if (rc == ENOSPC)
		return MDB_MAP_FULL;
	if (rc)
		return dbfs_queue_err(rc);
	/* block rows before the floor's block */
	MDB_cursor *cur;
	if ((rc = mdb_cursor_open(txn, fs->db_feed, &cur)))
		return rc;
	unsigned char kb[9];
	MDB_val k;
	feed_block_key(kb, 0, &k);
	uint64_t keep = feed_block_of(c->floor);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 9 || ((char *)k.mv_data)[0] != 'I' ||
		    dbfs_get_be64((unsigned char *)k.mv_data + 1) >= keep)
			break;
		if ((rc = dbfs_cursor_del(cur)))
			break;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The floor the limits ask for now. */
static int floor_wanted(struct dbfs *fs, const struct dbfs_feed_limits *l, uint64_t *want)
{
	MDB_txn *txn;
	struct dbfs_feed_meta m;
	uint64_t floor;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return rc;
	feed_pub_meta(fs->feed, &m, &floor);
	*want = floor;
	/* the store's file system is full: the feed gives back all but its
	 * newest block (readers behind get a gap), before the file system's
	 * users meet ENOSPC */
	if (fs->space_low && m.next_seq > 1 && feed_block_of(m.next_seq - 1) > *want)
		*want = feed_block_of(m.next_seq - 1);
	if (!rc && l->max_events && m.next_seq > l->max_events + 1 &&
	    m.next_seq - l->max_events > *want)
		*want = m.next_seq - l->max_events;
	if (!rc && (l->max_bytes || l->max_age_sec) && m.next_seq > *want) {
		uint64_t cutoff = l->max_age_sec ? feed_now_ns() - l->max_age_sec * 1000000000ull : 0;
		MDB_cursor *cur;
		rc = mdb_cursor_open(txn, fs->db_feed, &cur);
		if (!rc) {
			unsigned char kb[9];
			MDB_val k, v;
			feed_block_key(kb, feed_block_of(*want), &k);
			/* walk blocks from the floor's: drop a block while the bytes
			 * from it on exceed the bound, or its successor began
			 * before the age cutoff (all of it is older) */
			int g = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
			while (!g && k.mv_size == 9 && ((char *)k.mv_data)[0] == 'I' &&
			       v.mv_size == sizeof(struct dbfs_feed_block)) {
				struct dbfs_feed_block b, nb;
				uint64_t first = dbfs_get_be64((unsigned char *)k.mv_data + 1);
				memcpy(&b, v.mv_data, sizeof(b));
				bool over = l->max_bytes && m.bytes > b.bytes_before &&
					    m.bytes - b.bytes_before > l->max_bytes;
				g = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
				bool have_next = !g && k.mv_size == 9 &&
						 ((char *)k.mv_data)[0] == 'I' &&
						 v.mv_size == sizeof(nb);
				uint64_t next_first =
				    have_next ? dbfs_get_be64((unsigned char *)k.mv_data + 1)
					      : m.next_seq;
				uint64_t next_ns = m.last_ns;
				if (have_next) {
					memcpy(&nb, v.mv_data, sizeof(nb));
					next_ns = nb.first_ns;
				}
				bool old =
				    cutoff && next_ns < cutoff && (have_next || m.last_ns < cutoff);
				if (!over && !old)
					break;
				if (next_first > *want)
					*want = next_first;
				(void)first;
				if (!have_next)
					break;
			}
			mdb_cursor_close(cur);
		}
	}
	dbfs_read_end(fs, txn);
	return rc;
}

static void expire_subs(struct dbfs *fs, uint64_t idle_sec)
{
	char(*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
	if (!idle_sec || feed_sub_names(fs, &names, &n))
		return;
	uint64_t now = feed_now_ns();
	for (size_t i = 0; i < n; i++) {
		struct dbfs_feed_sub_info info;
		if (dbfs_feed_sub_get(fs, names[i], &info) || info.open)
			continue;
		if (now > info.active_ns && now - info.active_ns >= idle_sec * 1000000000ull &&
		    feed_sub_delete(fs, names[i]) == 0)
			atomic_fetch_add(&fs->feed->subs_expired, 1);
	}
	free(names);
}

int dbfs_feed_tick(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	struct dbfs_feed_limits l;
	uint64_t want;
	int rc;
	/* nothing to trim on a store that went read-only after an I/O error */
	if (!f || fs->opt.read_only || atomic_load(&fs->io_failed))
		return 0;
	dbfs_feed_get_limits(fs, &l);
	rc = floor_wanted(fs, &l, &want);
	uint64_t fl = atomic_load(&f->floor);
	if (!rc && want > fl) {
		struct trim_ctx c = {want, NULL};
		uint64_t *qfloor = NULL;
		if (!(c.qfloor = qfloor = malloc(f->nshards * sizeof(*qfloor))))
			rc = ENOMEM;
		if (!rc)
			rc = dbfs_write(fs, trim_fn, &c);
		free(qfloor);
		if (!rc) {
			atomic_store(&f->floor, want);
			atomic_fetch_add(&f->trimmed, want - fl);
		}
	}
	uint64_t last = atomic_load(&f->last_seq);
	if (!rc && (want > fl || last != f->ticked_seq)) {
		int qrc;
		QCALL(fs, qrc, mfsq_tick(f->q));
		if (!qrc)
			f->ticked_seq = last;
		else
			rc = dbfs_queue_err(qrc);
	}
	expire_subs(fs, l.sub_idle_sec);
	int mrc = feed_save_meta(fs);
	return rc ? rc : mrc;
}
