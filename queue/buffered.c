/* SPDX-License-Identifier: MIT */
/*
 * Memory-only (buffered) messages: a ring per shard in this process, with
 * its own sequence numbers, delivered to the subscribers open here and
 * merged with the shard's stream by delivery time. A message leaves the
 * ring once every open subscriber has read it, or (counted as dropped) when
 * the ring outgrows its share of the memory budget. Never in the store.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static struct mfsq_cmsg **slot(struct mfsq_shard_rt *sh, size_t i)
{
	return &sh->bring[(sh->bhead + i) % sh->bcap];
}

static void pop(mfsq_queue *q, struct mfsq_shard_rt *sh)
{
	struct mfsq_cmsg *m = *slot(sh, 0);

	sh->bbytes -= sizeof(*m) + m->len;
	mfsq_budget_add(-(int64_t)(sizeof(*m) + m->len));
	free(m);
	sh->bhead = (sh->bhead + 1) % sh->bcap;
	sh->bn--;
	sh->bfirst++;
	(void)q;
}

int mfsq_buffered_put(mfsq_queue *q, const struct mfsq_msg_in *in, uint64_t *seq)
{
	uint32_t s = mfsq_shard_of(q, in->enqueuer);
	struct mfsq_shard_rt *sh = &q->shards[s];
	struct mfsq_cmsg *m = malloc(sizeof(*m) + in->len);
	uint64_t now = mfsq_now_us(), limit;

	if (!m)
		return ENOMEM;
	pthread_rwlock_wrlock(&q->cache_lock);
	if (sh->bn == sh->bcap) {
		size_t nc = sh->bcap ? sh->bcap * 2 : 256;
		struct mfsq_cmsg **nv = malloc(nc * sizeof(*nv));

		if (!nv) {
			pthread_rwlock_unlock(&q->cache_lock);
			free(m);
			return ENOMEM;
		}
		for (size_t i = 0; i < sh->bn; i++)
			nv[i] = *slot(sh, i);
		free(sh->bring);
		sh->bring = nv;
		sh->bcap = nc;
		sh->bhead = 0;
	}
	if (!sh->bfirst)
		sh->bfirst = 1;
	memset(&m->h, 0, sizeof(m->h));
	m->seq = sh->bfirst + sh->bn;
	m->len = in->len;
	m->h.enq_us = m->h.dlv_us = now > sh->blast_us ? now : sh->blast_us;
	sh->blast_us = m->h.enq_us;
	m->h.exp_us = in->expire_us;
	m->h.enqueuer = in->enqueuer;
	m->h.prio = in->prio;
	m->h.tag = in->tag;
	m->h.flags = MFSQ_MSG_BUFFERED;
	if (in->len)
		memcpy(m->data, in->data, in->len);
	*slot(sh, sh->bn) = m;
	sh->bn++;
	sh->bbytes += sizeof(*m) + in->len;
	mfsq_budget_add((int64_t)(sizeof(*m) + in->len));
	if (seq)
		*seq = m->seq;
	/* a ring may hold at most half the budget: unread messages go first */
	limit = mfsq_budget_bytes() / 2 / q->cfg.nshards;
	while (sh->bn > 1 && sh->bbytes > limit) {
		pop(q, sh);
		atomic_fetch_add(&q->c.bdropped, 1);
	}
	pthread_rwlock_unlock(&q->cache_lock);
	atomic_fetch_add(&q->c.buffered, 1);
	return 0;
}

struct mfsq_cmsg *mfsq_buffered_at(mfsq_queue *q, uint32_t s, uint64_t bseq)
{
	struct mfsq_shard_rt *sh = &q->shards[s];

	if (bseq < sh->bfirst || bseq >= sh->bfirst + sh->bn)
		return NULL;
	return *slot(sh, bseq - sh->bfirst);
}

uint64_t mfsq_buffered_end(mfsq_queue *q, uint32_t s)
{
	struct mfsq_shard_rt *sh = &q->shards[s];

	return (sh->bfirst ? sh->bfirst : 1) + sh->bn;
}

uint64_t mfsq_buffered_first(mfsq_queue *q, uint32_t s)
{
	return q->shards[s].bfirst ? q->shards[s].bfirst : 1;
}

/* Free what every open subscriber has read (q->lock is taken inside). */
void mfsq_buffered_trim(mfsq_queue *q)
{
	for (uint32_t s = 0; s < q->cfg.nshards; s++) {
		struct mfsq_shard_rt *sh = &q->shards[s];
		uint64_t min = sh->bfirst + sh->bn;

		if (!sh->bn)
			continue;
		pthread_mutex_lock(&q->lock);
		for (mfsq_sub *sb = q->subs; sb; sb = sb->next)
			if (sb->bpos[s] < min)
				min = sb->bpos[s];
		pthread_mutex_unlock(&q->lock);
		while (sh->bn && sh->bfirst < min)
			pop(q, sh);
	}
}

void mfsq_buffered_free_all(mfsq_queue *q)
{
	if (!q->shards)
		return;
	for (uint32_t s = 0; s < q->cfg.nshards; s++) {
		while (q->shards[s].bn)
			pop(q, &q->shards[s]);
		free(q->shards[s].bring);
	}
}
