/*
 * The store's health: after an I/O error on a write of the store (a commit
 * or a flush that failed with EIO, or LMDB's MDB_PANIC after a failed meta
 * page write) nothing more is written to it. The operation that met the
 * error gets EIO; every later write gets EROFS, reads go on, and the owner
 * reads the reason with dbfs_health(). ext4's errors=remount-ro is the
 * model: after a failed write the file's pages may be gone from the page
 * cache without being on disk (Linux marks them clean on a failed
 * writeback), so going on writing could commit a tree that points at
 * pages that are not there. Calls nothing else of the library.
 */
#include <stdio.h>
#include <string.h>

#include "dbfs/internal.h"

/* io_failed: 0 healthy; 1 the reason is being written; 2 failed, reason
 * readable. Lock-free: the first failure wins, readers wait for nothing. */
void dbfs_health_check(struct dbfs *fs, int rc, const char *what)
{
	int healthy = 0;
	if (rc != EIO && rc != MDB_PANIC && rc != -EIO)
		return;
	if (!atomic_compare_exchange_strong(&fs->io_failed, &healthy, 1))
		return;
	snprintf(fs->io_reason, sizeof(fs->io_reason), "%s failed: %s", what,
		 rc == MDB_PANIC ? "LMDB panic (a meta page write failed)" : "Input/output error");
	atomic_store(&fs->io_failed, 2);
}

int dbfs_health(struct dbfs *fs, char *reason, size_t len)
{
	int st = atomic_load(&fs->io_failed);
	if (!st)
		return 0;
	if (len)
		snprintf(reason, len, "%s", st == 2 ? fs->io_reason : "I/O error");
	return -EIO;
}
