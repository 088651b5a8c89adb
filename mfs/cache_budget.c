/* The kernel page-cache budget of the mounted DBFSs (see cache_budget.h). */
#include "cache_budget.h"

void mfs_cache_rebalance(struct mfs_manager *mgr)
{
	uint64_t n = 0;

	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs)
			n++;
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->fs)
			continue;
		uint64_t lim = d->cache_mem;
		if (mgr->mem) {
			uint64_t share = mgr->mem / n;
			if (!lim || share < lim)
				lim = share ? share : 1;
		}
		if (lim != d->cache_limit) {
			d->cache_limit = lim;
			dbfs_set_cache_limit(d->fs, lim);
		}
	}
}
