/*
 * FUSE over io_uring (Linux 6.14 and later, with the fuse module's
 * enable_uring parameter set): the kernel queues each request of a mount on
 * a queue of the CPU its caller runs on, and hands it to the server through
 * an io_uring command that the server completes with the reply and a fetch
 * of the next request, in one system call.
 *
 * Why: a request on /dev/fuse wakes a worker on whichever CPU it slept on,
 * and its reply wakes the caller back; on a virtual machine each wake-up of
 * an idle vCPU is an exit to the hypervisor, and that round trip, not the
 * file system, bounds a client that waits for each request (4 KiB O_DIRECT
 * reads, see tools/bench/README.md). Here one ring thread per possible CPU,
 * pinned to it, serves the queue of that CPU for every DBFS: the caller and
 * the thread that answers it share a CPU, and the thread count still does
 * not depend on the number of mounts (and while the kernel offers no ring,
 * there is no ring thread).
 *
 * What stays on /dev/fuse: FUSE_INIT (its reply turns the ring on), forgets,
 * interrupts and notifications, and every request until each CPU's queue
 * has an entry registered (the kernel's rule); the loop keeps watching the
 * fd and still sees the connection end. A mount whose ring cannot be set up
 * (no memory, an older kernel refusing a command) keeps working over
 * /dev/fuse.
 *
 * The governor's per-DBFS limits (IOPS, bandwidth, concurrent requests)
 * hold for ring requests too: a ring thread defers a request its session may
 * not have yet and retries it every millisecond (mfs_loop_ring_begin). The
 * fair share of workers does not apply: a ring serves its CPU's requests in
 * arrival order, whichever DBFS they are for.
 *
 * Which requests may wait long is DBFS's to say (dbfs_request_cost): the
 * transport only routes. The ring serves DBFS sessions only.
 *
 * Threads: each function says which may call it. Requests are processed on
 * the ring threads, which must therefore answer every ring request before
 * fuse_session_process_buf returns (DBFS does; the manager mount never
 * uses a ring), and on the thread that received them (dbfs.h,
 * dbfs_fuse_io's thread contract).
 */
#ifndef MFS_URING_H
#define MFS_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fuse_custom_io;
struct fuse_session;
struct mfs_session;
struct mfs_uring;
struct mfs_uring_sess;

/* Requests a ring entry can carry: DBFS's max_write plus headroom. The
 * kernel refuses buffers smaller than its max_write / max_pages. */
#define MFS_URING_PAYLOAD ((1u << 20) + 4096)

/* Does the running kernel let FUSE servers use io_uring (the fuse module's
 * enable_uring parameter is Y)? Reads the parameter each time: it is
 * system-wide and may change at any moment. False when it cannot be read.
 * Any thread, no lock. */
bool mfs_uring_kernel_enabled(void);

/*
 * Set up the rings of the process: one queue, with its ring thread pinned
 * to its CPU, per possible CPU. The queues start now when the kernel offers
 * rings (mfs_uring_kernel_enabled), else at the first FUSE_INIT that
 * offers one; until then no ring thread exists. Requests that may wait
 * long (what dbfs_request_cost calls DBFS_COST_LONG, and the changes of a
 * DBFS whose commits wait for a disk) are handed to `loop`'s workers.
 * `inner` is the custom I/O the sessions would use without a ring (DBFS's);
 * the sessions attached later get mfs_uring_io(), which wraps it.
 * Errors: -EBUSY (the process has its rings already), -ENOMEM; when the
 * queues start now also -errno of eventfd and io_uring_queue_init (-ENOSYS:
 * the kernel has no io_uring, -EPERM: io_uring is disabled) and -EAGAIN
 * (threads). Once, from the thread that sets the process up (ring threads
 * take its nice value), after mfs_loop_create and before any session.
 */
struct mfs_loop;
int mfs_uring_create(struct mfs_loop *loop, const struct fuse_custom_io *inner,
		     struct mfs_uring **out);

/*
 * Stop the ring threads and free everything. Call after every attached
 * session was detached and its connection ended (the kernel gives the
 * entries back then); entries still registered are cancelled by closing
 * the rings. NULL is ignored. Once, from the thread that created `u`,
 * before mfs_loop_destroy; never from a ring thread or a worker.
 */
void mfs_uring_destroy(struct mfs_uring *u);

/* The custom I/O to give fuse_session_custom_io for sessions attached to
 * `u`. Any thread, no lock. */
const struct fuse_custom_io *mfs_uring_io(struct mfs_uring *u);

/*
 * Offer the ring to session `se` (mounted, custom I/O from mfs_uring_io,
 * not served yet). When its FUSE_INIT shows the kernel offers the ring, the
 * reply accepts it (starting the queues if they were not: a failure leaves
 * the session on /dev/fuse, with a warning in the log) and each CPU's
 * queue gets entries for it. `received` (may be NULL) sees each ring
 * request as the custom read hook would, on the thread that processes it.
 * Until mfs_uring_bind, an INIT reply waits for the binding (a second at
 * most, then the session stays on /dev/fuse).
 * Errors: -ENOMEM. Any thread but a ring thread; takes u's lock.
 */
int mfs_uring_attach(struct mfs_uring *u, struct fuse_session *se,
		     void (*received)(void *arg, const void *buf, size_t len), void *arg,
		     struct mfs_uring_sess **out);

/* Account the ring requests of the session to `s` (its loop session), and
 * wake an INIT reply waiting for it. No errors. Any thread but a ring
 * thread; takes u's lock. */
void mfs_uring_bind(struct mfs_uring_sess *us, struct mfs_session *s);

/*
 * The session is going: no request of it is processed any more (one that
 * arrives is answered EIO) and `us` is freed once the kernel gave back
 * every entry (its connection ended). Call once its loop session ended,
 * before mfs_loop_remove and fuse_session_destroy. NULL is ignored. No
 * errors. Any thread but a ring thread, never from inside a request of
 * the session; takes u's lock.
 */
void mfs_uring_detach(struct mfs_uring_sess *us);

/* Ring threads of `u` running now (one per possible CPU once started,
 * 0 while the kernel has offered no ring); 0 for NULL. Any thread, no
 * lock. */
unsigned mfs_uring_queues(const struct mfs_uring *u);

/* What the ring threads of `u` did so far, summed over them; zeros for
 * NULL. Any thread, no lock. */
struct mfs_uring_counts {
	uint64_t roams;	     /* left its CPU to serve big reads (ring_roam.c) */
	uint64_t idle_waits; /* waits begun at SCHED_IDLE (ring_priority.c) */
	uint64_t starved;    /* put back at normal priority by the starvation guard */
};
void mfs_uring_counts(const struct mfs_uring *u, struct mfs_uring_counts *c);

#endif
