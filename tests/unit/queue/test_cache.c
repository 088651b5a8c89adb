/* SPDX-License-Identifier: MIT */
/* The message cache: hits for readers that keep up, restores, earliest-access
 * eviction, the process budget, and the memory-pressure fallback. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
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

	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	tenv_open(&T, 0);
	small_cfg(&c, 2, 64);
	c.retain_max = 64;
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &Q), 0);
}

static void teardown(void)
{
	mfsq_close(Q);
	Q = NULL;
	tenv_destroy(&T);
}

/* Enqueue one message of @len bytes tagged with @tag. */
static void put_sized(uint64_t enq, uint64_t tag, size_t len)
{
	static unsigned char buf[8192];
	struct mfsq_msg_in in = {.data = buf, .len = len, .enqueuer = enq};

	ck_assert_uint_ge(len, 8);
	memcpy(buf, &tag, 8);
	ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), 0);
}

static uint64_t tag_of(const struct mfsq_msg *m)
{
	uint64_t t;

	memcpy(&t, m->data, 8);
	return t;
}

START_TEST(keep_up_never_reads_store)
{
	struct mfsq_stats st;
	struct mfsq_msg m;
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	for (uint64_t i = 0; i < 1000; i++) {
		put_sized(i % 5, i, 64);
		get_one(s, &m);
		ck_assert_uint_eq(tag_of(&m), i);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.cache_misses, 0);
	ck_assert_uint_eq(st.cache_restores, 0);
	ck_assert_uint_ge(st.cache_hits, 1000);
	mfsq_unsubscribe(s);
}
END_TEST

/* The entry a stalled reader sits in is kept; the ones it reaches later go
 * first (FIFO or LRU would evict the oldest, the one it needs now). */
START_TEST(earliest_access_eviction)
{
	struct mfsq_stats st;
	struct mfsq_msg out[64];
	mfsq_sub *a;
	uint32_t sh = mfsq_shard_of(Q, 1);
	size_t n, got = 0;

	/* 4 KiB messages, 64 per subshard: about 2.5 subshards fit */
	mfsq_memory_budget(650u << 10);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &a), 0);
	for (uint64_t i = 0; i < 64 * 4 + 10; i++)
		put_sized(1, i, 4096);
	mfsq_stats(Q, &st);
	ck_assert_uint_le(st.cache_bytes, 650u << 10);
	ck_assert_uint_gt(st.cache_evictions, 0);
	ck_assert(mfsq_cache_has(Q, sh, 1));	       /* where the reader is */
	ck_assert(mfsq_cache_has(Q, sh, 64 * 4 + 10)); /* the tail */
	ck_assert(!mfsq_cache_has(Q, sh, 64 * 2 + 1)); /* reached later */
	while (got < 64) {
		ck_assert_int_eq(mfsq_dequeue(a, out, 64 - got, &n, 0), 0);
		for (size_t i = 0; i < n; i++, got++)
			ck_assert_uint_eq(tag_of(&out[i]), got);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.cache_restores, 0);
	ck_assert_uint_eq(st.cache_misses, 0);
	mfsq_unsubscribe(a);
}
END_TEST

START_TEST(restore_after_eviction)
{
	struct mfsq_stats st;
	struct mfsq_msg out[32];
	mfsq_sub *s, *tick;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (uint64_t i = 0; i < 64 * 5; i++)
		put_sized(1, i, 100);
	mfsq_stats(Q, &st);
	ck_assert_uint_gt(st.cache_bytes, 0);
	/* pressure empties the cache at the next housekeeping */
	mfsq_pressure_mode(MFSQ_PRESSURE_ON);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &tick), 0);
	ck_assert_int_eq(mfsq_dequeue(tick, out, 1, &n, 0), EAGAIN);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.cache_bytes, 0);
	ck_assert_uint_ge(st.pressure_events, 1);
	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	while (got < 64 * 5) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 32, &n, 0), 0);
		for (size_t i = 0; i < n; i++, got++)
			ck_assert_uint_eq(tag_of(&out[i]), got);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.cache_restores + st.cache_prefetches, 4);
	ck_assert_uint_gt(st.cache_hits, 64 * 4);
	mfsq_unsubscribe(s);
	mfsq_unsubscribe(tick);
}
END_TEST

/* A reader working through a restored subshard gets the next one loaded
 * before it reaches it. */
START_TEST(prefetch_next)
{
	struct mfsq_stats st;
	struct mfsq_msg out[16];
	mfsq_sub *s;
	uint32_t sh = mfsq_shard_of(Q, 1);
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (uint64_t i = 0; i < 64 * 3; i++)
		put_sized(1, i, 100);
	mfsq_pressure_mode(MFSQ_PRESSURE_ON); /* empties the cache */
	ck_assert_int_eq(mfsq_dequeue(s, out, 1, &n, 0), 0);
	got += n;
	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	ck_assert(!mfsq_cache_has(Q, sh, 65));
	ck_assert_int_eq(mfsq_dequeue(s, out, 10, &n, 0), 0); /* restores 2..64 */
	got += n;
	ck_assert(mfsq_cache_has(Q, sh, 12));
	ck_assert_int_eq(mfsq_dequeue(s, out, 10, &n, 0), 0); /* prefetches 65.. */
	got += n;
	ck_assert(mfsq_cache_has(Q, sh, 65));
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.cache_prefetches, 1);
	while (got < 64 * 3) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 0), 0);
		for (size_t i = 0; i < n; i++, got++)
			ck_assert_uint_eq(tag_of(&out[i]), got);
	}
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(budget_respected)
{
	struct mfsq_stats st;
	struct mfsq_msg out[16];
	mfsq_sub *s;
	size_t n, got = 0;

	mfsq_memory_budget(256u << 10);
	ck_assert_int_eq(mfsq_subscribe(Q, "slow", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (uint64_t i = 0; i < 1000; i++) {
		put_sized(i % 3, i, 4096);
		mfsq_stats(Q, &st);
		ck_assert_uint_le(st.cache_bytes, 256u << 10);
	}
	while (got < 1000) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 0), 0);
		got += n;
		mfsq_stats(Q, &st);
		ck_assert_uint_le(st.cache_bytes, 256u << 10);
	}
	mfsq_unsubscribe(s);
}
END_TEST

/* Switching in and out of pressure loses and reorders nothing. */
START_TEST(pressure_switch)
{
	enum { E = 4, N = 1200 };
	uint64_t next[E] = {0};
	struct mfsq_stats st;
	struct mfsq_msg out[8];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (uint64_t i = 0; i < N; i++) {
		if (i % 100 == 0)
			mfsq_pressure_mode(i % 200 ? MFSQ_PRESSURE_ON : MFSQ_PRESSURE_OFF);
		put_sized(i % E, i / E, 32);
		if (i % 3 == 0 && mfsq_dequeue(s, out, 8, &n, 0) == 0) {
			for (size_t k = 0; k < n; k++, got++) {
				uint64_t e = out[k].enqueuer;

				ck_assert_uint_eq(tag_of(&out[k]), next[e]++);
			}
			ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
			if (i % 200 >= 100) { /* under pressure: nothing cached */
				mfsq_stats(Q, &st);
				ck_assert_uint_eq(st.cache_bytes, 0);
			}
		}
	}
	while (got < N) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 8, &n, 0), 0);
		for (size_t k = 0; k < n; k++, got++)
			ck_assert_uint_eq(tag_of(&out[k]), next[out[k].enqueuer]++);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_gt(st.store_only_enqueues, 0);
	ck_assert_uint_ge(st.pressure_events, 5);
	ck_assert_uint_gt(st.cache_hits, 0);
	mfsq_unsubscribe(s);
}
END_TEST

START_TEST(no_budget_no_cache)
{
	struct mfsq_stats st;
	struct mfsq_msg m;
	mfsq_sub *s;

	mfsq_memory_budget(0);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	for (uint64_t i = 0; i < 50; i++) {
		put_sized(1, i, 16);
		get_one(s, &m);
		ck_assert_uint_eq(tag_of(&m), i);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.cache_bytes, 0);
	ck_assert_uint_eq(st.cache_hits, 0);
	ck_assert_uint_ge(st.cache_misses, 50);
	mfsq_unsubscribe(s);
}
END_TEST

/* The chunks free cache memory is kept in (mfsq_stats: cache_spare_bytes). */
#define CHUNK_SPARE_MIN (32u * (64u << 10))

static void check_spares(void)
{
	struct mfsq_stats st;

	mfsq_stats(Q, &st);
	ck_assert_uint_le(st.cache_spare_bytes,
			  st.cache_target_bytes > st.cache_bytes + CHUNK_SPARE_MIN
			      ? st.cache_target_bytes - st.cache_bytes
			      : CHUNK_SPARE_MIN);
}

/* Sealed entries every subscriber has passed are freed at once; their
 * chunks are kept and take the next appends. */
START_TEST(passed_entries_dropped)
{
	struct mfsq_stats st;
	struct mfsq_msg out[64];
	mfsq_sub *a, *b;
	uint32_t sh = mfsq_shard_of(Q, 1);
	uint64_t spare;
	size_t n;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &a), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &b), 0);
	for (uint64_t i = 0; i < 64 * 3; i++)
		put_sized(1, i, 1000);
	for (int k = 0; k < 2; k++) { /* a passes the first two subshards */
		ck_assert_int_eq(mfsq_dequeue(a, out, 64, &n, 0), 0);
		ck_assert_uint_eq(n, 64);
	}
	/* b has not: nothing is dropped */
	ck_assert(mfsq_cache_has(Q, sh, 1));
	ck_assert(mfsq_cache_has(Q, sh, 65));
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(mfsq_dequeue(b, out, 64, &n, 0), 0);
		ck_assert_uint_eq(n, 64);
		ck_assert_uint_eq(tag_of(&out[63]), 64 * (uint64_t)k + 63);
	}
	ck_assert(!mfsq_cache_has(Q, sh, 1));
	ck_assert(!mfsq_cache_has(Q, sh, 64));
	ck_assert(!mfsq_cache_has(Q, sh, 65));
	ck_assert(mfsq_cache_has(Q, sh, 129)); /* the tail is kept */
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.cache_evictions, 2);
	ck_assert_uint_gt(st.cache_spare_bytes, 0);
	ck_assert_uint_ge(st.cache_bytes, 64 * 1000);
	ck_assert_uint_lt(st.cache_bytes, 2 * 64 * 1000);
	spare = st.cache_spare_bytes;
	check_spares();
	/* the next subshard is cached in the kept chunks */
	for (uint64_t i = 64 * 3; i < 64 * 4; i++)
		put_sized(1, i, 1000);
	mfsq_stats(Q, &st);
	ck_assert_uint_lt(st.cache_spare_bytes, spare);
	ck_assert(mfsq_cache_has(Q, sh, 64 * 3 + 1));
	for (uint64_t got = 128; got < 64 * 4;) {
		ck_assert_int_eq(mfsq_dequeue(a, out, 64, &n, 0), 0);
		for (size_t i = 0; i < n; i++, got++)
			ck_assert_uint_eq(tag_of(&out[i]), got);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.cache_misses, 0);
	mfsq_unsubscribe(a);
	mfsq_unsubscribe(b);
}
END_TEST

/* Spares never exceed the room below the target, and pressure gives them
 * back down to the fixed minimum. */
START_TEST(spares_bounded)
{
	struct mfsq_stats st;
	struct mfsq_msg out[64];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	/* 8 KiB messages, 512 KiB per subshard: 3 MiB passed below */
	for (uint64_t i = 0; i < 64 * 7; i++)
		put_sized(1, i, 8192);
	while (got < 64 * 6) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 0), 0);
		for (size_t i = 0; i < n; i++, got++)
			ck_assert_uint_eq(tag_of(&out[i]), got);
		check_spares();
	}
	mfsq_stats(Q, &st);
	if (st.cache_target_bytes >= st.cache_bytes + (4u << 20))
		ck_assert_uint_gt(st.cache_spare_bytes, CHUNK_SPARE_MIN); /* over the old 32 */
	mfsq_pressure_mode(MFSQ_PRESSURE_ON);
	ck_assert_int_eq(mfsq_dequeue(s, out, 64, &n, 0), 0);
	ck_assert_uint_eq(n, 64);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.cache_bytes, 0);
	ck_assert_uint_le(st.cache_spare_bytes, CHUNK_SPARE_MIN);
	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	mfsq_unsubscribe(s);
}
END_TEST

/* Spares of one queue give way to the other queues' cached data: with the
 * budget's use they stay within the process budget (or the minimum). */
START_TEST(spares_within_budget)
{
	static unsigned char buf[8192];
	const uint64_t budget = 6u << 20;
	struct mfsq_config c;
	struct mfsq_stats sa, sb;
	struct mfsq_msg out[64];
	mfsq_queue *qa;
	mfsq_sub *a, *b;
	size_t n;
	uint64_t room;

	mfsq_memory_budget(budget);
	small_cfg(&c, 2, 64);
	ck_assert_int_eq(mfsq_open(T.env, "other", &c, MFSQ_CREATE, &qa), 0);
	ck_assert_int_eq(mfsq_subscribe(qa, NULL, 0, NULL, NULL, &a), 0); /* never reads */
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &b), 0);
	/* this queue caches 4 MiB, then its reader passes it: spares */
	for (uint64_t i = 0; i < 64 * 8; i++)
		put_sized(1, i, 8192);
	for (uint64_t got = 0; got < 64 * 8; got += n)
		ck_assert_int_eq(mfsq_dequeue(b, out, 64, &n, 1000), 0);
	mfsq_stats(Q, &sb);
	ck_assert_uint_gt(sb.cache_spare_bytes, CHUNK_SPARE_MIN);
	/* the other queue now caches 4 MiB of unread messages */
	for (uint64_t i = 0; i < 500; i++) {
		struct mfsq_msg_in in = {.data = buf, .len = sizeof(buf), .enqueuer = 1};

		ck_assert_int_eq(mfsq_enqueue(qa, NULL, &in, NULL), 0);
	}
	ck_assert_int_eq(mfsq_dequeue(b, out, 64, &n, 0), EAGAIN); /* housekeeping */
	mfsq_stats(qa, &sa);
	mfsq_stats(Q, &sb);
	ck_assert_uint_gt(sa.cache_bytes, 3u << 20);
	room =
	    budget > sa.cache_bytes + sb.cache_bytes ? budget - sa.cache_bytes - sb.cache_bytes : 0;
	ck_assert_uint_le(sb.cache_spare_bytes, room > CHUNK_SPARE_MIN ? room : CHUNK_SPARE_MIN);
	mfsq_unsubscribe(a);
	mfsq_unsubscribe(b);
	mfsq_close(qa);
}
END_TEST

/* Messages too large for a shared chunk get one of their own, whatever
 * their size (one the size of a standard chunk's room too), and go back to
 * the allocator they came from when dropped. */
START_TEST(own_chunks)
{
	static const size_t lens[] = {16384, 16400, 65432, 65440, 65448, 65536, 200000};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	unsigned char *buf = malloc(200000);
	struct mfsq_stats st;
	struct mfsq_msg out[N];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < N; i++) {
			struct mfsq_msg_in in = {.data = buf, .len = lens[i], .enqueuer = 1};

			memset(buf, (int)(i + 1), lens[i]);
			ck_assert_int_eq(mfsq_enqueue(Q, NULL, &in, NULL), 0);
		}
		for (got = 0; got < N; got += n) {
			ck_assert_int_eq(mfsq_dequeue(s, out, N - got, &n, 1000), 0);
			for (size_t i = 0; i < n; i++) {
				const unsigned char *d = out[i].data;

				ck_assert_uint_eq(out[i].len, lens[got + i]);
				ck_assert_uint_eq(d[0], got + i + 1);
				ck_assert_uint_eq(d[out[i].len - 1], got + i + 1);
			}
		}
		/* pressure drops every entry, and their chunks */
		mfsq_pressure_mode(MFSQ_PRESSURE_ON);
		ck_assert_int_eq(mfsq_dequeue(s, out, 1, &n, 0), EAGAIN);
		mfsq_stats(Q, &st);
		ck_assert_uint_eq(st.cache_bytes, 0);
		mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	}
	mfsq_stats(Q, &st);
	ck_assert_uint_ge(st.cache_hits, N);
	mfsq_unsubscribe(s);
	free(buf);
}
END_TEST

/*
 * Subscribers read side by side (shared holds of the cache lock) while
 * enqueuers append and the cache is evicted, shrunk, restored, sized to
 * nothing and switched off under them: every subscriber gets every message
 * once, whole, in order per enqueuer. Payloads vary in size and carry a
 * pattern, so a message read from a freed or reused chunk shows.
 */
enum { RACE_E = 4, RACE_S = 4, RACE_N = 24000, RACE_SHARDS = 4 };

struct race {
	mfsq_queue *q;
	mfsq_sub *sub;
	uint64_t id;
	_Atomic int *stop;
	uint64_t got;
	char err[160]; /* the thread's first failure */
};

static size_t race_len(uint64_t e, uint64_t k)
{
	return 16 + (size_t)((k * 37 + e * 11) % 2000);
}

static void race_fill(unsigned char *b, uint64_t e, uint64_t k)
{
	size_t len = race_len(e, k);

	memcpy(b, &e, 8);
	memcpy(b + 8, &k, 8);
	for (size_t i = 16; i < len; i++)
		b[i] = (unsigned char)(e * 131 + k + i);
}

static void *race_enqueuer(void *arg)
{
	struct race *r = arg;
	static _Thread_local unsigned char buf[8][2048];
	struct mfsq_msg_in in[8];

	for (uint64_t k = 0; k < RACE_N && !r->err[0];) {
		/* mostly single enqueues (the enqueue log), every fifth a batch */
		size_t n = k % 5 == 4 ? 8 : 1, i;
		int rc;

		if (n > RACE_N - k)
			n = RACE_N - k;
		for (i = 0; i < n; i++) {
			race_fill(buf[i], r->id, k + i);
			in[i] = (struct mfsq_msg_in){
			    .data = buf[i], .len = race_len(r->id, k + i), .enqueuer = r->id};
		}
		rc = n == 1 ? mfsq_enqueue(r->q, NULL, &in[0], NULL)
			    : mfsq_enqueue_batch(r->q, NULL, in, n, NULL);
		if (rc)
			snprintf(r->err, sizeof(r->err), "enqueue %" PRIu64 ": %d", k, rc);
		k += n;
		if (k % 16 < n)
			usleep(50); /* readers mostly keep up: they read the cache */
	}
	return NULL;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	uint64_t next[RACE_E] = {0}, deadline = (uint64_t)time(NULL) + 60;
	struct mfsq_msg out[64];

	for (unsigned it = 0; r->got < (uint64_t)RACE_E * RACE_N && !r->err[0]; it++) {
		size_t max = 1 + (it * 7 + r->id) % 64, n;
		int rc = mfsq_dequeue(r->sub, out, max, &n, 100);

		if (rc == ETIMEDOUT || rc == EAGAIN) {
			if ((uint64_t)time(NULL) > deadline)
				snprintf(r->err, sizeof(r->err), "stuck at %" PRIu64, r->got);
			continue;
		}
		if (rc) {
			snprintf(r->err, sizeof(r->err), "dequeue: %d", rc);
			break;
		}
		for (size_t i = 0; i < n && !r->err[0]; i++) {
			const unsigned char *d = out[i].data;
			uint64_t e, k;

			if (out[i].len < 16) {
				snprintf(r->err, sizeof(r->err), "short message");
				break;
			}
			memcpy(&e, d, 8);
			memcpy(&k, d + 8, 8);
			if (e >= RACE_E || e != out[i].enqueuer || k != next[e] ||
			    out[i].len != race_len(e, k)) {
				snprintf(r->err, sizeof(r->err),
					 "reader %" PRIu64 ": got %" PRIu64 ":%" PRIu64
					 " (len %zu), expected %" PRIu64 ":%" PRIu64,
					 r->id, e, k, out[i].len, e < RACE_E ? e : 0,
					 e < RACE_E ? next[e] : 0);
				break;
			}
			for (size_t j = 16; j < out[i].len; j++)
				if (d[j] != (unsigned char)(e * 131 + k + j)) {
					snprintf(r->err, sizeof(r->err),
						 "reader %" PRIu64 ": %" PRIu64 ":%" PRIu64
						 " corrupt at byte %zu",
						 r->id, e, k, j);
					break;
				}
			next[e]++;
			r->got++;
		}
		if (!r->err[0] && (rc = mfsq_ack(r->sub, NULL, NULL)))
			snprintf(r->err, sizeof(r->err), "ack: %d", rc);
	}
	return NULL;
}

/* Budgets from nothing to plenty, pressure on and off (every unpinned entry
 * goes, the ones being read too), statistics. */
static void *race_churn(void *arg)
{
	static const uint64_t budgets[] = {4u << 20, 4u << 20, 16u << 10, 4u << 20,
					   1u << 20, 0,	       4u << 20,  64u << 10};
	struct race *r = arg;
	struct mfsq_stats st;

	for (unsigned i = 0; !atomic_load(r->stop); i++) {
		mfsq_memory_budget(budgets[i % 8]);
		if (i % 16 == 0 || i % 16 == 1)
			mfsq_pressure_mode(i % 16 ? MFSQ_PRESSURE_OFF : MFSQ_PRESSURE_ON);
		mfsq_stats(r->q, &st);
		(void)mfsq_cache_has(r->q, i % RACE_SHARDS, i % 200);
		usleep(100);
	}
	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	return NULL;
}

START_TEST(readers_race_shrink)
{
	struct race enq[RACE_E], rd[RACE_S], churn;
	pthread_t te[RACE_E], ts[RACE_S], tc;
	_Atomic int stop = 0;
	struct mfsq_config c;
	struct mfsq_stats st;
	mfsq_queue *q;

	small_cfg(&c, RACE_SHARDS, 256); /* v grows under readers */
	c.retain_max = 1024;		 /* nobody lags */
	ck_assert_int_eq(mfsq_open(T.env, "race", &c, MFSQ_CREATE, &q), 0);
	mfsq_memory_budget(16u << 10);
	for (int i = 0; i < RACE_S; i++) {
		char name[16];

		rd[i] = (struct race){.q = q, .id = (uint64_t)i};
		snprintf(name, sizeof(name), "r%d", i);
		ck_assert_int_eq(mfsq_subscribe(q, name, MFSQ_SUB_DURABLE, NULL, NULL, &rd[i].sub),
				 0);
	}
	churn = (struct race){.q = q, .stop = &stop};
	ck_assert_int_eq(pthread_create(&tc, NULL, race_churn, &churn), 0);
	for (int i = 0; i < RACE_S; i++)
		ck_assert_int_eq(pthread_create(&ts[i], NULL, race_reader, &rd[i]), 0);
	for (int i = 0; i < RACE_E; i++) {
		enq[i] = (struct race){.q = q, .id = (uint64_t)i};
		ck_assert_int_eq(pthread_create(&te[i], NULL, race_enqueuer, &enq[i]), 0);
	}
	for (int i = 0; i < RACE_E; i++)
		pthread_join(te[i], NULL);
	for (int i = 0; i < RACE_S; i++)
		pthread_join(ts[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(tc, NULL);
	for (int i = 0; i < RACE_E; i++)
		ck_assert_msg(!enq[i].err[0], "%s", enq[i].err);
	for (int i = 0; i < RACE_S; i++) {
		ck_assert_msg(!rd[i].err[0], "%s", rd[i].err);
		ck_assert_uint_eq(rd[i].got, (uint64_t)RACE_E * RACE_N);
	}
	mfsq_stats(q, &st);
	ck_assert_uint_gt(st.cache_evictions, 0); /* the cache was shrunk under them */
	ck_assert_uint_gt(st.cache_hits, 0);
	ck_assert_uint_gt(st.cache_misses, 0);
	for (int i = 0; i < RACE_S; i++)
		mfsq_unsubscribe(rd[i].sub);
	mfsq_close(q);
}
END_TEST

Suite *suite_cache(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("cache");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, keep_up_never_reads_store);
	tcase_add_test(tc, earliest_access_eviction);
	tcase_add_test(tc, restore_after_eviction);
	tcase_add_test(tc, prefetch_next);
	tcase_add_test(tc, budget_respected);
	tcase_add_test(tc, pressure_switch);
	tcase_add_test(tc, no_budget_no_cache);
	tcase_add_test(tc, passed_entries_dropped);
	tcase_add_test(tc, spares_bounded);
	tcase_add_test(tc, own_chunks);
	tcase_add_test(tc, spares_within_budget);
	tcase_add_test(tc, readers_race_shrink);
	suite_add_tcase(s, tc);
	return s;
}
