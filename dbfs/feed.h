/*
 * libdbfs — the change feed of one DBFS (issue 18; ARCHITECTURE mechanism 6).
 *
 * Every operation that changes a DBFS enqueues one event in the same LMDB
 * write transaction as the change (a transactional outbox, dbfs/feed_outbox.c):
 * after any crash there is no lost event and no event for a change that did
 * not commit. Events are kept in a libmfsq queue ("feeds") inside the store's
 * own environment, a shard per process of a shared store (the sequence
 * numbers, the feed's own, taken in the write transaction: one feed for
 * every reader; dbfs/feed_shards.c), and read through the readers declared
 * here. mfs turns
 * them into text or JSON lines (mfs/), dbfs knows no format but the binary
 * record below.
 *
 * Errors: as every dbfs function (dbfs.h): 0 or a negative errno, never an
 * LMDB or libmfsq code. The feed's own verdicts:
 *   -EOPNOTSUPP  the DBFS was opened with feed=off, or read-only: there is
 *                no feed to read (its events stay in the store for the next
 *                read-write open);
 *   -ESTALE      a position (sequence number or subscription) that names
 *                another store, or this store before it was re-created:
 *                the UUID given with it is not this store's
 *                (dbfs_feed_uuid). Never silently misread;
 *   -ERANGE      a sequence number beyond the end of the feed (more than
 *                the next one to be written), or an ack beyond what the
 *                reader was given;
 *   -ENOENT      no such durable subscription;
 *   -EEXIST      a subscription of that name exists already;
 *   -EBUSY       the durable subscription is open in another reader;
 *   -EINVAL      a malformed argument (bad subscription name, spec too long,
 *                both a sequence number and a time ...).
 *
 * What one event means (exactly):
 *   - One event per operation that changed the store and committed, in
 *     commit order, numbered 1, 2, 3 ... per DBFS with no hole and no
 *     reuse, across restarts and crashes (seq). Operations refused
 *     (ENOENT, EEXIST ...) yield none.
 *   - A rename is one event with both paths (RENAME_EXCHANGE too: path and
 *     new_path are the two names, which swapped). A rename that replaced
 *     an existing target does not yield a separate unlink.
 *   - Writes are coalesced: one DBFS_EV_WRITE stands for every write (and
 *     copy_file_range into the file) to one inode that committed in the
 *     same LMDB transaction with no other event of that inode between
 *     them; off/len span the lowest offset to the highest end written,
 *     size/mode are as after the last one, uid/gid/pid are the last
 *     writer's. A lone writer gets one event per write(2) that reached
 *     the file system (the kernel may itself merge or split writes with
 *     writeback_cache).
 *   - setattr yields DBFS_EV_TRUNCATE when only the size changed (with the
 *     new size), DBFS_EV_SETATTR otherwise (attr_mask says what changed,
 *     FUSE_SET_ATTR_* bits; a size change among others gives SETATTR with
 *     FUSE_SET_ATTR_SIZE). Access-time updates the file system makes by
 *     itself (reads with relatime) yield none.
 *   - fallocate yields DBFS_EV_FALLOCATE, a hole punch DBFS_EV_PUNCH
 *     (off/len the range asked for).
 *   - A file whose expiry came (user.dbfs.expire, dbfs/expire.h) yields
 *     one DBFS_EV_EXPIRE per name removed, as unlink would (path, parent,
 *     nlink after); uid/gid are the daemon's, pid 0.
 *   - DBFS_EV_SETTLED: a regular file was written and then left alone
 *     for a quiet period P wanted by a subscription (dbfs_settle_set,
 *     dbfs_settle_hold; mfs's settle=MS). Writes are the events write
 *     (copy_file_range into the file included), truncate, fallocate,
 *     punch, setattr with a size change, and create of a regular file;
 *     nothing else (chmod, xattrs, rename, link, reads) starts or
 *     prolongs a burst. The event commits no earlier than P after the
 *     commit time (time_ns) of the burst's last write, one per file, per
 *     period and per burst: a write before the period is over moves it
 *     on (the message is sent again for the rest), a write after the
 *     event starts a new burst. It is due within ~1 s of the period's end
 *     while the store is open (the delivery thread's pace, like expiry);
 *     attr_mask = P in ms, off/len the span the burst wrote, path, size,
 *     mode and nlink as at the event, uid/gid the daemon's, pid 0. The
 *     burst belongs to the inode: a rename during it changes only the
 *     path the event carries. A file with no link left when its period
 *     ends (unlinked, expired, even if still open) yields none. A
 *     restart or crash keeps the bursts (rows in the store, messages in
 *     the queue's delay shard): a burst whose period ended while the
 *     store was closed settles at the next read-write open, late and
 *     once. A period no longer wanted when its burst ends (its
 *     subscription deleted) yields none. Writes the kernel holds in its
 *     cache (writeback_cache) count when they reach the file system
 *     (at the latest at close or fsync).
 *   - Inodes destroyed later (the last close after the last unlink) yield
 *     nothing more: the unlink was the event.
 *   - path is the inode's path from the root at the time of the change,
 *     "/a/b" (the root is "/"); for unlink and rmdir the removed name's,
 *     for rename the old one (new_path the new). An inode with several
 *     hard links is named by one of them (the lowest parent inode, then
 *     the lowest name). A file written after its last link went (still
 *     open) has an empty path (path_len 0). Names are bytes: any byte but
 *     '/' and NUL may occur, newlines and invalid UTF-8 included.
 *   - uid, gid, pid are the caller's (the FUSE request's; a call through
 *     the dbfs API without a request: the thread's fsuid/fsgid, pid 0).
 *
 * A follower that writes into the DBFS it follows sees its own changes as
 * events (mfs filters can exclude a pid or a path prefix).
 *
 * Threads: every function may be called from any thread unless it says
 * otherwise; none may be called from inside the notify callback except
 * dbfs_feed_last_seq().
 */
#ifndef DBFS_FEED_H
#define DBFS_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dbfs;

enum dbfs_ev_op {
	DBFS_EV_CREATE = 1,
	DBFS_EV_MKDIR,
	DBFS_EV_MKNOD,
	DBFS_EV_SYMLINK,
	DBFS_EV_LINK,
	DBFS_EV_UNLINK,
	DBFS_EV_RMDIR,
	DBFS_EV_RENAME,
	DBFS_EV_WRITE,
	DBFS_EV_TRUNCATE,
	DBFS_EV_FALLOCATE,
	DBFS_EV_PUNCH,
	DBFS_EV_SETATTR,
	DBFS_EV_SETXATTR,
	DBFS_EV_REMOVEXATTR,
	DBFS_EV_EXPIRE, /* a name removed by the file's expiry (dbfs/expire.h) */
	DBFS_EV_SETTLED, /* a file quiet for a wanted period after writes (below) */
	DBFS_EV_GAP, /* never stored (its value may change): a reader's gap record */
};
#define DBFS_EV_OP_MAX DBFS_EV_GAP

/* "create", "mkdir", "mknod", "symlink", "link", "unlink", "rmdir",
 * "rename", "write", "truncate", "fallocate", "punch", "setattr",
 * "setxattr", "removexattr", "expire", "settled", "gap"; NULL for any other value. Pure. */
const char *dbfs_ev_op_name(unsigned op);
/* The op named `name` (`len` bytes, as dbfs_ev_op_name gives it), or 0. */
unsigned dbfs_ev_op_parse(const char *name, size_t len);

/* dbfs_event.flags */
#define DBFS_EVF_EXCHANGE 0x1 /* rename: RENAME_EXCHANGE (the two swapped) */
#define DBFS_EVF_REPLACED 0x2 /* rename/link target existed and was replaced */

struct dbfs_event {
	uint64_t seq;        /* per DBFS: dense, increasing, never reused, across restarts */
	uint64_t time_ns;    /* commit time, CLOCK_REALTIME ns (one per transaction,
	                        never going back within a store) */
	uint32_t op;         /* enum dbfs_ev_op */
	uint32_t flags;      /* DBFS_EVF_* */
	uint64_t ino;        /* the inode changed (unlink/rmdir: the one removed) */
	uint64_t parent;     /* the directory of `path`'s last component; 0 if none */
	uint64_t new_parent; /* rename: the directory of new_path; link: that of the
	                        new name; else 0 */
	uint32_t uid, gid, pid; /* the caller's */
	uint32_t mode;       /* st_mode after the change (type + permission bits);
	                        unlink/rmdir: the removed inode's */
	uint64_t size;       /* file size after the change */
	uint64_t off, len;   /* write/fallocate/punch: the range; settled: the span
	                        written in the burst (0/0: only truncates); else 0 */
	uint32_t attr_mask;  /* setattr: FUSE_SET_ATTR_* bits that changed; settled:
	                        the quiet period in ms; else 0 */
	uint32_t nlink;      /* links after the change */
	const char *path;  size_t path_len;      /* "/a/b", not NUL-terminated */
	const char *new_path; size_t new_path_len; /* rename/link: the new name; else NULL/0 */
	const char *xattr; size_t xattr_len;     /* setxattr/removexattr: the name; else NULL/0 */
	uint64_t gap_next;   /* DBFS_EV_GAP: first sequence number still available;
	                        the events seq .. gap_next-1 are lost to this reader */
	uint64_t writer;     /* who committed it: 1 for an exclusive open, a process's
	                        own id in a shared store (dbfs/shared.h); not in the record */
	uint32_t shard;      /* the queue's shard it came from: each process of a
	                        shared store enqueues into its own; not in the record */
};

/* ---- the binary record (what the queue stores; exposed for tests and fuzzing) ----
 *
 *   +---------+-------+-------+-----------------+-----+-----+-----+------+-------+
 *   | version | op u8 | pad 2 | flags u32       | ino | par | npar| time | size  |
 *   | u8 = 1  |       |       |                 | u64 | u64 | u64 | u64  | u64   |
 *   +---------+-------+-------+-----------------+-----+-----+-----+------+-------+
 *   | off u64 | len u64 | uid u32 | gid u32 | pid u32 | mode u32 | attr_mask u32 |
 *   +---------+---------+---------+---------+---------+----------+---------------+
 *   | nlink u32 | path_len u32 | new_path_len u32 | xattr_len u32 | pad u32 |
 *   +-----------+--------------+------------------+---------------+---------+
 *   | path bytes | new_path bytes | xattr bytes |   (no NULs, no padding)
 *   +------------+----------------+-------------+
 *   Little-endian (host order, as the store). DBFS_EV_REC_FIXED bytes before
 *   the strings; their lengths must add up to the rest exactly.
 */
#define DBFS_EV_REC_VERSION 1
#define DBFS_EV_REC_FIXED   104u
/* Bytes the record of `ev` takes. */
size_t dbfs_ev_rec_size(const struct dbfs_event *ev);
/* Encode `ev` (seq and gap_next are not stored) into buf of at least
 * dbfs_ev_rec_size(ev) bytes; returns the size. Pure. */
size_t dbfs_ev_encode(const struct dbfs_event *ev, void *buf);
/* Decode a record: 0, or -EBADMSG when it is not one (too short, unknown
 * version or op, lengths that do not add up, a string with NUL, a path
 * not starting with '/' ...). String pointers point into `buf`. seq is
 * left as it was. Pure; any input is safe (fuzzed: tests/fuzz). */
int dbfs_ev_decode(const void *buf, size_t len, struct dbfs_event *ev);

/* ---- the store ---- */

/* The store's UUID (16 bytes, made at mkfs, never changes). Any thread. */
void dbfs_feed_uuid(struct dbfs *fs, uint8_t uuid[16]);

/* Whether the feed is on (not feed=off). Any thread. */
bool dbfs_feed_enabled(struct dbfs *fs);

/* The queue's shards (0: the feed is off) and, into *shard, the one this
 * process enqueues into (its slot's among the processes sharing the
 * store; dbfs/feed_shards.c). Any thread. */
unsigned dbfs_feed_shards(struct dbfs *fs, unsigned *shard);

/* The sequence number of the newest committed event, 0 if none yet (or the
 * feed is off). Any thread, no lock, no system call (an atomic): also from
 * inside the notify callback. */
uint64_t dbfs_feed_last_seq(struct dbfs *fs);

/*
 * Be told when events commit: `cb(arg, last_seq)` is called once after
 * every commit that added events, on the committing thread, after the
 * commit and before the writers are answered, with no dbfs lock held
 * but the group commit's leadership (so other writers of this DBFS wait
 * while it runs). It must not block and must not call into this DBFS
 * (except dbfs_feed_last_seq): write an eventfd, queue work, signal a
 * condition. NULL removes it. Set it before the store serves requests,
 * or accept that a commit running meanwhile may call the old one (the
 * old arg must stay valid until the next commit after this returns).
 * Readers that wait (dbfs_feed_read with a timeout) are woken
 * independently of it.
 */
void dbfs_feed_set_notify(struct dbfs *fs, void (*cb)(void *arg, uint64_t last_seq), void *arg);

/* ---- limits (retention) and expiry; the defaults come from dbfs_options ---- */
struct dbfs_feed_limits {
	uint64_t max_events;  /* events kept at most (0: no bound by count) */
	uint64_t max_bytes;   /* record bytes kept at most (0: no bound by bytes) */
	uint64_t max_age_sec; /* events older than this are dropped (0: no bound by age) */
	uint64_t sub_idle_sec; /* a durable subscription not opened, read or acked for
	                          this long is deleted (0: never) */
};
/*
 * Change the limits live; applied by the next dbfs_tick (the next second).
 * Retention is enforced per block of DBFS_FEED_BLOCK events: what is kept
 * is within each bound plus at most one block (for bytes and age; exact
 * for events). The space goes back to the store when the queue drops the
 * subshard holding the oldest events: a subshard holds 32768 events, or
 * more when a burst outruns the once-a-second maintenance. When the
 * store's file system is full the feed gives back all but its newest
 * block at the next tick. Whatever subscriptions
 * hold: a subscription behind the retention point gets a gap record and
 * counts it (an abandoned one can never make the store run full).
 * -EINVAL (max_events, max_bytes and max_age_sec all 0: the feed would be
 * unbounded; max_events above DBFS_FEED_EVENTS_MAX, max_bytes above
 * DBFS_FEED_BYTES_MAX), -EOPNOTSUPP. Any thread.
 */
#define DBFS_FEED_BLOCK 256u
/* Bounds the limits may have (the queue drops beyond them by itself). */
#define DBFS_FEED_EVENTS_MAX 2000000u
#define DBFS_FEED_BYTES_MAX  (1ull << 30)
int dbfs_feed_set_limits(struct dbfs *fs, const struct dbfs_feed_limits *l);
void dbfs_feed_get_limits(struct dbfs *fs, struct dbfs_feed_limits *l);

/* ---- settled events: the quiet periods wanted ----
 * The store makes DBFS_EV_SETTLED events only for the periods wanted: the
 * durable set (kept in the store, for subscriptions that exist whether
 * or not they are read) and the held ones (for readers open now).
 * At most DBFS_SETTLE_MAX distinct periods at once, each 1 ..
 * DBFS_SETTLE_MS_MAX ms. Each wanted period costs every write event a
 * lookup and a put of its row (plus one delayed message per burst).
 */
#define DBFS_SETTLE_MAX	   8u
#define DBFS_SETTLE_MS_MAX 86400000u /* a day */
/* Replace the durable set by ms[0..n) (duplicates allowed; n 0: none),
 * written in a commit of its own. Errors: -EINVAL (a period 0 or above
 * DBFS_SETTLE_MS_MAX), -ENOSPC (more than DBFS_SETTLE_MAX distinct
 * periods with the held ones), -EOPNOTSUPP (feed off or read-only),
 * -EROFS, -EIO. Any thread not serving a request of this DBFS. */
int dbfs_settle_set(struct dbfs *fs, const uint32_t *ms, size_t n);
/* Want `ms` while a reader needs it (counted: hold twice, release
 * twice). -EINVAL, -ENOSPC, -EOPNOTSUPP as above. Any thread. */
int dbfs_settle_hold(struct dbfs *fs, uint32_t ms);
/* Undo one hold of `ms` (none held: nothing). Any thread. */
void dbfs_settle_release(struct dbfs *fs, uint32_t ms);

/* ---- stats (for mfs's stats.NAME); the feed's space is reported here, apart
 * from the file system's usage (it counts in no quota) ---- */
struct dbfs_feed_stats {
	bool enabled;
	uint8_t uuid[16];
	uint64_t first_seq;     /* oldest retained event (next_seq if none) */
	uint64_t next_seq;      /* the next event's number (last + 1) */
	uint64_t events;        /* retained: next_seq - first_seq */
	uint64_t bytes;         /* record bytes retained (an estimate of the store's
	                           space for them, per-record overhead included) */
	uint64_t oldest_ns;     /* commit time of the oldest retained event, 0: none */
	uint64_t enqueued;      /* events written by this process since open */
	uint64_t trimmed;       /* events dropped by retention since open */
	uint64_t subs;          /* durable subscriptions */
	uint64_t subs_expired;  /* deleted for idleness since open */
	uint64_t gaps;          /* gap records handed to readers since open */
	struct dbfs_feed_limits limits;
};
/* 0, -EOPNOTSUPP (feed off: only `enabled` and `uuid` are set), -EIO,
 * -EAGAIN (reader slots full). Any thread (a read transaction). */
int dbfs_feed_stats(struct dbfs *fs, struct dbfs_feed_stats *st);

/* ---- readers ---- */

/* Where a reader starts. */
enum dbfs_feed_from {
	DBFS_FEED_NOW = 0, /* only events committed after the open */
	DBFS_FEED_SEQ,     /* from sequence number `seq` (gap record first if it
	                      is no longer retained) */
	DBFS_FEED_TIME,    /* from the first event with time_ns >= `time_ns` */
	DBFS_FEED_OLDEST,  /* from the oldest retained event */
};
struct dbfs_feed_start {
	enum dbfs_feed_from from;
	uint64_t seq;
	uint64_t time_ns;
	/* NULL, or the UUID of the store the position came from: refused with
	 * -ESTALE unless it is this store's. */
	const uint8_t *uuid;
};

/* Subscription names: 1..DBFS_FEED_SUB_MAX bytes of [A-Za-z0-9._-]. */
#define DBFS_FEED_SUB_MAX  40u
/* An opaque text mfs stores with a subscription (its filters), up to: */
#define DBFS_FEED_SPEC_MAX 1024u

/*
 * Create the durable subscription `sub` starting at `start` (NULL: now),
 * with `spec` (NULL: none; stored as given, returned by dbfs_feed_sub_get).
 * It holds nothing beyond the retention bounds. Errors: -EINVAL (name,
 * spec), -EEXIST, -ESTALE, -ERANGE, -EOPNOTSUPP, -EROFS, -ENOSPC, -EIO.
 * Any thread not serving a request of this DBFS that is inside a write.
 */
int dbfs_feed_sub_create(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
			 const char *spec);
/* Delete it (an open reader of it must be closed first: -EBUSY). -ENOENT,
 * -EINVAL, -EROFS, -EOPNOTSUPP, -EIO. Context as dbfs_feed_sub_create. */
int dbfs_feed_sub_delete(struct dbfs *fs, const char *sub);

struct dbfs_feed_sub_info {
	char name[DBFS_FEED_SUB_MAX + 1];
	char spec[DBFS_FEED_SPEC_MAX + 1];
	uint64_t next_seq;     /* first event not acknowledged: where it resumes */
	uint64_t lag;          /* events committed that it has not acknowledged */
	uint64_t gaps;         /* gap records it was given, ever */
	uint64_t lost;         /* events it lost to retention, ever */
	uint64_t created_ns, active_ns; /* CLOCK_REALTIME; active: last open, read or ack */
	bool open;             /* a reader of it is open in this process */
};
/* One subscription's state: 0, -ENOENT, -EINVAL, -EOPNOTSUPP, -EIO. */
int dbfs_feed_sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info);
/* Call cb for every subscription in name order; a non-zero return of cb
 * stops and is returned. 0, -EOPNOTSUPP, -EIO, -ENOMEM. cb must not call
 * the feed functions of this DBFS. */
int dbfs_feed_sub_list(struct dbfs *fs,
		       int (*cb)(void *arg, const struct dbfs_feed_sub_info *info), void *arg);

struct dbfs_feed_reader;

/*
 * Open a reader.
 *   sub NULL: an ephemeral reader starting at `start` (NULL: now); its
 *   position lives in memory only.
 *   sub a name: the durable subscription (it must exist: -ENOENT). It
 *   resumes after its last acknowledged event; `start` non-NULL moves it
 *   there first (a replay; the move is durable with the next ack).
 * At-least-once: events given to a durable reader and not acknowledged
 * (dbfs_feed_ack) when it closes, or when the process dies, are given
 * again by the next open.
 * Errors: -EOPNOTSUPP, -ENOENT, -EBUSY, -EINVAL, -ESTALE, -ERANGE,
 * -ENOMEM, -ENOSPC, -EIO. Any thread not serving a request of this DBFS.
 */
int dbfs_feed_open(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
		   struct dbfs_feed_reader **out);

/*
 * Read up to `max` events into ev[0..max), in sequence order. `*n` gets
 * the count (>= 1 on success). String pointers stay valid until the next
 * read or close of `r`. When the reader lost events (it was behind
 * retention, or started at a sequence number no longer retained) the
 * first record it gets is a DBFS_EV_GAP whose seq is the first lost and
 * gap_next the first still available (it is counted in the
 * subscription's gaps); the events follow from gap_next.
 * timeout_ms: 0 never waits (-EAGAIN when nothing is there), < 0 waits for
 * ever, else up to that long (-ETIMEDOUT). A waiting read is woken by the
 * commit of new events. Errors: -EAGAIN, -ETIMEDOUT, -EINVAL (max 0),
 * -EBADMSG (a damaged record: the reader stays before it), -EIO, -ENOMEM.
 * Thread context: one thread at a time per reader; a thread that holds no
 * write of this DBFS (never from inside a request of it, nor from the
 * notify callback).
 */
int dbfs_feed_read(struct dbfs_feed_reader *r, struct dbfs_event *ev, size_t max, size_t *n,
		   int timeout_ms);

/* Whether a read with timeout 0 would find something now (an event or a
 * gap). Cheap (no transaction); for poll. Same thread rule as read. */
bool dbfs_feed_ready(struct dbfs_feed_reader *r);

/*
 * Acknowledge every event up to and including `seq` (durable readers: the
 * subscription resumes after it; written in a commit of its own, shared
 * with concurrent writes). seq 0 or below the last ack: nothing. Errors:
 * -ERANGE (seq beyond the last event this reader was given), -EROFS,
 * -ENOSPC, -EIO. Ephemeral readers: always 0. Same thread rule as read.
 */
int dbfs_feed_ack(struct dbfs_feed_reader *r, uint64_t seq);

/*
 * Acknowledge every event of subscription `sub` up to and including `seq`
 * without a reader of it (a consumer acking from another process, or
 * after its reader died or the store restarted). A reader of it open
 * meanwhile keeps reading where it is (it may be given acked events
 * again: at-least-once); the next open resumes after `seq`. seq below the
 * current ack: nothing. Errors: -ERANGE (seq beyond the newest event,
 * dbfs_feed_last_seq), -ENOENT, -EINVAL, -EROFS, -EOPNOTSUPP, -ENOSPC,
 * -EIO. Any thread not serving a request of this DBFS.
 */
int dbfs_feed_sub_ack(struct dbfs *fs, const char *sub, uint64_t seq);

/* The next sequence number this reader will read (its position). */
uint64_t dbfs_feed_reader_next(const struct dbfs_feed_reader *r);

/* Close (NULL: nothing). A durable subscription keeps its last ack. */
void dbfs_feed_close(struct dbfs_feed_reader *r);

#endif
