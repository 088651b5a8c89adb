/*
 * Shared stores (issue 21; ARCHITECTURE mechanism 7): several processes
 * open one store at once (the mount option `shared`), kept coherent through
 * the change feed. libdbfs internal: dbfs/store.c opens and closes, the
 * notifier thread follows the other processes' events (shared.c), the
 * lock scheme and the liveness of the others (shared_lock.c).
 *
 * What holds across processes (mfs.8, SHARED STORES, says it to users):
 *   - LMDB serialises writers of all processes (its writer lock in
 *     lock.mdb); every counter a write needs (the next inode number, the
 *     usage record, quotas) is read inside the write transaction. The
 *     feed's sequence numbers come from the queue, which reads its shard
 *     back when another process committed in between (queue/put.c); its
 *     running totals are read back from the store in shared mode (feed.c).
 *   - An unlinked inode is never destroyed while the store is shared: it
 *     waits in the orphan table (another process may hold it open) and is
 *     reclaimed by an open, a close or a reap (reap.c: statfs, the tick)
 *     that finds no other process holding dbfs.lock (a process killed
 *     holds nothing: the kernel drops its lock), unless this process's
 *     kernel still holds it.
 *   - Each process's events carry its own writer id (the queue's enqueuer):
 *     the notifier skips its own and invalidates the kernel's caches for
 *     the others'.
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

struct dbfs_shared {
	uint64_t writer;            /* this process's enqueuer id in the feed */
	dev_t dev;                  /* the store directory's identity: one open */
	ino_t ino;                  /*   per process (LMDB forbids two) */
	int wake_fd;                /* dbfs.wake: the futex word other processes bump */
	_Atomic uint32_t *wake;     /* its mapping; NULL: poll */
	/* the notifier thread (shared.c) */
	pthread_t thread;
	bool running;
	_Atomic int stop;
	struct fuse_session *se;
	struct dbfs_feed_reader *reader; /* handed to the thread when it starts */
	/* counters for stats */
	_Atomic uint64_t ev_others, ev_own, inval_entry, inval_inode, inval_delete, inval_failed;
	_Atomic uint64_t lag_last_us, lag_max_us, wakes_sent, barrier_timeouts, gaps;
#define DBFS_SHARED_HIST 1000 /* lag buckets of 50 us; the last takes the rest */
	_Atomic uint64_t lag_hist[DBFS_SHARED_HIST + 1];
	int slot;                   /* this process's slot in dbfs.wake; -1: none */
	pthread_mutex_t self_lock;  /* self[]: inodes of our own kernel to invalidate */
	uint64_t self[64];
	unsigned nself;
};

/* ---- shared_lock.c ---- */
/* Take dbfs.lock (fd) for this open: LOCK_EX, or LOCK_SH when `shared`;
 * never waits. 0, or -EBUSY with the reason naming the other holder's mode
 * in err, or another -errno of flock. Any thread. */
int dbfs_lock_take(int fd, bool shared, const char *dir, char *err, size_t errlen);
/* Does any other open file description hold a lock on dbfs.lock (fd)? Read
 * from /proc/locks: a process that died holds none. Errors count as "not
 * alone" (the safe answer). Any thread. */
bool dbfs_lock_alone(int fd);
/* Number of processes holding dbfs.lock (fd), this one included; 0 when
 * /proc/locks cannot be read. */
unsigned dbfs_lock_holders(int fd);
/* Does process `pid` hold a flock on dbfs.lock (fd)? true when /proc/locks
 * cannot be read (the safe answer). */
bool dbfs_lock_held_by(int fd, pid_t pid);
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
 * other processes' notifiers. Never blocks. */
void dbfs_shared_committed(struct dbfs *fs);
/* Start (se non-NULL) or stop and join (NULL) the notifier thread. From
 * dbfs_set_session only: the session outlives the thread. */
void dbfs_shared_session(struct dbfs *fs, struct fuse_session *se);
/* Close-to-open (FUSE flush of a shared store): wait until every other
 * live process's notifier applied the events this process committed so
 * far, at most BARRIER_MS (2 s). 0, or -ETIMEDOUT (counted; the close
 * still succeeds). From a worker serving the flush: it holds no lock and
 * no transaction; the other processes' notifiers never wait for it. */
int dbfs_shared_barrier(struct dbfs *fs);
/* After a reply: this process's kernel holds a wrong size for ino (an
 * append that went where another process's data ended). The notifier
 * invalidates its attributes (never the request: libfuse's rule). Any
 * thread; never blocks (a full list drops the oldest: the attribute
 * timeout then bounds it). */
void dbfs_shared_self_inval(struct dbfs *fs, uint64_t ino);

#endif
