/* SPDX-License-Identifier: MIT */
/*
 * Cache sizing model. In a shard, readers sorted by lag cut the stream
 * behind the tail into gaps: gap i lies between reader i-1 (or the tail)
 * and reader i. With earliest-estimated-access eviction a subshard stays
 * cached from its creation until the next reader needs it only if the
 * whole gap fits: a partly cached gap is evicted from its far end, which is
 * exactly what the reader will need, so reader i then restores every
 * subshard it reads (rate_i / subshard_msgs per second) and holds one.
 * The policy covers gaps in order of their time to be crossed
 * (gap / rate_i): the threshold on next access time. Memory:
 *
 *   shards (tails) + sum over covered gaps of ceil(gap / msgs)
 *                  + one per uncovered reader
 */
#include <math.h>
#include <stdlib.h>

#include "mfsq.h"

struct gap {
	double tau, saving;
	unsigned cost;
};

static int gap_cmp(const void *a, const void *b)
{
	const struct gap *x = a, *y = b;

	return x->tau < y->tau ? -1 : x->tau > y->tau;
}

static int by_lag(const void *a, const void *b)
{
	const struct mq_size_reader *x = a, *y = b;

	return x->lag < y->lag ? -1 : x->lag > y->lag;
}

static size_t gaps_of(const struct mq_size_shard *sh, unsigned n, struct gap *g)
{
	size_t k = 0;

	for (unsigned s = 0; s < n; s++) {
		struct mq_size_reader *r = malloc(sh[s].nreaders * sizeof(*r) + 1);
		double prev = 0, m = sh[s].subshard_msgs > 0 ? sh[s].subshard_msgs : 1;

		if (!r)
			continue;
		for (unsigned i = 0; i < sh[s].nreaders; i++)
			r[i] = sh[s].readers[i];
		qsort(r, sh[s].nreaders, sizeof(*r), by_lag);
		for (unsigned i = 0; i < sh[s].nreaders; i++) {
			double gap = r[i].lag - prev;

			if (gap < 0)
				gap = 0;
			prev = r[i].lag > prev ? r[i].lag : prev;
			if (r[i].rate <= 0)
				continue; /* reads nothing: costs nothing */
			g[k].cost = (unsigned)ceil(gap / m);
			g[k].saving = r[i].rate / m;
			g[k].tau = gap / r[i].rate;
			k++;
		}
		free(r);
	}
	return k;
}

static double overhead(const struct gap *g, size_t k, unsigned nshards, unsigned cap)
{
	double mem = nshards + (double)k, over = 0;
	size_t i = 0;

	for (size_t j = 0; j < k; j++)
		over += g[j].saving;
	if (mem > cap)
		return over;
	for (; i < k; i++) {
		double add = (double)g[i].cost - 1;

		if (mem + add > cap)
			break;
		mem += add;
		over -= g[i].saving;
	}
	return over < 0 ? 0 : over;
}

static size_t prepare(const struct mq_size_shard *sh, unsigned n, struct gap **out)
{
	size_t tot = 0, k;

	for (unsigned s = 0; s < n; s++)
		tot += sh[s].nreaders;
	*out = malloc((tot + 1) * sizeof(**out));
	if (!*out)
		return 0;
	k = gaps_of(sh, n, *out);
	qsort(*out, k, sizeof(**out), gap_cmp);
	return k;
}

double mq_sizing_overhead(const struct mq_size_shard *sh, unsigned n, unsigned cap)
{
	struct gap *g;
	size_t k = prepare(sh, n, &g);
	double o = g ? overhead(g, k, n, cap) : 0;

	free(g);
	return o;
}

unsigned mq_sizing_choose(const struct mq_size_shard *sh, unsigned n, unsigned budget)
{
	struct gap *g;
	size_t k = prepare(sh, n, &g);
	double best;
	unsigned cap;

	if (!g)
		return budget;
	best = overhead(g, k, n, budget);
	for (cap = 1; cap < budget; cap++)
		if (overhead(g, k, n, cap) <= best * 1.02 + 1e-9)
			break;
	free(g);
	return cap;
}
