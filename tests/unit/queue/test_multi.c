/* SPDX-License-Identifier: MIT */
/* Two processes on one environment: each enqueues into its own shards and
 * each sees the other's messages, in order, through its subscriber; also
 * with MFSQ_LAZY_SHARDS, where a shard no process used has no databases. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define N 400
#define E 4

static struct tenv T;

static MDB_env *open_env(const char *dir)
{
	MDB_env *env;

	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4 * mfsq_dbs_needed(NULL) + 64) ||
	    mdb_env_set_mapsize(env, (size_t)256 << 20) ||
	    mdb_env_open(env, dir, MDB_NOTLS | MDB_NOSYNC, 0644))
		return NULL;
	return env;
}

/* Enqueuer j (0..E-1) of side 0 or 1: each side has shards of its own
 * (side 0: shards 0 and 1, side 1: shards 2 and 3). */
static uint64_t enqueuer(mfsq_queue *q, int side, uint64_t j)
{
	return mfsq_enqueuer_in_shard(q, (uint32_t)(2 * side) + (uint32_t)(j % 2), j / 2);
}

/* Enqueue N messages for the side's E enqueuers, every 7th inside a
 * transaction of our own making (retried on EAGAIN as documented). */
static int produce(MDB_env *env, mfsq_queue *q, int side)
{
	for (uint64_t i = 0; i < N; i++) {
		uint64_t e = enqueuer(q, side, i % E), k = i / E;
		int rc;

		if (i % 7 == 0) {
			MDB_txn *txn;

			do {
				if (mdb_txn_begin(env, NULL, 0, &txn))
					return -1;
				rc = put_msg(q, txn, e, k, NULL);
				if (rc)
					mdb_txn_abort(txn);
				else
					rc = mdb_txn_commit(txn);
			} while (rc == EAGAIN);
			mfsq_notify(q);
		} else {
			rc = put_msg(q, NULL, e, k, NULL);
		}
		if (rc)
			return -1;
	}
	return 0;
}

/* Receive the other side's N messages, in order per enqueuer, from its shards. */
static int consume(mfsq_queue *q, mfsq_sub *s, int other)
{
	uint64_t next[E] = {0}, got = 0;
	struct mfsq_msg out[32];
	size_t n;

	while (got < N) {
		int rc = mfsq_dequeue(s, out, 32, &n, 20000);

		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++) {
			uint64_t e, k, j;

			if (parse_msg(&out[i], &e, &k))
				return -2;
			for (j = 0; j < E && enqueuer(q, other, j) != e; j++)
				;
			if (j == E)
				continue; /* our own */
			if (out[i].shard / 2 != (uint32_t)other)
				return -5;
			if (k != next[j])
				return -3;
			next[j]++;
			got++;
		}
		if (mfsq_ack(s, NULL, NULL))
			return -4;
	}
	return 0;
}

#define LAZY (MFSQ_NO_LOG | MFSQ_LAZY_SHARDS)

static int child(const char *dir, unsigned flags)
{
	MDB_env *env = open_env(dir);
	mfsq_queue *q;
	mfsq_sub *s;
	int rc;

	if (!env || mfsq_open(env, "q", NULL, flags, &q))
		return 10;
	if (flags && (mfsq_shard_use(q, 2) || mfsq_shard_use(q, 3)))
		return 13;
	if (mfsq_subscribe(q, "child", MFSQ_SUB_DURABLE, NULL, NULL, &s))
		return 11;
	if (produce(env, q, 1))
		return 12;
	rc = consume(q, s, 0);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	mdb_env_close(env);
	return rc ? 20 - rc : 0;
}

/* Side 0 here, side 1 in a child opening the queue with @flags: each
 * produces its messages and consumes the other's. */
static void two_sides(mfsq_queue *q, unsigned flags)
{
	mfsq_sub *s, *cs;
	pid_t pid;

	ck_assert_int_eq(mfsq_subscribe(q, "parent", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "child", MFSQ_SUB_DURABLE, NULL, NULL, &cs), 0);
	mfsq_unsubscribe(cs);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child(T.dir, flags));
	ck_assert_int_eq(produce(T.env, q, 0), 0);
	ck_assert_int_eq(consume(q, s, 1), 0);
	wait_child(pid, 0);
	mfsq_unsubscribe(s);
}

START_TEST(two_processes)
{
	struct mfsq_config c;
	mfsq_queue *q;

	tenv_open(&T, 0);
	small_cfg(&c, 4, 16);
	c.retain_max = 256;
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &q), 0);
	two_sides(q, 0);
	mfsq_close(q);
	tenv_destroy(&T);
}
END_TEST

/* Does the named database @name exist? */
static int db_exists(MDB_env *env, const char *name)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc;

	ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	rc = mdb_dbi_open(txn, name, 0, &dbi);
	mdb_txn_abort(txn);
	ck_assert(rc == 0 || rc == MDB_NOTFOUND);
	return rc == 0;
}

/* MFSQ_LAZY_SHARDS: each side makes ready only the shards it writes (0, 1
 * and 2, 3 of 6), reads the other's all the same, through rolls (16
 * messages a subshard) and retention; shards 4 and 5, which nobody used,
 * never get a database. */
START_TEST(lazy_shards)
{
	struct mfsq_config c;
	mfsq_queue *q;

	tenv_open(&T, 0);
	small_cfg(&c, 6, 16);
	c.retain_max = 256;
	ck_assert_int_eq(mfsq_open(T.env, "nolog", &c, MFSQ_CREATE | MFSQ_LAZY_SHARDS, &q), EINVAL);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE | LAZY, &q), 0);
	ck_assert(db_exists(T.env, "q/m"));
	ck_assert(!db_exists(T.env, "q/d/0"));
	ck_assert(!db_exists(T.env, "q/s/0/0000000000000001"));
	/* not made ready: refused */
	ck_assert_int_eq(put_msg(q, NULL, mfsq_enqueuer_in_shard(q, 0, 0), 0, NULL), EINVAL);
	ck_assert_int_eq(mfsq_shard_use(q, 6), EINVAL);
	ck_assert_int_eq(mfsq_shard_use(q, 0), 0);
	ck_assert_int_eq(mfsq_shard_use(q, 0), 0);
	ck_assert_int_eq(mfsq_shard_use(q, 1), 0);
	ck_assert(db_exists(T.env, "q/d/0"));
	ck_assert(db_exists(T.env, "q/s/1/0000000000000001"));
	ck_assert(!db_exists(T.env, "q/d/2"));
	two_sides(q, LAZY);
	ck_assert_int_eq(mfsq_tick(q), 0);
	ck_assert(db_exists(T.env, "q/d/2"));
	for (int i = 4; i < 6; i++) {
		char nm[64];

		snprintf(nm, sizeof(nm), "q/d/%d", i);
		ck_assert_msg(!db_exists(T.env, nm), "%s was made", nm);
		snprintf(nm, sizeof(nm), "q/s/%d/0000000000000001", i);
		ck_assert_msg(!db_exists(T.env, nm), "%s was made", nm);
	}
	mfsq_close(q);
	/* reopened, a lazy queue checks clean (shards with no databases) */
	uint64_t problems = 1;
	MDB_txn *txn;
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mfsq_check(txn, "q", NULL, NULL, &problems), 0);
	mdb_txn_abort(txn);
	ck_assert_uint_eq(problems, 0);
	tenv_destroy(&T);
}
END_TEST

Suite *suite_multi(void)
{
	Suite *s = suite_create("multi");
	TCase *tc = tcase_create("multi");

	tcase_set_timeout(tc, 100);
	tcase_add_test(tc, two_processes);
	tcase_add_test(tc, lazy_shards);
	suite_add_tcase(s, tc);
	return s;
}
