/*
 * Admission: whether a session may have its next request read now (token
 * buckets, the fair share of workers, the CPU share while it yields, the
 * express set), arming its fd where the next request will be read, and
 * the throttle timer that re-checks a held session (see loop_private.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include "log.h"
#include "loop_private.h"

/* While a session is throttled a timer wakes a worker this often to refill;
 * it also ticks while sessions owned by a worker (sticky.h) are active,
 * until none read a request for a while (loop.c, WATCH_IDLE_NS). */
#define THROTTLE_TICK_MS 2

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

/* lock held: the timer ticks while a session is throttled or watched. */
void mfs_loop_update_timer(struct mfs_loop *loop)
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

void mfs_session_set_throttled(struct mfs_session *s, bool on)
{
	struct mfs_loop *loop = s->loop;

	if (s->throttled == on)
		return;
	s->throttled = on;
	if (on)
		loop->throttled++;
	else
		loop->throttled--;
	mfs_loop_update_timer(loop);
}

void mfs_loop_watch(struct mfs_loop *loop, uint64_t now_ns)
{
	loop->owned_read_ns = now_ns;
	if (!loop->watching) {
		loop->watching = true;
		mfs_loop_update_timer(loop);
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
bool mfs_session_cpu_ok(struct mfs_session *s, uint64_t now_ns)
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
	if (!mfs_bucket_ok(&s->iops) || !mfs_bucket_ok(&s->bw) || !mfs_session_cpu_ok(s, now_ns))
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
		mfs_session_set_throttled(s, true);
		return false;
	}
	if (!mfs_session_cpu_ok(s, now_ns)) { /* the timer re-checks it, as a bucket's */
		if (!s->throttled)
			BUMP(s->st.yield_waits, 1);
		s->held = true;
		mfs_session_set_throttled(s, true);
		return false;
	}
	mfs_session_set_throttled(s, false);
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
