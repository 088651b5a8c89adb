/* SPDX-License-Identifier: MIT */
/*
 * Rate estimates: events are counted over windows of at least 100 ms and
 * folded into an exponentially weighted average; a rate decays when no
 * event arrives (a stalled dequeuer's rate goes to zero).
 */
#include "internal.h"

#define WINDOW_US 100000.0

void mfsq_rate_add(struct mfsq_rate *r, double n, uint64_t now)
{
	if (!r->t0_us)
		r->t0_us = now;
	r->count += n;
	if ((double)(now - r->t0_us) >= WINDOW_US) {
		double inst = r->count * 1e6 / (double)(now - r->t0_us);

		r->rate = r->rate > 0 ? 0.7 * r->rate + 0.3 * inst : inst;
		r->count = 0;
		r->t0_us = now;
	}
}

double mfsq_rate_get(const struct mfsq_rate *r, uint64_t now)
{
	double idle;

	if (!r->t0_us || now <= r->t0_us)
		return r->rate;
	idle = (double)(now - r->t0_us);
	if (idle < 2 * WINDOW_US)
		return r->rate;
	/* no window closed for a while: blend in the silence */
	return (r->rate * 2 * WINDOW_US + r->count * 1e6) / (idle + 2 * WINDOW_US);
}
