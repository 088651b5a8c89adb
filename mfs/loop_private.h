/*
 * Internals shared by the loop's files. The worker threads (pool.c) call
 * the three below, which call one way, top to bottom:
 *   loop.c     the loop's lifetime, sessions, their limits and statistics
 *   request.c  one request's bookkeeping: in flight, charged, answered, done
 *   admit.c    admission: whether a session may read its next request
 * (mfs-layering-loop checks the rows; loop.c also starts pool.c's threads,
 * the one call back up.)
 * Everything marked "lock" is protected by loop->lock.
 */
#ifndef MFS_LOOP_PRIVATE_H
#define MFS_LOOP_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>

#include "colocate.h"
#include "loop.h"
#include "sticky.h"

struct fuse_buf;

/*
 * A counter mfs_loop_sample reads without the lock: its only writer holds
 * the loop's lock, so a relaxed load, add and store is exact and costs what
 * `f += n` does; the reader's relaxed load sees a whole value.
 */
#define BUMP(f, n) __atomic_store_n(&(f), (f) + (n), __ATOMIC_RELAXED)
#define LOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

struct mfs_session {
	struct mfs_loop *loop;
	struct fuse_session *se;
	int fd;
	char name[80];
	void (*on_end)(void *arg);
	void *arg;

	/* lock */
	bool armed;        /* registered in epoll, waiting for readability */
	bool held;         /* not armed because the governor said no */
	bool throttled;    /* held by a token bucket (the timer re-checks it) */
	bool ended;        /* connection gone or aborted: never arm again */
	bool end_reported; /* on_end was (being) called */
	bool busy;         /* requests in flight (counted in loop->busy) */
	unsigned inflight;
	struct mfs_sticky sticky;  /* one worker or every worker (sticky.h) */
	struct mfs_worker *owner;  /* the worker whose own set holds the fd (pool.c) */
	bool parked;               /* armed in owner's set, waiting for readability */
	bool parked_lt;            /* enabled there level-triggered: stays so across
				    * the owner's reads, no re-arm per request */
	unsigned last_reader;      /* worker that read its last request, + 1 (0: none) */
	uint32_t last_pid;         /* client thread of its last request (not background) */
	uint64_t read_ns;          /* when its last request was read */
	uint64_t spin_ns;       /* how long a worker may spin for the next request (pool.c) */
	uint64_t nospin_until;  /* no spinning until then (ns), after spins that found nothing */
	unsigned spin_misses;   /* spins in a row that timed out */
	bool xarmed;     /* armed in the express set instead (struct mfs_loop) */
	uint64_t heavy_until; /* heavy until then (ns): see mfs_session_note_load */
	uint64_t unyield_until; /* starvation guard: no yielding until then (governor.h) */
	unsigned processing;  /* requests read and not yet done with (request_done) */
	unsigned answered;    /* of those, whose reply was sent (atomic: mfs_loop_io) */
	uint64_t win_start;   /* current load window: start (ns) */
	unsigned win_reads;   /* requests read in it */
	unsigned win_overlap; /* of which while another was being processed */
	uint64_t win_busy_ns; /* time its requests answered in it took (ns) */
	struct mfs_limits limits;
	unsigned acct_share; /* workers the accountant lets it hold (governor.h); 0: none */
	struct mfs_bucket iops;
	struct mfs_bucket bw;
	struct mfs_bucket cpu; /* ns of worker CPU time while yielding (governor.h) */
	struct mfs_session_stats st;
	struct mfs_session *prev, *next; /* every session */
	bool removed;                    /* in the graveyard */
	uint64_t removed_gen;            /* loop->gen when removed */
	struct mfs_session *grave_next;
};

struct mfs_loop;

/*
 * A worker waits on the shared epoll set, or, while it owns a session
 * (sticky.h), on its own set `pepfd`: that session's fd (armed there, so
 * no other worker is woken by its requests) and the shared set itself
 * (level-triggered), so that an owner still takes the work of others; it
 * gives its session back to the shared set before it does (pool.c).
 */
struct mfs_worker {
	struct mfs_loop *loop;
	unsigned idx;
	bool express; /* waits on the express set */
	int pepfd;    /* own set: the owned session and loop->epfd */
	struct mfs_session *owned; /* lock */
	struct mfs_colocate co;    /* its own thread's (colocate.h) */
};

struct mfs_loop {
	pthread_mutex_t lock;
	int epfd;
	int evfd; /* readable once stopping: wakes every worker */
	int tfd;  /* timerfd ticking while any session is throttled */
	int jfd;  /* semaphore eventfd: one count per posted job (mfs_loop_post) */

	/* lock */
	struct mfs_session *sessions;
	unsigned nsessions;
	unsigned busy;
	unsigned throttled;
	bool ticking;  /* tfd armed: some session throttled, or watching */
	bool watching; /* owned sessions read requests lately (mfs_loop_watch) */
	uint64_t owned_read_ns; /* the last of those reads */
	bool stopping;
	struct mfs_loop_job *jobs, **jobs_tail; /* posted, not started */
	/* Removed sessions wait here until no worker can still hold an epoll
	 * event naming them: freed once every worker has started a wait after
	 * the removal (wgen[i] > removed_gen for all i). Idle workers start a
	 * new wait every WAIT_MS (pool.c), so none holds the graveyard long. */
	struct mfs_session *grave;
	uint64_t gen;   /* epoll_wait calls started */
	uint64_t ticks; /* timer expirations read from tfd (tests) */
	uint64_t *wgen; /* per thread (workers, then express): gen of its wait */

	/*
	 * The express lane (latency mode only). A worker that served a heavy
	 * session (one whose requests overlap) has used its CPU share: when
	 * woken for another session it waits behind that session's clients in
	 * the CPU run queue, for milliseconds when they saturate the CPUs. So
	 * while some session is heavy, the fds of the light ones are armed in
	 * a second epoll set instead, waited on by one more thread (nice -10
	 * when allowed) that serves only them. In every mode but
	 * governor=off, the heavy sessions' requests run at SCHED_IDLE while
	 * a light one is active (governor.h, pool.c).
	 */
	int xepfd;
	pthread_t xworker;
	struct mfs_worker xwarg;
	bool xstarted;
	struct mfs_session *heavy; /* the session marked heavy last */
	/* Written under the lock, read without it by mfs_loop_contended
	 * (atomic accesses): */
	uint64_t heavy_until;             /* some session is heavy until (ns) */
	uint64_t light_until;             /* a light session counts as active until (ns) */
	const struct mfs_session *light;  /* the one that set light_until */

	unsigned yield_share; /* percent of a CPU a yielding session may use */
	bool unfair;  /* governor's fair share off (benchmarks) */
	bool latency; /* express lane and yielding on (mfs_loop_set_latency) */
	bool nosticky; /* every request through the shared set (mfs_loop_set_sticky) */
	unsigned nworkers;
	pthread_t *workers;
	struct mfs_worker *wargs;
};

/* Worker thread body (pool.c); arg is its struct mfs_worker. */
void *mfs_pool_worker(void *arg);

/* lock held: take the oldest posted job, or NULL. */
struct mfs_loop_job *mfs_loop_take_job(struct mfs_loop *loop);

/* lock held, on a timer tick: re-admit throttled sessions; give an owned
 * session whose request has taken long back to the shared set. */
void mfs_loop_tick(struct mfs_loop *loop, uint64_t now_ns);

/* lock held: a worker read a request of a session it owns at `now`: keep
 * the timer ticking, so a request that takes long is noticed. */
void mfs_loop_watch(struct mfs_loop *loop, uint64_t now_ns);

/* lock held: free removed sessions no worker can still see. */
void mfs_loop_sweep(struct mfs_loop *loop);

/* lock held (admit.c): the throttle timer ticks while a session is
 * throttled or owned sessions are watched; call after either changes. */
void mfs_loop_update_timer(struct mfs_loop *loop);

/* lock held (admit.c): mark `s` held by a token bucket or its CPU share
 * (the timer re-checks it), or no longer. */
void mfs_session_set_throttled(struct mfs_session *s, bool on);

/* lock held (admit.c): may `s` start another request within its CPU
 * share? Only a yielding session has one (governor.h). */
bool mfs_session_cpu_ok(struct mfs_session *s, uint64_t now_ns);

/* lock held: may a worker that just served `s` read one more request of it
 * directly (without epoll), within the governor's limits? No side effects
 * but refilling the buckets. */
bool mfs_session_may_spin(struct mfs_session *s, uint64_t now_ns);

/* lock held: let the session read another request if the governor allows
 * (arm its fd), else mark it held. Returns true when it armed. */
bool mfs_session_admit(struct mfs_session *s, uint64_t now_ns);

/* lock held: a worker read a request of `s` at `now` (ns), with
 * s->processing requests of it still being processed. A session whose
 * requests often overlap (its clients run concurrently), or overlap and
 * keep threads busy half of the time, is heavy for a while. */
void mfs_session_note_load(struct mfs_session *s, uint64_t now_ns);

/* lock held: a request of `s` is served at `now`; unless s is heavy, a
 * light session is active. */
void mfs_loop_note_light(struct mfs_session *s, uint64_t now_ns);

/* lock held: should a request of `s` read at `now` be processed at idle
 * priority (s is heavy, another, light session was served recently, and
 * the starvation guard does not exempt s; governor.h)? */
bool mfs_session_should_yield(const struct mfs_session *s, uint64_t now_ns);

/* lock held: a request of `s` processed at idle priority took `ns` of CPU
 * time on its worker: charge it to the CPU share. */
void mfs_session_charge_cpu(struct mfs_session *s, uint64_t ns);

/*
 * lock held. The admission bookkeeping of one request, the same for the
 * pool and the rings: mfs_session_reserve counts a request of `s` in
 * flight before it is read (the pool reserves before its read, so that
 * the fair share sees it; mfs_session_unreserve takes it back when the
 * read found none); mfs_session_took, once it was read into `buf` at
 * `now`, charges it to the governor's counters and buckets, notes the
 * session's load and counts it as being processed until
 * mfs_session_request_done.
 */
void mfs_session_reserve(struct mfs_session *s);
void mfs_session_unreserve(struct mfs_session *s);
void mfs_session_took(struct mfs_session *s, const struct fuse_buf *buf, uint64_t now_ns);

/* lock held: count one request read into `buf` against s's counters and
 * token buckets. */
void mfs_session_charge(struct mfs_session *s, const struct fuse_buf *buf);

/* lock held: a request of `s` took `ns` from being read to its reply. */
void mfs_session_record_latency(struct mfs_session *s, uint64_t ns);

/* lock held: a request of `s` read at t0 was answered at t1 (ns): count it
 * and let the session read another if the governor held it back. */
void mfs_session_request_done(struct mfs_session *s, uint64_t t0_ns, uint64_t t1_ns);

/* lock held: `s` no longer owned by a worker (sticky.h); `counted`: in
 * its releases counter. Returns true when its fd was armed in the
 * owner's set: the caller then arms it elsewhere (mfs_session_admit). */
bool mfs_session_unstick(struct mfs_session *s, bool counted);

/* lock held: recompute s->busy and loop->busy. */
void mfs_session_update_busy(struct mfs_session *s);

/* lock held: if s ended with nothing in flight and not yet reported, mark it
 * reported and return true (the caller then calls on_end unlocked). */
bool mfs_session_end_due(struct mfs_session *s);

#endif
