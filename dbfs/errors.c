/*
 * The errno boundary: the one place that turns LMDB's return codes and
 * libdbfs's own results into an errno. Calls nothing else of the library.
 */
#include <errno.h>
#include <lmdb.h>

#include "dbfs/internal.h"

int dbfs_errno(int rc)
{
	if (rc == 0)
		return 0;
	if (rc > 0)
		return rc; /* system errno from LMDB */
	if (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE) {
		switch (rc) {
		case MDB_KEYEXIST: return EEXIST;
		case MDB_NOTFOUND: return ENOENT;
		case MDB_MAP_FULL: return ENOSPC;
		case MDB_TXN_FULL: return EFBIG;
		case MDB_READERS_FULL: return EAGAIN;
		case MDB_DBS_FULL: return ENOSPC;
		case MDB_BAD_VALSIZE: return EINVAL;
		default: return EIO;
		}
	}
	return -rc;
}
