/*
 * Checks of a command against the file system and the manager's state, run
 * by the executors (execute.h) before they change anything: who may control
 * a DBFS, whether a name, store or mount point is free, whether the paths
 * of a mount are usable by the caller. Checks change nothing, except that
 * a dead FUSE mount met while resolving a path is lazily unmounted. Every
 * refusal returns -errno with a one-line reason in err. Control thread.
 */
#ifndef MFS_VALIDATE_H
#define MFS_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "caller.h"
#include "manager.h"

/* 0 when `who` may control DBFS d (root, who started mfs, or d's owner),
 * else -EPERM ("belongs to uid"). mgr->lock held. */
int mfs_check_control(struct mfs_manager *mgr, const struct mfs_caller *who,
		      const struct mfs_dbfs *d, char *err, size_t errlen);

/* The DBFS called `name` that `who` may control, in *d. -ENOENT (no such
 * DBFS), -EPERM. mgr->lock held. */
int mfs_check_owned(struct mfs_manager *mgr, const struct mfs_caller *who, const char *name,
		    struct mfs_dbfs **d, char *err, size_t errlen);

/*
 * Check the paths of a mount for `who`, as the file system is now, and
 * replace them by their resolved form (mfs_path_resolve, never looking
 * inside the manager mount). The mount point must be an existing empty
 * directory that `who` may write, not a mount root, not inside an mfs mount;
 * the store an existing directory, not inside an mfs mount, writable by
 * `who` unless `ro` — or with `create`, a missing one whose parent directory
 * `who` may write (then *mkstore is set). Errors: -ENOENT, -ENOTDIR, -EBUSY
 * (already a mount point), -EINVAL (inside an mfs mount), -EACCES,
 * -ENOTEMPTY, and those of mfs_path_resolve / stat. mgr->lock not held (it
 * is taken briefly); blocks on the file systems it walks.
 */
int mfs_check_paths(struct mfs_manager *mgr, const struct mfs_caller *who, char *store, char *mnt,
		    bool create, bool ro, bool *mkstore, char *err, size_t errlen);

/*
 * Is conf (for DBFS `name`; `self` is its current entry or NULL) free of
 * every other DBFS: -EEXIST (name taken), -EBUSY (store used by another, or
 * mount point used by another that is not unmounted). mgr->lock held.
 */
int mfs_check_conflicts(struct mfs_manager *mgr, const struct mfs_dbfs *self, const char *name,
			const struct mfs_conf *conf, char *err, size_t errlen);

/* Is `path` a directory with nothing in it (false when it cannot be read)? */
bool mfs_dir_empty(const char *path);

#endif
