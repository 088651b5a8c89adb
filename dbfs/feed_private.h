/*
 * What the files of the change feed (dbfs/feed*.c) share: the feed's
 * state, the reader's, and the low helpers they all call. Not a public
 * header: only dbfs/feed*.c include it; dbfs/feed.h is the contract.
 *
 * Who calls whom: a file calls only files on rows below it (checked by
 * the test dbfs-layering-feed, tests/unit/layering.sh):
 *   feed.c          lifetime: start at open, stop at close, upgrade
 *   feed_migrate.c  an old store's one-shard queue into the sharded one
 *   feed_retain.c   retention, expiry of idle subscriptions, stats (dbfs_tick)
 *   feed_reader.c   readers: open, read, ack, close
 *   feed_subs.c     subscriptions' rows, start positions, create/delete/list
 *   feed_outbox.c   the caller, paths, the outbox (the batch's events)
 *   feed_shards.c   the sharded queue's record prefix, ordering, positions
 *   feed_state.c    the feed table's rows, the limits, small accessors
 * and every file uses the inline helpers below.
 */
#ifndef DBFS_FEED_PRIVATE_H
#define DBFS_FEED_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

#define FEED_SHARD    0 /* an older store's queue "feed": its one shard */
#define FEED_ENQUEUER 1 /* the writer id of an exclusive open */
/* The queue (DBFS_FEED_QUEUE_SHARDED): shards, and what each message
 * carries before the event's record (feed_shards.c). */
#define FEED_SHARDS   8
#define FEED_PREFIX   16 /* u64 feed seq, u64 writer; host order */
#define FEED_HELD_MAX 65536 /* messages a reader holds waiting for a hole */
#define PATH_BUF      (64u << 10) /* longest path an event carries */
#define READ_MAX      64	  /* messages one read dequeues */
#define PATH_CACHE    512	  /* longest directory path the leader keeps */
#define REC_OVERHEAD                                                                               \
	64 /* store bytes per record beyond its payload (key,                                      \
	      header, node): for the space estimate */

struct pend {
	struct dbfs_event ev;
	size_t poff, noff, xoff; /* strings in the arena */
};

/* A message a reader of the sharded queue holds until its turn. */
struct feed_held {
	uint64_t seq, writer, qseq;
	uint32_t shard;
	size_t len;
	unsigned char *rec; /* the event's record, copied, and a NUL after it */
};

struct dbfs_feed_reader {
	struct dbfs *fs;
	mfsq_sub *s;
	/* the sharded queue: messages dequeued, ordered by feed seq, not yet
	 * handed out: held[ihead, nheld); those handed out by the last read
	 * are freed by the next (the events point into them) */
	struct feed_held *held;
	size_t ihead, nheld, capheld, spent;
	bool drained;	     /* a dequeue found nothing after the last one held */
	uint64_t *hand_qseq; /* per shard: the last message handed out (0: none) */
	uint64_t *hand_fseq; /*   and its feed seq */
	char name[DBFS_FEED_SUB_MAX + 1]; /* "" : ephemeral */
	uint64_t next;			  /* the next seq this reader expects */
	uint64_t min_ns;		  /* DBFS_FEED_TIME: skip events before it (0: none) */
	uint64_t delivered;		  /* the last seq handed out (0: none) */
	uint64_t acked;			  /* next seq not acknowledged (durable) */
	uint64_t gaps, lost;		  /* since open, not yet written to its row */
	struct mfsq_msg msg[READ_MAX]; /* a dequeue's, held at once */
	struct dbfs_feed_reader *next_r;
};

struct dbfs_feed {
	mfsq_queue *q;
	/* a shard per process (FEED_SHARDS; the feed seq is in each
	 * message's prefix) */
	uint32_t nshards, shard; /* this process's shard */
	uint64_t enqueuer;	 /* its enqueuer id there */
	uint64_t q_block, tx_q_block; /* the feed block of this process's last 'Q' row:
					 committed / in the batch */
	/* the batch (leader only) */
	MDB_txn *txn;
	struct dbfs_caller who;
	struct pend *pend;
	size_t npend, cappend;
	char *arena;
	size_t alen, acap;
	unsigned char *rec;
	size_t rcap;
	struct mfsq_msg_in *msgs;
	uint64_t *seqs, *qseqs; /* the batch's feed seqs, and its queue seqs */
	size_t capmsgs;
	char path[PATH_BUF];
	/* The path of the directory the last event named a child of (most
	 * events of a burst are in one directory): it saves walking the name
	 * rows up to the root, for its children's names and for the walk up
	 * from any inode below it. Valid in the transaction that computed it and,
	 * once that one committed, in the very next (pc_next: nobody, in any
	 * process, committed in between); dropped at once when any
	 * directory's name row changes (dbfs_feed_paths_changed) and when a
	 * batch aborted. Leader only. */
	uint64_t pc_dir; /* 0: none */
	size_t pc_len;
	uint64_t cur_id, pc_next; /* this batch's txn id; the id the cache is valid in */
	char pc_path[PATH_CACHE];
	/* Likewise the path of the inode the last event named (a file's
	 * create, then its writes and setattrs in commits of their own: tar
	 * -x), and the directory of that path; dropped also when that inode's
	 * own name rows change. */
	uint64_t pf_ino, pf_dir; /* 0: none */
	size_t pf_len;
	char pf_path[PATH_CACHE];
	struct dbfs_feed_meta meta, txmeta; /* committed / in the batch */
	size_t tx_n;
	uint64_t tx_id; /* the batch's mdb_txn_id, for mfsq_txn_committed */
	/* published */
	_Atomic uint64_t last_seq, floor;
	_Atomic uint64_t enqueued, trimmed, gaps, subs_expired;
	uint64_t ticked_seq;	   /* next_seq when the queue's maintenance last ran */
	uint64_t saved_seq;	   /* next_seq of the last 'M' written (tick, close) */
	struct dbfs_feed_meta pub; /* f->meta as of the last commit, under lock */
	/* waiters, callback, open readers, limits */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t gen;
	void (*cb)(void *arg, uint64_t last_seq);
	void *cb_arg;
	struct dbfs_feed_reader *readers;
	struct dbfs_feed_limits lim;
};

/* ---- low helpers ---- */

#define QCALL DBFS_QCALL /* internal.h: a queue call from outside a write */

static inline uint64_t feed_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A libmfsq result as a public errno. */
static inline int feed_q_errno(int rc)
{
	return rc ? dbfs_errno(dbfs_queue_err(rc > 0 ? rc : EIO)) : 0;
}

/* The same for a queue call that wrote in its own transaction: a failed
 * write of the store fails the store, as a failed commit does (health.c). */
static inline int feed_q_write_errno(struct dbfs *fs, int rc)
{
	dbfs_health_check(fs, rc, "a write of the change feed");
	return feed_q_errno(rc);
}

/* The feed table's keys: 'M' the totals, 'F' the floor, 'I'+seq a block,
 * 'V' the sharded queue replaced the old one (feed_migrate.c), 'Q'+shard
 * +seq a shard's queue seq of a feed seq (feed_shards.c). */
extern MDB_val feed_key_meta, feed_key_floor, feed_key_migrated;

static inline void feed_block_key(unsigned char k[9], uint64_t seq, MDB_val *key)
{
	k[0] = 'I';
	dbfs_put_be64(k + 1, seq);
	key->mv_size = 9;
	key->mv_data = k;
}

/* The first seq of the block that holds seq. */
static inline uint64_t feed_block_of(uint64_t seq)
{
	return seq ? (seq - 1) / DBFS_FEED_BLOCK * DBFS_FEED_BLOCK + 1 : 1;
}

/* The totals as of the last commit, and the floor. */
static inline void feed_pub_meta(struct dbfs_feed *f, struct dbfs_feed_meta *m, uint64_t *floor)
{
	pthread_mutex_lock(&f->lock);
	*m = f->pub;
	pthread_mutex_unlock(&f->lock);
	*floor = atomic_load(&f->floor);
}

/* ---- feed_state.c ---- */

/* Are the limits within their bounds? */
int feed_limits_ok(const struct dbfs_feed_limits *l);

/* The totals row and the floor as stored in txn: 0, -EIO (damaged) or an
 * LMDB code. */
int feed_read_meta(struct dbfs *fs, MDB_txn *txn, struct dbfs_feed_meta *m, uint64_t *floor);
/* Write the totals row ('M') in a transaction of its own. */
int feed_save_meta(struct dbfs *fs);

/* ---- feed_subs.c ---- */

/* Rewrite a subscription's row (feed_row_fn, in a dbfs_write transaction):
 * `spec` NULL keeps the stored one. */
struct row_ctx {
	const char *name;
	struct dbfs_feed_subrec rec;
	const char *spec;
	bool create;	   /* refuse an existing row (-EEXIST) */
	bool del;	   /* delete the row */
	bool update;	   /* add gaps/lost, set acked/active from rec */
	mfsq_sub *ack_sub; /* with update: acknowledge up to rec.acked - 1 in the queue */
	bool ack_name;	   /* with update: by name, not open here (the row only) */
	bool set_acked;	   /* with update: rec.acked replaces the row's (a replay) */
	const struct dbfs_feed_reader *ack_r; /* with ack_sub: its shards' positions */
};
int feed_row_fn(struct dbfs *fs, MDB_txn *txn, void *arg);
/* 1 if s is a valid subscription name. */
int feed_sub_name_ok(const char *s);
/* 0 if a reader may start at st (NULL: now): -ESTALE for another store's
 * position, -ERANGE past the newest event, -EINVAL malformed. */
int feed_check_start(struct dbfs *fs, const struct dbfs_feed_start *st);
/* Move `s` to `st`; *next gets the reader's expected seq, *min_ns the
 * time filter. */
int feed_seek_to(struct dbfs *fs, mfsq_sub *s, const struct dbfs_feed_start *st, uint64_t *next,
		 uint64_t *min_ns, bool durable);
int feed_sub_delete(struct dbfs *fs, const char *sub);
int feed_sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info,
		 uint64_t *row_acked);
int feed_sub_names(struct dbfs *fs, char (**names)[DBFS_FEED_SUB_MAX + 1], size_t *count);

/* ---- feed_shards.c ---- */

/* A message of f's queue as (feed seq, writer, record), from its prefix.
 * 0, or EBADMSG (a message shorter than its prefix). */
int feed_msg_split(const struct dbfs_feed *f, const struct mfsq_msg *m, uint64_t *seq,
		   uint64_t *writer, const void **rec, size_t *len);
/* The first feed seq of the newest block that began before time_ns (the
 * floor when none): a reader from a time starts there. */
uint64_t feed_seq_at(struct dbfs *fs, uint64_t time_ns);
/* The store's next feed seq as of a write transaction now (the 'M' row,
 * written by every batch of a shared store) or this process's, the later;
 * on a store that takes no writes (read-only, or failed before), the seq
 * after the last event. 0, or -errno of the empty write (-EIO: it failed
 * the store; -ENOMEM). */
int feed_next_now(struct dbfs *fs, uint64_t *out);
/* In txn, after enqueuing a batch whose first event (feed seq `seq`) is
 * queue seq `qseq` of this process's shard: its 'Q' row, when the batch
 * begins a feed block the shard has none of. 0 or an LMDB code. */
int feed_shard_mark(struct dbfs *fs, MDB_txn *txn, uint32_t shard, uint64_t seq, uint64_t qseq);
/* Per shard, a queue seq at or before its first message of feed seq >=
 * seq, from the 'Q' rows: q[nshards] (1: none before). 0 or an LMDB code. */
int feed_shard_positions(struct dbfs *fs, MDB_txn *txn, uint64_t seq, uint64_t *q);
/* Trim each shard's 'Q' rows below floor but its last one at or below
 * it (still needed for the floor). 0 or an LMDB code. */
int feed_shard_trim(struct dbfs *fs, MDB_txn *txn, uint64_t floor);
/* Move subscriber s to feed seq `seq` (every shard to its
 * position, or its oldest message when that was dropped). 0 or a queue
 * code. */
int feed_shard_seek(struct dbfs *fs, mfsq_sub *s, uint64_t seq);
/* The totals ('M') are written now and then (every batch only while
 * shared): add what the queue holds beyond them (after a crash, at most
 * the last second's events), the next seq, the bytes, the newest time
 * (at open). 0 or -errno. */
int feed_recount_sharded(struct dbfs *fs, struct dbfs_feed *f);
/* A reader: hold the dequeued messages m[0, n) in feed seq order.
 * 0 or ENOMEM (those not held are lost to this reader: its next reads
 * hand out a gap record for them). */
int feed_hold(struct dbfs_feed_reader *r, const struct mfsq_msg *m, size_t n);
/* Free what the last read handed out. */
void feed_held_release(struct dbfs_feed_reader *r);
void feed_held_free(struct dbfs_feed_reader *r);

/* ---- feed_migrate.c ---- */

/* An older store's queue "feed" (one shard) into the sharded queue f->q:
 * its retained events, with their seqs, into shard 0, the durable
 * subscribers re-made; then the old queue is emptied. In transactions of
 * its own, before any reader; the feed's rows are the truth throughout,
 * so a crash in between resumes where it stopped. 0 or -errno (err says). */
int feed_migrate(struct dbfs *fs, struct dbfs_feed *f, mfsq_queue *old, char *err, size_t errlen);

#endif
