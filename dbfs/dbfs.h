/*
 * libdbfs — a POSIX file system stored in one LMDB environment.
 *
 * This is the whole interface the manager (mfs/) and the tools use. A
 * `struct dbfs` is one open store; it is served over FUSE by handing
 * dbfs_fuse_ops() to fuse_session_new() with the struct dbfs as userdata.
 * libdbfs never includes an mfs header: whatever it needs from its host
 * (options, limits) is passed in here.
 *
 * Errors: every function returning int returns 0 on success or a negative
 * errno value (-ENOENT ...), never an LMDB code; where an `err` buffer is
 * given it receives a one-line, human-readable reason for the failure.
 * (Inside the library results carry more: dbfs/internal.h, "Error
 * convention"; dbfs_errno() maps them at this boundary.)
 *
 * Threads: libdbfs starts one thread for the whole process, whatever the
 * number of open DBFSs, and only once one of them has delayed work
 * scheduled (file expiry, deferred reclaim; dbfs/expire.h): it carries the
 * work of every store out when due, through the same write path as every
 * request; dbfs_close takes the store off its list. It tells the kernel
 * about names it removed through the session of dbfs_set_session: set it
 * to NULL before the session goes. A `struct dbfs` may be used from any
 * number of threads at once except where a function says otherwise; it
 * takes only its own locks, and none is held when a function returns.
 */
#ifndef DBFS_DBFS_H
#define DBFS_DBFS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct fuse_lowlevel_ops;
struct dbfs;

/* Durability modes (see README "Durability", dbfs/durable.c). A process
 * crash (kill -9) loses no acknowledged operation in either mode. */
enum dbfs_durability {
	/* Every commit is flushed (LMDB's synced commits, two device flushes
	 * each): every acknowledged operation survives a power loss. */
	DBFS_DURABLE_FULL = 0,
	/* Default. Commits flush nothing; a durable point (two flushes)
	 * every commit_interval, at fsync/fdatasync/O_SYNC writes, dbfs_sync
	 * and close. After a power loss the store opens at the last durable
	 * point: consistent, everything fsynced, at most commit_interval old.
	 * ("none" is parsed as this mode: it no longer earns a place.) */
	DBFS_DURABLE_NORMAL = 1,
};

struct dbfs_options {
	bool create;                 /* format an empty or missing store */
	bool read_only;              /* open the environment MDB_RDONLY */
	enum dbfs_durability durability;
	unsigned max_readers;        /* LMDB reader slots (0: 512) */
	uint64_t initial_map_size;   /* bytes (0: auto, see dbfs_open); grows on demand */
	uint64_t quota_bytes;        /* 0: none; data bytes beyond it: EDQUOT */
	uint64_t quota_inodes;       /* 0: none */
	uint64_t cache_limit;        /* mem=: bytes of kernel cache for the files; 0: none */
	double attr_timeout;         /* seconds the kernel may cache attributes */
	double entry_timeout;        /* seconds the kernel may cache names */
	bool writeback_cache;        /* let the kernel buffer writes (default off: see README) */
	bool writemap;               /* LMDB MDB_WRITEMAP where fallocate works (default on, see writemap_auto) */
	bool writemap_auto;          /* writemap not given: on only where the store is in
	                                memory (tmpfs); cleared by parsing writemap= */
	double commit_interval;      /* seconds between durable points (normal mode; 5) */
	/* The change feed (dbfs/feed.h): on by default. */
	bool feed;                   /* feed=on|off */
	uint64_t feed_max_events;    /* feed_events=N: events kept at most (1000000; <= 2000000) */
	uint64_t feed_max_bytes;     /* feed_bytes=SIZE: record bytes kept at most (64M; <= 1G) */
	uint64_t feed_max_age;       /* feed_age=SECS: events kept at most this long (7 days) */
	uint64_t feed_sub_idle;      /* feed_sub_idle=SECS: idle durable subscriptions
	                                are deleted after this (30 days; 0: never) */
	bool shared;                 /* shared: several processes may open the store at once
	                                (dbfs/shared.h says what holds) */
};

/* Fill `o` with the defaults documented in struct dbfs_options. Any thread;
 * touches nothing but `o`. */
void dbfs_options_init(struct dbfs_options *o);

/*
 * Parse one mount-option style `key=value` (or bare `key`) into `o`.
 * Known keys: create, ro, durability=full|normal|none, commit_interval=SECS,
 * max_readers=N,
 * map_size=SIZE, quota_bytes=SIZE, quota_inodes=N, attr_timeout=SECS,
 * entry_timeout=SECS, writeback_cache=0|1, writemap=0|1, mem=SIZE, feed=on|off, shared,
 * feed_events=N, feed_bytes=SIZE, feed_age=SECS, feed_sub_idle=SECS (the
 * change feed, dbfs/feed.h; 0 for one of feed_events/bytes/age: no bound
 * by it, but not all three). SIZE accepts K, M, G, T suffixes.
 * Returns 0, -ENOENT for an unknown key (so a caller may try its own keys),
 * or -EINVAL for a malformed value (reason in err). Any thread; touches
 * nothing but `o` and `err`.
 */
int dbfs_option_parse(struct dbfs_options *o, const char *key, const char *value, char *err,
		      size_t errlen);

/*
 * Open (and with o->create, format) the store in directory `dir`, which must
 * exist. Takes an exclusive lock on the store: a second open, from this or
 * another process, fails with -EBUSY. With o->shared the lock is shared:
 * other processes may open the store shared too (dbfs/shared.h says what
 * holds), an exclusive open of it fails with -EBUSY, as a shared open of
 * a store held exclusively or already open in this process; a shared open
 * with writeback_cache, ro, feed=off or (on a store not in memory)
 * durability=normal is refused with -EINVAL. The lock is dbfs.lock; a read-only
 * open of a store that has none (a data.mdb restored from an mdb_copy
 * backup) makes it, as LMDB makes lock.mdb. Removes the files of inodes that were
 * unlinked but still open when the store was last closed (orphans).
 * On failure `*out` is untouched and `err` says why, and the directory is
 * as it was: a directory without data.mdb and no create is refused before
 * anything is made, and the dbfs.lock, data.mdb, lock.mdb, dbfs.durable
 * and change-feed files this call made are removed when it refuses or fails
 * later.
 * Errors: -ENOENT (`dir` or a component missing, or no store and no
 * create), -ENOTDIR (`dir` is not a directory), -ENOMEM, -EBUSY (store in
 * use), -EINVAL (not a DBFS store, unknown format version, damaged or
 * truncated), -EACCES/-EPERM/-EROFS (no access to the directory or its
 * files; -EROFS also for a read-only open of a store that lost power and
 * needs its recovery, which writes), -ELOOP/-ENAMETOOLONG (from resolving `dir`), -ENOSPC (no room to
 * create or grow the environment), -EAGAIN (LMDB reader slots full), -EIO.
 * Thread context: any thread but one serving requests of this store, never
 * concurrently with dbfs_close of the same store. It may take disk time:
 * after a reboot it restores the last durable point (dbfs/durable.c), it
 * upgrades a format-1 or 2 store (format 3 adds the change feed's
 * tables; the upgrade reads every directory entry once), rebuilds the
 * feed's name table after a feed=off open, commits the orphan reclaim, in as many
 * transactions as it needs, and makes a durable point.
 * The first open installs the process's SIGBUS handler (dbfs/guard.h): a
 * SIGBUS in a store's maps becomes -EIO on that store; any other SIGBUS
 * goes to the handler that was there before (or kills, as by default). An
 * owner that installs its own SIGBUS handler later must chain to it.
 */
/*
 * Is `name` the name of a file that a store's directory holds for the store
 * (data.mdb, lock.mdb, dbfs.lock, dbfs.durable, dbfs.images, dbfs.wake, the queue files of the
 * change feed and of delayed work, mfsq-feeds.*, an older store's
 * mfsq-feed.* and mfsq-later.*)? For
 * owners that remove a store they just made, or give its files to a user.
 * Any thread.
 */
bool dbfs_is_store_file(const char *name);

/* A shared store's figures (the option shared; dbfs/shared.h). Counters
 * are this process's since the open. */
struct dbfs_shared_stats {
	bool shared;               /* false: opened exclusively, the rest 0 */
	unsigned processes;        /* processes holding the store now, this one included
	                              (their marks on dbfs.lock, shared_lock.c) */
	uint64_t writer;           /* this process's writer id in the feed */
	unsigned shard;            /* the feed's shard it enqueues into */
	uint64_t shards_used;      /* bit i: a process holding a slot of dbfs.wake
	                              (sharing the store, or killed and its slot
	                              not freed yet) has shard i */
	uint64_t events_received;  /* other processes' events its notifier applied */
	uint64_t events_own;       /* its own events the notifier skipped */
	uint64_t inval_entry, inval_inode, inval_delete; /* notifications sent to its kernel */
	uint64_t inval_failed;     /* refused by the kernel (other than ENOENT) */
	uint64_t wakes_sent;       /* commits with events announced to the others */
	uint64_t close_timeouts;   /* closes that stopped waiting for the others (2 s) */
	uint64_t events_lost;      /* events the notifier never saw (feed gap records) */
	uint64_t lag_p50_us, lag_p99_us, lag_max_us; /* commit in another process to the
	                              invalidation here (50 us buckets; the upper end) */
};
/* Fill st. 0. Any thread. */
int dbfs_shared_stats(struct dbfs *fs, struct dbfs_shared_stats *st);

int dbfs_open(const char *dir, const struct dbfs_options *o, struct dbfs **out, char *err,
	      size_t errlen);

/* Reap what the kernel forgot, reclaim orphans, make a last durable point
 * (everything acknowledged survives a power loss after it returns) and
 * close; frees `fs` (NULL: nothing). No request of this store may be in flight and no
 * other call on `fs` may run or follow; the session must be gone. May take
 * disk time (commits and a forced sync). */
void dbfs_close(struct dbfs *fs);

/*
 * Make everything committed so far durable across power loss: a durable
 * point (dbfs/durable.c: flush data.mdb, then record the point in
 * dbfs.durable and flush that). Concurrent callers share one point; a
 * caller whose commits are durable already returns at once, and so does
 * every caller in mode full and on a read-only store. The cost is that of
 * the pages changed since the last point, not of the store's size.
 * Errors: -EIO or -ENOSPC (the flush failed: data may be lost; after -EIO
 * the store is read-only, dbfs_health), or another negative errno of
 * fdatasync (or msync, with MDB_WRITEMAP).
 * Thread context: any thread, a request thread of this store included
 * (the fsync handlers call it), but not from inside a write operation: it
 * waits for the write transaction in progress to end (not for the ones
 * queued), then for the device.
 */
int dbfs_sync(struct dbfs *fs);

/*
 * Housekeeping; call about once a second from any thread (not from inside a
 * request of this store): reclaims inodes the kernel forgot after their last
 * unlink, applies the change feed's retention and idle-subscription expiry
 * and runs its queue's maintenance (dbfs/feed.h), and makes a durable point
 * when the oldest change that is not durable is commit_interval old.
 * Delayed work is not run here (see "Threads" above).
 * Returns 0 or a negative errno of a commit (-ENOSPC, -EIO ...) or of the
 * flush; a failed reap or flush is retried at the next call. The first
 * call after the store's health failed (dbfs_health) returns -EIO, once,
 * so that the owner can log the reason.
 */
int dbfs_tick(struct dbfs *fs);

/* Change commit_interval live (seconds, > 0; others ignored). Any thread;
 * no lock (an atomic). The next dbfs_tick uses it. */
void dbfs_set_commit_interval(struct dbfs *fs, double secs);

/* Change quotas live (0: none). Takes effect for the next operation. Any
 * thread; no lock (the quotas are atomics). */
void dbfs_set_quota(struct dbfs *fs, uint64_t quota_bytes, uint64_t quota_inodes);

/*
 * The kernel's cache of this DBFS's files (page cache, readdir cache), held
 * to a limit: see dbfs/pagecache.c. dbfs_set_cache_limit changes it live (0:
 * none). When the estimate passes the limit, `cb(arg)` is called from the
 * request thread (it must not block); the owner then calls dbfs_cache_trim,
 * which may wait for the kernel: never from a thread that serves requests.
 * dbfs_tick trims too. Needs dbfs_set_session to reach the kernel.
 */
void dbfs_set_cache_limit(struct dbfs *fs, uint64_t bytes);
void dbfs_set_cache_callback(struct dbfs *fs, void (*cb)(void *arg), void *arg);
int dbfs_cache_trim(struct dbfs *fs);

/*
 * Durable points asked for by space (dbfs/held.c): LMDB reuses no page that
 * was freed after the newest durable point before the next one. When the
 * pages freed since then pass the store's limit, `cb(arg)` is called from
 * the committing thread (it must not block), once until a point is made;
 * the owner then calls dbfs_tick, which makes it, from a thread that may
 * wait for the disk (a flush), never one that serves requests. Past four
 * limits, each write waits for a point after its commit. Without a
 * callback nothing is counted: points follow commit_interval and fsync
 * only, and the file may hold a commit_interval of churn. dbfs_set_point_callback:
 * any thread but a writer's (it waits for the running commit).
 */
void dbfs_set_point_callback(struct dbfs *fs, void (*cb)(void *arg), void *arg);
/* Did fs ask for a point that is not made yet? Any thread, no lock. */
bool dbfs_point_wanted(struct dbfs *fs);
/* Estimated bytes cached, the limit, and the bytes dropped so far. Any
 * thread; takes the cache lock briefly. Returns nothing that can fail. */
void dbfs_cache_usage(struct dbfs *fs, uint64_t *bytes, uint64_t *limit, uint64_t *trimmed);

/* Usage as recorded in the store. */
struct dbfs_usage {
	uint64_t bytes;       /* data bytes allocated (st_blocks * 512 summed) */
	uint64_t inodes;      /* live inodes, root included */
	uint64_t map_size;    /* current LMDB map size */
	uint64_t file_size;   /* bytes data.mdb takes on disk (allocated, with the reserve) */
};
/*
 * Fill `u` from the store's usage record and the file's size.
 * Cost: it opens a read transaction from the pool (takes the map lock
 * shared, briefly the pool's mutex; waits while another thread grows the
 * map) and fstat()s data.mdb: a few microseconds with no disk access when
 * the inode is cached, but a system call per store. A caller that asks for
 * every DBFS under one lock of its own pays that per store while holding
 * it (mfs's metrics and accountant call it without the manager lock, the
 * store pinned); it never waits for the writer.
 * Errors: -EAGAIN (reader slots full), -EIO (record malformed, or a read
 * failed), -ENOENT (no usage record: store damaged). On error `u` is
 * untouched. Any thread, a request thread included.
 */
int dbfs_usage(struct dbfs *fs, struct dbfs_usage *u);

/* Operation counters, updated without locks (approximate under races). */
struct dbfs_counters {
	uint64_t ops;          /* requests served */
	uint64_t read_bytes;
	uint64_t write_bytes;
	uint64_t commits;      /* LMDB write transactions committed */
	uint64_t batched_ops;  /* write operations that shared a commit */
	uint64_t map_grows;
	uint64_t errors;       /* requests answered with an error */
	uint64_t flushes;      /* durable points made (two device flushes each, but */
	uint64_t flushes_listed; /* these, listed points: one; dbfs/durable.c) */
	uint64_t flushes_imaged; /* these, imaged points: one flush of dbfs.images */
	uint64_t flushes_held;   /* points asked for by the pages freed since the last (dbfs/held.c) */
	uint64_t unsynced_age_ms; /* age of the oldest commit not durable yet; 0: none */
	uint64_t unsynced_bytes;  /* data bytes written since the last durable point */
	uint64_t readers_cleared; /* LMDB reader slots of dead processes cleared (readers.c) */
};
/* Copy the counters into `c`. Any thread; no system call (it reads the
 * monotonic clock and takes a short lock of the durable points). */
void dbfs_counters(struct dbfs *fs, struct dbfs_counters *c);

/* Requests answered with an error, by errno: slot e counts errno e
 * (1..DBFS_ERRNOS-1), slot 0 every larger one. */
#define DBFS_ERRNOS 134
/* Copy the counts into `out`. Any thread, no lock, no system call; each
 * slot is exact, slots may be a request apart. */
void dbfs_errno_counts(struct dbfs *fs, uint64_t out[DBFS_ERRNOS]);

/* The FUSE low-level operations; the session's userdata must be the
 * struct dbfs * the requests are for. Static table: any thread. */
const struct fuse_lowlevel_ops *dbfs_fuse_ops(void);

/* The readahead window the ops offer the kernel (INIT max_readahead); the
 * mounter should give the mount's bdi the same read_ahead_kb, since the
 * kernel keeps its 128 KiB default otherwise. */
#define DBFS_READ_AHEAD (1u << 20)

/* The session serving `fs` (before it serves requests): lets the file
 * system invalidate what the kernel caches. Call once, from the thread that
 * mounts, before the first request is received. */
struct fuse_session;
void dbfs_set_session(struct dbfs *fs, struct fuse_session *se);

/*
 * The session's channel: after fuse_session_mount, pass it to
 * fuse_session_custom_io(se, dbfs_fuse_io(), fuse_session_fd(se)), or
 * wrap it in a transport's own hooks that call these for /dev/fuse. Its
 * hooks are read(2) and writev(2) on the fd (results and errors as those
 * give them) plus what libfuse 3.14 cannot do for the file system: they
 * negotiate FUSE_HANDLE_KILLPRIV_V2 (the FUSE_INIT reply gets the flag
 * when the kernel offered it, which saves the kernel's security.capability
 * lookup before every write) and hand each FUSE_WRITE's write_flags to
 * the write handler (which clears set-id bits when FUSE_WRITE_KILL_SUIDGID
 * says the writer may not keep them).
 *
 * Thread contract, binding on every transport: the write flags go from
 * the read hook to the write handler in a thread-local variable, so the
 * thread that receives a request (the read hook, or dbfs_io_received)
 * must be the thread that processes it (fuse_session_process_buf), and it
 * must receive no other request, of any DBFS, in between. The reply to
 * FUSE_INIT must be written through this writev hook (wrapped or not).
 * No lock is held by the hooks; any thread that obeys the contract.
 */
struct fuse_custom_io;
const struct fuse_custom_io *dbfs_fuse_io(void);

/*
 * A request of `fs` (`len` bytes at `buf`, laid out as /dev/fuse gives
 * it) that reached the server another way than dbfs_fuse_io's read hook,
 * such as an io_uring queue: the thread about to process it calls this
 * first, as the read hook would have (same thread contract as above).
 * A `len` shorter than a request header carries no write flags. No errors.
 * Such a transport may tie a reply to the request's slot (an io_uring
 * entry goes back when its handler returns): every request received this
 * way is answered before its handler returns. One received through the
 * read hook may be answered later, from another thread (a shared store's
 * close that waits for the other processes, dbfs/shared.h).
 */
void dbfs_io_received(struct dbfs *fs, const void *buf, size_t len);
/*
 * A transport that sends replies itself (not through dbfs_fuse_io's
 * writev) calls this on the thread that processes the request once the
 * request's reply is out or queued: a request cut short by a SIGBUS in the
 * store's maps is then not answered a second time (guard.h). Any thread,
 * any request; never fails.
 */
void dbfs_io_replied(void);

/* The store's directory, as an absolute path resolved by dbfs_open. Valid
 * until dbfs_close; any thread. */
const char *dbfs_dir(const struct dbfs *fs);

/*
 * ---- What a request costs: for the transport that serves a DBFS (cost.c) ----
 *
 * Which requests may keep the thread that processes them long. A transport
 * that serves many mounts from few threads (mfs's io_uring threads serve
 * every DBFS of their CPU in turn) uses it to move those requests to
 * threads of their own, so that one DBFS's slow work holds up no other.
 *
 * dbfs_request_cost: `req` is one request of a DBFS as /dev/fuse lays it
 * out (struct fuse_in_header, then the op's arguments), `len` the bytes
 * of it at hand; only the header and the op's fixed arguments are read,
 * so a request whose data is elsewhere may be cut after them. Returns a
 * set of DBFS_COST_* bits, 0 for a request served from the LMDB map with
 * no commit (lookups, getattr, reads, readdir, getxattr, forgets, ...):
 *
 *   DBFS_COST_COMMIT  it changes the store and waits for its commit:
 *                     microseconds on tmpfs or with durability=none, a
 *                     device flush on a disk with full or normal (the
 *                     caller may time these to learn which kind of store
 *                     it serves)
 *   DBFS_COST_LONG    it may keep its thread long on any store: explicit
 *                     syncs (fsync, fsyncdir, syncfs, flush), copy_file_range,
 *                     fallocate, truncates (a setattr of the size), writes
 *                     of more than DBFS_COST_BIG_WRITE bytes
 *
 * A request too short to hold its fixed arguments is classified by its
 * opcode alone; one shorter than its header costs 0. No errors. Pure: no
 * store, no lock, no clock; any thread, any context, also inside a request.
 */
#define DBFS_COST_COMMIT    1u
#define DBFS_COST_LONG	    2u
#define DBFS_COST_BIG_WRITE (64u << 10)
unsigned dbfs_request_cost(const void *req, size_t len);

/*
 * The store's health. After an I/O error on a write of the store (a
 * commit or a flush failed with EIO) the operation that met it got -EIO
 * and the store is read-only until it is closed: every later write gets
 * -EROFS, reads go on. After a SIGBUS in the store's maps (its data.mdb
 * or lock.mdb was truncated under them, dbfs/guard.h) the request that
 * met it and every later request of the store get -EIO, reads too.
 * Returns 0 while healthy; -EIO after such an error, with a one-line
 * reason in `reason` (len 0: none). Any thread, no lock, no system call.
 */
int dbfs_health(struct dbfs *fs, char *reason, size_t len);

#endif
