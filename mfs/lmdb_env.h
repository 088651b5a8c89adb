/*
 * Open a small LMDB environment of mfs's own (the registry, the usage
 * history) with one named database, in one call, and the mapping of its
 * codes to errno values: create, size, open, and
 * open or create the database in a committed transaction. On error
 * nothing stays open.
 */
#ifndef MFS_LMDB_ENV_H
#define MFS_LMDB_ENV_H

#include <stddef.h>
#include <lmdb.h>

/* Returns 0 or an LMDB code (the caller maps it: it knows its errno). Any
 * thread holding no transaction of the environment. */
int mfs_lmdb_env_open(const char *path, unsigned flags, unsigned maxdbs, size_t mapsize,
		      const char *db, MDB_env **env, MDB_dbi *dbi);

/* An LMDB code as mfs's -errno (manager.h): MDB_NOTFOUND -ENOENT,
 * MDB_MAP_FULL and MDB_TXN_FULL -ENOSPC, MDB_READERS_FULL -EAGAIN,
 * MDB_INVALID and MDB_VERSION_MISMATCH -EINVAL, a positive errno as it is,
 * any other -EIO; 0 stays 0. Pure. */
int mfs_lmdb_errno(int rc);

#endif
