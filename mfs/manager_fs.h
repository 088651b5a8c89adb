/*
 * The manager mount: a tiny read-only file system whose root carries the
 * control attributes (user.mfs.*) and holds one folder per DBFS with the
 * files status, stats and config.
 *
 *   inode 1            root (0755, owner: who started mfs)
 *   2, 3               .list and .status (0444): user.mfs.list and
 *                      user.mfs.status as files, without the 64 KiB limit
 *   16 + 8*id          folder NAME of the DBFS with registry id `id` (0555)
 *   16 + 8*id + 1..3   NAME/status, NAME/stats, NAME/config (0444)
 *   16 + 8*id + 4..6   NAME/events, NAME/events.json (0400), NAME/subscriptions/
 *                      (0500): the change feed (feed_fs.h)
 *   2^48 and up        dynamic: NAME/events@..., NAME/subscriptions/SUB[.json],
 *                      made at lookup, freed when the kernel forgets them
 *
 * Ids are never reused while the process runs, so an inode never changes
 * meaning. Entry and attribute timeouts are 0: folders appear and vanish with
 * the DBFSs without invalidation calls. Files are direct_io snapshots taken
 * at open, but the feed's, which are streams (feed_fs.h). Session userdata: struct mfs_manager *.
 */
#ifndef MFS_MANAGER_FS_H
#define MFS_MANAGER_FS_H

struct fuse_lowlevel_ops;

const struct fuse_lowlevel_ops *mfs_manager_fs_ops(void);

#endif
