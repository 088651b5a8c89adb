/*
 * Bringing one DBFS up: open its store, mount it, serve it from the loop
 * (and its io_uring queues where the manager has them). Control thread
 * only: mounting is not thread-safe (fuse_session_mount runs fusermount3).
 */
#ifndef MFS_DBFS_MOUNT_H
#define MFS_DBFS_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

#include "manager.h"

/*
 * Open d's store (creating it when `create`) and mount it at its mount
 * point, cleaning a stale mount there first. d is in state MOUNTING and in
 * the list; on success it is MOUNTED (cache limits rebalanced), on failure
 * nothing is left open or mounted and d's state is the caller's to set.
 * Errors, each with a reason in err: -EINVAL (its options do not parse),
 * those of dbfs_open (dbfs.h), of mfs_mount_session (mount.h) and of
 * mfs_loop_add (-ENOMEM). mgr->lock not held.
 */
int mfs_dbfs_mount(struct mfs_manager *mgr, struct mfs_dbfs *d, bool create, char *err,
		   size_t errlen);

#endif
