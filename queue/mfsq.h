/* SPDX-License-Identifier: MIT */
/*
 * libmfsq — a sharded, persistent message queue on LMDB.
 *
 * The header is the manual (like lmdb.h): every function lists its
 * parameters, its return value, every error it returns and the thread
 * context it may be called from.
 *
 * Errors
 * ------
 * A function that can fail returns an int: 0 on success, else one of
 * - a positive errno value. Either the queue's own verdict (EINVAL, EMSGSIZE,
 *   EBUSY, ERANGE, ETIMEDOUT, EAGAIN, ...), or an LMDB code that has an
 *   errno meaning, mapped at exactly one place (error.c), on the way out of
 *   every function:
 *       MDB_MAP_FULL, MDB_TXN_FULL  ->  ENOSPC  (the map is full; in an own
 *                                               transaction nothing changed)
 *       MDB_NOTFOUND                ->  ENOENT
 *       MDB_KEYEXIST                ->  EEXIST
 *   or an errno value LMDB or the system returned (ENOMEM, EACCES, EIO, ...).
 * - EBADMSG: the queue's verdict on a damaged record read from the store:
 *   a message (a subshard's, a delay shard's or an exception's value)
 *   shorter than its header, or whose header has a priority above
 *   MFSQ_PRIO_MAX or flags no enqueue writes; a message or delay key of
 *   the wrong size; a subshard index row whose value is not an 8-byte id;
 *   a meta record of the wrong size (the configuration, a shard's state, a
 *   subscriber's positions, an enqueue log's position, or one out of its
 *   range), a stored rule longer than MFSQ_RULE_MAX, and a message missing
 *   from the subshard whose range holds it.
 *   Nothing is changed on the way (an own transaction is aborted); the
 *   same call meets the same record again: the store needs repair.
 * - EAGAIN always means "retry, nothing is broken": from mfsq_dequeue()
 *   with timeout 0, nothing there yet; from a call that joined the caller's
 *   transaction, abort that transaction and run it again (see
 *   mfsq_enqueue()). It never stands for a failure of the store.
 * - MFSQ_LAGGED (negative, below), from mfsq_dequeue() only.
 * - a negative LMDB code that has no errno meaning (lmdb.h: MDB_CORRUPTED,
 *   MDB_VERSION_MISMATCH, MDB_DBS_FULL, MDB_READERS_FULL, MDB_BAD_TXN,
 *   MDB_PANIC, ...), passed on as it is: the store or the environment's
 *   set-up failed.
 * No function returns -errno. mfsq_strerror() gives the text of any of them.
 *
 * Model
 * -----
 * A queue lives in an LMDB environment the caller opened; several queues may
 * share one environment (each is a set of named databases prefixed by the
 * queue's name). A queue has N shards. Each message is enqueued by an
 * "enqueuer" (a 64-bit id chosen by the caller); all messages of one enqueuer
 * go to one shard (mfsq_shard_of()), so every subscriber sees one enqueuer's
 * messages in the order they were committed. Within a shard a message is
 * named by its sequence number (1, 2, ...), never reused.
 *
 * A shard is a sequence of subshards; each subshard is its own named LMDB
 * database holding a bounded number of messages. A subshard that every
 * durable subscriber (and every ephemeral subscriber open in this process)
 * has acknowledged is dropped whole (mdb_drop), never message by message;
 * with no subscriber at all only the tail is kept. Past the hard limit
 * (mfsq_config.retain_max live subshards per shard) the oldest are dropped
 * anyway and the subscribers still there are marked lagging. Retention
 * runs in maintenance transactions: from mfsq_dequeue() (every 100 ms), after
 * an own-transaction enqueue that started a subshard, and from mfsq_tick();
 * until one runs, a shard may briefly hold more than retain_max subshards.
 * Ephemeral subscribers of another process do not hold retention.
 *
 * Each shard has a paired delay shard (one LMDB database) divided into
 * time-span buckets; a delayed message is promoted into its shard's stream
 * when due, earliest-due first, lower priority value first among messages
 * due together. Nothing about pending delayed messages is kept in memory.
 *
 * Recent subshards are cached in memory (a copy), sized and evicted from
 * measured enqueue and dequeue rates; under memory pressure enqueues go to
 * the store only and caches shrink. The store is always the truth: caching
 * never changes what is delivered or in which order. Only enqueues in the
 * queue's own transactions fill the cache at commit (a caller's commit is
 * invisible to it); other messages are read from the store and cached then.
 *
 * Merging shards: a dequeue takes, among the heads of all shards, the one
 * with the earliest delivery time. Order is guaranteed per enqueuer (per
 * shard); across shards it is by time as far as the clocks of the
 * enqueuing processes agree.
 *
 * Delivery is at-least-once: mfsq_ack() acknowledges cumulatively per shard;
 * a durable subscriber reopened after a restart or crash resumes after its
 * last acknowledged message of every shard.
 *
 * Environment requirements
 * ------------------------
 * - mdb_env_set_maxdbs() at least mfsq_dbs_needed() for every queue opened in
 *   the environment, plus what the caller needs itself.
 * - Open the environment with MDB_NOTLS: the queue opens short read
 *   transactions of its own, possibly on a thread that already holds one of
 *   the caller's read transactions.
 * - The queue opens named databases with mdb_dbi_open() under a mutex of
 *   its own; the caller must not call mdb_dbi_open()/mdb_dbi_close() on the
 *   same environment concurrently with a queue call (open the caller's
 *   databases before, or serialise).
 * - Durability follows the environment's flags. "Durable on return" below
 *   means: as durable as a commit of that environment (with MDB_NOSYNC,
 *   only across a process crash). An environment opened with
 *   MDB_NOMETASYNC (and without MDB_NOSYNC) makes the queue's group commits
 *   cost one sync instead of two and they stay durable on return: the
 *   callers of a group wait until the next group's commit, or one
 *   mdb_env_sync() when none follows, has synced the meta page
 *   (mfsq_stats.meta_syncs). The caller's own commits in such an environment
 *   are not durable until the next commit or mdb_env_sync() (see lmdb.h).
 * - In an MDB_NOSYNC environment the queue keeps files of its own next to
 *   the data file: mfsq-<queue>.acks (see mfsq_ack()) and up to 8
 *   mfsq-<queue>.log<i> of 1 MiB (see mfsq_enqueue()). They belong to the
 *   environment: copy them with it (without the ack log, at most the
 *   acknowledgements of the last 100 ms are lost: a redelivery; without the
 *   enqueue logs of a crashed process, its enqueues not yet committed).
 *   A process that forks keeps its logs locked while the child lives.
 * - Two processes may use one queue (LMDB is multi-process safe). Each
 *   process should enqueue with its own enqueuer ids; a durable subscriber
 *   name must be used by one process at a time.
 *
 * Times are microseconds since the Unix epoch (CLOCK_REALTIME), so they
 * survive restarts and are shared between processes.
 *
 * Caveats
 * -------
 * - Never use an mfsq_sub from two threads at once; an mfsq_queue is
 *   thread-safe.
 * - Never call a queue function that takes its own write transaction
 *   (txn == NULL) from a thread that holds a write transaction on the same
 *   environment: LMDB would deadlock. Pass that transaction instead.
 * - Do not close a queue while another thread is inside a call on it.
 */
#ifndef MFSQ_H
#define MFSQ_H

#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The subscriber fell behind the retention hard limit: messages were lost.
 *  Returned once by mfsq_dequeue(); the subscriber then continues from the
 *  oldest retained message. */
#define MFSQ_LAGGED (-30600)

/** Largest queue name, subscriber name (bytes, without the NUL). */
#define MFSQ_NAME_MAX 48
/** Largest payload accepted by default; mfsq_config.max_payload may raise it. */
#define MFSQ_PAYLOAD_MAX_DEFAULT (4u << 20)
#define MFSQ_PRIO_MAX		 9

/* Message flags (mfsq_msg_in.flags and mfsq_msg.flags). */
#define MFSQ_MSG_DELAYED 0x01 /**< set on delivery: came through the delay shard */
/** Memory-only (buffered) message: never written to the store, delivered
 *  only to subscribers open in this process, lost on restart; its seq is in
 *  a separate per-shard sequence. It ignores the caller's transaction (it
 *  is delivered even if that transaction aborts). Under memory pressure it
 *  spills: it is enqueued as a persistent message instead. It cannot be
 *  delayed. Set on delivery for buffered messages. */
#define MFSQ_MSG_BUFFERED 0x02

/* mfsq_open() flags */
#define MFSQ_CREATE 0x1 /**< create the queue if it does not exist */
/** Keep no enqueue log (mfsq_enqueue(), MDB_NOSYNC environments): an
 *  enqueue with txn NULL then always commits before it returns. For a queue
 *  whose messages go in with the caller's transactions (a file system's
 *  outbox): the log's ring is 1 MiB of mapped memory and a file per open
 *  queue, used by nothing there. A dead process's log is still replayed. */
#define MFSQ_NO_LOG 0x2
/** Open a shard's databases only when mfsq_shard_use() names it (a new
 *  queue lays out only those): every transaction of the environment pays
 *  for each named-database handle the process ever opened (LMDB's per
 *  transaction loops), so a process that enqueues into one shard of many
 *  keeps the others' closed. Readers still read every shard (they open a
 *  subshard's handle when they find one; a shard nobody used has none).
 *  Enqueues into a shard not named are refused (EINVAL); delayed messages
 *  of such a shard are promoted by the processes that use it. Needs
 *  MFSQ_NO_LOG (a log's replay would enqueue into any shard): EINVAL
 *  without it. Every process opening the queue should pass it alike: one
 *  that does not lays out and opens every shard, which is also correct. */
#define MFSQ_LAZY_SHARDS 0x4

/* mfsq_subscribe() flags */
#define MFSQ_SUB_DURABLE    0x1 /**< named, position survives restarts */
#define MFSQ_SUB_FROM_START 0x2 /**< new subscriber starts at the oldest retained message */

/** Exception reasons (mfsq_exception_read()). */
enum mfsq_reason {
	MFSQ_REASON_EXPIRED = 1,	 /**< expired in the stream before delivery */
	MFSQ_REASON_EXPIRED_DELAYED = 2, /**< expired while waiting in the delay shard */
};

/** Queue configuration; fixed when the queue is created (stored with it). */
struct mfsq_config {
	uint32_t nshards;	 /**< shards (1..1024), default 4 */
	uint32_t subshard_msgs;	 /**< messages per subshard, default 4096 */
	uint64_t subshard_bytes; /**< payload bytes per subshard, default 16 MiB */
	uint32_t retain_max;	 /**< hard limit of live subshards per shard, default 64:
				      older ones are dropped and subscribers still
				      there are marked lagging */
	uint32_t max_payload;	 /**< default MFSQ_PAYLOAD_MAX_DEFAULT */
	uint64_t bucket_us;	 /**< delay bucket span, default 10 ms */
};

/** A message to enqueue. */
struct mfsq_msg_in {
	const void *data;    /**< payload (may be NULL when len is 0) */
	size_t len;	     /**< payload length, up to mfsq_config.max_payload */
	uint64_t enqueuer;   /**< enqueuer id: selects the shard */
	uint64_t deliver_us; /**< absolute delivery time; 0 or <= now: at once */
	uint64_t expire_us;  /**< absolute expiry time; 0: never */
	uint8_t prio;	     /**< 0..9, lower first among messages due together */
	uint8_t flags;	     /**< 0 or MFSQ_MSG_BUFFERED */
	uint32_t tag;	     /**< the caller's attribute, for rules (mfsq_subscribe_rule()) */
};

/** A delivered message. Pointers stay valid until the next dequeue on the
 *  same subscriber or until the subscriber is closed. */
struct mfsq_msg {
	uint32_t shard;
	uint64_t seq;	     /**< sequence number in the shard */
	uint64_t enqueue_us; /**< commit time of the enqueue */
	uint64_t deliver_us; /**< requested delivery time (enqueue time if not delayed) */
	uint64_t expire_us;  /**< 0: never */
	uint64_t enqueuer;
	uint8_t prio;
	uint8_t flags; /**< MFSQ_MSG_* */
	uint32_t tag;  /**< as enqueued */
	const void *data;
	size_t len;
};

/** A filter callback (mfsq_subscribe()): return non-zero to receive the
 *  message. Called on the dequeuing thread with no queue lock held, after
 *  the payload was copied; it must not call queue functions on the same
 *  subscriber. Messages it rejects are skipped (and count as acknowledged by
 *  the next mfsq_ack()). Unlike a rule, it is not stored: a durable
 *  subscriber must pass it again on every mfsq_subscribe(). */
typedef int mfsq_filter_fn(const struct mfsq_msg *m, void *arg);

/*
 * Rules
 * -----
 * A rule-based subscriber (mfsq_subscribe_rule()) receives only the messages
 * its rule takes. A rule is a text, parsed and checked when the subscriber
 * is created, stored with a durable subscriber (it survives restarts) and
 * applied by the dequeue to the message header, before any payload is
 * copied. Examples:
 *
 *     priority <= 3 && enqueuer == 7
 *     tag in (1, 2, 5) || (size >= 64KiB && !delayed)
 *     age < 30s && deliver_us >= 0x18b3c5a0f0000
 *
 * Grammar (spaces are free; at most MFSQ_RULE_MAX bytes, 32 levels of '(' and
 * '!', 64 values in one "in" list):
 *
 *     rule   := or
 *     or     := and { "||" and }
 *     and    := unary { "&&" unary }
 *     unary  := "!" unary | "(" or ")" | "true" | "false" | test
 *     test   := FLAG | ATTR cmp value | ATTR "in" "(" value { "," value } ")"
 *     cmp    := "==" | "!=" | "<" | "<=" | ">" | ">="
 *     value  := decimal or 0x-hexadecimal unsigned 64-bit integer, and for a
 *               decimal an optional unit written right after it
 *
 * Attributes (ATTR; all unsigned, compared as 64-bit integers):
 *
 *     priority, prio   mfsq_msg.prio, 0..9 (a value above 9 is an error)
 *     enqueuer         mfsq_msg.enqueuer
 *     tag              mfsq_msg.tag, the caller's attribute (mfsq_msg_in.tag)
 *     size             payload bytes; units B, KiB, MiB, GiB
 *     shard, seq       where the message is
 *     enqueue_us, deliver_us, expire_us
 *                      times in microseconds since the epoch (expire_us 0:
 *                      never); units us, ms, s, min, h, d
 *     age              now minus enqueue_us, at the dequeue; same units
 *
 * Flags (FLAG, a condition by themselves): "delayed" (came through the
 * delay shard, MFSQ_MSG_DELAYED), "buffered" (memory-only, MFSQ_MSG_BUFFERED).
 *
 * Messages a rule passes over are skipped and count as acknowledged by the
 * next mfsq_ack(s, NULL, NULL); they are counted in mfsq_stats.filtered. A
 * durable subscriber whose rule takes nothing for a long time should still
 * call mfsq_ack(s, NULL, NULL) now and then (e.g. after a dequeue that timed
 * out), or it holds retention. Expired messages go to the exception queue
 * whatever the rule says.
 */
/** Longest rule text (bytes, without the NUL). */
#define MFSQ_RULE_MAX 1024

/** Statistics, a snapshot (mfsq_stats()). Counters are for this process. */
struct mfsq_stats {
	uint64_t enqueued, dequeued, acked, batches;
	uint64_t commit_groups; /**< group commits of own-transaction enqueues and
				     acks: concurrent calls share one commit */
	uint64_t subshards_created, subshards_dropped, subshards_live;
	uint64_t delayed_enqueued, delayed_promoted, delayed_pending;
	uint64_t lateness_max_us, lateness_p50_us, lateness_p99_us;
	uint64_t expired;  /**< moved to the exception queue */
	uint64_t filtered; /**< skipped by rules and filter callbacks */
	uint64_t lagging;  /**< subscribers marked lagging */
	uint64_t cache_hits, cache_misses, cache_restores, cache_evictions;
	uint64_t cache_prefetches; /**< subshards loaded before a reader reached them */
	uint64_t cache_bytes, cache_target_bytes;
	uint64_t store_only_enqueues;	    /**< enqueues not cached because of pressure */
	uint64_t buffered_enqueued;	    /**< memory-only messages accepted */
	uint64_t buffered_spilled;	    /**< memory-only messages stored (pressure) */
	uint64_t buffered_dropped;	    /**< memory-only messages dropped unread (budget) */
	uint64_t pressure_events;	    /**< transitions into memory pressure */
	uint64_t map_trims;		    /**< times the map's resident pages were dropped */
	uint64_t meta_syncs;		    /**< mdb_env_sync() calls of group commits that made a
						 deferred meta page durable (MDB_NOMETASYNC) */
	double enqueue_rate;		    /**< messages/s, sum over shards (estimate) */
	double dequeue_rate;		    /**< messages/s, sum over subscriber-shard pairs */
	uint64_t sizing_restores_est_milli; /**< estimated restores/s x1000 at target size */
	uint64_t maintenance_errors;	    /**< failed promotions/retention runs (retried) */
	int last_maintenance_error;	    /**< code of the last one (0: none) */
	uint64_t cache_spare_bytes;	    /**< free cache chunks kept for reuse: up to
						 cache_target_bytes - cache_bytes and what the
						 budget leaves (2 MiB at least); not cached
						 data, not counted as the budget's use */
	uint64_t acks_logged;		    /**< acks of own transactions written to the ack log
						 only (MDB_NOSYNC environments: no commit) */
	uint64_t ack_folds;		    /**< commits that folded logged acks into the store */
	uint64_t acks_reaped;		    /**< ack log slots of dead processes folded in */
	uint64_t coalesced_waits;	    /**< dequeue waits that slept MFSQ_COALESCE_US instead
						 of being woken by each commit (busy streams) */
	uint64_t log_enqueued;		    /**< messages whose enqueue returned once in the
						 enqueue log (MDB_NOSYNC, own transaction) */
	uint64_t log_flushes;		    /**< group commits that moved log records in */
	uint64_t log_replayed;		    /**< messages moved in from dead processes' logs */
	uint64_t committer_turns;	    /**< group commits of waiting callers' requests led by
						 the queue's flusher thread: after a group of large
						 values, so that one thread's heap takes LMDB's
						 overflow pages */
};

typedef struct mfsq_queue mfsq_queue;
typedef struct mfsq_sub mfsq_sub;

/**
 * Fill @p cfg with the defaults.
 * Thread context: any.
 */
void mfsq_config_default(struct mfsq_config *cfg);

/**
 * Number of named databases a queue with configuration @p cfg may hold open
 * at once: a meta and an exception database, one delay database per shard
 * and up to retain_max + 2 subshards per shard. Add it to the caller's own
 * needs for mdb_env_set_maxdbs().
 * @param cfg configuration, or NULL for the defaults.
 * Thread context: any.
 */
unsigned mfsq_dbs_needed(const struct mfsq_config *cfg);

/**
 * Open (or create) the queue @p name in @p env.
 * @param env an open environment (see "Environment requirements").
 * @param name 1..MFSQ_NAME_MAX bytes, no '/'.
 * @param cfg configuration used when the queue is created; ignored (the
 *        stored one is used) when it exists. NULL: defaults.
 * @param flags MFSQ_CREATE, MFSQ_NO_LOG, MFSQ_LAZY_SHARDS (with
 *        MFSQ_NO_LOG), or 0.
 * @param out receives the queue.
 * @return 0, or
 *   EINVAL   bad name or configuration;
 *   ENOENT   the queue does not exist and MFSQ_CREATE was not given;
 *   ENOMEM   out of memory;
 *   MDB_DBS_FULL  mdb_env_set_maxdbs() too small;
 *   ENOSPC   the map is full;
 *   MDB_VERSION_MISMATCH  the queue was written by a format version this
 *            build does not read (a newer one; format.h): an open of a
 *            version 1 queue marks it version 2, which version 1 builds
 *            refuse;
 *   EBADMSG  a queue record has the wrong size, or the stored
 *            configuration is damaged: a value outside the
 *            ranges a new queue's must meet (nshards 1..1024,
 *            subshard_msgs, subshard_bytes, max_payload and bucket_us >= 1,
 *            retain_max >= 2); nothing was allocated for it;
 *   any LMDB error of mdb_txn_begin()/mdb_dbi_open().
 * Thread context: any thread not holding a write transaction on @p env.
 */
int mfsq_open(MDB_env *env, const char *name, const struct mfsq_config *cfg, unsigned flags,
	      mfsq_queue **out);

/**
 * Make shard @p shard of a queue opened with MFSQ_LAZY_SHARDS ready for
 * this process's enqueues: its subshards are made if no process made them
 * yet, and its delay table, tail and spare handles are opened (one write
 * transaction of its own). Without the flag, or done already: nothing.
 * @return 0, or EINVAL (@p shard out of range), ENOMEM, ENOSPC (the map is
 *   full), MDB_DBS_FULL, or any LMDB error of the transaction.
 * Thread context: any thread not holding a write transaction on the
 * environment; not concurrently with another mfsq_shard_use() of @p q.
 */
int mfsq_shard_use(mfsq_queue *q, uint32_t shard);

/**
 * Close the queue: frees its memory and caches. Subscribers must have been
 * closed. The environment stays open. @p q NULL: nothing.
 * In an MDB_NOSYNC environment it first commits what the enqueue log still
 * holds and stops the log's flusher thread (what cannot be committed stays
 * in the log file for the next mfsq_open()).
 * Thread context: any thread not holding a write transaction on the
 * environment (it may commit); no other call on @p q may be running.
 */
void mfsq_close(mfsq_queue *q);

/** The configuration the queue runs with. Thread context: any. */
void mfsq_get_config(const mfsq_queue *q, struct mfsq_config *cfg);

/** Shard of enqueuer @p enqueuer (stable for the life of the queue).
 *  Thread context: any (it reads only the configuration: no lock, no
 *  transaction). */
uint32_t mfsq_shard_of(const mfsq_queue *q, uint64_t enqueuer);

/**
 * The @p n-th (0, 1, ...) enqueuer id, in increasing order, whose shard is
 * @p shard: lets a process keep its enqueues in shards of its own (e.g. two
 * processes sharing a store each take half of the shards). Cost grows with
 * @p n times the number of shards. Returns UINT64_MAX if @p shard is out of
 * range. Thread context: any.
 */
uint64_t mfsq_enqueuer_in_shard(const mfsq_queue *q, uint32_t shard, uint64_t n);

/**
 * Enqueue one message.
 * @param txn the caller's write transaction to join (the message commits or
 *        aborts with it; call mfsq_notify() after committing to wake waiting
 *        subscribers at once), or NULL to run in a transaction of its own,
 *        committed before returning; concurrent such calls of this process
 *        share one commit (group commit), each still durable on return.
 *        In an MDB_NOSYNC environment, with @p seq NULL and up to 16 KiB of
 *        payload, the call returns once the message is in the queue's
 *        enqueue log instead: a MAP_SHARED file next to the data file
 *        (mfsq-<queue>.log<i>), as durable as a commit there (it survives a
 *        crash of the process; the next mfsq_open() or another process's
 *        retention replays a dead process's log, in order, once). A group
 *        commit moves it in right after (the caller leads it itself when
 *        nobody else commits; else the running leader or the queue's
 *        flusher thread takes it); subscribers see it then.
 *        (mfsq_stats.log_enqueued.)
 * @param m the message.
 * @param seq if not NULL, receives the sequence number in the shard (for
 *        a delayed message: 0, its stream number is given when promoted).
 * @return 0, or
 *   EINVAL   q or m NULL, m->prio > 9, m->data NULL with len > 0, unknown flags,
 *            a buffered message with a delivery time (checked before
 *            anything is written);
 *   EMSGSIZE m->len above the queue's max_payload (checked likewise);
 *   EAGAIN   (with @p txn only) retry: the transaction began before the
 *            queue could share the handle of a subshard created by another
 *            process, or this process's enqueue log still holds messages for
 *            the same shard (one of them may be this enqueuer's earlier one,
 *            and they can only go in once the caller's transaction ends):
 *            abort it and run it again;
 *   ENOSPC   the map is full (MDB_MAP_FULL, MDB_TXN_FULL; own txn: nothing
 *            changed; caller txn: LMDB marks it failed, the caller must
 *            abort it). A logged call returns it when its own commit failed;
 *            one that returned while another caller's commit of it was
 *            still running keeps its message in the log, which goes in, in
 *            order, once there is room, and meanwhile own-transaction
 *            enqueues return ENOSPC;
 *   EIO etc. (txn NULL, MDB_NOMETASYNC environment) the error of the
 *            mdb_env_sync() that was to make the commit durable: the
 *            message is committed but may not survive a power loss;
 *   ENOMEM, MDB_DBS_FULL, other LMDB errors (see "Errors").
 *
 * Inside the caller's transaction (@p txn not NULL; the file system's
 * commit path) the call returns exactly one of these:
 *   0          the message is written in @p txn: it commits or aborts with it;
 *   EINVAL, EMSGSIZE  the arguments are wrong: nothing was written, @p txn
 *              is intact (it may still commit, without the message);
 *   EAGAIN     retry: abort @p txn and run it again; the queue and the store
 *              are fine (part of a batch may already be in @p txn);
 *   ENOSPC     the map is full: LMDB marked @p txn failed; abort it, grow
 *              the map (mdb_env_set_mapsize(), no transaction active) and
 *              run it again;
 *   ENOMEM     out of memory (part of a batch may be in @p txn): abort;
 *   EACCES     @p txn is read-only;
 *   ENOENT, EEXIST  a shard record or subshard database the queue wrote is
 *              missing, or a key it appends is taken: the store is damaged;
 *   EBADMSG    a delayed message due for promotion, a subshard index row
 *              or a queue record (its size) is damaged (see "Errors"):
 *              abort @p txn;
 *   negative   an LMDB code: MDB_BAD_TXN (@p txn had failed before),
 *              MDB_DBS_FULL or MDB_READERS_FULL (sharing a subshard's handle
 *              needs a short read transaction and a handle slot), MDB_PANIC.
 * Only EINVAL, EMSGSIZE and EAGAIN are the queue's verdict; every other
 * non-zero value is a failure of the store (or of memory) and calls for
 * what the caller does when its own mdb_put() fails: abort @p txn. The
 * queue never returns -errno, so a positive value cannot be mistaken for
 * an LMDB code. A memory-only message (MFSQ_MSG_BUFFERED) ignores @p txn
 * and adds only ENOMEM.
 *
 * Thread context: any; with @p txn, the thread that owns it. With txn ==
 * NULL the thread must not hold a write transaction on the environment.
 */
int mfsq_enqueue(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, uint64_t *seq);

/**
 * Enqueue @p n messages in one transaction (the caller's or one of its own).
 * Either all are enqueued or (own transaction) none. Errors as mfsq_enqueue()
 * (EINVAL also for @p m NULL with n > 0; n == 0 does nothing and returns 0);
 * @p seqs (may be NULL) receives n sequence numbers.
 * Thread context: as mfsq_enqueue().
 */
int mfsq_enqueue_batch(mfsq_queue *q, MDB_txn *txn, const struct mfsq_msg_in *m, size_t n,
		       uint64_t *seqs);

/**
 * Tell the queue that the caller's write transaction @p txnid (its
 * mdb_txn_id(), taken before mdb_txn_commit()) committed, after it
 * enqueued into it with mfsq_enqueue() or mfsq_enqueue_batch(). Optional:
 * a caller that says so after each such commit lets the next transaction
 * of the environment skip reading the shard records back and catching
 * them up with their tails (a lone writer such as a file system's outbox:
 * two table lookups less per commit).
 * The queue trusts what it remembers only in the transaction whose id is
 * @p txnid + 1, so any commit in between, by this process or another,
 * makes it read the store again. Never call it for a transaction that
 * aborted or did not enqueue (LMDB hands an aborted transaction's id to
 * the next one). @p q NULL: nothing. Thread context: any.
 */
void mfsq_txn_committed(mfsq_queue *q, uint64_t txnid);

/**
 * Wake subscribers waiting in mfsq_dequeue() in this process, e.g. after the
 * caller committed a transaction it passed to mfsq_enqueue(). Waiters also
 * poll the store, so without it they wake after at most the poll interval.
 * Thread context: any.
 */
void mfsq_notify(mfsq_queue *q);

/**
 * Promote due delayed messages and apply retention. Dequeue does this
 * itself; an application without subscribers in this process may call it
 * to keep retention running.
 * @return 0, ENOMEM, ENOSPC, MDB_DBS_FULL (a spare subshard needs a
 *   handle slot), EBADMSG (a damaged delayed message or subshard index
 *   row), LMDB errors. Nothing is lost on an error: the next tick or
 *   dequeue tries again.
 * Thread context: any thread not holding a write transaction on the env.
 */
int mfsq_tick(mfsq_queue *q);

/**
 * When the earliest delayed message of the queue is due, as far as this
 * process knows (µs since the epoch; UINT64_MAX: none known): a lower
 * bound kept in memory, refreshed from the store by every dequeue and
 * promotion, so a waiter can sleep until then and dequeue with timeout 0
 * instead of blocking in mfsq_dequeue(), which polls the store every
 * millisecond. A message committed in a caller's transaction is not seen
 * before the next dequeue: the caller wakes its waiter itself. Never
 * fails. Thread context: any.
 */
uint64_t mfsq_next_due(mfsq_queue *q);

/**
 * Subscribe.
 * @param name NULL for an ephemeral subscriber (this process only, starts at
 *        the end or, with MFSQ_SUB_FROM_START, at the oldest retained message;
 *        its position is lost on close), or the name (1..MFSQ_NAME_MAX bytes) of a
 *        durable subscriber: created on first use, resumed afterwards.
 * @param flags MFSQ_SUB_DURABLE (required with a name), MFSQ_SUB_FROM_START.
 * @param filter NULL, or a callback: only messages it accepts are delivered.
 * @param arg passed to @p filter.
 * @param out receives the subscriber.
 * A durable subscriber keeps the rule stored by mfsq_subscribe_rule(), if any
 * (it applies before @p filter).
 * @return 0, or
 *   EINVAL   bad name or flags; the stored rule no longer parses;
 *   EBUSY    this durable subscriber is already open in this process;
 *   EBADMSG  the stored rule is longer than MFSQ_RULE_MAX, or this
 *            subscriber's record has the wrong size (see "Errors");
 *   ENOMEM, ENOSPC, LMDB errors.
 * Thread context: any thread not holding a write transaction on the env.
 */
int mfsq_subscribe(mfsq_queue *q, const char *name, unsigned flags, mfsq_filter_fn *filter,
		   void *arg, mfsq_sub **out);

/**
 * Subscribe with a rule (see "Rules"): as mfsq_subscribe(), and
 * @param rule the rule text; a durable subscriber stores it in the same
 *        transaction that creates or resumes it, replacing the stored one;
 *        "true" removes the stored rule (every message is delivered); NULL
 *        keeps the stored rule, if any.
 * @param why NULL, or a buffer that receives the reason of an EINVAL (for
 *        a bad rule: "column N: ..."), or "" when the call succeeds or fails
 *        otherwise.
 * @param whylen its size (the reason is cut to fit; 128 bytes is enough
 *        for any reason but an unknown attribute's, which lists them all).
 * @return 0, or
 *   EINVAL   bad name or flags (why: ""); the rule is empty, malformed,
 *            uses an unknown attribute or unit, a unit that does not fit
 *            its attribute, a priority above 9, a number above 2^64-1,
 *            nests deeper than 32, has more than 64 values in a list, or is
 *            longer than MFSQ_RULE_MAX (why says which, and where); with
 *            @p rule NULL, the stored rule no longer parses. Nothing is
 *            created or changed then.
 *   EBUSY, EBADMSG, ENOMEM, ENOSPC, LMDB errors as mfsq_subscribe().
 * Thread context: as mfsq_subscribe().
 */
int mfsq_subscribe_rule(mfsq_queue *q, const char *name, unsigned flags, const char *rule,
			char *why, size_t whylen, mfsq_sub **out);

/**
 * Check a rule without subscribing (e.g. a control command validating its
 * input).
 * @return 0, or EINVAL with the reason in @p why (as mfsq_subscribe_rule()),
 *   ENOMEM. Thread context: any.
 */
int mfsq_rule_check(const char *rule, char *why, size_t whylen);

/** The rule text in effect for @p s, or NULL if it has none. Valid until
 *  mfsq_unsubscribe(s). Thread context: any. */
const char *mfsq_sub_rule(const mfsq_sub *s);

/**
 * Close a subscriber. A durable subscriber keeps its acknowledged position
 * in the store; unacknowledged messages will be delivered again. Positions
 * held only in the ack log are committed first (an own transaction; if
 * that fails they stay in the log's slot, for a later reap by a durable
 * subscribe or retention to fold in). @p s NULL: nothing.
 * Thread context: the thread that uses @p s, not holding a write
 * transaction on the environment; no other call on @p s may be running.
 */
void mfsq_unsubscribe(mfsq_sub *s);

/**
 * Remove a durable subscriber, and its rule, from the store (it no longer
 * holds messages), in @p txn, or in an own transaction when @p txn is NULL
 * (so that a caller can delete its own record of the subscriber in the
 * same transaction: both go, or neither).
 * @return 0, EINVAL bad name, ENOENT unknown subscriber, EBUSY open in this
 *   process, ENOSPC, LMDB errors (with @p txn: abort it, as for
 *   mfsq_enqueue(), except after ENOENT and EBUSY, which changed nothing).
 * Thread context: as mfsq_subscribe(), or the thread owning @p txn.
 */
int mfsq_subscriber_delete(mfsq_queue *q, MDB_txn *txn, const char *name);

/**
 * Dequeue up to @p max messages (merged over the shards by delivery time;
 * one shard's messages always in sequence order).
 * @param out array of @p max messages; data pointers stay valid until the
 *        next dequeue on @p s or mfsq_unsubscribe(s).
 * @param n receives the number delivered (>= 1 on success).
 * @param timeout_ms 0: do not wait; < 0: wait for ever; else wait up to it.
 * Before reading, the call promotes due delayed messages and runs retention
 * (maintenance); a failure there (e.g. ENOSPC, MDB_DBS_FULL) does not fail
 * the dequeue: it is counted in mfsq_stats() and retried 100 ms later.
 * @return 0, or
 *   EINVAL    max == 0;
 *   EAGAIN    nothing available and timeout_ms == 0;
 *   ETIMEDOUT nothing arrived in time;
 *   MFSQ_LAGGED the subscriber fell behind the retention limit and lost
 *             messages; it now continues at the oldest retained one (call
 *             again);
 *   EBADMSG   the next message of a shard is damaged (see "Errors"): the
 *             subscriber stays before it;
 *   ENOMEM, LMDB errors of the read transaction.
 * Thread context: the thread that uses @p s, not holding a write
 * transaction on the environment.
 */
int mfsq_dequeue(mfsq_sub *s, struct mfsq_msg *out, size_t max, size_t *n, int timeout_ms);

/**
 * Acknowledge @p m and, cumulatively, every message delivered before it from
 * the same shard. NULL: acknowledge everything delivered so far. A
 * memory-only message's ack only checks it was delivered. With txn NULL, a
 * durable subscriber's position is written in a group commit shared with
 * concurrent enqueues and acks of this process; it is durable on return.
 * In an MDB_NOSYNC environment it goes to the queue's ack log instead, no
 * commit: a MAP_SHARED file next to the data file (mfsq-<queue>.acks), as
 * durable as a commit of such an environment (it survives a crash of the
 * process, and a reopened subscriber resumes after it in any process).
 * The store's record follows within 100 ms (the subscriber's next ack or
 * dequeue folds it in, mfsq_unsubscribe() too; mfsq_stats.ack_folds); after a
 * crash of the machine, acknowledgements not yet folded and synced are
 * lost and their messages delivered again (at-least-once). At most 64
 * durable subscribers of a queue hold a slot of the log at once; the
 * others commit every ack.
 * @param txn write transaction to join (durable subscribers write their
 *        position), or NULL for an own one. The position in memory moves at
 *        once: if that transaction aborts, the acknowledgement is written
 *        with the next one; reopen the subscriber to have the messages
 *        delivered again.
 * @return 0, or EINVAL (@p m not delivered to @p s), ENOMEM, ENOSPC, EIO
 *   etc. (as mfsq_enqueue(): committed, the sync failed), LMDB errors.
 * Thread context: as mfsq_dequeue(); with txn, the thread owning it.
 */
int mfsq_ack(mfsq_sub *s, MDB_txn *txn, const struct mfsq_msg *m);

/**
 * Move the subscriber of shard @p shard to sequence number @p seq (the next
 * message it will receive there). Unacknowledged delivered messages of that
 * shard will be delivered again if seq is before them.
 * @return 0, or
 *   EINVAL  shard out of range;
 *   ERANGE  seq beyond the end of the shard (more than next sequence number);
 *   ENOENT  seq no longer retained (dropped);
 *   ENOSPC  (durable subscriber) the new position could not be written;
 *   ENOMEM, LMDB errors.
 * A durable subscriber's new position is written at once (acknowledged
 * positions of the other shards are written as they are in memory).
 * Thread context: as mfsq_dequeue().
 */
int mfsq_seek_seq(mfsq_sub *s, uint32_t shard, uint64_t seq);

/**
 * Move the subscriber, in every shard, to the first retained message whose
 * delivery time is >= @p t_us (the end of the shard if none).
 * Seeking to a time scans the retained messages of each shard.
 * @return 0, ENOMEM, ENOSPC (durable subscriber: position not written),
 *   EBADMSG (a damaged message or index row on the way: no position moved),
 *   LMDB errors. Thread context: as mfsq_dequeue().
 */
int mfsq_seek_time(mfsq_sub *s, uint64_t t_us);

/** Whether the subscriber was marked lagging (fell behind the hard limit:
 *  its stored record says so, or an mfsq_dequeue() returned MFSQ_LAGGED;
 *  it stays set while @p s is open). Thread context: the thread that uses
 *  @p s. */
int mfsq_sub_lagging(const mfsq_sub *s);

/**
 * Read the exception queue: the first exception whose key is after
 * @p *cursor (0: from the start); advances @p *cursor.
 * @param m receives the message; its data points into @p buf (copied, up to
 *        @p buflen bytes; m->len is the full length).
 * @param reason receives an enum mfsq_reason.
 * @return 0, ENOENT (no more), EBADMSG (this exception is damaged: @p m,
 *   @p reason and @p buf are not set, @p *cursor moves past it, so the
 *   next call reads on), LMDB errors of its read transaction.
 * Thread context: any (it opens a short read transaction of its own).
 */
int mfsq_exception_next(mfsq_queue *q, uint64_t *cursor, struct mfsq_msg *m, int *reason, void *buf,
			size_t buflen);

/**
 * Whether message (@p shard, @p seq) is in this process's message cache now
 * (diagnostics and tests): 1 or 0, never an error.
 * Thread context: any (it holds the cache lock shared for a moment).
 */
int mfsq_cache_has(mfsq_queue *q, uint32_t shard, uint64_t seq);

/** Statistics snapshot into @p st; never fails (the store's part, live
 *  subshards and pending delayed messages, stays 0 if its read transaction
 *  cannot begin). The counters are read one by one, not as one snapshot:
 *  while delayed messages are being promoted, delayed_pending (read from
 *  the store) may already miss messages that delayed_promoted does not
 *  count yet. Thread context: any (it opens a short read transaction and
 *  holds queue locks for a moment). */
void mfsq_stats(mfsq_queue *q, struct mfsq_stats *st);

/** Text for any code a queue function returns (see "Errors"): an MFSQ_
 *  code, errno value or LMDB code. Thread context: any. */
const char *mfsq_strerror(int rc);


/* ---- retention floor, positions, consistency check (floor.c, check.c) ---- */

/**
 * Set the retention floor of @p shard to @p seq, in @p txn (it commits or
 * aborts with it): retention (maintenance, mfsq_tick()) then keeps every
 * subshard holding a message at or after @p seq even with no subscriber,
 * drops those wholly before it whatever the subscribers hold, and moves a
 * durable subscriber still before it up to it, marked lagging (its lost
 * count grows). For an application whose own bounds decide what is kept
 * (a change feed replayed from a sequence number). 0 removes the floor
 * (the default behaviour returns). Messages below the floor that share a
 * subshard with kept ones stay readable until that subshard goes: the
 * application skips them itself.
 * @return 0, EINVAL (q or txn NULL, shard out of range), ENOSPC, LMDB errors
 *   (as mfsq_enqueue() inside a caller's transaction: abort it).
 * Thread context: the thread owning @p txn.
 */
int mfsq_retain_floor(mfsq_queue *q, MDB_txn *txn, uint32_t shard, uint64_t seq);

/** The next sequence number subscriber @p s will read in @p shard (0 for a
 *  bad shard). Thread context: the thread that uses @p s. */
uint64_t mfsq_sub_position(const mfsq_sub *s, uint32_t shard);

/**
 * Read durable subscriber @p name's stored record: @p acked (NULL, or
 * nshards entries) the next unacknowledged seq per shard, @p lost the
 * messages it lost to retention, @p lagging whether it is marked lagging.
 * Positions of an open subscriber of an MDB_NOSYNC environment may be
 * ahead in the ack log. @return 0, EINVAL (bad name), ENOENT (no such
 * subscriber), MDB_CORRUPTED (a record of the wrong size), LMDB errors of
 * its read transaction. Thread context: any.
 */
int mfsq_subscriber_get(mfsq_queue *q, const char *name, uint64_t *acked, uint64_t *lost,
			int *lagging);

/**
 * Acknowledge, in @p txn, durable subscriber @p name's messages of
 * @p shard before @p next (its stored position is raised to @p next; a
 * position already beyond is kept), whether the subscriber is open or not:
 * for a consumer that acknowledges from another process or thread than the
 * one reading. An open subscriber of this process keeps reading where it
 * is; its own later acks never move the stored position back (they are
 * raised to the store's), and a reopen resumes at @p next.
 * @return 0, EINVAL (bad name, shard, txn NULL), ENOENT (no such
 *   subscriber), ERANGE (@p next beyond the shard's next seq),
 *   MDB_CORRUPTED, ENOSPC, LMDB errors (abort @p txn as for mfsq_enqueue()).
 * Thread context: the thread owning @p txn.
 */
int mfsq_subscriber_ack(mfsq_queue *q, MDB_txn *txn, const char *name, uint32_t shard,
			uint64_t next);

/** A problem found by mfsq_check(): one line of text, "queue NAME: ...". */
typedef void mfsq_check_report(void *arg, const char *problem);

/**
 * Check the tables of queue @p name in @p txn (read-only is enough; the
 * queue need not be open): the configuration record, every shard's state
 * against its subshard index (count, oldest and newest subshard, ids in
 * order), every subshard's table (present; 8-byte keys in its range,
 * dense and in order; message headers an enqueue writes; the newest
 * message just below the next seq), and every durable subscriber's record
 * (size, positions not beyond the stream). Each problem goes to
 * @p report (may be NULL) and is counted in @p problems (may be NULL).
 * @return 0 when the check ran (problems or not), EINVAL (bad arguments),
 *   ENOENT (no such queue), ENOMEM, LMDB errors (MDB_DBS_FULL: the
 *   environment's maxdbs is too small to open the subshards).
 * Thread context: the thread owning @p txn; it opens named databases with
 * mdb_dbi_open(): not concurrently with other openers of the environment.
 */
int mfsq_check(MDB_txn *txn, const char *name, mfsq_check_report *report, void *arg,
	       uint64_t *problems);

/* ---- memory: process-wide cache budget and pressure (pressure.c) ---- */

enum mfsq_pressure_mode {
	MFSQ_PRESSURE_AUTO = 0, /**< /proc/pressure/memory and MemAvailable */
	MFSQ_PRESSURE_ON = 1,	/**< force pressure (tests, operators) */
	MFSQ_PRESSURE_OFF = 2,	/**< never under pressure */
};

/**
 * Set the memory budget shared by every queue cache of the process (bytes,
 * default 64 MiB; 0 disables caching).
 * Thread context: any.
 */
void mfsq_memory_budget(uint64_t bytes);

/**
 * Set the most file-backed memory the process may keep resident before the
 * engine drops the mapped pages of a queue's environment after a commit
 * (bytes, default 16 MiB; 0: never). LMDB's shared mapping otherwise keeps
 * every page it touched resident, so memory would grow with the store; the
 * pages stay in the page cache. A queue drops them at most every 50 ms, so
 * a fast stream may stay above the budget by what it maps in that time.
 * Counted in mfsq_stats.map_trims.
 * Thread context: any.
 */
void mfsq_map_budget(uint64_t bytes);

/** Set how pressure is decided. Thread context: any. */
void mfsq_pressure_mode(enum mfsq_pressure_mode mode);

/** Whether the process is under memory pressure now (re-evaluated at most
 *  every 250 ms in AUTO mode). Thread context: any. */
int mfsq_pressure_now(void);

/* ---- cache sizing model (sizing.c), public so it can be tested ---- */

/** One reader of a shard, as seen by the sizing model. */
struct mfsq_size_reader {
	double rate; /**< messages/s it dequeues from the shard */
	double lag;  /**< messages behind the shard's tail (peak) */
};

/** One shard, as seen by the sizing model. */
struct mfsq_size_shard {
	double enq_rate;      /**< messages/s enqueued */
	double subshard_msgs; /**< messages per subshard */
	unsigned nreaders;
	const struct mfsq_size_reader *readers;
};

/**
 * Estimated restore overhead (subshard loads from the store per second) of a
 * cache of @p cap subshards managed by earliest-estimated-access eviction.
 * Thread context: any (pure function).
 */
double mfsq_sizing_overhead(const struct mfsq_size_shard *shards, unsigned n, unsigned cap);

/**
 * Preferred cache size in subshards, at most @p budget: the smallest size
 * whose estimated overhead is within noise of the best under the budget
 * (where extra memory stops paying). Thread context: any (pure function).
 */
unsigned mfsq_sizing_choose(const struct mfsq_size_shard *shards, unsigned n, unsigned budget);

#ifdef __cplusplus
}
#endif
#endif /* MFSQ_H */
