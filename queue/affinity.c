/* SPDX-License-Identifier: MIT */
/*
 * Shard affinity: which shard an enqueuer's messages go to (all of one
 * enqueuer's to one shard, so its order holds), and enqueuer ids that land
 * in a given shard. Calls no other file of the library.
 */
#include "internal.h"

uint32_t mfsq_shard_of(const mfsq_queue *q, uint64_t enqueuer)
{
	/* splitmix64 finaliser: neighbouring ids spread over the shards */
	uint64_t z = enqueuer + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint32_t)(z % q->cfg.nshards);
}

uint64_t mfsq_enqueuer_in_shard(const mfsq_queue *q, uint32_t shard, uint64_t n)
{
	if (shard >= q->cfg.nshards)
		return UINT64_MAX;
	for (uint64_t id = 0;; id++)
		if (mfsq_shard_of(q, id) == shard && n-- == 0)
			return id;
}
