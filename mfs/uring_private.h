/*
 * Internals of the ring transport, shared by its files (uring.h says what
 * the transport does):
 *
 *   uring.c         lifetime: create, destroy, attach, bind, detach
 *   uring_hooks.c   the custom I/O hooks (FUSE_INIT's reply, replies)
 *   uring_thread.c  the ring threads and what they do with completions
 *   uring_route.c   where a request runs: ring thread, pool, or later
 *   uring_submit.c  the SQEs: register, commit, poll
 *   uring_sess.c    a session's references
 *
 * Calls point down that list (uring_sess.c and uring_submit.c call no
 * other uring file).
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
 * mfs_uring_cur), and other threads hand work to a ring (a new session's entries,
 * stopping) through its eventfd.
 *
 * An entry the kernel gave us must always go back with a commit, even for a
 * session that is going (answered EIO): the kernel keeps a mount's teardown
 * waiting for its entries.
 */
#ifndef MFS_URING_PRIVATE_H
#define MFS_URING_PRIVATE_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <fuse_lowlevel.h>

#include "loop.h"
#include "ring_priority.h"
#include "ring_roam.h"
#include "uring.h"

#include "uring.h"

/* The kernel's ABI (include/uapi/linux/fuse.h, 7.42), absent from older
 * system headers. */
#define URING_INIT_FLAG		   (1ull << 41) /* FUSE_OVER_IO_URING */
#define URING_CMD_REGISTER	   1		/* register an entry, fetch a request */
#define URING_CMD_COMMIT_AND_FETCH 2		/* reply, fetch the next request */

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
#define DEPTH	     1
#define SQ_SIZE	     256
#define CQ_SIZE	     4096
#define DEFER_NS     1000000ull /* retry of a request its governor held back */
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
	uint64_t unique;	 /* request being processed (0: none) */
	bool replied;		 /* its reply is in place (and, on the ring thread,
				  * its commit queued) */
	bool on_worker;		 /* handed to the pool (hand_off) */
	bool held;		 /* deferred by the governor at least once */
	unsigned cost;		 /* DBFS_COST_* of the request being processed */
	struct uent *next;	 /* deferred list, or the queue's done list */
	struct mfs_loop_job job; /* for the pool */
	struct mfs_session *s;	 /* while on a worker: its loop session, */
	uint64_t t0;		 /* when the ring thread took it */
	struct fuse_buf buf;	 /* and the request as laid out by serve */
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
	struct uent *done;		/* answered on a worker, to commit */
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
	int fd;	     /* libfuse's /dev/fuse fd (to recognise its INIT) */
	int ring_fd; /* our duplicate, named by every SQE: libfuse closes its
		      * fd when the session goes, entries may still need it */
	void (*received)(void *arg, const void *buf, size_t len);
	void *rarg;
	/* Moving average of the time its small changes take (ns): over
	 * SLOW_NS they go to the pool (hand_off). Racy by design: an estimate. */
	uint64_t change_ns;
	bool slow;

	/* u->lock */
	struct mfs_session *s;		      /* NULL until bound, and again once detached */
	bool dead;			      /* detached */
	uint64_t init_unique;		      /* FUSE_INIT waiting for its reply (0: none) */
	unsigned refs;			      /* entries the kernel may still give back, plus
					       * one until detached, one per pending queue */
	struct mfs_uring_sess *next;	      /* every attached session */
	struct mfs_uring_sess **pending_next; /* per queue: next pending */
	struct uent *ents;		      /* nq * DEPTH */
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

/* uring_hooks.c: the process's rings, and the two hooks. */
extern struct mfs_uring *mfs_the_uring;
ssize_t mfs_uring_io_read(int fd, void *buf, size_t len, void *userdata);
ssize_t mfs_uring_io_writev(int fd, struct iovec *iov, int count, void *userdata);

/* uring_thread.c: u->lock held; start every queue not running yet (its
 * eventfd, ring and thread). 0 or -errno (eventfd, io_uring_queue_init,
 * pthread_create; -ESHUTDOWN once mfs_uring_destroy began). */
int mfs_uring_start_queues(struct mfs_uring *u);

/* uring_route.c: the entry this thread processes; route a request. */
extern __thread struct uent *mfs_uring_cur;
void mfs_uring_serve(struct uq *q, struct uent *e);

/* uring_submit.c (ring thread, or a worker for commit_reply of an entry
 * on_worker): queue SQEs. */
void mfs_uring_prep_cmd(struct uq *q, struct uent *e, uint32_t op);
void mfs_uring_prep_poll(struct uq *q);
void mfs_uring_commit_reply(struct uent *e, const struct fuse_out_header *oh,
			    const struct iovec *iov, int n);
void mfs_uring_commit_error(struct uent *e, uint64_t unique, int err);
void mfs_uring_commit_done(struct uq *q, struct uent *list);

/* uring_sess.c: u->lock held. */
void mfs_uring_sess_put(struct mfs_uring_sess *us);
struct mfs_uring_sess *mfs_uring_sess_by_fd(struct mfs_uring *u, int fd);

#endif
