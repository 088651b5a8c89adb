/* The submissions of a ring thread: registering an entry, committing a
 * reply (and fetching the next request in the same command), watching the
 * queue's eventfd. Ring thread only; calls no other uring file. */
#include <errno.h>
#include <poll.h>
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
#include "uring_private.h"

static struct io_uring_sqe *get_sqe(struct uq *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	while (!sqe) { /* full: hand what is queued to the kernel first */
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	return sqe;
}

void mfs_uring_prep_cmd(struct uq *q, struct uent *e, uint32_t op)
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

void mfs_uring_prep_poll(struct uq *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	io_uring_prep_poll_add(sqe, q->evfd, POLLIN);
	io_uring_sqe_set_data(sqe, &q->evfd);
}

/* Queue the reply `oh` + `iov[0..n)` of e's request. */
void mfs_uring_commit_reply(struct uent *e, const struct fuse_out_header *oh,
			    const struct iovec *iov, int n)
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
	dbfs_io_replied(); /* for the map guard (dbfs.h) */
	if (!e->on_worker) /* a worker's entry is committed by its ring (work) */
		mfs_uring_prep_cmd(e->q, e, URING_CMD_COMMIT_AND_FETCH);
}

void mfs_uring_commit_error(struct uent *e, uint64_t unique, int err)
{
	struct fuse_out_header oh = {.len = sizeof(oh), .error = -err, .unique = unique};

	mfs_uring_commit_reply(e, &oh, NULL, 0);
}

/* The ring thread commits the entries in `list`, which its workers
 * answered (taken from q->done). */
void mfs_uring_commit_done(struct uq *q, struct uent *list)
{
	while (list) {
		struct uent *e = list;
		list = e->next;
		e->on_worker = false;
		mfs_uring_prep_cmd(q, e, URING_CMD_COMMIT_AND_FETCH);
	}
}
