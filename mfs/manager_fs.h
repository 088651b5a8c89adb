/*
 * The manager mount: a tiny read-only file system whose root carries the
 * control attributes (user.mfs.*) and holds one folder per DBFS with the
 * files status, stats and config.
 *
 *   inode 1            root (0755, owner: who started mfs)
 *   2, 3               .list and .status (0444): user.mfs.list and
 *                      user.mfs.status as files, without the 64 KiB limit
 *   16 + 4*id          folder NAME of the DBFS with registry id `id` (0555)
 *   16 + 4*id + 1..3   NAME/status, NAME/stats, NAME/config (0444)
 *
 * Ids are never reused while the process runs, so an inode never changes
 * meaning. Entry and attribute timeouts are 0: folders appear and vanish with
 * the DBFSs without invalidation calls. Files are direct_io snapshots taken
 * at open. Session userdata: struct mfs_manager *.
 */
#ifndef MFS_MANAGER_FS_H
#define MFS_MANAGER_FS_H

struct fuse_lowlevel_ops;

const struct fuse_lowlevel_ops *mfs_manager_fs_ops(void);

#endif
