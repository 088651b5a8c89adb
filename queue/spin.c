/* SPDX-License-Identifier: MIT */
/*
 * Brief spinning before sleeping. A group commit without sync takes a few
 * microseconds, and so does the gap between two enqueues of a busy
 * enqueuer; sleeping on a condition variable and being woken costs more
 * than that on a virtual machine (perf, batch-1 streams on 2 vCPUs: half
 * of the samples in futex wake-ups and context switches). A waiter that
 * expects its word to change soon watches it for up to MFSQ_SPIN_US first.
 * Only the group commit's waiters spin: a subscriber that spun for the
 * next message reacted at once and acknowledged in a commit of its own
 * instead of the enqueuer's next one, and with 4 subscribers it kept the
 * others from a CPU (A/B medians, batch 1: 1 enqueuer and 4 subscribers
 * 36k msg/s without spinning, 38k with both spinning, 60k with the group
 * commit's waiters alone).
 *
 * Spinning takes a CPU from the thread that would change the word, so at
 * most one thread fewer than the process's CPUs spins at a time (none on
 * one CPU); the others sleep at once. Nor does a thread spin while the
 * process's threads that are inside a queue call and not asleep
 * (mfsq_active()) already fill the CPUs: the thread it waits for may then
 * be waiting for a CPU itself. Spinning is only an optimisation:
 * every caller still re-checks its condition under its lock and sleeps
 * when the spin gave up, so no wake-up can be lost by it.
 */
#include <sched.h>
#include <unistd.h>

#include "internal.h"

static _Atomic int spinners;
static _Atomic int active;	    /* threads in queue calls, not asleep */
static _Atomic int spin_limit = -1; /* CPUs - 1, once known */

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static int limit(void)
{
	int l = atomic_load_explicit(&spin_limit, memory_order_relaxed);

	if (l < 0) {
		cpu_set_t set;
		long n = 0;

		/* the CPUs this process may run on, not the machine's */
		if (!sched_getaffinity(0, sizeof(set), &set))
			n = CPU_COUNT(&set);
		if (n <= 0)
			n = sysconf(_SC_NPROCESSORS_ONLN);
		l = n > 1 ? (int)n - 1 : 0;
		atomic_store(&spin_limit, l);
	}
	return l;
}

int mfsq_spin_while(const _Atomic uint64_t *word, uint64_t old, uint64_t max_us)
{
	uint64_t until;
	int n;

	if (atomic_load_explicit(word, memory_order_acquire) != old)
		return 1;
	if (!max_us)
		return 0;
	n = atomic_fetch_add(&spinners, 1);
	if (n >= limit() || atomic_load_explicit(&active, memory_order_relaxed) > limit() + 1) {
		atomic_fetch_sub(&spinners, 1);
		return 0;
	}
	until = mfsq_mono_us() + max_us;
	for (;;) {
		for (int i = 0; i < 64; i++) {
			if (atomic_load_explicit(word, memory_order_acquire) != old) {
				atomic_fetch_sub(&spinners, 1);
				return 1;
			}
			relax();
		}
		if (mfsq_mono_us() >= until)
			break;
	}
	atomic_fetch_sub(&spinners, 1);
	return 0;
}

uint64_t mfsq_spin_us(mfsq_queue *q)
{
	/* a synced commit takes hundreds of microseconds: spinning through a
	 * part of it only takes the CPU from the callers that fill the next
	 * group (16 synced enqueuers: -20%) */
	return atomic_load_explicit(&q->gturn_us, memory_order_relaxed) < MFSQ_SPIN_US
		   ? MFSQ_SPIN_US
		   : 0;
}

void mfsq_active(int delta)
{
	atomic_fetch_add_explicit(&active, delta, memory_order_relaxed);
}
