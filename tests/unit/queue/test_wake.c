/* SPDX-License-Identifier: MIT */
/*
 * Waits that end before the condition they wait for was signalled. POSIX
 * lets pthread_cond_wait() return without a signal, and a thread woken on
 * purpose may run only much later, when the state has moved on (on a loaded
 * machine, after other threads took the mutex several times). A wait loop
 * that is only correct when every return follows the signal meant for it
 * passes every ordinary test. This executable is linked with
 * -Wl,--wrap=pthread_cond_wait,--wrap=mdb_env_sync (meson.build): while a
 * test turns injection on, every wait in the library returns by itself
 * after a short nap, and a meta sync by the group commit (which its leader
 * runs with the lock released) takes longer, so callers wake, look and
 * sleep again many times during each sync.
 *
 * The group commit (groupcommit.c, then group.c, before 990e536) let a caller return while its
 * request, on its stack, was still on the list of committed requests
 * waiting for a sync; the leader then walked that stack memory. Here that
 * hangs (the request, reused by the caller's next call, ends up on the list
 * twice) or crashes. It needs no spurious wake-up: a caller woken to lead
 * the next turn, on a loaded machine, may run only after another leader's
 * turn committed its request and the turn after made it durable and is
 * syncing its own meta page with the lock released.
 */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "internal.h" /* mfsq_spin_while() */

int __real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __real_mdb_env_sync(MDB_env *env, int force);
int __wrap_mdb_env_sync(MDB_env *env, int force);

static atomic_int inject;
static atomic_ulong spurious;

int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	if (!atomic_load(&inject))
		return __real_pthread_cond_wait(c, m);
	pthread_mutex_unlock(m);
	usleep(50);
	pthread_mutex_lock(m);
	atomic_fetch_add(&spurious, 1);
	return 0;
}

int __wrap_mdb_env_sync(MDB_env *env, int force)
{
	if (atomic_load(&inject))
		usleep(500); /* a slow disk: the leader syncs with the lock released */
	return __real_mdb_env_sync(env, force);
}

/* The link wrapped the calls: a wait with nobody to signal returns. */
static void wrap_works(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	unsigned long before = atomic_load(&spurious);

	atomic_store(&inject, 1);
	pthread_mutex_lock(&m);
	ck_assert_int_eq(pthread_cond_wait(&c, &m), 0);
	pthread_mutex_unlock(&m);
	atomic_store(&inject, 0);
	ck_assert_uint_eq(atomic_load(&spurious), before + 1);
}

struct wworker {
	mfsq_queue *q;
	uint64_t id;
	int n, rc;
};

static void *wenqueue(void *arg)
{
	struct wworker *w = arg;

	for (int i = 0; i < w->n && !w->rc; i++)
		w->rc = put_msg(w->q, NULL, w->id, (uint64_t)i, NULL);
	return NULL;
}

/*
 * Deferred meta syncs (MDB_NOMETASYNC) with callers that wake up on their
 * own: concurrent enqueues and acknowledgements all return, nothing is
 * lost or reordered per enqueuer.
 */
static void group_spurious(unsigned envflags)
{
	enum { W = 6, N = 150 };
	struct wworker w[W];
	pthread_t th[W];
	uint64_t next[W] = {0};
	struct mfsq_msg out[64];
	struct mfsq_stats st;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n, got = 0;

	tenv_open_flags(&t, 0, envflags);
	ck_assert_int_eq(mfsq_open(t.env, "q", NULL, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	wrap_works();
	atomic_store(&inject, 1);
	for (int i = 0; i < W; i++) {
		w[i] = (struct wworker){q, (uint64_t)i, N, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, wenqueue, &w[i]), 0);
	}
	while (got < W * N) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 10000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			uint64_t e, k;

			ck_assert_int_eq(parse_msg(&out[i], &e, &k), 0);
			ck_assert_uint_lt(e, W);
			ck_assert_uint_eq(k, next[e]++);
		}
		ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].rc, 0);
	}
	atomic_store(&inject, 0);
	mfsq_stats(q, &st);
	ck_assert_uint_eq(st.batches, W * N);
	if (envflags & MDB_NOMETASYNC)
		ck_assert_uint_ge(st.meta_syncs, 1);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}

START_TEST(group_spurious_meta_sync)
{
	group_spurious(MDB_NOMETASYNC);
}
END_TEST

START_TEST(group_spurious_relaxed)
{
	group_spurious(MDB_NOSYNC);
}
END_TEST

/*
 * Turns are cut at 1 MiB of payload (groupcommit.c: take()): with syncs slowed
 * down so that requests pile up behind each leader, enqueues of 512 KiB
 * each are committed at most two per group, all of them arrive, and each
 * enqueuer's order holds across the cut. A group taking everything queued
 * (as before take()) commits several per group and fails the count.
 */
struct bigworker {
	mfsq_queue *q;
	uint64_t id;
	int n, rc;
};

enum { BIG_MSGS = 8, BIG_LEN = 64 << 10 };

static void *big_enqueue(void *arg)
{
	struct bigworker *w = arg;
	struct mfsq_msg_in in[BIG_MSGS];
	unsigned char *buf = calloc(BIG_MSGS, BIG_LEN);

	if (!buf) {
		w->rc = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < w->n && !w->rc; i++) {
		for (int k = 0; k < BIG_MSGS; k++) {
			uint64_t v[2] = {w->id, (uint64_t)(i * BIG_MSGS + k)};

			memcpy(buf + (size_t)k * BIG_LEN, v, sizeof(v));
			in[k] = (struct mfsq_msg_in){
			    .data = buf + (size_t)k * BIG_LEN, .len = BIG_LEN, .enqueuer = w->id};
		}
		w->rc = mfsq_enqueue_batch(w->q, NULL, in, BIG_MSGS, NULL);
	}
	free(buf);
	return NULL;
}

START_TEST(group_turn_bytes)
{
	enum { W = 6, N = 6 };
	struct bigworker w[W];
	pthread_t th[W];
	uint64_t next[W] = {0};
	struct mfsq_msg out[16];
	struct mfsq_stats st;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n, got = 0;

	tenv_open_flags(&t, (size_t)1 << 30, MDB_NOMETASYNC);
	ck_assert_int_eq(mfsq_open(t.env, "q", NULL, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	atomic_store(&inject, 1);
	for (int i = 0; i < W; i++) {
		w[i] = (struct bigworker){q, (uint64_t)i, N, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, big_enqueue, &w[i]), 0);
	}
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].rc, 0);
	}
	atomic_store(&inject, 0);
	mfsq_stats(q, &st);
	ck_assert_uint_eq(st.batches, W * N);
	ck_assert_uint_ge(st.commit_groups * 2, W * N);
	while (got < W * N * BIG_MSGS) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 10000), 0);
		for (size_t i = 0; i < n; i++, got++) {
			uint64_t v[2];

			ck_assert_uint_eq(out[i].len, BIG_LEN);
			memcpy(v, out[i].data, sizeof(v));
			ck_assert_uint_lt(v[0], W);
			ck_assert_uint_eq(v[1], next[v[0]]++);
		}
		ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

/*
 * Spinning before sleeping (spin.c): a waiter that watches a word sees
 * another thread change it, and gives up when its time is over; on one
 * CPU it never spins (it would only keep the changer from running).
 */
static _Atomic uint64_t spin_word;

static void *spin_bump(void *arg)
{
	(void)arg;
	atomic_fetch_add(&spin_word, 1);
	return NULL;
}

START_TEST(spin_sees_change)
{
	uint64_t old = atomic_load(&spin_word);
	cpu_set_t set;
	pthread_t th;
	int rc, cpus;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	cpus = CPU_COUNT(&set);
	ck_assert_int_eq(mfsq_spin_while(&spin_word, old + 1, 0), 1); /* already differs */
	ck_assert_int_eq(mfsq_spin_while(&spin_word, old, 0), 0);     /* no time at all */
	ck_assert_int_eq(mfsq_spin_while(&spin_word, old, 1), 0);     /* nobody changes it */
	ck_assert_int_eq(pthread_create(&th, NULL, spin_bump, NULL), 0);
	rc = mfsq_spin_while(&spin_word, old, 10u * 1000 * 1000); /* bounded: 10 s */
	pthread_join(th, NULL);
	ck_assert_int_eq(rc, cpus > 1);
	ck_assert_uint_eq(atomic_load(&spin_word), old + 1);
}
END_TEST

/* Coalesced waiting (coalesce.c): only while wake-ups come often, never
 * past the waiter's deadline. */
START_TEST(coalesce_decision)
{
	ck_assert_uint_eq(mfsq_coalesce_us(10, 5, 1000), MFSQ_COALESCE_US);
	ck_assert_uint_eq(mfsq_coalesce_us(MFSQ_COALESCE_GAP_US, 5, 1000), 0); /* not busy */
	ck_assert_uint_eq(mfsq_coalesce_us(10, 4 * MFSQ_COALESCE_GAP_US + 1, 1000),
			  0);						     /* stopped */
	ck_assert_uint_eq(mfsq_coalesce_us(10, 5, MFSQ_COALESCE_US - 1), 0); /* deadline first */
}
END_TEST

/* A subscriber of a busy stream of wake-ups sleeps instead of being woken,
 * and still gets what comes. */
START_TEST(coalesce_busy_stream)
{
	struct mfsq_config c;
	struct mfsq_stats st;
	struct mfsq_msg m;
	struct tenv t;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n;

	tenv_open(&t, 0);
	small_cfg(&c, 2, 64);
	ck_assert_int_eq(mfsq_open(t.env, "q", &c, MFSQ_CREATE, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, 0, NULL, NULL, &s), 0);
	/* bounded: a loaded machine may delay the dequeue past the busy spell */
	for (int i = 0; i < 1000 && (mfsq_stats(q, &st), !st.coalesced_waits); i++) {
		for (int k = 0; k < 100; k++)
			mfsq_notify(q);
		ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 1), ETIMEDOUT);
	}
	ck_assert_uint_ge(st.coalesced_waits, 1);
	ck_assert_int_eq(put_msg(q, NULL, 1, 1, NULL), 0);
	get_one(s, &m);
	mfsq_unsubscribe(s);
	mfsq_close(q);
	tenv_destroy(&t);
}
END_TEST

Suite *suite_wake(void)
{
	Suite *s = suite_create("wake");
	TCase *tc = tcase_create("spurious");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, group_spurious_meta_sync);
	tcase_add_test(tc, group_spurious_relaxed);
	tcase_add_test(tc, spin_sees_change);
	tcase_add_test(tc, group_turn_bytes);
	tcase_add_test(tc, coalesce_decision);
	tcase_add_test(tc, coalesce_busy_stream);
	suite_add_tcase(s, tc);
	return s;
}
