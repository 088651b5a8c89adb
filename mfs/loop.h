/*
 * The session loop: one epoll set holding the non-blocking /dev/fuse fd of
 * every session, and one fixed pool of worker threads that wait on it and
 * receive and process requests (fuse_session_receive_buf /
 * fuse_session_process_buf). The number of threads never depends on the
 * number of sessions.
 *
 * Flow of one request:
 *
 *   fd readable -> epoll wakes one waiting worker, which reads one request,
 *   re-arms the fd if the governor allows the session another request in
 *   flight, processes it, and re-arms on completion if it was held back.
 *
 * The worker the kernel wakes is the one that reads: no hand-off between
 * threads, one context switch per request as with a blocking read. Fds are
 * registered EPOLLONESHOT, so a session is reported to one worker at a time;
 * epoll reports ready sessions in turn (round robin), which is the fair
 * share of governor.h. A timerfd in the same set re-admits throttled
 * sessions; an eventfd made readable wakes every worker to stop.
 *
 * After serving a request, the worker keeps reading that session for a
 * short while (pool.c: SPIN_NS, SPIN_MAX), within the governor's limits: a
 * client working request by request sends its next one microseconds after
 * the reply, sooner than a sleeping worker could be woken. No worker spins
 * while another session has requests in flight: the CPU is theirs then.
 *
 * A session whose client waits for each answer stays with one worker
 * (sticky.h): its fd is not re-armed when a request is read, and the
 * worker that answered then waits for the next one on its own epoll set,
 * so that request wakes that worker and no other (no hand-off, a warm
 * cache). The owner takes the shared set's work too, and gives its
 * session back to the shared set before it does: an owned session never
 * waits for a busy worker. A request found queued behind the one read,
 * or one read while another was unanswered, sends the session back to
 * the shared set, re-armed at every read, served by every worker.
 *
 * A session ends when its connection goes away (unmount or abort: the read
 * gives ENODEV). Once it has ended and no request is in flight, the loop calls
 * its on_end callback exactly once; the owner then calls mfs_loop_remove and
 * fuse_session_destroy (in that order).
 */
#ifndef MFS_LOOP_H
#define MFS_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "governor.h"

struct fuse_session;
struct mfs_loop;
struct mfs_session;

/* Latency histogram buckets: bucket i counts requests taking [2^i, 2^(i+1)) ns. */
#define MFS_LAT_BUCKETS 40
/* Requests counted by FUSE opcode: opcodes 0..MFS_OPCODES-2 each, every
 * other (CUSE_INIT, future ones) in the last slot. */
#define MFS_OPCODES 64

struct mfs_session_stats {
	uint64_t ops;
	uint64_t read_bytes;    /* asked by FUSE_READ requests */
	uint64_t write_bytes;   /* carried by FUSE_WRITE requests */
	uint64_t throttled;     /* times held back by an IOPS or bandwidth bucket */
	uint64_t capped;        /* times held back by the concurrency limit */
	uint64_t express;       /* requests served by the express thread */
	uint64_t ring;          /* requests served over io_uring (uring.h) */
	uint64_t yielded;       /* processed at idle priority for a light DBFS (governor.h) */
	uint64_t starved;       /* times the starvation guard stopped its yielding */
	uint64_t yield_waits;   /* times held back by the CPU share while yielding */
	uint64_t overlapped;    /* requests read while another of its was unanswered */
	uint64_t handoffs;      /* requests read by another worker than its last one */
	uint64_t releases;      /* times its worker gave it back to the pool (sticky.h) */
	uint64_t colocations;   /* times its worker moved to its client's CPU (colocate.h) */
	uint64_t lat_sum_ns;
	uint64_t lat_max_ns;
	uint64_t lat_hist[MFS_LAT_BUCKETS];
	uint64_t by_opcode[MFS_OPCODES]; /* requests by FUSE opcode (MFS_OPCODES) */
	unsigned inflight;
	unsigned peak_inflight;
	unsigned worker_share;  /* the accountant's share (mfs_loop_set_share); 0: none */
};

/*
 * Start `workers` worker threads (1..1024).
 * Errors: -EINVAL (workers out of range), -ENOMEM, -EMFILE/-ENFILE (epoll,
 * eventfd, timerfd), -EAGAIN (threads). Once, from the thread that sets
 * the process up (the workers inherit its signal mask and priority).
 */
int mfs_loop_create(unsigned workers, struct mfs_loop **out);

/*
 * Stop every thread and free the loop. Every session must have been removed
 * and the rings (uring.h) destroyed: they post to the pool. No errors.
 * Must not be called from a loop thread.
 */
void mfs_loop_destroy(struct mfs_loop *loop);

/*
 * Turn the fair share of workers off (every session may use every worker,
 * as a plain thread pool would) or on (the default). For benchmarks. No
 * errors. Any thread; takes the loop's lock.
 */
void mfs_loop_set_fair(struct mfs_loop *loop, bool fair);

/*
 * Let a session whose client waits for each answer stay with the worker
 * that answered it (sticky.h; on by default) or not (every request is
 * announced to the pool through the shared set). For tests and A/B
 * benchmarks. No errors. Any thread; takes the loop's lock; sessions
 * owned by a worker keep it until their next request.
 */
void mfs_loop_set_sticky(struct mfs_loop *loop, bool on);

/*
 * Latency mode (governor=latency): while some session is heavy, light
 * sessions are served by the express thread (loop_private.h). Turning it
 * on starts the express thread: call it before any session is added.
 * Errors: -EAGAIN (thread). Any thread but a loop thread; takes the
 * loop's lock.
 *
 * In every mode but governor=off, heavy sessions yield the CPU to light
 * ones (governor.h): their requests are read and processed at SCHED_IDLE
 * while a light session is active, so that the threads of light sessions
 * and their clients preempt them at once. The cost: a heavy session gets
 * little CPU while light ones are active and other programs keep the CPUs
 * busy; the starvation guard of governor.h bounds it.
 */
int mfs_loop_set_latency(struct mfs_loop *loop, bool on);

/* Number of worker threads. Any thread, no lock. */
unsigned mfs_loop_workers(const struct mfs_loop *loop);

/*
 * Serve `se` (already mounted: its fd is set). Makes the fd non-blocking and
 * watches it. `on_end(arg)` is called once, from a worker or from
 * mfs_loop_abort's caller, with no loop lock held, after the session ended and
 * its last request finished; it must not block (post to another thread).
 * `name` is copied (for logs). Errors: -ENOMEM, -errno of fcntl/epoll_ctl.
 * Any thread.
 */
int mfs_loop_add(struct mfs_loop *loop, struct fuse_session *se, const char *name,
		 void (*on_end)(void *arg), void *arg, struct mfs_session **out);

/*
 * Stop serving `s` as if its connection had gone: no new request is read;
 * on_end follows once requests in flight finish. The caller then closes the
 * session (fuse_session_destroy), which aborts the kernel connection.
 * Idempotent. Any thread except from inside a request of `s`.
 */
void mfs_loop_abort(struct mfs_session *s);

/* Forget `s` (after on_end was called) and free it (once no worker can
 * still see it: mfs_loop_graveyard). No errors. Any thread, not from inside
 * on_end of `s` nor a request of `s`; takes the loop's lock. */
void mfs_loop_remove(struct mfs_session *s);

/* Removed sessions not freed yet (they wait until no worker can still
 * hold an event naming them; a timer makes idle workers pass). For tests.
 * Any thread; takes the loop's lock. */
unsigned mfs_loop_graveyard(struct mfs_loop *loop);

/* Work handed to the pool: fn(arg) runs on a worker, once per post. The
 * caller owns the struct, which must stay valid until fn has started. */
struct mfs_loop_job {
	void (*fn)(void *arg);
	void *arg;
	struct mfs_loop_job *next;
};

/* Run `job` on a worker as soon as one is free (FIFO). No errors (a
 * failed eventfd write is logged: the job then waits for the next post).
 * Any thread, also a worker; takes the loop's lock. */
void mfs_loop_post(struct mfs_loop *loop, struct mfs_loop_job *job);

/*
 * For a posted job that processes a request of `s` (in flight, counted by
 * mfs_loop_ring_begin): mfs_loop_yield_begin lowers the calling worker to
 * SCHED_IDLE when `s` should yield to a light session now (counted in
 * yielded); mfs_loop_yield_end restores normal priority. Call
 * mfs_loop_yield_end before taking any lock that a thread serving another
 * session may need (loop or ring locks): a thread at idle priority that
 * holds such a lock can keep it from everyone on a busy machine. Worker
 * threads only; the priority changes only when it must.
 */
void mfs_loop_yield_begin(struct mfs_session *s);
void mfs_loop_yield_end(struct mfs_session *s);

/* The CPU share of a yielding session, in percent of one CPU (1..100,
 * governor.h: MFS_YIELD_SHARE_DEFAULT; values outside are clamped); 100: no
 * limit. Takes effect for sessions added later: call it before any is
 * added. No errors. Any thread; takes the loop's lock. */
void mfs_loop_set_yield_share(struct mfs_loop *loop, unsigned percent);

/*
 * Is some heavy session yielding to an active light one now? Lock-free (a
 * hint); for the rings, which then commit at normal priority: a thread
 * that commits at SCHED_IDLE is preempted by the caller it wakes and then
 * waits, runnable, behind every busy thread of the CPU while that caller's
 * next request sits in its queue. Any thread.
 */
bool mfs_loop_contended(struct mfs_loop *loop, uint64_t now_ns);

/*
 * For the io_uring rings (uring.h), which serve requests of `s` outside the
 * pool, under the same governor. mfs_loop_ring_begin, before processing a
 * request read into `buf` at `now_ns`, returns
 *
 *   MFS_RING_GO    counted in flight, charged to s's counters and buckets
 *                  (the pool's bookkeeping): call mfs_loop_ring_end when
 *                  it is answered
 *   MFS_RING_WAIT  an IOPS or bandwidth bucket, max_concurrent or the CPU
 *                  share of a yielding session holds it back: nothing is
 *                  counted but the hold (once per request: `again` is true
 *                  when a WAIT came before for this request); try later
 *   MFS_RING_GONE  the session ended or is no longer served: answer EIO
 *
 * and has no errors. mfs_loop_ring_end(s, t0_ns), with the time given to
 * mfs_loop_ring_begin, records the request's latency, may re-admit the
 * session to the pool and may call on_end (when `s` ended and this was its
 * last request in flight: `s` may then be gone on return). Any thread but a
 * worker inside a request of `s`; both take the loop's lock, so the
 * caller may hold its own lock (uring.c holds its ring lock around
 * mfs_loop_ring_begin) as long as it is never taken under the loop's.
 */
enum { MFS_RING_GO, MFS_RING_WAIT, MFS_RING_GONE };
struct fuse_buf;
int mfs_loop_ring_begin(struct mfs_session *s, const struct fuse_buf *buf, uint64_t now_ns,
			bool again);
void mfs_loop_ring_end(struct mfs_session *s, uint64_t t0_ns);

/* Change the governor's limits of `s`; takes effect at the next request.
 * No errors. Any thread; takes the loop's lock. */
void mfs_loop_set_limits(struct mfs_session *s, const struct mfs_limits *l);

/*
 * The workers `s` may hold when its instantaneous fair share is smaller
 * (mfs_worker_share, from the accountant's rates); never more than it
 * would have with no other session busy (one worker stays free for the
 * others, its max_concurrent holds), and not while a light session is
 * active (governor.h: the busy ones then keep their fair share). 0: none. No errors. Any thread; it
 * takes the loop's lock only when the share grows and `s` is held back.
 */
void mfs_loop_set_share(struct mfs_session *s, unsigned workers);

/*
 * The custom I/O to give the sessions served by the loop: `inner` with its
 * writev wrapped, so that the loop learns when a request's reply is sent
 * (a request read after its session's last reply was sent does not overlap
 * that one, though the thread that sent it may not be done: see
 * LOAD_WINDOW_NS in loop.c). The same `inner` for every call (the process
 * has one: DBFS's dbfs_fuse_io); another one is returned unwrapped. The
 * thread that sets the process up, before any session.
 */
struct fuse_custom_io;
const struct fuse_custom_io *mfs_loop_io(const struct fuse_custom_io *inner);

/* A consistent copy of the counters of `s`. Any thread; takes the loop's
 * lock (briefly: fine under a caller's lock that no loop thread takes). */
void mfs_loop_stats(struct mfs_session *s, struct mfs_session_stats *st);

/*
 * The counters the accountant samples (ops, read_bytes, write_bytes,
 * throttled, capped, yield_waits, lat_hist, lat_sum_ns, by_opcode;
 * inflight), read without the loop's lock: a request path never waits for
 * the reader. Each field is exact; fields may be a request apart. The
 * other fields are left 0. Any thread; `s` must stay added meanwhile (the
 * caller holds what keeps it: mgr->lock for a mounted DBFS's session).
 */
void mfs_loop_sample(struct mfs_session *s, struct mfs_session_stats *st);

/* Latency (ns) below which `pct` percent of requests of `st` finished
 * (the upper bound of its bucket); 0 when `st` counted none. Pure. */
uint64_t mfs_lat_percentile(const struct mfs_session_stats *st, double pct);

/* Monotonic clock in nanoseconds. Any thread, no lock. */
uint64_t mfs_now_ns(void);

#endif
