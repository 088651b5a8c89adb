/*
 * The FUSE low-level adapter: decode a request, run the core operation in
 * a read transaction or through the group committer, map the error, reply.
 * Every handler ends in exactly one fuse_reply_* (or fuse_reply_none).
 * This file holds the connection setup (init) and builds the table from
 * the parts of the handlers' files (fuse_private.h names them and says
 * how the kernel's lookup counts are kept).
 */
#include <pthread.h>

#include "dbfs/fuse_private.h"
#include "dbfs/shared.h"

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct dbfs *fs = userdata;
	if (fs->opt.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	/* Wanted when the kernel has them. POSIX_ACL: the kernel enforces
	 * ACLs we store. NO_OPEN(DIR)_SUPPORT: see op_open. A file made by
	 * FUSE_CREATE (op_create: write-only handles get direct I/O, one
	 * request per write) is released with a FUSE_RELEASE request until
	 * some open answered ENOSYS; it costs the daemon a request, not the
	 * closing program (the kernel sends it in the background). */
	static const unsigned caps[] = {
	    FUSE_CAP_POSIX_ACL,	      FUSE_CAP_DONT_MASK,	   FUSE_CAP_READDIRPLUS,
	    FUSE_CAP_PARALLEL_DIROPS, FUSE_CAP_ASYNC_DIO,	   FUSE_CAP_CACHE_SYMLINKS,
	    FUSE_CAP_NO_OPEN_SUPPORT, FUSE_CAP_NO_OPENDIR_SUPPORT,
	};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (conn->capable & caps[i])
			conn->want |= caps[i];
	/* With no open handler the kernel never tells us about O_TRUNC:
	 * let it send a setattr instead. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* shared: opens come here, so that closes send the flush that waits
	 * for the other processes (close-to-open, dbfs/shared.h) */
	fs->no_open = !fs->shared && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
	/* We are the only writer of the store: cached pages stay valid. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_write = 1u << 20;
	conn->max_readahead = DBFS_READ_AHEAD;
	conn->time_gran = 1;
}

static struct fuse_lowlevel_ops dbfs_ops;
static pthread_once_t dbfs_ops_once = PTHREAD_ONCE_INIT;

static void build_ops(void)
{
	dbfs_ops.init = op_init;
	dbfs_ops.flush = dbfs_fuse_flush;
	dbfs_fuse_names_ops(&dbfs_ops);
	dbfs_fuse_attr_ops(&dbfs_ops);
	dbfs_fuse_dir_ops(&dbfs_ops);
	dbfs_fuse_data_ops(&dbfs_ops);
}

void dbfs_set_session(struct dbfs *fs, struct fuse_session *se)
{
	if (!se)
		dbfs_shared_session(fs, NULL); /* joined before the session goes */
	dbfs_expire_session(fs, se);	       /* fs->se, under the expiry thread's lock */
	if (se)
		dbfs_shared_session(fs, se); /* the notifier of a shared store */
}

const struct fuse_lowlevel_ops *dbfs_fuse_ops(void)
{
	pthread_once(&dbfs_ops_once, build_ops);
	return &dbfs_ops;
}
