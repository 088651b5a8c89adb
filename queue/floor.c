/* SPDX-License-Identifier: MIT */
/*
 * The retention floor (mfsq_retain_floor()): a position per shard below
 * which retention drops messages whatever the subscribers hold, and at or
 * above which it keeps them even with no subscriber. For an application
 * whose own bounds (counts, bytes, age) decide what is kept, such as a
 * change feed that replays from a sequence number. Also the read-only
 * accessors of subscriber positions.
 *
 *   'K' | shard u32   ->  floor u64 (the first seq kept)
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

static void floor_key(unsigned char k[5], uint32_t s)
{
	k[0] = 'K';
	mfsq_be32_put(k + 1, s);
}

int mfsq_retain_floor(mfsq_queue *q, MDB_txn *txn, uint32_t shard, uint64_t seq)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k}, val = {sizeof(seq), &seq};
	int rc;

	if (!q || !txn || shard >= q->cfg.nshards)
		return EINVAL;
	floor_key(k, shard);
	if (seq == 0) {
		rc = mdb_del(txn, q->meta, &key, NULL);
		return rc == MDB_NOTFOUND ? 0 : mfsq_lmdb_err(rc);
	}
	rc = mdb_put(txn, q->meta, &key, &val, 0);
	if (!rc)
		atomic_store(&q->retention_due, 1);
	return mfsq_lmdb_err(rc);
}

int mfsq_floor_get(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t *floor)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k};
	int rc;

	floor_key(k, s);
	rc = mfsq_record_get(txn, q->meta, &key, floor, sizeof(*floor));
	if (rc == MDB_NOTFOUND) {
		*floor = 0;
		return 0;
	}
	return rc;
}

uint64_t mfsq_sub_position(const mfsq_sub *s, uint32_t shard)
{
	return s && shard < s->q->cfg.nshards ? atomic_load(&s->pos[shard]) : 0;
}

int mfsq_subscriber_get(mfsq_queue *q, const char *name, uint64_t *acked, uint64_t *lost,
			int *lagging)
{
	uint32_t n = q->cfg.nshards;
	unsigned char k[MFSQ_NAME_MAX + 1];
	size_t nl = name ? strlen(name) : 0;
	struct mfsq_disk_sub ds;
	MDB_val key = {nl + 1, k}, val;
	MDB_txn *txn;
	int rc;

	if (!nl || nl > MFSQ_NAME_MAX)
		return EINVAL;
	k[0] = 'U';
	memcpy(k + 1, name, nl);
	rc = mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return mfsq_lmdb_err(rc);
	rc = mdb_get(txn, q->meta, &key, &val);
	if (!rc && val.mv_size != sizeof(ds) + n * sizeof(uint64_t))
		rc = MDB_CORRUPTED;
	if (!rc) {
		memcpy(&ds, val.mv_data, sizeof(ds));
		if (acked)
			memcpy(acked, (char *)val.mv_data + sizeof(ds), n * sizeof(uint64_t));
		if (lost)
			*lost = ds.lost;
		if (lagging)
			*lagging = (ds.flags & MFSQ_SUB_F_LAGGING) != 0;
	}
	mdb_txn_abort(txn);
	return mfsq_lmdb_err(rc);
}

int mfsq_subscriber_ack(mfsq_queue *q, MDB_txn *txn, const char *name, uint32_t shard,
			uint64_t next)
{
	uint32_t n = q->cfg.nshards;
	unsigned char k[MFSQ_NAME_MAX + 1];
	size_t nl = name ? strlen(name) : 0;
	struct mfsq_disk_shard st;
	MDB_val key = {nl + 1, k}, val;
	int rc;

	if (!txn || !nl || nl > MFSQ_NAME_MAX || shard >= n)
		return EINVAL;
	k[0] = 'U';
	memcpy(k + 1, name, nl);
	struct mfsq_wtx w;

	rc = mfsq_wtx_begin(q, txn, 0, &w); /* the caller's */
	if (!rc)
		rc = mfsq_shard_read_w(q, &w, shard, &st, NULL);
	mfsq_wtx_end(q, &w, rc);
	if (rc)
		return mfsq_lmdb_err(rc);
	if (next > st.next_seq)
		return ERANGE;
	rc = mdb_get(txn, q->meta, &key, &val);
	if (rc)
		return mfsq_lmdb_err(rc);
	size_t vl = sizeof(struct mfsq_disk_sub) + n * sizeof(uint64_t);
	if (val.mv_size != vl)
		return mfsq_lmdb_err(MDB_CORRUPTED);
	uint64_t cur;
	size_t at = sizeof(struct mfsq_disk_sub) + shard * sizeof(uint64_t);
	memcpy(&cur, (char *)val.mv_data + at, sizeof(cur));
	if (next <= cur)
		return 0;
	unsigned char buf[sizeof(struct mfsq_disk_sub) + 1024 * sizeof(uint64_t)];
	memcpy(buf, val.mv_data, vl);
	memcpy(buf + at, &next, sizeof(next));
	val.mv_size = vl;
	val.mv_data = buf;
	return mfsq_lmdb_err(mdb_put(txn, q->meta, &key, &val, 0));
}
