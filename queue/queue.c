/* SPDX-License-Identifier: MIT */
/* Queue lifetime, configuration, shard state records, statistics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

uint64_t mfsq_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Read transactions of a subscriber are reset and renewed, not begun anew:
 * mdb_txn_begin() callocs a transaction sized by maxdbs (about 200 KB with
 * thousands of databases), on every dequeue. A reset transaction keeps its
 * reader slot. @spare holds the reset one (or NULL); NULL @spare: plain.
 */
int mfsq_rtxn_begin(mfsq_queue *q, MDB_txn **spare, MDB_txn **txn)
{
	if (spare && *spare) {
		*txn = *spare;
		*spare = NULL;
		if (!mdb_txn_renew(*txn))
			return 0;
		mdb_txn_abort(*txn);
	}
	return mdb_txn_begin(q->env, NULL, MDB_RDONLY, txn);
}

void mfsq_rtxn_end(MDB_txn **spare, MDB_txn *txn)
{
	if (!spare || *spare) {
		mdb_txn_abort(txn);
		return;
	}
	mdb_txn_reset(txn);
	*spare = txn;
}

/* The one place LMDB codes become queue codes. */
int mfsq_env_file(mfsq_queue *q, const char *suffix, char *buf, size_t len)
{
	const char *path = NULL;
	unsigned fl = 0;

	if (mdb_env_get_path(q->env, &path) || !path)
		return EINVAL;
	mdb_env_get_flags(q->env, &fl);
	int n = snprintf(buf, len, "%s%smfsq-%s%s", path, (fl & MDB_NOSUBDIR) ? "-" : "/", q->name,
			 suffix);
	return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}

int mfsq_lmdb_err(int rc)
{
	if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
		return ENOSPC;
	return rc;
}

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

uint32_t mfsq_shard_of(const mfsq_queue *q, uint64_t enqueuer)
{
	/* splitmix64 finaliser: neighbouring ids spread over the shards */
	uint64_t z = enqueuer + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint32_t)(z % q->cfg.nshards);
}

uint64_t mfsq_enqueuer_in_shard(const mfsq_queue *q, uint32_t shard, uint64_t n)
{
	if (shard >= q->cfg.nshards)
		return UINT64_MAX;
	for (uint64_t id = 0;; id++)
		if (mfsq_shard_of(q, id) == shard && n-- == 0)
			return id;
}

void mfsq_wake(mfsq_queue *q)
{
	uint64_t now = mfsq_mono_us(), last = atomic_exchange(&q->wake_us, now);
	uint64_t gap = now > last ? now - last : 0;

	/* racing wakers may mix their updates: it is an estimate */
	atomic_store(&q->wake_gap_us, (atomic_load(&q->wake_gap_us) * 7 + gap) / 8);
	pthread_mutex_lock(&q->lock);
	atomic_fetch_add(&q->gen, 1);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void mfsq_notify(mfsq_queue *q)
{
	mfsq_wake(q);
}

int mfsq_tick(mfsq_queue *q)
{
	int rc = mfsq_delay_promote(q);

	if (!rc)
		rc = mfsq_retention(q);
	return rc;
}

void mfsq_late_record(mfsq_queue *q, uint64_t late_us)
{
	unsigned b = 0;

	while (b < 63 && (1ull << b) <= late_us)
		b++;
	atomic_fetch_add(&q->c.late_hist[b], 1);
	uint64_t m = atomic_load(&q->c.lateness_max);
	while (late_us > m && !atomic_compare_exchange_weak(&q->c.lateness_max, &m, late_us))
		;
}

static uint64_t late_pct(mfsq_queue *q, double p)
{
	uint64_t tot = 0, acc = 0;

	for (int b = 0; b < 64; b++)
		tot += atomic_load(&q->c.late_hist[b]);
	if (!tot)
		return 0;
	for (int b = 0; b < 64; b++) {
		acc += atomic_load(&q->c.late_hist[b]);
		if ((double)acc >= p * (double)tot) {
			uint64_t ub = b ? (1ull << b) - 1 : 0; /* bucket's upper bound */
			uint64_t mx = atomic_load(&q->c.lateness_max);

			return ub < mx ? ub : mx;
		}
	}
	return atomic_load(&q->c.lateness_max);
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
	st->lateness_p50_us = late_pct(q, 0.5);
	st->lateness_p99_us = late_pct(q, 0.99);
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

const char *mfsq_strerror(int rc)
{
	if (rc == MFSQ_LAGGED)
		return "MFSQ_LAGGED: subscriber fell behind the retention limit";
	if (rc < 0)
		return mdb_strerror(rc);
	return strerror(rc);
}
