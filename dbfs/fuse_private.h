/*
 * What the FUSE adapter's files share: the reply helpers every handler
 * ends in, the map guard around each request (GUARDED), and each file's
 * part of the table. The files call one way, top row to bottom:
 *
 *   fuse_ops.c                          connection setup and the table
 *   fuse_names.c fuse_attr.c fuse_dir.c names, attributes, listings
 *   fuse_data.c                         contents, syncing, atime
 *   fuse_guard.c                        the map guard
 *
 * Lookup counts: every reply that hands the kernel an entry (lookup,
 * create, mknod, mkdir, symlink, link, readdirplus except . and ..) adds a
 * reference in fs->lookups; forget drops them and reaps unlinked inodes.
 */
#ifndef DBFS_FUSE_PRIVATE_H
#define DBFS_FUSE_PRIVATE_H

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <fuse_lowlevel.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"

static inline struct dbfs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline void reply_err(fuse_req_t req, int rc)
{
	struct dbfs *fs = req_fs(req);
	int e = -dbfs_errno(rc);
	if (e)
		dbfs_count_error(fs, e);
	fuse_reply_err(req, e);
}

static inline void fill_entry(struct dbfs *fs, struct fuse_entry_param *e, uint64_t ino,
			      const struct dbfs_inode *in)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = fs->opt.attr_timeout;
	e->entry_timeout = fs->opt.entry_timeout;
	dbfs_inode_to_stat(in, ino, &e->attr);
}

/* Reply with an entry and count the kernel's new reference. */
static inline void reply_entry(fuse_req_t req, uint64_t ino, const struct dbfs_inode *in)
{
	struct dbfs *fs = req_fs(req);
	struct fuse_entry_param e;
	fill_entry(fs, &e, ino, in);
	if (dbfs_lookups_ref(&fs->lookups, ino, 1)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fuse_reply_entry(req, &e))
		dbfs_lookups_unref(&fs->lookups, ino, 1); /* interrupted: kernel took nothing */
}

/* fi->fh of a handle: 0, or this for one op_create answered with direct
 * I/O (its writes with O_DSYNC are made durable by op_write: the kernel
 * sends no fsync after a direct write) */
#define DBFS_FH_DIRECT 1

static inline struct dbfs_cred req_cred(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct dbfs_cred cr = {c->uid, c->gid, c->umask};
	return cr;
}

/*
 * A new name's EEXIST in a shared store: the kernel believed the name
 * free (a negative or missing entry) while another process made it (the
 * invalidation is on its way). ESTALE makes the VFS run the call again
 * with LOOKUP_REVAL, which looks the name up afresh: an open with O_CREAT
 * then opens the file another process made, mkdir or O_EXCL get EEXIST
 * from the VFS, as on a local file system. Exclusive stores never see it.
 */
static inline int new_name_rc(fuse_req_t req, int rc)
{
	return rc == -EEXIST && req_fs(req)->shared ? -ESTALE : rc;
}

/* Count a request that reads inode `ino`: open a read transaction and read
 * it. *txn is NULL when no transaction could be opened (nothing to end). */
static inline int read_inode(struct dbfs *fs, fuse_ino_t ino, MDB_txn **txn, struct dbfs_inode *in)
{
	fs->cnt.ops++;
	int rc = dbfs_read_begin(fs, txn);
	if (rc) {
		*txn = NULL;
		return rc;
	}
	return dbfs_inode_get(fs, *txn, ino, in);
}

/* The map guard (fuse_guard.c): enter before the handler runs (false: the
 * store's maps are lost, the request was answered EIO); a fault inside it
 * answers EIO unless the reply went out. */
bool dbfs_fuse_guard_enter(fuse_req_t req, struct dbfs_guard *g);
void dbfs_fuse_guard_fault(fuse_req_t req, struct dbfs_guard *g);

#define GUARDED(op, params, args)                                                                  \
	static void g_##op params                                                                  \
	{                                                                                          \
		struct dbfs_guard g;                                                               \
		if (!dbfs_fuse_guard_enter(req, &g))                                               \
			return;                                                                    \
		if (sigsetjmp(g.jb, 0)) {                                                          \
			dbfs_fuse_guard_fault(req, &g);                                            \
			return;                                                                    \
		}                                                                                  \
		op_##op args;                                                                      \
		dbfs_guard_pop(&g);                                                                \
	}
#define GUARDED_NOREPLY(op, params, args)                                                          \
	static void g_##op params                                                                  \
	{                                                                                          \
		struct dbfs_guard g;                                                               \
		dbfs_guard_push(&g, req_fs(req));                                                  \
		if (sigsetjmp(g.jb, 0)) {                                                          \
			dbfs_guard_recovered(&g);                                                  \
			return;                                                                    \
		}                                                                                  \
		op_##op args;                                                                      \
		dbfs_guard_pop(&g);                                                                \
	}

typedef struct fuse_file_info ffi; /* for the GUARDED lines */

/* Each file's part of the table: sets its handlers in *o. */
void dbfs_fuse_names_ops(struct fuse_lowlevel_ops *o);
void dbfs_fuse_attr_ops(struct fuse_lowlevel_ops *o);
void dbfs_fuse_dir_ops(struct fuse_lowlevel_ops *o);
void dbfs_fuse_data_ops(struct fuse_lowlevel_ops *o);

/* The close (fuse_data.c): unguarded, it reads no map. */
void dbfs_fuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* Mark the atime of `ino` by the relatime rule (fuse_data.c), before the
 * reply of a readdir or readlink. */
void dbfs_fuse_mark_atime(struct dbfs *fs, uint64_t ino);

#endif
