/* Dispatcher, sessions and admission (see loop.h and loop_private.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <linux/fuse.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "loop_private.h"

/*
 * A counter mfs_loop_sample reads without the lock: its only writer holds
 * the loop's lock, so a relaxed load, add and store is exact and costs what
 * `f += n` does; the reader's relaxed load sees a whole value.
 */
#define BUMP(f, n) __atomic_store_n(&(f), (f) + (n), __ATOMIC_RELAXED)
#define LOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

/* While a session is throttled a timer wakes a worker this often to refill;
 * it also ticks while sessions owned by a worker (sticky.h) are active,
 * until none read a request for WATCH_IDLE_NS. */
#define THROTTLE_TICK_MS 2
#define WATCH_IDLE_NS 100000000ull
/* A request of an owned session that takes longer than this sends the
 * session back to the shared set (long enough that a worker preempted on a
 * busy machine seldom trips it): other requests of it (another client,
 * say one that would unblock this one) must not wait for it. */
#define STALL_NS 10000000ull

/* A session is heavy when over a window of at least LOAD_WINDOW_NS a quarter
 * of its requests (and at least 8) overlapped another of its requests, or
 * some did (at least 2) and its requests took half of the window from being
 * read to their answer (they keep threads busy: a ring has one entry per
 * CPU and session, which bounds the overlap of its large writes); it stays
 * heavy HEAVY_NS after such a window. A client that waits for each request
 * never overlaps, however busy: it is never heavy (its next request may be
 * read before the thread that sent the reply is done, yet after the reply:
 * mfs_loop_io tells the loop when a reply was sent). */
#define LOAD_WINDOW_NS 10000000ull
#define HEAVY_NS 50000000ull

uint64_t mfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mfs_session_update_busy(struct mfs_session *s)
{
	bool busy = s->inflight > 0;

	if (busy != s->busy) {
		s->busy = busy;
		if (busy)
			s->loop->busy++;
		else
			s->loop->busy--;
	}
}

/* lock held: the timer ticks while a session is throttled or watched. */
static void update_timer(struct mfs_loop *loop)
{
	bool on = loop->throttled > 0 || loop->watching;

	if (on == loop->ticking)
		return;
	loop->ticking = on;
	struct itimerspec its = {{0, 0}, {0, 0}};
	if (on) {
		its.it_interval.tv_nsec = THROTTLE_TICK_MS * 1000000L;
		its.it_value = its.it_interval;
	}
	if (timerfd_settime(loop->tfd, 0, &its, NULL) < 0)
		mfs_warn("loop: timerfd: %s", strerror(errno));
}

static void set_throttled(struct mfs_session *s, bool on)
{
	struct mfs_loop *loop = s->loop;

	if (s->throttled == on)
		return;
	s->throttled = on;
	if (on)
		loop->throttled++;
	else
		loop->throttled--;
	update_timer(loop);
}

void mfs_loop_watch(struct mfs_loop *loop, uint64_t now_ns)
{
	loop->owned_read_ns = now_ns;
	if (!loop->watching) {
		loop->watching = true;
		update_timer(loop);
	}
}

/* lock held: requests the governor lets `s` have in flight now. */
static unsigned fair_limit(const struct mfs_session *s)
{
	const struct mfs_loop *loop = s->loop;

	unsigned l = mfs_fair_limit(loop->nworkers, loop->unfair ? 1 : loop->nsessions,
				    loop->unfair ? 1 : loop->busy + (s->busy ? 0 : 1),
				    s->limits.max_concurrent);
	unsigned w = __atomic_load_n(&s->acct_share, __ATOMIC_RELAXED);

	/* a share from measured usage raises it up to what it would have
	 * alone, but not while a light session is active: then the busy ones
	 * keep the fair share (and yield), as without accounting */
	if (w > l && !loop->unfair &&
	    mfs_now_ns() >= __atomic_load_n(&loop->light_until, __ATOMIC_RELAXED)) {
		unsigned alone = mfs_fair_limit(loop->nworkers, loop->nsessions, 1,
						s->limits.max_concurrent);
		l = w < alone ? w : alone;
	}
	return l;
}

/* lock held: may `s` start another request within its CPU share? Only a
 * yielding session has one (governor.h). One held back stays heavy: it
 * has more work than its share, though it reads too little now for its
 * requests to overlap; else it would be light as soon as it waits, and
 * take the CPU back at normal priority. */
static bool cpu_share_ok(struct mfs_session *s, uint64_t now_ns)
{
	if (!mfs_session_should_yield(s, now_ns))
		return true;
	mfs_bucket_refill(&s->cpu, now_ns);
	if (mfs_bucket_ok(&s->cpu))
		return true;
	s->heavy_until = now_ns + HEAVY_NS;
	if (s->heavy_until > s->loop->heavy_until)
		__atomic_store_n(&s->loop->heavy_until, s->heavy_until, __ATOMIC_RELAXED);
	return false;
}

void mfs_session_charge_cpu(struct mfs_session *s, uint64_t ns)
{
	mfs_bucket_take(&s->cpu, (double)ns);
}

bool mfs_session_may_spin(struct mfs_session *s, uint64_t now_ns)
{
	if (s->ended || s->removed || s->held || s->loop->stopping)
		return false;
	/* While other sessions have requests in flight, the CPU a spin burns
	 * is theirs: serve them instead. */
	if (s->loop->busy > (s->busy ? 1u : 0u))
		return false;
	mfs_bucket_refill(&s->iops, now_ns);
	mfs_bucket_refill(&s->bw, now_ns);
	if (!mfs_bucket_ok(&s->iops) || !mfs_bucket_ok(&s->bw) || !cpu_share_ok(s, now_ns))
		return false;
	/* an armed fd already promises one request to some worker */
	return s->inflight + (s->armed || s->xarmed || s->parked ? 1 : 0) < fair_limit(s);
}

void mfs_session_note_load(struct mfs_session *s, uint64_t now_ns)
{
	struct mfs_loop *loop = s->loop;

	if (loop->unfair) /* governor=off tells no heavy from light */
		return;
	s->win_reads++;
	/* A reply sent wakes the client at once: its next request may be read
	 * before the thread that sent the reply is done with the last one
	 * (often so on a loaded machine, where that thread waits for a CPU).
	 * That one was answered: no overlap. */
	if (s->processing > __atomic_load_n(&s->answered, __ATOMIC_ACQUIRE)) {
		s->win_overlap++;
		s->st.overlapped++;
	}
	uint64_t len = now_ns - s->win_start;
	if (len < LOAD_WINDOW_NS)
		return;
	if ((s->win_overlap >= 8 && s->win_overlap * 4 >= s->win_reads) ||
	    (s->win_overlap >= 2 && s->win_busy_ns * 2 >= len)) {
		s->heavy_until = now_ns + HEAVY_NS;
		loop->heavy = s;
		if (s->heavy_until > loop->heavy_until)
			__atomic_store_n(&loop->heavy_until, s->heavy_until, __ATOMIC_RELAXED);
	}
	s->win_start = now_ns;
	s->win_reads = s->win_overlap = 0;
	s->win_busy_ns = 0;
}

/* lock held: should `s` be armed in the express set rather than the main
 * one? Only in latency mode. */
static bool wants_express(const struct mfs_session *s, uint64_t now_ns)
{
	const struct mfs_loop *loop = s->loop;

	return loop->xstarted && loop->latency && !loop->unfair && loop->heavy && loop->heavy != s &&
	       now_ns < loop->heavy->heavy_until && now_ns >= s->heavy_until;
}

void mfs_loop_note_light(struct mfs_session *s, uint64_t now_ns)
{
	struct mfs_loop *loop = s->loop;

	if (loop->unfair || now_ns < s->heavy_until)
		return;
	__atomic_store_n(&loop->light_until, now_ns + HEAVY_NS, __ATOMIC_RELAXED);
	loop->light = s;
}

bool mfs_session_should_yield(const struct mfs_session *s, uint64_t now_ns)
{
	const struct mfs_loop *loop = s->loop;

	return !loop->unfair && loop->light != s &&
	       mfs_should_yield(now_ns, s->heavy_until, loop->light_until, s->unyield_until);
}

bool mfs_loop_contended(struct mfs_loop *loop, uint64_t now_ns)
{
	return now_ns < __atomic_load_n(&loop->light_until, __ATOMIC_RELAXED) &&
	       now_ns < __atomic_load_n(&loop->heavy_until, __ATOMIC_RELAXED);
}

/* lock held: arm `s` in `epfd` for one request. */
static bool arm(struct mfs_session *s, int epfd)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = s};

	if (epoll_ctl(epfd, EPOLL_CTL_MOD, s->fd, &ev) == 0)
		return true;
	mfs_err("%s: epoll_ctl: %s", s->name, strerror(errno));
	return false;
}

/*
 * lock held: the owned session `s` waits for its next request in its
 * owner's set, enabled level-triggered (`on`) or disabled. Enabled once, it
 * stays so while the owner reads and serves request after request: no
 * epoll_ctl per request (the owner is the only thread that waits on its
 * set, and it reads the fd only while `s` is parked: pool.c). Disabled
 * when the governor holds `s` back, so that a readable fd cannot wake the
 * owner for a request it may not read.
 */
static bool park_lt(struct mfs_session *s, bool on)
{
	struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.ptr = s};

	if (s->parked_lt == on)
		return true;
	if (epoll_ctl(s->owner->pepfd, EPOLL_CTL_MOD, s->fd, &ev) < 0) {
		mfs_err("%s: epoll_ctl: %s", s->name, strerror(errno));
		return false;
	}
	s->parked_lt = on;
	return true;
}

bool mfs_session_unstick(struct mfs_session *s, bool counted)
{
	struct mfs_worker *w = s->owner;

	if (!w)
		return false;
	/* also drops an event of it that its owner has not taken yet */
	if (epoll_ctl(w->pepfd, EPOLL_CTL_DEL, s->fd, NULL) < 0)
		mfs_err("%s: epoll_ctl: %s", s->name, strerror(errno));
	w->owned = NULL;
	s->owner = NULL;
	s->parked_lt = false;
	s->st.releases += counted;
	bool parked = s->parked;
	s->parked = false;
	return parked;
}

static bool admit(struct mfs_session *s, uint64_t now_ns);

bool mfs_session_admit(struct mfs_session *s, uint64_t now_ns)
{
	bool ok = admit(s, now_ns);

	if (!ok && s->owner && !s->parked) /* held back: no wake-up for it */
		park_lt(s, false);
	return ok;
}

static bool admit(struct mfs_session *s, uint64_t now_ns)
{
	struct mfs_loop *loop = s->loop;

	if (s->ended || s->armed || s->xarmed || s->parked)
		return false;
	mfs_bucket_refill(&s->iops, now_ns);
	mfs_bucket_refill(&s->bw, now_ns);
	if (!mfs_bucket_ok(&s->iops) || !mfs_bucket_ok(&s->bw)) {
		if (!s->throttled)
			BUMP(s->st.throttled, 1);
		s->held = true;
		set_throttled(s, true);
		return false;
	}
	if (!cpu_share_ok(s, now_ns)) { /* the timer re-checks it, as a bucket's */
		if (!s->throttled)
			BUMP(s->st.yield_waits, 1);
		s->held = true;
		set_throttled(s, true);
		return false;
	}
	set_throttled(s, false);
	if (s->inflight >= fair_limit(s)) {
		if (!s->held)
			BUMP(s->st.capped, 1);
		s->held = true;
		return false;
	}
	s->held = false;
	if (wants_express(s, now_ns)) {
		mfs_session_unstick(s, true);
		if ((s->xarmed = arm(s, loop->xepfd)))
			return true;
	}
	/* owned: only its worker is woken by the next request (sticky.h) */
	if (s->owner && (s->parked = park_lt(s, true)))
		return true;
	mfs_session_unstick(s, true);
	s->armed = arm(s, loop->epfd);
	return s->armed;
}

bool mfs_session_end_due(struct mfs_session *s)
{
	if (!s->ended || s->inflight || s->end_reported)
		return false;
	s->end_reported = true;
	return true;
}

/* What a request costs the governor: one operation, plus its payload bytes
 * for reads and writes (parsed from the kernel's request header). */
void mfs_session_charge(struct mfs_session *s, const struct fuse_buf *buf)
{
	uint64_t bytes = 0;

	unsigned op = MFS_OPCODES - 1;

	BUMP(s->st.ops, 1);
	if (!(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(struct fuse_in_header)) {
		const struct fuse_in_header *h = buf->mem;
		const char *arg = (const char *)buf->mem + sizeof(*h);
		size_t arglen = buf->size - sizeof(*h);
		if (h->opcode < MFS_OPCODES - 1)
			op = h->opcode;
		if (h->opcode == FUSE_READ && arglen >= sizeof(struct fuse_read_in)) {
			bytes = ((const struct fuse_read_in *)arg)->size;
			BUMP(s->st.read_bytes, bytes);
		} else if (h->opcode == FUSE_WRITE && arglen >= sizeof(struct fuse_write_in)) {
			bytes = ((const struct fuse_write_in *)arg)->size;
			BUMP(s->st.write_bytes, bytes);
		}
	}
	BUMP(s->st.by_opcode[op], 1);
	mfs_bucket_take(&s->iops, 1);
	mfs_bucket_take(&s->bw, (double)bytes);
}

void mfs_session_record_latency(struct mfs_session *s, uint64_t ns)
{
	int b = ns ? 63 - __builtin_clzll(ns) : 0;

	if (b >= MFS_LAT_BUCKETS)
		b = MFS_LAT_BUCKETS - 1;
	BUMP(s->st.lat_hist[b], 1);
	BUMP(s->st.lat_sum_ns, ns);
	if (ns > s->st.lat_max_ns)
		s->st.lat_max_ns = ns;
}

void mfs_session_reserve(struct mfs_session *s)
{
	BUMP(s->inflight, 1);
	if (s->inflight > s->st.peak_inflight)
		s->st.peak_inflight = s->inflight;
	mfs_session_update_busy(s);
}

void mfs_session_unreserve(struct mfs_session *s)
{
	BUMP(s->inflight, -1);
	mfs_session_update_busy(s);
}

/* The request this thread processes, for mfs_loop_io's reply hook. */
static __thread struct {
	struct mfs_session *s;
	uint64_t unique;
	bool answered;
} this_req;

static const struct fuse_custom_io *io_inner;

/* Counted before the write: once it is made, the client may send its next
 * request, and a worker read it, before this thread runs again (on a busy
 * machine the woken client often preempts it); counted after, that request
 * would seem to overlap this one. A failed reply ends the request too. */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *oh = count >= 1 ? iov[0].iov_base : NULL;

	if (oh && this_req.s && !this_req.answered && iov[0].iov_len >= sizeof(*oh) &&
	    oh->unique == this_req.unique) {
		this_req.answered = true;
		__atomic_add_fetch(&this_req.s->answered, 1, __ATOMIC_RELEASE);
	}
	return io_inner->writev(fd, iov, count, userdata);
}

const struct fuse_custom_io *mfs_loop_io(const struct fuse_custom_io *inner)
{
	static struct fuse_custom_io io;

	if (!io_inner) {
		io_inner = inner;
		io = *inner;
		io.writev = io_writev;
	}
	return io_inner == inner ? &io : inner;
}

void mfs_session_took(struct mfs_session *s, const struct fuse_buf *buf, uint64_t now_ns)
{
	const struct fuse_in_header *in = buf->mem;

	mfs_session_charge(s, buf);
	mfs_session_note_load(s, now_ns);
	mfs_loop_note_light(s, now_ns);
	s->processing++;
	this_req.s = s;
	this_req.unique = !(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(*in) ? in->unique : 0;
	this_req.answered = false;
}

int mfs_loop_ring_begin(struct mfs_session *s, const struct fuse_buf *buf, uint64_t now_ns,
			bool again)
{
	struct mfs_loop *loop = s->loop;
	int r = MFS_RING_GO;

	pthread_mutex_lock(&loop->lock);
	mfs_bucket_refill(&s->iops, now_ns);
	mfs_bucket_refill(&s->bw, now_ns);
	if (s->ended || s->end_reported || s->removed) {
		r = MFS_RING_GONE;
	} else if (!mfs_bucket_ok(&s->iops) || !mfs_bucket_ok(&s->bw)) {
		BUMP(s->st.throttled, !again); /* once per request held back, as the pool counts */
		r = MFS_RING_WAIT;
	} else if (s->limits.max_concurrent && s->inflight >= s->limits.max_concurrent) {
		BUMP(s->st.capped, !again);
		r = MFS_RING_WAIT;
	} else if (!cpu_share_ok(s, now_ns)) {
		BUMP(s->st.yield_waits, !again);
		r = MFS_RING_WAIT;
	} else {
		mfs_session_reserve(s);
		mfs_session_took(s, buf, now_ns);
		this_req.s = NULL; /* a ring reply is committed after processing */
		s->st.ring++;
	}
	pthread_mutex_unlock(&loop->lock);
	return r;
}

void mfs_session_request_done(struct mfs_session *s, uint64_t t0_ns, uint64_t t1_ns)
{
	mfs_session_record_latency(s, t1_ns - t0_ns);
	s->win_busy_ns += t1_ns - t0_ns;
	if (mfs_session_should_yield(s, t1_ns)) {
		uint64_t until = mfs_yield_guard(t1_ns, t1_ns - t0_ns);
		if (until) {
			s->unyield_until = until;
			s->st.starved++;
		}
	}
	s->processing--;
	if (this_req.s == s && this_req.answered)
		__atomic_sub_fetch(&s->answered, 1, __ATOMIC_RELAXED);
	this_req.s = NULL;
	mfs_session_unreserve(s);
	if (s->held)
		mfs_session_admit(s, t1_ns);
}

void mfs_loop_ring_end(struct mfs_session *s, uint64_t t0_ns)
{
	struct mfs_loop *loop = s->loop;
	uint64_t t1 = mfs_now_ns();

	pthread_mutex_lock(&loop->lock);
	mfs_session_request_done(s, t0_ns, t1);
	bool due = mfs_session_end_due(s);
	pthread_mutex_unlock(&loop->lock);
	if (due)
		s->on_end(s->arg);
}

void mfs_loop_post(struct mfs_loop *loop, struct mfs_loop_job *job)
{
	uint64_t one = 1;

	job->next = NULL;
	pthread_mutex_lock(&loop->lock);
	*loop->jobs_tail = job;
	loop->jobs_tail = &job->next;
	pthread_mutex_unlock(&loop->lock);
	/* a semaphore eventfd: each count wakes one waiting worker */
	if (write(loop->jfd, &one, sizeof(one)) < 0)
		mfs_err("loop: job eventfd: %s", strerror(errno));
}

struct mfs_loop_job *mfs_loop_take_job(struct mfs_loop *loop)
{
	struct mfs_loop_job *job = loop->jobs;

	if (job) {
		loop->jobs = job->next;
		if (!loop->jobs)
			loop->jobs_tail = &loop->jobs;
	}
	return job;
}

void mfs_loop_tick(struct mfs_loop *loop, uint64_t now_ns)
{
	for (struct mfs_session *s = loop->sessions; s; s = s->next) {
		if (s->owner && s->processing && now_ns - s->read_ns >= STALL_NS) {
			mfs_sticky_force(&s->sticky);
			mfs_session_unstick(s, true);
			mfs_session_admit(s, now_ns);
		}
		if (s->throttled)
			mfs_session_admit(s, now_ns);
	}
	if (loop->watching && now_ns - loop->owned_read_ns >= WATCH_IDLE_NS) {
		loop->watching = false;
		update_timer(loop);
	}
}

void mfs_loop_sweep(struct mfs_loop *loop)
{
	if (!loop->grave)
		return;
	uint64_t oldest = UINT64_MAX;
	for (unsigned i = 0; i < loop->nworkers + (loop->xstarted ? 1 : 0); i++)
		if (loop->wgen[i] < oldest)
			oldest = loop->wgen[i];
	for (struct mfs_session **pp = &loop->grave; *pp;) {
		struct mfs_session *g = *pp;
		if (g->removed_gen < oldest) {
			*pp = g->grave_next;
			free(g);
		} else {
			pp = &g->grave_next;
		}
	}
}

unsigned mfs_loop_graveyard(struct mfs_loop *loop)
{
	unsigned n = 0;

	pthread_mutex_lock(&loop->lock);
	for (struct mfs_session *g = loop->grave; g; g = g->grave_next)
		n++;
	pthread_mutex_unlock(&loop->lock);
	return n;
}

/* Close and free what mfs_loop_create set up (an fd of -1 was not opened),
 * once no thread of the loop runs. */
static void free_loop(struct mfs_loop *loop)
{
	int fds[] = {loop->epfd, loop->xepfd, loop->evfd, loop->tfd, loop->jfd};

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (unsigned i = 0; loop->wargs && i < loop->nworkers; i++)
		if (loop->wargs[i].pepfd >= 0)
			close(loop->wargs[i].pepfd);
	pthread_mutex_destroy(&loop->lock);
	free(loop->workers);
	free(loop->wargs);
	free(loop->wgen);
	free(loop);
}

int mfs_loop_create(unsigned workers, struct mfs_loop **out)
{
	if (workers < 1 || workers > 1024)
		return -EINVAL;
	struct mfs_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return -ENOMEM;
	int rc;
	loop->nworkers = workers;
	loop->yield_share = MFS_YIELD_SHARE_DEFAULT;
	loop->epfd = loop->xepfd = loop->evfd = loop->tfd = loop->jfd = -1;
	loop->jobs_tail = &loop->jobs;
	pthread_mutex_init(&loop->lock, NULL);
	loop->workers = calloc(workers, sizeof(*loop->workers));
	loop->wargs = calloc(workers, sizeof(*loop->wargs));
	loop->wgen = calloc(workers + 1, sizeof(*loop->wgen));
	if (!loop->workers || !loop->wargs || !loop->wgen) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < workers; i++)
		loop->wargs[i].pepfd = -1;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->xepfd = epoll_create1(EPOLL_CLOEXEC);
	loop->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	loop->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	loop->jfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	if (loop->epfd < 0 || loop->xepfd < 0 || loop->evfd < 0 || loop->tfd < 0 || loop->jfd < 0) {
		rc = -errno;
		goto fail;
	}
	/* Workers wait on the epoll set themselves: a request is read by the
	 * thread the kernel wakes, with no hand-off between threads. */
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &loop->evfd};
	struct epoll_event tev = {.events = EPOLLIN, .data.ptr = &loop->tfd};
	struct epoll_event xev = {.events = EPOLLIN, .data.ptr = &loop->evfd};
	struct epoll_event jev = {.events = EPOLLIN, .data.ptr = &loop->jfd};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->evfd, &ev) < 0 ||
	    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->tfd, &tev) < 0 ||
	    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->jfd, &jev) < 0 ||
	    epoll_ctl(loop->xepfd, EPOLL_CTL_ADD, loop->evfd, &xev) < 0) {
		rc = -errno;
		goto fail;
	}
	/* Each worker's own set holds the shared one, level-triggered: an owner
	 * is woken while work waits there (pool.c). */
	for (unsigned i = 0; i < workers; i++) {
		struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &loop->epfd};
		int fd = loop->wargs[i].pepfd = epoll_create1(EPOLL_CLOEXEC);
		if (fd < 0 || epoll_ctl(fd, EPOLL_CTL_ADD, loop->epfd, &sev) < 0) {
			rc = -errno;
			goto fail;
		}
	}
	for (unsigned i = 0; i < workers; i++) {
		loop->wargs[i].loop = loop;
		loop->wargs[i].idx = i;
		rc = -pthread_create(&loop->workers[i], NULL, mfs_pool_worker, &loop->wargs[i]);
		if (rc) {
			for (unsigned j = i; j < workers; j++) /* free_loop closes the others */
				close(loop->wargs[j].pepfd);
			loop->nworkers = i;
			mfs_loop_destroy(loop);
			return rc;
		}
	}
	*out = loop;
	return 0;
fail:
	free_loop(loop);
	return rc;
}

void mfs_loop_destroy(struct mfs_loop *loop)
{
	pthread_mutex_lock(&loop->lock);
	loop->stopping = true;
	pthread_mutex_unlock(&loop->lock);
	/* Never read: stays readable, so every worker wakes and sees stopping. */
	uint64_t one = 1;
	if (write(loop->evfd, &one, sizeof(one)) < 0)
		mfs_warn("loop: eventfd write: %s", strerror(errno));
	for (unsigned i = 0; i < loop->nworkers; i++)
		pthread_join(loop->workers[i], NULL);
	if (loop->xstarted)
		pthread_join(loop->xworker, NULL);
	while (loop->grave) {
		struct mfs_session *g = loop->grave;
		loop->grave = g->grave_next;
		free(g);
	}
	free_loop(loop);
}

void mfs_loop_set_fair(struct mfs_loop *loop, bool fair)
{
	pthread_mutex_lock(&loop->lock);
	loop->unfair = !fair;
	pthread_mutex_unlock(&loop->lock);
}

void mfs_loop_set_sticky(struct mfs_loop *loop, bool on)
{
	pthread_mutex_lock(&loop->lock);
	loop->nosticky = !on;
	pthread_mutex_unlock(&loop->lock);
}

void mfs_loop_set_yield_share(struct mfs_loop *loop, unsigned percent)
{
	pthread_mutex_lock(&loop->lock);
	loop->yield_share = percent < 1 ? 1 : percent > 100 ? 100 : percent;
	pthread_mutex_unlock(&loop->lock);
}

int mfs_loop_set_latency(struct mfs_loop *loop, bool on)
{
	int rc = 0;

	pthread_mutex_lock(&loop->lock);
	loop->latency = on;
	/* The express thread exists in latency mode only: registering every
	 * session in a second epoll set costs each request a wake-up callback
	 * (unlinks ran 30% slower with it). */
	if (on && !loop->xstarted && !loop->sessions) {
		loop->xwarg.loop = loop;
		loop->xwarg.idx = loop->nworkers;
		loop->xwarg.express = true;
		rc = -pthread_create(&loop->xworker, NULL, mfs_pool_worker, &loop->xwarg);
		loop->xstarted = rc == 0;
	}
	pthread_mutex_unlock(&loop->lock);
	return rc;
}

unsigned mfs_loop_workers(const struct mfs_loop *loop)
{
	return loop->nworkers;
}

int mfs_loop_add(struct mfs_loop *loop, struct fuse_session *se, const char *name,
		 void (*on_end)(void *arg), void *arg, struct mfs_session **out)
{
	struct mfs_session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->se = se;
	s->fd = fuse_session_fd(se);
	s->on_end = on_end;
	s->arg = arg;
	snprintf(s->name, sizeof(s->name), "%s", name);
	int fl = fcntl(s->fd, F_GETFL);
	if (fl < 0 || fcntl(s->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int rc = -errno;
		free(s);
		return rc;
	}
	struct epoll_event ev = {.events = EPOLLONESHOT, .data.ptr = s};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
		int rc = -errno;
		free(s);
		return rc;
	}
	if (loop->xstarted && epoll_ctl(loop->xepfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
		int rc = -errno;
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		free(s);
		return rc;
	}
	uint64_t now = mfs_now_ns();
	pthread_mutex_lock(&loop->lock);
	/* ns of CPU per second; 100%: rate 0, no limit */
	uint64_t rate = loop->yield_share >= 100 ? 0 : loop->yield_share * 10000000ull;
	mfs_bucket_set(&s->cpu, rate, 1e6, now);
	s->next = loop->sessions;
	if (s->next)
		s->next->prev = s;
	loop->sessions = s;
	loop->nsessions++;
	mfs_session_admit(s, now);
	pthread_mutex_unlock(&loop->lock);
	*out = s;
	return 0;
}

void mfs_loop_abort(struct mfs_session *s)
{
	struct mfs_loop *loop = s->loop;

	pthread_mutex_lock(&loop->lock);
	s->ended = true;
	set_throttled(s, false);
	bool due = mfs_session_end_due(s);
	pthread_mutex_unlock(&loop->lock);
	if (due)
		s->on_end(s->arg);
}

void mfs_loop_remove(struct mfs_session *s)
{
	struct mfs_loop *loop = s->loop;

	pthread_mutex_lock(&loop->lock);
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	if (loop->xstarted)
		epoll_ctl(loop->xepfd, EPOLL_CTL_DEL, s->fd, NULL);
	mfs_session_unstick(s, false);
	if (loop->heavy == s)
		loop->heavy = NULL;
	if (loop->light == s)
		loop->light = NULL;
	if (s->prev)
		s->prev->next = s->next;
	else
		loop->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	loop->nsessions--;
	set_throttled(s, false);
	if (s->busy)
		loop->busy--;
	s->removed = true;
	s->removed_gen = loop->gen;
	s->grave_next = loop->grave;
	loop->grave = s;
	mfs_loop_sweep(loop);
	pthread_mutex_unlock(&loop->lock);
}

void mfs_loop_set_share(struct mfs_session *s, unsigned workers)
{
	unsigned old = __atomic_exchange_n(&s->acct_share, workers, __ATOMIC_RELAXED);

	if (workers > old) { /* held back by the old share: may start now */
		pthread_mutex_lock(&s->loop->lock);
		if (s->held)
			mfs_session_admit(s, mfs_now_ns());
		pthread_mutex_unlock(&s->loop->lock);
	}
}

void mfs_loop_set_limits(struct mfs_session *s, const struct mfs_limits *l)
{
	uint64_t now = mfs_now_ns();

	pthread_mutex_lock(&s->loop->lock);
	s->limits = *l;
	mfs_bucket_set(&s->iops, l->iops, 1, now);
	/* a bucket must hold at least one maximal request (1 MiB + header) */
	mfs_bucket_set(&s->bw, l->bandwidth, 1 << 20, now);
	if (s->held)
		mfs_session_admit(s, now);
	pthread_mutex_unlock(&s->loop->lock);
}

void mfs_loop_stats(struct mfs_session *s, struct mfs_session_stats *st)
{
	pthread_mutex_lock(&s->loop->lock);
	*st = s->st;
	st->inflight = s->inflight;
	st->worker_share = LOAD(s->acct_share);
	pthread_mutex_unlock(&s->loop->lock);
}

void mfs_loop_sample(struct mfs_session *s, struct mfs_session_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->ops = LOAD(s->st.ops);
	st->read_bytes = LOAD(s->st.read_bytes);
	st->write_bytes = LOAD(s->st.write_bytes);
	st->throttled = LOAD(s->st.throttled);
	st->capped = LOAD(s->st.capped);
	st->yield_waits = LOAD(s->st.yield_waits);
	st->lat_sum_ns = LOAD(s->st.lat_sum_ns);
	for (int i = 0; i < MFS_LAT_BUCKETS; i++)
		st->lat_hist[i] = LOAD(s->st.lat_hist[i]);
	for (int i = 0; i < MFS_OPCODES; i++)
		st->by_opcode[i] = LOAD(s->st.by_opcode[i]);
	st->inflight = LOAD(s->inflight);
	st->worker_share = LOAD(s->acct_share);
}

uint64_t mfs_lat_percentile(const struct mfs_session_stats *st, double pct)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i < MFS_LAT_BUCKETS; i++)
		total += st->lat_hist[i];
	if (!total)
		return 0;
	uint64_t want = (uint64_t)((double)total * pct / 100.0);
	if (want < 1)
		want = 1;
	for (int i = 0; i < MFS_LAT_BUCKETS; i++) {
		seen += st->lat_hist[i];
		if (seen >= want)
			return (uint64_t)1 << (i + 1);
	}
	return st->lat_max_ns;
}
