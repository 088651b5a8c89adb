/* SPDX-License-Identifier: MIT */
/*
 * Cache sizing against a brute-force simulation. The simulation steps a
 * workload (enqueuers and readers per shard, in ticks), runs a cache of a
 * given size with earliest-estimated-access eviction, and counts restores
 * (subshards a reader enters that are not cached). For each generated
 * workload, every size up to the budget is simulated; the size chosen by
 * mfsq_sizing_choose() from rates and lags measured in a warm-up must give a
 * restore overhead within 10 % of the best size under that budget.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define MAXR 6
#define MAXS 4
#define MAXC 4096

struct wl {
	const char *name;
	unsigned nshards, msgs; /* subshard size */
	double enq[MAXS];	/* messages per tick */
	unsigned burst;		/* 0: steady; else on/off half-period in ticks */
	unsigned nreaders[MAXS];
	double rate[MAXS][MAXR]; /* messages per tick */
	double lag0[MAXS][MAXR]; /* initial lag */
};

struct sim {
	const struct wl *w;
	double head[MAXS], pos[MAXS][MAXR];
	double peak[MAXS][MAXR], read[MAXS][MAXR], written[MAXS];
	unsigned cap, n;
	struct {
		unsigned s;
		long idx;
	} c[MAXC];
	unsigned long restores;
};

static double next_access(const struct sim *m, unsigned s, long idx)
{
	const struct wl *w = m->w;
	double t = INFINITY, lo = (double)idx * w->msgs, hi = lo + w->msgs;

	if ((long)(m->head[s] / w->msgs) == idx)
		return 0;
	for (unsigned r = 0; r < w->nreaders[s]; r++) {
		double p = m->pos[s][r], a;

		if (p >= hi)
			continue;
		if (p >= lo)
			return 0;
		a = w->rate[s][r] > 0 ? (lo - p) / w->rate[s][r] : 1e9 + lo - p;
		if (a < t)
			t = a;
	}
	return t;
}

static int cached(const struct sim *m, unsigned s, long idx)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->c[i].s == s && m->c[i].idx == idx)
			return 1;
	return 0;
}

static void insert(struct sim *m, unsigned s, long idx)
{
	double worst = -1;
	unsigned v = 0;

	if (cached(m, s, idx))
		return;
	m->c[m->n].s = s;
	m->c[m->n].idx = idx;
	m->n++;
	if (m->n <= m->cap)
		return;
	for (unsigned i = 0; i < m->n; i++) {
		double t = next_access(m, m->c[i].s, m->c[i].idx);

		if (t > worst) {
			worst = t;
			v = i;
		}
	}
	m->c[v] = m->c[--m->n];
}

static void init(struct sim *m, const struct wl *w, unsigned cap)
{
	memset(m, 0, sizeof(*m));
	m->w = w;
	m->cap = cap;
	for (unsigned s = 0; s < w->nshards; s++) {
		m->head[s] = 100000;
		for (unsigned r = 0; r < w->nreaders[s]; r++)
			m->pos[s][r] = m->head[s] - w->lag0[s][r];
	}
}

static void step(struct sim *m, unsigned long tick, int count)
{
	const struct wl *w = m->w;

	for (unsigned s = 0; s < w->nshards; s++) {
		double e = w->enq[s];
		long before = (long)(m->head[s] / w->msgs);

		if (w->burst)
			e = (tick / w->burst) % 2 ? 0 : 2 * e;
		m->head[s] += e;
		m->written[s] += e;
		if ((long)(m->head[s] / w->msgs) != before)
			insert(m, s, (long)(m->head[s] / w->msgs));
		for (unsigned r = 0; r < w->nreaders[s]; r++) {
			double p = m->pos[s][r], np = p + w->rate[s][r];
			long from = (long)(p / w->msgs), to;

			if (np > m->head[s])
				np = m->head[s];
			to = (long)(np / w->msgs);
			m->read[s][r] += np - p;
			m->pos[s][r] = np;
			for (long i = from + 1; i <= to; i++) {
				if (!cached(m, s, i)) {
					if (count)
						m->restores++;
					insert(m, s, i);
				}
			}
			if (m->head[s] - np > m->peak[s][r])
				m->peak[s][r] = m->head[s] - np;
		}
	}
}

#define WARM 2000
#define RUN  6000

static unsigned long simulate(const struct wl *w, unsigned cap)
{
	struct sim *m = malloc(sizeof(*m));
	unsigned long r;

	init(m, w, cap);
	for (unsigned long t = 0; t < WARM + RUN; t++)
		step(m, t, t >= WARM);
	r = m->restores;
	free(m);
	return r;
}

/* Rates and peak lags as the engine measures them, from the warm-up. */
static unsigned choose(const struct wl *w, unsigned budget)
{
	struct sim *m = malloc(sizeof(*m));
	struct mfsq_size_shard sh[MAXS];
	struct mfsq_size_reader rd[MAXS][MAXR];
	unsigned c;

	init(m, w, budget);
	for (unsigned long t = 0; t < WARM; t++)
		step(m, t, 0);
	for (unsigned s = 0; s < w->nshards; s++) {
		sh[s].enq_rate = m->written[s] / WARM;
		sh[s].subshard_msgs = w->msgs;
		sh[s].nreaders = w->nreaders[s];
		sh[s].readers = rd[s];
		for (unsigned r = 0; r < w->nreaders[s]; r++) {
			rd[s][r].rate = m->read[s][r] / WARM;
			rd[s][r].lag = m->peak[s][r];
		}
	}
	c = mfsq_sizing_choose(sh, w->nshards, budget);
	if (getenv("SIZING_DEBUG")) {
		for (unsigned s = 0; s < w->nshards; s++)
			for (unsigned r = 0; r < w->nreaders[s]; r++)
				fprintf(stderr, "  s%u r%u rate %.2f peak %.0f\n", s, r,
					rd[s][r].rate, rd[s][r].lag);
		for (unsigned k = 1; k <= budget; k++)
			fprintf(stderr, "%s cap %u est %.3f sim %.3f\n", w->name, k,
				mfsq_sizing_overhead(sh, w->nshards, k),
				simulate(w, k) / (double)RUN);
	}
	free(m);
	return c;
}

static const struct wl workloads[] = {
    {.name = "steady",
     .nshards = 1,
     .msgs = 50,
     .enq = {10},
     .nreaders = {4},
     .rate = {{10, 10, 10, 10}},
     .lag0 = {{0, 120, 400, 1000}}},
    {.name = "steady-shards",
     .nshards = 3,
     .msgs = 40,
     .enq = {5, 10, 20},
     .nreaders = {2, 3, 2},
     .rate = {{5, 5}, {10, 10, 10}, {20, 20}},
     .lag0 = {{0, 300}, {10, 200, 700}, {0, 900}}},
    {.name = "bursty",
     .nshards = 2,
     .msgs = 50,
     .enq = {10, 10},
     .burst = 50,
     .nreaders = {3, 2},
     .rate = {{30, 30, 30}, {30, 30}},
     .lag0 = {{0, 0, 0}, {0, 0}}},
    {.name = "lagging",
     .nshards = 2,
     .msgs = 50,
     .enq = {10, 10},
     .nreaders = {3, 2},
     .rate = {{10, 10, 5}, {10, 6}},
     .lag0 = {{0, 250, 3000}, {100, 2000}}},
    {.name = "mixed",
     .nshards = 3,
     .msgs = 30,
     .enq = {3, 12, 8},
     .nreaders = {2, 4, 3},
     .rate = {{3, 3}, {12, 12, 12, 8}, {8, 8, 8}},
     .lag0 = {{0, 100}, {0, 60, 500, 4000}, {30, 240, 1500}}},
};

START_TEST(against_brute_force)
{
	const struct wl *w = &workloads[_i];
	static const unsigned budgets[] = {6, 12, 24, 48, 96};

	for (size_t b = 0; b < sizeof(budgets) / sizeof(budgets[0]); b++) {
		unsigned budget = budgets[b], chosen = choose(w, budget);
		unsigned long best = ~0ul, got;

		ck_assert_uint_ge(chosen, 1);
		ck_assert_uint_le(chosen, budget);
		for (unsigned c = 1; c <= budget; c++) {
			unsigned long r = simulate(w, c);

			if (r < best)
				best = r;
		}
		got = simulate(w, chosen);
		ck_assert_msg((double)got <= (double)best * 1.10 + 2,
			      "%s budget %u: chosen %u restores %lu, best %lu", w->name, budget,
			      chosen, got, best);
	}
}
END_TEST

/* The model itself: more memory never costs more, a covered gap costs nothing. */
START_TEST(model_monotone)
{
	struct mfsq_size_reader rd[3] = {{10, 0}, {10, 500}, {10, 2000}};
	struct mfsq_size_shard sh = {10, 100, 3, rd};
	double prev = INFINITY;

	for (unsigned c = 1; c < 40; c++) {
		double o = mfsq_sizing_overhead(&sh, 1, c);

		ck_assert(o <= prev + 1e-12);
		prev = o;
	}
	ck_assert(mfsq_sizing_overhead(&sh, 1, 1000) < 1e-9);
	ck_assert(mfsq_sizing_overhead(&sh, 1, 1) > 0.19);
	/* nothing read: nothing to pay, the smallest size is chosen */
	rd[0].rate = rd[1].rate = rd[2].rate = 0;
	ck_assert_uint_eq(mfsq_sizing_choose(&sh, 1, 50), 1);
}
END_TEST

Suite *suite_sizing(void)
{
	Suite *s = suite_create("sizing");
	TCase *tc = tcase_create("sizing");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, against_brute_force, 0,
			    (int)(sizeof(workloads) / sizeof(workloads[0])));
	tcase_add_test(tc, model_monotone);
	suite_add_tcase(s, tc);
	return s;
}
