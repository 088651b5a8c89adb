/* Governor decisions (see governor.h). */
#include <stddef.h>

#include "governor.h"

void mfs_bucket_set(struct mfs_bucket *b, uint64_t rate, double min_burst, uint64_t now_ns)
{
	b->rate = (double)rate;
	b->burst = b->rate / 10.0;
	if (b->burst < min_burst)
		b->burst = min_burst;
	b->tokens = b->burst;
	b->last_ns = now_ns;
}

void mfs_bucket_refill(struct mfs_bucket *b, uint64_t now_ns)
{
	if (b->rate <= 0 || now_ns <= b->last_ns)
		return;
	b->tokens += b->rate * (double)(now_ns - b->last_ns) / 1e9;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last_ns = now_ns;
}

void mfs_bucket_take(struct mfs_bucket *b, double n)
{
	if (b->rate > 0)
		b->tokens -= n;
}

bool mfs_bucket_ok(const struct mfs_bucket *b)
{
	return b->rate <= 0 || b->tokens >= 0;
}

uint64_t mfs_bucket_wait_ns(const struct mfs_bucket *b)
{
	if (mfs_bucket_ok(b))
		return 0;
	return (uint64_t)(-b->tokens / b->rate * 1e9) + 1;
}

unsigned mfs_fair_limit(unsigned workers, unsigned sessions, unsigned busy, unsigned cap)
{
	unsigned limit = workers;

	if (sessions > 1 && limit > 1)
		limit--; /* one worker stays free for the others */
	if (busy > 1) {
		unsigned share = (workers + busy - 1) / busy;
		if (share < limit)
			limit = share;
	}
	if (cap && cap < limit)
		limit = cap;
	return limit ? limit : 1;
}

bool mfs_should_yield(uint64_t now_ns, uint64_t heavy_until, uint64_t light_until,
		      uint64_t unyield_until)
{
	return now_ns < heavy_until && now_ns < light_until && now_ns >= unyield_until;
}

uint64_t mfs_yield_guard(uint64_t now_ns, uint64_t ns)
{
	return ns > MFS_STARVE_NS ? now_ns + MFS_UNYIELD_NS : 0;
}

void mfs_share_split(uint64_t total, size_t n, const double *weight, const uint64_t *cap,
		     uint64_t *out)
{
	uint64_t floor_share, left;
	bool open[n ? n : 1];

	if (!n)
		return;
	floor_share = total / n / 4;
	left = total;
	for (size_t i = 0; i < n; i++) {
		/* held to its own cap below an equal share: exactly that cap,
		 * whatever its activity (what its operator set) */
		if (cap[i] && cap[i] <= total / n)
			out[i] = cap[i];
		else /* no cap, or one above an equal share: above the floor */
			out[i] = floor_share;
		open[i] = !cap[i] || out[i] < cap[i];
		left -= out[i];
	}
	/* hand out `left` by weight (equally when nobody is active) among
	 * those under their cap; what a cap cuts off goes round again */
	for (size_t round = 0; round < n && left; round++) {
		double w = 0;
		size_t nopen = 0;
		for (size_t i = 0; i < n; i++)
			if (open[i]) {
				nopen++;
				w += weight[i] > 0 ? weight[i] : 0;
			}
		if (!nopen)
			break;
		bool even = w <= 0; /* the open ones are idle: equal parts */
		uint64_t given = 0;
		for (size_t i = 0; i < n; i++) {
			if (!open[i])
				continue;
			double wi = even ? 1 : weight[i] > 0 ? weight[i] : 0;
			uint64_t add = (uint64_t)((double)left * wi / (even ? (double)nopen : w));
			if (cap[i] && out[i] + add >= cap[i]) {
				add = cap[i] - out[i];
				open[i] = false;
			}
			out[i] += add;
			given += add;
		}
		left -= given < left ? given : left;
		if (!given)
			break;
	}
	for (size_t i = 0; i < n; i++)
		if (total && !out[i])
			out[i] = 1;
}

unsigned mfs_worker_share(unsigned workers, double demand, unsigned others_ceil)
{
	if (demand < 1.0 || workers < 2)
		return 0;
	unsigned need = (unsigned)demand + (demand > (double)(unsigned)demand) + 1;
	if (others_ceil + 1 >= workers)
		return 0;
	unsigned room = workers - others_ceil - 1;
	return need < room ? need : room;
}
