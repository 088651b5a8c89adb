/*
 * The governor that follows usage (issue 20): after each tick, the
 * workers a busy DBFS may hold beyond its fair share and the cache memory
 * shares move with the accountant's rates (governor.h decides,
 * cache_budget.h divides the memory). Accountant thread.
 */
#include "account_private.h"
#include "cache_budget.h"
#include "governor.h"

/*
 * The governor's shares from the rates just folded in (governor.h): the
 * workers a busy DBFS may hold beyond its fair share, and the cache
 * memory of the manager's mem= by activity. mgr->lock, then a->lock.
 */
void mfs_account_govern(struct mfs_account *a)
{
	struct mfs_manager *mgr = a->mgr;
	unsigned workers = mfs_loop_workers(mgr->loop);
	unsigned total_ceil = 0;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->sess)
			continue;
		struct mfs_rates r;
		mfs_account_rates(a, d->id, &r);
		d->demand = r.demand[1];
		total_ceil += d->demand > 0 ? (unsigned)d->demand + 1 : 0;
	}
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->sess)
			continue;
		unsigned own = d->demand > 0 ? (unsigned)d->demand + 1 : 0;
		mfs_loop_set_share(d->sess, mfs_worker_share(workers, d->demand, total_ceil - own));
	}
	mfs_cache_rebalance(mgr);
	pthread_mutex_unlock(&mgr->lock);
}
