/* SPDX-License-Identifier: MIT */
/*
 * The enqueue log (queue/enqlog.c): own-transaction enqueues of an
 * MDB_NOSYNC environment return once in a shared log; group turns move
 * them in; a killed process's log is replayed by the next one, in order
 * and exactly once; a caller's transaction into a shard with records still
 * in the log gets EAGAIN; a full store still answers ENOSPC.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "helpers.h"

static struct tenv T;
static mfsq_queue *Q;

static void cfg(struct mfsq_config *c)
{
	small_cfg(c, 1, 4096); /* one shard: everything in one stream */
	c->retain_max = 1024;
}

static void setup(void)
{
	struct mfsq_config c;

	tenv_open(&T, (size_t)1 << 30);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &Q), 0);
}

static void teardown(void)
{
	mfsq_close(Q);
	Q = NULL;
	tenv_destroy(&T);
}

/* Message (1, k) with a payload of @len bytes (at least the text). */
static int put_len(mfsq_queue *q, MDB_txn *txn, uint64_t k, size_t len)
{
	char buf[2048];
	struct mfsq_msg_in m = {.data = buf, .enqueuer = 1};
	int n = snprintf(buf, sizeof(buf), "1:%llu", (unsigned long long)k);

	memset(buf + n, ' ', sizeof(buf) - (size_t)n);
	m.len = len > (size_t)n ? len : (size_t)n;
	return mfsq_enqueue(q, txn, &m, NULL);
}

/* Receive messages 0..@count-1 in order (their text ends at a space). */
static void expect_all(mfsq_sub *s, uint64_t from, uint64_t count)
{
	struct mfsq_msg out[64];
	uint64_t next = from;
	size_t n;

	while (next < from + count) {
		size_t want = from + count - next;

		ck_assert_int_eq(mfsq_dequeue(s, out, want < 64 ? want : 64, &n, 10000), 0);
		for (size_t i = 0; i < n; i++) {
			unsigned long long e, k;
			char txt[32];
			size_t l = out[i].len < sizeof(txt) - 1 ? out[i].len : sizeof(txt) - 1;

			memcpy(txt, out[i].data, l);
			txt[l] = 0;
			ck_assert_int_eq(sscanf(txt, "%llu:%llu", &e, &k), 2);
			ck_assert_uint_eq(k, next);
			next++;
		}
		ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
}

/* An enqueue without seqs goes through the log; one with seqs commits. */
START_TEST(logged_enqueue)
{
	struct mfsq_msg_in in = {.data = "x", .len = 1, .enqueuer = 1};
	struct mfsq_stats st;
	struct stat sb;
	char path[300];
	uint64_t seq = 0;
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(put_len(Q, NULL, 0, 0), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_enqueued, 1);
	ck_assert_uint_eq(st.log_flushes, 1); /* alone: it led its own turn */
	ck_assert_uint_eq(st.batches, 1);
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, &seq), 0);
	ck_assert_uint_eq(seq, 2);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_enqueued, 1);
	expect_all(s, 0, 1);
	snprintf(path, sizeof(path), "%s/mfsq-q.log0", T.dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq((uint64_t)sb.st_size, MFSQ_LOG_BYTES);
	mfsq_unsubscribe(s);
}
END_TEST

/* The ring wraps many times; every message arrives once, in order. */
START_TEST(wraps)
{
	enum { N = 3000 };
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (uint64_t k = 0; k < N; k++) {
		ck_assert_int_eq(put_len(Q, NULL, k, 1000 + k % 97), 0);
		if (k % 500 == 499)
			expect_all(s, k - 499, 500);
	}
	mfsq_unsubscribe(s);
}
END_TEST

/* Holds the environment's write lock until told to stop. */
struct holder {
	MDB_env *env;
	pthread_mutex_t m;
	pthread_cond_t c;
	int held, stop;
};

static void *hold_write_lock(void *arg)
{
	struct holder *h = arg;
	MDB_txn *txn;

	if (mdb_txn_begin(h->env, NULL, 0, &txn))
		return NULL;
	pthread_mutex_lock(&h->m);
	h->held = 1;
	pthread_cond_broadcast(&h->c);
	while (!h->stop)
		pthread_cond_wait(&h->c, &h->m);
	pthread_mutex_unlock(&h->m);
	mdb_txn_abort(txn);
	return NULL;
}

struct leader {
	mfsq_queue *q;
	uint64_t k;
	int rc;
};

/* Enqueues one message; finding nobody committing, it leads the turn. */
static void *enqueue_one(void *arg)
{
	struct leader *l = arg;

	l->rc = put_len(l->q, NULL, l->k, 0);
	return NULL;
}

/* Start a leader stuck on the write lock @h holds; return when its message
 * is in the log. */
static void stuck_leader(mfsq_queue *q, struct holder *h, struct leader *l, pthread_t *th,
			 uint64_t k)
{
	struct mfsq_stats st, st0;

	mfsq_stats(q, &st0);
	*l = (struct leader){q, k, -1};
	ck_assert_int_eq(pthread_create(th, NULL, enqueue_one, l), 0);
	for (int i = 0; i < 10000 && (mfsq_stats(q, &st), st.log_enqueued == st0.log_enqueued); i++)
		usleep(1000); /* bounded: 10 s */
	ck_assert_uint_eq(st.log_enqueued, st0.log_enqueued + 1);
}

static void holder_start(struct holder *h, MDB_env *env, pthread_t *th)
{
	memset(h, 0, sizeof(*h));
	h->env = env;
	pthread_mutex_init(&h->m, NULL);
	pthread_cond_init(&h->c, NULL);
	ck_assert_int_eq(pthread_create(th, NULL, hold_write_lock, h), 0);
	pthread_mutex_lock(&h->m);
	while (!h->held)
		pthread_cond_wait(&h->c, &h->m);
	pthread_mutex_unlock(&h->m);
}

/*
 * The child: @pre messages committed, then, with the write lock held so
 * that nothing commits, message @pre by a leader that waits for the lock
 * and 9 more that return from the log at once; then SIGKILL.
 */
static int killed_child(uint64_t pre, size_t len)
{
	struct mfsq_config c;
	struct holder h;
	struct leader l;
	struct mfsq_stats st;
	pthread_t th, lt;
	MDB_env *env;
	mfsq_queue *q;

	cfg(&c);
	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4 * mfsq_dbs_needed(NULL) + 64) ||
	    mdb_env_set_mapsize(env, (size_t)1 << 30) ||
	    mdb_env_open(env, T.dir, MDB_NOTLS | MDB_NOSYNC, 0644) ||
	    mfsq_open(env, "q", &c, 0, &q))
		return 10;
	for (uint64_t k = 0; k < pre; k++)
		if (put_len(q, NULL, k, len))
			return 11;
	holder_start(&h, env, &th);
	stuck_leader(q, &h, &l, &lt, pre);
	for (uint64_t k = pre + 1; k < pre + 10; k++)
		if (put_len(q, NULL, k, len))
			return 12;
	mfsq_stats(q, &st);
	if (st.log_enqueued != pre + 10 || st.log_flushes != pre)
		return 13; /* 9 returned without a commit */
	raise(SIGKILL);
	return 14;
}

static void run_killed_child(uint64_t pre, size_t len)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(killed_child(pre, len));
	wait_child(pid, SIGKILL);
}

/* The log of a killed process: replayed once, in order, before what the
 * next process enqueues. */
static void replay_case(uint64_t pre, size_t len, unsigned flags)
{
	struct mfsq_config c;
	struct mfsq_stats st;
	mfsq_sub *s;

	ck_assert_int_eq(
	    mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	mfsq_unsubscribe(s);
	run_killed_child(pre, len);
	/* a restart: the next open replays the dead log */
	mfsq_close(Q);
	tenv_reopen(&T);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, flags, &Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_replayed, 10);
	ck_assert_int_eq(put_len(Q, NULL, pre + 10, len), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	expect_all(s, 0, pre + 11);
	mfsq_unsubscribe(s);
	/* and only once */
	mfsq_close(Q);
	tenv_reopen(&T);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, 0, &Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_replayed, 0);
}

START_TEST(replay_after_kill)
{
	replay_case(5, 0, 0);
}
END_TEST

/* A queue opened with MFSQ_NO_LOG still replays a dead process's log. */
START_TEST(replay_without_log)
{
	replay_case(5, 0, MFSQ_NO_LOG);
}
END_TEST

/* MFSQ_NO_LOG: no log file, no ring; an own-transaction enqueue commits
 * before it returns. */
START_TEST(no_log)
{
	struct mfsq_config c;
	struct mfsq_stats st;
	struct stat sb;
	char path[300];
	mfsq_sub *s;

	mfsq_close(Q);
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "%s/mfsq-q.log%d", T.dir, i);
		unlink(path);
	}
	tenv_reopen(&T);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_NO_LOG, &Q), 0);
	ck_assert_int_eq(
	    mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	ck_assert_int_eq(put_len(Q, NULL, 0, 0), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_enqueued, 0);
	ck_assert_uint_eq(st.enqueued, 1);
	expect_all(s, 0, 1);
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "%s/mfsq-q.log%d", T.dir, i);
		ck_assert_int_eq(stat(path, &sb), -1);
	}
	mfsq_unsubscribe(s);
}
END_TEST

/* The same with the records wrapping round the ring's end. */
START_TEST(replay_across_wrap)
{
	uint64_t per = MFSQ_LOG_BYTES / (sizeof(struct mfsq_log_rec) + 1000);

	replay_case(per - 2, 1000, 0);
}
END_TEST

/* A process that stays open replays a dead one's log (retention, within
 * its dequeues): the messages arrive without a restart. */
START_TEST(replayed_by_live_process)
{
	struct mfsq_stats st;
	mfsq_sub *s;

	ck_assert_int_eq(
	    mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	run_killed_child(3, 0);
	expect_all(s, 0, 13); /* bounded: 10 s per dequeue */
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_replayed, 10);
	mfsq_unsubscribe(s);
}
END_TEST

/* Records appended while the leader is stuck are committed after it by
 * the flusher thread, in order. */
START_TEST(flusher_takes_over)
{
	struct holder h;
	struct leader l;
	struct mfsq_stats st;
	pthread_t th, lt;
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	holder_start(&h, T.env, &th);
	stuck_leader(Q, &h, &l, &lt, 0);
	for (uint64_t k = 1; k < 10; k++)
		ck_assert_int_eq(put_len(Q, NULL, k, 0), 0); /* return at once */
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_flushes, 0);
	pthread_mutex_lock(&h.m);
	h.stop = 1;
	pthread_cond_broadcast(&h.c);
	pthread_mutex_unlock(&h.m);
	pthread_join(th, NULL);
	pthread_join(lt, NULL);
	ck_assert_int_eq(l.rc, 0);
	expect_all(s, 0, 10);
	/* the flusher counts its flush just after subscribers can see it
	 * (bounded: 10 s) */
	for (int i = 0; i < 10000 && (mfsq_stats(Q, &st), st.log_flushes < 2); i++)
		usleep(1000);
	ck_assert_uint_ge(st.log_flushes, 2); /* the leader's own, then the rest */
	mfsq_unsubscribe(s);
}
END_TEST

/*
 * A record that fails its checksum (a torn page after a machine crash)
 * ends the replay there, and the next owner of the file wipes what lies
 * behind it: those records never come back.
 */
START_TEST(torn_record_ends_replay)
{
	struct mfsq_config c;
	struct mfsq_stats st;
	char path[300];
	uint64_t lsn = 1;
	mfsq_sub *s;
	int fd;
	const size_t rec = sizeof(struct mfsq_log_rec) + 8; /* payload "1:k", padded */

	ck_assert_int_eq(
	    mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	mfsq_unsubscribe(s);
	mfsq_close(Q); /* the child then owns log0 */
	Q = NULL;
	run_killed_child(0, 0);
	snprintf(path, sizeof(path), "%s/mfsq-q.log0", T.dir);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "#", 1, (off_t)(4 * rec + sizeof(struct mfsq_log_rec))), 1);
	tenv_reopen(&T);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, 0, &Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_replayed, 4); /* lsn 1..4; lsn 5 is torn */
	ck_assert_int_eq(pread(fd, &lsn, sizeof(lsn), (off_t)(5 * rec)), sizeof(lsn));
	ck_assert_uint_eq(lsn, 0); /* lsn 6 wiped by the new owner */
	close(fd);
	ck_assert_int_eq(put_len(Q, NULL, 4, 0), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	expect_all(s, 0, 5);
	mfsq_unsubscribe(s);
}
END_TEST

/* A live process's log is not replayed by another. */
START_TEST(live_log_kept)
{
	struct mfsq_stats st;
	pid_t pid;

	ck_assert_int_eq(put_len(Q, NULL, 0, 0), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mfsq_config c;
		struct mfsq_stats cs;
		MDB_env *env;
		mfsq_queue *q;

		cfg(&c);
		if (mdb_env_create(&env) ||
		    mdb_env_set_maxdbs(env, 4 * mfsq_dbs_needed(NULL) + 64) ||
		    mdb_env_set_mapsize(env, (size_t)1 << 30) ||
		    mdb_env_open(env, T.dir, MDB_NOTLS | MDB_NOSYNC, 0644) ||
		    mfsq_open(env, "q", &c, 0, &q))
			_exit(10);
		if (put_len(q, NULL, 1, 0))
			_exit(11);
		mfsq_stats(q, &cs);
		mfsq_close(q);
		mdb_env_close(env);
		_exit(cs.log_replayed ? 12 : 0);
	}
	wait_child(pid, 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.log_replayed, 0);
}
END_TEST

/* A caller's transaction into a shard with records still in the log: EAGAIN
 * (the log's record of the same enqueuer goes first). */
START_TEST(caller_txn_eagain)
{
	struct mfsq_stats st;
	struct leader l;
	pthread_t lt;
	MDB_txn *txn;
	mfsq_sub *s;
	int rc;

	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	l = (struct leader){Q, 0, -1};
	ck_assert_int_eq(pthread_create(&lt, NULL, enqueue_one, &l), 0);
	for (int i = 0; i < 10000 && (mfsq_stats(Q, &st), !st.log_enqueued); i++)
		usleep(1000); /* bounded: 10 s */
	ck_assert_uint_eq(st.log_enqueued, 1);
	rc = put_len(Q, txn, 1, 0);
	ck_assert_int_eq(rc, EAGAIN);
	mdb_txn_abort(txn);
	pthread_join(lt, NULL);
	ck_assert_int_eq(l.rc, 0);
	ck_assert_int_eq(mdb_txn_begin(T.env, NULL, 0, &txn), 0);
	ck_assert_int_eq(put_len(Q, txn, 1, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	mfsq_notify(Q);
	expect_all(s, 0, 2);
	mfsq_unsubscribe(s);
}
END_TEST

/* A full store: the call whose own commit fails returns ENOSPC and its
 * record leaves the log (it is not delivered later). */
START_TEST(enospc)
{
	char big[4000];
	struct mfsq_msg_in in = {.data = big, .len = sizeof(big), .enqueuer = 1};
	struct mfsq_config c;
	struct mfsq_msg m;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	int rc = 0, ok = 0, got = 0;
	size_t n;

	memset(big, 'x', sizeof(big));
	tenv_open(&t, (size_t)1 << 20);
	small_cfg(&c, 1, 16);
	ck_assert_int_eq(mfsq_open(t.env, "q", &c, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	while (ok < 10000 && (rc = mfsq_enqueue(q, NULL, &in, NULL)) == 0)
		ok++;
	ck_assert_int_eq(rc, ENOSPC);
	ck_assert_int_eq(mfsq_enqueue(q, NULL, &in, NULL), ENOSPC); /* and again */
	/* nothing acknowledged: no room will come, so what is there is all */
	while (mfsq_dequeue(s, &m, 1, &n, 0) == 0)
		got++;
	ck_assert_int_eq(got, ok);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

/* An environment that syncs never uses the log. */
START_TEST(synced_env_commits)
{
	struct mfsq_config c;
	struct mfsq_stats st;
	struct stat sb;
	char path[300];
	struct tenv t;
	mfsq_queue *q;

	tenv_open_flags(&t, 0, MDB_NOMETASYNC);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(t.env, "q", &c, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(put_len(q, NULL, 0, 0), 0);
	mfsq_stats(q, &st);
	ck_assert_uint_eq(st.log_enqueued, 0);
	ck_assert_uint_eq(st.commit_groups, 1);
	snprintf(path, sizeof(path), "%s/mfsq-q.log0", t.dir);
	ck_assert_int_eq(stat(path, &sb), -1);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

Suite *suite_enqlog(void)
{
	Suite *s = suite_create("enqlog");
	TCase *tc = tcase_create("enqlog");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, logged_enqueue);
	tcase_add_test(tc, wraps);
	tcase_add_test(tc, replay_after_kill);
	tcase_add_test(tc, replay_without_log);
	tcase_add_test(tc, no_log);
	tcase_add_test(tc, replay_across_wrap);
	tcase_add_test(tc, live_log_kept);
	tcase_add_test(tc, replayed_by_live_process);
	tcase_add_test(tc, flusher_takes_over);
	tcase_add_test(tc, torn_record_ends_replay);
	tcase_add_test(tc, caller_txn_eagain);
	tcase_add_test(tc, enospc);
	tcase_add_test(tc, synced_env_commits);
	suite_add_tcase(s, tc);
	return s;
}
