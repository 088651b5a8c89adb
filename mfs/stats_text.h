/*
 * The text of user.mfs.stats.NAME and NAME/stats (format in mfs(8)):
 * "key=value" lines of a DBFS's counters, its usage against its quotas,
 * its rates and its last usage record's totals by kind (account.h), its
 * change feed, delayed work and shared-store figures.
 */
#ifndef MFS_STATS_TEXT_H
#define MFS_STATS_TEXT_H

#include "buf.h"
#include "manager.h"

/*
 * Append d's stats to b. Called with mgr->lock held, and returns with it
 * held; it releases the lock while it reads d's store (a read transaction
 * and a stat of data.mdb in dbfs_usage, the feed's and delayed work's
 * read transactions), with d pinned (mfs_dbfs_pin, manager.h), so that a
 * slow store holds neither the control thread nor other status readers.
 * d is not used after the lock is released except through the pin: the
 * caller must not use d after the call either (it may be gone).
 * A manager request thread.
 */
void mfs_stats_text(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b);

#endif
