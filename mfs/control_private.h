/*
 * Internals of the control thread shared by control.c (queue and loop),
 * commands.c (the protocol's commands) and lifecycle.c (mounting and
 * unmounting one DBFS). Everything here runs on the control thread unless
 * said otherwise; fields marked "lock" are protected by mgr->lock.
 */
#ifndef MFS_CONTROL_PRIVATE_H
#define MFS_CONTROL_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "manager.h"
#include "verbs.h"

struct mfs_job;

struct mfs_ctl {
	struct mfs_manager *mgr;
	pthread_cond_t wake;            /* a job was queued or a stop was asked */
	struct mfs_job *head, *tail;    /* lock */
	bool stop;                      /* lock: a stop was asked */
	bool stopping;                  /* lock: the stop has begun: refuse commands */
	_Atomic bool trim_due;          /* a DBFS's kernel cache passed its limit */
};

/* lock held: give every mounted DBFS its cache limit: its own mem=, within
 * an equal share of the manager's mem= (control.c). */
void mfs_cache_rebalance(void);

/* libdbfs's callback when a DBFS's kernel cache passes its limit: wake the
 * control thread to trim (never from the request thread). */
void mfs_cache_over(void *arg);

extern struct mfs_ctl mfs_ctl;

/* lock held: add d to the manager's list (kept in name order) / remove it. */
void mfs_dbfs_link(struct mfs_dbfs *d);
void mfs_dbfs_unlink(struct mfs_dbfs *d);

/* Answer a command's request (0 or -errno); a refusal is recorded for
 * user.mfs.error and logged with its reason. Any thread. */
void mfs_cmd_answer(struct mfs_cmd *cmd, int rc, const char *reason);

/* Run one command and answer it (commands.c). */
void mfs_cmd_run(struct mfs_cmd *cmd);

/* Write d's configuration to the registry (logged on failure). */
void mfs_dbfs_save(struct mfs_dbfs *d);

/*
 * Open d's store and mount it (lifecycle.c). d is in state MOUNTING and in
 * the list; on success it is MOUNTED, on failure nothing is left open or
 * mounted. Errors: those of dbfs_open and of the mount, reason in err.
 */
int mfs_dbfs_mount(struct mfs_dbfs *d, bool create, char *err, size_t errlen);

/*
 * Unmount d (state UNMOUNTING). Without force a busy mount gives -EBUSY and
 * stays mounted; with force it is detached and, if programs keep it alive,
 * its connection aborted. Then it is closed: state UNMOUNTED, reason kept.
 */
int mfs_dbfs_unmount(struct mfs_dbfs *d, bool force, const char *reason);

/* Close a DBFS whose session ended; state becomes UNMOUNTED. */
void mfs_dbfs_finish(struct mfs_dbfs *d, const char *reason);

/*
 * Make sure a session has ended after its mount was (or should have been)
 * removed: wait for *ended, then abort connection `conn`, then stop serving
 * it (closing its device then aborts it).
 */
void mfs_session_stop(const char *what, bool *ended, unsigned conn, struct mfs_session *sess);

/* Unmount bookkeeping and destroy of a session that ended. */
void mfs_session_close(struct fuse_session *se);

#endif
