/*
 * FUSE over io_uring: the ring transport (see uring.h). Per-CPU ring
 * threads take the requests of every attached session from the kernel,
 * route each one (processed here, handed to the worker pool, or deferred
 * by the governor) and commit its reply. What a request costs is DBFS's to
 * say (dbfs_request_cost); where a ring thread may run is ring_roam.c's,
 * and at which priority ring_priority.c's.
 *
 * One ring entry (the kernel's struct fuse_ring_ent, ours is struct uent):
 *
 *   h    ->  +------------------+-----------------+----------------------+
 *            | in_out (128)     | op_in (128)     | ent_in_out (32)      |
 *            | fuse_in_header / | the op's fixed  | commit_id,           |
 *            | fuse_out_header  | header (arg 0)  | payload_sz           |
 *            +------------------+-----------------+----------------------+
 *   base ->  +-- HEADROOM ------+-- payload (MFS_URING_PAYLOAD) ---------+
 *            |     ...| in hdr | op hdr | the op's other args, data ...  |
 *            +------------------+----------------------------------------+
 *                     ^ buf.mem handed to fuse_session_process_buf
 *
 * libfuse 3.14 parses a request laid out as /dev/fuse gives it (header,
 * then the arguments), so the ring thread copies the in header and the op
 * header into the headroom just before the payload the kernel filled: the
 * payload (a write's data) is not copied. The op header's size is what the
 * header's len leaves: len - sizeof(in header) - payload_sz.
 *
 * Every SQE of a ring is prepared and submitted by its own thread (no
 * lock on the submission queue): the reply of a ring request is written by
 * the custom writev hook on the thread that processes it (thread-local
 * `cur`), and other threads hand work to a ring (a new session's entries,
 * stopping) through its eventfd.
 *
 * An entry the kernel gave us must always go back with a commit, even for a
 * session that is going (answered EIO): the kernel keeps a mount's teardown
 * waiting for its entries.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <fuse_lowlevel.h>

#include "dbfs/dbfs.h"
#include "log.h"
#include "loop.h"
#include "ring_priority.h"
#include "ring_roam.h"
#include "uring.h"

/* The kernel's ABI (include/uapi/linux/fuse.h, 7.42), absent from older
 * system headers. */
#define URING_INIT_FLAG (1ull << 41) /* FUSE_OVER_IO_URING */
#define URING_CMD_REGISTER 1         /* register an entry, fetch a request */
#define URING_CMD_COMMIT_AND_FETCH 2 /* reply, fetch the next request */

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[128];
	char op_in[128];
	struct uring_ent_in_out ent;
};

struct uring_cmd_req { /* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define HEADROOM 4096 /* room for the in header and the op header */
/* Entries per session and queue. A ring thread processes one request at a
 * time, and a commit fetches the next request in the same call: more
 * entries would only hold more memory. */
#define DEPTH 1
#define SQ_SIZE 256
#define CQ_SIZE 4096
#define DEFER_NS 1000000ull /* retry of a request its governor held back */
#define BIND_WAIT_MS 1000
/* Requests that may wait long go to the worker pool (hand_off): those
 * DBFS calls long (DBFS_COST_LONG: syncs, copies, fallocate, truncates,
 * big writes), and, while the ring serves more than one DBFS (another one
 * within MIXED_NS), every change of a session whose changes took over
 * SLOW_NS on average lately (its commits wait for a disk) until they are
 * under FAST_NS again. */
#define SLOW_NS	 200000u
#define FAST_NS	 50000u
#define MIXED_NS 10000000ull

struct uq;

struct uent {
	struct mfs_uring_sess *us;
	struct uq *q;
	struct uring_req_header *h; /* points to hdr */
	struct uring_req_header hdr;
	char *base;
	struct iovec iov[2];
	uint64_t unique;  /* request being processed (0: none) */
	bool replied;     /* its reply is in place (and, on the ring thread,
			   * its commit queued) */
	bool on_worker;   /* handed to the pool (hand_off) */
	bool held;        /* deferred by the governor at least once */
	unsigned cost;	  /* DBFS_COST_* of the request being processed */
	struct uent *next; /* deferred list, or the queue's done list */
	struct mfs_loop_job job;    /* for the pool */
	struct mfs_session *s; /* while on a worker: its loop session, */
	uint64_t t0;           /* when the ring thread took it */
	struct fuse_buf buf;   /* and the request as laid out by serve */
};

struct uq {
	struct mfs_uring *u;
	unsigned qid;
	pthread_t tid;
	bool started; /* u->lock: its thread runs (start_queues) */
	int evfd;     /* with the ring: set up once this is >= 0 */
	struct io_uring ring;
	/* u->lock */
	struct mfs_uring_sess *pending; /* sessions whose entries to register here */
	struct uent *done;              /* answered on a worker, to commit */
	/* ring thread only */
	struct uent *deferred, **deferred_tail;
	uint64_t retry_at;
	const struct mfs_uring_sess *last; /* whose request it served last (compared only) */
	uint64_t mixed_until;		   /* it served several DBFSs lately: until then */
	struct mfs_ring_priority prio;
	struct mfs_ring_roam roam; /* its count is read by other threads */
};

struct mfs_uring_sess {
	struct mfs_uring *u;
	struct fuse_session *se;
	int fd;      /* libfuse's /dev/fuse fd (to recognise its INIT) */
	int ring_fd; /* our duplicate, named by every SQE: libfuse closes its
		      * fd when the session goes, entries may still need it */
	void (*received)(void *arg, const void *buf, size_t len);
	void *rarg;
	/* Moving average of the time its small changes take (ns): over
	 * SLOW_NS they go to the pool (hand_off). Racy by design: an estimate. */
	uint64_t change_ns;
	bool slow;

	/* u->lock */
	struct mfs_session *s;  /* NULL until bound, and again once detached */
	bool dead;              /* detached */
	uint64_t init_unique;   /* FUSE_INIT waiting for its reply (0: none) */
	unsigned refs;          /* entries the kernel may still give back, plus
				 * one until detached, one per pending queue */
	struct mfs_uring_sess *next;         /* every attached session */
	struct mfs_uring_sess **pending_next; /* per queue: next pending */
	struct uent *ents;      /* nq * DEPTH */
};

struct mfs_uring {
	struct mfs_loop *loop;
	const struct fuse_custom_io *inner;
	struct fuse_custom_io io;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mfs_uring_sess *sessions;
	unsigned inits; /* sessions waiting for an INIT reply (lock-free hint) */
	bool stopping;
	unsigned nq;
	struct uq *q;
	unsigned running; /* queues whose thread runs (atomic: read by others) */
	int nice;	  /* the creator's nice value, the ring threads' too */
	cpu_set_t cpus;	  /* where the process may run: a roaming thread's set */
};

/* The one set of rings of the process: libfuse hands the custom I/O hooks
 * only the session's userdata (the DBFS), not ours. */
static struct mfs_uring *the_uring;

/* The ring entry whose request this thread is processing. */
static __thread struct uent *cur;

static int start_queues(struct mfs_uring *u);

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

/* u->lock held: drop a reference; free `us` at the last one. */
static void sess_put(struct mfs_uring_sess *us)
{
	if (--us->refs)
		return;
	struct mfs_uring *u = us->u;
	for (struct mfs_uring_sess **pp = &u->sessions; *pp; pp = &(*pp)->next)
		if (*pp == us) {
			*pp = us->next;
			break;
		}
	for (unsigned i = 0; i < u->nq * DEPTH; i++) {
		struct uent *e = &us->ents[i];
		if (e->base)
			munmap(e->base, HEADROOM + MFS_URING_PAYLOAD);
	}
	if (us->ring_fd >= 0)
		close(us->ring_fd);
	free(us->ents);
	free(us->pending_next);
	free(us);
}

/* ---- submissions (ring thread only) ---- */

static struct io_uring_sqe *get_sqe(struct uq *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	while (!sqe) { /* full: hand what is queued to the kernel first */
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	return sqe;
}

static void prep_cmd(struct uq *q, struct uent *e, uint32_t op)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: the command area too */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = e->us->ring_fd;
	sqe->cmd_op = op;
	io_uring_sqe_set_data(sqe, e);
	struct uring_cmd_req *c = (struct uring_cmd_req *)sqe->cmd;
	c->qid = (uint16_t)q->qid;
	if (op == URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	} else {
		c->commit_id = e->h->ent.commit_id;
	}
}

static void prep_poll(struct uq *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	io_uring_prep_poll_add(sqe, q->evfd, POLLIN);
	io_uring_sqe_set_data(sqe, &q->evfd);
}

/* Queue the reply `oh` + `iov[0..n)` of e's request. */
static void commit_reply(struct uent *e, const struct fuse_out_header *oh, const struct iovec *iov,
			 int n)
{
	struct fuse_out_header *ro = (struct fuse_out_header *)e->h->in_out;
	size_t len = 0;

	*ro = *oh;
	for (int i = 0; i < n; i++) {
		if (len + iov[i].iov_len > MFS_URING_PAYLOAD) {
			ro->error = -EIO; /* cannot happen: the kernel bounds replies */
			len = 0;
			break;
		}
		memcpy(e->base + HEADROOM + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	ro->len = (uint32_t)(sizeof(*ro) + len);
	e->h->ent.payload_sz = (uint32_t)len;
	e->replied = true;
	e->unique = 0;
	if (!e->on_worker) /* a worker's entry is committed by its ring (work) */
		prep_cmd(e->q, e, URING_CMD_COMMIT_AND_FETCH);
}

static void commit_error(struct uent *e, uint64_t unique, int err)
{
	struct fuse_out_header oh = {.len = sizeof(oh), .error = -err, .unique = unique};

	commit_reply(e, &oh, NULL, 0);
}

/* ---- the custom I/O hooks ---- */

static struct mfs_uring_sess *sess_by_fd(struct mfs_uring *u, int fd)
{
	for (struct mfs_uring_sess *us = u->sessions; us; us = us->next)
		if (us->fd == fd && !us->dead)
			return us;
	return NULL;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct mfs_uring *u = the_uring;
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
	struct mfs_uring_sess *us = sess_by_fd(u, fd);
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
 * (io_read noted it), take it, send the reply, then have every queue
 * register the session's entries (the kernel accepts them only once the
 * reply made the connection initialised).
 */
static ssize_t init_reply(struct mfs_uring *u, int fd, struct iovec *iov, int count,
			  void *userdata)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out *out = iov[1].iov_base;

	pthread_mutex_lock(&u->lock);
	struct mfs_uring_sess *us = sess_by_fd(u, fd);
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
	bool take = us->s && !us->dead && oh->error == 0 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(out->flags2) &&
		    (out->flags & FUSE_INIT_EXT);
	int rc = take ? start_queues(u) : 0;
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
	sess_put(us);
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

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct mfs_uring *u = the_uring;
	struct uent *e = cur;
	const struct fuse_out_header *oh = iov[0].iov_base;

	if (count >= 1 && iov[0].iov_len >= sizeof(*oh)) {
		if (e && e->unique && oh->unique == e->unique) {
			commit_reply(e, oh, iov + 1, count - 1);
			return iov_total(iov, count);
		}
		if (count >= 2 && oh->unique && __atomic_load_n(&u->inits, __ATOMIC_RELAXED))
			return init_reply(u, fd, iov, count, userdata);
	}
	return u->inner->writev(fd, iov, count, userdata);
}

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
			prep_cmd(q, e, URING_CMD_REGISTER);
		}
		pthread_mutex_lock(&u->lock);
		sess_put(us);
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
	sess_put(us);
	pthread_mutex_unlock(&u->lock);
}

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
	cur = e;
	fuse_session_process_buf(us->se, buf);
	cur = NULL;
	if (!e->replied) /* an op that answered nothing: the entry must go back */
		commit_error(e, unique, EIO);
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

/* The ring thread commits the entries in `list`, which its workers
 * answered (taken from q->done). */
static void commit_done(struct uq *q, struct uent *list)
{
	while (list) {
		struct uent *e = list;
		list = e->next;
		e->on_worker = false;
		prep_cmd(q, e, URING_CMD_COMMIT_AND_FETCH);
	}
}

/* Process the request in `e` (its in header, op header and payload are in
 * place), or defer it when its governor says wait, or hand it to the pool. */
static void serve(struct uq *q, struct uent *e)
{
	struct mfs_uring_sess *us = e->us;
	struct mfs_uring *u = q->u;
	const struct fuse_in_header *in = (const void *)e->h->in_out;
	uint32_t psz = e->h->ent.payload_sz;
	size_t opsz = in->len >= sizeof(*in) + psz ? in->len - sizeof(*in) - psz : SIZE_MAX;

	if (opsz > sizeof(e->h->op_in) || psz > MFS_URING_PAYLOAD) {
		mfs_warn("uring: fd %d: malformed request (opcode %u, len %u, payload %u)", us->fd,
			 in->opcode, in->len, psz);
		commit_error(e, in->unique, EIO);
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
		commit_error(e, in->unique, EIO);
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

static void retry_deferred(struct uq *q)
{
	struct uent *list = q->deferred;

	q->deferred = NULL;
	q->deferred_tail = &q->deferred;
	q->retry_at = 0;
	while (list) {
		struct uent *e = list;
		list = e->next;
		serve(q, e); /* in order: one deferred again goes back at the end */
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
	commit_done(q, done);
	if (!stopping) {
		prep_poll(q);
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
		prep_cmd(q, e, e->replied ? URING_CMD_COMMIT_AND_FETCH : URING_CMD_REGISTER);
		return;
	}
	if (cqe->res < 0) {
		retire(e, cqe->res);
		return;
	}
	serve(q, e);
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
	 * process's other threads are (the creator's nice, see start_queues) */
	setpriority(PRIO_PROCESS, 0, q->u->nice);
	mfs_ring_roam_start(&q->roam);
	mfs_ring_priority_init(&q->prio, q->qid);
	prep_poll(q);
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
		commit_error(e, ((const struct fuse_in_header *)e->h->in_out)->unique, EIO);
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
 * ring and no memory for them, since they would serve nothing. Returns 0
 * or -errno (eventfd, io_uring_queue_init, pthread_create; -ESHUTDOWN once
 * mfs_uring_destroy began); the queues started stay, the next session's
 * INIT tries the others again.
 */
static int start_queues(struct mfs_uring *u)
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

int mfs_uring_create(struct mfs_loop *loop, const struct fuse_custom_io *inner,
		     struct mfs_uring **out)
{
	struct mfs_uring *u;

	if (the_uring)
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
	u->io = (struct fuse_custom_io){.read = io_read, .writev = io_writev};
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
		int rc = start_queues(u);
		pthread_mutex_unlock(&u->lock);
		if (rc) {
			mfs_uring_destroy(u);
			return rc;
		}
	}
	the_uring = u;
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
	if (the_uring == u)
		the_uring = NULL;
	while (u->sessions) { /* the kernel has let go of every entry now */
		struct mfs_uring_sess *us = u->sessions;
		us->refs = 1;
		sess_put(us);
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
	sess_put(us);
	pthread_mutex_unlock(&u->lock);
}

unsigned mfs_uring_queues(const struct mfs_uring *u)
{
	return u ? __atomic_load_n(&u->running, __ATOMIC_RELAXED) : 0;
}

uint64_t mfs_uring_roams(const struct mfs_uring *u)
{
	uint64_t n = 0;

	for (unsigned i = 0; u && i < u->nq; i++)
		n += mfs_ring_roam_count(&u->q[i].roam);
	return n;
}
