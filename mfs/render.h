/*
 * Text of the readable control attributes and of the per-DBFS files.
 * Formats (stable, documented in mfs(8)):
 *   user.mfs.list     one line per DBFS: name=N,state=S,mountpoint=M,store=S,
 *                     bytes=B,inodes=I (values escaped like the protocol)
 *   user.mfs.dbfs.N   and N/status, N/config: "key=value" lines
 *   user.mfs.stats.N  and N/stats: "key=value" lines
 *   user.mfs.status   "key=value" lines about the manager
 * Takes mgr->lock; any thread (the usage of a mounted DBFS is read with
 * dbfs_usage under the lock).
 */
#ifndef MFS_RENDER_H
#define MFS_RENDER_H

#include <stdint.h>

#include "buf.h"
#include "caller.h"
#include "manager.h"

enum mfs_file {
	MFS_FILE_STATUS,
	MFS_FILE_STATS,
	MFS_FILE_CONFIG,
	MFS_NFILES,
};

extern const char *const mfs_file_names[MFS_NFILES];

/* Value of attribute `attr` (full name). 0, or -ENODATA when no such. */
int mfs_render_attr(struct mfs_manager *mgr, const char *attr, const struct mfs_caller *who,
		    struct mfs_buf *out);

/* Contents of file `f` of the DBFS with id `id`. 0 or -ENOENT. */
int mfs_render_file(struct mfs_manager *mgr, uint32_t id, enum mfs_file f, struct mfs_buf *out);

/* Every readable attribute name, each NUL-terminated (listxattr format). */
void mfs_render_names(struct mfs_manager *mgr, struct mfs_buf *out);

#endif
