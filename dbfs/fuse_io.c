/*
 * The FUSE channel of a DBFS session: libfuse's custom I/O hooks, plain
 * read(2) and writev(2) on /dev/fuse plus what libfuse 3.14 cannot do by
 * itself.
 *
 * FUSE_HANDLE_KILLPRIV_V2. Without it the kernel asks for the
 * security.capability xattr before every write(2), a second round trip per
 * write, because it must clear set-id bits and capabilities itself. With it
 * the kernel leaves that to the file system and tells it when the writer
 * lacks CAP_FSETID (FUSE_WRITE_KILL_SUIDGID on a write, FATTR_KILL_SUIDGID on
 * a truncate or chown). libfuse 3.14 neither offers the flag nor passes
 * write_flags on, so this file adds the flag to the FUSE_INIT reply when the
 * kernel offered it, and notes each write request's write_flags for the
 * thread that goes on to process it.
 *
 * Why here and not in the transport: the flag is a promise that the file
 * system keeps (fuse_data.c clears the bits), and only it knows whether it
 * keeps it. A transport that did the negotiation would still have to hand
 * each write's flags to the write handler beside libfuse, that is through
 * the same thread-local and a hook back into libdbfs. So the assumption it
 * rests on, that a request is received and processed on one thread, is a
 * contract of dbfs.h (dbfs_fuse_io) that every transport keeps: mfs's pool
 * reads and processes on one worker, its io_uring threads call
 * dbfs_io_received on the thread that processes (mfs/uring.c, process).
 */
#include <stddef.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/fuse.h>
#include <fuse_lowlevel.h>

#include "dbfs/internal.h"

/* write_flags of the request this thread read last. */
static __thread uint32_t tls_write_flags;
/* The request this thread processes came through io_read: its reply may
 * be sent later, by another thread (see dbfs_io_received in dbfs.h). */
static __thread bool tls_reply_later;
/* The request this thread processes was answered (for the map guard:
 * after a SIGBUS, fuse_guard.c answers EIO unless a reply went out). */
static __thread bool tls_replied;

void dbfs_io_replied(void)
{
	tls_replied = true;
}

void dbfs_io_reply_reset(void)
{
	tls_replied = false;
}

bool dbfs_io_reply_sent(void)
{
	return tls_replied;
}

bool dbfs_io_reply_later_ok(void)
{
	return tls_reply_later;
}

bool dbfs_io_write_kill(void)
{
	return (tls_write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
}

void dbfs_io_received(struct dbfs *fs, const void *buf, size_t len)
{
	const struct fuse_in_header *h = buf;
	const char *arg = (const char *)buf + sizeof(*h);

	tls_write_flags = 0;
	tls_reply_later = false; /* a transport's own: answered before its handler returns */
	if (len < sizeof(*h)) {
		dbfs_tls_caller_set = 0;
		return;
	}
	/* the caller named in the change feed's events (feed_outbox.c) */
	dbfs_tls_caller = (struct dbfs_caller){h->uid, h->gid, h->pid};
	dbfs_tls_caller_set = 1;
	size_t arglen = len - sizeof(*h);
	if (h->opcode == FUSE_WRITE && arglen >= sizeof(struct fuse_write_in)) {
		tls_write_flags = ((const struct fuse_write_in *)arg)->write_flags;
	} else if (h->opcode == FUSE_INIT && arglen >= offsetof(struct fuse_init_in, flags) +
							       sizeof(uint32_t)) {
		const struct fuse_init_in *in = (const void *)arg;
		if (in->major == FUSE_KERNEL_VERSION && in->minor >= 33 &&
		    (in->flags & FUSE_HANDLE_KILLPRIV_V2))
			fs->init_unique = h->unique;
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	dbfs_io_received(userdata, buf, n > 0 ? (size_t)n : 0);
	tls_reply_later = true; /* /dev/fuse takes a reply from any thread, any time */
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct dbfs *fs = userdata;
	uint64_t init = fs->init_unique;

	/* A reply (notifications have unique 0). */
	if (count >= 1 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((const struct fuse_out_header *)iov[0].iov_base)->unique)
		tls_replied = true;

	if (init && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
		const struct fuse_out_header *oh = iov[0].iov_base;
		if (oh->unique == init) {
			fs->init_unique = 0;
			if (oh->error == 0) {
				((struct fuse_init_out *)iov[1].iov_base)->flags |=
					FUSE_HANDLE_KILLPRIV_V2;
				fs->killpriv_v2 = 1;
			}
		}
	}
	return writev(fd, iov, count);
}

static const struct fuse_custom_io dbfs_io = {
	.read = io_read,
	.writev = io_writev,
};

const struct fuse_custom_io *dbfs_fuse_io(void)
{
	return &dbfs_io;
}
