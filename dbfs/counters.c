/*
 * Operation counters: what the request paths count in fs->cnt without
 * locks (relaxed atomic adds), and the errno tallies. Calls nothing else of
 * the library.
 */
#include "dbfs/internal.h"

void dbfs_count_error(struct dbfs *fs, int e)
{
	fs->cnt.errors++;
	atomic_fetch_add_explicit(&fs->cnt.by_errno[e > 0 && e < DBFS_ERRNOS ? e : 0], 1,
				  memory_order_relaxed);
}

void dbfs_errno_counts(struct dbfs *fs, uint64_t out[DBFS_ERRNOS])
{
	for (int i = 0; i < DBFS_ERRNOS; i++)
		out[i] = atomic_load_explicit(&fs->cnt.by_errno[i], memory_order_relaxed);
}
