/* One-call open of an LMDB environment and its database (see lmdb_env.h). */
#include <errno.h>

#include "lmdb_env.h"

int mfs_lmdb_env_open(const char *path, unsigned flags, unsigned maxdbs, size_t mapsize,
		      const char *db, MDB_env **env, MDB_dbi *dbi)
{
	MDB_txn *txn = NULL;
	int rc = mdb_env_create(env);

	if (rc) {
		*env = NULL;
		return rc;
	}
	rc = mdb_env_set_maxdbs(*env, maxdbs);
	if (!rc)
		rc = mdb_env_set_mapsize(*env, mapsize);
	if (!rc)
		rc = mdb_env_open(*env, path, flags, 0600);
	if (!rc)
		rc = mdb_txn_begin(*env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, db, MDB_CREATE, dbi);
	if (!rc) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		mdb_env_close(*env);
		*env = NULL;
	}
	return rc;
}

int mfs_lmdb_errno(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
		return -EINVAL;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}
