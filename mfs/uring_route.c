/* Where a ring request runs (see uring.h): processed on the ring thread,
 * handed to the worker pool (those that may wait long, dbfs_request_cost),
 * or deferred while its governor says wait. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <fuse_lowlevel.h>

#include "dbfs/dbfs.h"
#include "log.h"
#include "loop.h"
#include "ring_roam.h"
#include "uring_private.h"

/* The ring entry whose request this thread is processing (read by the
 * reply hook, uring_hooks.c). */
__thread struct uent *mfs_uring_cur;

/*
 * Should this request (of cost `cost`, dbfs_request_cost) run on a worker
 * instead of the ring thread? A ring thread serves every DBFS's requests
 * from its CPU in turn: one that waits for a disk or copies a megabyte
 * would hold all of them up. Reads and lookups stay on the ring: they are
 * what the ring is for. The small changes of a DBFS whose commits wait
 * for a disk go to the pool only while the ring serves other DBFSs too:
 * alone, the hop to a worker and back costs its single callers 7-10%
 * (tar -x, create, unlink on a disk) and holds nobody else up.
 */
static bool hand_off(const struct uq *q, const struct mfs_uring_sess *us, unsigned cost,
		     uint64_t now)
{
	if (cost & DBFS_COST_LONG)
		return true;
	return (cost & DBFS_COST_COMMIT) && now < q->mixed_until &&
	       __atomic_load_n(&us->slow, __ATOMIC_RELAXED);
}

/* A change of `us` (cost & DBFS_COST_COMMIT) took `ns`: update its average
 * and slow flag. */
static void note_time(struct mfs_uring_sess *us, unsigned cost, uint64_t ns)
{
	if (!(cost & DBFS_COST_COMMIT))
		return;
	uint64_t avg = __atomic_load_n(&us->change_ns, __ATOMIC_RELAXED);
	avg = avg - avg / 8 + ns / 8;
	__atomic_store_n(&us->change_ns, avg, __ATOMIC_RELAXED);
	bool slow = __atomic_load_n(&us->slow, __ATOMIC_RELAXED);
	if (slow != (slow ? avg > FAST_NS : avg > SLOW_NS))
		__atomic_store_n(&us->slow, !slow, __ATOMIC_RELAXED);
}

/* Run the request laid out in `buf` through libfuse; its reply lands in `e`. */
static void process(struct uent *e, struct fuse_buf *buf)
{
	struct mfs_uring_sess *us = e->us;
	uint64_t unique = e->unique;

	if (us->received)
		us->received(us->rarg, buf->mem, buf->size);
	mfs_uring_cur = e;
	fuse_session_process_buf(us->se, buf);
	mfs_uring_cur = NULL;
	if (!e->replied) /* an op that answered nothing: the entry must go back */
		mfs_uring_commit_error(e, unique, EIO);
}

/* A request handed to the pool, on a worker: process it, then give the
 * entry to its ring thread to commit. */
static void work(void *arg)
{
	struct uent *e = arg;
	struct uq *q = e->q;
	struct mfs_uring *u = q->u;
	unsigned cost = e->cost;
	struct mfs_session *s = e->s;
	uint64_t t0 = e->t0;
	uint64_t one = 1;

	uint64_t t1 = mfs_now_ns();
	mfs_loop_yield_begin(s);
	process(e, &e->buf);
	mfs_loop_yield_end(s); /* before u->lock, which every ring thread takes */
	note_time(e->us, cost, mfs_now_ns() - t1);
	/* From here `e` (and its session's ring state) belongs to the ring
	 * thread again, which may commit it and see it retired and freed. */
	pthread_mutex_lock(&u->lock);
	e->next = q->done;
	q->done = e;
	pthread_mutex_unlock(&u->lock);
	if (write(q->evfd, &one, sizeof(one)) < 0)
		mfs_err("uring: queue %u: eventfd: %s", q->qid, strerror(errno));
	mfs_loop_ring_end(s, t0); /* s lives while this request is in flight */
}

/* Process the request in `e` (its in header, op header and payload are in
 * place), or defer it when its governor says wait, or hand it to the pool. */
void mfs_uring_serve(struct uq *q, struct uent *e)
{
	struct mfs_uring_sess *us = e->us;
	struct mfs_uring *u = q->u;
	const struct fuse_in_header *in = (const void *)e->h->in_out;
	uint32_t psz = e->h->ent.payload_sz;
	size_t opsz = in->len >= sizeof(*in) + psz ? in->len - sizeof(*in) - psz : SIZE_MAX;

	if (opsz > sizeof(e->h->op_in) || psz > MFS_URING_PAYLOAD) {
		mfs_warn("uring: fd %d: malformed request (opcode %u, len %u, payload %u)", us->fd,
			 in->opcode, in->len, psz);
		mfs_uring_commit_error(e, in->unique, EIO);
		return;
	}
	char *mem = e->base + HEADROOM - sizeof(*in) - opsz;
	memcpy(mem, in, sizeof(*in));
	memcpy(mem + sizeof(*in), e->h->op_in, opsz);
	struct fuse_buf buf = {.mem = mem, .size = sizeof(*in) + opsz + psz};

	uint64_t t0 = mfs_now_ns();
	pthread_mutex_lock(&u->lock);
	struct mfs_session *s = us->dead ? NULL : us->s;
	int go = s ? mfs_loop_ring_begin(s, &buf, t0, e->held) : MFS_RING_GONE;
	pthread_mutex_unlock(&u->lock);
	e->held = go == MFS_RING_WAIT;
	if (go == MFS_RING_WAIT) {
		e->next = NULL;
		*q->deferred_tail = e;
		q->deferred_tail = &e->next;
		if (!q->retry_at)
			q->retry_at = t0 + DEFER_NS;
		return;
	}
	if (go == MFS_RING_GONE) {
		mfs_uring_commit_error(e, in->unique, EIO);
		return;
	}
	e->unique = in->unique;
	e->replied = false;
	e->cost = dbfs_request_cost(buf.mem, buf.size);
	mfs_ring_roam_note(&q->roam, buf.mem, buf.size, t0);
	if (q->last != us) {
		if (q->last)
			q->mixed_until = t0 + MIXED_NS;
		q->last = us;
	}
	if (hand_off(q, us, e->cost, t0)) {
		e->on_worker = true;
		e->s = s;
		e->t0 = t0;
		e->buf = buf;
		e->job.fn = work;
		e->job.arg = e;
		mfs_loop_post(u->loop, &e->job);
		return;
	}
	process(e, &buf);
	mfs_loop_ring_end(s, t0);
	note_time(us, e->cost, mfs_now_ns() - t0);
}
