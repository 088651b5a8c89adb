/*
 * The errno boundary: the one place that turns libdbfs's internal results
 * (internal.h, "Error convention") and LMDB's return codes into the
 * negative errno of the public API. Calls nothing else of the library.
 */
#include <errno.h>
#include <lmdb.h>

#include "dbfs/internal.h"

/* LMDB's own codes; any other is a damaged or misused environment: EIO. */
static const struct {
	int mdb, e;
} mdb_codes[] = {
    {MDB_KEYEXIST, EEXIST},    {MDB_NOTFOUND, ENOENT},	   {MDB_MAP_FULL, ENOSPC},
    {MDB_TXN_FULL, EFBIG},     {MDB_READERS_FULL, EAGAIN}, {MDB_DBS_FULL, ENOSPC},
    {MDB_BAD_VALSIZE, EINVAL},
};

static int mdb_code_errno(int rc)
{
	for (size_t i = 0; i < sizeof(mdb_codes) / sizeof(mdb_codes[0]); i++)
		if (mdb_codes[i].mdb == rc)
			return mdb_codes[i].e;
	return EIO;
}

int dbfs_errno(int rc)
{
	if (rc == 0 || dbfs_is_refusal(rc))
		return rc;
	if (dbfs_is_queue_err(rc))
		return -dbfs_queue_errno(rc);
	if (rc > 0)
		return -rc; /* a system errno that LMDB passed on */
	if (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE)
		return -mdb_code_errno(rc);
	return -EIO; /* no code of ours: never a success */
}
