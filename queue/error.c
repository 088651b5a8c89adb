/* SPDX-License-Identifier: MIT */
/*
 * The errno boundary: the one place LMDB codes become the queue's codes
 * (mfsq.h, "Errors"), and the text of every code. Calls no other file of
 * the library.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

int mfsq_lmdb_err(int rc)
{
	if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
		return ENOSPC;
	if (rc == MDB_NOTFOUND)
		return ENOENT;
	if (rc == MDB_KEYEXIST)
		return EEXIST;
	return rc;
}

const char *mfsq_strerror(int rc)
{
	if (rc == MFSQ_LAGGED)
		return "MFSQ_LAGGED: subscriber fell behind the retention limit";
	if (rc < 0)
		return mdb_strerror(rc);
	return strerror(rc);
}
