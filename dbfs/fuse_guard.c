/* The map guard around every FUSE request: how a request enters it and
 * what a fault inside it answers (the wrappers are GUARDED, fuse_private.h). */
#include "dbfs/fuse_private.h"

/*
 * The map guard around every request (guard.h): a SIGBUS in this store's
 * maps while the handler runs comes back here; the request gets EIO unless
 * its reply already went out, and every later request of the lost store
 * gets EIO at once. Forgets are never answered, and are not refused: they
 * only count down lookups.
 */
bool dbfs_fuse_guard_enter(fuse_req_t req, struct dbfs_guard *g)
{
	struct dbfs *fs = req_fs(req);
	if (atomic_load(&fs->map_lost)) {
		dbfs_count_error(fs, EIO);
		fuse_reply_err(req, EIO);
		return false;
	}
	dbfs_io_reply_reset();
	dbfs_guard_push(g, fs);
	return true;
}

void dbfs_fuse_guard_fault(fuse_req_t req, struct dbfs_guard *g)
{
	dbfs_guard_recovered(g);
	dbfs_count_error(g->fs, EIO);
	if (!dbfs_io_reply_sent())
		fuse_reply_err(req, EIO);
}
