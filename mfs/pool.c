/*
 * The worker pool: a fixed set of threads, each waiting on the shared epoll
 * set and reading one request from the session the kernel reported (its fd
 * is armed EPOLLONESHOT, so one worker gets it; the governor re-arms it for
 * the next request). See loop.h for the flow.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fuse.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "loop_private.h"
#include "thread_sched.h"

/* How long a worker that served a session keeps reading it before it goes
 * back to epoll_wait, and how many requests it serves that way at most. */
#define SPIN_NS 50000
#define SPIN_MIN_NS 4000
#define NOSPIN_NS 2000000ull
#define SPIN_MAX 256

/* An idle worker, or the express thread, wakes this often (ms) to start a
 * new wait: a thread keeps the generation of the wait it is in, and removed
 * sessions are freed only once every thread started one after their
 * removal (loop_private.h). Epoll wakes the worker that began waiting last,
 * so no event can be relied on to reach the idle ones. */
#define WAIT_MS 2000

/*
 * lock held. How long a worker that served `s` may spin now for its next
 * request: 0 for one read, no wait. A spin pays when the client sends its
 * next request within it (a few microseconds after our reply when it has
 * a CPU); when the CPUs are busy the client waits for one and the spin
 * burns its whole budget for nothing, CPU that the client or the other
 * mounts needed: on a loaded 2-CPU machine the spins cost a DBFS create
 * 30 us of CPU of its 50 and halved the rate. So the budget follows what
 * the spins found: three times the last wait that succeeded (at least
 * SPIN_MIN_NS, at most SPIN_NS), halved by each spin that found nothing;
 * below SPIN_MIN_NS no spin for NOSPIN_NS, twice as long after each such
 * pause in a row (up to 64 times), then one probe at SPIN_MIN_NS.
 */
static uint64_t spin_budget(struct mfs_session *s, uint64_t now)
{
	if (now < s->nospin_until)
		return 0;
	if (s->spin_ns == 0)
		s->spin_ns = s->nospin_until ? SPIN_MIN_NS : SPIN_NS;
	return s->spin_ns;
}

/* lock held: a spin of `s` found a request after `waited` ns, or none. */
static void note_spin_result(struct mfs_session *s, bool found, uint64_t waited, uint64_t now)
{
	if (found) {
		uint64_t b = 3 * waited;
		s->spin_ns = b < SPIN_MIN_NS ? SPIN_MIN_NS : b > SPIN_NS ? SPIN_NS : b;
		s->spin_misses = 0;
		return;
	}
	s->spin_ns /= 2;
	if (s->spin_ns >= SPIN_MIN_NS)
		return;
	unsigned k = s->spin_misses < 6 ? s->spin_misses : 6;
	s->spin_misses++;
	s->spin_ns = 0;
	s->nospin_until = now + (NOSPIN_NS << k);
}

/*
 * A worker reads and processes requests of a heavy session as SCHED_IDLE
 * while a light one is being served (governor.h): any other thread that
 * wakes on its CPU, a ring or express thread or a light session's client,
 * then preempts it at once instead of waiting for the next tick. Reading
 * counts: it copies up to 1 MiB of a write out of the kernel, and doing it
 * at idle priority too halved the quiet DBFS's stat p99 in
 * tools/bench/isolation. Only outside loop->lock: a thread at SCHED_IDLE
 * must never hold it, where a busy machine could keep it off the CPU while
 * every other worker waits for the lock. The policy changes only when the
 * class of the work does (one system call each way).
 */
static __thread bool idle_now;
static __thread uint64_t idle_cpu0; /* thread CPU time when it yielded */

/* The calling worker at SCHED_IDLE or not (a failure leaves it as it is). */
static void set_idle(bool idle)
{
	mfs_sched_set_idle(&idle_now, idle);
}

void mfs_loop_yield_begin(struct mfs_session *s)
{
	struct mfs_loop *loop = s->loop;

	pthread_mutex_lock(&loop->lock);
	bool yield = mfs_session_should_yield(s, mfs_now_ns());
	s->st.yielded += yield;
	pthread_mutex_unlock(&loop->lock);
	set_idle(yield);
	if (yield)
		idle_cpu0 = mfs_sched_cpu_ns();
}

void mfs_loop_yield_end(struct mfs_session *s)
{
	if (!idle_now)
		return;
	set_idle(false);
	uint64_t ns = mfs_sched_cpu_ns() - idle_cpu0;
	pthread_mutex_lock(&s->loop->lock);
	mfs_session_charge_cpu(s, ns);
	pthread_mutex_unlock(&s->loop->lock);
}

/* Is another request waiting in the kernel's queue of `fd`? */
static bool more_queued(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Is the request in `buf` one the kernel sends on its own, with no client
 * waiting for it (sticky.h: mfs_sticky_background)? */
static bool background_request(const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;
	uint32_t op = !(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(*in) ? in->opcode : 0;

	return op == FUSE_FORGET || op == FUSE_BATCH_FORGET || op == FUSE_INTERRUPT ||
	       op == FUSE_RELEASE || op == FUSE_RELEASEDIR;
}

/* lock held: worker `w`, which just read a request of `s`, owns it from
 * now on: every mfs_session_admit arms its fd in w's own set. */
static void stick(struct mfs_worker *w, struct mfs_session *s)
{
	struct epoll_event ev = {.events = EPOLLONESHOT, .data.ptr = s}; /* not armed yet */

	if (s->owner == w)
		return;
	struct mfs_session *mine = w->owned;
	if (mine && mfs_session_unstick(mine, true))
		mfs_session_admit(mine, mfs_now_ns());
	mfs_session_unstick(s, true); /* from another worker: not armed there, we read it */
	if (epoll_ctl(w->pepfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
		mfs_err("%s: epoll_ctl: %s", s->name, strerror(errno));
		return;
	}
	s->owner = w;
	w->owned = s;
}

/*
 * lock held: worker `w` read a request of `s`; `queued`: another one was
 * waiting behind it (not looked for behind a background request, whose
 * read the window does not count). Count a hand-off from another worker,
 * and learn whether the session's requests overlap (sticky.h): while they
 * do not, `w` owns it; once they do, its owner gives it back to the shared
 * set.
 */
static void note_read(struct mfs_worker *w, struct mfs_session *s, const struct fuse_buf *buf,
		      bool queued, uint64_t now)
{
	bool overlapped = s->processing > __atomic_load_n(&s->answered, __ATOMIC_ACQUIRE);
	bool background = background_request(buf);

	if (s->last_reader && s->last_reader != w->idx + 1)
		s->st.handoffs++;
	s->last_reader = w->idx + 1;
	const struct fuse_in_header *in = buf->mem;
	uint32_t pid = !(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(*in) ? in->pid : 0;
	bool same_client = pid == s->last_pid;
	if (!background)
		s->last_pid = pid;
	bool changed = background ? mfs_sticky_background(&s->sticky)
				  : mfs_sticky_note_from(&s->sticky, overlapped, queued, same_client);
	if (changed && s->sticky.concurrent) {
		if (s->owner)
			mfs_session_unstick(s, true); /* not parked: we read it */
		else
			s->st.releases++; /* left one-worker mode all the same */
	} else if (mfs_sticky_one_worker(&s->sticky) && !w->express && !s->loop->nosticky &&
		   !s->armed && !s->xarmed) { /* armed elsewhere: another worker may read next */
		stick(w, s);
	}
	s->read_ns = now;
	if (s->owner)
		mfs_loop_watch(s->loop, now);
}

/*
 * lock held on entry and return. Worker `w` reads one request of `s` and
 * processes it; with `deadline` (a mfs_now_ns() time) keep retrying an
 * empty read until then instead of returning. A session served by every
 * worker (sticky.h) has its fd re-armed in the shared set as soon as a
 * request is read, so that another worker can take a concurrent one; one
 * served by one worker is not, unless another request is already queued.
 * Returns what fuse_session_receive_buf gave: > 0 when a request was
 * served, -EAGAIN when none came.
 */
static int serve_one(struct mfs_worker *w, struct mfs_session *s, struct fuse_buf *buf,
		     uint64_t deadline)
{
	uint64_t start = deadline ? mfs_now_ns() : 0;
	struct mfs_loop *loop = s->loop;
	bool rearm = !mfs_sticky_one_worker(&s->sticky) || loop->nosticky;

	mfs_session_reserve(s);
	bool idle_rx = mfs_session_should_yield(s, mfs_now_ns());
	pthread_mutex_unlock(&loop->lock);

	int res;
	set_idle(idle_rx);
	do {
		buf->flags = 0;
		res = fuse_session_receive_buf(s->se, buf);
	} while (res == -EAGAIN && deadline && mfs_now_ns() < deadline);
	set_idle(false);
	/* a background request's read is not counted (note_read): no poll(2) */
	bool queued = res > 0 && !rearm && !background_request(buf) && more_queued(s->fd);
	uint64_t t0 = mfs_now_ns();

	pthread_mutex_lock(&loop->lock);
	if (deadline)
		note_spin_result(s, res > 0, t0 - start, t0);
	if (res > 0) {
		note_read(w, s, buf, queued, t0);
		mfs_session_took(s, buf, t0);
		if (rearm || queued)
			mfs_session_admit(s, t0);
		bool yield = mfs_session_should_yield(s, t0);
		s->st.yielded += yield;
		bool mine = s->owner == w;
		pthread_mutex_unlock(&loop->lock);

		/* an owner runs next to its client (colocate.h) */
		const struct fuse_in_header *in = buf->mem;
		bool moved = mine && !(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(*in) &&
			     mfs_colocate_note(&w->co, (pid_t)in->pid, t0);

		uint64_t c0 = yield ? mfs_sched_cpu_ns() : 0;
		set_idle(yield);
		fuse_session_process_buf(s->se, buf);
		set_idle(false);

		uint64_t t1 = mfs_now_ns();
		uint64_t cpu = yield ? mfs_sched_cpu_ns() - c0 : 0;
		pthread_mutex_lock(&loop->lock);
		if (yield)
			mfs_session_charge_cpu(s, cpu);
		s->st.colocations += moved;
		mfs_session_request_done(s, t0, t1);
	} else {
		mfs_session_unreserve(s);
		if (res == 0 || fuse_session_exited(s->se)) {
			s->ended = true; /* ENODEV: unmounted or aborted */
		} else {
			if (res != -EAGAIN && res != -EINTR)
				mfs_warn("%s: reading /dev/fuse: %s", s->name, strerror(-res));
			mfs_session_admit(s, t0);
		}
	}
	return res;
}

/*
 * The express thread asks the scheduler for a higher weight (nice -10,
 * when the process may) and, on EEVDF (Linux 6.12 and later), for a short
 * time slice: a waking thread with a shorter slice may preempt the running
 * one. It only serves light sessions, so it cannot take much CPU. Older
 * kernels ignore sched_runtime for SCHED_OTHER; failures cost nothing.
 */
static void express_priority(void)
{
	struct { /* struct sched_attr, first version (<sched.h> clashes with it) */
		uint32_t size, sched_policy;
		uint64_t sched_flags;
		int32_t sched_nice;
		uint32_t sched_priority;
		uint64_t sched_runtime, sched_deadline, sched_period;
	} a = {.size = sizeof(a), .sched_policy = SCHED_OTHER, .sched_runtime = 100000};

	syscall(SYS_sched_setattr, 0, &a, 0);
	setpriority(PRIO_PROCESS, 0, -10);
}

void *mfs_pool_worker(void *arg)
{
	struct mfs_worker *w = arg;
	struct mfs_loop *loop = w->loop;
	struct fuse_buf buf = {.mem = NULL};
	struct epoll_event ev;

	if (w->express)
		express_priority();
	else
		mfs_colocate_init(&w->co);
	pthread_mutex_lock(&loop->lock);
	for (;;) {
		if (loop->stopping)
			break;
		loop->wgen[w->idx] = ++loop->gen;
		mfs_loop_sweep(loop);
		int wfd = w->express ? loop->xepfd : w->owned ? w->pepfd : loop->epfd;
		bool owns = w->owned != NULL;
		pthread_mutex_unlock(&loop->lock);
		if (!owns) /* next to no client now: run anywhere */
			mfs_colocate_release(&w->co);
		int n = epoll_wait(wfd, &ev, 1, WAIT_MS);
		bool own = n > 0 && wfd == w->pepfd && ev.data.ptr != &loop->epfd;
		if (n > 0 && ev.data.ptr == &loop->epfd) /* an owner takes shared work too */
			n = epoll_wait(loop->epfd, &ev, 1, 0);
		pthread_mutex_lock(&loop->lock);
		if (n < 0 && errno != EINTR)
			mfs_err("loop: epoll_wait: %s", strerror(errno));
		if (n <= 0 || ev.data.ptr == &loop->evfd)
			continue;
		/* Work of another session or a job: give the owned session back
		 * to the shared set first, or its requests wait for this one. */
		struct mfs_session *mine = w->owned;
		if (mine && !own && ev.data.ptr != &loop->tfd && mfs_session_unstick(mine, true))
			mfs_session_admit(mine, mfs_now_ns());
		if (ev.data.ptr == &loop->jfd) {
			uint64_t one;
			struct mfs_loop_job *job = NULL;
			if (read(loop->jfd, &one, sizeof(one)) == sizeof(one))
				job = mfs_loop_take_job(loop);
			if (job) {
				pthread_mutex_unlock(&loop->lock);
				job->fn(job->arg);
				set_idle(false); /* in case fn yielded and did not end it */
				pthread_mutex_lock(&loop->lock);
			}
			continue;
		}
		if (ev.data.ptr == &loop->tfd) {
			uint64_t ticks;
			if (read(loop->tfd, &ticks, sizeof(ticks)) == sizeof(ticks)) {
				loop->ticks += ticks;
				mfs_loop_tick(loop, mfs_now_ns());
			}
			continue;
		}
		struct mfs_session *s = ev.data.ptr;
		if (s->removed)
			continue;
		if (own) {
			/* stale: someone took it back and armed it elsewhere */
			if (s->owner != w)
				continue;
			if (!s->parked) { /* held back meanwhile: not ours to read now */
				mfs_session_admit(s, mfs_now_ns());
				continue;
			}
			s->parked = false;
		} else if (w->express) {
			s->xarmed = false;
		} else {
			s->armed = false;
		}
		if (s->ended) {
			mfs_session_unstick(s, false);
			continue;
		}
		if (w->express) {
			/* one request of a light session, no spinning */
			if (serve_one(w, s, &buf, 0) > 0)
				s->st.express++;
		} else if (serve_one(w, s, &buf, 0) > 0) {
			/* A client that works request by request sends its
			 * next one a few microseconds after our reply: wait for
			 * it here, awake, rather than sleep and be woken, which
			 * costs more than most requests. Bounded in time and in
			 * number, and within the governor's limits. */
			for (unsigned i = 0; i < SPIN_MAX; i++) {
				uint64_t now = mfs_now_ns();
				if (!mfs_session_may_spin(s, now) || (s->owner && s->owner != w))
					break; /* nor take requests of another's session */
				uint64_t b = spin_budget(s, now);
				if (serve_one(w, s, &buf, b ? now + b : 0) <= 0)
					break;
			}
		}
		/* not re-armed while we spun or served one worker's client
		 * (then its fd is armed in our own set: sticky.h) */
		mfs_session_admit(s, mfs_now_ns());
		if (s->ended)
			mfs_session_unstick(s, false);
		if (mfs_session_end_due(s)) {
			pthread_mutex_unlock(&loop->lock);
			s->on_end(s->arg);
			pthread_mutex_lock(&loop->lock);
		}
	}
	pthread_mutex_unlock(&loop->lock);
	free(buf.mem);
	return NULL;
}
