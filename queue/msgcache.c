/* SPDX-License-Identifier: MIT */
/*
 * The message cache: copies of contiguous ranges of subshards, filled by
 * this process's committed enqueues (so subscribers that keep up never read
 * the store) and by restores of subshards a subscriber reaches. When over
 * its target size it evicts the entry whose earliest estimated access is
 * latest: for each subscriber, distance to the entry divided by its
 * dequeue rate for that shard; the tail subshard is accessed now by
 * enqueues. The target comes from sizing.c and the process-wide budget;
 * under memory pressure it is zero (store-only). Everything here runs under
 * q->cache_lock held exclusively, but for finding, pinning and unpinning
 * (mfsq_cache_find/unpin: a shared hold is enough, pins is atomic, and a
 * pinned entry is never freed); the store stays the truth.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define CHUNK_USABLE (MFSQ_CHUNK_BYTES - sizeof(struct mfsq_chunk))

int mfsq_cache_enabled(mfsq_queue *q)
{
	return !q->in_pressure && q->cache_target > 0 && mfsq_budget_bytes() > 0;
}

static struct mfsq_centry *entry_of(mfsq_queue *q, uint32_t s, uint64_t sub_first)
{
	for (struct mfsq_centry *e = q->shards[s].cache; e; e = e->next)
		if (e->sub_first == sub_first)
			return e;
	return NULL;
}

struct mfsq_cmsg *mfsq_cache_find(mfsq_queue *q, uint32_t s, uint64_t seq, struct mfsq_centry **pin)
{
	for (struct mfsq_centry *e = q->shards[s].cache; e; e = e->next)
		if (e->lo <= seq && seq < e->hi) {
			atomic_fetch_add_explicit(&e->pins, 1, memory_order_relaxed);
			*pin = e;
			return e->v[seq - e->lo];
		}
	return NULL;
}

int mfsq_cache_has(mfsq_queue *q, uint32_t s, uint64_t seq)
{
	struct mfsq_centry *pin = NULL;
	int has;

	if (s >= q->cfg.nshards)
		return 0;
	pthread_rwlock_rdlock(&q->cache_lock);
	has = mfsq_cache_find(q, s, seq, &pin) != NULL;
	mfsq_cache_unpin(&pin);
	pthread_rwlock_unlock(&q->cache_lock);
	return has;
}

void mfsq_cache_unpin(struct mfsq_centry **pin)
{
	if (*pin) {
		atomic_fetch_sub_explicit(&(*pin)->pins, 1, memory_order_relaxed);
		*pin = NULL;
	}
}

/*
 * Chunks of the standard size are mapped by themselves rather than taken
 * from malloc: in the heap they sat between the pages LMDB mallocs for each
 * write transaction (an overflow page per large message) and kept its heap
 * from being reused, so every commit grew the heap into fresh pages and
 * trimmed it again (perf, 4 KiB messages in batches of 256: about three
 * page faults per message, a third of the enqueue time).
 */
static void chunk_free(struct mfsq_chunk *c)
{
	if (c->mapped)
		munmap(c, MFSQ_CHUNK_BYTES);
	else
		free(c);
}

/*
 * How many free chunks to keep for reuse: a fresh chunk costs a mapping
 * and a page fault per page, and an eviction frees a whole entry (up to a
 * subshard, 16 MiB of 4 KiB messages) while appends go on taking chunks.
 * Spares fill the room between the cache's size and its target and, with
 * the other queues' cached data and spares, stay within the process
 * budget; at least MFSQ_CHUNK_SPARE are kept, under pressure only that. They
 * are not cached data: cache_bytes and the budget's use do not count them
 * (mfsq_stats() shows them), so they never make the cache evict.
 */
static unsigned spare_limit(const mfsq_queue *q)
{
	uint64_t own = (uint64_t)q->nspare_chunks * MFSQ_CHUNK_BYTES, all = mfsq_spare_used();
	uint64_t held = mfsq_budget_used() + (all > own ? all - own : 0);
	uint64_t budget = mfsq_budget_bytes(), room = 0;

	if (!q->in_pressure && held < budget && q->cache_bytes < q->cache_target) {
		room = q->cache_target - q->cache_bytes;
		if (room > budget - held)
			room = budget - held;
		room /= MFSQ_CHUNK_BYTES;
	}
	return room > MFSQ_CHUNK_SPARE ? (unsigned)(room < UINT32_MAX ? room : UINT32_MAX)
				       : MFSQ_CHUNK_SPARE;
}

static void entry_free(mfsq_queue *q, uint32_t s, struct mfsq_centry *e)
{
	struct mfsq_centry **pp;

	for (pp = &q->shards[s].cache; *pp && *pp != e; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = e->next;
	q->cache_bytes -= e->bytes;
	mfsq_budget_add(-(int64_t)e->bytes);
	while (e->chunks) {
		struct mfsq_chunk *c = e->chunks;

		e->chunks = c->next;
		if (c->mapped && q->nspare_chunks < spare_limit(q)) {
			c->next = q->spare_chunks;
			q->spare_chunks = c;
			q->nspare_chunks++;
			mfsq_spare_add(MFSQ_CHUNK_BYTES);
		} else {
			chunk_free(c);
		}
	}
	free(e->v);
	free(e);
}

/* Give spare chunks back down to what spare_limit() allows now. */
static void spares_trim(mfsq_queue *q)
{
	unsigned keep = spare_limit(q);

	while (q->nspare_chunks > keep) {
		struct mfsq_chunk *c = q->spare_chunks;

		q->spare_chunks = c->next;
		q->nspare_chunks--;
		mfsq_spare_add(-(int64_t)MFSQ_CHUNK_BYTES);
		chunk_free(c);
	}
}

/* Earliest estimated access time (seconds from now) of entry @e. */
static double next_access(mfsq_queue *q, uint32_t s, const struct mfsq_centry *e, uint64_t now)
{
	double t = INFINITY;

	if (e->sub_first == atomic_load(&q->shards[s].tail_first))
		return 0; /* being appended to */
	pthread_mutex_lock(&q->lock);
	for (mfsq_sub *sb = q->subs; sb; sb = sb->next) {
		uint64_t p = atomic_load(&sb->pos[s]);
		double r, a;

		if (p >= e->hi)
			continue; /* passed */
		if (p >= e->lo) {
			t = 0;
			break;
		}
		r = mfsq_rate_get(&sb->rate[s], now);
		/* a stalled reader still comes some day: order by distance */
		a = r > 0 ? (double)(e->lo - p) / r : 1e9 + (double)(e->lo - p);
		if (a < t)
			t = a;
	}
	pthread_mutex_unlock(&q->lock);
	return t;
}

/* Evict the entry accessed latest; with @keep_tails, never a tail entry
 * (the sizing target does not apply to tails; the budget and pressure do). */
static int evict_one(mfsq_queue *q, int keep_tails)
{
	uint64_t now = mfsq_now_us();
	struct mfsq_centry *victim = NULL;
	uint32_t vs = 0;
	double worst = -1;

	for (uint32_t s = 0; s < q->cfg.nshards; s++)
		for (struct mfsq_centry *e = q->shards[s].cache; e; e = e->next) {
			double t;

			if (e->pins ||
			    (keep_tails && e->sub_first == atomic_load(&q->shards[s].tail_first)))
				continue;
			t = next_access(q, s, e, now);
			if (t > worst) {
				worst = t;
				victim = e;
				vs = s;
			}
		}
	if (!victim)
		return 0;
	entry_free(q, vs, victim);
	atomic_fetch_add(&q->c.evictions, 1);
	return 1;
}

static int over(mfsq_queue *q, uint64_t add)
{
	return q->cache_bytes + add > q->cache_target ||
	       mfsq_budget_used() + add > mfsq_budget_bytes();
}

/* Must memory be given back whatever it holds (pressure, process budget)? */
static int hard_limit(mfsq_queue *q, uint64_t add)
{
	return q->in_pressure || mfsq_budget_used() + add > mfsq_budget_bytes();
}

/*
 * Room for @add bytes; evicts only when @may_evict (no pointers held).
 * Data for a tail subshard is admitted over the sizing target (enqueues
 * feed readers that keep up), not over the budget.
 */
static int admit(mfsq_queue *q, uint64_t add, int may_evict, int tail)
{
	if (!mfsq_cache_enabled(q))
		return 0;
	while (over(q, add)) {
		int hard = hard_limit(q, add);

		if (may_evict && evict_one(q, !hard))
			continue;
		return !hard && tail;
	}
	return 1;
}

static struct mfsq_centry *entry_new(mfsq_queue *q, uint32_t s, uint64_t sub_first, uint64_t lo)
{
	struct mfsq_centry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->sub_first = sub_first;
	e->lo = lo;
	e->hi = lo; /* not chained: hi is _Atomic, clang 14 refuses the chain */
	e->next = q->shards[s].cache;
	q->shards[s].cache = e;
	return e;
}

/* @n bytes (16-aligned) for a message of entry @e, from its newest chunk. */
static void *carve(mfsq_queue *q, struct mfsq_centry *e, size_t n)
{
	struct mfsq_chunk *c = e->chunks;
	size_t need = (n + 15) & ~(size_t)15;

	if (!c || c->size - c->used < need) {
		if (need <= MFSQ_CHUNK_BYTES / 4 && q->spare_chunks) {
			c = q->spare_chunks;
			q->spare_chunks = c->next;
			q->nspare_chunks--;
			mfsq_spare_add(-(int64_t)MFSQ_CHUNK_BYTES);
		} else if (need <= MFSQ_CHUNK_BYTES / 4) {
			/* mapped, not malloc'ed: see chunk_free() */
			c = mmap(NULL, MFSQ_CHUNK_BYTES, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (c == MAP_FAILED)
				return NULL;
			c->size = CHUNK_USABLE;
			c->mapped = 1;
		} else {
			c = malloc(sizeof(*c) + need);
			if (!c)
				return NULL;
			c->size = need;
			c->mapped = 0;
		}
		c->used = 0;
		c->next = e->chunks;
		e->chunks = c;
	}
	c->used += need;
	return c->mem + c->used - need;
}

static int entry_push(mfsq_queue *q, struct mfsq_centry *e, uint64_t seq,
		      const struct mfsq_disk_msg *h, const void *data, size_t len)
{
	struct mfsq_cmsg *m;

	if (e->hi - e->lo == e->cap) {
		size_t nc = e->cap ? e->cap * 2 : 64;
		struct mfsq_cmsg **nv = realloc(e->v, nc * sizeof(*nv));

		if (!nv)
			return ENOMEM;
		e->v = nv;
		e->cap = nc;
	}
	m = carve(q, e, sizeof(*m) + len);
	if (!m)
		return ENOMEM;
	m->seq = seq;
	m->len = len;
	m->h = *h;
	if (len)
		memcpy(m->data, data, len);
	e->v[e->hi - e->lo] = m;
	e->bytes += sizeof(*m) + len;
	q->cache_bytes += sizeof(*m) + len;
	mfsq_budget_add((int64_t)(sizeof(*m) + len));
	/* last: a reader under a shared hold may take v[hi - lo] from now on */
	atomic_store_explicit(&e->hi, seq + 1, memory_order_release);
	return 0;
}

/* Follow the pressure state (mfsq_pressure_now() rate-limits the probing). */
static void pressure_update(mfsq_queue *q)
{
	int p = mfsq_pressure_now();

	if (p && !q->in_pressure) {
		atomic_fetch_add(&q->c.pressure_events, 1);
		q->cache_target = 0;
	}
	if (!p && q->in_pressure) {
		q->cache_target = mfsq_budget_bytes(); /* until sizing measured again */
		q->next_sizing_us = 0;
	}
	q->in_pressure = p;
}

/*
 * Append @p[*i..n) under a shared hold (with append_lock), as far as that
 * needs nothing exclusive: no pressure change, no eviction, no new entry,
 * room in v. The subscribers go on reading meanwhile; under an exclusive
 * hold every commit's append stopped them all (and with writers preferred
 * put them to sleep on the lock).
 */
static void append_shared(mfsq_queue *q, const struct mfsq_put *p, size_t n, size_t *i)
{
	if (mfsq_pressure_now() != atomic_load(&q->in_pressure))
		return;
	for (; *i < n; (*i)++) {
		const struct mfsq_put *pi = &p[*i];
		uint64_t sz = sizeof(struct mfsq_cmsg) + pi->len;
		struct mfsq_centry *e;

		if (!mfsq_cache_enabled(q)) {
			if (q->in_pressure)
				atomic_fetch_add(&q->c.store_only, 1);
			continue;
		}
		if (over(q, sz) || !(e = entry_of(q, pi->shard, pi->sub_first)))
			return;
		if (e->hi != pi->seq)
			continue; /* a gap (another writer): readers fill it from the store */
		if (e->hi - e->lo == e->cap)
			return;
		entry_push(q, e, pi->seq, &pi->h, pi->data, pi->len);
	}
}

void mfsq_cache_append(mfsq_queue *q, const struct mfsq_put *p, size_t n)
{
	size_t i = 0;

	pthread_rwlock_rdlock(&q->cache_lock);
	pthread_mutex_lock(&q->append_lock);
	append_shared(q, p, n, &i);
	pthread_mutex_unlock(&q->append_lock);
	pthread_rwlock_unlock(&q->cache_lock);
	if (i == n)
		return;
	pthread_rwlock_wrlock(&q->cache_lock);
	pressure_update(q);
	for (; i < n; i++) {
		struct mfsq_centry *e;
		uint64_t sz = sizeof(struct mfsq_cmsg) + p[i].len;

		if (!admit(q, sz, 1,
			   p[i].sub_first == atomic_load(&q->shards[p[i].shard].tail_first))) {
			if (q->in_pressure)
				atomic_fetch_add(&q->c.store_only, 1);
			continue;
		}
		e = entry_of(q, p[i].shard, p[i].sub_first);
		if (!e)
			e = entry_new(q, p[i].shard, p[i].sub_first, p[i].seq);
		if (!e || e->hi != p[i].seq)
			continue; /* a gap (another writer): readers fill it from the store */
		entry_push(q, e, p[i].seq, &p[i].h, p[i].data, p[i].len);
	}
	pthread_rwlock_unlock(&q->cache_lock);
}

/*
 * Load [pos, end) of subshard (s, sub_first) from cursor @c into the cache,
 * as far as it fits without evicting (pointers may be held). 0 when pos
 * is now cached; -1 when caching is off or there is no room.
 */
int mfsq_cache_load(mfsq_queue *q, MDB_cursor *c, uint32_t s, uint64_t sub_first, uint64_t pos,
		    uint64_t end, int restore)
{
	struct mfsq_centry *e;
	unsigned char k[8];
	MDB_val key = {sizeof(k), k}, val;
	uint64_t loaded = 0;
	int rc;

	if (!mfsq_cache_enabled(q))
		return -1;
	e = entry_of(q, s, sub_first);
	if (e && e->hi != pos) {
		if (e->pins)
			return -1;
		entry_free(q, s, e);
		e = NULL;
	}
	mfsq_be64_put(k, pos);
	for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_KEY); !rc && pos < end;
	     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT), pos++) {
		struct mfsq_disk_msg h;
		const unsigned char *data;
		size_t len;

		/* a damaged record ends the entry: the reader meets it in the store */
		if (key.mv_size != 8 || mfsq_be64_get(key.mv_data) != pos ||
		    mfsq_msg_decode(&val, 0, &h, &data, &len) ||
		    !admit(q, sizeof(struct mfsq_cmsg) + val.mv_size, 0, 0))
			break;
		if (!e && !(e = entry_new(q, s, sub_first, pos)))
			break;
		if (entry_push(q, e, pos, &h, data, len))
			break;
		loaded++;
	}
	if (!loaded)
		return -1;
	atomic_fetch_add(&q->c.misses, 1);
	if (restore)
		atomic_fetch_add(&q->c.restores, 1);
	return 0;
}

/* Whether every subscriber of this process has read past entry @e (and
 * there is one: with none, the entry waits for the one to come), under
 * q->lock or a shared hold of q->cache_lock (the list changes under both). */
static int passed(mfsq_queue *q, uint32_t s, const struct mfsq_centry *e)
{
	int any = 0, all = 1;

	for (mfsq_sub *sb = q->subs; sb && all; sb = sb->next) {
		any = 1;
		all = atomic_load(&sb->pos[s]) >= e->hi;
	}
	return any && all;
}

/*
 * Free the sealed entries every subscriber has passed: nobody here reads
 * them again (a subscriber that seeks back restores from the store), and
 * their chunks, kept as spares, take the next appends. Holding them until
 * the target forced an eviction made a cache whose readers keep up grow
 * through fresh memory, a page fault per 4 KiB cached.
 */
static void drop_passed(mfsq_queue *q)
{
	pthread_mutex_lock(&q->lock); /* the subscriber list, once per walk */
	for (uint32_t s = 0; s < q->cfg.nshards; s++) {
		struct mfsq_centry *e = q->shards[s].cache, *nx;

		for (; e; e = nx) {
			nx = e->next;
			if (!e->pins && e->sub_first != atomic_load(&q->shards[s].tail_first) &&
			    passed(q, s, e)) {
				entry_free(q, s, e);
				atomic_fetch_add(&q->c.evictions, 1);
			}
		}
	}
	pthread_mutex_unlock(&q->lock);
}

/*
 * Under a shared hold of q->cache_lock: would the cache's tending at the
 * end of a read (mfsq_buffered_trim(), mfsq_cache_shrink_locked()) free
 * anything now? It asks what they ask; the exclusive hold asks again. A
 * subscriber stores its positions after its unpins and then asks, so of
 * two that pass an entry side by side, the later one sees both (seq_cst)
 * and frees it.
 */
int mfsq_cache_shrink_due(mfsq_queue *q)
{
	int full = over(q, 0), keep_tails = !hard_limit(q, 0);

	if (q->nspare_chunks > spare_limit(q))
		return 1;
	for (uint32_t s = 0; s < q->cfg.nshards; s++) {
		if (q->shards[s].bn)
			return 1; /* a memory-only ring to trim */
		for (struct mfsq_centry *e = q->shards[s].cache; e; e = e->next) {
			int tail = e->sub_first == atomic_load(&q->shards[s].tail_first);

			if (atomic_load_explicit(&e->pins, memory_order_relaxed))
				continue;
			if ((full && (!tail || !keep_tails)) || (!tail && passed(q, s, e)))
				return 1;
		}
	}
	return 0;
}

void mfsq_cache_shrink_locked(mfsq_queue *q)
{
	drop_passed(q);
	while (q->cache_bytes > q->cache_target || mfsq_budget_used() > mfsq_budget_bytes())
		if (!evict_one(q, !hard_limit(q, 0)))
			break;
	spares_trim(q);
}

void mfsq_cache_shrink(mfsq_queue *q)
{
	pthread_rwlock_wrlock(&q->cache_lock);
	mfsq_cache_shrink_locked(q);
	pthread_rwlock_unlock(&q->cache_lock);
}

void mfsq_cache_free_all(mfsq_queue *q)
{
	if (q->shards)
		for (uint32_t s = 0; s < q->cfg.nshards; s++)
			while (q->shards[s].cache)
				entry_free(q, s, q->shards[s].cache);
	while (q->spare_chunks) {
		struct mfsq_chunk *c = q->spare_chunks;

		q->spare_chunks = c->next;
		chunk_free(c);
	}
	mfsq_spare_add(-(int64_t)q->nspare_chunks * MFSQ_CHUNK_BYTES);
	q->nspare_chunks = 0;
}

/* Re-derive the target size from the measured rates (every 100 ms). */
void mfsq_cache_sizing(mfsq_queue *q, uint64_t now)
{
	uint32_t n = q->cfg.nshards;
	int p;

	/* every dequeue comes here: most of the time nothing is due and the
	 * pressure state has not changed, which needs no lock (four
	 * subscribers queued on the cache lock here for a fifth of their
	 * waits); the dequeue shrinks the cache itself */
	p = mfsq_pressure_now();
	if (p == atomic_load_explicit(&q->in_pressure, memory_order_relaxed) && !p &&
	    now < atomic_load_explicit(&q->next_sizing_us, memory_order_relaxed))
		return;
	pthread_rwlock_wrlock(&q->cache_lock);
	pressure_update(q);
	p = q->in_pressure;
	if (!p && now < q->next_sizing_us) {
		pthread_rwlock_unlock(&q->cache_lock);
		return;
	}
	q->next_sizing_us = now + MFSQ_SIZING_PERIOD_US;
	if (p) {
		q->cache_target = 0;
	} else {
		struct mfsq_size_shard *sh = calloc(n, sizeof(*sh));
		struct mfsq_size_reader *rd;
		unsigned nsubs = 0, k = 0;
		double sub_bytes, tot_rate = 0;
		uint64_t budget = mfsq_budget_bytes();

		pthread_mutex_lock(&q->lock);
		for (mfsq_sub *sb = q->subs; sb; sb = sb->next)
			nsubs++;
		rd = calloc((size_t)n * (nsubs ? nsubs : 1), sizeof(*rd));
		for (uint32_t s = 0; sh && rd && s < n; s++) {
			sh[s].enq_rate = mfsq_rate_get(&q->shards[s].enq, now);
			sh[s].subshard_msgs = q->cfg.subshard_msgs;
			sh[s].readers = &rd[k];
			tot_rate += sh[s].enq_rate;
			for (mfsq_sub *sb = q->subs; sb; sb = sb->next) {
				rd[k].rate = mfsq_rate_get(&sb->rate[s], now);
				rd[k].lag = sb->peak_lag[s];
				tot_rate += rd[k].rate;
				k++;
				sh[s].nreaders++;
			}
		}
		sub_bytes = (q->avg_msg_bytes > 0 ? q->avg_msg_bytes : 256) * q->cfg.subshard_msgs;
		pthread_mutex_unlock(&q->lock);
		if (sh && rd && tot_rate > 0 && sub_bytes > 0) {
			double bsubs = (double)budget / sub_bytes;
			unsigned b = bsubs < 1 ? 1 : bsubs > 100000 ? 100000 : (unsigned)bsubs;
			unsigned cap = mfsq_sizing_choose(sh, n, b);

			q->sizing_est = mfsq_sizing_overhead(sh, n, cap);
			q->cache_target = (uint64_t)((double)cap * sub_bytes);
			if (q->cache_target > budget)
				q->cache_target = budget;
		} else {
			q->cache_target = budget; /* nothing measured yet */
		}
		free(sh);
		free(rd);
	}
	pthread_rwlock_unlock(&q->cache_lock);
	mfsq_cache_shrink(q);
}

/*
 * Prefetch: of the ranges that come right after what each reader has
 * cached, load the one with the earliest estimated access, if it fits
 * without evicting anything (eviction keeps what is needed sooner).
 */
static int prefetch_pick(mfsq_queue *q, uint64_t now, uint32_t *ps, uint64_t *pseq)
{
	double best = INFINITY;
	int found = 0;

	pthread_mutex_lock(&q->lock);
	for (mfsq_sub *sb = q->subs; sb; sb = sb->next)
		for (uint32_t s = 0; s < q->cfg.nshards; s++) {
			uint64_t p = atomic_load(&sb->pos[s]), nxt = 0;
			double r, t;

			for (struct mfsq_centry *e = q->shards[s].cache; e; e = e->next)
				if (e->lo <= p && p < e->hi)
					nxt = e->hi;
			if (!nxt || nxt >= atomic_load(&q->shards[s].next_seq))
				continue;
			for (struct mfsq_centry *e = q->shards[s].cache; e && nxt; e = e->next)
				if (e->lo <= nxt && nxt < e->hi)
					nxt = 0; /* already there */
			if (!nxt)
				continue;
			r = mfsq_rate_get(&sb->rate[s], now);
			t = r > 0 ? (double)(nxt - p) / r : 1e9 + (double)(nxt - p);
			if (t < best) {
				best = t;
				*ps = s;
				*pseq = nxt;
				found = 1;
			}
		}
	pthread_mutex_unlock(&q->lock);
	return found;
}

void mfsq_cache_prefetch(mfsq_queue *q, uint64_t now, MDB_txn **spare)
{
	uint64_t seq = 0, first, id, end;
	struct mfsq_disk_shard st;
	MDB_cursor *c = NULL;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint32_t s = 0;
	int found, rc;

	/* every dequeue comes here: picking only reads (a shared hold) */
	pthread_rwlock_rdlock(&q->cache_lock);
	found = mfsq_cache_enabled(q) && q->cache_bytes < q->cache_target &&
		prefetch_pick(q, now, &s, &seq);
	pthread_rwlock_unlock(&q->cache_lock);
	if (!found)
		return;
	pthread_rwlock_rdlock(&q->droplock);
	if (mfsq_rtxn_begin(q, spare, &txn)) {
		pthread_rwlock_unlock(&q->droplock);
		return;
	}
	rc = mfsq_shard_read_r(q, txn, s, &st, NULL);
	if (!rc)
		rc = mfsq_subshard_locate(q, txn, s, seq, &first, &id, &end);
	if (!rc)
		rc = mfsq_dbi_for(q, txn, s, id, &dbi); /* no resolving here: skip */
	if (!rc)
		rc = mdb_cursor_open(txn, dbi, &c);
	if (!rc) {
		pthread_rwlock_wrlock(&q->cache_lock);
		if (mfsq_cache_load(q, c, s, first, seq, end < st.next_seq ? end : st.next_seq,
				    0) == 0)
			atomic_fetch_add(&q->c.prefetches, 1);
		pthread_rwlock_unlock(&q->cache_lock);
		mdb_cursor_close(c);
	}
	mfsq_rtxn_end(spare, txn);
	pthread_rwlock_unlock(&q->droplock);
}
