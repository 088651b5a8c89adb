/* SPDX-License-Identifier: MIT */
/* Queue lifetime, configuration, shard state records, statistics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int config_valid(const struct mfsq_config *c)
{
	return c->nshards >= 1 && c->nshards <= 1024 && c->subshard_msgs >= 1 &&
	       c->subshard_bytes >= 1 && c->retain_max >= 2 && c->max_payload >= 1 &&
	       c->bucket_us >= 1;
}

static int create_layout(mfsq_queue *q, struct mfsq_wtx *w)
{
	MDB_txn *txn = w->txn;
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
	int rc = mdb_put(txn, q->meta, &key, &val, MDB_NOOVERWRITE);

	for (uint32_t s = 0; !rc && s < q->cfg.nshards; s++) {
		struct mfsq_disk_shard st = {
		    .next_seq = 1,
		    .head_first = 1,
		    .min_due = UINT64_MAX,
		    .next_id = 1,
		};

		rc = mfsq_subshard_roll(q, w, s, &st);
		if (!rc)
			rc = mfsq_subshard_spare(q, w, s, &st);
		if (!rc)
			rc = mfsq_write_shard(q, txn, s, &st);
	}
	return rc;
}

static int load_config(mfsq_queue *q, struct mfsq_wtx *w, unsigned flags)
{
	MDB_txn *txn = w->txn;
	MDB_val key = {1, "C"}, val;
	struct mfsq_disk_config dc;
	int rc = mdb_get(txn, q->meta, &key, &val);

	if (rc == MDB_NOTFOUND)
		return (flags & MFSQ_CREATE) ? create_layout(q, w) : ENOENT;
	if (rc)
		return rc;
	if (val.mv_size != sizeof(dc))
		return MDB_CORRUPTED;
	memcpy(&dc, val.mv_data, sizeof(dc));
	if (dc.version != MFSQ_FORMAT_VERSION)
		return MDB_VERSION_MISMATCH;
	q->cfg.nshards = dc.nshards;
	q->cfg.subshard_msgs = dc.subshard_msgs;
	q->cfg.retain_max = dc.retain_max;
	q->cfg.subshard_bytes = dc.subshard_bytes;
	q->cfg.bucket_us = dc.bucket_us;
	q->cfg.max_payload = dc.max_payload;
	return 0;
}

static int open_dbs(mfsq_queue *q, struct mfsq_wtx *w, unsigned flags)
{
	MDB_txn *txn = w->txn;
	char nm[MFSQ_NAME_MAX + 32];
	unsigned cf = (flags & MFSQ_CREATE) ? MDB_CREATE : 0;
	int rc;

	snprintf(nm, sizeof(nm), "%s/m", q->name);
	rc = mdb_dbi_open(txn, nm, cf, &q->meta);
	if (rc == MDB_NOTFOUND)
		return ENOENT;
	if (rc)
		return rc;
	/* the configuration decides the shard count: read it first */
	{
		MDB_val key = {1, "C"}, val;
		struct mfsq_disk_config dc;

		rc = mdb_get(txn, q->meta, &key, &val);
		if (!rc && val.mv_size == sizeof(dc)) {
			memcpy(&dc, val.mv_data, sizeof(dc));
			q->cfg.nshards = dc.nshards;
		}
	}
	q->shards = calloc(q->cfg.nshards, sizeof(*q->shards));
	if (!q->shards)
		return ENOMEM;
	rc = load_config(q, w, flags);
	if (!rc) {
		snprintf(nm, sizeof(nm), "%s/x", q->name);
		rc = mdb_dbi_open(txn, nm, MDB_CREATE, &q->exc);
	}
	for (uint32_t s = 0; !rc && s < q->cfg.nshards; s++) {
		struct mfsq_disk_shard st;

		MDB_dbi dbi;

		snprintf(nm, sizeof(nm), "%s/d/%u", q->name, s);
		rc = mdb_dbi_open(txn, nm, MDB_CREATE, &q->shards[s].delay);
		if (!rc)
			rc = mfsq_read_shard(q, txn, s, &st);
		/* shared handles for the tail and the spare: enqueues inside
		 * callers' transactions then never need to open one */
		if (!rc)
			rc = mfsq_wtx_subshard(q, w, s, st.tail_id, 0, &dbi);
		if (!rc && st.spare_id)
			rc = mfsq_wtx_subshard(q, w, s, st.spare_id, 0, &dbi);
		if (!rc) {
			q->shards[s].min_due = st.min_due;
			q->shards[s].tail_first = st.tail_first;
			q->shards[s].next_seq = st.next_seq;
		}
	}
	return rc;
}

int mfsq_open(MDB_env *env, const char *name, const struct mfsq_config *cfg, unsigned flags,
	      mfsq_queue **out)
{
	mfsq_queue *q;
	struct mfsq_wtx w;
	size_t nl = name ? strlen(name) : 0;
	int rc;

	*out = NULL;
	if (!env || nl == 0 || nl > MFSQ_NAME_MAX || strchr(name, '/'))
		return EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return ENOMEM;
	memcpy(q->name, name, nl);
	if (cfg)
		q->cfg = *cfg;
	else
		mfsq_config_default(&q->cfg);
	if (!config_valid(&q->cfg)) {
		free(q);
		return EINVAL;
	}
	q->env = env;
	pthread_rwlock_init(&q->droplock, NULL);
	pthread_mutex_init(&q->dbi_lock, NULL);
	pthread_mutex_init(&q->lock, NULL);
	{
		/* writer-preferring: appends and accounting must not wait behind
		 * a stream of subscribers' shared holds */
		pthread_rwlockattr_t ra;

		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&q->cache_lock, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	pthread_mutex_init(&q->append_lock, NULL);
	pthread_mutex_init(&q->glock, NULL);
	pthread_mutex_init(&q->acklock, NULL);
	q->ackfd = -1;
	q->logfd = -1;
	pthread_cond_init(&q->log_cv, NULL);
	q->gtail = &q->ghead;
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&q->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	q->cache_target = mfsq_budget_bytes();

	rc = mfsq_wtx_begin(q, NULL, 1, &w);
	if (!rc)
		rc = mfsq_wtx_end(q, &w, open_dbs(q, &w, flags));
	if (rc) {
		mfsq_close(q);
		return mfsq_lmdb_err(rc);
	}
	mfsq_acklog_open(q); /* after the configuration: slots hold nshards positions */
	mfsq_enqlog_open(q);
	*out = q;
	return 0;
}

void mfsq_close(mfsq_queue *q)
{
	if (!q)
		return;
	mfsq_group_close(q); /* the log's records into the store, its thread stopped */
	mfsq_enqlog_close(q);
	mfsq_acklog_close(q);
	mfsq_cache_free_all(q);
	mfsq_buffered_free_all(q);
	if (q->shards) {
		for (uint32_t s = 0; s < q->cfg.nshards; s++)
			free(q->shards[s].dbis);
		free(q->shards);
	}
	pthread_rwlock_destroy(&q->droplock);
	pthread_mutex_destroy(&q->dbi_lock);
	pthread_mutex_destroy(&q->lock);
	pthread_rwlock_destroy(&q->cache_lock);
	pthread_mutex_destroy(&q->append_lock);
	pthread_mutex_destroy(&q->glock);
	pthread_mutex_destroy(&q->acklock);
	pthread_cond_destroy(&q->log_cv);
	pthread_cond_destroy(&q->cond);
	free(q);
}

void mfsq_get_config(const mfsq_queue *q, struct mfsq_config *cfg)
{
	*cfg = q->cfg;
}

int mfsq_tick(mfsq_queue *q)
{
	int rc = mfsq_delay_promote(q);

	if (!rc)
		rc = mfsq_retention(q);
	return rc;
}

void mfsq_stats(mfsq_queue *q, struct mfsq_stats *st)
{
	uint64_t now = mfsq_now_us();
	MDB_txn *txn;

	memset(st, 0, sizeof(*st));
	st->enqueued = q->c.enqueued;
	st->dequeued = q->c.dequeued;
	st->acked = q->c.acked;
	st->batches = q->c.batches;
	st->commit_groups = q->c.groups;
	st->subshards_created = q->c.sub_created;
	st->subshards_dropped = q->c.sub_dropped;
	st->delayed_enqueued = q->c.delayed_enqueued;
	st->delayed_promoted = q->c.delayed_promoted;
	st->lateness_max_us = q->c.lateness_max;
	st->lateness_p50_us = mfsq_late_pct(q, 0.5);
	st->lateness_p99_us = mfsq_late_pct(q, 0.99);
	st->expired = q->c.expired;
	st->filtered = q->c.filtered;
	st->lagging = q->c.lagging;
	st->cache_hits = q->c.hits;
	st->cache_misses = q->c.misses;
	st->cache_restores = q->c.restores;
	st->cache_evictions = q->c.evictions;
	st->cache_prefetches = q->c.prefetches;
	st->maintenance_errors = q->c.maint_errors;
	st->last_maintenance_error = q->last_maint_error;
	st->store_only_enqueues = q->c.store_only;
	st->buffered_enqueued = q->c.buffered;
	st->buffered_spilled = q->c.spilled;
	st->buffered_dropped = q->c.bdropped;
	st->pressure_events = 0;
	if (!mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn)) {
		for (uint32_t s = 0; s < q->cfg.nshards; s++) {
			struct mfsq_disk_shard ds;

			if (!mfsq_read_shard(q, txn, s, &ds)) {
				st->subshards_live += ds.nlive;
				st->delayed_pending += ds.delay_pending;
			}
		}
		mdb_txn_abort(txn);
	}
	pthread_rwlock_rdlock(&q->cache_lock);
	st->cache_bytes = q->cache_bytes;
	st->cache_target_bytes = q->cache_target;
	st->cache_spare_bytes = (uint64_t)q->nspare_chunks * MFSQ_CHUNK_BYTES;
	st->pressure_events = q->c.pressure_events;
	st->map_trims = q->c.map_trims;
	st->meta_syncs = q->c.meta_syncs;
	st->acks_logged = q->c.acks_logged;
	st->ack_folds = q->c.ack_folds;
	st->acks_reaped = q->c.acks_reaped;
	st->coalesced_waits = q->c.coalesced;
	st->log_enqueued = q->c.log_enqueued;
	st->log_flushes = q->c.log_flushes;
	st->log_replayed = q->c.log_replayed;
	st->committer_turns = q->c.committer_turns;
	st->sizing_restores_est_milli = (uint64_t)(q->sizing_est * 1000.0);
	pthread_mutex_lock(&q->lock);
	for (uint32_t s = 0; s < q->cfg.nshards; s++)
		st->enqueue_rate += mfsq_rate_get(&q->shards[s].enq, now);
	for (mfsq_sub *sb = q->subs; sb; sb = sb->next)
		for (uint32_t s = 0; s < q->cfg.nshards; s++)
			st->dequeue_rate += mfsq_rate_get(&sb->rate[s], now);
	pthread_mutex_unlock(&q->lock);
	pthread_rwlock_unlock(&q->cache_lock);
}

