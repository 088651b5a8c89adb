/* SPDX-License-Identifier: MIT */
/*
 * Fixed-size records of the meta database (format.h): reading one whose
 * value must be exactly its struct, and the shard state records ('S',
 * struct mfsq_disk_shard): their key, reading and writing one. Calls no
 * other file of the library.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

void mfsq_shard_key(unsigned char k[5], uint32_t s)
{
	k[0] = 'S';
	mfsq_be32_put(k + 1, s);
}

int mfsq_record_get(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, void *out, size_t size)
{
	MDB_val val;
	int rc = mdb_get(txn, dbi, key, &val);

	if (rc)
		return rc;
	if (val.mv_size != size)
		return EBADMSG; /* a damaged record (mfsq.h, Errors) */
	memcpy(out, val.mv_data, size);
	return 0;
}

int mfsq_shard_row(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k};

	mfsq_shard_key(k, s);
	return mfsq_record_get(txn, q->meta, &key, st, sizeof(*st));
}

int mfsq_write_shard(mfsq_queue *q, MDB_txn *txn, uint32_t s, const struct mfsq_disk_shard *st)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k}, val = {sizeof(*st), (void *)st};

	mfsq_shard_key(k, s);
	return mdb_put(txn, q->meta, &key, &val, 0);
}
