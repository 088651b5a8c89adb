/*
 * The public counters snapshot (dbfs_counters): the request paths' counters
 * beside the durable points' state, so a reader takes both in one call.
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
	c->flushes_imaged = fs->cnt.flushes_imaged;
	c->flushes_held = fs->cnt.flushes_held;
	c->readers_cleared = fs->cnt.readers_cleared;
	dbfs_durable_state(fs, &c->unsynced_age_ms, &c->unsynced_bytes);
}
