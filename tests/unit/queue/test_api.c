/* SPDX-License-Identifier: MIT */
/* The queue API: open, enqueue, subscribers, ack, redelivery, seek, errors. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

static struct tenv T;
static mfsq_queue *Q;

static void setup(void)
{
	struct mfsq_config c;

	tenv_open(&T, 0);
	small_cfg(&c, 4, 8);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &Q), 0);
}

static void teardown(void)
{
	mfsq_close(Q);
	Q = NULL;
	tenv_destroy(&T);
}

START_TEST(open_errors)
{
	mfsq_queue *q;
	struct mfsq_config c;

	ck_assert_int_eq(mfsq_open(T.env, "", NULL, MFSQ_CREATE, &q), EINVAL);
	ck_assert_int_eq(mfsq_open(T.env, "a/b", NULL, MFSQ_CREATE, &q), EINVAL);
	ck_assert_int_eq(mfsq_open(T.env, "nosuch", NULL, 0, &q), ENOENT);
	mfsq_config_default(&c);
	c.nshards = 0;
	ck_assert_int_eq(mfsq_open(T.env, "bad", &c, MFSQ_CREATE, &q), EINVAL);
	/* the stored configuration wins over the one passed */
	mfsq_config_default(&c);
	c.nshards = 9;
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, 0, &q), 0);
	mfsq_get_config(q, &c);
	ck_assert_uint_eq(c.nshards, 4);
	mfsq_close(q);
	ck_assert_uint_eq(mfsq_dbs_needed(NULL), 2 + 4 * (64 + 3));
}
END_TEST

START_TEST(maxdbs_too_small)
{
	struct tenv t;
	MDB_env *env;
	mfsq_queue *q;

	tenv_open(&t, 0);
	tenv_close(&t);
	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, 3), 0);
	ck_assert_int_eq(mdb_env_open(env, t.dir, MDB_NOTLS, 0644), 0);
	ck_assert_int_eq(mfsq_open(env, "q", NULL, MFSQ_CREATE, &q), MDB_DBS_FULL);
	mdb_env_close(env);
	tenv_destroy(&t);
}
END_TEST

/* Too few named databases for new subshards: maintenance fails (counted),
 * enqueues overfill the tail, and subscribers still read everything. */
START_TEST(dbs_full_maintenance)
{
	struct tenv t;
	struct mfsq_config c;
	struct mfsq_stats st;
	struct mfsq_msg out[16];
	MDB_env *env;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n, got = 0;

	tenv_open(&t, 0);
	tenv_close(&t);
	small_cfg(&c, 1, 4);
	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, 5), 0); /* meta, exc, delay, tail, spare */
	ck_assert_int_eq(mdb_env_open(env, t.dir, MDB_NOTLS | MDB_NOSYNC, 0644), 0);
	ck_assert_int_eq(mfsq_open(env, "q", &c, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(put_msg(q, NULL, 1, (uint64_t)i, NULL), 0);
	while (got < 20) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 0), 0);
		for (size_t i = 0; i < n; i++, got++) {
			uint64_t e, k;

			ck_assert_int_eq(parse_msg(&out[i], &e, &k), 0);
			ck_assert_uint_eq(k, got);
		}
	}
	mfsq_stats(q, &st);
	ck_assert_uint_ge(st.maintenance_errors, 1);
	ck_assert_int_eq(st.last_maintenance_error, MDB_DBS_FULL);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	mdb_env_close(env);
	tenv_destroy(&t);
}
END_TEST

START_TEST(enqueuers_per_shard)
{
	for (uint32_t sh = 0; sh < 4; sh++) {
		uint64_t prev = 0;

		for (uint64_t n = 0; n < 5; n++) {
			uint64_t id = mfsq_enqueuer_in_shard(Q, sh, n);

			ck_assert_uint_eq(mfsq_shard_of(Q, id), sh);
			if (n)
				ck_assert_uint_gt(id, prev);
			prev = id;
		}
	}
	ck_assert_uint_eq(mfsq_enqueuer_in_shard(Q, 4, 0), UINT64_MAX);
}
END_TEST

START_TEST(attributes)
{
	mfsq_sub *s;
	struct mfsq_msg m;
	struct mfsq_msg_in in = {.data = "hello", .len = 5, .enqueuer = 42, .prio = 3};
	uint64_t seq, before = 0;
	size_t n;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	in.expire_us = UINT64_MAX - 1;
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, &seq), 0);
	ck_assert_uint_eq(seq, 1);
	get_one(s, &m);
	ck_assert_uint_eq(m.shard, mfsq_shard_of(Q, 42));
	ck_assert_uint_eq(m.seq, 1);
	ck_assert_uint_eq(m.enqueuer, 42);
	ck_assert_uint_eq(m.prio, 3);
	ck_assert_uint_eq(m.expire_us, UINT64_MAX - 1);
	ck_assert_uint_gt(m.enqueue_us, before);
	ck_assert_uint_eq(m.deliver_us, m.enqueue_us);
	ck_assert_uint_eq(m.len, 5);
	ck_assert_mem_eq(m.data, "hello", 5);
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(bad_input)
{
	struct mfsq_msg_in in = {.data = "x", .len = 1, .prio = 10};
	struct mfsq_config c;
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), EINVAL);
	in.prio = 0;
	in.data = NULL;
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), EINVAL);
	mfsq_get_config(Q, &c);
	in.data = "x";
	in.len = (size_t)c.max_payload + 1;
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), EMSGSIZE);
	ck_assert_int_eq(mfsq_subscribe(Q, "x", 0, NULL, NULL, &s), EINVAL);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, MFSQ_SUB_DURABLE, NULL, NULL, &s), EINVAL);
	ck_assert_int_eq(mfsq_subscriber_delete(Q, NULL, "nobody"), ENOENT);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	{
		mfsq_sub *s2;

		ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s2), EBUSY);
		ck_assert_int_eq(mfsq_subscriber_delete(Q, NULL, "d"), EBUSY);
	}
	{
		struct mfsq_msg m = {.shard = 0, .seq = 5};

		ck_assert_int_eq(mfsq_ack(s, NULL, &m), EINVAL); /* never delivered */
		m.shard = 99;
		ck_assert_int_eq(mfsq_ack(s, NULL, &m), EINVAL);
	}
	ck_assert_int_eq(mfsq_seek_seq(s, 99, 1), EINVAL);
	ck_assert_int_eq(mfsq_seek_seq(s, 0, 1000), ERANGE);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscriber_delete(Q, NULL, "d"), 0);
}
END_TEST

START_TEST(large_payload)
{
	size_t len = (size_t)1 << 20;
	unsigned char *p = malloc(len);
	struct mfsq_msg_in in = {.len = len, .enqueuer = 1};
	struct mfsq_msg m;
	mfsq_sub *s;

	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 7 + 3);
	in.data = p;
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), 0);
	for (int i = 0; i < 3; i++) {
		get_one(s, &m);
		ck_assert_uint_eq(m.len, len);
		ck_assert_int_eq(memcmp(m.data, p, len), 0);
	}
	mfsq_unsubscribe(s);
	free(p);
}
END_TEST

START_TEST(caller_txn)
{
	MDB_txn *txn;
	mfsq_sub *s;
	struct mfsq_msg m;
	MDB_dbi mine;
	size_t n;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	/* aborted with the caller's data: no message */
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(put_msg(Q, txn, 7, 1, NULL), 0);
	mdb_txn_abort(txn);
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	/* committed with the caller's own record: both visible */
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "app", MDB_CREATE, &mine), 0);
	{
		MDB_val k = {1, "k"}, v = {1, "v"};

		ck_assert_int_eq(mdb_put(txn, mine, &k, &v, 0), 0);
	}
	for (int i = 0; i < 20; i++) /* crosses subshards (8 per subshard) */
		ck_assert_int_eq(put_msg(Q, txn, 7, (uint64_t)i, NULL), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	mfsq_notify(Q);
	for (int i = 0; i < 20; i++) {
		uint64_t e, k;

		get_one(s, &m);
		ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
		ck_assert_uint_eq(k, (uint64_t)i);
	}
	mfsq_unsubscribe(s);
}
END_TEST

/* One message in a transaction of its own: aborted (commit 0), committed
 * and the queue told (1, mfsq_txn_committed()), committed untold (2);
 * returns its sequence number. */
static uint64_t caller_put(uint64_t n, int commit)
{
	MDB_txn *txn;
	uint64_t seq = 0, id;

	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(put_msg(Q, txn, 7, n, &seq), 0);
	id = mdb_txn_id(txn);
	if (!commit) {
		mdb_txn_abort(txn);
		return seq;
	}
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	if (commit == 1)
		mfsq_txn_committed(Q, id);
	return seq;
}

/* What the queue remembers of a caller's committed transaction (so as not
 * to read its shard record back) is trusted by the very next transaction
 * only: never after an abort, whose id LMDB hands on, nor after any other
 * commit. Sequence numbers stay dense whatever comes between. */
START_TEST(caller_txn_committed)
{
	uint64_t want = 1, seq, kept[16];
	size_t nk = 0, n;
	MDB_txn *txn;
	MDB_dbi mine;
	mfsq_sub *s;
	struct mfsq_msg m;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL,
					&s), 0);
	for (int i = 0; i < 3; i++) { /* told: each next one uses what it remembers */
		ck_assert_uint_eq(caller_put(nk, 1), want++);
		kept[nk++] = want - 1;
	}
	/* aborted: the next transaction gets the same id, not that state */
	ck_assert_uint_eq(caller_put(100, 0), want);
	ck_assert_uint_eq(caller_put(nk, 1), want++);
	kept[nk++] = want - 1;
	/* an own transaction's enqueue in between */
	ck_assert_int_eq(put_msg(Q, NULL, 7, nk, &seq), 0);
	ck_assert_uint_eq(seq, want++);
	kept[nk++] = want - 1;
	ck_assert_uint_eq(caller_put(nk, 1), want++);
	kept[nk++] = want - 1;
	/* aborted, then another table's commit takes its id */
	ck_assert_uint_eq(caller_put(101, 0), want);
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "app", MDB_CREATE, &mine), 0);
	{
		MDB_val k = {1, "k"}, v = {1, "v"};

		ck_assert_int_eq(mdb_put(txn, mine, &k, &v, 0), 0);
	}
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	ck_assert_uint_eq(caller_put(nk, 1), want++);
	kept[nk++] = want - 1;
	/* committed but not told: the next one reads the store */
	ck_assert_uint_eq(caller_put(nk, 2), want++);
	kept[nk++] = want - 1;
	ck_assert_uint_eq(caller_put(nk, 1), want++);
	kept[nk++] = want - 1;
	mfsq_notify(Q);
	for (size_t i = 0; i < nk; i++) {
		uint64_t e, k;

		get_one(s, &m);
		ck_assert_uint_eq(m.seq, kept[i]);
		ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
		ck_assert_uint_eq(k, i);
	}
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(batch)
{
	static int vals[300];
	struct mfsq_msg_in in[300];
	uint64_t seqs[300];
	struct mfsq_msg out[64];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	for (int i = 0; i < 300; i++) {
		vals[i] = i;
		in[i] = (struct mfsq_msg_in){.data = &vals[i], .len = sizeof(int), .enqueuer = 5};
	}
	ck_assert_int_eq(mfsq_enqueue_batch(Q, NULL, in, 300, seqs), 0);
	for (int i = 1; i < 300; i++)
		ck_assert_uint_eq(seqs[i], seqs[i - 1] + 1);
	while (got < 300) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 10000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			ck_assert_uint_eq(out[i].seq, seqs[got]);
			ck_assert_int_eq(*(const int *)out[i].data, (int)got);
		}
	}
	ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
}
END_TEST

/* Many enqueuers over 4 shards: every enqueuer's order holds. */
START_TEST(enqueuer_order)
{
	enum { E = 13, N = 20 };
	uint64_t next[E] = {0};
	struct mfsq_msg out[32];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	for (int k = 0; k < N; k++)
		for (uint64_t e = 0; e < E; e++)
			ck_assert_int_eq(put_msg(Q, NULL, e, (uint64_t)k, NULL), 0);
	while (got < E * N) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 32, &n, 10000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			uint64_t e, k;

			ck_assert_int_eq(parse_msg(&out[i], &e, &k), 0);
			ck_assert_uint_eq(out[i].shard, mfsq_shard_of(Q, e));
			ck_assert_uint_eq(k, next[e]);
			next[e]++;
		}
	}
	mfsq_unsubscribe(s);
}
END_TEST

struct producer {
	mfsq_queue *q;
	int n;
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	for (int i = 0; i < p->n; i++)
		if (put_msg(p->q, NULL, 99, (uint64_t)i, NULL))
			return (void *)1;
	return NULL;
}

START_TEST(blocking)
{
	struct producer p = {Q, 100};
	pthread_t th;
	struct mfsq_msg m;
	mfsq_sub *s;
	size_t n;
	void *ret;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 1), ETIMEDOUT);
	ck_assert_int_eq(pthread_create(&th, NULL, produce, &p), 0);
	for (int i = 0; i < 100; i++) {
		uint64_t e, k;

		get_one(s, &m);
		ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
		ck_assert_uint_eq(k, (uint64_t)i);
	}
	pthread_join(th, &ret);
	ck_assert_ptr_null(ret);
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(durable_redelivery)
{
	struct mfsq_msg m;
	mfsq_sub *s;
	uint64_t e, k;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1, (uint64_t)i, NULL), 0);
	for (int i = 0; i < 4; i++)
		get_one(s, &m);
	ck_assert_int_eq(mfsq_ack(s, NULL, &m), 0); /* 0..3 acked */
	get_one(s, &m);				    /* 4 delivered, not acked */
	mfsq_unsubscribe(s);
	/* a restart of the process */
	mfsq_close(Q);
	tenv_reopen(&T);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 4; i < 10; i++) {
		get_one(s, &m);
		ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
		ck_assert_uint_eq(k, (uint64_t)i);
	}
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	{
		size_t n;

		ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	}
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(ack_in_caller_txn)
{
	struct mfsq_msg m;
	MDB_txn *txn;
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(put_msg(Q, NULL, 1, 0, NULL), 0);
	get_one(s, &m);
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(mfsq_ack(s, txn, &m), 0);
	mdb_txn_abort(txn); /* the ack did not happen */
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	get_one(s, &m);
	ck_assert_uint_eq(m.seq, 1);
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(ephemeral_start)
{
	struct mfsq_msg m;
	mfsq_sub *a, *b;
	size_t n;

	ck_assert_int_eq(put_msg(Q, NULL, 1, 0, NULL), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &a), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &b), 0);
	ck_assert_int_eq(mfsq_dequeue(a, &m, 1, &n, 0), EAGAIN);
	get_one(b, &m);
	ck_assert_uint_eq(m.seq, 1);
	mfsq_unsubscribe(a);
	mfsq_unsubscribe(b);
}
END_TEST

START_TEST(seek)
{
	struct mfsq_msg m;
	mfsq_sub *s;
	uint64_t t_mid = 0, seqs[20];
	uint32_t sh = mfsq_shard_of(Q, 3);

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(put_msg(Q, NULL, 3, (uint64_t)i, &seqs[i]), 0);
		if (i == 9)
			t_mid = 0;
	}
	for (int i = 0; i < 20; i++) {
		get_one(s, &m);
		if (i == 10)
			t_mid = m.deliver_us;
	}
	ck_assert_int_eq(mfsq_seek_seq(s, sh, seqs[5]), 0);
	get_one(s, &m);
	ck_assert_uint_eq(m.seq, seqs[5]);
	ck_assert_int_eq(mfsq_seek_seq(s, sh, seqs[19] + 1), 0); /* the end is fine */
	ck_assert_int_eq(mfsq_seek_seq(s, sh, seqs[19] + 2), ERANGE);
	ck_assert_int_eq(mfsq_seek_time(s, t_mid), 0);
	get_one(s, &m);
	ck_assert_uint_le(m.seq, seqs[10]);
	ck_assert_uint_ge(m.deliver_us, t_mid);
	/* seek persists for a durable subscriber */
	ck_assert_int_eq(mfsq_seek_seq(s, sh, seqs[2]), 0);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	get_one(s, &m);
	ck_assert_uint_eq(m.seq, seqs[2]);
	mfsq_unsubscribe(s);
}
END_TEST

static int only_odd(const struct mfsq_msg *m, void *arg)
{
	uint64_t e, k;

	(void)arg;
	return parse_msg(m, &e, &k) == 0 && (k & 1);
}

START_TEST(rule_filter)
{
	struct mfsq_msg m;
	mfsq_sub *s;
	struct mfsq_stats st;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, only_odd, NULL, &s), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1, (uint64_t)i, NULL), 0);
	for (int i = 1; i < 10; i += 2) {
		uint64_t e, k;

		get_one(s, &m);
		ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
		ck_assert_uint_eq(k, (uint64_t)i);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.filtered, 4);
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(expiry)
{
	struct mfsq_msg_in in = {.data = "old", .len = 3, .enqueuer = 1, .expire_us = 1};
	struct mfsq_msg m;
	mfsq_sub *s;
	uint64_t cur = 0, e, k;
	int reason;
	char buf[16];

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), 0);
	ck_assert_int_eq(put_msg(Q, NULL, 1, 1, NULL), 0);
	get_one(s, &m); /* the expired one is skipped */
	ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
	ck_assert_uint_eq(k, 1);
	ck_assert_int_eq(mfsq_exception_next(Q, &cur, &m, &reason, buf, sizeof(buf)), 0);
	ck_assert_int_eq(reason, MFSQ_REASON_EXPIRED);
	ck_assert_uint_eq(m.len, 3);
	ck_assert_mem_eq(buf, "old", 3);
	ck_assert_int_eq(mfsq_exception_next(Q, &cur, &m, &reason, buf, sizeof(buf)), ENOENT);
	mfsq_unsubscribe(s);
}
END_TEST

/* Subshards are dropped whole once every durable subscriber passed them. */
START_TEST(subshard_drop)
{
	struct mfsq_stats st;
	struct mfsq_msg out[16];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1, (uint64_t)i, NULL), 0);
	ck_assert_int_eq(mfsq_tick(Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.subshards_live, 8 + 3); /* 64 / 8 in one shard, tails */
	while (got < 64) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 10000), 0);
		got += n;
	}
	ck_assert_int_eq(mfsq_tick(Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.subshards_live, 8); /* not acked: kept */
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	ck_assert_int_eq(mfsq_tick(Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.subshards_live, 4); /* one tail per shard */
	ck_assert_uint_ge(st.subshards_dropped, 7);
	/* a passed subshard cannot be sought to */
	ck_assert_int_eq(mfsq_seek_seq(s, mfsq_shard_of(Q, 1), 1), ENOENT);
	mfsq_unsubscribe(s);
}
END_TEST

/* A subscriber beyond the hard limit is marked lagging, not kept forever. */
START_TEST(lagging)
{
	struct mfsq_stats st;
	struct mfsq_msg m;
	mfsq_sub *s, *fast;
	size_t n;
	int rc;

	ck_assert_int_eq(mfsq_subscribe(Q, "slow", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &fast), 0);
	for (int i = 0; i < 8 * 20; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1, (uint64_t)i, NULL), 0);
	ck_assert_int_eq(mfsq_tick(Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_le(st.subshards_live, 16 + 3);
	ck_assert_uint_ge(st.lagging, 1);
	rc = mfsq_dequeue(s, &m, 1, &n, 0);
	ck_assert_int_eq(rc, MFSQ_LAGGED);
	ck_assert(mfsq_sub_lagging(s));
	get_one(s, &m); /* continues at the oldest retained message */
	ck_assert_uint_gt(m.seq, 8);
	mfsq_unsubscribe(s);
	mfsq_unsubscribe(fast);
}
END_TEST

/* A full map: ENOSPC, and the queue keeps everything committed before. */
START_TEST(map_full)
{
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	struct mfsq_msg m;
	struct mfsq_config c;
	char big[4000];
	struct mfsq_msg_in in = {.data = big, .len = sizeof(big), .enqueuer = 1};
	int rc = 0, ok = 0;
	size_t n;

	memset(big, 'x', sizeof(big));
	tenv_open(&t, (size_t)1 << 20);
	small_cfg(&c, 1, 16);
	ck_assert_int_eq(mfsq_open(t.env, "q", &c, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	while (ok < 10000 && (rc = mfsq_enqueue(q, NULL, &in, NULL)) == 0)
		ok++;
	ck_assert_int_eq(rc, ENOSPC);
	ck_assert_int_gt(ok, 10);
	for (int i = 0; i < ok; i++) {
		get_one(s, &m);
		ck_assert_uint_eq(m.seq, (uint64_t)i + 1);
	}
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

struct worker {
	mfsq_queue *q;
	uint64_t id;
	int rc;
};

static void *enqueue_many(void *arg)
{
	struct worker *w = arg;

	for (uint64_t i = 0; i < 40 && !w->rc; i++)
		w->rc = put_msg(w->q, NULL, w->id, i, NULL);
	return NULL;
}

/* Concurrent own-transaction enqueues share commits; order per enqueuer holds. */
START_TEST(group_commit)
{
	enum { W = 8 };
	struct worker w[W];
	pthread_t th[W];
	uint64_t next[W] = {0};
	struct mfsq_msg out[64];
	struct mfsq_stats st;
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < W; i++) {
		w[i] = (struct worker){Q, (uint64_t)i, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, enqueue_many, &w[i]), 0);
	}
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].rc, 0);
	}
	while (got < W * 40) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 10000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			uint64_t e, k;

			ck_assert_int_eq(parse_msg(&out[i], &e, &k), 0);
			ck_assert_uint_eq(k, next[e]++);
		}
		ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.batches, W * 40);
	ck_assert_uint_gt(st.commit_groups, 0);
	ck_assert_uint_eq(st.meta_syncs, 0); /* MDB_NOSYNC: nothing to make durable */
	mfsq_unsubscribe(s);
}
END_TEST

/*
 * MDB_NOMETASYNC: a commit leaves its meta page unsynced, so a group with
 * no group after it must sync it before its callers return; concurrent
 * groups carry each other's meta pages and every call still returns.
 */
START_TEST(group_meta_sync)
{
	enum { W = 8 };
	struct worker w[W];
	pthread_t th[W];
	struct mfsq_msg out[64];
	struct mfsq_stats st;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n, got = 0;

	tenv_open_flags(&t, 0, MDB_NOMETASYNC);
	ck_assert_int_eq(mfsq_open(t.env, "q", NULL, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(put_msg(q, NULL, 1, 0, NULL), 0);
	mfsq_stats(q, &st);
	ck_assert_uint_eq(st.commit_groups, 1);
	ck_assert_uint_eq(st.meta_syncs, 1); /* alone: synced before returning */
	for (int i = 0; i < W; i++) {
		w[i] = (struct worker){q, (uint64_t)i + 2, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, enqueue_many, &w[i]), 0);
	}
	while (got < W * 40 + 1) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 10000), 0);
		got += n;
		ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].rc, 0);
	}
	mfsq_stats(q, &st);
	ck_assert_uint_ge(st.meta_syncs, 2);
	ck_assert_uint_le(st.meta_syncs, st.commit_groups);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

struct big_worker {
	mfsq_queue *q;
	uint64_t id;
	int rc;
};

/* 20 batches of BIG_BATCH messages of 4 KiB, (id, n) in the first 16
 * bytes: 160 KiB a batch, so every group commit writes large values. */
enum { BIG_BATCH = 40 };

static void *enqueue_big(void *arg)
{
	struct big_worker *w = arg;
	unsigned char(*buf)[4096] = malloc(BIG_BATCH * sizeof(*buf));
	struct mfsq_msg_in in[BIG_BATCH];

	if (!buf) {
		w->rc = ENOMEM;
		return NULL;
	}

	for (uint64_t b = 0; b < 20 && !w->rc; b++) {
		for (int i = 0; i < BIG_BATCH; i++) {
			uint64_t k = b * BIG_BATCH + (uint64_t)i;

			memcpy(buf[i], &w->id, 8);
			memcpy(buf[i] + 8, &k, 8);
			in[i] =
			    (struct mfsq_msg_in){.data = buf[i], .len = 4096, .enqueuer = w->id};
		}
		w->rc = mfsq_enqueue_batch(w->q, NULL, in, BIG_BATCH, NULL);
	}
	free(buf);
	return NULL;
}

/*
 * Groups of large values: the flusher thread leads the queued callers'
 * turns (groupcommit.c: hand_over), in relaxed and in deferred-meta environments;
 * every call returns, nothing is lost or reordered per enqueuer, and with
 * MDB_NOMETASYNC the last group is still synced.
 */
static void group_large(unsigned envflags)
{
	enum { W = 6 };
	struct big_worker w[W];
	pthread_t th[W];
	uint64_t next[W] = {0};
	struct mfsq_msg out[64];
	struct mfsq_stats st;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n, got = 0;

	tenv_open_flags(&t, 64u << 20, envflags);
	ck_assert_int_eq(mfsq_open(t.env, "q", NULL, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < W; i++) {
		w[i] = (struct big_worker){q, (uint64_t)i, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, enqueue_big, &w[i]), 0);
	}
	while (got < W * 20 * BIG_BATCH) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 10000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			uint64_t e, k;

			ck_assert_uint_eq(out[i].len, 4096);
			memcpy(&e, out[i].data, 8);
			memcpy(&k, (const char *)out[i].data + 8, 8);
			ck_assert_uint_lt(e, W);
			ck_assert_uint_eq(k, next[e]++);
		}
		ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].rc, 0);
	}
	mfsq_stats(q, &st);
	ck_assert_uint_eq(st.batches, W * 20);
	/* six callers for one writer: some wait while a group commits */
	ck_assert_uint_gt(st.committer_turns, 0);
	if (envflags & MDB_NOMETASYNC)
		ck_assert_uint_ge(st.meta_syncs, 1);
	else
		ck_assert_uint_eq(st.meta_syncs, 0);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}

START_TEST(group_large_relaxed)
{
	group_large(MDB_NOSYNC);
}
END_TEST

START_TEST(group_large_meta_sync)
{
	group_large(MDB_NOMETASYNC);
}
END_TEST

/*
 * The merge: earliest delivery time first, ties to the lower shard, a shard
 * that runs out in the middle of a read leaves the others going.
 */
START_TEST(merge_ties_and_ends)
{
	static const char *want[] = {"b_early", "a0", "a1", "a2", "b0", "a_late"};
	struct mfsq_config c;
	struct mfsq_msg out[16];
	struct timespec ts;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	uint64_t ea = 0, eb = 0, due;
	size_t n, got = 0;

	tenv_open(&t, 0);
	small_cfg(&c, 4, 64);
	ck_assert_int_eq(mfsq_open(t.env, "q", &c, MFSQ_CREATE, &q), 0);
	while (mfsq_shard_of(q, ea) != 0) /* the lowest shard, and one above it */
		ea++;
	while (mfsq_shard_of(q, eb) == 0)
		eb++;
	ck_assert_int_eq(mfsq_subscribe(q, NULL, 0, NULL, NULL, &s), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	due = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u + 200000u;
	{
		struct mfsq_msg_in in[] = {
		    {.data = "b_early", .len = 7, .enqueuer = eb},
		    {.data = "a0", .len = 2, .enqueuer = ea, .deliver_us = due},
		    {.data = "a1", .len = 2, .enqueuer = ea, .deliver_us = due},
		    {.data = "b0", .len = 2, .enqueuer = eb, .deliver_us = due},
		    {.data = "a2", .len = 2, .enqueuer = ea, .deliver_us = due},
		};
		struct mfsq_msg_in late = {.data = "a_late", .len = 6, .enqueuer = ea};

		ck_assert_int_eq(mfsq_enqueue_batch(q, NULL, in, 5, NULL), 0);
		usleep(300000); /* all due, then one more after them */
		ck_assert_int_eq(mfsq_enqueue(q, NULL, &late, NULL), 0);
	}
	while (got < 6) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 5000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			ck_assert_uint_lt(got, 6);
			ck_assert_uint_eq(out[i].len, strlen(want[got]));
			ck_assert_int_eq(memcmp(out[i].data, want[got], out[i].len), 0);
			if (got >= 1 && got <= 4)
				ck_assert_uint_eq(out[i].deliver_us, due);
		}
	}
	ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

/* Memory-only messages: delivered here, never stored, merged in time order. */
START_TEST(buffered)
{
	struct mfsq_msg_in in = {
	    .data = "mem", .len = 3, .enqueuer = 2, .flags = MFSQ_MSG_BUFFERED};
	struct mfsq_msg out[8];
	struct mfsq_stats st;
	mfsq_sub *s, *late;
	uint64_t seq = 0;
	size_t n;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	in.deliver_us = 1;
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), EINVAL);
	in.deliver_us = 0;
	ck_assert_int_eq(put_msg(Q, NULL, 2, 0, NULL), 0);
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, &seq), 0);
	ck_assert_uint_eq(seq, 1);
	ck_assert_int_eq(put_msg(Q, NULL, 2, 1, NULL), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &late), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 8, &n, 10000), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert(!(out[0].flags & MFSQ_MSG_BUFFERED));
	ck_assert(out[1].flags & MFSQ_MSG_BUFFERED);
	ck_assert_mem_eq(out[1].data, "mem", 3);
	ck_assert(!(out[2].flags & MFSQ_MSG_BUFFERED));
	ck_assert_int_eq(mfsq_ack(s, NULL, &out[1]), 0);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	/* a subscriber opened later does not get it */
	ck_assert_int_eq(mfsq_dequeue(late, out, 8, &n, 0), EAGAIN);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.buffered_enqueued, 1);
	/* not in the store: a restart does not bring it back */
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), 0);
	mfsq_unsubscribe(s);
	mfsq_unsubscribe(late);
	mfsq_close(Q);
	tenv_reopen(&T);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 8, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
}
END_TEST

/* Under memory pressure a memory-only message spills to the store. */
START_TEST(buffered_spill)
{
	struct mfsq_msg_in in = {
	    .data = "mem", .len = 3, .enqueuer = 2, .flags = MFSQ_MSG_BUFFERED};
	struct mfsq_stats st;
	struct mfsq_msg m;
	mfsq_sub *s;
	uint64_t seq = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	mfsq_pressure_mode(MFSQ_PRESSURE_ON);
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, &seq), 0);
	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.buffered_spilled, 1);
	mfsq_unsubscribe(s);
	mfsq_close(Q);
	tenv_reopen(&T);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	get_one(s, &m);
	ck_assert_uint_eq(m.seq, seq);
	ck_assert(!(m.flags & MFSQ_MSG_BUFFERED));
	ck_assert_mem_eq(m.data, "mem", 3);
	mfsq_unsubscribe(s);
}
END_TEST

Suite *suite_api(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("api");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, open_errors);
	tcase_add_test(tc, maxdbs_too_small);
	tcase_add_test(tc, dbs_full_maintenance);
	tcase_add_test(tc, enqueuers_per_shard);
	tcase_add_test(tc, attributes);
	tcase_add_test(tc, bad_input);
	tcase_add_test(tc, large_payload);
	tcase_add_test(tc, caller_txn);
	tcase_add_test(tc, caller_txn_committed);
	tcase_add_test(tc, batch);
	tcase_add_test(tc, enqueuer_order);
	tcase_add_test(tc, blocking);
	tcase_add_test(tc, durable_redelivery);
	tcase_add_test(tc, ack_in_caller_txn);
	tcase_add_test(tc, ephemeral_start);
	tcase_add_test(tc, seek);
	tcase_add_test(tc, rule_filter);
	tcase_add_test(tc, expiry);
	tcase_add_test(tc, subshard_drop);
	tcase_add_test(tc, lagging);
	tcase_add_test(tc, map_full);
	tcase_add_test(tc, buffered);
	tcase_add_test(tc, group_commit);
	tcase_add_test(tc, group_meta_sync);
	tcase_add_test(tc, group_large_relaxed);
	tcase_add_test(tc, group_large_meta_sync);
	tcase_add_test(tc, merge_ties_and_ends);
	tcase_add_test(tc, buffered_spill);
	suite_add_tcase(s, tc);
	return s;
}
