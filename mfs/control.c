/*
 * The control loop (see control.h): take the next job from the inbox, run
 * it, answer it; housekeeping on the tick, handed to the flushers; the stop
 * at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "control.h"
#include "dbfs_unmount.h"
#include "flusher.h"
#include "inbox.h"
#include "log.h"
#include "loop.h"
#include "shutdown.h"
#include "startup.h"

/* Run a command through its verb's row, answer it and free it (unless its
 * executor handed it on: then whoever took it does). */
static void run_cmd(struct mfs_manager *mgr, struct mfs_cmd *cmd)
{
	char err[512] = "";
	int rc = cmd->verb->exec(mgr, cmd, err, sizeof(err));

	if (rc == MFS_EXEC_LATER)
		return;
	if (rc && !err[0])
		snprintf(err, sizeof(err), "%.120s", strerror(-rc));
	mfs_answer_cmd(cmd, rc, err);
	free(cmd);
}

/*
 * libdbfs's housekeeping, never inside a request: about once a second a
 * dbfs_tick for every mounted DBFS, run by a flusher (flusher.h: its
 * durable point waits for the disk, and this thread must not), also
 * at once for a DBFS whose callback asked for a durable point (space,
 * dbfs/held.c); or at once and here only the cache trim that a DBFS's
 * callback asked for. Only this thread closes a store (after
 * mfs_flusher_forget), so the pointers stay valid outside the lock.
 */
enum chore { TICK, TRIM, POINT };

static void tick_all(struct mfs_manager *mgr, enum chore what)
{
	size_t n = 0, cap = 0;
	struct dbfs **fs = NULL;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		cap++;
	fs = cap ? calloc(cap, sizeof(*fs)) : NULL;
	for (struct mfs_dbfs *d = mgr->list; d && fs; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs)
			fs[n++] = d->fs;
	pthread_mutex_unlock(&mgr->lock);
	for (size_t i = 0; i < n; i++) {
		if (what == TICK) {
			mfs_flusher_tick(fs[i]);
		} else if (what == POINT) {
			if (dbfs_point_wanted(fs[i]))
				mfs_flusher_tick(fs[i]); /* its durable tick makes it */
		} else {
			int rc = dbfs_cache_trim(fs[i]);
			if (rc)
				mfs_warn("%s: cache trim: %s", dbfs_dir(fs[i]), strerror(-rc));
		}
	}
	free(fs);
}

int mfs_control_run(struct mfs_manager *mgr)
{
	uint64_t next_tick = mfs_now_ns() + 1000000000u;
	struct mfs_inbox_item it;

	mfs_flusher_start();
	for (mfs_inbox_next(next_tick, &it); it.kind != MFS_INBOX_STOP;
	     mfs_inbox_next(next_tick, &it)) {
		switch (it.kind) {
		case MFS_INBOX_TRIM:
			tick_all(mgr, TRIM);
			break;
		case MFS_INBOX_POINT:
			tick_all(mgr, POINT);
			break;
		case MFS_INBOX_TICK:
			tick_all(mgr, TICK);
			next_tick = mfs_now_ns() + 1000000000u;
			break;
		case MFS_INBOX_CMD:
			run_cmd(mgr, it.cmd);
			break;
		case MFS_INBOX_ENDED:
			mfs_dbfs_gone(mgr, it.id);
			break;
		case MFS_INBOX_REMOUNT:
			mfs_startup_remount(mgr, it.id);
			break;
		case MFS_INBOX_STOP:
			break;
		}
	}
	mfs_shutdown(mgr); /* every DBFS unmounted: nothing posts any more */
	mfs_flusher_stop();
	return 0;
}
