/*
 * The executors of the control verbs (the exec column of verbs.h), one file
 * each: execute_mount.c, execute_unmount.c, execute_config.c,
 * execute_forget.c, execute_sync.c, execute_subscribe.c (subscribe and
 * unsubscribe). Each checks the parsed command against the file system
 * and the manager's state (validate.h) and only then changes anything; a
 * refused command changes nothing. A change the registry cannot record
 * (mount, unmount, config, forget) is not made, or undone: the command fails
 * with the registry's errno (-EIO, -ENOSPC, -ENOMEM) and says so, so that a
 * restart brings back exactly what ran. Each returns 0 or -errno with a
 * one-line reason in err (left empty where strerror says it all). Control thread
 * only, mgr->lock not held; they block on mounts and unmounts.
 */
#ifndef MFS_EXECUTE_H
#define MFS_EXECUTE_H

#include "verbs.h"

/*
 * Mount (and register) a DBFS: a new one, or a registered one that is
 * unmounted or failed, its registered configuration updated by what is
 * given. Creates the store when asked (`create`) and it is missing.
 * Errors: -EEXIST (already mounted or mounting; name taken), -EPERM (it
 * belongs to another user), -EINVAL (missing store/mountpoint, bad options,
 * a path inside an mfs mount), -EBUSY (store or mount point in use), -ENOMEM,
 * those of mfs_check_paths, of mkdir and of mfs_dbfs_mount.
 */
int mfs_execute_mount(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);

/* Unmount a mounted DBFS (`force`: also when busy). Errors: -ENOENT,
 * -EPERM, -EINVAL (not mounted), -EBUSY (files open, no force). */
int mfs_execute_unmount(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);

/* Change a DBFS's settings; live ones (mfs_conf_live) apply at once to a
 * mounted DBFS. Errors: -ENOENT, -EPERM, -EBUSY (mounting or unmounting),
 * -EINVAL (a setting that cannot change while mounted, bad value, too long),
 * -ENOMEM. */
int mfs_execute_config(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);

/* Drop an unmounted DBFS from the registry (its store is kept). Errors:
 * -ENOENT, -EPERM, -EBUSY (not unmounted), errors of mfs_registry_del. */
int mfs_execute_forget(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);

/* Make everything a mounted DBFS acknowledged before the command durable
 * across power loss (a durable point, dbfs_sync), then answer: the point is
 * made by a flusher (flusher.h), so this returns MFS_EXEC_LATER at once
 * and the flusher answers. Refusals: -ENOENT, -EPERM, -EINVAL (not
 * mounted); the flusher's answer: 0, or -EIO/-ENOSPC (the flush failed). */
int mfs_execute_sync(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);

/* Create the durable subscription cmd->sub of DBFS cmd->name, starting at
 * cmd->pos (now when not given), with the filters in cmd->opts. Errors:
 * those of mfs_check_feed (-ENOENT, -EACCES, -EINVAL, -EOPNOTSUPP), -EEXIST,
 * -ESTALE (a position of another store), -ERANGE (beyond the feed's end),
 * -EROFS, -ENOSPC, -EIO. */
int mfs_execute_subscribe(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);

/* Delete it. Errors: those of mfs_check_feed, -ENOENT (no such
 * subscription), -EBUSY (a reader has it open), -EROFS, -EIO. */
int mfs_execute_unsubscribe(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err,
			    size_t errlen);

#endif
