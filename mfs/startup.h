/*
 * Start-up of the manager's DBFSs: load the registry and re-mount what was
 * mounted (manager mode), or mount the one DBFS of single mode. Control
 * thread.
 */
#ifndef MFS_STARTUP_H
#define MFS_STARTUP_H

#include <stdbool.h>
#include <stddef.h>

#include "manager.h"

/*
 * Load the registry: every DBFS known is added to the list, and each that
 * was mounted is queued for a background re-mount (state "mounting" until
 * mfs_startup_remount ran). Returns 0, -ENOMEM, or an error of
 * mfs_registry_load. Control thread, after mfs_inbox_init, before
 * mfs_control_run.
 */
int mfs_startup_load(struct mfs_manager *mgr);

/*
 * The re-mount job of DBFS `id`: clean a stale mount at its mount point,
 * mount it; on failure it becomes FAILED with the reason (logged). Nothing
 * when it is no longer MOUNTING. Control thread (the loop's job).
 */
void mfs_startup_remount(struct mfs_manager *mgr, uint32_t id);

/*
 * Mount one DBFS right now (single-DBFS mode): `d` is added to the list and
 * stays there when mounted. Returns 0 or an error of mfs_dbfs_mount with a
 * reason in err. Control thread, before mfs_control_run.
 */
int mfs_startup_mount_now(struct mfs_manager *mgr, struct mfs_dbfs *d, bool create, char *err,
			  size_t errlen);

#endif
