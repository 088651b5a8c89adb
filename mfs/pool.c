/*
 * The worker pool: a fixed set of threads, each waiting on the shared epoll
 * set and reading one request from the session the kernel reported (its fd
 * is armed EPOLLONESHOT, so one worker gets it; the governor re-arms it for
 * the next request). See loop.h for the flow.
 */
#include <errno.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fuse.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "loop_private.h"

/* What a request costs the governor: one operation, plus its payload bytes
 * for reads and writes (parsed from the kernel's request header). */
static void charge(struct mfs_session *s, const struct fuse_buf *buf)
{
	uint64_t bytes = 0;

	s->st.ops++;
	if (!(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(struct fuse_in_header)) {
		const struct fuse_in_header *h = buf->mem;
		const char *arg = (const char *)buf->mem + sizeof(*h);
		size_t arglen = buf->size - sizeof(*h);
		if (h->opcode == FUSE_READ && arglen >= sizeof(struct fuse_read_in)) {
			bytes = ((const struct fuse_read_in *)arg)->size;
			s->st.read_bytes += bytes;
		} else if (h->opcode == FUSE_WRITE && arglen >= sizeof(struct fuse_write_in)) {
			bytes = ((const struct fuse_write_in *)arg)->size;
			s->st.write_bytes += bytes;
		}
	}
	mfs_bucket_take(&s->iops, 1);
	mfs_bucket_take(&s->bw, (double)bytes);
}

static void record_latency(struct mfs_session *s, uint64_t ns)
{
	int b = ns ? 63 - __builtin_clzll(ns) : 0;

	if (b >= MFS_LAT_BUCKETS)
		b = MFS_LAT_BUCKETS - 1;
	s->st.lat_hist[b]++;
	s->st.lat_sum_ns += ns;
	if (ns > s->st.lat_max_ns)
		s->st.lat_max_ns = ns;
}

void *mfs_pool_worker(void *arg)
{
	struct mfs_worker *w = arg;
	struct mfs_loop *loop = w->loop;
	struct fuse_buf buf = {.mem = NULL};
	struct epoll_event ev;

	pthread_mutex_lock(&loop->lock);
	for (;;) {
		if (loop->stopping)
			break;
		loop->wgen[w->idx] = ++loop->gen;
		mfs_loop_sweep(loop);
		pthread_mutex_unlock(&loop->lock);
		int n = epoll_wait(loop->epfd, &ev, 1, -1);
		pthread_mutex_lock(&loop->lock);
		if (n < 0 && errno != EINTR)
			mfs_err("loop: epoll_wait: %s", strerror(errno));
		if (n <= 0 || ev.data.ptr == &loop->evfd)
			continue;
		if (ev.data.ptr == &loop->tfd) {
			uint64_t ticks;
			if (read(loop->tfd, &ticks, sizeof(ticks)) == sizeof(ticks))
				mfs_loop_tick(loop, mfs_now_ns());
			continue;
		}
		struct mfs_session *s = ev.data.ptr;
		if (s->removed)
			continue;
		s->armed = false;
		if (s->ended)
			continue;
		s->inflight++;
		if (s->inflight > s->st.peak_inflight)
			s->st.peak_inflight = s->inflight;
		mfs_session_update_busy(s);
		pthread_mutex_unlock(&loop->lock);

		buf.flags = 0;
		int res = fuse_session_receive_buf(s->se, &buf);
		uint64_t t0 = mfs_now_ns();

		pthread_mutex_lock(&loop->lock);
		if (res > 0) {
			charge(s, &buf);
			/* let another worker take the session's next request */
			mfs_session_admit(s, t0);
			pthread_mutex_unlock(&loop->lock);

			fuse_session_process_buf(s->se, &buf);

			uint64_t t1 = mfs_now_ns();
			pthread_mutex_lock(&loop->lock);
			record_latency(s, t1 - t0);
			s->inflight--;
			mfs_session_update_busy(s);
			if (s->held)
				mfs_session_admit(s, t1);
		} else {
			s->inflight--;
			mfs_session_update_busy(s);
			if (res == 0 || fuse_session_exited(s->se)) {
				s->ended = true; /* ENODEV: unmounted or aborted */
			} else {
				if (res != -EAGAIN && res != -EINTR)
					mfs_warn("%s: reading /dev/fuse: %s", s->name,
						 strerror(-res));
				mfs_session_admit(s, t0);
			}
		}
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
