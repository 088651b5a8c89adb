/*
 * Operation counters: a snapshot of what the request paths count in
 * fs->cnt without locks. Calls nothing else of the library.
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
	dbfs_durable_state(fs, &c->unsynced_age_ms, &c->unsynced_bytes);
}
