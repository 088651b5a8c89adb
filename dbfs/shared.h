/*
 * Shared stores (issue 21; ARCHITECTURE mechanism 7): several processes
 * open one store at once (the mount option `shared`), kept coherent through
 * the change feed. libdbfs internal: dbfs/store.c opens and closes, the
 * notifier follows the other processes' events (shared.c) on the
 * process's pool of notifier threads (shared_pool.c), closes wait for the
 * others' notifiers (shared_barrier.c), the lock scheme and the liveness
 * of the others (shared_lock.c).
 *
 * What holds across processes (mfs.8, SHARED STORES, says it to users):
 *   - LMDB serialises writers of all processes (its writer lock in
 *     lock.mdb); every counter a write needs (the next inode number, the
 *     usage record, quotas) is read inside the write transaction. So are
 *     the feed's sequence numbers and running totals (the 'M' row, which
 *     every batch of a shared store rewrites; feed_outbox.c); each process
 *     enqueues into a shard of its own (its dbfs.wake slot's, modulo the
 *     queue's shards), the seq in each event, so readers see one dense
 *     feed across the shards (feed_shards.c). A killed process's events
 *     committed with its changes: they are read from its shard as any.
 *   - An unlinked inode is never destroyed while the store is shared: it
 *     waits in the orphan table (another process may hold it open) and is
 *     reclaimed by an open, a close or a reap (reap.c: statfs, the tick)
 *     that finds no other process holding dbfs.lock (a process killed
 *     holds nothing: the kernel drops its lock), unless this process's
 *     kernel still holds it.
 *   - Each process's events carry its own writer id (in each message's
 *     prefix): the notifier skips its own and invalidates the kernel's
 *     caches for the others'.
 * Refused with shared (EINVAL, the reason in err): writeback_cache, ro,
 * feed=off, and durability=normal on a store that is not in memory.
 * Expiry, settled events and the deferred reclaim of large files do not
 * run while a store is open shared.
 */
#ifndef DBFS_SHARED_H
#define DBFS_SHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct dbfs;
struct fuse_session;
struct fuse_req;

/*
 * dbfs.wake, mapped shared by every process of the store (shared.c says
 * how it is used):
 *
 *   +------+---------+---------------------------+----------------------+
 *   | wake | applied | slot[126]: writer | seq   | waiting[126] u32     |
 *   | u32  | u32     | u64 each                  |                      |
 *   +------+---------+---------------------------+----------------------+
 *   host order; wake: bumped per commit with events (and per applied
 *   advance while any process has closes parked); applied: bumped when a
 *   notifier advanced its slot; writer 0: a free slot; seq UINT64_MAX: a
 *   notifier not started; waiting[i]: closes the process of slot i has
 *   parked (shared_barrier.c), 0 when the slot is freed
 */
#define DBFS_WAKE_SLOTS 126
struct dbfs_wake_page {
	_Atomic uint32_t wake, applied;
	struct {
		_Atomic uint64_t writer, seq;
	} slot[DBFS_WAKE_SLOTS];
	_Atomic uint32_t waiting[DBFS_WAKE_SLOTS];
};
_Static_assert(sizeof(struct dbfs_wake_page) <= 4096, "one page");

/* A close waiting for the other processes (shared_barrier.c). */
struct dbfs_parked {
	struct fuse_req *req;
	uint64_t want;  /* the feed's last seq at the close */
	uint64_t t0_ms; /* CLOCK_MONOTONIC at the close */
	struct dbfs_parked *next;
};

struct dbfs_shared {
	uint64_t writer;            /* this process's enqueuer id in the feed */
	dev_t dev;                  /* the store directory's identity: one open */
	ino_t ino;                  /*   per process (LMDB forbids two) */
	int wake_fd;                /* dbfs.wake: the futex word other processes bump */
	_Atomic uint32_t *wake;     /* its mapping; NULL: poll */
	/* its notifier: passes run by the pool (shared_pool.c) */
	_Atomic bool serving;       /* in the pool; set and cleared under park_lock too */
	int pool_slot;              /* its place in the pool's table */
	struct fuse_session *se;
	struct dbfs_feed_reader *reader; /* opened before the mount is served */
#define DBFS_SHARED_READ_MAX 64
	struct dbfs_event *evbuf;   /* DBFS_SHARED_READ_MAX events for a pass */
	/* counters for stats */
	_Atomic uint64_t ev_others, ev_own, inval_entry, inval_inode, inval_delete, inval_failed;
	_Atomic uint64_t lag_last_us, lag_max_us, wakes_sent, barrier_timeouts, gaps;
#define DBFS_SHARED_HIST 1000 /* lag buckets of 50 us; the last takes the rest */
	_Atomic uint64_t lag_hist[DBFS_SHARED_HIST + 1];
	int slot;                   /* this process's slot in dbfs.wake; -1: none */
	pthread_mutex_t park_lock;  /* parked: closes waiting for the others */
	struct dbfs_parked *parked;
	_Atomic uint64_t live_check_ms; /* the last liveness look of a slow slot */
	_Atomic uint64_t data_seq;  /* this process's last data event: closes wait for it */
	pthread_mutex_t self_lock;  /* self[]: inodes of our own kernel to invalidate */
	uint64_t self[64];
	unsigned nself;
};

/* ---- shared_lock.c ---- */
/* Take dbfs.lock (fd) for this open: LOCK_EX, or LOCK_SH when `shared`;
 * never waits. 0, or -EBUSY with the reason naming the other holder's mode
 * in err, or another -errno of flock. Any thread. */
int dbfs_lock_take(int fd, bool shared, const char *dir, char *err, size_t errlen);
/* A shared open, after dbfs_lock_take: mark this process's slot of
 * dbfs.wake (slot, or -1 for none) on dbfs.lock (fd) with an OFD lock,
 * which the others read atomically (shared_lock.c says why not only
 * /proc/locks). 0 or -errno of fcntl. Any thread. */
int dbfs_lock_mark(int fd, int slot);
/* Does no other process hold dbfs.lock (fd)? false when any other open
 * file description marks it or /proc/locks lists another flock on it;
 * errors count as "not alone" (the safe answer). Any thread. */
bool dbfs_lock_alone(int fd);
/* Number of processes holding dbfs.lock (fd), this one included: the
 * marks, or /proc/locks's count when it shows more. Any thread. */
unsigned dbfs_lock_holders(int fd);
/* Is the process of slot `slot` (pid `pid`) alive: does it still mark its
 * slot on dbfs.lock (fd), or does /proc/locks show a flock of pid (a build
 * before the marks)? Any thread. */
bool dbfs_lock_slot_alive(int fd, int slot, pid_t pid);
/* One shared open per store per process: register (dev, ino) of the store
 * directory. 0, or -EBUSY when this process has it open already. */
int dbfs_shared_claim(struct dbfs_shared *sh, const char *dir, char *err, size_t errlen);
void dbfs_shared_unclaim(struct dbfs_shared *sh);

/* ---- shared.c ---- */
/* dbfs_open: make fs->shared for a shared open (writer id, dbfs.wake).
 * 0 or -ENOMEM/-errno with err. dbfs_shared_close undoes it (after the
 * notifier stopped). */
int dbfs_shared_open(struct dbfs *fs, char *err, size_t errlen);
void dbfs_shared_close(struct dbfs *fs);
/* The group commit's leader after a commit that enqueued events: wake the
 * other processes' notifiers; data_seq: the batch's last data event (0:
 * none), which this process's closes wait for from now on. Never blocks. */
void dbfs_shared_committed(struct dbfs *fs, uint64_t data_seq);
/* Does a close wait for the event? Those that change a file's data or
 * size (write, truncate, fallocate, punch, a setattr of the size) and
 * those that take a name away (unlink, rmdir, rename, expiry): after the
 * close no other mount reaches the old file by its old name. New names,
 * links, attributes and xattrs are seen within the notifiers' lag. */
struct dbfs_event;
bool dbfs_shared_close_waits(const struct dbfs_event *ev);
/* Start (se non-NULL) or stop (NULL) the store's notifier: it joins or
 * leaves the pool; at a stop the parked closes are answered. From
 * dbfs_set_session only: the session outlives the notifier. */
void dbfs_shared_session(struct dbfs *fs, struct fuse_session *se);
/* One notifier pass over the store (shared_pool.c's threads only). */
void dbfs_shared_pass(struct dbfs *fs);

/* ---- shared_pool.c ---- */
/* The notifier pool: DBFS_NOTIFIERS threads of the process follow every
 * shared store it has open (threads do not grow with the stores). Join:
 * passes of fs start (the pool's threads start with the first store).
 * 0 or -ENOMEM/-EAGAIN (too many stores or no thread). Leave: returns
 * when no pass of fs runs or will run (the threads stop with the last
 * store). Both from dbfs_shared_session only. */
#define DBFS_NOTIFIERS 2
int dbfs_shared_pool_join(struct dbfs *fs);
void dbfs_shared_pool_leave(struct dbfs *fs);
/* Wake fs's pool thread now (a close was parked: its waits get shorter).
 * Any thread; never blocks. */
void dbfs_shared_poke(struct dbfs *fs);

/* ---- shared_barrier.c ---- */
/* Close-to-open (FUSE flush of a shared store): reply to req once every
 * other live process's notifier applied this process's last event that
 * closes wait for (dbfs_shared_close_waits) committed before the close, and with it every
 * event before it; at once when there is none. At most 2 s after the close (a close that stopped waiting is
 * counted in barrier_timeouts and still succeeds: its reply is 0). It does
 * not wait in the calling worker: a close the others have not caught up
 * with is parked and answered by this process's notifier, so that workers
 * stay free for the requests that hold the kernel locks the other
 * processes' notifiers wait for (two processes whose workers all waited
 * in closes for each other would otherwise wait for the timeout). With no
 * notifier running, or no memory to park, it waits in the worker. From a
 * worker serving the flush, holding no lock and no transaction. */
void dbfs_shared_flush(struct dbfs *fs, struct fuse_req *req);
/* The notifier: answer the parked closes the others caught up with (or
 * whose 2 s are over); all of them when `all` (the notifier stops). The
 * number still parked. Never blocks on another process. */
unsigned dbfs_shared_serve_parked(struct dbfs *fs, bool all);
/* Free slot i of the page, owned by `writer` (the owner closing, or a
 * waiter that found its process dead). */
void dbfs_wake_page_free_slot(struct dbfs_wake_page *p, int i, uint64_t writer);
/* Has any process closes parked? */
bool dbfs_wake_page_waiting(struct dbfs_wake_page *p);
/* After a reply: this process's kernel holds a wrong size for ino (an
 * append that went where another process's data ended). The notifier
 * invalidates its attributes (never the request: libfuse's rule). Any
 * thread; never blocks (a full list drops the oldest: the attribute
 * timeout then bounds it). */
void dbfs_shared_self_inval(struct dbfs *fs, uint64_t ino);

#endif
