/* The custom I/O hooks of ring sessions: the read hook notes a FUSE_INIT
 * that offers the ring, the reply hook turns the ring on in its reply and
 * sends every ring request's reply as a commit of its entry. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "uring_private.h"

/* The one set of rings of the process: libfuse hands the custom I/O hooks
 * only the session's userdata (the DBFS), not ours. */
struct mfs_uring *mfs_the_uring;

ssize_t mfs_uring_io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct mfs_uring *u = mfs_the_uring;
	ssize_t n = u->inner->read(fd, buf, len, userdata);
	const struct fuse_in_header *h = buf;

	if (n < (ssize_t)(sizeof(*h) + sizeof(struct fuse_init_in)) || h->opcode != FUSE_INIT)
		return n;
	const struct fuse_init_in *in = (const void *)(h + 1);
	uint64_t flags = in->flags;
	if (in->flags & FUSE_INIT_EXT)
		flags |= (uint64_t)in->flags2 << 32;
	if (!(flags & URING_INIT_FLAG))
		return n;
	pthread_mutex_lock(&u->lock);
	struct mfs_uring_sess *us = mfs_uring_sess_by_fd(u, fd);
	if (us && !us->init_unique) {
		us->init_unique = h->unique;
		__atomic_add_fetch(&u->inits, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&u->lock);
	return n;
}

static ssize_t iov_total(const struct iovec *iov, int count)
{
	ssize_t n = 0;

	for (int i = 0; i < count; i++)
		n += (ssize_t)iov[i].iov_len;
	return n;
}

/*
 * The reply to a session's FUSE_INIT: when the kernel offered the ring
 * (mfs_uring_io_read noted it), take it, send the reply, then have every queue
 * register the session's entries (the kernel accepts them only once the
 * reply made the connection initialised).
 */
static ssize_t init_reply(struct mfs_uring *u, int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out *out = iov[1].iov_base;

	pthread_mutex_lock(&u->lock);
	struct mfs_uring_sess *us = mfs_uring_sess_by_fd(u, fd);
	if (!us || !us->init_unique || us->init_unique != oh->unique) {
		pthread_mutex_unlock(&u->lock);
		return u->inner->writev(fd, iov, count, userdata);
	}
	us->init_unique = 0;
	__atomic_sub_fetch(&u->inits, 1, __ATOMIC_RELAXED);
	/* the control thread binds the loop session just after adding it */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += BIND_WAIT_MS / 1000;
	while (!us->s && !us->dead)
		if (pthread_cond_timedwait(&u->cond, &u->lock, &ts) == ETIMEDOUT)
			break;
	bool take =
	    us->s && !us->dead && oh->error == 0 &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(out->flags2) &&
	    (out->flags & FUSE_INIT_EXT);
	int rc = take ? mfs_uring_start_queues(u) : 0;
	if (rc) {
		mfs_warn("uring: fd %d: cannot start the rings: %s; this mount stays on /dev/fuse",
			 fd, strerror(-rc));
		take = false;
	}
	if (take && us->ring_fd < 0)
		us->ring_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (take && us->ring_fd < 0) {
		mfs_warn("uring: fd %d: cannot duplicate it: %s", fd, strerror(errno));
		take = false;
	}
	if (take)
		us->refs++; /* for the registrations below */
	pthread_mutex_unlock(&u->lock);
	if (!take)
		return u->inner->writev(fd, iov, count, userdata);

	out->flags2 |= (uint32_t)(URING_INIT_FLAG >> 32);
	ssize_t r = u->inner->writev(fd, iov, count, userdata);
	pthread_mutex_lock(&u->lock);
	if (r >= 0 && !us->dead) {
		for (unsigned i = 0; i < u->nq; i++) {
			us->refs++; /* dropped once queue i registered its entries */
			us->pending_next[i] = u->q[i].pending;
			u->q[i].pending = us;
		}
	}
	mfs_uring_sess_put(us);
	pthread_mutex_unlock(&u->lock);
	if (r >= 0) {
		uint64_t one = 1;
		for (unsigned i = 0; i < u->nq; i++)
			if (write(u->q[i].evfd, &one, sizeof(one)) < 0)
				mfs_warn("uring: waking queue %u: %s", i, strerror(errno));
		mfs_debug("uring: fd %d: FUSE over io_uring on %u queues", fd, u->nq);
	}
	return r;
}

ssize_t mfs_uring_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct mfs_uring *u = mfs_the_uring;
	struct uent *e = mfs_uring_cur;
	const struct fuse_out_header *oh = iov[0].iov_base;

	if (count >= 1 && iov[0].iov_len >= sizeof(*oh)) {
		if (e && e->unique && oh->unique == e->unique) {
			mfs_uring_commit_reply(e, oh, iov + 1, count - 1);
			return iov_total(iov, count);
		}
		if (count >= 2 && oh->unique && __atomic_load_n(&u->inits, __ATOMIC_RELAXED))
			return init_reply(u, fd, iov, count, userdata);
	}
	return u->inner->writev(fd, iov, count, userdata);
}
