/* The kernel page-cache budget of the mounted DBFSs (see cache_budget.h). */
#include <stdlib.h>

#include "account.h"
#include "cache_budget.h"

static void set_limit(struct mfs_dbfs *d, uint64_t lim)
{
	if (lim != d->cache_limit) {
		d->cache_limit = lim;
		dbfs_set_cache_limit(d->fs, lim);
	}
}

/* By activity (governor.h, mfs_share_split): false when nobody is active
 * or memory is short, and the equal shares below apply. */
static bool rebalance_by_use(struct mfs_manager *mgr, size_t n)
{
	struct mfs_account *a = mfs_account_running();
	double *w = calloc(n, sizeof(*w)), wsum = 0;
	uint64_t *cap = calloc(n, sizeof(*cap)), *out = calloc(n, sizeof(*out));
	size_t i = 0;
	bool done = false;

	if (!a || !w || !cap || !out)
		goto end;
	uint64_t equal = mgr->mem / n;
	for (struct mfs_dbfs *d = mgr->list; d && i < n; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs) {
			/* one held to its own mem= below an equal share keeps
			 * exactly that (mfs_share_split): its activity alone
			 * moves nothing */
			bool fixed = d->cache_mem && d->cache_mem <= equal;
			w[i] = fixed ? 0 : mfs_account_weight(a, d->id);
			wsum += w[i];
			cap[i++] = d->cache_mem;
		}
	if (wsum <= 0 || i != n)
		goto end;
	mfs_share_split(mgr->mem, n, w, cap, out);
	i = 0;
	for (struct mfs_dbfs *d = mgr->list; d && i < n; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs) {
			uint64_t old = d->cache_limit, lim = out[i++];
			/* no churn: a change under 1/16 waits */
			if (old && lim > old - old / 16 && lim < old + old / 16)
				continue;
			set_limit(d, lim);
		}
	done = true;
end:
	free(w);
	free(cap);
	free(out);
	return done;
}

void mfs_cache_rebalance(struct mfs_manager *mgr)
{
	uint64_t n = 0;

	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs)
			n++;
	if (mgr->mem && n > 1 && rebalance_by_use(mgr, n))
		return;
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->fs)
			continue;
		uint64_t lim = d->cache_mem;
		if (mgr->mem) {
			uint64_t share = mgr->mem / n;
			if (!lim || share < lim)
				lim = share ? share : 1;
		}
		set_limit(d, lim);
	}
}
