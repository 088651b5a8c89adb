/*
 * The control thread's inbox: what the one thread that mounts, unmounts,
 * reconfigures and forgets DBFSs is asked to do. FUSE workers put commands
 * in it (mfs_inbox_submit) and return at once; the loop's end callbacks,
 * libdbfs's cache callback and signal handlers put their events in it; the
 * control loop (control.c) takes them out one at a time with mfs_inbox_next.
 * Every function here takes mgr->lock briefly (mfs_inbox_cache_over takes
 * none) and never blocks on anything else.
 */
#ifndef MFS_INBOX_H
#define MFS_INBOX_H

#include <stdint.h>

#include "manager.h"
#include "verbs.h"

/* Set up the inbox for `mgr` (and mgr->cond). Call once, before any other
 * function of the control path. */
void mfs_inbox_init(struct mfs_manager *mgr);

/*
 * Queue a command (allocated with malloc; the control thread frees it).
 * While the manager stops, or without memory, answers its request at once
 * (-ESHUTDOWN, -ENOMEM) and frees it. Any thread; never blocks.
 */
void mfs_inbox_submit(struct mfs_cmd *cmd);

/* Queue the re-mount of DBFS `id` (startup). Returns 0 or -ENOMEM.
 * mgr->lock held. */
int mfs_inbox_remount(uint32_t id);

/* Ask the control loop to stop everything. Any thread (also a signal
 * thread); never blocks. */
void mfs_inbox_stop(void);

/* The loop's on_end callbacks (arg: struct mfs_dbfs * / struct mfs_manager *):
 * a session ended. Set session_ended / manager_ended and wake whoever waits on
 * mgr->cond; a mounted DBFS that ended without us becomes a job, the manager
 * ending stops the loop. A loop thread. */
void mfs_inbox_dbfs_ended(void *arg);
void mfs_inbox_manager_ended(void *arg);

/* libdbfs's callback when a DBFS's kernel cache passes its limit: wake the
 * control thread to trim. Takes no lock (a request thread must not wait for
 * the control thread); a lost wake-up costs a second, as the tick trims too.
 * Any thread. */
void mfs_inbox_cache_over(void *arg);

/* libdbfs's callback when a DBFS's pages freed since its durable point ask
 * for the next point (dbfs_set_point_callback): wake the control thread to
 * hand the point to a flusher. As mfs_inbox_cache_over: no lock, a lost
 * wake-up costs a second (the tick makes the point too). Any thread. */
void mfs_inbox_point_due(void *arg);

enum mfs_inbox_kind {
	MFS_INBOX_STOP,	   /* a stop was asked: no more jobs come out */
	MFS_INBOX_TRIM,	   /* a DBFS's cache passed its limit */
	MFS_INBOX_POINT,   /* a DBFS asked for a durable point (space) */
	MFS_INBOX_TICK,	   /* `deadline` passed */
	MFS_INBOX_CMD,	   /* a user's command: cmd (the taker frees it) */
	MFS_INBOX_ENDED,   /* DBFS id's connection went away without us */
	MFS_INBOX_REMOUNT, /* mount registered DBFS id at startup */
};

struct mfs_inbox_item {
	enum mfs_inbox_kind kind;
	struct mfs_cmd *cmd;
	uint32_t id;
};

/*
 * Wait until there is something to do or CLOCK_MONOTONIC passes
 * `deadline_ns` (mfs_now_ns), and say what: a stop first, then a trim, then
 * the tick, then the oldest job. Control thread only; mgr->lock not held.
 */
void mfs_inbox_next(uint64_t deadline_ns, struct mfs_inbox_item *out);

/* Refuse every queued and later command with -ESHUTDOWN ("mfs is
 * stopping") and drop the other jobs. Control thread, at the stop. */
void mfs_inbox_close(void);

#endif
