/*
 * A worker next to its client (pool.c). A DBFS request over /dev/fuse wakes
 * the worker that owns the session (sticky.h) wherever the scheduler last
 * put it; on the other CPU than the client's, every request and every
 * reply is a cross-CPU wake-up, and on a busy machine a wait for that
 * CPU: creates ran at 1.2k-3.3k/s with the client and mfs pinned to
 * different CPUs, 41k-44k/s on the same one (2 vCPUs, load 14-16; the
 * rings are per CPU for this reason). So while a worker owns a session it
 * runs on the CPU its client last ran on (read from /proc every
 * MFS_COLOCATE_NS, or when another client thread asks, but not within
 * MFS_COLOCATE_NEW_NS of the last look: a client whose threads take turns
 * costs at most one read of /proc a millisecond), and the reply's wake-up
 * keeps the client there; it may run anywhere again once it owns none.
 *
 * Each struct belongs to one worker thread, which alone calls these (no
 * lock; none may be called with loop->lock held: they read /proc and make
 * system calls). Only `moves` is read by other threads (atomic).
 */
#ifndef MFS_COLOCATE_H
#define MFS_COLOCATE_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define MFS_COLOCATE_NS 20000000ull
#define MFS_COLOCATE_NEW_NS 1000000ull

struct mfs_colocate {
	bool pinned;         /* runs on `cpu` only */
	int cpu;
	pid_t pid;           /* the client thread looked up last */
	uint64_t checked_ns; /* when */
	cpu_set_t cpus;      /* where it ran before: back there when released */
	bool have_cpus;
	uint64_t moves;      /* times it moved to a client's CPU (atomic) */
};

/* Set `c` up on its worker thread, at its start: remember where the
 * thread may run. No errors (unknown: it is never pinned). */
void mfs_colocate_init(struct mfs_colocate *c);

/* The worker serves a request of client thread `pid` (fuse_in_header.pid,
 * 0: none, e.g. a FORGET) of a session it owns, at `now_ns`: move to the
 * CPU that thread last ran on, if it is not there. Returns true when it
 * moved. No errors: a client gone, /proc unreadable or an affinity
 * refused change nothing. */
bool mfs_colocate_note(struct mfs_colocate *c, pid_t pid, uint64_t now_ns);

/* The worker owns no session any more: run where it ran before. */
void mfs_colocate_release(struct mfs_colocate *c);

/* Times the worker of `c` moved to a client's CPU. Any thread. */
uint64_t mfs_colocate_moves(const struct mfs_colocate *c);

/* The last CPU thread `pid` ran on, from /proc/PID/stat, or -1. */
int mfs_colocate_cpu_of(pid_t pid);

#endif
