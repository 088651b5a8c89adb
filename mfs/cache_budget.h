/*
 * The kernel page-cache budget of the mounted DBFSs: each gets its own mem=
 * within an equal share of the manager's mem=.
 */
#ifndef MFS_CACHE_BUDGET_H
#define MFS_CACHE_BUDGET_H

#include "manager.h"

/*
 * Give every mounted DBFS its cache limit (dbfs_set_cache_limit where it
 * changed): min(its cache_mem, mgr->mem / mounted DBFSs), never 0 when the
 * manager has a budget. While some of them are active (the accountant's
 * rates, account.h), mgr->mem is split by activity instead
 * (mfs_share_split: a floor for each, the rest toward the busy ones, each
 * within its own mem=; one held to its own mem= below an equal share does
 * not count as busy: it could take no more), and back to equal shares once all are idle; the
 * accountant calls it every second for that. Call after the set of mounted DBFSs or a cache_mem
 * changed. mgr->lock held (dbfs_set_cache_limit does not block); no errors.
 */
void mfs_cache_rebalance(struct mfs_manager *mgr);

#endif
