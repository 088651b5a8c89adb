/* SPDX-License-Identifier: MIT */
/*
 * Waking the subscribers of this process that wait in mfsq_dequeue(): the
 * wait generation, the condition variable, and the moving average of the
 * gaps between wake-ups that coalesced waiting reads (coalesce.c). Calls
 * only the clock (clock.c).
 */
#include "internal.h"

void mfsq_wake(mfsq_queue *q)
{
	uint64_t now = mfsq_mono_us(), last = atomic_exchange(&q->wake_us, now);
	uint64_t gap = now > last ? now - last : 0;

	/* racing wakers may mix their updates: it is an estimate */
	atomic_store(&q->wake_gap_us, (atomic_load(&q->wake_gap_us) * 7 + gap) / 8);
	pthread_mutex_lock(&q->lock);
	atomic_fetch_add(&q->gen, 1);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void mfsq_notify(mfsq_queue *q)
{
	mfsq_wake(q);
}
