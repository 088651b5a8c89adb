/* The ring threads: one per possible CPU, started with the first ring, each
 * waiting for its ring's completions and acting on them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "loop.h"
#include "ring_priority.h"
#include "ring_roam.h"
#include "uring_private.h"

/* ---- the ring threads ---- */

/* Queue this queue's entries of the sessions in `list` (taken from
 * q->pending). */
static void register_pending(struct uq *q, struct mfs_uring_sess *list)
{
	struct mfs_uring *u = q->u;

	while (list) {
		struct mfs_uring_sess *us = list;
		list = us->pending_next[q->qid];
		for (unsigned i = 0; i < DEPTH && !us->dead; i++) {
			struct uent *e = &us->ents[q->qid * DEPTH + i];
			/* untouched pages cost nothing: most requests use
			 * the first page or two */
			e->base = mmap(NULL, HEADROOM + MFS_URING_PAYLOAD, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (e->base == MAP_FAILED) {
				mfs_warn("uring: no memory for a ring entry of fd %d", us->fd);
				e->base = NULL;
				break;
			}
			e->h = &e->hdr;
			e->us = us;
			e->q = q;
			e->iov[0] = (struct iovec){e->h, sizeof(*e->h)};
			e->iov[1] = (struct iovec){e->base + HEADROOM, MFS_URING_PAYLOAD};
			pthread_mutex_lock(&u->lock);
			us->refs++;
			pthread_mutex_unlock(&u->lock);
			mfs_uring_prep_cmd(q, e, URING_CMD_REGISTER);
		}
		pthread_mutex_lock(&u->lock);
		mfs_uring_sess_put(us);
		pthread_mutex_unlock(&u->lock);
	}
}

/* The kernel gave `e` back for good (its connection ended, or it refused
 * the entry). */
static void retire(struct uent *e, int res)
{
	struct mfs_uring_sess *us = e->us;
	struct mfs_uring *u = us->u;

	if (res != -ENOTCONN && res != -ECONNABORTED && res != -ECANCELED && res != -ENODEV)
		mfs_warn("uring: fd %d: ring entry refused: %s; this mount stays on /dev/fuse",
			 us->fd, strerror(-res));
	pthread_mutex_lock(&u->lock);
	mfs_uring_sess_put(us);
	pthread_mutex_unlock(&u->lock);
}

static void retry_deferred(struct uq *q)
{
	struct uent *list = q->deferred;

	q->deferred = NULL;
	q->deferred_tail = &q->deferred;
	q->retry_at = 0;
	while (list) {
		struct uent *e = list;
		list = e->next;
		mfs_uring_serve(q, e); /* in order: one deferred again goes back at the end */
	}
}

/* The eventfd fired: take what other threads handed this queue (entries
 * answered on workers, new sessions' entries to register: u->lock) in one
 * hold of the lock, and act on it; once stopping, only commits. */
static void take_handed(struct uq *q)
{
	struct mfs_uring *u = q->u;
	bool stopping = __atomic_load_n(&u->stopping, __ATOMIC_ACQUIRE);

	pthread_mutex_lock(&u->lock);
	struct uent *done = q->done;
	struct mfs_uring_sess *pending = stopping ? NULL : q->pending;
	q->done = NULL;
	if (!stopping)
		q->pending = NULL;
	pthread_mutex_unlock(&u->lock);
	mfs_uring_commit_done(q, done);
	if (!stopping) {
		mfs_uring_prep_poll(q);
		register_pending(q, pending);
	}
}

static void on_cqe(struct uq *q, const struct io_uring_cqe *cqe)
{
	void *data = io_uring_cqe_get_data(cqe);

	if (data == &q->evfd) {
		uint64_t v;
		if (read(q->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			mfs_warn("uring: queue %u: eventfd: %s", q->qid, strerror(errno));
		take_handed(q);
		return;
	}
	struct uent *e = data;
	if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
		mfs_uring_prep_cmd(q, e,
				   e->replied ? URING_CMD_COMMIT_AND_FETCH : URING_CMD_REGISTER);
		return;
	}
	if (cqe->res < 0) {
		retire(e, cqe->res);
		return;
	}
	mfs_uring_serve(q, e);
}

/* Send the queued commits; at SCHED_IDLE, apart from the wait, to see how
 * long they kept us (ring_priority.c). */
static void submit_commits(struct uq *q)
{
	if (!mfs_ring_priority_idle(&q->prio) || !io_uring_sq_ready(&q->ring))
		return; /* submit_and_wait sends them */
	uint64_t t0 = mfs_now_ns();
	io_uring_submit(&q->ring);
	mfs_ring_priority_submitted(&q->prio, t0, mfs_now_ns());
}

/* Before waiting: SCHED_IDLE unless it roams, a heavy DBFS yields to a
 * light one, or the starvation guard says no (ring_priority.c). */
static void choose_priority(struct uq *q)
{
	uint64_t now = mfs_now_ns();

	mfs_ring_priority_choose(&q->prio, q->roam.roaming || mfs_loop_contended(q->u->loop, now),
				 now);
}

static void *ring_main(void *arg)
{
	struct uq *q = arg;
	struct io_uring_cqe *cqe;
	bool warned = false;

	char name[16];
	snprintf(name, sizeof(name), "mfs-ring%u", q->qid % 10000);
	pthread_setname_np(pthread_self(), name);
	/* started from whichever thread took the first ring: be as the
	 * process's other threads are (the creator's nice, see mfs_uring_start_queues) */
	setpriority(PRIO_PROCESS, 0, q->u->nice);
	mfs_ring_roam_start(&q->roam);
	mfs_ring_priority_init(&q->prio, q->qid);
	mfs_uring_prep_poll(q);
	while (!__atomic_load_n(&q->u->stopping, __ATOMIC_ACQUIRE)) {
		int rc;
		submit_commits(q);
		choose_priority(q);
		if (q->deferred) {
			uint64_t now = mfs_now_ns();
			uint64_t wait = q->retry_at > now ? q->retry_at - now : 0;
			struct __kernel_timespec ts = {.tv_sec = (long long)(wait / 1000000000u),
						       .tv_nsec = (long long)(wait % 1000000000u)};
			rc = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);
		} else {
			rc = io_uring_submit_and_wait(&q->ring, 1);
		}
		if (rc < 0 && rc != -EINTR && rc != -ETIME && rc != -EAGAIN && rc != -EBUSY &&
		    !warned) {
			mfs_err("uring: queue %u: io_uring_enter: %s", q->qid, strerror(-rc));
			warned = true;
		}
		mfs_ring_priority_woke(&q->prio);
		unsigned head, n = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe)
		{
			n++;
			on_cqe(q, cqe);
		}
		io_uring_cq_advance(&q->ring, n);
		if (q->deferred && mfs_now_ns() >= q->retry_at)
			retry_deferred(q);
	}
	mfs_ring_priority_fini(&q->prio); /* nothing may keep the way out waiting */
	/* Answer what is still deferred, then closing the ring cancels the
	 * entries the kernel holds. */
	while (q->deferred) {
		struct uent *e = q->deferred;
		q->deferred = e->next;
		mfs_uring_commit_error(e, ((const struct fuse_in_header *)e->h->in_out)->unique,
				       EIO);
	}
	io_uring_submit(&q->ring);
	return NULL;
}

/* ---- set-up and sessions ---- */

/*
 * u->lock held. Start every queue not running yet: its eventfd, its ring
 * and its thread. The queues start with the process when the kernel
 * offers rings then, else with the first session that takes one (someone
 * turned enable_uring on later): while the kernel offers none
 * (enable_uring=N, or a kernel before 6.14) there is no ring thread, no
 * ring and no memory for them, since they would mfs_uring_serve nothing. Returns 0
 * or -errno (eventfd, io_uring_queue_init, pthread_create; -ESHUTDOWN once
 * mfs_uring_destroy began); the queues started stay, the next session's
 * INIT tries the others again.
 */
int mfs_uring_start_queues(struct mfs_uring *u)
{
	pthread_attr_t attr;
	struct sched_param sp = {0};
	int rc = 0;

	if (u->stopping)
		return -ESHUTDOWN;
	/* The thread that takes the first ring is a worker, maybe at
	 * SCHED_IDLE or another nice value: ring threads start at normal
	 * priority, as they did from main, and take the creator's nice. */
	pthread_attr_init(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	pthread_attr_setschedparam(&attr, &sp);
	for (unsigned i = 0; i < u->nq && !rc; i++) {
		struct uq *q = &u->q[i];
		if (q->started)
			continue;
		if (q->evfd < 0) {
			int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (fd < 0) {
				rc = -errno;
				break;
			}
			struct io_uring_params p = {.flags =
							IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE,
						    .cq_entries = CQ_SIZE};
			rc = io_uring_queue_init_params(SQ_SIZE, &q->ring, &p);
			if (rc) {
				close(fd);
				break;
			}
			q->evfd = fd;
		}
		rc = -pthread_create(&q->tid, &attr, ring_main, q);
		if (rc == -EPERM) /* a creator at SCHED_IDLE that may not leave it */
			rc = -pthread_create(&q->tid, NULL, ring_main, q);
		if (rc == 0) {
			q->started = true;
			__atomic_add_fetch(&u->running, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_attr_destroy(&attr);
	return rc;
}
