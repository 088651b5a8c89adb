/*
 * The priority of an io_uring thread (uring.c): it waits at SCHED_IDLE,
 * and a starvation guard puts it back at normal priority for a while
 * whenever that kept it waiting for a CPU. Each struct belongs to one ring
 * thread, which alone calls these, outside every lock (a thread at
 * SCHED_IDLE must hold none: a busy CPU could keep it off for long).
 */
#ifndef MFS_RING_PRIORITY_H
#define MFS_RING_PRIORITY_H

#include <stdbool.h>
#include <stdint.h>

struct mfs_ring_priority {
	unsigned qid;			       /* its queue, for the log */
	bool idle;			       /* at SCHED_IDLE now */
	uint64_t no_yield_until;	       /* at normal priority until then (ns) */
	int sched_fd;			       /* its /proc schedstat (-1: none) */
	uint64_t chk_at, chk_delay, chk_wakes; /* the last look at it */
	uint64_t idle_waits;		       /* waits begun at SCHED_IDLE */
	uint64_t starved;		       /* times the guard put it back */
};

/* On the ring thread, at its start: look at the thread's schedstat from
 * now on; a process that could not leave SCHED_IDLE again (not root, and
 * RLIMIT_NICE under 20) never enters it. No errors. */
void mfs_ring_priority_init(struct mfs_ring_priority *p, unsigned qid);

/* Before the thread waits for completions at `now_ns`: SCHED_IDLE unless
 * the starvation guard holds it at normal priority or `busy` (it roams, or
 * a heavy DBFS yields to a light one: mfs_loop_contended). */
void mfs_ring_priority_choose(struct mfs_ring_priority *p, bool busy, uint64_t now_ns);

/* After each wait: did the last wake-ups keep it waiting for a CPU? */
void mfs_ring_priority_woke(struct mfs_ring_priority *p);

/* Is the thread at SCHED_IDLE now? (Its commits are then sent and timed
 * apart from the wait: mfs_ring_priority_submitted.) */
bool mfs_ring_priority_idle(const struct mfs_ring_priority *p);

/* At SCHED_IDLE, sending its commits took from `t0_ns` to `t1_ns`. */
void mfs_ring_priority_submitted(struct mfs_ring_priority *p, uint64_t t0_ns, uint64_t t1_ns);

/* Waits it began at SCHED_IDLE, and times the starvation guard put it
 * back at normal priority, so far. Any thread, no lock. */
uint64_t mfs_ring_priority_idle_waits(const struct mfs_ring_priority *p);
uint64_t mfs_ring_priority_starved(const struct mfs_ring_priority *p);

/* On the way out: normal priority (nothing may keep it waiting now), and
 * the schedstat closed. */
void mfs_ring_priority_fini(struct mfs_ring_priority *p);

#endif
