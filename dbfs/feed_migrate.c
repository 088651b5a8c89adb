/*
 * An older store's change feed into the sharded queue (issue 21), in
 * place, at an open no other process shares (feed.c decides when).
 *
 * The old queue "feed" has one shard whose seqs are the feed's. Its
 * retained events, from the floor on, are copied in order into shard 0 of
 * the sharded queue (DBFS_FEED_QUEUE_SHARDED), each with its feed seq and
 * writer in the prefix (feed_shards.c), in transactions of up to
 * COPY_MSGS events; each writes how far it came (row 'W' of the table
 * "feed"), so a crash in between resumes there. The subscriptions' durable
 * subscribers are made again in the new queue at its start (their rows,
 * which hold what they acknowledged, are the truth: a reader skips what
 * it acknowledged). The last transaction marks the feed migrated (row
 * 'V'), deletes the old queue's subscribers and puts its retention floor
 * at its end, so its next maintenance drops every subshard it had. Its
 * small records stay (a build before the sharded queue would find an
 * empty feed there: the store's format version keeps it out).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbfs/feed.h"
#include "dbfs/feed_private.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

#define COPY_MSGS 4096

MDB_val feed_key_migrated = {1, (void *)"V"};
static MDB_val key_progress = {1, (void *)"W"};

struct copy {
	struct dbfs_feed *f;
	struct mfsq_msg_in *in;
	unsigned char *buf;
	size_t n, len, cap;
	uint64_t next; /* the old seq after the last copied */
};

static int copy_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct copy *c = arg;
	size_t at = 0;
	for (size_t i = 0; i < c->n; i++) {
		c->in[i].data = c->buf + at; /* the buffer may have moved */
		at += c->in[i].len;
	}
	uint64_t q0, *q = malloc(c->n * sizeof(*q)), s0;
	if (!q)
		return ENOMEM;
	int rc = mfsq_enqueue_batch(c->f->q, txn, c->in, c->n, q);
	q0 = q[0];
	free(q);
	if (rc == ENOSPC)
		return MDB_MAP_FULL;
	if (rc)
		return dbfs_queue_err(rc);
	memcpy(&s0, c->buf, 8); /* the first one's feed seq: where shard 0 has it */
	if ((rc = feed_shard_mark(fs, txn, 0, s0, q0)))
		return rc;
	MDB_val v = {8, &c->next};
	return dbfs_put(txn, fs->db_feed, &key_progress, &v, 0);
}

static int flush(struct dbfs *fs, struct copy *c)
{
	if (!c->n)
		return 0;
	int rc = dbfs_write(fs, copy_fn, c);
	c->n = c->len = 0;
	return rc;
}

/* Copy old's messages from seq `from` on. */
static int copy_events(struct dbfs *fs, struct dbfs_feed *f, mfsq_queue *old, uint64_t from,
		       uint64_t *end)
{
	struct copy c = {.f = f, .next = from};
	mfsq_sub *s;
	int rc;
	QCALL(fs, rc, mfsq_subscribe(old, NULL, 0, NULL, NULL, &s));
	if (rc)
		return dbfs_queue_err(rc);
	c.in = calloc(COPY_MSGS, sizeof(*c.in));
	if (!c.in) {
		rc = ENOMEM;
		goto out;
	}
	QCALL(fs, rc, mfsq_seek_seq(s, FEED_SHARD, from));
	if (rc == ENOENT) /* the queue kept less: what it has */
		QCALL(fs, rc, mfsq_seek_time(s, 0));
	struct mfsq_msg m[READ_MAX];
	size_t n;
	while (!rc) {
		QCALL(fs, rc, mfsq_dequeue(s, m, READ_MAX, &n, 0));
		if (rc == MFSQ_LAGGED) {
			rc = 0;
			continue;
		}
		for (size_t i = 0; !rc && i < n; i++) {
			if (m[i].seq < from)
				continue;
			size_t len = FEED_PREFIX + m[i].len;
			if (c.len + len > c.cap) {
				size_t cap = c.cap ? c.cap : 1u << 20;
				while (cap < c.len + len)
					cap *= 2;
				unsigned char *b = realloc(c.buf, cap);
				if (!b) {
					rc = ENOMEM;
					break;
				}
				c.buf = b;
				c.cap = cap;
			}
			memcpy(c.buf + c.len, &m[i].seq, 8);
			memcpy(c.buf + c.len + 8, &m[i].enqueuer, 8);
			memcpy(c.buf + c.len + FEED_PREFIX, m[i].data, m[i].len);
			c.in[c.n] = (struct mfsq_msg_in){.len = len, .enqueuer = f->enqueuer};
			c.len += len;
			c.n++;
			c.next = m[i].seq + 1;
			if (c.n == COPY_MSGS || c.len >= (8u << 20))
				rc = flush(fs, &c);
		}
	}
	if (rc == EAGAIN)
		rc = flush(fs, &c);
	else if (rc > 0 && rc != ENOMEM)
		rc = dbfs_queue_err(rc);
	*end = mfsq_sub_position(s, FEED_SHARD);
out:
	QCALL(fs, n, (mfsq_unsubscribe(s), 0));
	free(c.in);
	free(c.buf);
	return rc;
}

struct done {
	mfsq_queue *old;
	uint64_t end;
	char (*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
};

static int done_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct done *d = arg;
	uint64_t one = 1;
	MDB_val v = {8, &one};
	int rc = dbfs_put(txn, fs->db_feed, &feed_key_migrated, &v, 0);
	if (!rc && (rc = dbfs_del(txn, fs->db_feed, &key_progress, NULL)) == MDB_NOTFOUND)
		rc = 0;
	for (size_t i = 0; !rc && i < d->n; i++) {
		rc = mfsq_subscriber_delete(d->old, txn, d->names[i]);
		if (rc == ENOENT)
			rc = 0;
	}
	if (!rc)
		rc = mfsq_retain_floor(d->old, txn, FEED_SHARD, d->end);
	if (rc == ENOSPC)
		return MDB_MAP_FULL;
	return rc > 0 ? dbfs_queue_err(rc) : rc;
}

int feed_migrate(struct dbfs *fs, struct dbfs_feed *f, mfsq_queue *old, char *err, size_t errlen)
{
	uint64_t from = 1, end = 1;
	MDB_txn *txn;
	MDB_val v;
	struct dbfs_feed_meta m;
	int rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = feed_read_meta(fs, txn, &m, &from);
		if (!rc && dbfs_get(txn, fs->db_feed, &key_progress, &v) == 0 && v.mv_size == 8)
			memcpy(&from, v.mv_data, 8); /* a migration that stopped half-way */
		dbfs_read_end(fs, txn);
	}
	f->enqueuer = mfsq_enqueuer_in_shard(f->q, 0, 0);
	if (!rc)
		rc = copy_events(fs, f, old, from, &end);
	struct done d = {.old = old, .end = end};
	if (!rc)
		rc = feed_sub_names(fs, &d.names, &d.n);
	for (size_t i = 0; !rc && i < d.n; i++) {
		mfsq_sub *s;
		QCALL(fs, rc,
		      mfsq_subscribe(f->q, d.names[i], MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL,
				     NULL, &s));
		if (!rc)
			mfsq_unsubscribe(s);
		else
			rc = dbfs_queue_err(rc);
	}
	if (!rc)
		rc = dbfs_write(fs, done_fn, &d);
	free(d.names);
	if (!rc) {
		int qrc;
		QCALL(fs, qrc, mfsq_tick(old)); /* drops the old subshards; a failure: later */
		(void)qrc;
	}
	if (!rc)
		return 0;
	rc = dbfs_errno(rc);
	snprintf(err, errlen, "cannot move the change feed into its sharded queue: %s",
		 strerror(-rc));
	return rc;
}
