/*
 * libdbfs internals: the open store, transactions, and the core operations
 * (no FUSE in here; the dbfs/fuse_*.c files are the adapter).
 *
 * Error convention inside libdbfs. An internal function returns one of:
 *
 *   0              success;
 *   a refusal      a negative errno, -4095..-1 (-ENOENT, -EEXIST, -EDQUOT,
 *                  -ENOSPC of dbfs_space_check ...): a logical "no",
 *                  decided before the operation changed anything. In a
 *                  write batch the other operations go on (commit.c);
 *   a store failure  an LMDB return code as LMDB gave it: an MDB_* code
 *                  (MDB_KEYEXIST..MDB_LAST_ERRCODE, about -30800) or a
 *                  positive system errno that LMDB passed on. The write
 *                  transaction may hold part of the operation: the batch is
 *                  aborted (MDB_MAP_FULL: the map grows and it runs again)
 *                  and each operation runs again alone;
 *   a queue error  DBFS_QUEUE_ERR(e), about -1048576 - e: libmfsq's result
 *                  e (a POSITIVE errno) met inside a write transaction. A
 *                  libmfsq result is always wrapped by dbfs_queue_err()
 *                  before a dbfs function returns it, so that it is never
 *                  read as a store failure (LMDB's positive errno). It is
 *                  handled as a store failure (the queue wrote into the same
 *                  transaction), except that DBFS_QUEUE_ERR(EAGAIN) runs the
 *                  batch again, a bounded number of times (commit.c).
 *
 * The ranges do not overlap, so dbfs_is_refusal() and dbfs_is_queue_err()
 * tell them apart; nothing else tests ranges. Code that meets an LMDB code
 * may compare it with a named MDB_* value (MDB_NOTFOUND -> -ENOENT) but
 * maps nothing else: dbfs_errno() (errors.c) is the one boundary that
 * turns any result into the negative errno of the public API (dbfs.h); a
 * FUSE reply takes -dbfs_errno(rc).
 */
#ifndef DBFS_INTERNAL_H
#define DBFS_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <errno.h>

#include "dbfs/dbfs.h"
#include "dbfs/format.h"
#include "dbfs/lookups.h"

struct dbfs_wop;

/* The kernel's cache of this DBFS's files (pagecache.c). */
struct dbfs_cache_ent;
struct dbfs_cache {
	pthread_mutex_t lock;
	_Atomic uint64_t limit; /* bytes; 0: none, nothing counted */
	uint64_t total;         /* estimated bytes cached */
	uint64_t trimmed;       /* bytes asked to drop so far */
	struct dbfs_cache_ent **tab, *head, *tail;
	size_t nbuckets, n;
	bool told;              /* over the limit, owner told, no trim since */
	void (*cb)(void *arg);
	void *cb_arg;
};

/* A growable array of page numbers (gained.c). */
struct dbfs_ids {
	uint64_t *v;
	size_t n, cap;
};

/* What a listed durable point computes with (gained.c), kept between
 * points so that it allocates nothing on the way (a SIGBUS in the map may
 * cut a point short: nothing of it may leak). out.cap is the limit. */
/* A free-list record as it lies in the map (gained.c). */
struct dbfs_rec {
	uint64_t key;
	const void *v;
	size_t size;
};

struct dbfs_recs {
	struct dbfs_rec *v;
	size_t n, cap;
};

struct dbfs_gained {
	/* [0] the older snapshot's free list, [1] the newer's: pages to read,
	 * changed leaves, their records */
	struct dbfs_ids front[2], leaves[2], next;
	struct dbfs_recs rec[2];
	struct dbfs_ids cand, sub, out;
	uint64_t stepped, skipped; /* changed leaves read, shared subtrees skipped (ever) */
	size_t work;               /* page numbers compared by this point */
};

struct dbfs {
	char *dir;
	MDB_env *env;
	MDB_dbi db_super, db_inode, db_dirent, db_dircook, db_data, db_xattr, db_orphan;
	MDB_dbi db_feed;             /* format 3; 0 in a read-only older store */
	struct dbfs_feed *feed;      /* the change feed (feed.c); NULL: feed=off */
	struct dbfs_shared *shared;  /* open shared (dbfs/shared.h); NULL: exclusively */
	MDB_dbi db_expire;           /* the expiry index (expire.c); 0: a read-only older store */
	struct dbfs_expire *expire;  /* delayed work (expire_run.c); NULL: read-only */
	MDB_dbi db_settle;           /* settled events' table (settle.c); 0: read-only older */
	MDB_dbi db_trim;             /* truncated blocks waiting (trim.c); 0: read-only older */
	struct dbfs_settle *settle;  /* the quiet periods wanted (settle.c); NULL: read-only */
	uint8_t uuid[16];            /* the superblock's */
	int lock_fd;
	struct dbfs_options opt;
	uint64_t block_size;       /* of file data, from the superblock (data.c) */

	/* Every transaction holds this for reading; growing the map takes it
	 * for writing (mdb_env_set_mapsize needs no transaction active). */
	pthread_rwlock_t map_lock;
	uint64_t map_size;
	const char *map_addr;      /* where LMDB maps the store (moves on grow) */

	/* Reset read transactions ready for mdb_txn_renew. */
#define DBFS_RPOOL 32
	pthread_mutex_t rpool_lock;
	MDB_txn *rpool[DBFS_RPOOL];
	int rpool_n;

	/* Group commit: writers queue operations; one leader runs a batch in
	 * one LMDB transaction while the next batch gathers. */
	pthread_mutex_t wq_lock;
	pthread_cond_t wq_cond;
	struct dbfs_wop *wq_head, **wq_tail;
	int wq_leader;

	/* Inodes the kernel forgot, to destroy if they have no links left:
	 * reaped in the next write batch, by statfs, dbfs_tick or close, so
	 * that an unlink does not cost a second commit. */
	pthread_mutex_t reap_lock;
	uint64_t *reap;
	size_t nreap, capreap;
	int64_t reap_since;         /* seconds (monotonic) the oldest queued one waits */

	struct dbfs_lookups lookups; /* kernel lookup counts (lookups.c) */
	int space_low;             /* the space reserve is gone (space.c) */
	int space_full;		   /* the reserve could not be restored (space.c) */
	int writemap;              /* the env is open with MDB_WRITEMAP */
	int no_open, no_opendir;   /* the kernel opens by itself (fuse_ops.c, op_init) */
	struct fuse_session *se;   /* for invalidations (dbfs_set_session) */
	struct dbfs_cache cache;
	uint64_t alloc_end;        /* bytes of data.mdb known allocated */

	/* Blocks written in the current write transaction (data.c): a
	 * direct-mapped set, conservative on collisions. Leader only. */
	uint64_t txn_gen;
	struct {
		uint64_t key, gen;
	} written[256];
	/* What this transaction may still free (data.c): free_left bytes,
	 * valid while free_gen and free_txn name it; free_done: what it freed
	 * (bounded or not). Leader only. free_most: the most one transaction
	 * freed since open (written by the leader, read by any thread:
	 * dbfs_expire_stats' freed_txn_max). */
	uint64_t free_gen, free_txn, free_left, free_done;
	int64_t free_t0; /* when it first freed (CLOCK_MONOTONIC ns) */
	_Atomic uint64_t free_most;

	/* FUSE_HANDLE_KILLPRIV_V2 was negotiated (fuse_io.c): this file system
	 * clears set-id bits and capabilities on write, truncate and chown. */
	_Atomic int killpriv_v2;
	_Atomic uint64_t init_unique; /* the FUSE_INIT being answered, 0: none */

	_Atomic uint64_t quota_bytes, quota_inodes;
	/* An I/O error on a write of the store made it read-only (health.c). */
	_Atomic int io_failed;
	char io_reason[160];
	/* A SIGBUS in its maps: the store was truncated under them; nothing
	 * reads them again (guard.c). Where data.mdb [0] and lock.mdb [1] are
	 * mapped; the leader's open write transaction (commit.c). */
	_Atomic int map_lost;
	_Atomic int health_told;   /* dbfs_tick said the health failed */
	_Atomic uintptr_t guard_lo[2], guard_hi[2];
	MDB_txn *wtxn;
	struct {
		_Atomic uint64_t ops, read_bytes, write_bytes, commits, batched_ops, map_grows,
			errors, flushes, flushes_listed, flushes_imaged, flushes_held,
			readers_cleared;
		_Atomic uint64_t by_errno[DBFS_ERRNOS]; /* counters.c */
	} cnt;

	/* Durable points (durable.c). dur_lock: one point at a time, held
	 * across its flushes; dur_stat_lock (short): since and bytes. */
	pthread_mutex_t dur_lock, dur_stat_lock;
	int dur_fd;                 /* dbfs.durable; -1: read-only store */
	uint64_t dur_seq;           /* the last record's number */
	unsigned dur_psize;         /* LMDB's page size */
	MDB_txn *dur_pin;           /* read transaction on snapshot dur_txn */
	MDB_txn *dur_spare;         /* a pin let go, reset: renewed for the next */
	_Atomic uint64_t dur_txn;   /* the newest durable transaction */
	_Atomic uint64_t last_txn;  /* the newest committed one */
	int64_t dur_since_ns;       /* monotonic ns of the oldest commit not durable; 0: none */
	uint64_t dur_bytes;         /* bytes of operations committed since dur_txn */
	_Atomic uint64_t commit_interval_ms;
	bool dur_trust;             /* no points: mode full, or the store is in memory */
	bool dur_listed;            /* listed points (one flush) may be made: ext4, XFS */
	bool dur_imaged;            /* imaged points may be made (dbfs.images) */
	int img_fd;                 /* dbfs.images; -1 until the first imaged point */
	uint64_t img_tail;          /* where the chain's next record goes */
	uint64_t img_size;          /* bytes dbfs.images holds (records or zeros) */
	uint64_t img_lseq;          /* records in the chain since the checkpoint dur_seq */
	unsigned char dur_meta[DBFS_DREC_META]; /* dur_txn's meta page (its record's copy) */
	struct dbfs_gained dur_gained;
	unsigned dur_list_pause;    /* points left to make unlisted after an E2BIG */
	unsigned dur_list_backoff;  /* the pause the next E2BIG sets (doubles while they last) */
	unsigned long dur_gain_tries; /* walks of the free lists (gain()): tests */
	unsigned char *dur_buf;     /* a record being written: DBFS_DREC_SLOT2 bytes */
	/* Pages freed since the durable point (held.c). The leader's:
	 * held_txn, held_cur, held_counted, held_total; a point's (writers
	 * paused): held_at_pin. */
	MDB_txn *held_txn;          /* reset between commits: holds no snapshot */
	MDB_cursor *held_cur;
	uint64_t held_counted;      /* free-list records up to this key are counted */
	uint64_t held_total;        /* pages they name, since the store opened */
	uint64_t held_at_pin;       /* held_total at the newest point's pin */
	_Atomic uint64_t held_base; /* held_total at the durable point's pin */
	_Atomic bool held_asked;    /* the owner was asked for a point, not made yet */
	_Atomic bool held_hard;     /* past DBFS_HELD_HARD limits: writers wait */
	void (*held_cb)(void *arg); /* dbfs_set_point_callback; under wq_lock, no leader */
	void *held_cb_arg;
	uint32_t sb_version;        /* the superblock's format version as opened */
	bool upgrading;             /* upgrade5.c at work: records are written at format 5 size */
};

/* A write operation run by dbfs_write(); it must check everything that can
 * fail for a logical reason before its first change, so that a batch that
 * fails can only fail for a store reason (then each operation is retried
 * alone). */
typedef int (*dbfs_write_fn)(struct dbfs *fs, MDB_txn *txn, void *arg);

/* Run fn in a write transaction, batched with concurrent writers; returns
 * fn's result, or the commit's error. Grows the map on MDB_MAP_FULL.
 * dbfs_write_sized tells how many data bytes fn may write at most, so that
 * a batch stays within DBFS_BATCH_BYTES (the space reserve's half). */
int dbfs_write(struct dbfs *fs, dbfs_write_fn fn, void *arg);
int dbfs_write_sized(struct dbfs *fs, dbfs_write_fn fn, void *arg, size_t bytes);
#define DBFS_BATCH_BYTES (1u << 20)
/* ---- durable points (durable.c) ---- */
/* After the store opened read-write: the store as it is becomes the first
 * durable point (dbfs.durable made if missing). 0 or a negative errno. */
int dbfs_durable_start(struct dbfs *fs, char *err, size_t errlen);
/* The leader committed transaction txnid holding `bytes` of operations. */
void dbfs_durable_committed(struct dbfs *fs, uint64_t txnid, size_t bytes);
/* Make every commit so far durable (shared with concurrent callers). 0 or
 * a store failure. Never from a thread that holds the writer. */
int dbfs_durable_point(struct dbfs *fs);
/* The same from the group commit's leader (between transactions); skips
 * it when another point is in progress. */
int dbfs_durable_point_leader(struct dbfs *fs);
/* The open's last point was made (a checkpoint: no point of the open is
 * imaged): points may be imaged from now on if the store's format (7)
 * says so to every build that opens it, so that none that would not
 * replay dbfs.images opens it after a power loss. */
void dbfs_durable_opened(struct dbfs *fs);
/* A point if the oldest change not durable is commit_interval old. */
int dbfs_durable_tick(struct dbfs *fs);
/* A last point; ends the pin and closes dbfs.durable. */
void dbfs_durable_stop(struct dbfs *fs);
/* ---- imaged points: dbfs.images (images.c) ---- */
/* Append the record of an imaged point (format.h) for snapshot txnid
 * (meta: its meta page; pinned) that gained pg[0..n) since the point
 * dur_txn, whose checkpoint is record dur_seq, and flush the file. 0;
 * EFBIG: past the chain's limit, or too big to image (the caller makes a
 * checkpoint; also when dbfs.images cannot be made or opened, and then
 * for good: dur_imaged is cleared); or the errno of pwrite/fdatasync
 * (ENOSPC: a disk too full for the log). Nothing counts of a record that failed: the next one
 * goes to its place. dur_lock held. */
int dbfs_images_append(struct dbfs *fs, uint64_t txnid, const unsigned char *meta,
		       const uint64_t *pg, uint64_t n);
/* A checkpoint was recorded: the next record starts a new chain. */
void dbfs_images_reset(struct dbfs *fs);
void dbfs_images_close(struct dbfs *fs);
#define DBFS_ILOG_MIN (8ull << 20)
#define DBFS_ILOG_MAX (64ull << 20)
#define DBFS_ILOG_GROW (1ull << 20) /* dbfs.images grows by whole MiBs of zeros */
/* ---- pages the pin keeps from reuse (held.c) ---- */
/* The leader, map lock held, after committing info->me_last_txnid: count
 * the pages the commits since the last call freed; past the limit, ask the
 * owner for a point (its callback, once until the point is made). */
void dbfs_held_committed(struct dbfs *fs, const MDB_envinfo *info);
/* A point pinned its snapshot (writers paused) / made it durable. */
void dbfs_held_pinned(struct dbfs *fs);
void dbfs_held_moved(struct dbfs *fs);
/* A point was asked for and not made yet. Any thread. */
bool dbfs_held_due(struct dbfs *fs);
/* After a write operation, outside the writer (dbfs_write): past the hard
 * limit, wait for the point in progress, and make one if still past. */
void dbfs_held_throttle(struct dbfs *fs);
/* The store's first point is txnid (dbfs_durable_start) / close: let go of
 * the read transaction (not after a fault in the maps: then it is kept). */
void dbfs_held_start(struct dbfs *fs, uint64_t txnid);
void dbfs_held_stop(struct dbfs *fs);
/* Pages freed since a point that ask for the next one: at least MIN, an
 * eighth of the pages the file uses, at most MAX (4 KiB pages: 8 MiB and
 * 256 MiB). MIN is half what a listed record names, so that the point can
 * be listed (one flush). */
#define DBFS_HELD_MIN (DBFS_DREC_LIST_MAX / 2)
#define DBFS_HELD_MAX (64u * 1024u)
#define DBFS_HELD_HARD 4u
#define DBFS_TICK_NS 1000000000ll /* dbfs_tick's period, as dbfs.h asks */
/* Close dbfs.durable and free what points keep, without a last point (a
 * store whose maps faulted, guard.c). */
void dbfs_durable_drop(struct dbfs *fs);
/* Tests: the monotonic clock of durable.c (ns); treat a store in memory
 * as on a disk (it makes durable points); listed points: -1 where the
 * file system's flush is the device's (ext4, XFS), 0 never, 1 always. */
extern int64_t (*dbfs_durable_clock)(void);
extern bool dbfs_durable_test_on_disk;
extern int dbfs_durable_test_listed;
/* Tests: imaged points: -1 wherever points are made, 0 never. */
extern int dbfs_durable_test_imaged;

/*
 * gained.c: the pages of the tree of snapshot T' that the tree of T =
 * from_txnid does not use (see the file's comment), sorted, into g->out
 * (at most g->out.cap of them). Both pinned by read transactions, T's
 * open since before any later commit; from_meta, to_meta: their meta
 * pages from byte 16 on (DBFS_DREC_META bytes, as durable.c copies them);
 * map, map_size: where the store is mapped (fs->map_addr, map.c); psize:
 * LMDB's page size. Reads the map: the caller holds the map lock for
 * reading. Returns 0, E2BIG (more than g->out.cap pages, more than
 * DBFS_GAINED_BUDGET page numbers to compare, more than DBFS_GAINED_STEPS
 * pages of the free lists to read, a page that does not read as LMDB
 * 0.9's, or no map known), or ENOMEM.
 */
int dbfs_gained_pages(struct dbfs_gained *g, const void *map, uint64_t map_size,
		      uint64_t from_txnid, const unsigned char *from_meta,
		      const unsigned char *to_meta, size_t psize);
/* After a point: free the work arrays that grew large (all but out), so a
 * large point does not keep them for the store's lifetime. */
void dbfs_gained_trim(struct dbfs_gained *g);
void dbfs_gained_free(struct dbfs_gained *g);
/* What a point may compare before it makes a point of two flushes instead
 * (about 0.3 ms of merging on this machine). */
#define DBFS_GAINED_BUDGET (256u * 1024u)
/* ... and the pages of the two free lists it may read (those the two
 * snapshots do not share, and the branch pages above them). */
#define DBFS_GAINED_STEPS 1024u
/* Where LMDB 0.9's meta (from byte 16 of its page, as dbfs.durable keeps
 * it) holds the free list's root page (mm_dbs[0].md_root). */
#define DBFS_LMDB_META_FREE_ROOT 64u
/* Points made with two flushes, without trying to list, after points in
 * a row that could not be listed, at most (durable.c: 0, 1, 2, 4, ...). */
#define DBFS_LIST_PAUSE 32u
/* Count a request answered with errno `e` (> 0) in errors and by_errno
 * (counters.c). Any thread, no lock. */
void dbfs_count_error(struct dbfs *fs, int e);
/* For dbfs_counters: age of the oldest commit not durable, bytes since. */
void dbfs_durable_state(struct dbfs *fs, uint64_t *age_ms, uint64_t *bytes);

/* Grow the map if it is still `seen` bytes (takes the map lock; map.c). */
int dbfs_grow_map(struct dbfs *fs, uint64_t seen);
/* Another process grew the map (a shared store; mdb_txn_begin said
 * MDB_MAP_RESIZED): take its size. No transaction of this thread open;
 * takes the map lock. 0 or an LMDB error. */
int dbfs_adopt_map(struct dbfs *fs);
/* Restore the space reserve before a batch (leader only). */
void dbfs_space_refresh(struct dbfs *fs);
/* Does the store's file system support fallocate on fd? */
int dbfs_space_supported(int fd);
/* Pages in LMDB's free list as of read transaction `t`: counted from the
 * B-trees' sizes (-1 when `t` is not the newest snapshot or the store holds
 * a named database DBFS does not know), or read record by record. */
int64_t dbfs_free_pages_counted(struct dbfs *fs, MDB_txn *t);

/* statfs of the DBFS: sizes in 4 KiB blocks, free space of the backing file
 * system plus what the store holds free, within quotas; inodes queued for
 * reaping count as gone. Commits nothing unless more than 256 are queued.
 * Returns 0 or an LMDB error. */
struct statvfs;
int dbfs_statfs(struct dbfs *fs, struct statvfs *out);
uint64_t dbfs_free_pages_listed(MDB_txn *t);
/* Pages that transaction `id` freed, as of read transaction `t`: its
 * free-list record (key: the transaction id; value: a count and the page
 * numbers), 0 when it has none. */
uint64_t dbfs_free_pages_of(MDB_txn *t, size_t id);

/* -ENOSPC when the store's file system has no room left for growth; an
 * operation that adds data calls it before its first change. */
static inline int dbfs_space_check(struct dbfs *fs)
{
	return fs->space_low ? -ENOSPC : 0;
}

/* Bytes inside the store's file that LMDB can reuse (free list and the
 * preallocated tail): free space that statfs must count. */
uint64_t dbfs_slack_bytes(struct dbfs *fs);
/* Bytes that operations adding data can still get, `pending` more bytes
 * freed counted as free (reaps queued): 0 exactly when the next batch
 * refuses them with ENOSPC (space.c). For statfs's f_bavail. */
uint64_t dbfs_space_writable(struct dbfs *fs, uint64_t pending);

/* ---- the reap queue (reap.c) ---- */
/* Queue a forgotten inode for reaping (forget handler). */
void dbfs_reap_later(struct dbfs *fs, uint64_t ino);
/* Queue it without reaping now: safe inside a write transaction. */
void dbfs_reap_queue(struct dbfs *fs, uint64_t ino);
/* From request handlers: reap when inodes have waited a second or more,
 * in case no write comes to take them along. */
void dbfs_reap_due(struct dbfs *fs);
/* Reap every queued inode now, in one write transaction. */
int dbfs_reap_now(struct dbfs *fs);

/* readers.c: clear the reader slots that processes gone (SIGKILL) left in
 * lock.mdb, counting them in cnt.readers_cleared. 0, or an LMDB error of
 * mdb_reader_check (its mutex). Outside any request and transaction, under
 * a guard: dbfs_open and dbfs_tick. */
int dbfs_readers_check(struct dbfs *fs);
/* Leader: move the queued inodes into a batch operation (commit.c). */
struct dbfs_reap_list {
	uint64_t *ino;
	size_t n;
};
int dbfs_reap_fn(struct dbfs *fs, MDB_txn *txn, void *arg); /* arg: struct dbfs_reap_list */

/* Read transactions (readtxn.c). dbfs_read_begin takes the map lock shared; the
 * transaction (and any pointer into the map) is valid until dbfs_read_end. */
int dbfs_read_begin(struct dbfs *fs, MDB_txn **txn); /* 0 or a store failure */
void dbfs_read_end(struct dbfs *fs, MDB_txn *txn);

/* Find where LMDB mapped the store (sets map_addr, map_size; map.c). */
void dbfs_find_map(struct dbfs *fs);

/* ---- errors (errors.c; see "Error convention" above) ---- */
static inline bool dbfs_is_refusal(int rc)
{
	return rc < 0 && rc > -4096;
}

#define DBFS_QUEUE_ERR_BASE (-(1 << 20))
#define DBFS_QUEUE_ERR(e)   (DBFS_QUEUE_ERR_BASE - (e))

/* Wrap a libmfsq result (0 or a positive errno) for a dbfs return. */
static inline int dbfs_queue_err(int mq_rc)
{
	return mq_rc ? DBFS_QUEUE_ERR(mq_rc) : 0;
}

static inline bool dbfs_is_queue_err(int rc)
{
	return rc < DBFS_QUEUE_ERR_BASE && rc > DBFS_QUEUE_ERR(4096);
}

/* The queue's errno inside a queue error. */
static inline int dbfs_queue_errno(int rc)
{
	return DBFS_QUEUE_ERR_BASE - rc;
}

/*
 * The meta pages of data.mdb, checked before LMDB reads them (metacheck.c):
 * LMDB 0.9.24 checks their flag, magic and version but takes the page size
 * and the last page as given (a damaged page size: SIGBUS in mdb_env_open).
 * Read both meta pages of `dir`/data.mdb and refuse a store whose meta
 * pages have a bad flag, magic or version, a page size that is not a
 * power of two in LMDB's range or that is not where the second meta page
 * really is (both must agree), or whose newer meta page's last page lies
 * beyond the end of the file.
 * Returns 0 (also when data.mdb is missing or empty: dbfs_open decides
 * about those), -EINVAL with "store is damaged: ..." in `err`, or the
 * -errno of open/fstat/pread with the reason in `err`.
 * Thread context: any; reads the file only (no LMDB call, no lock).
 */
int dbfs_meta_check(const char *dir, char *err, size_t errlen);

/* The errno boundary: 0, or the negative errno for any internal result. */
int dbfs_errno(int rc);

/* Fault injection (faults.c) for tests: when > 0, the Nth following LMDB data call
 * (get/put/del/cursor_put/cursor_del) made through the wrappers below fails
 * with EIO. 0 disables. Not thread-safe; unit tests only. */
extern long dbfs_fail_countdown;
int dbfs_fail_check(void);
/* When true, the store's file system is full: fallocate fails with ENOSPC
 * and statfs sees no room (space.c). Unit tests only. */
extern bool dbfs_fault_disk_full;

static inline int dbfs_get(MDB_txn *t, MDB_dbi d, MDB_val *k, MDB_val *v)
{
	if (dbfs_fail_countdown && dbfs_fail_check())
		return EIO;
	return mdb_get(t, d, k, v);
}

static inline int dbfs_put(MDB_txn *t, MDB_dbi d, MDB_val *k, MDB_val *v, unsigned fl)
{
	if (dbfs_fail_countdown && dbfs_fail_check())
		return EIO;
	return mdb_put(t, d, k, v, fl);
}

static inline int dbfs_del(MDB_txn *t, MDB_dbi d, MDB_val *k, MDB_val *v)
{
	if (dbfs_fail_countdown && dbfs_fail_check())
		return EIO;
	return mdb_del(t, d, k, v);
}

static inline int dbfs_cursor_del(MDB_cursor *c)
{
	if (dbfs_fail_countdown && dbfs_fail_check())
		return EIO;
	return mdb_cursor_del(c, 0);
}

/* ---- health (health.c) ---- */
/* A write of the store (`what`: "commit", "flush") ended in rc: on EIO or
 * MDB_PANIC the store becomes read-only for good (dbfs_health). */
void dbfs_health_check(struct dbfs *fs, int rc, const char *what);
/* Writes refused since an I/O error: -EROFS, else 0. */
static inline int dbfs_health_writable(struct dbfs *fs)
{
	return atomic_load(&fs->io_failed) ? -EROFS : 0;
}

/* ---- the clock (clock.c) ---- */
void dbfs_now(int64_t *sec, uint32_t *nsec);
/* Set the chosen timestamps of `in` to now (in memory; the caller stores it). */
void dbfs_touch(struct dbfs_inode *in, int atime, int mtime, int ctime);
/* Monotonic seconds, for housekeeping intervals. */
int64_t dbfs_mono_sec(void);

/* ---- super / usage (super.c) ---- */
int dbfs_format(struct dbfs *fs, MDB_txn *txn);
/* The block size of a new store: one LMDB page less its header. */
uint64_t dbfs_page_block(struct dbfs *fs);
int dbfs_super_check(struct dbfs *fs, MDB_txn *txn, char *err, size_t errlen);
/* A write operation: rewrite the superblock as the current format. */
int dbfs_super_upgrade_fn(struct dbfs *fs, MDB_txn *txn, void *arg);
int dbfs_alloc_ino(struct dbfs *fs, MDB_txn *txn, uint64_t *ino);
int dbfs_usage_get(struct dbfs *fs, MDB_txn *txn, struct dbfs_usage_rec *u);
int dbfs_usage_add(struct dbfs *fs, MDB_txn *txn, int64_t dbytes, int64_t dinodes);
/* Rewrite the usage record as it is: one page changes, so the commit is a
 * real one and advances the transaction id (space.c). */
int dbfs_usage_touch(struct dbfs *fs, MDB_txn *txn);

/* ---- inodes (inode.c) ---- */
int dbfs_inode_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in);
/* Symlink target: returns a pointer into the map (valid with the txn). */
int dbfs_inode_get_link(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char **target,
			size_t *len);
int dbfs_inode_put(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in);
int dbfs_inode_put_link(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
			const char *target, size_t len);
/* Delete an inode with its data and xattrs, fix usage, drop from orphans.
 * A file with more data than one transaction may free (DBFS_FREE_MAX)
 * loses part of it and waits in the orphan table: *more is set, call
 * again in a new transaction. */
int dbfs_inode_destroy(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int *more);
/* The inode lost its last link: destroy it now, or park it in the orphan
 * table while the kernel still knows it. */
int dbfs_inode_unlinked(struct dbfs *fs, MDB_txn *txn, uint64_t ino);
/* Destroy orphans, within one transaction's budget: *more is set when some
 * are left (call again in a new transaction). */
int dbfs_orphans_reclaim(struct dbfs *fs, MDB_txn *txn, uint64_t *count, int *more);
void dbfs_inode_to_stat(const struct dbfs_inode *in, uint64_t ino, struct stat *st);

/* ---- directories (dir.c) ---- */
int dbfs_dir_lookup(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t len,
		    struct dbfs_dirent_val *out);
/* Add an entry dir/name -> ino; updates dir (in memory: nentries,
 * next_cookie) and the child cin (its names, dbfs_name_added); the caller
 * writes both back. 0, -EEXIST-like MDB_KEYEXIST, or a store failure. */
int dbfs_dir_add(struct dbfs *fs, MDB_txn *txn, uint64_t dir, struct dbfs_inode *din,
		 const char *name, size_t len, uint64_t ino, struct dbfs_inode *cin);
/* Point the existing entry `old` (same cookie) at another inode (rename's
 * exchange); changes neither dir's counts nor its cookies nor the inodes'
 * names (the caller calls dbfs_name_removed, then dbfs_name_added). */
int dbfs_dir_replace(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t len,
		     const struct dbfs_dirent_val *old, uint64_t ino, uint32_t type);
/* Remove the entry dir/name (dv); updates din's counts and the child cin's
 * names (dbfs_name_removed: cin->nlink must still count this name); the
 * caller writes both back. */
int dbfs_dir_remove(struct dbfs *fs, MDB_txn *txn, uint64_t dir, struct dbfs_inode *din,
		    const char *name, size_t len, const struct dbfs_dirent_val *dv,
		    struct dbfs_inode *cin);

/* ---- an inode's names (names.c, format.h "inode") ---- */
/* The first name of `in`: its directory, and the name (pointing into the
 * map, valid until the transaction writes again). MDB_NOTFOUND when it
 * has none (unlinked, the root, or damage), or a store failure. */
int dbfs_first_name(struct dbfs *fs, MDB_txn *txn, const struct dbfs_inode *in, uint64_t *dir,
		    const char **name, size_t *len);
/* Entry dir/name (cookie) now names ino: the record's first name if it has
 * none (in memory: the caller writes `in` back), else an ilink row. 0 or a
 * store failure. */
int dbfs_name_added(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		    uint64_t dir, uint64_t cookie, const char *name, size_t len);
/* Entry dir/name (cookie) no longer names ino: its row goes, or, if it was
 * the first name, the lowest row is promoted into `in` (in memory; only
 * searched for when in->nlink > 1 for a non-directory). 0 or a store
 * failure. */
int dbfs_name_removed(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		      uint64_t dir, uint64_t cookie, const char *name, size_t len);
/* Format 4 and older -> 5 (upgrade5.c), in pieces of at most
 * dbfs_upgrade_piece keys, each its own transaction, going on from where
 * an earlier open stopped: every inode record in the new size, names
 * rebuilt from dirent, the superblock's version raised. At open only,
 * before anything else writes. 0 or a store failure (the store is left at
 * the last piece's end: whole, and the next read-write open goes on). */
int dbfs_names_upgrade(struct dbfs *fs);
/* Keys per piece of the upgrade (default 16384); tests make it small. */
extern long dbfs_upgrade_piece;
/* Iterate entries with cookie >= from. cb returns non-zero to stop (that
 * value is returned). Name pointers are into the map. */
typedef int (*dbfs_dir_cb)(void *arg, uint64_t cookie, uint64_t ino, uint32_t type,
			   const char *name, size_t len);
int dbfs_dir_iter(struct dbfs *fs, MDB_txn *txn, uint64_t dir, uint64_t from, dbfs_dir_cb cb,
		  void *arg);
int dbfs_name_check(const char *name, size_t len);
/* Key of the name row ino <- dir/name (in "inode") into kb (16 + len bytes). */
void dbfs_ilink_key(unsigned char *kb, uint64_t ino, uint64_t dir, const char *name, size_t len,
		    MDB_val *k);

/* ---- file data (data.c) ---- */
int dbfs_data_write(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		    uint64_t off, const void *buf, size_t len);
/* Bytes of new allocation a write would need (for quota checks). */
int dbfs_data_write_cost(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t off, size_t len,
			 uint64_t *cost);
/* Set the file's size, deleting the blocks past it, or (a large tail, or
 * blocks waiting already) leaving them to the background reclaim
 * (trim.c). _now deletes them all in txn, those waiting too. */
int dbfs_data_truncate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		       uint64_t size);
int dbfs_data_truncate_now(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
			   uint64_t size);
int dbfs_data_punch(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		    uint64_t off, uint64_t len);
int dbfs_data_allocate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		       uint64_t off, uint64_t len);
/* Describe [off, off+len) of a file as iovecs into the map (holes point at
 * a static zero buffer). Sets the number of iovecs (<= max) in *niov and the
 * byte count in *got; stops early when max is reached. Returns 0 or a store
 * failure (internal.h's convention: never a refusal, so that a failed read
 * inside a write transaction aborts it). */
struct iovec;
int dbfs_data_map(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		  uint64_t off, size_t len, struct iovec *iov, int max, size_t *got, int *niov);
/* Copy [off, off+len) of a file into buf, holes as zeros; *got is short
 * only at the end of the file. Returns 0 or a store failure. */
int dbfs_data_read(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		   uint64_t off, size_t len, void *buf, size_t *got);
/* Delete a file's blocks, as many as the transaction's budget allows
 * (DBFS_FREE_MAX bytes, DBFS_FREE_NS):
 * *more is set when some are left for another transaction. *dalloc gets
 * the (negative) change of alloc; the caller updates inode and usage. */
int dbfs_data_delete_some(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int64_t *dalloc,
			  int *more);
/* The lowest block `cut` in [first, end) such that the blocks of `ino` in
 * [cut, end) fit in what this transaction may still free (DBFS_FREE_MAX
 * less what it freed): `first` when they all fit. */
/* Zero the block holding offset `size` from there on (shrinking or
 * deleting its value), leaving every other block: the partial block of a
 * truncate whose whole blocks the reclaim frees (trim.c). */
int dbfs_data_cut_block(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
			uint64_t size);
/* Delete the blocks [first, end) whatever the file's size; in->alloc and
 * usage follow, *freed gets the bytes freed. With `more`, from the bottom
 * up within what the transaction may free (DBFS_FREE_MAX, DBFS_FREE_NS),
 * *more set when blocks are left; without, all (the caller bounds the
 * range). 0 or a store failure. */
int dbfs_data_drop(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		   uint64_t first, uint64_t end, uint64_t *freed, int *more);
/* Ask the kernel to read ahead (MADV_WILLNEED: no wait) the pages of up
 * to `bytes` of the blocks of `ino` in [first, end), from the bottom up or
 * (down) from the top down: freeing a block reads its page, which then
 * comes from memory rather than from the disk while the writer is held.
 * Any transaction (a read one: the reclaim thread before its piece).
 * Advice only: no error. */
void dbfs_data_prefetch(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first,
			uint64_t end, bool down, uint64_t bytes);
/* The bytes the blocks [first, end) of `ino` hold (alloc units): one
 * cursor step per block. 0 or a store failure. */
int dbfs_data_held(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first, uint64_t end,
		   uint64_t *bytes);
int dbfs_data_free_cut(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first, uint64_t end,
		       uint64_t *cut);
/* Data bytes one transaction frees by deleting files (dbfs_data_delete_some):
 * every freed page costs LMDB fresh pages (its free-list record, copied
 * leaves), and on a full disk a transaction has only the space reserve
 * (space.c) to write them in. 64 MiB of 4080-byte blocks: about 128 KiB of
 * free list and 140 leaf pages. */
#define DBFS_FREE_MAX (64ull << 20)
/* Time one transaction may spend in bounded deletes (those with `more`:
 * the background reclaim, a growing request's uncover): to free a block
 * LMDB reads its page's header, so a piece whose pages left the page
 * cache reads them from the disk while it holds the writer (64 MiB:
 * 16,000 pages). Past this it stops, freeing at least a batch of blocks
 * per call, and goes on in the next transaction. */
#define DBFS_FREE_NS (20 * 1000000ll)
/* Tests: the clock of DBFS_FREE_NS (CLOCK_MONOTONIC ns). */
extern int64_t (*dbfs_free_clock)(void);
static inline uint64_t dbfs_alloc_round(uint64_t n)
{
	return (n + DBFS_ALLOC_UNIT - 1) / DBFS_ALLOC_UNIT * DBFS_ALLOC_UNIT;
}

/* ---- the kernel's cache of the files (pagecache.c) ---- */
int dbfs_cache_init(struct dbfs *fs);
void dbfs_cache_destroy(struct dbfs *fs);
/* `bytes` of inode `ino` (now `size` bytes long) went into the kernel. */
void dbfs_cache_note(struct dbfs *fs, uint64_t ino, uint64_t bytes, uint64_t size);
void dbfs_cache_truncated(struct dbfs *fs, uint64_t ino, uint64_t size);
/* The kernel forgot the inode: its pages are gone. */
void dbfs_cache_forget(struct dbfs *fs, uint64_t ino);

/* ---- the FUSE channel (fuse_io.c) ---- */
/* Did the request this thread is processing carry FUSE_WRITE_KILL_SUIDGID? */
bool dbfs_io_write_kill(void);
/* May the request this thread processes be answered after its handler
 * returned, by another thread? Only one read through dbfs_fuse_io's hook
 * (dbfs.h, dbfs_io_received). */
bool dbfs_io_reply_later_ok(void);
/* The map guard's view of the reply (fuse_guard.c): forget any reply seen,
 * and was one sent since (by this writev hook or dbfs_io_replied)? */
void dbfs_io_reply_reset(void);
bool dbfs_io_reply_sent(void);

/* ---- xattrs (xattr.c) ---- */
int dbfs_xattr_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		   MDB_val *val);
int dbfs_xattr_set(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		   const void *val, size_t len, int flags);
int dbfs_xattr_remove(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name);
/* List names as NUL-terminated strings into buf (size 0: only count).
 * Returns the length needed in *need; -ERANGE if size too small. */
int dbfs_xattr_list(struct dbfs *fs, MDB_txn *txn, uint64_t ino, char *buf, size_t size,
		    size_t *need, int privileged);
int dbfs_xattr_delete_all(struct dbfs *fs, MDB_txn *txn, uint64_t ino);

/* ---- POSIX ACLs (acl.c) ---- */
#define DBFS_ACL_ACCESS  "system.posix_acl_access"
#define DBFS_ACL_DEFAULT "system.posix_acl_default"
/* Validate an ACL xattr value; -EINVAL if malformed. */
int dbfs_acl_valid(const void *val, size_t len);
/* An access ACL was set: derive the mode's permission bits from it. */
void dbfs_acl_to_mode(const void *val, size_t len, uint32_t *mode);
/* chmod: rewrite the access ACL's owner/mask-or-group/other entries. */
int dbfs_acl_chmod(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint32_t mode);
/* New node in a directory: its mode from the create mode and the parent's
 * default ACL, or the umask when the parent has none. */
int dbfs_acl_inherit_mode(struct dbfs *fs, MDB_txn *txn, uint64_t parent, uint32_t *mode,
			  uint32_t umask, int *has_default);
/* Store the new node's ACLs from the parent's default ACL (mode as
 * computed by dbfs_acl_inherit_mode). */
int dbfs_acl_inherit(struct dbfs *fs, MDB_txn *txn, uint64_t parent, uint64_t ino,
		     uint32_t mode);

/* ---- the change feed (dbfs/feed*.c; public side dbfs/feed.h) ---- */
/* Who asked for an operation: the FUSE request's header (fuse_io.c keeps
 * it per thread), else the thread's fsuid/fsgid and pid 0. */
struct dbfs_caller {
	uint32_t uid, gid, pid;
};
void dbfs_caller_current(struct dbfs_caller *c);
extern __thread struct dbfs_caller dbfs_tls_caller;
extern __thread int dbfs_tls_caller_set;
/* dbfs_open: after the tables are open and the format upgraded, before
 * the first operation. feed=off or read-only without a queue: fs->feed
 * stays NULL. 0 or a negative errno with the reason in err. */
int dbfs_feed_start(struct dbfs *fs, char *err, size_t errlen);
void dbfs_feed_stop(struct dbfs *fs);
/* Named databases the feed's queue may hold open (for mdb_env_set_maxdbs). */
unsigned dbfs_feed_dbs_needed(void);
/* The group commit's leader, around every batch (commit.c): begin resets
 * what the batch noted; op names the caller of the operation about to
 * run; end enqueues the batch's events in its transaction (0, a store
 * failure, or a queue error); committed publishes them and wakes readers. */
void dbfs_feed_batch_begin(struct dbfs *fs, MDB_txn *txn);
void dbfs_feed_batch_op(struct dbfs *fs, const struct dbfs_caller *who);
int dbfs_feed_batch_end(struct dbfs *fs, MDB_txn *txn);
void dbfs_feed_batch_committed(struct dbfs *fs);
/* A shared store's notifier (shared.c) read the feed up to seq, other
 * processes' events included: last_seq grows to it and this process's
 * waiting readers and notify callback are woken, as by a commit here
 * (acks and starts up to it are then in range). Not from a request. */
void dbfs_feed_seen(struct dbfs *fs, uint64_t seq);
/* An operation changed the store: what its event says (ops_*.c). Inside a
 * batch's transaction only (else nothing is noted): write operations run
 * directly in a transaction of their own (tests, housekeeping) have no
 * event. `in` is the inode after the change. name/new_name NUL-free,
 * not terminated. 0 or a store failure (reading ilink). */
struct dbfs_ev_note {
	unsigned op, flags;
	uint64_t ino;
	const struct dbfs_inode *in;
	uint64_t parent;        /* 0: the path is the inode's own (ilink) */
	const char *name;
	size_t name_len;
	uint64_t new_parent;    /* rename, link: the new name's directory */
	const char *new_name;
	size_t new_name_len;
	uint64_t off, len;
	uint32_t attr_mask;
	const char *xattr;
};
int dbfs_feed_note(struct dbfs *fs, MDB_txn *txn, const struct dbfs_ev_note *n);
/* dbfs_tick: retention, idle subscriptions, the queue's maintenance. */
int dbfs_feed_tick(struct dbfs *fs);

/* Who asked for the operation the leader is running (the batch's op, as
 * dbfs_feed_batch_op named it); NULL with feed=off. Leader only. */
const struct dbfs_caller *dbfs_feed_caller(struct dbfs *fs);

/* A libmfsq call that may write, from outside a write transaction: under
 * the map lock held shared (the map must not grow under it), and when the
 * queue's own transaction found the map full (ENOSPC), grow it and call
 * again (at most 3 times). rc gets the call's result. */
#define DBFS_QCALL(fs, rc, expr)                                                                   \
	do {                                                                                       \
		for (int qtries_ = 0;; qtries_++) {                                                \
			pthread_rwlock_rdlock(&(fs)->map_lock);                                    \
			uint64_t qseen_ = (fs)->map_size;                                          \
			(rc) = (expr);                                                             \
			pthread_rwlock_unlock(&(fs)->map_lock);                                    \
			if ((rc) != ENOSPC || qtries_ >= 3 || dbfs_grow_map((fs), qseen_))         \
				break;                                                             \
		}                                                                                  \
	} while (0)

/* ---- file expiry (expire.c, expire_run.c; public side dbfs/expire.h) ---- */
/* Is `name` user.dbfs.expire? */
bool dbfs_expire_name(const char *name);
/* setxattr of user.dbfs.expire on `ino` (record `in`): checks the value
 * and the caller (refusals before any change), then writes the attribute
 * as "@EPOCH", the index row and the queue's message. */
int dbfs_expire_set(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		    const void *val, size_t len, int flags);
/* The attribute went (removexattr, the inode's xattrs deleted): drop the
 * index row if any. 0 or a store failure. */
int dbfs_expire_cancel(struct dbfs *fs, MDB_txn *txn, uint64_t ino);
/* The index row of `ino`: 0 (*due_sec set), MDB_NOTFOUND, a store failure. */
int dbfs_expire_row(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t *due_sec);
/* The queue's delayed message for (ino, due) in txn (expire_run.c). */
int dbfs_expire_enqueue(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t due_sec);
/* dbfs_open (read-write, after the feed): the queue "later", its
 * subscriber, and the thread when something is scheduled. 0 or a negative
 * errno with err set. stop: before the feed stops (joins the thread). */
int dbfs_expire_start(struct dbfs *fs, char *err, size_t errlen);
void dbfs_expire_stop(struct dbfs *fs);
/* The leader, after each commit: wake (or start) the thread when the
 * transaction scheduled something or added reclaim work. */
void dbfs_expire_committed(struct dbfs *fs);
/* In a write transaction: it adds reclaim work (reclaim.c); the thread
 * hears of it at the commit. */
void dbfs_later_reclaim_noted(struct dbfs *fs);
/* What the queue "later" carries (its messages' tag). */
#define DBFS_LATER_EXPIRE  1u /* (ino, due): expire.c */
#define DBFS_LATER_RECLAIM 2u /* (ino, 0): older builds' reclaim; acknowledged unread */
#define DBFS_LATER_SETTLE  3u /* (ino, ms): settle.c */
/* Enqueue a message of kind `tag` for `ino`, deliverable at `due_sec`
 * (0: at once), in txn. 0, MDB_MAP_FULL or a queue error. */
int dbfs_later_enqueue(struct dbfs *fs, MDB_txn *txn, unsigned tag, uint64_t ino,
		       uint64_t due_sec);
/* The same with a payload word of its own (`word`, the second u64 the
 * message carries) and a delivery time in microseconds. */
int dbfs_later_enqueue_at(struct dbfs *fs, MDB_txn *txn, unsigned tag, uint64_t ino,
			  uint64_t word, uint64_t deliver_us);

/* ---- settled events (settle.c; public side dbfs/feed.h) ---- */
struct dbfs_event;
/* dbfs_open (read-write): the quiet periods wanted, from the store. 0 or a
 * negative errno with err set. stop: at close, after dbfs_expire_stop. */
int dbfs_settle_start(struct dbfs *fs, char *err, size_t errlen);
void dbfs_settle_stop(struct dbfs *fs);
/* The leader's batch, at its end (feed_outbox.c): event `ev` committing at
 * `t_ns`; when it is a write (dbfs/feed.h says which) and periods are
 * wanted, note the burst for each (a row and, for a new row, its
 * message). 0, MDB_MAP_FULL, a store failure or a queue error. */
int dbfs_settle_wrote(struct dbfs *fs, MDB_txn *txn, const struct dbfs_event *ev, uint64_t t_ns);
/* The delivery thread's batch: the message (ino, ms) came. Emits the
 * settled event when the file was quiet long enough (and *fired), sends
 * the message again for the rest of the period when it was not, or
 * drops the row (period no longer wanted, file gone). 0 or as wrote. */
int dbfs_settle_fire(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint32_t ms, bool *fired);
/* Is this event a write that starts or prolongs a burst? Pure. */
bool dbfs_settle_is_write(const struct dbfs_event *ev);
/* Rows waiting (stats). */
int dbfs_settle_pending(struct dbfs *fs, MDB_txn *txn, uint64_t *rows);
/* Does the batch being built hold a write of `ino` (feed_outbox.c)? Leader only. */
bool dbfs_feed_batch_wrote(struct dbfs *fs, uint64_t ino);
/* A name row of inode `ino` changed (dir.c), or (`ino` 0) a directory's
 * or many rows did: the leader's cached paths that it may change are
 * dropped (feed.c). Leader only; no-op with feed=off. */
void dbfs_feed_paths_changed(struct dbfs *fs, uint64_t ino);
/* Named databases the queue "later" may hold open. */
unsigned dbfs_expire_dbs_needed(void);
/* dbfs_set_session: change fs->se under the lock the thread tells the
 * kernel under. */
void dbfs_expire_session(struct dbfs *fs, struct fuse_session *se);

/* ---- deferred reclaim of large files (reclaim.c) ---- */
#define DBFS_RECLAIM_MIN (64ull << 20) /* allocated bytes from which a file waits for it */
/* The inode (`in`, no links, nobody holds it) is to be destroyed: when it
 * is large, mark it in the orphan table and queue its reclaim instead
 * (*deferred). 0 or a store failure or queue error. */
int dbfs_reclaim_defer(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		       bool *deferred);
/* Is this orphan row's value the mark of a queued reclaim? */
bool dbfs_reclaim_marked(const MDB_val *orphan_val);
/* The delivery thread (expire_run.c), in a write transaction of its own:
 * one piece (DBFS_FREE_MAX at most) of the first reclaim waiting. *did:
 * there was one (0: none is left), *finished: this piece ended a file's.
 * 0 or a store failure (nothing of the piece may commit then). */
int dbfs_reclaim_step(struct dbfs *fs, MDB_txn *txn, int *did, int *finished);
/* Files waiting for their reclaim and the bytes they still hold. */
int dbfs_reclaim_pending(struct dbfs *fs, MDB_txn *txn, uint64_t *files, uint64_t *bytes);
/* Read ahead (dbfs_data_prefetch) `bytes` of what dbfs_reclaim_step frees
 * next, in a read transaction of its own: the reclaim thread, before a
 * piece, outside the writer. */
void dbfs_reclaim_prefetch(struct dbfs *fs, uint64_t bytes);

/* ---- deferred truncation (trim.c) ---- */
#define DBFS_INODE_TRIM 1u /* dbfs_inode.flags: the inode has a row in "trim" */
/* A truncate of regular file `ino` (in: its record) to `size` below
 * in->size: when the whole blocks it frees hold DBFS_RECLAIM_MIN or more,
 * or some of the file's blocks already wait for the reclaim, zero the
 * partial block, hand the whole blocks past `size` to the background
 * reclaim (the row, in->flags) and set in->size (*deferred; the caller
 * puts the inode). Else change nothing. 0 or a store failure. */
int dbfs_trim_truncate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		       uint64_t size, bool *deferred);
/* The file's size is to grow to `new_size`: delete the blocks waiting for
 * the reclaim that the new size would uncover (they must read as zeros),
 * shrinking or dropping the row; in->alloc, in->flags follow (the caller
 * puts the inode). Nothing to do (no lookup) without DBFS_INODE_TRIM. The
 * blocks are deleted in the caller's transaction, however many. 0 or a
 * store failure. */
int dbfs_trim_uncover(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		      uint64_t new_size);
/* The same ahead of the operation, within what the transaction may still
 * free (DBFS_FREE_MAX): *more while blocks are left, and then the caller
 * must not do the operation in this transaction but commit and come again
 * (each pass frees a piece); without *more the operation's own uncover
 * finds nothing left to delete. Reads and puts the inode (none there: 0,
 * the operation reports it); an empty trim table costs no lookup. Called
 * first by every request that may grow a file (fuse_ops.c: write, copy,
 * fallocate, truncate up). 0 or a store failure. */
int dbfs_trim_uncover_piece(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t new_size,
			    int *more);
/* The inode's data all go (dbfs_inode_destroy): drop its row, clear the
 * flag in `in`. 0 or a store failure. */
int dbfs_trim_drop(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in);
/* The reclaim's piece for the first row: at most DBFS_FREE_MAX from the
 * top of its range down. *did: there was a row; *finished: it is done.
 * 0 or a store failure. */
int dbfs_trim_step(struct dbfs *fs, MDB_txn *txn, int *did, int *finished);
/* Read ahead (dbfs_data_prefetch) `bytes` of what dbfs_trim_step frees
 * next. Any transaction. */
void dbfs_trim_prefetch(struct dbfs *fs, MDB_txn *txn, uint64_t bytes);
/* Rows and the bytes they hold (stats). */
int dbfs_trim_pending(struct dbfs *fs, MDB_txn *txn, uint64_t *files, uint64_t *bytes);

/* ---- core operations (ops_names.c, ops_attr.c, ops_data.c) ---- */
struct dbfs_cred {
	uint32_t uid, gid, umask;
};

int dbfs_op_lookup(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name,
		   uint64_t *ino, struct dbfs_inode *in);
int dbfs_op_mknod(struct dbfs *fs, MDB_txn *txn, const struct dbfs_cred *cr, uint64_t parent,
		  const char *name, uint32_t mode, uint64_t rdev, const char *link,
		  uint64_t *ino, struct dbfs_inode *in);
int dbfs_op_link(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t parent,
		 const char *name, struct dbfs_inode *in);
int dbfs_op_unlink(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name, int dir);
/* The same for a file whose expiry came (expire_run.c): its event is
 * DBFS_EV_EXPIRE. */
int dbfs_op_expire_unlink(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name);
int dbfs_op_rename(struct dbfs *fs, MDB_txn *txn, uint64_t oparent, const char *oname,
		   uint64_t nparent, const char *nname, unsigned flags);

/* setattr: which fields to change (bit set of DBFS_SET_*). */
#define DBFS_SET_MODE      (1u << 0)
#define DBFS_SET_UID       (1u << 1)
#define DBFS_SET_GID       (1u << 2)
#define DBFS_SET_SIZE      (1u << 3)
#define DBFS_SET_ATIME     (1u << 4)
#define DBFS_SET_MTIME     (1u << 5)
#define DBFS_SET_ATIME_NOW (1u << 7)
#define DBFS_SET_MTIME_NOW (1u << 8)
#define DBFS_SET_CTIME     (1u << 10)
/* What the file system clears itself under FUSE_HANDLE_KILLPRIV_V2: S_ISUID,
 * and S_ISGID when group-executable (the caller lacks CAP_FSETID, or chown);
 * the security.capability xattr (a size or owner change). */
#define DBFS_SET_KILL_SUIDGID (1u << 11)
#define DBFS_SET_KILL_CAPS    (1u << 12)
int dbfs_op_setattr(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct stat *st,
		    unsigned set, struct dbfs_inode *out);
/* kill: DBFS_SET_KILL_SUIDGID and/or DBFS_SET_KILL_CAPS, as for setattr. */
int dbfs_op_write(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t off, const void *buf,
		  size_t len, unsigned kill);
int dbfs_op_fallocate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int mode, uint64_t off,
		      uint64_t len);
/* A truncate to `off` (end UINT64_MAX) or a hole punched in [off, end) may
 * free more than one transaction can (DBFS_FREE_MAX; on a full disk a
 * transaction has only the space reserve for the free list). This frees,
 * from the end down, the whole blocks one transaction may: the truncate's
 * piece shrinks the file to where the piece starts, so that every state
 * committed between pieces is a file truncated part of the way, and a hole
 * piece punches its blocks. *more is 1 when it freed a piece and more whole
 * blocks than fit in one transaction are left; 0 (having changed nothing)
 * when the rest fits in one: the caller then runs the operation itself,
 * in the same transaction, and it reports the errors. */
int dbfs_op_free_piece(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t off, uint64_t end,
		       int *more);
int dbfs_op_setxattr(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		     const void *val, size_t len, int flags);
int dbfs_op_removexattr(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name);
int dbfs_op_copy_range(struct dbfs *fs, MDB_txn *txn, uint64_t ino_in, uint64_t off_in,
		       uint64_t ino_out, uint64_t off_out, size_t len, size_t *copied);
/* The kernel forgot an inode: destroy it if it has no links left. */
int dbfs_op_reap(struct dbfs *fs, MDB_txn *txn, uint64_t ino);

#endif
