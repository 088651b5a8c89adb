/* SPDX-License-Identifier: MIT */
/*
 * The queue's configuration: defaults, checks, the number of databases it
 * needs, and its stored record ('C', format.h: struct mfsq_disk_config),
 * written when the queue is created and read back by every open. Calls
 * only record.c.
 */
#include <errno.h>

#include "internal.h"

void mfsq_config_default(struct mfsq_config *cfg)
{
	cfg->nshards = 4;
	cfg->subshard_msgs = 4096;
	cfg->subshard_bytes = 16u << 20;
	cfg->retain_max = 64;
	cfg->max_payload = MFSQ_PAYLOAD_MAX_DEFAULT;
	cfg->bucket_us = 10000;
}

unsigned mfsq_dbs_needed(const struct mfsq_config *cfg)
{
	struct mfsq_config d;

	if (!cfg) {
		mfsq_config_default(&d);
		cfg = &d;
	}
	return 2 + cfg->nshards * (cfg->retain_max + 3);
}

int mfsq_config_valid(const struct mfsq_config *c)
{
	return c->nshards >= 1 && c->nshards <= 1024 && c->subshard_msgs >= 1 &&
	       c->subshard_bytes >= 1 && c->retain_max >= 2 && c->max_payload >= 1 &&
	       c->bucket_us >= 1;
}

void mfsq_get_config(const mfsq_queue *q, struct mfsq_config *cfg)
{
	*cfg = q->cfg;
}

int mfsq_config_get(mfsq_queue *q, MDB_txn *txn, struct mfsq_disk_config *dc)
{
	MDB_val key = {1, "C"};

	return mfsq_record_get(txn, q->meta, &key, dc, sizeof(*dc));
}

int mfsq_config_load(mfsq_queue *q, MDB_txn *txn)
{
	struct mfsq_disk_config dc;
	int rc = mfsq_config_get(q, txn, &dc);

	struct mfsq_config c;

	if (rc)
		return rc;
	/* The version first: another format's fields mean other things. */
	if (dc.version < MFSQ_FORMAT_OLDEST || dc.version > MFSQ_FORMAT_VERSION)
		return MDB_VERSION_MISMATCH;
	c = (struct mfsq_config){
	    .nshards = dc.nshards,
	    .subshard_msgs = dc.subshard_msgs,
	    .subshard_bytes = dc.subshard_bytes,
	    .retain_max = dc.retain_max,
	    .max_payload = dc.max_payload,
	    .bucket_us = dc.bucket_us,
	};
	/* The ranges of a new queue's: nshards sizes allocations and loops,
	 * nshards, subshard_msgs and bucket_us are divisors. No queue was ever
	 * created with other values: the record is damaged. */
	if (!mfsq_config_valid(&c))
		return EBADMSG;
	q->cfg = c;
	return 0;
}

int mfsq_config_upgrade(mfsq_queue *q, MDB_txn *txn)
{
	struct mfsq_disk_config dc;
	MDB_val key = {1, "C"}, val = {sizeof(dc), &dc};
	int rc = mfsq_config_get(q, txn, &dc);

	if (rc || dc.version == MFSQ_FORMAT_VERSION)
		return rc;
	dc.version = MFSQ_FORMAT_VERSION; /* 1 -> 2: the fields are the same */
	return mdb_put(txn, q->meta, &key, &val, 0);
}

int mfsq_config_store(mfsq_queue *q, MDB_txn *txn)
{
	struct mfsq_disk_config dc = {
	    .version = MFSQ_FORMAT_VERSION,
	    .nshards = q->cfg.nshards,
	    .subshard_msgs = q->cfg.subshard_msgs,
	    .retain_max = q->cfg.retain_max,
	    .subshard_bytes = q->cfg.subshard_bytes,
	    .bucket_us = q->cfg.bucket_us,
	    .max_payload = q->cfg.max_payload,
	};
	MDB_val key = {1, "C"}, val = {sizeof(dc), &dc};

	return mdb_put(txn, q->meta, &key, &val, MDB_NOOVERWRITE);
}
