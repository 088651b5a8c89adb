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
 * manager has a budget. Call after the set of mounted DBFSs or a cache_mem
 * changed. mgr->lock held (dbfs_set_cache_limit does not block); no errors.
 */
void mfs_cache_rebalance(struct mfs_manager *mgr);

#endif
