/*
 * The retained usage history: one LMDB environment, STATE/usage, written
 * by the accountant only (account.h) and read by any thread. It also holds
 * the accountant's queue (libmfsq, queue "usage").
 *
 * One row per DBFS, resolution and interval, in the database "history":
 *
 *   key   +----------------+----+-----+------------------+
 *         | DBFS name      | 00 | res | end time  (BE64) |
 *         | 1..64 bytes    |    | 1 B | unix seconds     |
 *         +----------------+----+-----+------------------+
 *         res: MFS_RES_SEC (1 s rows) or MFS_RES_MIN (1 min rows).
 *         Names are printable and never hold a 00 byte, so one DBFS's
 *         rows are contiguous, by resolution, in time order.
 *   value a row, host byte order (the history never leaves the host):
 *
 *         version 1 (before issue 20's kinds; still read, never written):
 *         +-----------------------------------------------+
 *         | t .. feed_lag of struct mfs_usage_row, with   |  112 bytes
 *         | its `version` field 0                         |
 *         +-----------------------------------------------+
 *         version 2 (written now):
 *         +-----------------------+-----------+---------+-----------------+
 *         | as version 1, but     | flushes   | commits | kinds (usage_   |
 *         | `version` = 2         | (u64)     | (u64)   | kinds.h), 2+10n |
 *         +-----------------------+-----------+---------+-----------------+
 *
 *         A row that is neither (another size, a damaged encoding, a later
 *         version) is skipped as damaged. Reading a version 1 row gives
 *         version 1 and zero flushes, commits and kinds (not known then).
 *
 * Idle intervals have no row: a reader takes a missing row as no
 * operations and unchanged gauges. Rows older than the retention of their
 * resolution are deleted by mfs_usage_trim, so the store holds at most
 * (DBFSs ever active in the window) x (fine_sec + coarse_sec / 60) rows
 * of about 200 bytes each (10 more per kind of request or error seen in
 * the interval), in a map of MFS_USAGE_MAP bytes (sparse); when it is
 * full, rows are dropped (and counted), never anything else.
 * The environment is MDB_NOSYNC: the history survives a crash of mfs (the
 * page cache holds it), not a power loss, by design: no device flush per
 * second.
 */
#ifndef MFS_USAGE_STORE_H
#define MFS_USAGE_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#include "usage_kinds.h"

#define MFS_RES_SEC 1
#define MFS_RES_MIN 2
#define MFS_USAGE_MAP (2ull << 30)

/* What one DBFS did in one interval (counts), and its gauges at its end. */
struct mfs_usage_row {
	uint64_t t;       /* end of the interval, unix seconds */
	uint32_t span;    /* seconds it covers: 1 or 60 */
	uint32_t version; /* of the row as stored: 1 (no fields below feed_lag) or 2 */
	uint64_t ops, read_bytes, write_bytes, errors, throttled, feed_events;
	uint64_t lat_p50_ns, lat_p99_ns; /* 0: no request in the interval */
	uint64_t bytes_used, inodes_used, cache_bytes, feed_lag;
	/* version 2 */
	uint64_t flushes; /* durable points made */
	uint64_t commits; /* LMDB write transactions */
	struct mfs_usage_kinds kinds; /* requests by operation, errors by errno */
};
#define MFS_USAGE_ROW_VERSION 2
#define MFS_USAGE_ROW_V1_SIZE 112 /* offsetof(struct mfs_usage_row, flushes) */

struct mfs_usage_store;

/*
 * Open (create) the history in directory `dir` (made 0700 if missing),
 * with room for `extra_dbs` more named databases (the queue's).
 * Errors: -errno of mkdir/LMDB (-ENOMEM, -EACCES, -ENOSPC, ...), -EIO for
 * an LMDB error without an errno meaning; `err` says which.
 * The accountant's thread or the one that starts it.
 */
int mfs_usage_open(const char *dir, unsigned extra_dbs, struct mfs_usage_store **out, char *err,
		   size_t errlen);
void mfs_usage_close(struct mfs_usage_store *st);
MDB_env *mfs_usage_env(struct mfs_usage_store *st);

/* A write transaction for puts and trims / its end. Errors: -errno.
 * The accountant's thread only (one writer). */
int mfs_usage_begin(struct mfs_usage_store *st, MDB_txn **txn);
int mfs_usage_commit(MDB_txn *txn);

/* Put one row (as version 2, whatever row->version says). -ENOSPC: the
 * map is full (the transaction must be aborted); -EINVAL: bad name. */
int mfs_usage_put(struct mfs_usage_store *st, MDB_txn *txn, const char *name, unsigned res,
		  const struct mfs_usage_row *row);

/* Delete the rows of every DBFS ending before `sec_before` (1 s rows) and
 * `min_before` (1 min rows). Returns rows deleted, or -errno. */
int mfs_usage_trim(struct mfs_usage_store *st, MDB_txn *txn, uint64_t sec_before,
		   uint64_t min_before);

/* Call fn for each row of `name` at resolution `res` ending at or after
 * `from` and before `to` (0: no end), in time order, version 1 rows
 * converted (see the value above), damaged ones skipped; a non-zero return
 * from fn stops the walk and is returned. Its own read transaction.
 * Errors: -EIO, -EAGAIN (reader slots), -ENOMEM. Any thread. */
typedef int mfs_usage_fn(void *arg, const struct mfs_usage_row *row);
int mfs_usage_each(struct mfs_usage_store *st, const char *name, unsigned res, uint64_t from,
		   uint64_t to, mfs_usage_fn *fn, void *arg);

/*
 * The text of NAME/usage (usage_text.c): a header line starting with '#',
 * then one line per row, oldest first: the 1 min rows before the first
 * 1 s row's minute, then the 1 s rows (retained within `fine_sec` of
 * `now`). Columns, space-separated: end time (unix seconds), the same as
 * an ISO 8601 UTC date, span (s), then per second over the row: ops,
 * read bytes, written bytes, errors, throttled requests, feed events;
 * then latency p50 and p99 (us, 0: no request), and at its end: bytes and
 * inodes used, cache bytes, worst feed lag; then (version 2 rows; "-" for
 * a version 1 row) flushes per second, and the interval's requests by
 * operation and errors by errno as counts (usage_kinds.h's text, "-" for
 * none: `mkdir:20,lookup:3` and `ENOTEMPTY:7`). Returns 0 or -errno of the
 * read (a '# error' line says so).
 */
struct mfs_buf;
int mfs_usage_text(struct mfs_usage_store *st, const char *name, uint64_t now, uint64_t fine_sec,
		   struct mfs_buf *b);

#endif
