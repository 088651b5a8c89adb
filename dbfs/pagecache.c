/*
 * The kernel's cache of this DBFS's files, held to a limit (the `mem=`
 * option, dbfs_set_cache_limit).
 *
 * The kernel keeps what it read and wrote through this mount in its page
 * cache (FOPEN_KEEP_CACHE) and readdir cache, and says nothing about it. So
 * this file keeps an estimate: per inode, the bytes that replies to reads and
 * readdirs and accepted writes brought into the kernel, never more than the
 * file's size; the inodes in least-recently-used order. When the total passes
 * the limit, the owner is told (the callback, from the request thread) and
 * calls dbfs_cache_trim from a thread that serves no requests; trimming asks
 * the kernel to drop the cached pages of the least recently used inodes
 * (FUSE_NOTIFY_INVAL_INODE) until the total is 7/8 of the limit. Pages the
 * kernel dropped by itself, or reads it served from its cache, are unseen:
 * the estimate errs on the high side, so the limit holds.
 *
 * Without a limit nothing is counted. Counting starts when a limit is set.
 */
#include <stdlib.h>
#include <fuse_lowlevel.h>

#include "dbfs/internal.h"

struct dbfs_cache_ent {
	uint64_t ino, bytes;
	struct dbfs_cache_ent *prev, *next; /* LRU: head most recent */
	struct dbfs_cache_ent *hnext;       /* hash chain */
};

static size_t bucket(const struct dbfs_cache *c, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 32) & (c->nbuckets - 1);
}

static struct dbfs_cache_ent *find(struct dbfs_cache *c, uint64_t ino)
{
	if (!c->nbuckets)
		return NULL;
	struct dbfs_cache_ent *e = c->tab[bucket(c, ino)];
	while (e && e->ino != ino)
		e = e->hnext;
	return e;
}

static void lru_unlink(struct dbfs_cache *c, struct dbfs_cache_ent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct dbfs_cache *c, struct dbfs_cache_ent *e)
{
	e->next = c->head;
	e->prev = NULL;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static void drop(struct dbfs_cache *c, struct dbfs_cache_ent *e)
{
	struct dbfs_cache_ent **pp = &c->tab[bucket(c, e->ino)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(c, e);
	c->total -= e->bytes;
	c->n--;
	free(e);
}

static int grow(struct dbfs_cache *c)
{
	size_t nb = c->nbuckets ? c->nbuckets * 2 : 256;
	struct dbfs_cache_ent **tab = calloc(nb, sizeof(*tab));
	if (!tab)
		return -1;
	struct dbfs_cache_ent **old = c->tab;
	size_t onb = c->nbuckets;
	c->tab = tab;
	c->nbuckets = nb;
	for (size_t i = 0; i < onb; i++)
		for (struct dbfs_cache_ent *e = old[i], *n; e; e = n) {
			n = e->hnext;
			size_t b = bucket(c, e->ino);
			e->hnext = tab[b];
			tab[b] = e;
		}
	free(old);
	return 0;
}

int dbfs_cache_init(struct dbfs *fs)
{
	return -pthread_mutex_init(&fs->cache.lock, NULL);
}

static void clear(struct dbfs_cache *c)
{
	while (c->head)
		drop(c, c->head);
	free(c->tab);
	c->tab = NULL;
	c->nbuckets = 0;
}

void dbfs_cache_destroy(struct dbfs *fs)
{
	clear(&fs->cache);
	pthread_mutex_destroy(&fs->cache.lock);
}

void dbfs_cache_note(struct dbfs *fs, uint64_t ino, uint64_t bytes, uint64_t size)
{
	struct dbfs_cache *c = &fs->cache;
	bool tell = false;

	if (!c->limit || !bytes)
		return;
	/* whole pages: the kernel caches pages (UINT64_MAX: no bound) */
	if (size <= UINT64_MAX - 4095)
		size = (size + 4095) & ~(uint64_t)4095;
	pthread_mutex_lock(&c->lock);
	struct dbfs_cache_ent *e = find(c, ino);
	if (!e) {
		if (c->n >= c->nbuckets && grow(c) != 0)
			goto out;
		e = calloc(1, sizeof(*e));
		if (!e)
			goto out;
		e->ino = ino;
		size_t b = bucket(c, ino);
		e->hnext = c->tab[b];
		c->tab[b] = e;
		c->n++;
	} else {
		lru_unlink(c, e);
	}
	lru_push(c, e);
	uint64_t now = e->bytes + bytes;
	if (now > size)
		now = size;
	if (now > e->bytes) {
		c->total += now - e->bytes;
		e->bytes = now;
	}
	if (c->total > c->limit && !c->told) {
		c->told = true;
		tell = c->cb != NULL;
	}
out:
	pthread_mutex_unlock(&c->lock);
	if (tell)
		c->cb(c->cb_arg);
}

void dbfs_cache_truncated(struct dbfs *fs, uint64_t ino, uint64_t size)
{
	struct dbfs_cache *c = &fs->cache;

	if (!c->limit)
		return;
	size = (size + 4095) & ~(uint64_t)4095;
	pthread_mutex_lock(&c->lock);
	struct dbfs_cache_ent *e = find(c, ino);
	if (e && e->bytes > size) {
		c->total -= e->bytes - size;
		e->bytes = size;
	}
	pthread_mutex_unlock(&c->lock);
}

void dbfs_cache_forget(struct dbfs *fs, uint64_t ino)
{
	struct dbfs_cache *c = &fs->cache;

	if (!c->limit)
		return;
	pthread_mutex_lock(&c->lock);
	struct dbfs_cache_ent *e = find(c, ino);
	if (e)
		drop(c, e);
	pthread_mutex_unlock(&c->lock);
}

void dbfs_set_cache_limit(struct dbfs *fs, uint64_t bytes)
{
	struct dbfs_cache *c = &fs->cache;
	bool tell = false;

	pthread_mutex_lock(&c->lock);
	c->limit = bytes;
	if (!bytes) {
		clear(c);
		c->told = false;
	} else if (c->total > bytes && !c->told) {
		c->told = true;
		tell = c->cb != NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (tell)
		c->cb(c->cb_arg);
}

void dbfs_set_cache_callback(struct dbfs *fs, void (*cb)(void *arg), void *arg)
{
	pthread_mutex_lock(&fs->cache.lock);
	fs->cache.cb = cb;
	fs->cache.cb_arg = arg;
	pthread_mutex_unlock(&fs->cache.lock);
}

void dbfs_cache_usage(struct dbfs *fs, uint64_t *bytes, uint64_t *limit, uint64_t *trimmed)
{
	pthread_mutex_lock(&fs->cache.lock);
	*bytes = fs->cache.total;
	*limit = fs->cache.limit;
	*trimmed = fs->cache.trimmed;
	pthread_mutex_unlock(&fs->cache.lock);
}

int dbfs_cache_trim(struct dbfs *fs)
{
	struct dbfs_cache *c = &fs->cache;
	uint64_t inos[256];

	for (;;) {
		size_t n = 0;
		pthread_mutex_lock(&c->lock);
		uint64_t target = c->limit - c->limit / 8;
		while (c->limit && c->total > target && c->tail && n < 256) {
			inos[n++] = c->tail->ino;
			c->trimmed += c->tail->bytes;
			drop(c, c->tail);
		}
		if (!n)
			c->told = false;
		pthread_mutex_unlock(&c->lock);
		if (!n)
			return 0;
		/* outside the lock: the kernel may wait for its page locks,
		 * which requests being served hold */
		for (size_t i = 0; i < n && fs->se; i++)
			fuse_lowlevel_notify_inval_inode(fs->se, inos[i], 0, 0);
	}
}
