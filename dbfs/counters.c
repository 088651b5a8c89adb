/*
 * Operation counters: what the request paths count in fs->cnt without
 * locks (relaxed atomic adds), and their snapshots. Calls nothing else of
 * the library but the durable points' state.
 */
#include "dbfs/internal.h"

void dbfs_counters(struct dbfs *fs, struct dbfs_counters *c)
{
	c->ops = fs->cnt.ops;
	c->read_bytes = fs->cnt.read_bytes;
	c->write_bytes = fs->cnt.write_bytes;
	c->commits = fs->cnt.commits;
	c->batched_ops = fs->cnt.batched_ops;
	c->map_grows = fs->cnt.map_grows;
	c->errors = fs->cnt.errors;
	c->flushes = fs->cnt.flushes;
	c->flushes_listed = fs->cnt.flushes_listed;
	dbfs_durable_state(fs, &c->unsynced_age_ms, &c->unsynced_bytes);
}

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
