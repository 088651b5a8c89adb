/*
 * FUSE over io_uring: the ring transport's lifetime (see uring.h): set-up
 * and tear-down of the process's rings, and the sessions attached to them.
 * Per-CPU ring threads (uring_thread.c) take the requests of every attached
 * session from the kernel and route each one (uring_route.c); what a
 * request costs is DBFS's to say (dbfs_request_cost); where a ring thread
 * may run is ring_roam.c's, and at which priority ring_priority.c's. The
 * entry layout and the files' order are in uring_private.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "uring.h"
#include "uring_private.h"

bool mfs_uring_kernel_enabled(void)
{
	char c = 'N';
	int fd = open("/sys/module/fuse/parameters/enable_uring", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (read(fd, &c, 1) != 1)
		c = 'N';
	close(fd);
	return c == 'Y' || c == 'y' || c == '1';
}

int mfs_uring_create(struct mfs_loop *loop, const struct fuse_custom_io *inner,
		     struct mfs_uring **out)
{
	struct mfs_uring *u;

	if (mfs_the_uring)
		return -EBUSY;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	int n = get_nprocs_conf();
	u->nq = n > 0 ? (unsigned)n : 1;
	u->q = calloc(u->nq, sizeof(*u->q));
	if (!u->q) {
		free(u);
		return -ENOMEM;
	}
	u->loop = loop;
	u->inner = inner;
	errno = 0;
	u->nice = getpriority(PRIO_PROCESS, 0); /* this thread's */
	if (errno)
		u->nice = 0;
	if (sched_getaffinity(0, sizeof(u->cpus), &u->cpus) != 0)
		CPU_ZERO(&u->cpus); /* unknown: never roam */
	u->io = (struct fuse_custom_io){.read = mfs_uring_io_read, .writev = mfs_uring_io_writev};
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	for (unsigned i = 0; i < u->nq; i++) {
		struct uq *q = &u->q[i];
		q->u = u;
		q->qid = i;
		q->evfd = -1;
		q->deferred_tail = &q->deferred;
		mfs_ring_roam_init(&q->roam, i, &u->cpus);
	}
	if (mfs_uring_kernel_enabled()) { /* offered already: start with the process */
		pthread_mutex_lock(&u->lock);
		int rc = mfs_uring_start_queues(u);
		pthread_mutex_unlock(&u->lock);
		if (rc) {
			mfs_uring_destroy(u);
			return rc;
		}
	}
	mfs_the_uring = u;
	*out = u;
	return 0;
}

void mfs_uring_destroy(struct mfs_uring *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->lock); /* no queue starts after this */
	__atomic_store_n(&u->stopping, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&u->lock);
	uint64_t one = 1;
	for (unsigned i = 0; i < u->nq; i++)
		if (u->q[i].started && write(u->q[i].evfd, &one, sizeof(one)) < 0)
			mfs_warn("uring: stopping queue %u: %s", i, strerror(errno));
	for (unsigned i = 0; i < u->nq; i++) {
		struct uq *q = &u->q[i];
		if (q->started)
			pthread_join(q->tid, NULL);
		if (q->evfd >= 0) {
			io_uring_queue_exit(&q->ring);
			close(q->evfd);
		}
	}
	if (mfs_the_uring == u)
		mfs_the_uring = NULL;
	while (u->sessions) { /* the kernel has let go of every entry now */
		struct mfs_uring_sess *us = u->sessions;
		us->refs = 1;
		mfs_uring_sess_put(us);
	}
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u->q);
	free(u);
}

const struct fuse_custom_io *mfs_uring_io(struct mfs_uring *u)
{
	return &u->io;
}

int mfs_uring_attach(struct mfs_uring *u, struct fuse_session *se,
		     void (*received)(void *arg, const void *buf, size_t len), void *arg,
		     struct mfs_uring_sess **out)
{
	struct mfs_uring_sess *us = malloc(sizeof(*us));
	struct uent *ents = calloc((size_t)u->nq * DEPTH, sizeof(*ents));
	struct mfs_uring_sess **pending_next = calloc(u->nq, sizeof(*pending_next));

	if (!us || !ents || !pending_next) {
		free(us);
		free(ents);
		free(pending_next);
		return -ENOMEM;
	}
	*us = (struct mfs_uring_sess){.u = u,
				      .se = se,
				      .fd = fuse_session_fd(se),
				      .ring_fd = -1,
				      .received = received,
				      .rarg = arg,
				      .refs = 1, /* until detached */
				      .ents = ents,
				      .pending_next = pending_next};
	pthread_mutex_lock(&u->lock);
	us->next = u->sessions;
	u->sessions = us;
	pthread_mutex_unlock(&u->lock);
	*out = us;
	return 0;
}

void mfs_uring_bind(struct mfs_uring_sess *us, struct mfs_session *s)
{
	pthread_mutex_lock(&us->u->lock);
	us->s = s;
	pthread_cond_broadcast(&us->u->cond);
	pthread_mutex_unlock(&us->u->lock);
}

void mfs_uring_detach(struct mfs_uring_sess *us)
{
	if (!us)
		return;
	struct mfs_uring *u = us->u;
	pthread_mutex_lock(&u->lock);
	us->dead = true;
	us->s = NULL;
	if (us->init_unique) {
		us->init_unique = 0;
		__atomic_sub_fetch(&u->inits, 1, __ATOMIC_RELAXED);
	}
	pthread_cond_broadcast(&u->cond);
	mfs_uring_sess_put(us);
	pthread_mutex_unlock(&u->lock);
}

unsigned mfs_uring_queues(const struct mfs_uring *u)
{
	return u ? __atomic_load_n(&u->running, __ATOMIC_RELAXED) : 0;
}

void mfs_uring_counts(const struct mfs_uring *u, struct mfs_uring_counts *c)
{
	*c = (struct mfs_uring_counts){0};
	for (unsigned i = 0; u && i < u->nq; i++) {
		c->roams += mfs_ring_roam_count(&u->q[i].roam);
		c->idle_waits += mfs_ring_priority_idle_waits(&u->q[i].prio);
		c->starved += mfs_ring_priority_starved(&u->q[i].prio);
	}
}
