/*
 * Checks of a command against the file system and the manager's state, run
 * by the executors (execute.h) before they change anything: who may control
 * a DBFS, whether a name, store or mount point is free, whether the paths
 * of a mount are usable by the caller. Checks change nothing, except that
 * dead FUSE mounts on a mount point are lazily unmounted. Every
 * refusal returns -errno with a one-line reason in err. Control thread.
 */
#ifndef MFS_VALIDATE_H
#define MFS_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "caller.h"
#include "manager.h"
#include "path.h"

/* 0 when `who` may control DBFS d (root, who started mfs, or d's owner),
 * else -EPERM ("belongs to uid"). mgr->lock held. */
int mfs_check_control(struct mfs_manager *mgr, const struct mfs_caller *who,
		      const struct mfs_dbfs *d, char *err, size_t errlen);

/* The DBFS called `name` that `who` may control, in *d. -ENOENT (no such
 * DBFS), -EPERM. mgr->lock held. */
int mfs_check_owned(struct mfs_manager *mgr, const struct mfs_caller *who, const char *name,
		    struct mfs_dbfs **d, char *err, size_t errlen);

/* The mounted DBFS called `name` whose change feed `who` may read and
 * subscribe to (root, who started mfs, its owner, anyone with its option
 * feed_access=all), in *d. -ENOENT, -EACCES, -EINVAL (not mounted),
 * -EOPNOTSUPP (mounted with feed=off). mgr->lock held. */
int mfs_check_feed(struct mfs_manager *mgr, const struct mfs_caller *who, const char *name,
		   struct mfs_dbfs **d, char *err, size_t errlen);

/*
 * The paths of a mount, resolved once as the caller and held (path.h):
 * every later step (stale mounts, emptiness, mount, open, unmount) acts on
 * these descriptors, so what was checked is what is used.
 */
struct mfs_mount_paths {
	struct mfs_held mp;    /* the mount point directory, its parent and name */
	struct mfs_held store; /* the store directory; with mkstore only its
				* parent and name (fd -1) */
	bool mkstore;          /* the store is to be made (create, missing) */
};

#define MFS_MOUNT_PATHS_INIT {.mp = MFS_HELD_INIT, .store = MFS_HELD_INIT}

/* Close what p holds (safe twice). */
void mfs_mount_paths_release(struct mfs_mount_paths *p);

/*
 * Check the paths of a mount for `who`, as the file system is now, hold
 * them in `p` (MFS_MOUNT_PATHS_INIT) and replace `store` and `mnt` by their
 * resolved form. Every component is looked up as `who` (as_caller.h: the
 * kernel checks search permission), never inside the manager mount. Dead
 * FUSE mounts stacked on the mount point are lazily unmounted first. The
 * mount point must then be an existing empty directory, not the root of a
 * mount, not inside an mfs mount, that `who` may write and, when it is
 * sticky, that `who` owns (as fusermount3 demands); the store an existing
 * directory outside our mounts that `who` may read and search (and write
 * unless `ro`) — or with `create`, a missing one in a directory `who` may
 * write (p->mkstore set). Errors: -ENOENT, -ENOTDIR, -EBUSY (already a
 * mount point; a stale mount that cannot be removed), -EINVAL (inside an
 * mfs or the manager mount), -EACCES, -ENOTEMPTY, -ELOOP, -ENAMETOOLONG,
 * -ENOTCONN, -ENOMEM. On error nothing is held. mgr->lock not held (it is
 * taken briefly); blocks on the file systems it walks.
 */
int mfs_check_paths(struct mfs_manager *mgr, const struct mfs_caller *who, char *store, char *mnt,
		    bool create, bool ro, struct mfs_mount_paths *p, char *err, size_t errlen);

/* Is the held directory `fd` empty (false when it cannot be read)? */
bool mfs_held_dir_empty(int fd);

/*
 * Is conf (for DBFS `name`; `self` is its current entry or NULL) free of
 * every other DBFS: -EEXIST (name taken), -EBUSY (store used by another, or
 * mount point used by another that is not unmounted). mgr->lock held.
 */
int mfs_check_conflicts(struct mfs_manager *mgr, const struct mfs_dbfs *self, const char *name,
			const struct mfs_conf *conf, char *err, size_t errlen);

#endif
