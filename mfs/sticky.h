/*
 * Whether a session's requests stay with one worker (pool.c). A client
 * that waits for each answer (one thread doing I/O) has at most one
 * request in flight: it is served best by the worker that answered its
 * last request, which waits for the next one on its own epoll set (it
 * "owns" the session). Handing each request to another worker costs a
 * cross-CPU wake-up and a cold cache per request. A session whose requests
 * queue up behind each other or overlap (several clients, readahead) is
 * served by every worker from the shared set instead (concurrent mode).
 *
 * The kernel sends some requests of a one-at-a-time client in the
 * background: a close's RELEASE is queued while the client already opens
 * the next file. So one request queued behind another is not enough: the
 * mode follows the last MFS_STICKY_WINDOW reads, concurrent while at least
 * MFS_STICKY_SWITCH of them found a request queued or overlapped one.
 *
 * Pure: the caller (pool.c, loop.c, under loop->lock) says what it saw at
 * each read; nothing here takes a lock or makes a system call.
 */
#ifndef MFS_STICKY_H
#define MFS_STICKY_H

#include <stdbool.h>
#include <stdint.h>

#define MFS_STICKY_WINDOW 8
#define MFS_STICKY_SWITCH 3

struct mfs_sticky {
	uint8_t seen;    /* the last MFS_STICKY_WINDOW reads, newest in bit 0:
			  * 1 when it found a request queued or overlapped one */
	uint8_t bg;      /* the same reads: 1 when a background request was
			  * read just after it (mfs_sticky_background) */
	bool concurrent; /* served by every worker */
};

/*
 * A request of the session was read. `overlapped`: another of its
 * requests was read and not yet answered; `queued`: another was already
 * waiting in the kernel's queue (only looked at in one-worker mode).
 * Returns true when the mode changed.
 */
bool mfs_sticky_note(struct mfs_sticky *st, bool overlapped, bool queued);

/*
 * mfs_sticky_note for a request from the same client thread as the
 * session's last one (`same_client`: fuse_in_header.pid). The kernel sends
 * a FORGET after each unlink and, while a client's requests are pending
 * too, serves those first for up to 8 reads in 24 (fuse_dev_do_read's
 * forget_batch): the FORGET then waits behind several of that one client's
 * requests, each of which finds it queued. So while background requests
 * were read within the window, a request queued behind one from the same
 * client thread as the one before is no sign of a second client (one
 * overlapped still is). Returns true when the mode changed.
 */
bool mfs_sticky_note_from(struct mfs_sticky *st, bool overlapped, bool queued, bool same_client);

/* The request just read is one the kernel sends on its own, no client
 * waiting for it (FORGET, BATCH_FORGET, INTERRUPT, RELEASE, RELEASEDIR:
 * after an unlink or a close): the request found queued at the read before
 * was most likely this one, and it is no sign of concurrent clients. Takes
 * that read's mark back. Returns true when the mode changed. */
bool mfs_sticky_background(struct mfs_sticky *st);

/* Concurrent mode now, as if the whole window had overlapped (a request
 * that took long: other requests must not wait for its worker); back to one
 * worker after MFS_STICKY_WINDOW - MFS_STICKY_SWITCH + 1 calm reads. */
void mfs_sticky_force(struct mfs_sticky *st);

/* Should one worker serve the session (not concurrent)? A new session
 * (zeroed struct) starts there. */
static inline bool mfs_sticky_one_worker(const struct mfs_sticky *st)
{
	return !st->concurrent;
}

#endif
