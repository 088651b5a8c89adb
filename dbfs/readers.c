/*
 * Stale LMDB reader slots. A process that ends without closing the
 * environment (SIGKILL, a crash) leaves its slots in lock.mdb's reader
 * table; a slot that held a snapshot keeps that transaction the oldest
 * reader's, so no page freed after it is reused and the store grows with
 * every write (lmdb.h, caveats). LMDB resets the table only when an open
 * finds no other process using lock.mdb, which an exclusive store's open
 * does and a shared store's (several processes, shared.h) or one read at
 * the same time by an LMDB tool (mdb_copy, mdb_stat) does not. So every
 * open and every tick (once a second, on a flusher thread: never in a
 * request) asks LMDB to clear the slots of processes that are gone
 * (mdb_reader_check: each slot's process holds a byte lock in lock.mdb
 * while alive; one F_GETLK per other process).
 *
 * LMDB's rule that makes this safe: a process must not close another
 * descriptor of lock.mdb while its environment is open (that drops its
 * byte lock, and its live slots would look stale); nothing in libdbfs
 * opens lock.mdb (guard.c only stats it).
 */
#include "dbfs/internal.h"

int dbfs_readers_check(struct dbfs *fs)
{
	int dead = 0;
	int rc = mdb_reader_check(fs->env, &dead);
	if (!rc && dead > 0)
		atomic_fetch_add(&fs->cnt.readers_cleared, (uint64_t)dead);
	return rc;
}
