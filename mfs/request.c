/*
 * The bookkeeping of one request, the same for the pool and the rings:
 * counted in flight, charged to the governor's counters and buckets, its
 * reply seen leaving (mfs_loop_io), its latency recorded when it is done
 * (see loop_private.h).
 */
#include <pthread.h>
#include <linux/fuse.h>
#include <fuse_lowlevel.h>

#include "loop_private.h"

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
	} else if (!mfs_session_cpu_ok(s, now_ns)) {
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
