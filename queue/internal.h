/* SPDX-License-Identifier: MIT */
/* Private structures of libmfsq, shared by its files. */
#ifndef MQ_INTERNAL_H
#define MQ_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>

#include "mfsq.h"
#include "format.h"

#define MQ_POLL_US	    1000 /* cross-process poll while waiting */
#define MQ_PROMOTE_BATCH    1024 /* delayed messages promoted per transaction */
#define MQ_SIZING_PERIOD_US 100000
#define MQ_SPIN_US	    50 /* spin.c: a waiter watches its word this long first */

/* rate.c: an event rate estimate (exponentially weighted over 100 ms windows). */
struct mq_rate {
	uint64_t t0_us;
	double count;
	double rate;
};
void mq_rate_add(struct mq_rate *r, double n, uint64_t now);
double mq_rate_get(const struct mq_rate *r, uint64_t now);

/* A cached message: header and payload in one allocation. */
struct mq_cmsg {
	uint64_t seq;
	size_t len;
	struct mq_disk_msg h;
	unsigned char data[];
};

/* Cached messages are carved out of chunks (one mapping of MQ_CHUNK_BYTES
 * per chunk, header included, not an allocation per message); a message
 * too large for a quarter chunk gets a malloc'ed chunk of its own. */
#define MQ_CHUNK_BYTES (64u << 10)
#define MQ_CHUNK_SPARE 32 /* free chunks always kept per queue (cache.c: spare_limit) */
struct mq_chunk {
	struct mq_chunk *next;
	size_t size, used;
	int mapped; /* a standard chunk, mapped by itself (cache.c) */
	_Alignas(16) unsigned char mem[];
};

/* A cached contiguous range [lo, hi) of one subshard. */
struct mq_centry {
	uint64_t sub_first;
	uint64_t lo, hi;
	struct mq_cmsg **v;
	size_t cap;
	uint64_t bytes;
	struct mq_chunk *chunks; /* newest first; messages are carved from the head */
	int pins;		 /* readers holding pointers into it */
	struct mq_centry *next;
};

struct mq_dbi_slot {
	uint64_t first;
	MDB_dbi dbi;
};

/* Per-shard runtime state of this process. */
struct mq_shard_rt {
	MDB_dbi delay;
	struct mq_dbi_slot *dbis; /* committed subshard handles, sorted by first */
	unsigned ndbis, capdbis;
	_Atomic uint64_t min_due; /* last seen in the store */
	_Atomic uint64_t tail_first;
	_Atomic uint64_t next_seq;
	struct mq_rate enq;	 /* under q->cache_lock */
	struct mq_centry *cache; /* under q->cache_lock */
	/* memory-only messages [bfirst, bfirst + bn), ring, under q->cache_lock */
	struct mq_cmsg **bring;
	size_t bcap, bhead, bn;
	uint64_t bfirst, blast_us, bbytes;
};

struct mq_counters {
	_Atomic uint64_t enqueued, dequeued, acked, batches;
	_Atomic uint64_t sub_created, sub_dropped;
	_Atomic uint64_t delayed_enqueued, delayed_promoted;
	_Atomic uint64_t lateness_max, late_hist[64];
	_Atomic uint64_t expired, filtered, lagging;
	_Atomic uint64_t hits, misses, restores, evictions, prefetches;
	_Atomic uint64_t store_only, pressure_events;
	_Atomic uint64_t buffered, spilled, bdropped, groups, maint_errors;
	_Atomic uint64_t map_trims, meta_syncs;
	_Atomic uint64_t acks_logged, ack_folds, acks_reaped, coalesced;
	_Atomic uint64_t log_enqueued, log_flushes, log_replayed;
};

struct mq_queue {
	MDB_env *env;
	_Atomic uint64_t map_commits; /* own commits, for mq_map_check */
	char name[MQ_NAME_MAX + 1];
	struct mq_config cfg;
	MDB_dbi meta, exc;
	struct mq_shard_rt *shards;

	/* Readers of subshard databases hold it shared; a drop holds it
	 * exclusively (mdb_drop closes the handle at once). Taken only after
	 * the LMDB write lock. */
	pthread_rwlock_t droplock;
	pthread_mutex_t dbi_lock; /* the shards' dbis arrays */

	pthread_mutex_t lock; /* subs list, wait generation */
	pthread_cond_t cond;
	_Atomic uint64_t gen; /* written under lock, read by spinners without it */
	struct mq_sub *subs;

	pthread_mutex_t cache_lock; /* cache entries, rates, sizing */
	uint64_t cache_bytes, cache_target;
	struct mq_chunk *spare_chunks; /* MQ_CHUNK_BYTES each, under cache_lock */
	unsigned nspare_chunks;
	_Atomic uint64_t next_sizing_us; /* written under cache_lock */
	double avg_msg_bytes;
	double sizing_est;
	_Atomic int in_pressure; /* written under cache_lock */

	/* group commit of concurrent own-transaction enqueues (group.c) */
	pthread_mutex_t glock;
	struct mq_greq *ghead, **gtail, *gwait;
	int gleader;
	int glarge; /* the last turn wrote large values (group.c: submit) */
	/* deferred meta sync (MDB_NOMETASYNC): groups committed, groups known
	 * durable, and the range a failed mdb_env_sync() left in doubt */
	uint64_t gcommitted, gsynced, gerr_from, gerr_upto;
	int gerr;
	/* a leader's turn (commit and sync), moving average in µs: waiters
	 * spin only when it is short (spin.c) */
	_Atomic uint64_t gturn_us;
	/* mq_wake(): when it last woke, and the moving average of the gaps
	 * (µs, monotonic); dequeue.c: coalesced waiting */
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
	char boot_id[MQ_BOOT_ID_LEN];

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
	struct mq_msg_in *log_m;	   /* the records of a turn */
	size_t log_mcap;
	struct mq_put *log_puts;
	size_t log_putcap;
	/* its flusher thread (group.c), started at the first hand-over */
	pthread_t log_thread;
	pthread_cond_t log_cv;
	int log_thread_on, log_stop, log_sleeping;
	struct mq_counters c;
};

struct mq_sub {
	mq_queue *q;
	char name[MQ_NAME_MAX + 1];
	unsigned flags;
	mq_filter_fn *filter;
	void *arg;
	struct mq_rule *rule;  /* NULL: none */
	_Atomic uint64_t *pos; /* next seq to read, per shard */
	uint64_t *bpos;	       /* next buffered seq to read (under q->cache_lock) */
	uint64_t *acked;       /* next seq not acknowledged, per shard */
	struct mq_rate *rate;  /* dequeue rate per shard (under q->cache_lock) */
	double *peak_lag;      /* per shard (under q->cache_lock) */
	int lagging;
	MDB_txn *rtxn;	      /* a reset read transaction, renewed by the next dequeue */
	int slot;	      /* its ack log slot, -1: none (acklog.c) */
	int logged;	      /* it had one: acked[] may be ahead of its record */
	uint64_t fold_due_us; /* positions in the slot only: fold them by then; 0: none */
	unsigned char *buf;   /* payload copies of the last dequeue */
	size_t buflen, bufcap;
	struct mq_sub *next;
};

/* queue.c */
uint64_t mq_now_us(void);
int mq_lmdb_err(int rc);
void mq_wake(mq_queue *q);
int mq_read_shard(mq_queue *q, MDB_txn *txn, uint32_t s, struct mq_disk_shard *st);
int mq_write_shard(mq_queue *q, MDB_txn *txn, uint32_t s, const struct mq_disk_shard *st);
void mq_shard_key(unsigned char k[5], uint32_t s);
void mq_late_record(mq_queue *q, uint64_t late_us);
int mq_rtxn_begin(mq_queue *q, MDB_txn **spare, MDB_txn **txn);
void mq_rtxn_end(MDB_txn **spare, MDB_txn *txn);

/* Internal: restart the transaction (a handle is newer than it). */
#define MQ_RETRY (-30601)

/* dbi.c */
extern pthread_mutex_t mq_dbi_global;
struct mq_wtx {
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
};
void mq_subshard_name(const mq_queue *q, uint32_t s, uint64_t id, char *buf, size_t len);
void mq_subshard_remember(mq_queue *q, uint32_t s, uint64_t id, MDB_dbi dbi);
void mq_subshard_forget(mq_queue *q, uint32_t s, uint64_t id);
int mq_dbi_get(mq_queue *q, uint32_t s, uint64_t id, MDB_dbi *dbi);
int mq_dbi_for(mq_queue *q, MDB_txn *txn, uint32_t s, uint64_t id, MDB_dbi *dbi);
int mq_wtx_begin(mq_queue *q, MDB_txn *caller, int maint, struct mq_wtx *w);
int mq_wtx_subshard(mq_queue *q, struct mq_wtx *w, uint32_t s, uint64_t id, int create,
		    MDB_dbi *dbi);
int mq_wtx_end(mq_queue *q, struct mq_wtx *w, int rc);
void mq_wtx_forget(struct mq_wtx *w, uint32_t s, uint64_t id);
unsigned mq_dbi_count_below(mq_queue *q, uint32_t s, uint64_t id);
void mq_dbi_close_below(mq_queue *q, uint32_t s, uint64_t id);

/* subshard.c */
int mq_subshard_spare(mq_queue *q, struct mq_wtx *w, uint32_t s, struct mq_disk_shard *st);
int mq_subshard_roll(mq_queue *q, struct mq_wtx *w, uint32_t s, struct mq_disk_shard *st);
int mq_subshard_locate(mq_queue *q, MDB_txn *txn, uint32_t s, uint64_t seq, uint64_t *first,
		       uint64_t *id, uint64_t *end);
int mq_subshard_index_put(mq_queue *q, MDB_txn *txn, uint32_t s, uint64_t first, uint64_t id);
int mq_retention(mq_queue *q);

/* shard.c */
struct mq_put {
	uint32_t shard;
	uint64_t seq;
	uint64_t sub_first;
	struct mq_disk_msg h;
	const void *data;
	size_t len;
};
int mq_stream_put(mq_queue *q, struct mq_wtx *w, struct mq_disk_shard *st, struct mq_put *p);
struct mq_loaded {
	int loaded;
	struct mq_disk_shard st;
};
int mq_put_msgs(mq_queue *q, struct mq_wtx *w, const struct mq_msg_in *m, size_t n, uint64_t *seqs,
		struct mq_put *puts, size_t *nputs, struct mq_loaded *ls);
int mq_put_states(mq_queue *q, struct mq_wtx *w, const struct mq_loaded *ls);
void mq_put_committed(mq_queue *q, const struct mq_loaded *ls, const struct mq_put *puts,
		      size_t nputs);

/* group.c */
struct mq_greq;
typedef int mq_group_fn(mq_queue *q, struct mq_wtx *w, void *arg);
int mq_group_enqueue(mq_queue *q, const struct mq_msg_in *m, size_t n, uint64_t *seqs);
/* Run @op in a grouped own write transaction (it may run again on MQ_RETRY). */
int mq_group_op(mq_queue *q, mq_group_fn *op, void *arg);

/* delay.c */
int mq_delay_put(mq_queue *q, MDB_txn *txn, uint32_t s, struct mq_disk_shard *st,
		 const struct mq_disk_msg *h, const void *data, size_t len);
int mq_delay_promote(mq_queue *q);
int mq_delay_promote_loaded(mq_queue *q, struct mq_wtx *w, uint32_t s, struct mq_disk_shard *st,
			    uint64_t now);
uint64_t mq_delay_next_due(mq_queue *q);

/* rule.c: compiled rules of rule-based subscribers */
struct mq_rule;
int mq_rule_compile(const char *text, struct mq_rule **out, char *why, size_t whylen);
void mq_rule_free(struct mq_rule *r);
const char *mq_rule_text(const struct mq_rule *r);
int mq_rule_trivial(const struct mq_rule *r); /* "true": takes everything */
int mq_rule_match(const struct mq_rule *r, const struct mq_msg *m, uint64_t now);

/* exception.c */
int mq_exception_put(mq_queue *q, MDB_txn *txn, char origin, uint32_t s, uint64_t seq, int reason,
		     const struct mq_disk_msg *h, const void *data, size_t len);

/* cache.c (all under q->cache_lock unless said) */
void mq_cache_append(mq_queue *q, const struct mq_put *p, size_t n); /* takes the lock */
struct mq_cmsg *mq_cache_find(mq_queue *q, uint32_t s, uint64_t seq, struct mq_centry **pin);
void mq_cache_unpin(struct mq_centry **pin);
int mq_cache_load(mq_queue *q, MDB_cursor *c, uint32_t s, uint64_t sub_first, uint64_t pos,
		  uint64_t end, int restore);
void mq_cache_shrink(mq_queue *q); /* takes the lock */
void mq_cache_shrink_locked(mq_queue *q);
void mq_cache_free_all(mq_queue *q);
void mq_cache_sizing(mq_queue *q, uint64_t now);
/* takes the locks it needs; @spare as for mq_rtxn_begin() */
void mq_cache_prefetch(mq_queue *q, uint64_t now, MDB_txn **spare);
int mq_cache_enabled(mq_queue *q);

/* buffered.c (under q->cache_lock unless said) */
int mq_buffered_put(mq_queue *q, const struct mq_msg_in *m, uint64_t *seq); /* takes it */
struct mq_cmsg *mq_buffered_at(mq_queue *q, uint32_t s, uint64_t bseq);
uint64_t mq_buffered_end(mq_queue *q, uint32_t s);
uint64_t mq_buffered_first(mq_queue *q, uint32_t s);
void mq_buffered_trim(mq_queue *q);
void mq_buffered_free_all(mq_queue *q);

/* pressure.c */
uint64_t mq_budget_bytes(void);
void mq_budget_add(int64_t delta);
uint64_t mq_budget_used(void);
void mq_spare_add(int64_t delta); /* free cache chunks of all queues */
uint64_t mq_spare_used(void);

/* spin.c: watch @word while it equals @old, for up to @max_us, if a CPU is
 * free for it; 1 when it changed. The caller re-checks under its lock. */
int mq_spin_while(const _Atomic uint64_t *word, uint64_t old, uint64_t max_us);
/* How long a waiter of @q should spin: MQ_SPIN_US while its group commits
 * take less than that (no sync), else 0. */
uint64_t mq_spin_us(mq_queue *q);
/* A thread enters (+1) or leaves (-1) a queue call or a sleep in one (-1
 * before sleeping, +1 after): spinners count who needs a CPU. */
void mq_active(int delta);
uint64_t mq_mono_us(void);

/* subscriber.c: fold positions held only in the ack log into the store
 * (s->fold_due_us); 0 or the commit's error (counted; retried later). */
int mq_sub_fold(mq_sub *s);

/* acklog.c: acknowledgements of MDB_NOSYNC environments in a shared
 * mapping, folded into the store later. No log (ackfd -1) is no error. */
#define MQ_ACK_FOLD_US 100000 /* a position stays in the slot only this long */
void mq_acklog_open(mq_queue *q);
void mq_acklog_close(mq_queue *q);
/* Whether acks of own transactions go to the log now (the environment's
 * flags are read each time: MDB_NOSYNC can be switched). */
int mq_acklog_relaxed(mq_queue *q);
/* In a write transaction: fold the slots of dead processes into their
 * subscribers' records; *reaped: the slots to clear after the commit. */
int mq_acklog_reap(mq_queue *q, MDB_txn *txn, uint64_t *reaped);
void mq_acklog_reaped(mq_queue *q, uint64_t reaped, int committed);
void mq_acklog_claim(mq_sub *s); /* s->slot: a slot holding s->acked, or -1 */
void mq_acklog_write(mq_sub *s); /* s->acked into its slot */
/* Give the slot up; @folded: the store holds its positions (else a later
 * reap folds them). */
void mq_acklog_release(mq_sub *s, int folded);

/* enqlog.c: own-transaction enqueues of MDB_NOSYNC environments in a
 * shared log, moved into the store by group turns (group.c). */
void mq_enqlog_open(mq_queue *q); /* reaps dead processes' logs, takes one */
void mq_enqlog_close(mq_queue *q);
void mq_enqlog_reap(mq_queue *q); /* logs nobody holds: into the store */
int mq_enqlog_relaxed(mq_queue *q);
/* Under glock: 0 when m[0..n) are in the log, else -1 (use a commit). */
int mq_enqlog_put_locked(mq_queue *q, const struct mq_msg_in *m, size_t n);
int mq_enqlog_dirty(const mq_queue *q); /* records no turn has taken (glock) */
/* Under glock: take back the records of a call appended at (@lsn, @head,
 * @used) up to @end_lsn when its own turn failed and nothing follows them;
 * 0 done (the call returns the error), -1 they stay (the call returns 0). */
int mq_enqlog_unput_locked(mq_queue *q, const struct mq_msg_in *m, size_t n, uint64_t lsn,
			   uint64_t head, uint64_t used, uint64_t end_lsn);
/* Under glock: the records for this turn, up to (*end_lsn, *end_off). */
size_t mq_enqlog_take_locked(mq_queue *q, const struct mq_msg_in **m, struct mq_put **puts,
			     uint64_t *end_lsn, uint64_t *end_off);
/* In the turn's transaction: the store has the records before (lsn, off). */
int mq_enqlog_mark(mq_queue *q, MDB_txn *txn, unsigned i, uint64_t next_lsn, uint64_t off);
/* Under glock, after the turn: committed (rc 0) or to be taken again. */
void mq_enqlog_done_locked(mq_queue *q, const struct mq_msg_in *m, size_t n, uint64_t end_lsn,
			   uint64_t end_off, int rc);
int mq_enqlog_pending_locked(const mq_queue *q, uint32_t shard);
/* group.c: stop the flusher and commit what the log still holds (close). */
void mq_group_close(mq_queue *q);

/* coalesce.c: while this process's commits wake subscribers more often
 * than every MQ_COALESCE_GAP_US, a subscriber finding nothing sleeps
 * MQ_COALESCE_US instead of waiting to be woken by the next one. */
#define MQ_COALESCE_GAP_US 50
#define MQ_COALESCE_US	   50
/* The decision alone (pure): the sleep in µs, or 0 to wait for a wake-up.
 * @gap_us: average gap between wake-ups; @since_us: since the last one;
 * @left_us: until the waiter must be back (deadline, poll, due time). */
uint64_t mq_coalesce_us(uint64_t gap_us, uint64_t since_us, uint64_t left_us);
/* 1 if it slept (then read again), 0: wait for a wake-up. */
int mq_coalesce(mq_queue *q, uint64_t left_us);

/* After an own commit: keep the map's resident pages under the budget (map.c). */
void mq_map_check(mq_queue *q);

#endif /* MQ_INTERNAL_H */
