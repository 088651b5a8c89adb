/* SPDX-License-Identifier: MIT */
/*
 * The shard state records ('S' keys of the meta database, format.h:
 * struct mfsq_disk_shard): their key, reading and writing one. Calls no
 * other file of the library.
 */
#include <string.h>

#include "internal.h"

void mfsq_shard_key(unsigned char k[5], uint32_t s)
{
	k[0] = 'S';
	mfsq_be32_put(k + 1, s);
}

int mfsq_read_shard(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k}, val;
	int rc;

	mfsq_shard_key(k, s);
	rc = mdb_get(txn, q->meta, &key, &val);
	if (rc)
		return rc;
	if (val.mv_size != sizeof(*st))
		return MDB_CORRUPTED;
	memcpy(st, val.mv_data, sizeof(*st));
	return 0;
}

int mfsq_write_shard(mfsq_queue *q, MDB_txn *txn, uint32_t s, const struct mfsq_disk_shard *st)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k}, val = {sizeof(*st), (void *)st};

	mfsq_shard_key(k, s);
	return mdb_put(txn, q->meta, &key, &val, 0);
}
