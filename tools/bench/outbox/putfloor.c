/*
 * tools/bench/outbox/putfloor: the floor of the change feed's cost, LMDB
 * alone. One write transaction per round shaped like a DBFS create (a new
 * inode record appended, its parent's record rewritten, a directory entry),
 * and in mode 1 one more 150-byte MDB_APPEND put into another named
 * database (what the feed's message row is: a table no other row of the
 * commit touches), in mode 2 one more empty-valued put right after the new
 * inode record (what an ilink row is). Run it under callgrind with N and 2N
 * rounds (tools/bench/outbox/run --floor does): the difference per round
 * between modes is what one such put costs, commit included.
 *
 *   putfloor DIR MODE N      (DIR empty, in tmpfs; MODE 0, 1 or 2)
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ck(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "putfloor: %s: %s\n", what, mdb_strerror(rc));
		exit(1);
	}
}

static void be64(unsigned char *p, unsigned long long v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

int main(int argc, char **argv)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi inode, dirent, other;
	unsigned char val[160] = {0}, k[24];

	if (argc != 4) {
		fprintf(stderr, "usage: putfloor DIR MODE N\n");
		return 2;
	}
	int mode = atoi(argv[2]);
	long n = atol(argv[3]);
	ck(mdb_env_create(&env), "env");
	ck(mdb_env_set_maxdbs(env, 8), "maxdbs");
	ck(mdb_env_set_mapsize(env, 1ul << 30), "mapsize");
	/* as DBFS opens a store in memory: no sync, pages written in the map */
	ck(mdb_env_open(env, argv[1], MDB_NOSYNC | MDB_WRITEMAP | MDB_NOTLS, 0644), "open");
	ck(mdb_txn_begin(env, NULL, 0, &txn), "begin");
	ck(mdb_dbi_open(txn, "inode", MDB_CREATE, &inode), "inode");
	ck(mdb_dbi_open(txn, "dirent", MDB_CREATE, &dirent), "dirent");
	ck(mdb_dbi_open(txn, "other", MDB_CREATE, &other), "other");
	ck(mdb_txn_commit(txn), "commit");
	for (long i = 1; i <= n; i++) {
		MDB_val kv = {8, k}, vv = {sizeof(val), val};
		ck(mdb_txn_begin(env, NULL, 0, &txn), "begin");
		be64(k, 1000 + (unsigned long long)i);
		ck(mdb_put(txn, inode, &kv, &vv, MDB_APPEND), "inode put");
		be64(k, 1);
		ck(mdb_put(txn, inode, &kv, &vv, 0), "parent put");
		be64(k + 8, (unsigned long long)i);
		kv.mv_size = 16;
		vv.mv_size = 24;
		ck(mdb_put(txn, dirent, &kv, &vv, 0), "dirent put");
		if (mode == 1) {
			be64(k, (unsigned long long)i);
			kv.mv_size = 8;
			vv.mv_size = 150;
			ck(mdb_put(txn, other, &kv, &vv, MDB_APPEND), "other put");
		} else if (mode == 2) {
			be64(k, 1000 + (unsigned long long)i);
			be64(k + 8, 1);
			kv.mv_size = 24;
			vv.mv_size = 0;
			ck(mdb_put(txn, inode, &kv, &vv, MDB_APPEND), "name row put");
		}
		ck(mdb_txn_commit(txn), "commit");
	}
	mdb_env_close(env);
	return 0;
}
