/* SPDX-License-Identifier: MIT */
/* Private structures of libmfsq, shared by its files. */
#ifndef MFSQ_INTERNAL_H
#define MFSQ_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>

#include "mfsq.h"
#include "format.h"

#define MFSQ_POLL_US	      1000 /* cross-process poll while waiting */
#define MFSQ_PROMOTE_BATCH    1024 /* delayed messages promoted per transaction */
#define MFSQ_SIZING_PERIOD_US 100000
#define MFSQ_SPIN_US	      50 /* spin.c: a waiter watches its word this long first */

/* rate.c: an event rate estimate (exponentially weighted over 100 ms windows). */
struct mfsq_rate {
	uint64_t t0_us;
	double count;
	double rate;
};
void mfsq_rate_add(struct mfsq_rate *r, double n, uint64_t now);
double mfsq_rate_get(const struct mfsq_rate *r, uint64_t now);

/* A cached message: header and payload in one allocation. */
struct mfsq_cmsg {
	uint64_t seq;
	size_t len;
	struct mfsq_disk_msg h;
	unsigned char data[];
};

/* Cached messages are carved out of chunks (one mapping of MFSQ_CHUNK_BYTES
 * per chunk, header included, not an allocation per message); a message
 * too large for a quarter chunk gets a malloc'ed chunk of its own. */
#define MFSQ_CHUNK_BYTES (64u << 10)
#define MFSQ_CHUNK_SPARE 32 /* free chunks always kept per queue (msgcache.c: spare_limit) */
struct mfsq_chunk {
	struct mfsq_chunk *next;
	size_t size, used;
	int mapped; /* a standard chunk, mapped by itself (msgcache.c) */
	_Alignas(16) unsigned char mem[];
};

/* A cached contiguous range [lo, hi) of one subshard. */
struct mfsq_centry {
	uint64_t sub_first;
	uint64_t lo;
	/* v[0 .. hi - lo) are readable under a shared hold of the cache lock:
	 * an append under one (msgcache.c) fills v[hi - lo] before it stores hi */
	_Atomic uint64_t hi;
	struct mfsq_cmsg **v; /* reallocated only under an exclusive hold */
	size_t cap;
	uint64_t bytes;		   /* appenders (see cache_lock) */
	struct mfsq_chunk *chunks; /* newest first; messages are carved from the head */
	_Atomic int pins;	   /* readers holding pointers into it (cache_lock) */
	struct mfsq_centry *next;
};

struct mfsq_dbi_slot {
	uint64_t first;
	MDB_dbi dbi;
};

/* Per-shard runtime state of this process. */
struct mfsq_shard_rt {
	MDB_dbi delay; /* valid once used */
	/* delay, tail and spare handles opened, the layout made: every shard
	 * at open, or with MFSQ_LAZY_SHARDS those mfsq_shard_use() named
	 * (set once, after the transaction that opened them committed) */
	_Atomic int used;
	struct mfsq_dbi_slot *dbis; /* committed subshard handles, sorted by first */
	unsigned ndbis, capdbis;
	_Atomic uint64_t min_due; /* last seen in the store */
	_Atomic uint64_t tail_first;
	_Atomic uint64_t next_seq;
	struct mfsq_rate enq;	   /* under q->lock */
	/* the shard record as the last caller's transaction that enqueued
	 * here wrote it, and that transaction's id (0: none); written and
	 * read only inside write transactions (LMDB's writer lock orders
	 * them), trusted by the next one only (put.c) */
	struct mfsq_disk_shard wst;
	uint64_t wst_txnid;
	uint64_t wst_stored_next; /* next_seq in the record that transaction left */
	struct mfsq_centry *cache; /* q->cache_lock: read shared, changed exclusive */
	/* memory-only messages [bfirst, bfirst + bn), ring, q->cache_lock as cache */
	struct mfsq_cmsg **bring;
	size_t bcap, bhead, bn;
	uint64_t bfirst, blast_us, bbytes;
};

struct mfsq_counters {
	_Atomic uint64_t enqueued, dequeued, acked, batches;
	_Atomic uint64_t sub_created, sub_dropped;
	_Atomic uint64_t delayed_enqueued, delayed_promoted;
	_Atomic uint64_t lateness_max, late_hist[64];
	_Atomic uint64_t expired, filtered, lagging;
	_Atomic uint64_t hits, misses, restores, evictions, prefetches;
	_Atomic uint64_t store_only, pressure_events;
	_Atomic uint64_t buffered, spilled, bdropped, groups, maint_errors;
	_Atomic uint64_t map_trims, meta_syncs, committer_turns;
	_Atomic uint64_t acks_logged, ack_folds, acks_reaped, coalesced;
	_Atomic uint64_t log_enqueued, log_flushes, log_replayed;
};

struct mfsq_queue {
	MDB_env *env;
	_Atomic uint64_t committed_txnid; /* mfsq_txn_committed(): the last one told */
	_Atomic uint64_t map_commits; /* own commits, for mfsq_map_check */
	_Atomic uint64_t map_trimmed_us; /* mfsq_mono_us() of the last trim */
	char name[MFSQ_NAME_MAX + 1];
	struct mfsq_config cfg;
	MDB_dbi meta, exc;
	struct mfsq_shard_rt *shards;
	int lazy; /* MFSQ_LAZY_SHARDS */

	/* Readers of subshard databases hold it shared; a drop holds it
	 * exclusively (mdb_drop closes the handle at once). Taken only after
	 * the LMDB write lock. */
	pthread_rwlock_t droplock;
	pthread_mutex_t dbi_lock; /* the shards' dbis arrays */

	/* The subs list (changed under cache_lock exclusive too: walking it
	 * needs either), the wait generation, the rates (shards' enq,
	 * subscribers' rate[]), peak_lag[] and avg_msg_bytes. Short holds;
	 * taken inside cache_lock, never the other way round. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic uint64_t gen; /* written under lock, read by spinners without it */
	struct mfsq_sub *subs;

	/*
	 * The cache lock, writer-preferring, never taken twice by a thread.
	 * Shared: finding and reading cached messages and memory-only rings
	 * (the dequeue's merge copies them out), pinning and unpinning entries
	 * (pins is atomic), a subscriber's own bpos[]; with append_lock too,
	 * appending to an existing entry that has room in v (hi is stored
	 * last), carving from its chunks and the spare chunks. Exclusive:
	 * everything else that changes an entry or a shard's entry list (new
	 * entries, growing v, loads, eviction, shrinking, freeing), the
	 * memory-only rings, cache_target and the sizing state, the subs list
	 * (with lock). An entry with pins > 0 is never freed, so a pinned
	 * message stays valid while its reader moves from a shared to an
	 * exclusive hold. cache_bytes and nspare_chunks are atomic: shared
	 * holders read them while an appender changes them.
	 */
	pthread_rwlock_t cache_lock;
	pthread_mutex_t append_lock; /* appenders under a shared cache_lock */
	_Atomic uint64_t cache_bytes;
	uint64_t cache_target;
	struct mfsq_chunk *spare_chunks; /* MFSQ_CHUNK_BYTES each (cache_lock) */
	_Atomic unsigned nspare_chunks;
	_Atomic uint64_t next_sizing_us; /* written under cache_lock */
	double avg_msg_bytes;		 /* under lock */
	double sizing_est;
	_Atomic int in_pressure; /* written under cache_lock */

	/* group commit of concurrent own-transaction enqueues (groupcommit.c) */
	pthread_mutex_t glock;
	struct mfsq_greq *ghead, **gtail, *gwait;
	int gleader;
	int glarge;  /* the last turn wrote large values (groupcommit.c: hand_over) */
	int ghanded; /* the flusher is to lead the queued turns (hand_over) */
	/* deferred meta sync (MDB_NOMETASYNC): groups committed, groups known
	 * durable, and the range a failed mdb_env_sync() left in doubt */
	uint64_t gcommitted, gsynced, gerr_from, gerr_upto;
	int gerr;
	/* a leader's turn (commit and sync), moving average in µs: waiters
	 * spin only when it is short (spin.c) */
	_Atomic uint64_t gturn_us;
	/* mfsq_wake() (wake.c): when it last woke, and the moving average of the gaps
	 * (µs, monotonic); coalesce.c: coalesced waiting */
	_Atomic uint64_t wake_us, wake_gap_us;

	_Atomic uint64_t next_retention_us;
	_Atomic uint64_t maint_retry_us; /* after a failed maintenance */
	_Atomic int last_maint_error;
	_Atomic int retention_due;

	/* the ack log (acklog.c); ackfd -1: none */
	int ackfd;
	unsigned char *ackmap;
	size_t ackstride;
	pthread_mutex_t acklock;
	uint64_t ackowned; /* slots this process holds, under acklock */
	char boot_id[MFSQ_BOOT_ID_LEN];

	/* the enqueue log (enqlog.c), all under glock; logfd -1: none */
	int logfd;
	unsigned logi;
	unsigned char *logmap;
	uint64_t log_head, log_next_lsn;   /* where the next record goes */
	uint64_t log_taken, log_taken_lsn; /* after the records a turn took */
	uint64_t log_tail, log_tail_lsn;   /* the first record not committed */
	uint64_t log_used;		   /* bytes from tail to head (wrap waste included) */
	uint32_t *log_pending;		   /* records not committed, per shard */
	int log_err;			   /* the last flush failed with it */
	struct mfsq_msg_in *log_m;	   /* the records of a turn */
	size_t log_mcap;
	struct mfsq_put *log_puts;
	size_t log_putcap;
	/* its flusher thread (groupcommit.c), started at the first hand-over */
	pthread_t log_thread;
	pthread_cond_t log_cv;
	int log_thread_on, log_stop, log_sleeping;
	struct mfsq_counters c;
};

struct mfsq_sub {
	mfsq_queue *q;
	char name[MFSQ_NAME_MAX + 1];
	unsigned flags;
	mfsq_filter_fn *filter;
	void *arg;
	struct mfsq_rule *rule; /* NULL: none */
	_Atomic uint64_t *pos;	/* next seq to read, per shard */
	uint64_t *bpos;		/* next buffered seq to read (q->cache_lock: see there) */
	uint64_t *acked;	/* next seq not acknowledged, per shard */
	struct mfsq_rate *rate; /* dequeue rate per shard (under q->lock) */
	double *peak_lag;	/* per shard (under q->lock) */
	int lagging;
	MDB_txn *rtxn;	      /* a reset read transaction, renewed by the next dequeue */
	int slot;	      /* its ack log slot, -1: none (acklog.c) */
	int logged;	      /* it had one: acked[] may be ahead of its record */
	uint64_t fold_due_us; /* positions in the slot only: fold them by then; 0: none */
	unsigned char *buf;   /* payload copies of the last dequeue */
	size_t buflen, bufcap;
	struct mfsq_sub *next;
};

/*
 * Low helpers. Each of these files calls no other file of the library (wake.c
 * calls only the clock, config.c only record.c), so every other file may
 * call them.
 */
/* clock.c: wall time (stored with messages) and monotonic time, in µs */
uint64_t mfsq_now_us(void);
uint64_t mfsq_mono_us(void);
/* error.c: the errno boundary, the one place LMDB codes become the queue's
 * codes (mfsq.h, "Errors"): every public function returns through it. */
int mfsq_lmdb_err(int rc);
/* rtxn.c: a read transaction, renewing the reset one in *@spare if there is
 * one (NULL @spare: a plain one); _end resets it into *@spare if that is
 * empty, else aborts it. */
int mfsq_rtxn_begin(mfsq_queue *q, MDB_txn **spare, MDB_txn **txn);
void mfsq_rtxn_end(MDB_txn **spare, MDB_txn *txn);
/* lateness.c: the lateness histogram of promoted delayed messages */
void mfsq_late_record(mfsq_queue *q, uint64_t late_us);
uint64_t mfsq_late_pct(mfsq_queue *q, double p); /* @p in 0..1 */
/* record.c: fixed-size meta records: the value at @key into @out, exactly
 * @size bytes; MDB_NOTFOUND, EBADMSG (another size). The shard state
 * records through it: _row reads one as stored, its per-message fields
 * possibly behind its tail (shardstate.c says what is exact). */
int mfsq_record_get(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, void *out, size_t size);
void mfsq_shard_key(unsigned char k[5], uint32_t s);
int mfsq_shard_row(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st);
/* floor.c: the retention floor of shard s (0: none) */
int mfsq_floor_get(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t *floor);
int mfsq_write_shard(mfsq_queue *q, MDB_txn *txn, uint32_t s, const struct mfsq_disk_shard *st);
/* msgrec.c: the one decoder of message records (format.h). _decode: the
 * value @val (a subshard's or a delay shard's; an exception's with @skip
 * EXC_HDR) into its header @h, payload @data (in @val, may be NULL) and
 * its length @len; EBADMSG when @val is shorter than @skip plus the header
 * or the header has a priority or flags no enqueue writes. _index_id: the
 * id of a subshard index row; EBADMSG when the value is not 8 bytes. */
int mfsq_msg_decode(const MDB_val *val, size_t skip, struct mfsq_disk_msg *h,
		    const unsigned char **data, size_t *len);
int mfsq_index_id(const MDB_val *val, uint64_t *id);
/* envfile.c: path of the queue's own file `mfsq-<name><suffix>` next to the
 * environment's data file (in its directory; with MDB_NOSUBDIR, next to
 * the file). EINVAL (no path), ENAMETOOLONG. */
int mfsq_env_file(mfsq_queue *q, const char *suffix, char *buf, size_t len);
/* wake.c: wake this process's waiting subscribers (mfsq_notify() too) */
void mfsq_wake(mfsq_queue *q);
/* affinity.c: mfsq_shard_of() and mfsq_enqueuer_in_shard() (mfsq.h) */

/* config.c: checks and the stored record ('C'); _get: MDB_NOTFOUND,
 * EBADMSG (size); _load: as _get, MDB_VERSION_MISMATCH (a version
 * outside MFSQ_FORMAT_OLDEST..MFSQ_FORMAT_VERSION, checked first),
 * EBADMSG (a value out of mfsq_config_valid()'s ranges), else
 * q->cfg holds the stored configuration (unchanged on error); _store: a
 * new queue's (MDB_NOOVERWRITE). */
int mfsq_config_valid(const struct mfsq_config *c);
int mfsq_config_get(mfsq_queue *q, MDB_txn *txn, struct mfsq_disk_config *dc);
int mfsq_config_load(mfsq_queue *q, MDB_txn *txn);
int mfsq_config_store(mfsq_queue *q, MDB_txn *txn);
/* An older version's record (checked by _load) marked as this version's. */
int mfsq_config_upgrade(mfsq_queue *q, MDB_txn *txn);

/* maintenance.c: before a dequeue's read, promotion and retention when due
 * (failures counted in mfsq_stats() and retried 100 ms later), cache sizing
 * and prefetch (@spare as for mfsq_rtxn_begin()). */
void mfsq_housekeeping(mfsq_queue *q, uint64_t now, MDB_txn **spare);

/* A stored message's public form: every field from its header @h, data NULL. */
static inline void mfsq_msg_from_disk(struct mfsq_msg *m, uint32_t shard, uint64_t seq,
				      const struct mfsq_disk_msg *h, size_t len)
{
	*m = (struct mfsq_msg){.shard = shard, .seq = seq, .len = len};
	m->enqueue_us = h->enq_us;
	m->deliver_us = h->dlv_us;
	m->expire_us = h->exp_us;
	m->enqueuer = h->enqueuer;
	m->prio = h->prio;
	m->flags = h->flags;
	m->tag = h->tag;
}

/* Internal: restart the transaction (a handle is newer than it). */
#define MFSQ_RETRY (-30601)

/* dbi.c */
extern pthread_mutex_t mfsq_dbi_global;
struct mfsq_wtx {
	MDB_txn *txn;
	int own, maint, glocked;
	struct {
		uint32_t s;
		uint64_t id;
		MDB_dbi dbi;
	} * pend;
	unsigned npend, cappend;
	/* the handle last resolved (enqueues of a batch share a tail) */
	int has_last;
	uint32_t last_s;
	uint64_t last_id;
	MDB_dbi last_dbi;
	/* the shards mfsq_put_msgs() loaded lie in [ld_lo, ld_hi): the loops
	 * after it skip the others (a queue of many shards, one written), and
	 * the loaded array is read only there (put.c: cover) */
	uint32_t ld_lo, ld_hi;
};
void mfsq_subshard_name(const mfsq_queue *q, uint32_t s, uint64_t id, char *buf, size_t len);
void mfsq_subshard_remember(mfsq_queue *q, uint32_t s, uint64_t id, MDB_dbi dbi);
void mfsq_subshard_forget(mfsq_queue *q, uint32_t s, uint64_t id);
int mfsq_dbi_get(mfsq_queue *q, uint32_t s, uint64_t id, MDB_dbi *dbi);
int mfsq_dbi_for(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t id, MDB_dbi *dbi);
int mfsq_wtx_begin(mfsq_queue *q, MDB_txn *caller, int maint, struct mfsq_wtx *w);
int mfsq_wtx_subshard(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, uint64_t id, int create,
		      MDB_dbi *dbi);
int mfsq_wtx_end(mfsq_queue *q, struct mfsq_wtx *w, int rc);
/* lifetime.c: is shard @s open here (its delay handle valid, enqueues and
 * promotions allowed)? */
static inline int mfsq_shard_used(mfsq_queue *q, uint32_t s)
{
	return atomic_load(&q->shards[s].used);
}
void mfsq_wtx_forget(struct mfsq_wtx *w, uint32_t s, uint64_t id);
unsigned mfsq_dbi_count_below(mfsq_queue *q, uint32_t s, uint64_t id);
void mfsq_dbi_close_below(mfsq_queue *q, uint32_t s, uint64_t id);

/* subshard.c */
int mfsq_subshard_spare(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st);
int mfsq_subshard_roll(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st);
int mfsq_subshard_locate(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t seq, uint64_t *first,
			 uint64_t *id, uint64_t *end);
int mfsq_subshard_index_put(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t first, uint64_t id);
int mfsq_retention(mfsq_queue *q);

/* shardstate.c: a shard's state as it is now (its record caught up with
 * its tail's messages). The record may lag by up to MFSQ_STATE_LAG
 * messages; every other field is exact. _catch_up: advance @st over the
 * messages of @tail (its tail's handle) from st->next_seq on; tail_bytes
 * too if @bytes (a walk over them, for writers). _read_w: in a write
 * transaction, exact, *@stored_next (may be NULL) the record's own
 * next_seq; MFSQ_RETRY (own) or EAGAIN (a caller's) when the tail's
 * handle is newer than the transaction (as mfsq_wtx_subshard). _read_r:
 * in a read transaction (q->droplock held shared), tail_bytes not caught
 * up; MFSQ_RETRY with *@rid the tail's id to resolve (mfsq_dbi_get, after
 * ending @txn) before trying again. _read_rtxn: in a read transaction of
 * its own, resolving as it needs. Errors: LMDB's, EBADMSG (a damaged
 * record, tail or message header). */
#define MFSQ_STATE_LAG 256
int mfsq_shard_catch_up(MDB_txn *txn, MDB_dbi tail, struct mfsq_disk_shard *st, int bytes);
int mfsq_shard_read_w(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, struct mfsq_disk_shard *st,
		      uint64_t *stored_next);
int mfsq_shard_read_r(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st,
		      uint64_t *rid);
int mfsq_shard_read_rtxn(mfsq_queue *q, uint32_t s, struct mfsq_disk_shard *st);

/* stream.c: append p (shard, header, payload) to its shard's stream in @w,
 * rolling a full tail; sets p->seq and p->sub_first, advances *@st. */
struct mfsq_put {
	uint32_t shard;
	uint64_t seq;
	uint64_t sub_first;
	struct mfsq_disk_msg h;
	const void *data;
	size_t len;
};
int mfsq_stream_put(mfsq_queue *q, struct mfsq_wtx *w, struct mfsq_disk_shard *st,
		    struct mfsq_put *p);

/* put.c: write m[0..n) in @w (stream or delay shard), the shard records
 * loaded into ls[] (one per shard) after; after an own commit,
 * mfsq_put_committed() updates runtime state, cache and waiters. */
struct mfsq_loaded {
	int loaded;
	struct mfsq_disk_shard st;
	struct mfsq_disk_shard st0; /* as loaded: a field but the per-message ones changed? */
	uint64_t stored_next;	    /* next_seq in the stored record (shardstate.c) */
};
int mfsq_put_msgs(mfsq_queue *q, struct mfsq_wtx *w, const struct mfsq_msg_in *m, size_t n,
		  uint64_t *seqs, struct mfsq_put *puts, size_t *nputs, struct mfsq_loaded *ls);
int mfsq_put_states(mfsq_queue *q, struct mfsq_wtx *w, struct mfsq_loaded *ls);
/* After mfsq_put_states() in a caller's transaction: remember (ok) or
 * forget (!ok) the shard records it wrote, for the next transaction. */
void mfsq_put_remember(mfsq_queue *q, const struct mfsq_wtx *w, const struct mfsq_loaded *ls,
		       int ok);
void mfsq_put_committed(mfsq_queue *q, const struct mfsq_wtx *w, const struct mfsq_loaded *ls,
			const struct mfsq_put *puts, size_t nputs);

/* groupcommit.c */
struct mfsq_greq;
typedef int mfsq_group_fn(mfsq_queue *q, struct mfsq_wtx *w, void *arg);
int mfsq_group_enqueue(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n, uint64_t *seqs);
/* Run @op in a grouped own write transaction (it may run again on MFSQ_RETRY). */
int mfsq_group_op(mfsq_queue *q, mfsq_group_fn *op, void *arg);

/* delay.c */
int mfsq_delay_put(mfsq_queue *q, MDB_txn *txn, uint32_t s, struct mfsq_disk_shard *st,
		   const struct mfsq_disk_msg *h, const void *data, size_t len);
int mfsq_delay_promote(mfsq_queue *q);
int mfsq_delay_promote_loaded(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s,
			      struct mfsq_disk_shard *st, uint64_t now);
uint64_t mfsq_delay_next_due(mfsq_queue *q);

/* rule.c: compiled rules of rule-based subscribers */
struct mfsq_rule;
int mfsq_rule_compile(const char *text, struct mfsq_rule **out, char *why, size_t whylen);
void mfsq_rule_free(struct mfsq_rule *r);
const char *mfsq_rule_text(const struct mfsq_rule *r);
int mfsq_rule_trivial(const struct mfsq_rule *r); /* "true": takes everything */
int mfsq_rule_match(const struct mfsq_rule *r, const struct mfsq_msg *m, uint64_t now);

/* exception.c */
int mfsq_exception_put(mfsq_queue *q, MDB_txn *txn, char origin, uint32_t s, uint64_t seq,
		       int reason, const struct mfsq_disk_msg *h, const void *data, size_t len);

/* msgcache.c (all under q->cache_lock exclusive unless said; find and unpin: shared) */
void mfsq_cache_append(mfsq_queue *q, const struct mfsq_put *p, size_t n); /* takes the lock */
struct mfsq_cmsg *mfsq_cache_find(mfsq_queue *q, uint32_t s, uint64_t seq,
				  struct mfsq_centry **pin);
void mfsq_cache_unpin(struct mfsq_centry **pin);
int mfsq_cache_load(mfsq_queue *q, MDB_cursor *c, uint32_t s, uint64_t sub_first, uint64_t pos,
		    uint64_t end, int restore);
void mfsq_cache_shrink(mfsq_queue *q); /* takes the lock */
void mfsq_cache_shrink_locked(mfsq_queue *q);
int mfsq_cache_shrink_due(mfsq_queue *q); /* shared hold: would the above free anything? */
void mfsq_cache_free_all(mfsq_queue *q);
void mfsq_cache_sizing(mfsq_queue *q, uint64_t now);
/* takes the locks it needs; @spare as for mfsq_rtxn_begin() */
void mfsq_cache_prefetch(mfsq_queue *q, uint64_t now, MDB_txn **spare);
int mfsq_cache_enabled(mfsq_queue *q);

/* buffered.c (under q->cache_lock unless said: _at, _end, _first shared) */
int mfsq_buffered_put(mfsq_queue *q, const struct mfsq_msg_in *m, uint64_t *seq); /* takes it */
struct mfsq_cmsg *mfsq_buffered_at(mfsq_queue *q, uint32_t s, uint64_t bseq);
uint64_t mfsq_buffered_end(mfsq_queue *q, uint32_t s);
uint64_t mfsq_buffered_first(mfsq_queue *q, uint32_t s);
void mfsq_buffered_trim(mfsq_queue *q);
void mfsq_buffered_free_all(mfsq_queue *q);

/* pressure.c */
uint64_t mfsq_budget_bytes(void);
void mfsq_budget_add(int64_t delta);
uint64_t mfsq_budget_used(void);
void mfsq_spare_add(int64_t delta); /* free cache chunks of all queues */
uint64_t mfsq_spare_used(void);

/* spin.c: watch @word while it equals @old, for up to @max_us, if a CPU is
 * free for it; 1 when it changed. The caller re-checks under its lock. */
int mfsq_spin_while(const _Atomic uint64_t *word, uint64_t old, uint64_t max_us);
/* How long a waiter of @q should spin: MFSQ_SPIN_US while its group commits
 * take less than that (no sync), else 0. */
uint64_t mfsq_spin_us(mfsq_queue *q);
/* A thread enters (+1) or leaves (-1) a queue call or a sleep in one (-1
 * before sleeping, +1 after): spinners count who needs a CPU. */
void mfsq_active(int delta);

/* subscriber.c: fold positions held only in the ack log into the store
 * (s->fold_due_us); 0 or the commit's error (counted; retried later). */
int mfsq_sub_fold(mfsq_sub *s);

/* acklog.c: acknowledgements of MDB_NOSYNC environments in a shared
 * mapping, folded into the store later. No log (ackfd -1) is no error. */
#define MFSQ_ACK_FOLD_US 100000 /* a position stays in the slot only this long */
void mfsq_acklog_open(mfsq_queue *q);
void mfsq_acklog_close(mfsq_queue *q);
/* Whether acks of own transactions go to the log now (the environment's
 * flags are read each time: MDB_NOSYNC can be switched). */
int mfsq_acklog_relaxed(mfsq_queue *q);
/* In a write transaction: fold the slots of dead processes into their
 * subscribers' records; *reaped: the slots to clear after the commit. */
int mfsq_acklog_reap(mfsq_queue *q, MDB_txn *txn, uint64_t *reaped);
void mfsq_acklog_reaped(mfsq_queue *q, uint64_t reaped, int committed);
void mfsq_acklog_claim(mfsq_sub *s); /* s->slot: a slot holding s->acked, or -1 */
void mfsq_acklog_write(mfsq_sub *s); /* s->acked into its slot */
/* Give the slot up; @folded: the store holds its positions (else a later
 * reap folds them). */
void mfsq_acklog_release(mfsq_sub *s, int folded);

/* enqlog.c: own-transaction enqueues of MDB_NOSYNC environments in a
 * shared log, moved into the store by group turns (groupcommit.c). */
void mfsq_enqlog_open(mfsq_queue *q); /* reaps dead processes' logs, takes one */
void mfsq_enqlog_close(mfsq_queue *q);
void mfsq_enqlog_reap(mfsq_queue *q); /* logs nobody holds: into the store */
int mfsq_enqlog_relaxed(mfsq_queue *q);
/* Under glock: 0 when m[0..n) are in the log, else -1 (use a commit). */
int mfsq_enqlog_put_locked(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n);
int mfsq_enqlog_dirty(const mfsq_queue *q); /* records no turn has taken (glock) */
/* Under glock: take back the records of a call appended at (@lsn, @head,
 * @used) up to @end_lsn when its own turn failed and nothing follows them;
 * 0 done (the call returns the error), -1 they stay (the call returns 0). */
int mfsq_enqlog_unput_locked(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n, uint64_t lsn,
			     uint64_t head, uint64_t used, uint64_t end_lsn);
/* Under glock: the records for this turn, up to (*end_lsn, *end_off). */
size_t mfsq_enqlog_take_locked(mfsq_queue *q, const struct mfsq_msg_in **m, struct mfsq_put **puts,
			       uint64_t *end_lsn, uint64_t *end_off);
/* In the turn's transaction: the store has the records before (lsn, off). */
int mfsq_enqlog_mark(mfsq_queue *q, MDB_txn *txn, unsigned i, uint64_t next_lsn, uint64_t off);
/* Under glock, after the turn: committed (rc 0) or to be taken again. */
void mfsq_enqlog_done_locked(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n, uint64_t end_lsn,
			     uint64_t end_off, int rc);
int mfsq_enqlog_pending_locked(const mfsq_queue *q, uint32_t shard);
/* groupcommit.c: stop the flusher and commit what the log still holds (close). */
void mfsq_group_close(mfsq_queue *q);

/* coalesce.c: while this process's commits wake subscribers more often
 * than every MFSQ_COALESCE_GAP_US, a subscriber finding nothing sleeps
 * MFSQ_COALESCE_US instead of waiting to be woken by the next one. */
#define MFSQ_COALESCE_GAP_US 50
#define MFSQ_COALESCE_US     50
/* The decision alone (pure): the sleep in µs, or 0 to wait for a wake-up.
 * @gap_us: average gap between wake-ups; @since_us: since the last one;
 * @left_us: until the waiter must be back (deadline, poll, due time). */
uint64_t mfsq_coalesce_us(uint64_t gap_us, uint64_t since_us, uint64_t left_us);
/* 1 if it slept (then read again), 0: wait for a wake-up. */
int mfsq_coalesce(mfsq_queue *q, uint64_t left_us);

/* After an own commit: keep the map's resident pages under the budget (maptrim.c). */
void mfsq_map_check(mfsq_queue *q);

#endif /* MFSQ_INTERNAL_H */
