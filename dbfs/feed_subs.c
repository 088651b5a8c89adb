/*
 * The change feed's durable subscriptions (dbfs/feed.h): their rows in the
 * table "feed" (one per name: the acknowledged position, counters, the
 * filter spec), start positions (a sequence number, a time, now, the
 * oldest), and create, delete, get and list. A subscription is its row
 * and a durable libmfsq subscriber of the same name: create makes the
 * subscriber first (a leftover of a create that died before its row is
 * taken over), delete removes both in one transaction.
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

/* ---- subscriptions' rows ---- */

int feed_sub_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > DBFS_FEED_SUB_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static void sub_key(unsigned char *kb, const char *name, MDB_val *k)
{
	size_t n = strlen(name);
	kb[0] = 'S';
	memcpy(kb + 1, name, n);
	k->mv_size = n + 1;
	k->mv_data = kb;
}

/* Read a row: rec and (spec, up to DBFS_FEED_SPEC_MAX + 1 with NUL) */
static int sub_row_get(struct dbfs *fs, MDB_txn *txn, const char *name, struct dbfs_feed_subrec *r,
		       char *spec)
{
	unsigned char kb[1 + DBFS_FEED_SUB_MAX];
	MDB_val k, v;
	sub_key(kb, name, &k);
	int rc = dbfs_get(txn, fs->db_feed, &k, &v);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return rc;
	if (v.mv_size < sizeof(*r))
		return -EIO;
	memcpy(r, v.mv_data, sizeof(*r));
	if (r->spec_len > DBFS_FEED_SPEC_MAX || sizeof(*r) + r->spec_len != v.mv_size)
		return -EIO;
	if (spec) {
		memcpy(spec, (char *)v.mv_data + sizeof(*r), r->spec_len);
		spec[r->spec_len] = 0;
	}
	return 0;
}

static int sub_row_put(struct dbfs *fs, MDB_txn *txn, const char *name,
		       const struct dbfs_feed_subrec *r, const char *spec)
{
	unsigned char kb[1 + DBFS_FEED_SUB_MAX];
	unsigned char buf[sizeof(*r) + DBFS_FEED_SPEC_MAX];
	MDB_val k, v = {sizeof(*r) + r->spec_len, buf};
	sub_key(kb, name, &k);
	memcpy(buf, r, sizeof(*r));
	memcpy(buf + sizeof(*r), spec, r->spec_len);
	return dbfs_put(txn, fs->db_feed, &k, &v, 0);
}


int feed_row_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct row_ctx *c = arg;
	struct dbfs_feed_subrec old;
	char spec[DBFS_FEED_SPEC_MAX + 1];
	int rc = sub_row_get(fs, txn, c->name, &old, spec);
	if (c->create) {
		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc;
		return sub_row_put(fs, txn, c->name, &c->rec, c->spec ? c->spec : "");
	}
	if (rc)
		return rc;
	if (c->del) {
		/* the row and the queue's subscriber in one transaction: an
		 * answered error leaves the subscription whole */
		unsigned char kb[1 + DBFS_FEED_SUB_MAX];
		MDB_val k;
		sub_key(kb, c->name, &k);
		if ((rc = dbfs_del(txn, fs->db_feed, &k, NULL)))
			return rc;
		rc = mfsq_subscriber_delete(fs->feed->q, txn, c->name);
		if (rc == ENOENT) /* a row without its queue record */
			return 0;
		if (rc == EBUSY)
			return -EBUSY;
		if (rc == ENOSPC)
			return MDB_MAP_FULL;
		return dbfs_queue_err(rc);
	}
	struct dbfs_feed *f = fs->feed;
	/* each shard up to the last message handed out, when that is
	 * acknowledged; a shard whose last is beyond keeps its position (the
	 * row is the truth: a reopened reader skips what it acknowledged) */
	for (uint32_t i = 0; c->ack_sub && c->ack_r && i < f->nshards; i++) {
		if (!c->ack_r->hand_qseq[i] || c->ack_r->hand_fseq[i] >= c->rec.acked)
			continue;
		struct mfsq_msg m = {.shard = i, .seq = c->ack_r->hand_qseq[i]};
		rc = mfsq_ack(c->ack_sub, txn, &m);
		if (rc == ENOSPC)
			return MDB_MAP_FULL;
		if (rc)
			return dbfs_queue_err(rc);
	}
	/* by name (ack_name): the row only; the queue's positions follow the
	 * next reader's acknowledgements */
	old.gaps += c->rec.gaps;
	old.lost += c->rec.lost;
	if (c->rec.acked > old.acked || (c->set_acked && c->rec.acked))
		old.acked = c->rec.acked;
	old.active_ns = c->rec.active_ns;
	return sub_row_put(fs, txn, c->name, &old, spec);
}

/* ---- positions ---- */

int feed_check_start(struct dbfs *fs, const struct dbfs_feed_start *st)
{
	if (!st)
		return 0;
	if (st->uuid && memcmp(st->uuid, fs->uuid, 16))
		return -ESTALE;
	switch (st->from) {
	case DBFS_FEED_NOW:
	case DBFS_FEED_OLDEST:
	case DBFS_FEED_TIME:
		return 0;
	case DBFS_FEED_SEQ:
		if (st->seq == 0)
			return -EINVAL;
		return st->seq > dbfs_feed_last_seq(fs) + 1 ? -ERANGE : 0;
	}
	return -EINVAL;
}

/* Each shard is sought where its 'Q' rows say (its seqs are its own),
 * the reader's next feed seq is set, and what comes before it is skipped
 * (feed_shards.c). */
int feed_seek_to(struct dbfs *fs, mfsq_sub *s, const struct dbfs_feed_start *st, uint64_t *next,
		 uint64_t *min_ns, bool durable)
{
	struct dbfs_feed *f = fs->feed;
	int rc = 0;
	*min_ns = 0;
	switch (st->from) {
	case DBFS_FEED_NOW:
		/* a new ephemeral subscriber is at every shard's end; a durable
		 * one goes where a new ephemeral one is. Then every event from
		 * feed_next_now on commits after the subscriber's positions. */
		if (durable) {
			mfsq_sub *e = NULL;
			QCALL(fs, rc, mfsq_subscribe(f->q, NULL, 0, NULL, NULL, &e));
			for (uint32_t i = 0; !rc && i < f->nshards; i++)
				QCALL(fs, rc, mfsq_seek_seq(s, i, mfsq_sub_position(e, i)));
			if (e)
				QCALL(fs, rc, (mfsq_unsubscribe(e), rc));
		}
		if (!rc) {
			int e = feed_next_now(fs, next);
			if (e) /* a dbfs errno already */
				return e;
		}
		break;
	case DBFS_FEED_OLDEST:
		QCALL(fs, rc, mfsq_seek_time(s, 0));
		*next = atomic_load(&f->floor);
		break;
	case DBFS_FEED_SEQ:
		rc = feed_shard_seek(fs, s, st->seq);
		*next = st->seq;
		break;
	case DBFS_FEED_TIME:
		*next = feed_seq_at(fs, st->time_ns);
		rc = feed_shard_seek(fs, s, *next);
		*min_ns = st->time_ns;
		break;
	}
	return feed_q_errno(rc);
}

/* ---- subscriptions ---- */

static bool sub_open_here(struct dbfs_feed *f, const char *name)
{
	bool open = false;
	pthread_mutex_lock(&f->lock);
	for (struct dbfs_feed_reader *r = f->readers; r; r = r->next_r)
		if (!strcmp(r->name, name))
			open = true;
	pthread_mutex_unlock(&f->lock);
	return open;
}

int dbfs_feed_sub_create(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
			 const char *spec)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	if (!f)
		return -EOPNOTSUPP;
	if (!feed_sub_name_ok(sub) || (spec && strlen(spec) > DBFS_FEED_SPEC_MAX))
		return -EINVAL;
	if (fs->opt.read_only)
		return -EROFS;
	if ((rc = feed_check_start(fs, start)))
		return rc;
	struct dbfs_feed_sub_info info;
	rc = dbfs_feed_sub_get(fs, sub, &info);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	/* The queue's subscriber first (a leftover of a create that died
	 * before its row is taken over), positioned, then the row. */
	mfsq_sub *s;
	QCALL(fs, rc, mfsq_subscribe(f->q, sub, MFSQ_SUB_DURABLE, NULL, NULL, &s));
	if (rc)
		return rc == EBUSY ? -EBUSY : feed_q_write_errno(fs, rc);
	uint64_t next, min_ns;
	struct dbfs_feed_start now = {.from = DBFS_FEED_NOW};
	rc = feed_seek_to(fs, s, start ? start : &now, &next, &min_ns, true);
	mfsq_unsubscribe(s);
	if (rc)
		return rc;
	uint64_t t = feed_now_ns();
	struct row_ctx c = {.name = sub, .spec = spec, .create = true};
	c.rec = (struct dbfs_feed_subrec){.created_ns = t,
					  .active_ns = t,
					  .acked = next,
					  .spec_len = spec ? (uint32_t)strlen(spec) : 0};
	return dbfs_errno(dbfs_write(fs, feed_row_fn, &c));
}

int feed_sub_delete(struct dbfs *fs, const char *sub)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	if (sub_open_here(f, sub))
		return -EBUSY;
	struct row_ctx c = {.name = sub, .del = true};
	rc = dbfs_errno(dbfs_write(fs, feed_row_fn, &c));
	if (rc != -ENOENT)
		return rc;
	/* no row: a queue subscriber may be left by a create that died
	 * before its row was written (dbfs_feed_sub_create) */
	int qrc;
	QCALL(fs, qrc, mfsq_subscriber_delete(f->q, NULL, sub));
	if (qrc == EBUSY)
		return -EBUSY;
	if (qrc && qrc != ENOENT)
		return feed_q_write_errno(fs, qrc);
	return rc;
}

int dbfs_feed_sub_delete(struct dbfs *fs, const char *sub)
{
	if (!fs->feed)
		return -EOPNOTSUPP;
	if (!feed_sub_name_ok(sub))
		return -EINVAL;
	if (fs->opt.read_only)
		return -EROFS;
	return feed_sub_delete(fs, sub);
}

static void fill_info(struct dbfs *fs, const char *name, const struct dbfs_feed_subrec *r,
		      const char *spec, struct dbfs_feed_sub_info *info)
{
	struct dbfs_feed *f = fs->feed;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", name);
	snprintf(info->spec, sizeof(info->spec), "%s", spec);
	info->gaps = r->gaps;
	info->lost = r->lost;
	info->created_ns = r->created_ns;
	info->active_ns = r->active_ns;
	uint64_t pos = r->acked, fl = atomic_load(&f->floor);
	bool open = false;
	pthread_mutex_lock(&f->lock);
	for (struct dbfs_feed_reader *rd = f->readers; rd; rd = rd->next_r)
		if (!strcmp(rd->name, name)) {
			open = true;
			info->gaps += rd->gaps;
			info->lost += rd->lost;
			if (rd->acked > pos)
				pos = rd->acked;
		}
	pthread_mutex_unlock(&f->lock);
	info->open = open;
	/* behind retention (below the floor): lost, not told yet (the
	 * reader's gap record will) */
	if (pos < fl) {
		info->lost += fl - pos;
		pos = fl;
	}
	info->next_seq = pos;
	uint64_t last = atomic_load(&f->last_seq);
	info->lag = last + 1 > pos ? last + 1 - pos : 0;
}

int feed_sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info,
		   uint64_t *row_acked)
{
	struct dbfs_feed_subrec r;
	char spec[DBFS_FEED_SPEC_MAX + 1];
	MDB_txn *txn;
	if (!fs->feed)
		return -EOPNOTSUPP;
	if (!feed_sub_name_ok(sub))
		return -EINVAL;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return dbfs_errno(rc);
	rc = sub_row_get(fs, txn, sub, &r, spec);
	dbfs_read_end(fs, txn);
	if (rc)
		return dbfs_errno(rc);
	fill_info(fs, sub, &r, spec, info);
	if (row_acked)
		*row_acked = r.acked;
	return 0;
}

int dbfs_feed_sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info)
{
	return feed_sub_get(fs, sub, info, NULL);
}

/* Names of every row (a copy: the callback runs with no transaction). */
int feed_sub_names(struct dbfs *fs, char (**names)[DBFS_FEED_SUB_MAX + 1], size_t *count)
{
	MDB_txn *txn;
	MDB_cursor *c;
	size_t n = 0, cap = 0;
	char(*v)[DBFS_FEED_SUB_MAX + 1] = NULL;
	int rc = dbfs_read_begin(fs, &txn);
	*names = NULL;
	*count = 0;
	if (rc)
		return rc;
	rc = mdb_cursor_open(txn, fs->db_feed, &c);
	if (!rc) {
		MDB_val k = {1, (void *)"S"}, val;
		for (rc = mdb_cursor_get(c, &k, &val, MDB_SET_RANGE); !rc;
		     rc = mdb_cursor_get(c, &k, &val, MDB_NEXT)) {
			if (((char *)k.mv_data)[0] != 'S' || k.mv_size < 2 ||
			    k.mv_size > 1 + DBFS_FEED_SUB_MAX)
				break;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				void *nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					rc = ENOMEM;
					break;
				}
				v = nv;
			}
			memcpy(v[n], (char *)k.mv_data + 1, k.mv_size - 1);
			v[n][k.mv_size - 1] = 0;
			n++;
		}
		mdb_cursor_close(c);
	}
	dbfs_read_end(fs, txn);
	if (rc && rc != MDB_NOTFOUND) {
		free(v);
		return rc;
	}
	*names = v;
	*count = n;
	return 0;
}

int dbfs_feed_sub_list(struct dbfs *fs, int (*cb)(void *arg, const struct dbfs_feed_sub_info *info),
		       void *arg)
{
	char(*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
	if (!fs->feed)
		return -EOPNOTSUPP;
	int rc = feed_sub_names(fs, &names, &n);
	if (rc)
		return dbfs_errno(rc);
	struct dbfs_feed_sub_info *info = malloc(sizeof(*info));
	if (!info) {
		free(names);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		int g = dbfs_feed_sub_get(fs, names[i], info);
		if (g == -ENOENT)
			continue; /* deleted meanwhile */
		rc = g ? g : cb(arg, info);
	}
	free(info);
	free(names);
	return rc;
}
