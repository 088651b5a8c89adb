/* SPDX-License-Identifier: MIT */
/*
 * mfsq_stats(): a snapshot of the queue's counters, of its shard records
 * (live subshards, pending delayed messages), of the cache's size and of
 * the measured rates.
 */
#include <string.h>

#include "internal.h"

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

			if (!mfsq_shard_row(q, txn, s, &ds)) { /* fields kept exact in the record */
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
