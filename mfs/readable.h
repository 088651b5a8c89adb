/*
 * Text of the readable control attributes and of the per-DBFS files of the
 * manager mount. Formats (stable, documented in mfs(8)):
 *   user.mfs.VERB     the verb's usage line
 *   user.mfs.list     one line per DBFS: name=N,state=S,mountpoint=M,store=S,
 *                     bytes=B,inodes=I (values escaped like the protocol)
 *   user.mfs.dbfs.N   and N/status, N/config: "key=value" lines
 *   user.mfs.stats.N  and N/stats: "key=value" lines
 *   user.mfs.status   "key=value" lines about the manager
 *   user.mfs.error    the caller's last refusal (answer.h)
 * Adding a readable attribute is adding a row to the table in readable.c.
 *
 * Context: any thread (FUSE workers of the manager mount). list, stats.N
 * and N/stats take mgr->lock to copy what they show and pin the mounted
 * DBFSs (manager.h), then read the stores (dbfs_usage opens an LMDB read
 * transaction and stats data.mdb; the feed's and delayed work's figures
 * read it too) without the lock: a slow store holds no other reader and
 * not the control thread. N/usage reads the history without it. The
 * other texts hold mgr->lock for the whole text and read no store. None
 * waits on a FUSE request.
 */
#ifndef MFS_READABLE_H
#define MFS_READABLE_H

#include <stdint.h>

#include "buf.h"
#include "caller.h"
#include "manager.h"

enum mfs_file {
	MFS_FILE_STATUS,
	MFS_FILE_STATS,
	MFS_FILE_CONFIG,
	MFS_FILE_USAGE, /* the retained usage history (account.h) */
	MFS_NFILES,
};

/* The files of a DBFS's folder: name, and its text. `text` is called with
 * mgr->lock held and returns with it held; it may release it meanwhile
 * (stats, usage), so the caller must not use d after it. */
struct mfs_readable_file {
	const char *name;
	void (*text)(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *out);
};

extern const struct mfs_readable_file mfs_readable_files[MFS_NFILES];

/* Append the value of attribute `attr` (full name) as `who` reads it to
 * out. 0, or -ENODATA when no such attribute (or no such DBFS). Memory
 * shortage shows as out->oom. */
int mfs_readable_attr(struct mfs_manager *mgr, const char *attr, const struct mfs_caller *who,
		      struct mfs_buf *out);

/* Append the contents of file `f` of the DBFS with id `id` to out. 0 or
 * -ENOENT (no such DBFS). */
int mfs_readable_file(struct mfs_manager *mgr, uint32_t id, enum mfs_file f, struct mfs_buf *out);

/* Append every readable attribute name, each NUL-terminated (listxattr
 * format): the verbs, the manager's, then two per DBFS (stopping near
 * 60000 bytes). */
void mfs_readable_names(struct mfs_manager *mgr, struct mfs_buf *out);

#endif
