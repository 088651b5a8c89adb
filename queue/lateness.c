/* SPDX-License-Identifier: MIT */
/*
 * The lateness counters of delayed messages (struct mfsq_counters:
 * lateness_max and a histogram of power-of-two buckets): recording one
 * promotion's lateness, and reading a percentile back. Calls no other file
 * of the library.
 */
#include "internal.h"

void mfsq_late_record(mfsq_queue *q, uint64_t late_us)
{
	unsigned b = 0;

	while (b < 63 && (1ull << b) <= late_us)
		b++;
	atomic_fetch_add(&q->c.late_hist[b], 1);
	uint64_t m = atomic_load(&q->c.lateness_max);
	while (late_us > m && !atomic_compare_exchange_weak(&q->c.lateness_max, &m, late_us))
		;
}

uint64_t mfsq_late_pct(mfsq_queue *q, double p)
{
	uint64_t tot = 0, acc = 0;

	for (int b = 0; b < 64; b++)
		tot += atomic_load(&q->c.late_hist[b]);
	if (!tot)
		return 0;
	for (int b = 0; b < 64; b++) {
		acc += atomic_load(&q->c.late_hist[b]);
		if ((double)acc >= p * (double)tot) {
			uint64_t ub = b ? (1ull << b) - 1 : 0; /* bucket's upper bound */
			uint64_t mx = atomic_load(&q->c.lateness_max);

			return ub < mx ? ub : mx;
		}
	}
	return atomic_load(&q->c.lateness_max);
}
