/* SPDX-License-Identifier: MIT */
/* Rule-based subscribers: the rule language (parse errors with their
 * reasons, every attribute and operator against a C oracle), durable rules
 * across a restart, flags, and rules that pass over long runs. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct tenv T;
static mfsq_queue *Q;

static void setup(void)
{
	struct mfsq_config c;

	tenv_open(&T, 0);
	small_cfg(&c, 4, 4096);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &Q), 0);
}

static void teardown(void)
{
	mfsq_close(Q);
	Q = NULL;
	tenv_destroy(&T);
}

/* ---- the language ---- */

START_TEST(parse_ok)
{
	static const char *ok[] = {
	    "true",
	    "false",
	    "priority <= 3 && enqueuer == 7",
	    "prio<3||prio>7",
	    "  !(tag in (1, 2, 0x10)) && size >= 4KiB ",
	    "size < 1MiB && size > 10B",
	    "age < 30s && age >= 0us || age > 2h || age == 1d || age != 5min || age < 7ms",
	    "enqueue_us >= 1700000000s && deliver_us > 0 && expire_us == 0",
	    "delayed || !buffered",
	    "shard == 1 && seq > 0xFF",
	    "((((priority == 0))))",
	    "!!delayed",
	    "tag == 18446744073709551615",
	};
	char why[256];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		strcpy(why, "untouched");
		ck_assert_msg(mfsq_rule_check(ok[i], why, sizeof(why)) == 0, "'%s': %s", ok[i],
			      why);
		ck_assert_str_eq(why, "");
	}
}
END_TEST

START_TEST(parse_errors)
{
	static const struct {
		const char *rule, *why;
	} bad[] = {
	    {"", "column 1: empty rule"},
	    {"   ", "column 4: empty rule"},
	    {"priorty < 3", "column 1: unknown attribute 'priorty'"},
	    {"priority < 10", "column 12: priority is 0..9, not 10"},
	    {"priority < 3s", "column 13: unit 's' does not fit priority"},
	    {"size > 4xyz", "column 9: unknown unit 'xyz'"},
	    {"age > 4KiB", "column 8: unit 'KiB' does not fit age"},
	    {"priority", "column 9: expected ==, !=, <, <=, >, >= or 'in' after 'priority'"},
	    {"priority = 3", "column 10: '=' is not an operator: write '=='"},
	    {"priority < 3 & tag == 1", "column 14: '&' is not an operator: write '&&'"},
	    {"priority < 3 | tag == 1", "column 14: '|' is not an operator: write '||'"},
	    {"priority <", "column 11: expected a number after 'priority ...'"},
	    {"priority < x", "column 12: expected a number after 'priority ...'"},
	    {"(priority < 3", "column 14: missing ')' for the '(' at column 1"},
	    {"priority < 3)", "column 13: ')' without a matching '('"},
	    {"priority < 3 tag == 1", "column 14: expected && or || before 'tag == 1'"},
	    {"priority < 3 &&", "column 16: unexpected end of rule: expected an attribute"},
	    {"&& tag == 1", "column 1: expected an attribute, '!' or '('"},
	    {"delayed == 1", "column 9: delayed is a condition by itself"},
	    {"tag == 18446744073709551616", "column 8: number out of range"},
	    {"age < 300000000000d", "column 7: number out of range once in microseconds"},
	    {"tag == 0x1g", "column 11: unexpected character 'g' in a number"},
	    {"tag in (1, 2", "column 13: expected ',' or ')' in the 'in' list"},
	    {"tag in 1", "column 8: expected '(' after 'in'"},
	    {"tag in ()", "column 9: expected a number after 'tag ...'"},
	};
	char why[512], rule[2048];
	mfsq_sub *s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(mfsq_rule_check(bad[i].rule, why, sizeof(why)) == EINVAL, "'%s'",
			      bad[i].rule);
		ck_assert_msg(!strncmp(why, bad[i].why, strlen(bad[i].why)),
			      "'%s': got '%s', want '%s...'", bad[i].rule, why, bad[i].why);
	}
	/* nesting, list and length limits */
	memset(rule, '(', 33);
	strcpy(rule + 33, "tag == 1");
	memset(rule + 41, ')', 33);
	rule[74] = 0;
	ck_assert_int_eq(mfsq_rule_check(rule, why, sizeof(why)), EINVAL);
	ck_assert_str_eq(why, "column 33: nested deeper than 32");
	memmove(rule, rule + 1, strlen(rule)); /* 32 levels: fine */
	rule[strlen(rule) - 1] = 0;
	ck_assert_int_eq(mfsq_rule_check(rule, why, sizeof(why)), 0);
	strcpy(rule, "tag in (0");
	for (int i = 1; i < 65; i++)
		sprintf(rule + strlen(rule), ",%d", i);
	strcat(rule, ")");
	ck_assert_int_eq(mfsq_rule_check(rule, why, sizeof(why)), EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "more than 64 values"));
	memset(rule, ' ', MFSQ_RULE_MAX + 1);
	memcpy(rule, "true", 4);
	rule[MFSQ_RULE_MAX + 1] = 0;
	ck_assert_int_eq(mfsq_rule_check(rule, why, sizeof(why)), EINVAL);
	ck_assert_str_eq(why, "column 1: rule longer than 1024 bytes");
	rule[MFSQ_RULE_MAX] = 0; /* exactly the limit */
	ck_assert_int_eq(mfsq_rule_check(rule, why, sizeof(why)), 0);
	ck_assert_int_eq(mfsq_rule_check(NULL, why, sizeof(why)), EINVAL);
	ck_assert_str_eq(why, "no rule");
	/* a short buffer gets a cut reason; no buffer is fine */
	ck_assert_int_eq(mfsq_rule_check("priorty < 3", why, 12), EINVAL);
	ck_assert_str_eq(why, "column 1: u");
	ck_assert_int_eq(mfsq_rule_check("priorty < 3", NULL, 0), EINVAL);
	/* subscribing with a bad rule creates nothing */
	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "size >", why, sizeof(why), &s), EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_str_eq(why, "column 7: expected a number after 'size ...'");
	ck_assert_int_eq(mfsq_subscriber_delete(Q, NULL, "d"), ENOENT);
	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, NULL, MFSQ_SUB_DURABLE, "true", why, sizeof(why), &s),
	    EINVAL); /* bad flags: no reason */
	ck_assert_str_eq(why, "");
}
END_TEST

/* ---- evaluation, against the same predicate written in C ---- */

#define NMSG 60

static void put_mix(void)
{
	static char buf[3000];
	struct mfsq_msg_in in[NMSG];

	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < NMSG; i++)
		in[i] =
		    (struct mfsq_msg_in){.data = buf,
					 .len = i % 5 == 0 ? 2040 + (size_t)i / 5 * 2 : (size_t)i,
					 .enqueuer = 5 + (uint64_t)(i / 10 % 4),
					 .prio = (uint8_t)(i % 10),
					 .tag = (uint32_t)(i / 3 % 6)};
	ck_assert_int_eq(mfsq_enqueue_batch(Q, NULL, in, NMSG, NULL), 0);
}

typedef int oracle_fn(const struct mfsq_msg *m);

static int o1(const struct mfsq_msg *m)
{
	return m->prio <= 3 && m->enqueuer == 7;
}
static int o2(const struct mfsq_msg *m)
{
	return m->tag == 1 || m->tag == 4 || m->len >= 2048;
}
static int o3(const struct mfsq_msg *m)
{
	return !(m->prio > 2 && m->prio < 8) && m->enqueuer != 5;
}
static int o4(const struct mfsq_msg *m)
{
	return (m->prio >= 5 || m->tag == 0) && !(m->len < 10);
}
static int o5(const struct mfsq_msg *m)
{
	(void)m;
	return 0;
}
static int o6(const struct mfsq_msg *m)
{
	return m->len > 2 * 1024 && m->len <= 2060; /* 2048 and 2060 are enqueued */
}
static int o7(const struct mfsq_msg *m)
{
	(void)m;
	return 1; /* age < 1 h, times in the past and the future */
}
static int o8(const struct mfsq_msg *m)
{
	return m->shard == mfsq_shard_of(Q, 6) && m->seq > 3;
}

static const struct {
	const char *rule;
	oracle_fn *want;
} cases[] = {
    {"priority <= 3 && enqueuer == 7", o1},
    {"tag in (1, 4) || size >= 2KiB", o2},
    {"!(prio > 2 && prio < 8) && enqueuer != 5", o3},
    {"(priority >= 5 || tag == 0) && !(size < 10B)", o4},
    {"false || tag > 5", o5},
    {"size > 2KiB && size <= 2060", o6},
    {"age < 1h && enqueue_us > 1600000000s && deliver_us < 4000000000s && expire_us == 0", o7},
    {"shard == SHARD6 && seq > 3", o8},
};

START_TEST(evaluation)
{
	char rule[128], why[256];
	struct mfsq_msg out[NMSG];
	struct mfsq_stats st0, st;
	size_t n;
	mfsq_sub *all, *s;
	struct mfsq_msg every[NMSG];

	/* every message, for the oracle, from a subscriber without a rule */
	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &all), 0);
	put_mix();
	ck_assert_int_eq(mfsq_dequeue(all, every, NMSG, &n, 10000), 0);
	ck_assert_uint_eq(n, NMSG);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t want = 0, got = 0;
		const char *sh = strstr(cases[c].rule, "SHARD6");

		if (sh)
			snprintf(rule, sizeof(rule), "%.*s%u%s", (int)(sh - cases[c].rule),
				 cases[c].rule, mfsq_shard_of(Q, 6), sh + 6);
		else
			snprintf(rule, sizeof(rule), "%s", cases[c].rule);
		ck_assert_msg(mfsq_subscribe_rule(Q, NULL, MFSQ_SUB_FROM_START, rule, why,
						  sizeof(why), &s) == 0,
			      "%s: %s", rule, why);
		ck_assert_str_eq(mfsq_sub_rule(s), rule);
		mfsq_stats(Q, &st0);
		for (size_t i = 0; i < NMSG; i++)
			want += (size_t)cases[c].want(&every[i]);
		while (mfsq_dequeue(s, out, NMSG, &n, 0) == 0) {
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(cases[c].want(&out[i]), "%s took seq %llu", rule,
					      (unsigned long long)out[i].seq);
			got += n;
		}
		ck_assert_msg(got == want, "%s: %zu delivered, %zu expected", rule, got, want);
		mfsq_stats(Q, &st);
		ck_assert_uint_eq(st.filtered - st0.filtered, NMSG - want);
		mfsq_unsubscribe(s);
	}
	mfsq_unsubscribe(all);
}
END_TEST

/* The tag travels with the message (stream, delay shard, memory-only). */
START_TEST(tag_attribute)
{
	struct mfsq_msg_in in[3] = {
	    {.data = "a", .len = 1, .enqueuer = 1, .tag = 0xdeadbeef},
	    {.data = "b", .len = 1, .enqueuer = 1, .tag = 7, .deliver_us = 0},
	    {.data = "c", .len = 1, .enqueuer = 1, .tag = 9, .flags = MFSQ_MSG_BUFFERED},
	};
	struct mfsq_msg m[3];
	mfsq_sub *s;
	size_t n, got = 0;

	ck_assert_int_eq(mfsq_subscribe(Q, NULL, 0, NULL, NULL, &s), 0);
	in[1].deliver_us = now_us() + 20000;
	ck_assert_int_eq(mfsq_enqueue_batch(Q, NULL, in, 3, NULL), 0);
	while (got < 3) {
		ck_assert_int_eq(mfsq_dequeue(s, &m[got], 3 - got, &n, 10000), 0);
		got += n;
	}
	for (int i = 0; i < 3; i++) {
		if (m[i].flags & MFSQ_MSG_BUFFERED)
			ck_assert_uint_eq(m[i].tag, 9);
		else if (m[i].flags & MFSQ_MSG_DELAYED)
			ck_assert_uint_eq(m[i].tag, 7);
		else
			ck_assert_uint_eq(m[i].tag, 0xdeadbeef);
	}
	mfsq_unsubscribe(s);
}
END_TEST

/* The flags: "delayed" and "buffered". */
START_TEST(flags)
{
	struct mfsq_msg_in in[3] = {
	    {.data = "now", .len = 3, .enqueuer = 1},
	    {.data = "later", .len = 5, .enqueuer = 1},
	    {.data = "mem", .len = 3, .enqueuer = 1, .flags = MFSQ_MSG_BUFFERED},
	};
	struct mfsq_msg m;
	mfsq_sub *d, *b, *p;
	size_t n;

	mfsq_pressure_mode(MFSQ_PRESSURE_OFF);
	ck_assert_int_eq(mfsq_subscribe_rule(Q, NULL, 0, "delayed", NULL, 0, &d), 0);
	ck_assert_int_eq(mfsq_subscribe_rule(Q, NULL, 0, "buffered", NULL, 0, &b), 0);
	ck_assert_int_eq(mfsq_subscribe_rule(Q, NULL, 0, "!delayed && !buffered", NULL, 0, &p), 0);
	uint64_t seqs[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
	in[1].deliver_us = now_us() + 20000;
	ck_assert_int_eq(mfsq_enqueue_batch(Q, NULL, in, 3, seqs), 0);
	/* seq 0: it went to the delay shard; else the machine stalled past its
	 * due time before the put, and it is an ordinary message (put.c) */
	bool delayed = seqs[1] == 0;
	if (delayed) {
		get_one(d, &m);
		ck_assert_mem_eq(m.data, "later", 5);
	}
	get_one(b, &m);
	ck_assert_mem_eq(m.data, "mem", 3);
	get_one(p, &m);
	ck_assert_mem_eq(m.data, "now", 3);
	if (!delayed) {
		get_one(p, &m);
		ck_assert_mem_eq(m.data, "later", 5);
	}
	ck_assert_int_eq(mfsq_dequeue(d, &m, 1, &n, 0), EAGAIN);
	ck_assert_int_eq(mfsq_dequeue(b, &m, 1, &n, 0), EAGAIN);
	ck_assert_int_eq(mfsq_dequeue(p, &m, 1, &n, 0), EAGAIN);
	mfsq_unsubscribe(d);
	mfsq_unsubscribe(b);
	mfsq_unsubscribe(p);
	mfsq_pressure_mode(MFSQ_PRESSURE_AUTO);
}
END_TEST

/* A durable subscriber's rule is stored: it survives a restart, is kept
 * when resubscribing without one, replaced by a new one, removed by
 * "true", left alone by a bad one, and deleted with the subscriber. */
START_TEST(durable_rule)
{
	char why[256];
	struct mfsq_msg m;
	mfsq_sub *s;
	size_t n;

	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "enqueuer == 2", why, sizeof(why), &s),
	    0);
	mfsq_unsubscribe(s);
	mfsq_close(Q);
	tenv_reopen(&T);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_str_eq(mfsq_sub_rule(s), "enqueuer == 2");
	for (uint64_t i = 0; i < 6; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1 + i % 2, i, NULL), 0);
	for (uint64_t i = 1; i < 6; i += 2) {
		uint64_t e, k;

		get_one(s, &m);
		ck_assert_int_eq(parse_msg(&m, &e, &k), 0);
		ck_assert_uint_eq(e, 2);
		ck_assert_uint_eq(k, i);
	}
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	mfsq_unsubscribe(s);
	/* a bad rule changes nothing */
	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "enqueuer == ", why, sizeof(why), &s),
	    EINVAL);
	ck_assert_int_eq(mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, NULL, why, sizeof(why), &s),
			 0);
	ck_assert_str_eq(mfsq_sub_rule(s), "enqueuer == 2");
	mfsq_unsubscribe(s);
	/* replaced, then removed */
	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "enqueuer == 1", why, sizeof(why), &s),
	    0);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_str_eq(mfsq_sub_rule(s), "enqueuer == 1");
	mfsq_unsubscribe(s);
	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "true", why, sizeof(why), &s), 0);
	ck_assert_ptr_null(mfsq_sub_rule(s));
	mfsq_unsubscribe(s);
	mfsq_close(Q);
	tenv_reopen(&T);
	ck_assert_int_eq(mfsq_open(T.env, "q", NULL, 0, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_ptr_null(mfsq_sub_rule(s));
	mfsq_unsubscribe(s);
	/* deleted with the subscriber */
	ck_assert_int_eq(
	    mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "tag == 3", why, sizeof(why), &s), 0);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscriber_delete(Q, NULL, "d"), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_ptr_null(mfsq_sub_rule(s));
	mfsq_unsubscribe(s);
}
END_TEST

/* A rule that passes over thousands of messages still finds the one it
 * takes within one call, and acknowledging moves past the skipped ones. */
START_TEST(long_skip)
{
	enum { N = 10000 };
	struct mfsq_msg_in *in = calloc(N, sizeof(*in));
	struct mfsq_msg m;
	mfsq_sub *s;
	size_t n;

	ck_assert_ptr_nonnull(in);
	for (int i = 0; i < N; i++)
		in[i] =
		    (struct mfsq_msg_in){.data = "x", .len = 1, .enqueuer = 3, .tag = i == N - 1};
	ck_assert_int_eq(mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "tag == 1", NULL, 0, &s), 0);
	ck_assert_int_eq(mfsq_enqueue_batch(Q, NULL, in, N, NULL), 0);
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(m.tag, 1);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscribe_rule(Q, "d", MFSQ_SUB_DURABLE, "true", NULL, 0, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, &m, 1, &n, 0), EAGAIN);
	mfsq_unsubscribe(s);
	free(in);
}
END_TEST

Suite *suite_rule(void)
{
	Suite *s = suite_create("rule");
	TCase *tc = tcase_create("rule");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, parse_ok);
	tcase_add_test(tc, parse_errors);
	tcase_add_test(tc, evaluation);
	tcase_add_test(tc, tag_attribute);
	tcase_add_test(tc, flags);
	tcase_add_test(tc, durable_rule);
	tcase_add_test(tc, long_skip);
	suite_add_tcase(s, tc);
	return s;
}
