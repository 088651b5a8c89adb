/* SPDX-License-Identifier: MIT */
/*
 * A damaged store: records the queue wrote, changed behind its back (as a
 * bad disk or a bug elsewhere would), must be refused with the documented
 * error (mfsq.h "Errors"), never read past, divided by or looped over.
 * The fuzz target "queue" (tests/fuzz) finds such damage; these pin down
 * what each refusal is.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "helpers.h"
#include "internal.h"

static struct tenv T;

/* A synced environment: own enqueues go to the store, not to a log. */
static void setup(void)
{
	tenv_open_flags(&T, 0, 0);
}

static void teardown(void)
{
	tenv_destroy(&T);
}

static mfsq_queue *make_queue(uint32_t nshards, uint32_t subshard_msgs)
{
	struct mfsq_config c;
	mfsq_queue *q;

	small_cfg(&c, nshards, subshard_msgs);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &q), 0);
	return q;
}

/* Cut every value of the databases named @prefix... to @len bytes (the queue
 * is closed: nothing of it is cached). */
static void cut_values(const char *prefix, size_t len)
{
	MDB_txn *txn;
	MDB_dbi main_db, db;
	MDB_cursor *c, *cd;
	MDB_val k, v;
	char name[128];
	int n = 0;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, &main_db), 0);
	ck_assert_int_eq(mdb_cursor_open(txn, main_db, &c), 0);
	for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); !r;
	     r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size >= sizeof(name) || k.mv_size < strlen(prefix) ||
		    memcmp(k.mv_data, prefix, strlen(prefix)))
			continue;
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		ck_assert_int_eq(mdb_dbi_open(txn, name, 0, &db), 0);
		ck_assert_int_eq(mdb_cursor_open(txn, db, &cd), 0);
		for (int r2 = mdb_cursor_get(cd, &k, &v, MDB_FIRST); !r2;
		     r2 = mdb_cursor_get(cd, &k, &v, MDB_NEXT)) {
			unsigned char buf[64] = {0};
			MDB_val nv = {v.mv_size < len ? v.mv_size : len, buf};

			memcpy(buf, v.mv_data, nv.mv_size < sizeof(buf) ? nv.mv_size : sizeof(buf));
			ck_assert_int_eq(mdb_cursor_put(cd, &k, &nv, MDB_CURRENT), 0);
			n++;
		}
		mdb_cursor_close(cd);
	}
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	ck_assert_int_gt(n, 0);
}

/* The decoder every reader of message records goes through. */
START_TEST(msg_decode)
{
	unsigned char rec[8 + sizeof(struct mfsq_disk_msg) + 3] = {0};
	struct mfsq_disk_msg h = {.enq_us = 5, .prio = MFSQ_PRIO_MAX, .flags = MFSQ_MSG_DELAYED};
	const unsigned char *data;
	size_t len;
	uint64_t id;

	memcpy(rec + 8, &h, sizeof(h));
	memcpy(rec + 8 + sizeof(h), "abc", 3);
	MDB_val v = {sizeof(rec), rec};
	ck_assert_int_eq(mfsq_msg_decode(&v, 8, &h, &data, &len), 0);
	ck_assert_uint_eq(h.enq_us, 5);
	ck_assert_uint_eq(len, 3);
	ck_assert_ptr_eq(data, rec + 8 + sizeof(h));
	/* the header alone: an empty payload */
	v.mv_size = 8 + sizeof(h);
	ck_assert_int_eq(mfsq_msg_decode(&v, 8, &h, &data, &len), 0);
	ck_assert_uint_eq(len, 0);
	/* shorter than the header: the length would wrap */
	for (size_t n = 0; n < 8 + sizeof(h); n++) {
		v.mv_size = n;
		ck_assert_int_eq(mfsq_msg_decode(&v, 8, &h, &data, &len), EBADMSG);
	}
	v.mv_size = sizeof(rec);
	rec[8 + offsetof(struct mfsq_disk_msg, prio)] = MFSQ_PRIO_MAX + 1;
	ck_assert_int_eq(mfsq_msg_decode(&v, 8, &h, NULL, NULL), EBADMSG);
	rec[8 + offsetof(struct mfsq_disk_msg, prio)] = 0;
	rec[8 + offsetof(struct mfsq_disk_msg, flags)] = MFSQ_MSG_BUFFERED;
	ck_assert_int_eq(mfsq_msg_decode(&v, 8, &h, NULL, NULL), EBADMSG);

	MDB_val iv = {8, rec};
	ck_assert_int_eq(mfsq_index_id(&iv, &id), 0);
	iv.mv_size = 7;
	ck_assert_int_eq(mfsq_index_id(&iv, &id), EBADMSG);
	iv.mv_size = 9;
	ck_assert_int_eq(mfsq_index_id(&iv, &id), EBADMSG);
}
END_TEST

/* Q1: stream records cut short are refused by the dequeue, the seek by
 * time and the cache's fill alike, with EBADMSG. */
START_TEST(short_stream_record)
{
	mfsq_queue *q = make_queue(1, 4);
	struct mfsq_msg out[4];
	mfsq_sub *s;
	size_t n;

	for (uint64_t i = 0; i < 6; i++)
		ck_assert_int_eq(put_msg(q, NULL, 1, i, NULL), 0);
	mfsq_close(q);
	cut_values("q/s/", 10);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 0), EBADMSG);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 0), EBADMSG); /* still there */
	ck_assert_int_eq(mfsq_seek_time(s, 0), EBADMSG);
	mfsq_unsubscribe(s);
	mfsq_close(q);
}
END_TEST

/* Q1: a damaged exception is refused and stepped over. */
START_TEST(short_exception_record)
{
	mfsq_queue *q = make_queue(1, 4);
	struct mfsq_msg_in in = {.data = "old", .len = 3, .enqueuer = 1, .expire_us = 1};
	struct mfsq_msg m;
	mfsq_sub *s;
	uint64_t cur = 0;
	int reason;
	char buf[16];

	ck_assert_int_eq(mfsq_subscribe(q, NULL, 0, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_enqueue(q, NULL, &in, NULL), 0);
	ck_assert_int_eq(put_msg(q, NULL, 1, 1, NULL), 0);
	get_one(s, &m); /* moves the expired one to the exception queue */
	mfsq_unsubscribe(s);
	mfsq_close(q);
	cut_values("q/x", 12);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_exception_next(q, &cur, &m, &reason, buf, sizeof(buf)), EBADMSG);
	ck_assert_uint_eq(cur, 1);
	ck_assert_int_eq(mfsq_exception_next(q, &cur, &m, &reason, buf, sizeof(buf)), ENOENT);
	mfsq_close(q);
}
END_TEST

/* Q1: a damaged delayed message stops its promotion with EBADMSG. */
START_TEST(short_delay_record)
{
	mfsq_queue *q = make_queue(1, 4);
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	struct mfsq_msg_in in = {.data = "d", .len = 1, .enqueuer = 1, .deliver_us = now + 20000};
	ck_assert_int_eq(mfsq_enqueue(q, NULL, &in, NULL), 0);
	mfsq_close(q);
	cut_values("q/d/", 30);
	usleep(40000);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_tick(q), EBADMSG);
	mfsq_close(q);
}
END_TEST

/* Q1: a subshard index row whose id is not 8 bytes. */
START_TEST(short_index_row)
{
	mfsq_queue *q = make_queue(1, 4);
	struct mfsq_msg out[4];
	mfsq_sub *s;
	size_t n;
	MDB_txn *txn;
	MDB_dbi meta;
	MDB_cursor *c;
	MDB_val k, v;
	int cut = 0;

	for (uint64_t i = 0; i < 3; i++)
		ck_assert_int_eq(put_msg(q, NULL, 1, i, NULL), 0);
	mfsq_close(q);
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	ck_assert_int_eq(mdb_cursor_open(txn, meta, &c), 0);
	for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); !r;
	     r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size == 13 && ((char *)k.mv_data)[0] == 'B') {
			MDB_val nv = {3, "abc"};
			ck_assert_int_eq(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
			cut++;
		}
	}
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	ck_assert_int_gt(cut, 0);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 0), EBADMSG);
	mfsq_unsubscribe(s);
	mfsq_close(q);
}
END_TEST

/* Q2: a subscriber whose first message has an empty payload (no damage:
 * the dequeue's buffer was still NULL; UBSan in the sanitized build). */
START_TEST(empty_first_payload)
{
	mfsq_queue *q = make_queue(1, 4);
	struct mfsq_msg_in in[] = {{.len = 0, .enqueuer = 1}, {.data = "x", .len = 1, .enqueuer = 1}};
	struct mfsq_msg out[4];
	mfsq_sub *s;
	size_t n;

	ck_assert_int_eq(mfsq_enqueue_batch(q, NULL, in, 2, NULL), 0);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 1, &n, 0), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(out[0].len, 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 0), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_mem_eq(out[0].data, "x", 1);
	mfsq_unsubscribe(s);
	mfsq_close(q);
}
END_TEST

/* Write the stored configuration record of queue "q" through @edit. */
static void edit_config(void (*edit)(struct mfsq_disk_config *dc))
{
	MDB_txn *txn;
	MDB_dbi meta;
	MDB_val k = {1, "C"}, v;
	struct mfsq_disk_config dc;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	ck_assert_int_eq(mdb_get(txn, meta, &k, &v), 0);
	ck_assert_uint_eq(v.mv_size, sizeof(dc));
	memcpy(&dc, v.mv_data, sizeof(dc));
	edit(&dc);
	v.mv_data = &dc;
	ck_assert_int_eq(mdb_put(txn, meta, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
}

static void nshards_zero(struct mfsq_disk_config *dc) { dc->nshards = 0; }
static void nshards_huge(struct mfsq_disk_config *dc) { dc->nshards = 1u << 28; }
static void nshards_1025(struct mfsq_disk_config *dc) { dc->nshards = 1025; }
static void bucket_zero(struct mfsq_disk_config *dc) { dc->bucket_us = 0; }
static void subshard_zero(struct mfsq_disk_config *dc) { dc->subshard_msgs = 0; }
static void retain_one(struct mfsq_disk_config *dc) { dc->retain_max = 1; }
/* another version's fields mean other things: refused as that, first */
static void version_huge(struct mfsq_disk_config *dc)
{
	dc->version = MFSQ_FORMAT_VERSION + 1;
	dc->nshards = 1u << 28;
}

/* Q3: the stored configuration is checked at open, version first, then the
 * ranges of a new queue's; nothing is allocated for a damaged one. */
START_TEST(stored_config)
{
	static const struct {
		void (*edit)(struct mfsq_disk_config *dc);
		int rc;
	} cases[] = {
	    {nshards_zero, EBADMSG}, {nshards_huge, EBADMSG},	{nshards_1025, EBADMSG},
	    {bucket_zero, EBADMSG},  {subshard_zero, EBADMSG}, {retain_one, EBADMSG},
	    {version_huge, MDB_VERSION_MISMATCH},
	};
	mfsq_queue *q = make_queue(2, 4);
	struct mfsq_config c;

	ck_assert_int_eq(put_msg(q, NULL, 1, 1, NULL), 0);
	mfsq_close(q);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		MDB_txn *txn;
		MDB_dbi meta;
		MDB_val k = {1, "C"}, v;
		unsigned char saved[sizeof(struct mfsq_disk_config)];

		ck_assert_int_eq(mdb_txn_begin(T.env, NULL, MDB_RDONLY, &txn), 0);
		ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
		ck_assert_int_eq(mdb_get(txn, meta, &k, &v), 0);
		memcpy(saved, v.mv_data, sizeof(saved));
		mdb_txn_abort(txn);
		edit_config(cases[i].edit);
		ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), cases[i].rc);
		ck_assert_ptr_null(q);
		/* put it back */
		ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
		v.mv_size = sizeof(saved);
		v.mv_data = saved;
		ck_assert_int_eq(mdb_put(txn, meta, &k, &v, 0), 0);
		ck_assert_int_eq(mdb_txn_commit(txn), 0);
	}
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	mfsq_get_config(q, &c);
	ck_assert_uint_eq(c.nshards, 2);
	mfsq_close(q);
}
END_TEST

/* Index rows of shard 0 of queue "q": its live subshards. */
static unsigned count_index(void)
{
	MDB_txn *txn;
	MDB_dbi meta;
	MDB_cursor *c;
	MDB_val k, v;
	unsigned n = 0;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	ck_assert_int_eq(mdb_cursor_open(txn, meta, &c), 0);
	for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); !r;
	     r = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		n += k.mv_size == 13 && ((char *)k.mv_data)[0] == 'B';
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return n;
}

static void retain_four(struct mfsq_disk_config *dc) { dc->retain_max = 4; }

/* Q4: retention's hard limit works from the subshards that are there, not
 * from the shard state's stored count (a damaged one was 2^64 lookups in
 * a write transaction); the limit still holds. */
START_TEST(shard_nlive_huge)
{
	mfsq_queue *q = make_queue(1, 2); /* retain_max 16 */
	MDB_txn *txn;
	MDB_dbi meta;
	unsigned char k[5] = {'S', 0, 0, 0, 0};
	MDB_val key = {sizeof(k), k}, v;
	struct mfsq_disk_shard st;
	struct timespec t0, t1;
	mfsq_sub *sub;

	/* a durable subscriber at the start holds every subshard */
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &sub), 0);
	mfsq_unsubscribe(sub);
	for (uint64_t i = 0; i < 24; i++)
		ck_assert_int_eq(put_msg(q, NULL, 1, i, NULL), 0);
	mfsq_close(q);
	ck_assert_uint_ge(count_index(), 12);
	/* the limit lowered (a valid value) and the count damaged */
	edit_config(retain_four);
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	ck_assert_int_eq(mdb_get(txn, meta, &key, &v), 0);
	ck_assert_uint_eq(v.mv_size, sizeof(st));
	memcpy(&st, v.mv_data, sizeof(st));
	st.nlive = 0xff00000000000001ull;
	v.mv_data = &st;
	ck_assert_int_eq(mdb_put(txn, meta, &key, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);

	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(mfsq_tick(q), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 5);
	ck_assert_uint_le(count_index(), 4);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &sub), 0);
	ck_assert(mfsq_sub_lagging(sub));
	mfsq_unsubscribe(sub);
	mfsq_close(q);
}
END_TEST

/* Replace (@len > 0) or delete (@len 0) the value of @key in queue "q"'s
 * meta database, keeping a copy in @saved (its size in *@savedlen). */
static void meta_set(const void *key, size_t klen, const void *val, size_t len,
		     unsigned char *saved, size_t *savedlen)
{
	MDB_txn *txn;
	MDB_dbi meta;
	MDB_val k = {klen, (void *)key}, v;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	if (saved) {
		ck_assert_int_eq(mdb_get(txn, meta, &k, &v), 0);
		ck_assert_uint_le(v.mv_size, 4096);
		memcpy(saved, v.mv_data, v.mv_size);
		*savedlen = v.mv_size;
	}
	v.mv_size = len;
	v.mv_data = (void *)val;
	ck_assert_int_eq(mdb_put(txn, meta, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
}

/* Fixed-size meta records of the wrong size (a shard's state, a durable
 * subscriber's positions) and a stored rule longer than MFSQ_RULE_MAX are
 * damaged records like any other: EBADMSG (mfsq.h "Errors"), not LMDB's
 * MDB_CORRUPTED; once put back, all is well. */
START_TEST(wrong_size_meta)
{
	mfsq_queue *q = make_queue(2, 4);
	unsigned char saved[4096], big[4096];
	unsigned char sk[5] = {'S', 0, 0, 0, 1};
	unsigned char uk[2] = {'U', 'd'}, rk[2] = {'R', 'd'};
	size_t slen, ulen;
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe_rule(q, "d", MFSQ_SUB_DURABLE, "priority >= 0", NULL, 0,
					     &s), 0);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(put_msg(q, NULL, 1, 1, NULL), 0);
	mfsq_close(q);

	/* the state of shard 1, one byte short, then one byte long */
	meta_set(sk, sizeof(sk), "x", 1, saved, &slen);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), EBADMSG);
	ck_assert_ptr_null(q);
	memcpy(big, saved, slen);
	meta_set(sk, sizeof(sk), big, slen + 1, NULL, NULL);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), EBADMSG);
	meta_set(sk, sizeof(sk), saved, slen, NULL, NULL);

	/* the durable subscriber's record */
	meta_set(uk, sizeof(uk), "short", 5, saved, &ulen);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), EBADMSG);
	mfsq_close(q);
	meta_set(uk, sizeof(uk), saved, ulen, NULL, NULL);

	/* its rule, longer than any rule may be */
	memset(big, ' ', sizeof(big));
	ck_assert_uint_gt(sizeof(big), MFSQ_RULE_MAX);
	meta_set(rk, sizeof(rk), big, MFSQ_RULE_MAX + 1, saved, &slen);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), EBADMSG);
	mfsq_close(q);
	meta_set(rk, sizeof(rk), saved, slen, NULL, NULL);

	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	mfsq_unsubscribe(s);
	mfsq_close(q);
}
END_TEST

/* A message missing from the subshard whose range holds it: EBADMSG. */
START_TEST(missing_message)
{
	mfsq_queue *q = make_queue(1, 8);
	struct mfsq_msg out[4];
	MDB_txn *txn;
	MDB_dbi main_db, db;
	MDB_cursor *c;
	MDB_val k, v;
	char name[128] = "";
	mfsq_sub *s;
	size_t n;

	for (uint64_t i = 0; i < 3; i++)
		ck_assert_int_eq(put_msg(q, NULL, 1, i, NULL), 0);
	mfsq_close(q);
	/* the first message of the first subshard of shard 0 */
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, &main_db), 0);
	ck_assert_int_eq(mdb_cursor_open(txn, main_db, &c), 0);
	for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); !r && !name[0];
	     r = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size < sizeof(name) && k.mv_size > 4 && !memcmp(k.mv_data, "q/s/", 4))
			memcpy(name, k.mv_data, k.mv_size);
	mdb_cursor_close(c);
	ck_assert(name[0]);
	ck_assert_int_eq(mdb_dbi_open(txn, name, 0, &db), 0);
	ck_assert_int_eq(mdb_cursor_open(txn, db, &c), 0);
	ck_assert_int_eq(mdb_cursor_get(c, &k, &v, MDB_FIRST), 0);
	ck_assert_int_eq(mdb_cursor_del(c, 0), 0);
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);

	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 0), EBADMSG);
	mfsq_unsubscribe(s);
	mfsq_close(q);
}
END_TEST

/* The stored record of shard 0 ('S'). */
static struct mfsq_disk_shard shard_record(void)
{
	unsigned char k[5] = {'S', 0, 0, 0, 0};
	MDB_val key = {sizeof(k), k}, v;
	struct mfsq_disk_shard st;
	MDB_txn *txn;
	MDB_dbi meta;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	ck_assert_int_eq(mdb_get(txn, meta, &key, &v), 0);
	ck_assert_uint_eq(v.mv_size, sizeof(st));
	memcpy(&st, v.mv_data, sizeof(st));
	mdb_txn_abort(txn);
	return st;
}

static uint64_t check_problems(void)
{
	uint64_t problems = 99;
	MDB_txn *txn;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mfsq_check(txn, "q", NULL, NULL, &problems), 0);
	mdb_txn_abort(txn);
	return problems;
}

/* A shard record left behind its tail by enqueues that only append
 * (shardstate.c) is no damage: it lags by less than MFSQ_STATE_LAG, a
 * reopen numbers on from the tail (no seq reused), mfsq_check finds
 * nothing, and a subscriber from the start gets every message in order. */
START_TEST(record_behind_tail)
{
	mfsq_queue *q = make_queue(1, 100000);
	struct mfsq_msg out[64];
	uint64_t seq = 0, lagged = 0, got = 0, en, num;
	MDB_txn *txn;
	mfsq_sub *s;
	size_t n;

	ck_assert_int_eq(mdb_env_set_flags(T.env, MDB_NOSYNC, 1), 0); /* 768 commits */
	for (uint64_t i = 0; i < 3 * MFSQ_STATE_LAG; i++) {
		ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
		ck_assert_int_eq(put_msg(q, txn, 1, i, &seq), 0);
		uint64_t id = mdb_txn_id(txn);
		ck_assert_int_eq(mdb_txn_commit(txn), 0);
		if (i % 2)
			mfsq_txn_committed(q, id); /* the record from memory, half the time */
		struct mfsq_disk_shard st = shard_record();
		ck_assert_uint_eq(seq, i + 1);
		ck_assert_uint_le(st.next_seq, seq + 1);
		ck_assert_uint_lt(seq + 1 - st.next_seq, MFSQ_STATE_LAG);
		lagged += st.next_seq < seq + 1;
	}
	ck_assert_int_eq(mdb_env_set_flags(T.env, MDB_NOSYNC, 0), 0);
	ck_assert_uint_gt(lagged, 2 * MFSQ_STATE_LAG); /* it did lag */
	ck_assert_uint_eq(check_problems(), 0);
	mfsq_close(q);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(put_msg(q, NULL, 1, seq, &seq), 0);
	ck_assert_uint_eq(seq, 3 * MFSQ_STATE_LAG + 1);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	while (got < seq) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 1000), 0);
		ck_assert_uint_gt(n, 0);
		for (size_t i = 0; i < n; i++, got++) {
			ck_assert_uint_eq(out[i].seq, got + 1);
			ck_assert_int_eq(parse_msg(&out[i], &en, &num), 0);
			ck_assert_uint_eq(num, got);
		}
	}
	mfsq_unsubscribe(s);
	mfsq_close(q);
	ck_assert_uint_eq(check_problems(), 0);
}
END_TEST

static void version_one(struct mfsq_disk_config *dc) { dc->version = 1; }

/* A version 1 queue (records always exact) opens, numbers on, and is
 * marked version 2 so that version 1 builds refuse it from then on. */
START_TEST(version_one_upgraded)
{
	mfsq_queue *q = make_queue(1, 8);
	uint64_t seq;

	for (uint64_t i = 0; i < 3; i++)
		ck_assert_int_eq(put_msg(q, NULL, 1, i, NULL), 0);
	mfsq_close(q);
	edit_config(version_one);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &q), 0);
	ck_assert_int_eq(put_msg(q, NULL, 1, 3, &seq), 0);
	ck_assert_uint_eq(seq, 4);
	mfsq_close(q);

	MDB_txn *txn;
	MDB_dbi meta;
	MDB_val k = {1, "C"}, v;
	struct mfsq_disk_config dc;
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "q/m", 0, &meta), 0);
	ck_assert_int_eq(mdb_get(txn, meta, &k, &v), 0);
	memcpy(&dc, v.mv_data, sizeof(dc));
	mdb_txn_abort(txn);
	ck_assert_uint_eq(dc.version, MFSQ_FORMAT_VERSION);
	ck_assert_uint_eq(check_problems(), 0);
}
END_TEST

Suite *suite_damage(void)
{
	Suite *s = suite_create("damage");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, msg_decode);
	tcase_add_test(tc, short_stream_record);
	tcase_add_test(tc, short_exception_record);
	tcase_add_test(tc, short_delay_record);
	tcase_add_test(tc, short_index_row);
	tcase_add_test(tc, empty_first_payload);
	tcase_add_test(tc, stored_config);
	tcase_add_test(tc, shard_nlive_huge);
	tcase_add_test(tc, wrong_size_meta);
	tcase_add_test(tc, missing_message);
	tcase_add_test(tc, record_behind_tail);
	tcase_add_test(tc, version_one_upgraded);
	suite_add_tcase(s, tc);
	return s;
}
