/*
 * CPU roaming of an io_uring thread (uring.c): a ring thread stays pinned
 * to its CPU, except while it serves a sequential reader's big reads.
 * Each struct belongs to one ring thread, which alone calls these but
 * mfs_ring_roam_init (no lock); only the count is read by other threads.
 */
#ifndef MFS_RING_ROAM_H
#define MFS_RING_ROAM_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mfs_ring_roam {
	unsigned cpu;	       /* its home CPU */
	const cpu_set_t *cpus; /* where it may roam: the process's CPUs */
	bool roaming;	       /* may run on any CPU of cpus now */
	uint64_t until;	       /* pinned again at the first small request after */
	uint64_t count;	       /* times it left home (atomic: read by others) */
};

/* Set `r` up, before its thread starts (any thread): its home is `cpu`,
 * it may roam over `cpus` (kept, not copied; fewer than 2 CPUs: never). */
void mfs_ring_roam_init(struct mfs_ring_roam *r, unsigned cpu, const cpu_set_t *cpus);

/* On the ring thread, at its start: pin it to its home. No errors. */
void mfs_ring_roam_start(struct mfs_ring_roam *r);

/* The thread is about to serve request `req` (`len` bytes, laid out as
 * /dev/fuse gives it) at `now_ns`: leave home, or come back (see
 * ring_roam.c). No errors: an affinity the kernel refuses changes nothing. */
void mfs_ring_roam_note(struct mfs_ring_roam *r, const void *req, size_t len, uint64_t now_ns);

/* Times the thread of `r` left its CPU so far. Any thread. */
uint64_t mfs_ring_roam_count(const struct mfs_ring_roam *r);

#endif
