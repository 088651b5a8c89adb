/*
 * LD_PRELOAD shim for tests/fault/t_sigbus.sh: once the file $FAULT_DIR/cut
 * appears, the next mdb_txn_begin on an environment under $FAULT_DIR/
 * first cuts that store's data.mdb to 0 bytes (and removes the trigger),
 * as a user racing the mount with truncate(1) would: the open that is under
 * way then meets a SIGBUS in LMDB's map on mfs's control thread, at a known
 * point (dbfs_open's first transaction).
 */
#include <dlfcn.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned flags, MDB_txn **txn)
{
	static int (*real)(MDB_env *, MDB_txn *, unsigned, MDB_txn **);
	const char *dir = getenv("FAULT_DIR"), *path;
	char trigger[4096], data[4096];
	if (!real)
		real = (int (*)(MDB_env *, MDB_txn *, unsigned, MDB_txn **))dlsym(RTLD_NEXT,
										  "mdb_txn_begin");
	char real_path[4096];
	/* dbfs opens a store by a /proc/self/fd/N path of its held directory */
	if (dir && mdb_env_get_path(env, &path) == 0 && realpath(path, real_path) &&
	    !strncmp(real_path, dir, strlen(dir)) && real_path[strlen(dir)] == '/') {
		path = real_path;
		snprintf(trigger, sizeof(trigger), "%s/cut", dir);
		if (unlink(trigger) == 0) {
			snprintf(data, sizeof(data), "%s/data.mdb", path);
			if (truncate(data, 0))
				perror(data);
		}
	}
	return real(env, parent, flags, txn);
}
