/* The loop's lifetime and its sessions: creating and stopping the loop,
 * adding, aborting and removing sessions, their limits and statistics,
 * posted jobs and the timer tick (see loop.h and loop_private.h; admission
 * is in admit.c, one request's bookkeeping in request.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "loop_private.h"

/* The timer ticks while owned sessions (sticky.h) read requests, until
 * none did for WATCH_IDLE_NS. */
#define WATCH_IDLE_NS 100000000ull
/* A request of an owned session that takes longer than this sends the
 * session back to the shared set (long enough that a worker preempted on a
 * busy machine seldom trips it): other requests of it (another client,
 * say one that would unblock this one) must not wait for it. */
#define STALL_NS 10000000ull

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
		mfs_loop_update_timer(loop);
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
	/* Edge-triggered: one tick wakes one worker. Level-triggered, a
	 * worker woken for a tick passed the wake-up on to the next idle one
	 * (epoll's ready list) until the tick was read, and the first one
	 * reads it only after taking loop->lock, which a serving worker often
	 * holds: with 8 workers serving one fio client, 3.3 reads of tfd per
	 * tick (500 ticks a second while a session is watched, admit.c), each
	 * extra one a wake-up and a lock round trip for nothing. */
	struct epoll_event tev = {.events = EPOLLIN | EPOLLET, .data.ptr = &loop->tfd};
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
	mfs_session_set_throttled(s, false);
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
	mfs_session_set_throttled(s, false);
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
