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
 * Pure: the caller (pool.c, under loop->lock) says what it saw at each
 * read; nothing here takes a lock or makes a system call.
 */
#ifndef MFS_STICKY_H
#define MFS_STICKY_H

#include <stdbool.h>

/* Reads in a row without overlap that bring a concurrent session back to
 * one worker. */
#define MFS_STICKY_CALM 8

struct mfs_sticky {
	bool concurrent; /* requests were seen queued behind or overlapping others */
	unsigned calm;   /* in concurrent mode: reads in a row that saw neither */
};

/*
 * A request of the session was read. `overlapped`: another of its
 * requests was read and not yet answered; `queued`: another was already
 * waiting in the kernel's queue (only looked at in one-worker mode).
 * Either sends the session to concurrent mode at once; MFS_STICKY_CALM
 * reads in a row with neither bring it back. Returns true when the mode
 * changed.
 */
bool mfs_sticky_note(struct mfs_sticky *st, bool overlapped, bool queued);

/* Should one worker serve the session (not concurrent)? A new session
 * (zeroed struct) starts there. */
static inline bool mfs_sticky_one_worker(const struct mfs_sticky *st)
{
	return !st->concurrent;
}

#endif
