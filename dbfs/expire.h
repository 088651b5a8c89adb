/*
 * libdbfs — file expiry (issue 19; ARCHITECTURE mechanism 6, delayed work).
 *
 * A user schedules the removal of a regular file by setting the extended
 * attribute user.dbfs.expire:
 *
 *     setfattr -n user.dbfs.expire -v +SECONDS FILE   (that long from now)
 *     setfattr -n user.dbfs.expire -v @EPOCH FILE     (at that time, seconds
 *                                                     since the epoch, UTC)
 *
 * The stored value, what getfattr shows, is always "@EPOCH" (a "+SECONDS"
 * is turned into the absolute time, rounded up to the next whole second).
 * Rewriting the attribute reschedules, removing it cancels. The schedule
 * belongs to the inode: it follows the file across renames and hard links,
 * and goes with it when the file is removed otherwise.
 *
 * At its time (within a second; a store that was not open then: at its
 * next read-write open) every name of the file is removed as by unlink(2),
 * each removal an event DBFS_EV_EXPIRE in the change feed (dbfs/feed.h). A
 * file still open stays readable through its descriptors until closed, as
 * after unlink. The schedule is in the store, written in the same
 * transaction as the attribute: a restart or a crash keeps it.
 *
 * Errors of the setxattr (before anything changes):
 *   -EINVAL  the value is not "+N" or "@N" with N decimal digits only (no
 *            sign, space, newline or fraction);
 *   -ERANGE  the time is after the year 9999;
 *   -EISDIR  the inode is a directory (only regular files expire);
 *   -EPERM   the caller is neither the file's owner nor root;
 *   -EOPNOTSUPP  the DBFS runs with feed=off: the names of an inode are
 *            kept only with the feed, and expiry needs them.
 * plus what any setxattr returns (EROFS, ENOSPC, EEXIST/ENODATA with
 * XATTR_CREATE/XATTR_REPLACE ...).
 */
#ifndef DBFS_EXPIRE_H
#define DBFS_EXPIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dbfs;

#define DBFS_EXPIRE_XATTR   "user.dbfs.expire"
/* The latest time accepted: 9999-12-31T23:59:59Z. */
#define DBFS_EXPIRE_MAX_SEC 253402300799ull

/*
 * Parse a value of user.dbfs.expire (`len` bytes, not NUL-terminated)
 * given the time now (`now_sec`, `now_nsec`): *due_sec gets the absolute
 * time in seconds since the epoch. 0, -EINVAL or -ERANGE (as above). Pure.
 */
int dbfs_expire_parse(const void *val, size_t len, int64_t now_sec, uint32_t now_nsec,
		      uint64_t *due_sec);

struct dbfs_expire_stats {
	uint64_t pending;      /* files with a schedule (rows of the expiry index) */
	uint64_t fired;        /* files removed by expiry since open */
	uint64_t stale;        /* deliveries dropped: rescheduled or cancelled since */
	uint64_t late_p50_us;  /* lateness of the removals since open: commit time */
	uint64_t late_p99_us;  /*   minus the scheduled time (1 ms buckets; above */
	uint64_t late_max_us;  /*   4 s the bucket is 4 s) */
	/* deferred reclaim of large files (unlinked, 64 MiB or more) */
	uint64_t reclaim_files;  /* waiting or being freed */
	uint64_t reclaim_bytes;  /* what they still hold (counted as used) */
	uint64_t reclaimed;      /* files freed since open */
	uint64_t reclaim_pieces; /* transactions that freed part of one */
	uint64_t freed_txn_max;  /* the most data one transaction freed since
				  * open (bytes): DBFS_FREE_MAX bounds it */
	/* settled events (dbfs/feed.h) */
	uint64_t settle_pending; /* bursts waiting for their quiet period to end */
	uint64_t settled;        /* settled events made since open */
};
/* 0, or -EIO (the tables could not be read: pending and reclaim_* are 0).
 * Any thread. */
int dbfs_expire_stats(struct dbfs *fs, struct dbfs_expire_stats *st);

#endif
