/* SPDX-License-Identifier: MIT */
/*
 * Cache sizing model. In a shard, readers sorted by lag cut the stream
 * behind the tail into gaps: gap i lies between reader i-1 (or the tail)
 * and reader i, c_i = gap / subshard_msgs subshards long on average.
 *
 * - Uncovered, reader i restores each subshard it enters that is not the
 *   one reader i-1 still shares with it: saving_i * min(1, c_i) restores/s
 *   (saving_i = rate_i / subshard_msgs), holding u_i = min(1, c_i) subshards.
 * - Covered, the gap costs c_i subshards and no restore: each subshard is
 *   kept from its creation until reader i has read it.
 * - Earliest-estimated-access eviction covers gaps in order of the time
 *   reader i needs to cross them (gap / rate_i): a threshold on next access
 *   time. The gap at the threshold is partly covered: the readers find the
 *   subshards nearest to them cached, a fraction (memory given / memory
 *   needed) of the time, which the brute-force simulation confirms.
 *
 * Memory: shards (one tail each) + sum u_i + what covering adds. Below that
 * the cache thrashes: the overhead rises towards every subshard a reader
 * enters being a restore (linearly, as tails are only partly filled).
 */
#include <math.h>
#include <stdlib.h>

#include "mfsq.h"

struct gap {
	double tau, saving, c;
};

static int gap_cmp(const void *a, const void *b)
{
	const struct gap *x = a, *y = b;

	return x->tau < y->tau ? -1 : x->tau > y->tau;
}

static int by_lag(const void *a, const void *b)
{
	const struct mfsq_size_reader *x = a, *y = b;

	return x->lag < y->lag ? -1 : x->lag > y->lag;
}

static size_t gaps_of(const struct mfsq_size_shard *sh, unsigned n, struct gap *g)
{
	size_t k = 0;

	for (unsigned s = 0; s < n; s++) {
		struct mfsq_size_reader *r = malloc(sh[s].nreaders * sizeof(*r) + 1);
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
			g[k].c = gap / m;
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
	double mem = nshards, over = 0, all = 0;

	for (size_t j = 0; j < k; j++) {
		double u = g[j].c < 1 ? g[j].c : 1;

		mem += u;
		over += g[j].saving * u;
		all += g[j].saving;
	}
	if (mem > cap) /* thrashing, less so the closer the size is to mem */
		return all - (all - over) * (double)cap / mem;
	for (size_t j = 0; j < k; j++) {
		double u = g[j].c < 1 ? g[j].c : 1, need = g[j].c - u;

		if (mem + need <= cap) {
			mem += need;
			over -= g[j].saving * u;
			continue;
		}
		over -= g[j].saving * u * (cap - mem) / need;
		break;
	}
	return over < 0 ? 0 : over;
}

static size_t prepare(const struct mfsq_size_shard *sh, unsigned n, struct gap **out)
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

double mfsq_sizing_overhead(const struct mfsq_size_shard *sh, unsigned n, unsigned cap)
{
	struct gap *g;
	size_t k = prepare(sh, n, &g);
	double o = g ? overhead(g, k, n, cap) : 0;

	free(g);
	return o;
}

/* Gaps the size covers (their subshard counts vary by one as readers move). */
static unsigned covered(const struct gap *g, size_t k, unsigned nshards, unsigned cap)
{
	double mem = nshards;
	unsigned n = 0;

	for (size_t j = 0; j < k; j++)
		mem += g[j].c < 1 ? g[j].c : 1;
	for (size_t j = 0; j < k && mem <= cap; j++) {
		double need = g[j].c < 1 ? 0 : g[j].c - 1;

		if (mem + need > cap)
			break;
		mem += need;
		n += need > 0;
	}
	return n;
}

unsigned mfsq_sizing_choose(const struct mfsq_size_shard *sh, unsigned n, unsigned budget)
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
	/* headroom: a covered gap spans one subshard more part of the time */
	cap += covered(g, k, n, cap);
	free(g);
	return cap < budget ? cap : budget;
}
