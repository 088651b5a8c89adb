/*
 * Open a small LMDB environment of mfs's own (the registry, the usage
 * history) with one named database, in one call: create, size, open, and
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

#endif
