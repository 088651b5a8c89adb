/*
 * Settled events' periods from the durable subscriptions (feed_settle.c).
 */
#ifndef MFS_FEED_SETTLE_H
#define MFS_FEED_SETTLE_H

#include <stdint.h>

#include "dbfs/feed.h"

/*
 * Hand fs the settle=MS of every durable subscription of it, plus
 * `extra_ms` (0: none; a subscription about to be created), as its
 * durable set. 0, -ENOSPC (more than DBFS_SETTLE_MAX distinct periods,
 * with those readers hold: nothing changed), or what dbfs_feed_sub_list
 * and dbfs_settle_set return (-EOPNOTSUPP, -EROFS, -EIO, -ENOMEM).
 * Thread: one not serving a request of this DBFS (the control thread's
 * executors).
 */
int mfs_feed_settle_sync(struct dbfs *fs, uint32_t extra_ms);

#endif
