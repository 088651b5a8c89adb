/* Governor decisions (see governor.h). */
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
