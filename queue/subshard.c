/* SPDX-License-Identifier: MIT */
/*
 * Subshards: the bounded databases a shard's stream is cut into. A new
 * subshard is always the spare created ahead by a maintenance transaction,
 * so enqueues never create databases. A subshard every subscriber passed
 * (or beyond the hard retention limit) is dropped whole with mdb_drop().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void index_key(unsigned char k[13], uint32_t s, uint64_t first)
{
	k[0] = 'B';
	mfsq_be32_put(k + 1, s);
	mfsq_be64_put(k + 5, first);
}

int mfsq_subshard_index_put(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t first, uint64_t id)
{
	unsigned char k[13];
	MDB_val key = {sizeof(k), k}, val = {sizeof(id), &id};

	index_key(k, s, first);
	return mdb_put(txn, q->meta, &key, &val, 0);
}

/* Create the spare subshard if there is none (maintenance transactions). */
int mfsq_subshard_spare(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st)
{
	MDB_dbi dbi;
	int rc;

	if (st->spare_id || !w->maint)
		return 0;
	if (!st->next_id)
		st->next_id = 1;
	rc = mfsq_wtx_subshard(q, w, s, st->next_id, 1, &dbi);
	if (rc)
		return rc;
	st->spare_id = st->next_id++;
	atomic_fetch_add(&q->c.sub_created, 1);
	return 0;
}

/* Start a new subshard at st->next_seq: the spare becomes the tail. */
int mfsq_subshard_roll(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st)
{
	MDB_dbi dbi;
	int rc = mfsq_subshard_spare(q, w, s, st);

	if (rc)
		return rc;
	if (!st->spare_id)
		return MFSQ_RETRY;
	rc = mfsq_wtx_subshard(q, w, s, st->spare_id, 0, &dbi);
	if (rc)
		return rc;
	rc = mfsq_subshard_index_put(q, w->txn, s, st->next_seq, st->spare_id);
	if (rc)
		return rc;
	st->tail_first = st->next_seq;
	st->tail_id = st->spare_id;
	st->tail_count = 0;
	st->tail_bytes = 0;
	st->spare_id = 0;
	st->nlive++;
	atomic_store(&q->retention_due, 1);
	return 0;
}

/*
 * Find the subshard holding @seq of shard @s: its first seq, its database
 * id, and the first seq of the next subshard (UINT64_MAX for the tail).
 * MDB_NOTFOUND: @seq is older than every live subshard.
 */
int mfsq_subshard_locate(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t seq, uint64_t *first,
			 uint64_t *id, uint64_t *end)
{
	unsigned char k[13];
	MDB_val key = {sizeof(k), k}, val;
	MDB_cursor *c;
	int rc;

	rc = mdb_cursor_open(txn, q->meta, &c);
	if (rc)
		return rc;
	index_key(k, s, seq);
	*end = UINT64_MAX;
	rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
	if (!rc && key.mv_size == 13 && ((unsigned char *)key.mv_data)[0] == 'B' &&
	    mfsq_be32_get((unsigned char *)key.mv_data + 1) == s) {
		uint64_t f = mfsq_be64_get((unsigned char *)key.mv_data + 5);

		if (f == seq) {
			*first = f;
			rc = mfsq_index_id(&val, id);
			if (rc) {
				mdb_cursor_close(c);
				return rc;
			}
			rc = mdb_cursor_get(c, &key, &val, MDB_NEXT);
			if (!rc && key.mv_size == 13 && ((unsigned char *)key.mv_data)[0] == 'B' &&
			    mfsq_be32_get((unsigned char *)key.mv_data + 1) == s)
				*end = mfsq_be64_get((unsigned char *)key.mv_data + 5);
			mdb_cursor_close(c);
			return 0;
		}
		*end = f;
		rc = mdb_cursor_get(c, &key, &val, MDB_PREV);
	} else if (rc == MDB_NOTFOUND || !rc) {
		rc = mdb_cursor_get(c, &key, &val, rc ? MDB_LAST : MDB_PREV);
	}
	if (!rc) {
		if (key.mv_size == 13 && ((unsigned char *)key.mv_data)[0] == 'B' &&
		    mfsq_be32_get((unsigned char *)key.mv_data + 1) == s) {
			*first = mfsq_be64_get((unsigned char *)key.mv_data + 5);
			rc = mfsq_index_id(&val, id);
		} else {
			rc = MDB_NOTFOUND;
		}
	}
	mdb_cursor_close(c);
	return rc;
}

/* This process's durable subscribers whose acknowledgements may be in the
 * ack log only (acklog.c): name and positions, copied under q->lock. */
struct logged {
	const char *name;
	uint64_t *acked;
};

static struct logged *logged_copy(mfsq_queue *q, size_t *count)
{
	uint32_t n = q->cfg.nshards;
	struct logged *v = NULL;
	size_t k = 0, cap = 0;

	pthread_mutex_lock(&q->lock);
	for (mfsq_sub *sb = q->subs; sb; sb = sb->next)
		cap += (sb->flags & MFSQ_SUB_DURABLE) && sb->logged;
	if (cap)
		v = malloc(cap * (sizeof(*v) + n * sizeof(uint64_t)));
	for (mfsq_sub *sb = q->subs; v && sb; sb = sb->next) {
		if (!(sb->flags & MFSQ_SUB_DURABLE) || !sb->logged)
			continue;
		v[k].name = sb->name; /* lives while it is subscribed: not past this call */
		v[k].acked = (uint64_t *)(v + cap) + k * n;
		memcpy(v[k].acked, sb->acked, n * sizeof(uint64_t));
		k++;
	}
	pthread_mutex_unlock(&q->lock);
	*count = k;
	return v;
}

/* Raise the positions @pos of record @key to a logged subscriber's; 1 if
 * any moved. */
static int logged_raise(const struct logged *v, size_t count, const MDB_val *key, uint64_t *pos,
			uint32_t n)
{
	int raised = 0;

	for (size_t i = 0; i < count; i++) {
		if (strlen(v[i].name) != key->mv_size - 1 ||
		    memcmp(v[i].name, (const char *)key->mv_data + 1, key->mv_size - 1))
			continue;
		for (uint32_t s = 0; s < n; s++)
			if (v[i].acked[s] > pos[s]) {
				pos[s] = v[i].acked[s];
				raised = 1;
			}
	}
	return raised;
}

/*
 * Lowest acknowledged position per shard over the durable subscribers in
 * the store and the ephemeral ones of this process; subscribers older than
 * @cut[s] are moved to it and marked lagging. A durable subscriber of this
 * process whose positions in memory are ahead of its record (in the ack
 * log, acklog.c, not yet folded) has them folded here, in the commit that
 * drops what they passed: a record never stays behind a drop (after a
 * machine crash the subscriber would come back lagging).
 */
static int min_positions(mfsq_queue *q, MDB_txn *txn, uint64_t *minpos, const uint64_t *cut)
{
	uint32_t n = q->cfg.nshards;
	MDB_val key = {1, "U"}, val;
	MDB_cursor *c;
	struct logged *lg;
	size_t nlg;
	int rc;

	for (uint32_t s = 0; s < n; s++)
		minpos[s] = UINT64_MAX;
	pthread_mutex_lock(&q->lock);
	for (mfsq_sub *sb = q->subs; sb; sb = sb->next)
		if (!(sb->flags & MFSQ_SUB_DURABLE))
			for (uint32_t s = 0; s < n; s++)
				if (sb->acked[s] < minpos[s])
					minpos[s] = sb->acked[s] < cut[s] ? cut[s] : sb->acked[s];
	pthread_mutex_unlock(&q->lock);
	lg = logged_copy(q, &nlg); /* NULL (none, or no memory): the records alone */

	rc = mdb_cursor_open(txn, q->meta, &c);
	if (rc) {
		free(lg);
		return rc;
	}
	for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		struct mfsq_disk_sub ds;
		uint64_t *acked;
		int changed = 0, raised;

		if (((char *)key.mv_data)[0] != 'U')
			break;
		if (val.mv_size != sizeof(ds) + n * sizeof(uint64_t)) {
			rc = EBADMSG;
			break;
		}
		memcpy(&ds, val.mv_data, sizeof(ds));
		acked = malloc(n * sizeof(*acked));
		if (!acked) {
			rc = ENOMEM;
			break;
		}
		memcpy(acked, (char *)val.mv_data + sizeof(ds), n * sizeof(*acked));
		raised = logged_raise(lg, nlg, &key, acked, n);
		for (uint32_t s = 0; s < n; s++) {
			if (acked[s] < cut[s]) {
				ds.lost += cut[s] - acked[s];
				acked[s] = cut[s];
				changed = 1;
			}
		}
		if (changed || raised) {
			unsigned char buf[sizeof(ds) + 1024 * sizeof(uint64_t)];
			MDB_val nv = {val.mv_size, buf};

			if (changed && !(ds.flags & MFSQ_SUB_F_LAGGING))
				atomic_fetch_add(&q->c.lagging, 1);
			if (changed)
				ds.flags |= MFSQ_SUB_F_LAGGING;
			memcpy(buf, &ds, sizeof(ds));
			memcpy(buf + sizeof(ds), acked, n * sizeof(*acked));
			rc = mdb_cursor_put(c, &key, &nv, MDB_CURRENT);
		}
		for (uint32_t s = 0; s < n; s++)
			if (acked[s] < minpos[s])
				minpos[s] = acked[s];
		free(acked);
		if (rc)
			break;
	}
	mdb_cursor_close(c);
	free(lg);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int drop_one(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, uint64_t first, uint64_t id,
		    int *wrlocked)
{
	unsigned char k[13];
	MDB_val key = {sizeof(k), k};
	MDB_dbi dbi;
	int rc;

	if (!*wrlocked) {
		pthread_rwlock_wrlock(&q->droplock);
		*wrlocked = 1;
	}
	rc = mfsq_wtx_subshard(q, w, s, id, 0, &dbi);
	if (!rc) {
		/* mdb_drop closes the handle at once: forget it everywhere */
		mfsq_subshard_forget(q, s, id);
		mfsq_wtx_forget(w, s, id);
		rc = mdb_drop(w->txn, dbi, 1);
	} else if (rc == MDB_NOTFOUND) {
		rc = 0; /* already gone */
	}
	if (rc)
		return rc;
	index_key(k, s, first);
	rc = mdb_del(w->txn, q->meta, &key, NULL);
	if (!rc)
		atomic_fetch_add(&q->c.sub_dropped, 1);
	return rc;
}

/* Whether index row @key is one of shard @s's. */
static int index_of(const MDB_val *key, uint32_t s)
{
	const unsigned char *k = key->mv_data;

	return key->mv_size == 13 && k[0] == 'B' && mfsq_be32_get(k + 1) == s;
}

/*
 * The hard limit of shard @s: *cut gets the first seq of the oldest
 * subshard to keep when the shard has more than retain_max, else 0. Walks
 * the index back from the shard's last row, at most retain_max + 1 rows:
 * the work is bounded by the configuration and by what is in the index,
 * never by the stored nlive (a damaged one was 2^64 lookups).
 */
static int hard_limit_cut(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t *cut)
{
	unsigned char k[13];
	MDB_val key = {sizeof(k), k}, val;
	MDB_cursor *c;
	uint64_t kept = 0, oldest = 0;
	int rc;

	*cut = 0;
	rc = mdb_cursor_open(txn, q->meta, &c);
	if (rc)
		return rc;
	index_key(k, s + 1, 0); /* nshards <= 1024: no wrap */
	rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
	rc = mdb_cursor_get(c, &key, &val, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
	for (; !rc && index_of(&key, s); rc = mdb_cursor_get(c, &key, &val, MDB_PREV)) {
		if (kept++ == q->cfg.retain_max) {
			*cut = oldest;
			break;
		}
		oldest = mfsq_be64_get((unsigned char *)key.mv_data + 5);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/*
 * Maintenance: keep a spare per shard, start a new subshard where enqueues in
 * callers' transactions overfilled the tail, drop passed subshards and
 * enforce the hard limit (marking subscribers left behind as lagging).
 */
int mfsq_retention(mfsq_queue *q)
{
	uint32_t n = q->cfg.nshards;
	uint64_t *minpos = calloc(n, 2 * sizeof(uint64_t)), *cut;
	struct mfsq_wtx w;
	int wrlocked = 0, rc;

	if (!minpos)
		return ENOMEM;
	cut = minpos + n;
	atomic_store(&q->retention_due, 0);
	rc = mfsq_wtx_begin(q, NULL, 1, &w);
	if (rc) {
		free(minpos);
		return mfsq_lmdb_err(rc);
	}
	/* The hard limit first: where each shard's head must move to. */
	for (uint32_t s = 0; !rc && s < n; s++) {
		struct mfsq_disk_shard st;

		if (!mfsq_shard_used(q, s)) {
			/* a lazy queue's shard not written here: no spare to keep
			 * and no handle to open unless there is something to drop */
			rc = mfsq_shard_row(q, w.txn, s, &st);
			if (!rc && st.tail_id && st.nlive > 1)
				rc = hard_limit_cut(q, w.txn, s, &cut[s]);
			continue;
		}
		rc = mfsq_shard_read_w(q, &w, s, &st, NULL);
		if (!rc)
			rc = mfsq_subshard_spare(q, &w, s, &st);
		if (!rc && st.tail_count >= q->cfg.subshard_msgs)
			rc = mfsq_subshard_roll(q, &w, s, &st);
		if (!rc)
			rc = mfsq_subshard_spare(q, &w, s, &st);
		if (!rc)
			rc = mfsq_write_shard(q, w.txn, s, &st);
		/* the first seq of the subshard that becomes the head, or 0 */
		if (!rc)
			rc = hard_limit_cut(q, w.txn, s, &cut[s]);
	}
	/* a floor (floor.c) moves the cut up to it and keeps what is above */
	for (uint32_t s = 0; !rc && s < n; s++) {
		uint64_t fl;

		rc = mfsq_floor_get(q, w.txn, s, &fl);
		if (!rc && fl > cut[s])
			cut[s] = fl;
	}
	if (!rc)
		rc = min_positions(q, w.txn, minpos, cut);
	for (uint32_t s = 0; !rc && s < n; s++) {
		uint64_t fl;

		rc = mfsq_floor_get(q, w.txn, s, &fl);
		if (!rc && fl && fl < minpos[s])
			minpos[s] = fl;
	}
	for (uint32_t s = 0; !rc && s < n; s++) {
		struct mfsq_disk_shard st;
		uint64_t first, id, next;
		int idle = 0;

		if (!mfsq_shard_used(q, s)) { /* as above */
			rc = mfsq_shard_row(q, w.txn, s, &st);
			idle = !rc && (!st.tail_id || st.nlive <= 1);
		}
		if (!rc && !idle)
			rc = mfsq_shard_read_w(q, &w, s, &st, NULL);
		while (!rc && !idle && st.nlive > 1) {
			rc = mfsq_subshard_locate(q, w.txn, s, st.head_first, &first, &id, &next);
			if (rc || next == UINT64_MAX || next > minpos[s])
				break;
			rc = drop_one(q, &w, s, first, id, &wrlocked);
			if (!rc) {
				st.head_first = next;
				st.nlive--;
			}
		}
		if (!rc && !idle)
			rc = mfsq_write_shard(q, w.txn, s, &st);
		/* handles of subshards another process dropped: ids are never
		 * reused, so everything below the head's id is gone */
		if (!rc && !mfsq_subshard_locate(q, w.txn, s, st.head_first, &first, &id, &next) &&
		    mfsq_dbi_count_below(q, s, id)) {
			if (!wrlocked) {
				pthread_rwlock_wrlock(&q->droplock);
				wrlocked = 1;
			}
			mfsq_dbi_close_below(q, s, id);
		}
	}
	rc = mfsq_wtx_end(q, &w, rc);
	if (wrlocked)
		pthread_rwlock_unlock(&q->droplock);
	free(minpos);
	return mfsq_lmdb_err(rc);
}
