/* governor.c: token buckets and the fair share of workers. */
#include "governor.h"
#include "suites.h"

#define SEC 1000000000ull

START_TEST(unlimited)
{
	struct mfs_bucket b;
	mfs_bucket_set(&b, 0, 1, 0);
	for (int i = 0; i < 1000; i++)
		mfs_bucket_take(&b, 1e9);
	ck_assert(mfs_bucket_ok(&b));
	ck_assert_uint_eq(mfs_bucket_wait_ns(&b), 0);
}
END_TEST

START_TEST(rate)
{
	struct mfs_bucket b;
	mfs_bucket_set(&b, 100, 1, 0); /* burst 10 */
	for (int i = 0; i < 10; i++)
		mfs_bucket_take(&b, 1);
	ck_assert(mfs_bucket_ok(&b));
	mfs_bucket_take(&b, 1);
	ck_assert(!mfs_bucket_ok(&b));
	/* one token accrues in 10 ms */
	uint64_t w = mfs_bucket_wait_ns(&b);
	ck_assert_uint_gt(w, 9000000);
	ck_assert_uint_lt(w, 11000000);
	mfs_bucket_refill(&b, w);
	ck_assert(mfs_bucket_ok(&b));
	/* never more than the burst */
	mfs_bucket_refill(&b, 100 * SEC);
	ck_assert(b.tokens <= 10.0 + 1e-9);
}
END_TEST

START_TEST(debt)
{
	struct mfs_bucket b;
	mfs_bucket_set(&b, 1 << 20, 1 << 20, 0); /* 1 MiB/s, burst 1 MiB */
	mfs_bucket_take(&b, 3 << 20);            /* a large write is admitted */
	ck_assert(!mfs_bucket_ok(&b));
	mfs_bucket_refill(&b, SEC);
	ck_assert(!mfs_bucket_ok(&b));
	mfs_bucket_refill(&b, 2 * SEC);
	ck_assert(mfs_bucket_ok(&b));
}
END_TEST

START_TEST(fair)
{
	/* alone: every worker */
	ck_assert_uint_eq(mfs_fair_limit(8, 1, 1, 0), 8);
	/* others exist but idle: one worker stays free */
	ck_assert_uint_eq(mfs_fair_limit(8, 3, 1, 0), 7);
	/* busy neighbours: a share each */
	ck_assert_uint_eq(mfs_fair_limit(8, 3, 2, 0), 4);
	ck_assert_uint_eq(mfs_fair_limit(8, 3, 3, 0), 3);
	ck_assert_uint_eq(mfs_fair_limit(8, 100, 100, 0), 1);
	/* the cap wins when lower */
	ck_assert_uint_eq(mfs_fair_limit(8, 1, 1, 2), 2);
	ck_assert_uint_eq(mfs_fair_limit(1, 5, 5, 0), 1);
}
END_TEST

START_TEST(yield_needs_heavy_and_light)
{
	uint64_t now = 100 * SEC;
	/* heavy, a light session active, no guard: yield */
	ck_assert(mfs_should_yield(now, now + 1, now + 1, 0));
	/* not heavy (any more) */
	ck_assert(!mfs_should_yield(now, now, now + 1, 0));
	ck_assert(!mfs_should_yield(now, 0, now + 1, 0));
	/* no light session active */
	ck_assert(!mfs_should_yield(now, now + 1, now, 0));
	/* the starvation guard exempts it until unyield_until, not after */
	ck_assert(!mfs_should_yield(now, now + 1, now + 1, now + 1));
	ck_assert(mfs_should_yield(now, now + 1, now + 1, now));
}
END_TEST

START_TEST(starvation_guard)
{
	uint64_t now = 100 * SEC;
	/* served in time: no exemption */
	ck_assert_uint_eq(mfs_yield_guard(now, 0), 0);
	ck_assert_uint_eq(mfs_yield_guard(now, MFS_STARVE_NS), 0);
	/* too slow: normal priority for MFS_UNYIELD_NS from now */
	uint64_t until = mfs_yield_guard(now, MFS_STARVE_NS + 1);
	ck_assert_uint_eq(until, now + MFS_UNYIELD_NS);
	ck_assert(!mfs_should_yield(now, now + SEC, now + SEC, until));
	ck_assert(!mfs_should_yield(until - 1, now + SEC, now + SEC, until));
	ck_assert(mfs_should_yield(until, now + SEC, now + SEC, until));
}
END_TEST

START_TEST(share_split)
{
	double idle[3] = {0, 0, 0}, busy[3] = {9, 1, 0};
	uint64_t none[3] = {0, 0, 0}, capped[3] = {100, 0, 0}, out[3];

	/* idle: equal shares */
	mfs_share_split(1200, 3, idle, none, out);
	ck_assert_uint_eq(out[0], 400);
	ck_assert_uint_eq(out[1], 400);
	ck_assert_uint_eq(out[2], 400);
	/* busy: a floor of a quarter of 400 each, the other 900 by weight 9:1:0 */
	mfs_share_split(1200, 3, busy, none, out);
	ck_assert_uint_eq(out[0], 100 + 810);
	ck_assert_uint_eq(out[1], 100 + 90);
	ck_assert_uint_eq(out[2], 100);
	/* the busiest is capped at its own mem=: the rest goes to the others */
	mfs_share_split(1200, 3, busy, capped, out);
	ck_assert_uint_eq(out[0], 100);
	ck_assert_uint_le(out[0] + out[1] + out[2], 1200);
	ck_assert_uint_ge(out[1], 1000);
	ck_assert_uint_eq(out[2], 100);
	/* an idle one capped below an equal share keeps its whole cap, not
	 * the floor, while another is busy */
	uint64_t held[3] = {300, 0, 0};
	double second[3] = {0, 1, 0};
	mfs_share_split(1200, 3, second, held, out);
	ck_assert_uint_eq(out[0], 300);
	ck_assert_uint_eq(out[1], 800);
	ck_assert_uint_eq(out[2], 100);
}
END_TEST

START_TEST(worker_share)
{
	/* demand under one worker: no share */
	ck_assert_uint_eq(mfs_worker_share(8, 0.5, 0), 0);
	/* what it needs (ceil(demand) + 1), within what the others leave */
	ck_assert_uint_eq(mfs_worker_share(8, 2.5, 0), 4);
	ck_assert_uint_eq(mfs_worker_share(8, 6.5, 1), 6);
	ck_assert_uint_eq(mfs_worker_share(8, 6.5, 7), 0);
	ck_assert_uint_eq(mfs_worker_share(1, 6.5, 0), 0);
}
END_TEST

Suite *mfs_governor_suite(void)
{
	Suite *s = suite_create("governor");
	TCase *tc = tcase_create("buckets");
	tcase_add_test(tc, unlimited);
	tcase_add_test(tc, rate);
	tcase_add_test(tc, debt);
	tcase_add_test(tc, fair);
	suite_add_tcase(s, tc);
	tc = tcase_create("yield");
	tcase_add_test(tc, yield_needs_heavy_and_light);
	tcase_add_test(tc, starvation_guard);
	suite_add_tcase(s, tc);
	tc = tcase_create("usage");
	tcase_add_test(tc, share_split);
	tcase_add_test(tc, worker_share);
	suite_add_tcase(s, tc);
	return s;
}
