/*
 * The change feed's sharded queue (issue 21; dbfs/feed_private.h): each
 * process enqueues into a shard of its own, and readers still see one
 * feed ordered by dense sequence numbers.
 *
 * How the numbers stay dense and ordered across shards: a batch's feed
 * seqs are allocated inside the store's write transaction, which every
 * process serialises on (LMDB's writer lock): from the 'M' row, which a
 * shared store's batches rewrite every time (feed_outbox.c), or from the
 * leader's totals when the open is exclusive (no one else writes). Each
 * message carries its feed seq and its writer in a prefix (FEED_PREFIX)
 * before the event's record. So when a reader meets seq S, every event
 * below S committed before it or with it and is in some shard already: a
 * reader holds what it dequeued (feed_hold, sorted by feed seq), hands
 * out while the next seq it expects is at the front, and calls a hole a
 * gap only when a dequeue found nothing more (the queue merges its shards
 * by commit time, so a hole is a tie or a clock step away, never far).
 * Queue seqs are per shard; where the feed needs them (the retention
 * floor, the start of a replay) the 'Q' rows of the table "feed" give
 * them: per shard, a batch that begins a feed block the shard has no row
 * of yet writes the queue seq of its first event (about one row per
 * DBFS_FEED_BLOCK events), so a shard's last row at or below feed seq F
 * names a queue seq at or before its first message of F or later.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dbfs/feed.h"
#include "dbfs/feed_private.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

int feed_msg_split(const struct dbfs_feed *f, const struct mfsq_msg *m, uint64_t *seq,
		   uint64_t *writer, const void **rec, size_t *len)
{
	(void)f;
	if (m->len < FEED_PREFIX)
		return EBADMSG;
	memcpy(seq, m->data, 8);
	memcpy(writer, (const unsigned char *)m->data + 8, 8);
	*rec = (const unsigned char *)m->data + FEED_PREFIX;
	*len = m->len - FEED_PREFIX;
	return 0;
}

uint64_t feed_seq_at(struct dbfs *fs, uint64_t time_ns)
{
	uint64_t floor = atomic_load(&fs->feed->floor), at = floor;
	MDB_txn *txn;
	MDB_cursor *cur;
	if (dbfs_read_begin(fs, &txn))
		return floor;
	if (!mdb_cursor_open(txn, fs->db_feed, &cur)) {
		unsigned char kb[9];
		MDB_val k, v;
		feed_block_key(kb, feed_block_of(floor), &k);
		for (int g = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !g;
		     g = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			struct dbfs_feed_block b;
			if (k.mv_size != 9 || ((char *)k.mv_data)[0] != 'I' ||
			    v.mv_size != sizeof(b))
				break;
			memcpy(&b, v.mv_data, sizeof(b));
			if (b.first_ns >= time_ns)
				break;
			at = dbfs_get_be64((unsigned char *)k.mv_data + 1);
		}
		mdb_cursor_close(cur);
	}
	dbfs_read_end(fs, txn);
	return at > floor ? at : floor;
}

/* In a write transaction: every event from the returned seq on commits
 * after it. */
static int next_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	uint64_t *next = arg;
	*next = fs->feed->meta.next_seq; /* the leader's: committed */
	if (fs->shared) {
		struct dbfs_feed_meta m;
		uint64_t floor;
		int rc = feed_read_meta(fs, txn, &m, &floor);
		if (rc)
			return rc;
		if (m.next_seq > *next)
			*next = m.next_seq;
	}
	return 0;
}

int feed_next_now(struct dbfs *fs, uint64_t *out)
{
	uint64_t next = 0, last = dbfs_feed_last_seq(fs) + 1;
	int rc = dbfs_errno(dbfs_write(fs, next_fn, &next));
	if (rc == -EROFS) /* read-only, or failed before: nothing more commits */
		next = last;
	else if (rc)
		return rc; /* this write failed (EIO fails the store now) */
	*out = next < last ? last : next;
	return 0;
}

/* 'Q' | shard u32 BE | feed seq u64 BE  ->  queue seq u64 */
static void q_key(unsigned char k[13], uint32_t shard, uint64_t seq, MDB_val *key)
{
	k[0] = 'Q';
	for (int i = 0; i < 4; i++)
		k[1 + i] = (unsigned char)(shard >> (24 - 8 * i));
	dbfs_put_be64(k + 5, seq);
	key->mv_size = 13;
	key->mv_data = k;
}

static bool q_row(const MDB_val *k, const MDB_val *v, uint32_t shard)
{
	unsigned char kb[13];
	MDB_val want;
	q_key(kb, shard, 0, &want);
	return k->mv_size == 13 && v->mv_size == 8 && !memcmp(k->mv_data, kb, 5);
}

/* Put cur on shard's last row at or before feed seq `seq` (the one before
 * the first after it): 0, or MDB_NOTFOUND (none) or an LMDB code. */
static int last_row(MDB_cursor *cur, uint32_t shard, uint64_t seq, MDB_val *k, MDB_val *v)
{
	unsigned char kb[13];
	q_key(kb, shard, seq + 1, k);
	int rc = mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
	rc = rc == MDB_NOTFOUND ? mdb_cursor_get(cur, k, v, MDB_LAST)
				: mdb_cursor_get(cur, k, v, MDB_PREV);
	return !rc && !q_row(k, v, shard) ? MDB_NOTFOUND : rc;
}

int feed_shard_mark(struct dbfs *fs, MDB_txn *txn, uint32_t shard, uint64_t seq, uint64_t qseq)
{
	unsigned char kb[13];
	MDB_val k, v = {8, &qseq};
	q_key(kb, shard, seq, &k);
	return dbfs_put(txn, fs->db_feed, &k, &v, 0);
}

int feed_shard_positions(struct dbfs *fs, MDB_txn *txn, uint64_t seq, uint64_t *q)
{
	MDB_cursor *cur;
	int rc = mdb_cursor_open(txn, fs->db_feed, &cur);
	if (rc)
		return rc;
	for (uint32_t i = 0; !rc && i < fs->feed->nshards; i++) {
		MDB_val k, v;
		q[i] = 1;
		rc = last_row(cur, i, seq, &k, &v);
		if (!rc)
			memcpy(&q[i], v.mv_data, 8);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	mdb_cursor_close(cur);
	return rc;
}

int feed_shard_trim(struct dbfs *fs, MDB_txn *txn, uint64_t floor)
{
	MDB_cursor *cur;
	int rc = mdb_cursor_open(txn, fs->db_feed, &cur);
	if (rc)
		return rc;
	for (uint32_t i = 0; !rc && i < fs->feed->nshards; i++) {
		MDB_val k, v;
		/* delete the shard's rows before its last at or below the floor */
		rc = last_row(cur, i, floor, &k, &v);
		if (!rc)
			rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
		while (!rc && q_row(&k, &v, i)) {
			if ((rc = dbfs_cursor_del(cur)))
				break;
			rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
		}
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	mdb_cursor_close(cur);
	return rc;
}

int feed_shard_seek(struct dbfs *fs, mfsq_sub *s, uint64_t seq)
{
	struct dbfs_feed *f = fs->feed;
	uint64_t *q = malloc(f->nshards * sizeof(*q));
	MDB_txn *txn;
	int rc = q ? 0 : ENOMEM;
	if (!rc && !(rc = dbfs_read_begin(fs, &txn))) {
		rc = feed_shard_positions(fs, txn, seq, q);
		dbfs_read_end(fs, txn);
		rc = rc ? EIO : 0;
	}
	/* every shard at its oldest first (the first message: cheap), then
	 * each where its rows say */
	if (!rc)
		QCALL(fs, rc, mfsq_seek_time(s, 0));
	for (uint32_t i = 0; !rc && i < f->nshards; i++) {
		if (q[i] <= 1)
			continue;
		QCALL(fs, rc, mfsq_seek_seq(s, i, q[i]));
		if (rc == ENOENT)
			rc = 0; /* dropped: its oldest is later */
	}
	free(q);
	return rc;
}

/* The message at queue seq q of shard `sh` (the other shards of s at
 * their ends: what another process commits meanwhile is passed over):
 * 0, ENOENT (not retained) or a queue code. */
static int read_at(struct dbfs *fs, mfsq_sub *s, uint32_t sh, uint64_t q, struct mfsq_msg *m)
{
	size_t n;
	int rc;
	QCALL(fs, rc, mfsq_seek_seq(s, sh, q));
	do
		QCALL(fs, rc, mfsq_dequeue(s, m, 1, &n, 0));
	while (!rc && m->shard != sh);
	if (!rc && m->seq != q)
		return ENOENT; /* q was dropped: this one is the oldest kept */
	return rc == EAGAIN ? ENOENT : rc;
}

/* Count shard sh's events from feed seq f->meta.next_seq on (its end:
 * `end`): the first of them found by bisection (feed seqs grow within a
 * shard), then read forward. */
static int recount_shard(struct dbfs *fs, struct dbfs_feed *f, mfsq_sub *s, uint32_t sh,
			 uint64_t end, struct dbfs_feed_meta *m)
{
	struct mfsq_msg msg;
	uint64_t seq, w;
	const void *rec;
	size_t len;
	int rc = read_at(fs, s, sh, end - 1, &msg);
	if (rc == ENOENT)
		return 0; /* nothing retained */
	if (rc || (rc = feed_msg_split(f, &msg, &seq, &w, &rec, &len)))
		return rc;
	if (seq < f->meta.next_seq)
		return 0; /* the totals count all of this shard */
	if (seq + 1 > m->next_seq)
		m->next_seq = seq + 1;
	uint64_t lo = 1, hi = end - 1; /* the first at or after the totals is in [lo, hi] */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		rc = read_at(fs, s, sh, mid, &msg);
		if (rc == ENOENT) {
			lo = mid + 1; /* dropped: what is retained is later */
			continue;
		}
		if (rc || (rc = feed_msg_split(f, &msg, &seq, &w, &rec, &len)))
			return rc;
		if (seq >= f->meta.next_seq)
			hi = mid;
		else
			lo = mid + 1;
	}
	for (uint64_t q = lo; q < end; q++) {
		struct dbfs_event ev;
		if ((rc = read_at(fs, s, sh, q, &msg)) == ENOENT)
			continue;
		if (rc || feed_msg_split(f, &msg, &seq, &w, &rec, &len))
			return 0; /* a damaged message: the bytes are an estimate */
		m->bytes += msg.len;
		if (!dbfs_ev_decode(rec, len, &ev) && ev.time_ns > m->last_ns)
			m->last_ns = ev.time_ns;
	}
	return 0;
}

int feed_recount_sharded(struct dbfs *fs, struct dbfs_feed *f)
{
	mfsq_sub *s;
	int rc;
	QCALL(fs, rc, mfsq_subscribe(f->q, NULL, 0, NULL, NULL, &s));
	if (rc)
		return feed_q_errno(rc);
	/* a new ephemeral subscriber is at every shard's end */
	uint64_t *end = calloc(f->nshards, sizeof(*end));
	if (!end)
		rc = ENOMEM;
	for (uint32_t i = 0; !rc && i < f->nshards; i++)
		end[i] = mfsq_sub_position(s, i);
	struct dbfs_feed_meta m = f->meta;
	for (uint32_t i = 0; !rc && i < f->nshards; i++) {
		if (end[i] <= 1)
			continue;
		rc = recount_shard(fs, f, s, i, end[i], &m);
		if (!rc) /* back to its end: the next shard's reads get theirs */
			QCALL(fs, rc, mfsq_seek_seq(s, i, end[i]));
	}
	if (!rc)
		f->meta = m;
	free(end);
	int urc;
	QCALL(fs, urc, (mfsq_unsubscribe(s), 0));
	(void)urc;
	return feed_q_errno(rc);
}

/* ---- a reader's held messages ---- */

int feed_hold(struct dbfs_feed_reader *r, const struct mfsq_msg *m, size_t n)
{
	struct dbfs_feed *f = r->fs->feed;
	/* compact: what was freed stays before ihead until the next hold */
	if (r->ihead && r->spent == r->ihead) {
		memmove(r->held, r->held + r->ihead, (r->nheld - r->ihead) * sizeof(*r->held));
		r->nheld -= r->ihead;
		r->ihead = r->spent = 0;
	}
	if (r->nheld + n > r->capheld) {
		size_t cap = r->capheld ? r->capheld : 64;
		while (cap < r->nheld + n)
			cap *= 2;
		struct feed_held *h = realloc(r->held, cap * sizeof(*h));
		if (!h)
			return ENOMEM;
		r->held = h;
		r->capheld = cap;
	}
	for (size_t i = 0; i < n; i++) {
		struct feed_held h = {.qseq = m[i].seq, .shard = m[i].shard};
		const void *rec;
		if (feed_msg_split(f, &m[i], &h.seq, &h.writer, &rec, &h.len)) {
			h.len = 0; /* damaged: decoding it fails where it is handed */
			rec = NULL;
		}
		/* a NUL after the record: the notifier hands the last name of a
		 * path to libfuse, which sends it with one byte more */
		h.rec = malloc(h.len + 1);
		if (!h.rec)
			return ENOMEM; /* those held so far stay (feed_private.h) */
		if (h.len)
			memcpy(h.rec, rec, h.len);
		h.rec[h.len] = 0;
		/* mostly in order already: insert from the end */
		size_t at = r->nheld;
		while (at > r->ihead && r->held[at - 1].seq > h.seq)
			at--;
		memmove(r->held + at + 1, r->held + at, (r->nheld - at) * sizeof(h));
		r->held[at] = h;
		r->nheld++;
	}
	if (n)
		r->drained = false;
	return 0;
}

void feed_held_release(struct dbfs_feed_reader *r)
{
	for (size_t i = r->spent; i < r->ihead; i++) {
		free(r->held[i].rec);
		r->held[i].rec = NULL;
	}
	r->spent = r->ihead;
}

void feed_held_free(struct dbfs_feed_reader *r)
{
	for (size_t i = r->spent; i < r->nheld; i++)
		free(r->held[i].rec);
	free(r->held);
	free(r->hand_qseq);
	free(r->hand_fseq);
	r->held = NULL;
	r->hand_qseq = r->hand_fseq = NULL;
	r->ihead = r->nheld = r->capheld = r->spent = 0;
}
