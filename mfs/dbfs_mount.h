/*
 * Bringing one DBFS up: open its store, mount it, serve it from the loop
 * (and its io_uring queues where the manager has them). Control thread
 * only: mounting is not thread-safe (fuse_session_mount runs fusermount3).
 */
#ifndef MFS_DBFS_MOUNT_H
#define MFS_DBFS_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

#include "caller.h"
#include "manager.h"
#include "validate.h"

/*
 * Open d's store (creating it when `create`) as `who` and mount it, both on
 * the held paths `p` that mfs_check_paths checked (the store is opened as
 * /proc/self/fd/N, the mount made on the held directory). d is in state
 * MOUNTING and in the list; on success it is MOUNTED (cache limits
 * rebalanced) and holds p's mount point parent and store directory (d->held;
 * p keeps the rest, to release), on failure nothing is left open or mounted
 * and d's state is the caller's to set. Errors, each with a reason in err:
 * -EINVAL (its options do not parse), those of mfs_as_begin, of dbfs_open
 * (dbfs.h), of mfs_mount_session and mfs_mount_id_at (mount.h) and of
 * mfs_loop_add (-ENOMEM). mgr->lock not held.
 */
int mfs_dbfs_mount(struct mfs_manager *mgr, struct mfs_dbfs *d, const struct mfs_caller *who,
		   struct mfs_mount_paths *p, bool create, char *err, size_t errlen);

#endif
