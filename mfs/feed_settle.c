/*
 * The quiet periods a DBFS makes settled events for (dbfs/feed.h
 * dbfs_settle_set): the settle=MS of its durable subscriptions, read back
 * from their specs. Made again whenever the set of subscriptions changes
 * (subscribe, unsubscribe); readers of events@...,settle=MS hold theirs
 * themselves while open (feed_fs.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "feed_settle.h"
#include "feed_spec.h"

struct collect {
	uint32_t ms[DBFS_SETTLE_MAX + 1];
	size_t n;
	bool over;
};

static void add(struct collect *c, uint32_t ms)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->ms[i] == ms)
			return;
	if (c->n == DBFS_SETTLE_MAX)
		c->over = true;
	else
		c->ms[c->n++] = ms;
}

static int one_sub(void *arg, const struct dbfs_feed_sub_info *info)
{
	struct collect *c = arg;
	struct mfs_feed_filter f;
	char err[128];
	/* a spec that no longer parses (an older build's) wants nothing */
	if (!mfs_feed_filter_parse(info->spec, &f, err, sizeof(err)) && f.settle_ms)
		add(c, f.settle_ms);
	return 0;
}

int mfs_feed_settle_sync(struct dbfs *fs, uint32_t extra_ms)
{
	struct collect c = {.n = 0};
	int rc = dbfs_feed_sub_list(fs, one_sub, &c);
	if (rc)
		return rc;
	if (extra_ms)
		add(&c, extra_ms);
	if (c.over)
		return -ENOSPC;
	return dbfs_settle_set(fs, c.ms, c.n);
}
