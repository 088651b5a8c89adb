/*
 * Taking one DBFS down: unmount it, make sure its session ended (also when
 * programs hold files open: lazy unmount, then connection abort, then
 * closing the device), stop serving it and close its store. Control thread
 * only: these block on the kernel and on the session's last request.
 */
#ifndef MFS_DBFS_UNMOUNT_H
#define MFS_DBFS_UNMOUNT_H

#include <stdbool.h>

#include "manager.h"

/*
 * Unmount d (state UNMOUNTING, set by the caller under mgr->lock). Without
 * force a busy mount gives -EBUSY and stays mounted (state left to the
 * caller); with force it is detached and, if programs keep it alive, its
 * connection aborted. Then it is closed: state UNMOUNTED, `reason` kept.
 * Returns 0 or -EBUSY; other unmount errors are logged, and the DBFS is
 * closed all the same. mgr->lock not held.
 */
int mfs_dbfs_unmount(struct mfs_manager *mgr, struct mfs_dbfs *d, bool force, const char *reason);

/* Close a DBFS whose session ended (state UNMOUNTING): stop serving it,
 * close its store; state becomes UNMOUNTED with `reason`, cache limits are
 * rebalanced. No errors. mgr->lock not held. */
void mfs_dbfs_finish(struct mfs_manager *mgr, struct mfs_dbfs *d, const char *reason);

/*
 * DBFS `id` was unmounted outside mfs (its session ended while MOUNTED):
 * close it and record that it is no longer wanted mounted; in single mode
 * stop the manager. Nothing when it is no longer in that state.
 */
void mfs_dbfs_gone(struct mfs_manager *mgr, uint32_t id);

/*
 * Make sure a session has ended after its mount was (or should have been)
 * removed: wait (mgr->cond) for *ended, then abort connection `conn`, then
 * stop serving it (closing its device then aborts it), and wait for its last
 * request. `what` names it in the log. mgr->lock not held.
 */
void mfs_session_stop(struct mfs_manager *mgr, const char *what, bool *ended, unsigned conn,
		      struct mfs_session *sess);

/* Unmount bookkeeping and destroy of a FUSE session that ended (or that the
 * loop stopped serving). No errors. */
void mfs_session_close(struct fuse_session *se);

#endif
