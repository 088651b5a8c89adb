/*
 * The accountant's gauge reader (account.h): a thread of its own that, when
 * the accountant asks (every GAUGE_EVERY seconds), reads every mounted
 * DBFS's space, cache and feed (a read transaction, a stat of data.mdb, a
 * short lock of the store) without mgr->lock, the DBFSs pinned (manager.h),
 * and publishes them by DBFS id for the next records. A slow store holds
 * this thread, and the gauges with it, but not the records of each second:
 * rates, history and metrics' counters go on.
 *
 * Lock order: mgr->lock, then a->glock; this thread never takes mgr->lock
 * while it holds a->glock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account_private.h"
#include "dbfs/feed.h"
#include "log.h"

static int lag_of(void *arg, const struct dbfs_feed_sub_info *i)
{
	uint64_t *worst = arg;
	if (i->lag > *worst)
		*worst = i->lag;
	return 0;
}

/* Space, cache and feed of one pinned store. */
static void read_gauges(struct dbfs *fs, struct account_gauge *g)
{
	struct dbfs_usage u;
	struct dbfs_feed_stats f;
	uint64_t cl, ct;

	if (!dbfs_usage(fs, &u)) {
		g->bytes_used = u.bytes;
		g->inodes_used = u.inodes;
	}
	dbfs_cache_usage(fs, &g->cache_bytes, &cl, &ct);
	if (!dbfs_feed_stats(fs, &f)) {
		g->feed_events = f.enqueued;
		dbfs_feed_sub_list(fs, lag_of, &g->feed_lag);
	}
}

/* Pin every mounted DBFS into a->gpin / a->gread (this thread only). */
static size_t pin_all(struct mfs_account *a)
{
	struct mfs_manager *mgr = a->mgr;
	size_t n = 0;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->fs)
			continue;
		if (n == a->gcap) {
			size_t cap = a->gcap ? 2 * a->gcap : 64;
			struct account_pin *p = realloc(a->gpin, cap * sizeof(*p));
			struct account_gauge *q = realloc(a->gread, cap * sizeof(*q));
			if (p)
				a->gpin = p;
			if (q)
				a->gread = q;
			if (!p || !q)
				break;
			a->gcap = cap;
		}
		mfs_dbfs_pin(d);
		a->gpin[n].d = d;
		a->gpin[n].fs = d->fs;
		memset(&a->gread[n], 0, sizeof(a->gread[n]));
		a->gread[n].id = d->id;
		snprintf(a->gread[n].name, sizeof(a->gread[n].name), "%s", d->conf.name);
		n++;
	}
	pthread_mutex_unlock(&mgr->lock);
	return n;
}

/* Make room for id in a->gpub (a->glock held). */
static bool pub_room(struct mfs_account *a, uint32_t id)
{
	if (id < a->npub)
		return true;
	uint32_t n = a->npub ? a->npub : 16;
	while (n <= id)
		n *= 2;
	struct account_gauge *p = realloc(a->gpub, n * sizeof(*p));
	if (!p)
		return false;
	memset(p + a->npub, 0, (n - a->npub) * sizeof(*p));
	a->gpub = p;
	a->npub = n;
	return true;
}

static void *gauges_main(void *arg)
{
	struct mfs_account *a = arg;

	pthread_mutex_lock(&a->glock);
	for (;;) {
		while (!a->gstop && !a->gask)
			pthread_cond_wait(&a->gcond, &a->glock);
		if (a->gstop)
			break;
		a->gask = false;
		pthread_mutex_unlock(&a->glock);
		size_t n = pin_all(a);
		for (size_t i = 0; i < n; i++)
			read_gauges(a->gpin[i].fs, &a->gread[i]);
		pthread_mutex_lock(&a->glock);
		for (size_t i = 0; i < n; i++) {
			if (!pub_room(a, a->gread[i].id))
				continue;
			a->gpub[a->gread[i].id] = a->gread[i];
			a->gpub[a->gread[i].id].fresh = 1;
		}
		pthread_mutex_unlock(&a->glock);
		pthread_mutex_lock(&a->mgr->lock);
		for (size_t i = 0; i < n; i++)
			mfs_dbfs_unpin(a->mgr, a->gpin[i].d);
		pthread_mutex_unlock(&a->mgr->lock);
		pthread_mutex_lock(&a->glock);
	}
	pthread_mutex_unlock(&a->glock);
	return NULL;
}

int mfs_account_gauges_start(struct mfs_account *a)
{
	pthread_mutex_init(&a->glock, NULL);
	pthread_cond_init(&a->gcond, NULL);
	int rc = pthread_create(&a->gthread, NULL, gauges_main, a);
	if (rc) {
		pthread_cond_destroy(&a->gcond);
		pthread_mutex_destroy(&a->glock);
		return -rc;
	}
	pthread_setname_np(a->gthread, "mfs-acct-gauge");
	return 0;
}

void mfs_account_gauges_stop(struct mfs_account *a)
{
	pthread_mutex_lock(&a->glock);
	a->gstop = true;
	pthread_cond_signal(&a->gcond);
	pthread_mutex_unlock(&a->glock);
	pthread_join(a->gthread, NULL);
	pthread_cond_destroy(&a->gcond);
	pthread_mutex_destroy(&a->glock);
	free(a->gpin);
	free(a->gread);
	free(a->gpub);
}

void mfs_account_gauges_ask(struct mfs_account *a)
{
	pthread_mutex_lock(&a->glock);
	a->gask = true; /* a read still running: it is asked again when done */
	pthread_cond_signal(&a->gcond);
	pthread_mutex_unlock(&a->glock);
}

void mfs_account_gauges_take(struct mfs_account *a, struct sample *s)
{
	pthread_mutex_lock(&a->glock);
	struct account_gauge *g = s->id < a->npub ? &a->gpub[s->id] : NULL;
	if (g && g->fresh && !strcmp(g->name, s->name)) {
		s->gauges = 1;
		s->bytes_used = g->bytes_used;
		s->inodes_used = g->inodes_used;
		s->cache_bytes = g->cache_bytes;
		s->feed_events = g->feed_events;
		s->feed_lag = g->feed_lag;
		g->fresh = 0;
	}
	pthread_mutex_unlock(&a->glock);
}
