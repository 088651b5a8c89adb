/*
 * What a request costs the thread that processes it (dbfs_request_cost in
 * dbfs.h): whether it changes the store, so that it waits for a commit, and
 * whether it may keep its thread long on any store. The file system knows
 * this; a transport uses it to choose the thread (mfs hands the requests
 * that may wait long from its io_uring threads to its worker pool).
 */
#include <stddef.h>
#include <linux/fuse.h>

#include "dbfs/dbfs.h"

unsigned dbfs_request_cost(const void *req, size_t len)
{
	const struct fuse_in_header *in = req;

	if (len < sizeof(*in))
		return 0;
	const void *op = in + 1;
	size_t oplen = len - sizeof(*in);

	switch (in->opcode) {
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_SYNCFS:
	case FUSE_FLUSH: /* each waits for a device flush of the whole store */
		return DBFS_COST_LONG;
	case FUSE_COPY_FILE_RANGE:
	case FUSE_FALLOCATE: /* may move or free gigabytes */
		return DBFS_COST_COMMIT | DBFS_COST_LONG;
	case FUSE_SETATTR: /* a truncate may free gigabytes */
		if (oplen >= sizeof(struct fuse_setattr_in) &&
		    (((const struct fuse_setattr_in *)op)->valid & FATTR_SIZE))
			return DBFS_COST_COMMIT | DBFS_COST_LONG;
		return DBFS_COST_COMMIT;
	case FUSE_WRITE: /* copying a megabyte into the store takes a while */
		if (oplen >= sizeof(struct fuse_write_in) &&
		    ((const struct fuse_write_in *)op)->size > DBFS_COST_BIG_WRITE)
			return DBFS_COST_COMMIT | DBFS_COST_LONG;
		return DBFS_COST_COMMIT;
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_LINK:
	case FUSE_SYMLINK:
	case FUSE_CREATE:
	case FUSE_SETXATTR:
	case FUSE_REMOVEXATTR:
	case FUSE_TMPFILE:
		return DBFS_COST_COMMIT;
	default: /* served from the LMDB map: lookups, getattr, reads, readdir, ... */
		return 0;
	}
}
