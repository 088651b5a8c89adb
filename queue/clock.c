/* SPDX-License-Identifier: MIT */
/*
 * The queue's two clocks. Calls no other file of the library.
 * - mfsq_now_us(): wall time (CLOCK_REALTIME), the times stored with
 *   messages: they survive restarts and are shared between processes.
 * - mfsq_mono_us(): monotonic time, for intervals inside this process
 *   (spinning, coalescing, map trims, ack folds).
 */
#include <time.h>

#include "internal.h"

static uint64_t clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mfsq_now_us(void)
{
	return clock_us(CLOCK_REALTIME);
}

uint64_t mfsq_mono_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}
