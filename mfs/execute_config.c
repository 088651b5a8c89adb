/* Executing the config verb (see execute.h): the new settings are
 * recorded in the registry, then applied. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_budget.h"
#include "conf.h"
#include "dbfs/feed.h"
#include "execute.h"
#include "kv.h"
#include "log.h"
#include "loop.h"
#include "registry.h"
#include "user_limits.h"
#include "validate.h"

/* The settings l over d's options, into opts (MFS_OPTS_MAX bytes); `live`:
 * d is mounted, so only live settings may change. */
static int merge(const struct mfs_dbfs *d, const struct mfs_kvlist *l, bool live, char *opts,
		 char *err, size_t errlen)
{
	memcpy(opts, d->conf.opts, MFS_OPTS_MAX);
	for (size_t i = 0; i < l->n; i++) {
		if (live && !mfs_conf_live(l->items[i].key)) {
			snprintf(err, errlen, "'%.120s' cannot change while %.120s is mounted",
				 l->items[i].key, d->conf.name);
			return -EINVAL;
		}
		int rc = mfs_conf_set(opts, MFS_OPTS_MAX, l->items[i].key, l->items[i].value);
		if (rc) {
			snprintf(err, errlen, "%s", rc == -ENOMEM ? "out of memory" : "options too long");
			return rc == -ENOMEM ? -ENOMEM : -EINVAL;
		}
	}
	return 0;
}

/* Apply the new settings to mounted d. mgr->lock held. */
static void apply_live(struct mfs_manager *mgr, struct mfs_dbfs *d, const struct dbfs_options *o,
		       const struct mfs_limits *lim)
{
	dbfs_set_quota(d->fs, o->quota_bytes, o->quota_inodes);
	dbfs_set_commit_interval(d->fs, o->commit_interval);
	struct dbfs_feed_limits fl = {o->feed_max_events, o->feed_max_bytes, o->feed_max_age,
				      o->feed_sub_idle};
	int rc = dbfs_feed_enabled(d->fs) ? dbfs_feed_set_limits(d->fs, &fl) : 0;
	if (rc)
		mfs_warn("%s: feed limits not applied: %s", d->conf.name, strerror(-rc));
	mfs_loop_set_limits(d->sess, lim);
	d->limits = *lim;
	d->quota_bytes = o->quota_bytes;
	d->quota_inodes = o->quota_inodes;
	d->cache_mem = o->cache_limit;
	d->cache_limit = UINT64_MAX; /* apply it anew */
	mfs_cache_rebalance(mgr);
}

/*
 * Record d with the settings opts in the registry before they apply, so
 * that a change a restart would lose is not made. mgr->lock held, dropped
 * meanwhile: the write is synced, and only this (the control) thread
 * changes d's state or configuration.
 */
static int record(struct mfs_manager *mgr, struct mfs_dbfs *d, const char *opts, char *err,
		  size_t errlen)
{
	struct mfs_conf *next = malloc(sizeof(*next));

	if (!next)
		return -ENOMEM;
	*next = d->conf;
	memcpy(next->opts, opts, MFS_OPTS_MAX);
	pthread_mutex_unlock(&mgr->lock);
	int rc = mfs_registry_record(mgr->reg, next, d->id, err, errlen);
	pthread_mutex_lock(&mgr->lock);
	free(next);
	return rc;
}

int mfs_execute_config(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_kvlist l;
	struct mfs_dbfs *d;
	char *opts = NULL;
	int rc = mfs_kv_parse(cmd->opts, strlen(cmd->opts), 0, &l, err, errlen);

	if (rc)
		return rc;
	pthread_mutex_lock(&mgr->lock);
	rc = mfs_check_owned(mgr, &cmd->who, cmd->name, &d, err, errlen);
	if (rc)
		goto out;
	bool live = d->state == MFS_MOUNTED;
	if (d->state == MFS_MOUNTING || d->state == MFS_UNMOUNTING) {
		snprintf(err, errlen, "DBFS %.120s is %.120s; try again", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EBUSY;
		goto out;
	}
	opts = malloc(MFS_OPTS_MAX);
	if (!opts) {
		rc = -ENOMEM;
		goto out;
	}
	rc = merge(d, &l, live, opts, err, errlen);
	if (rc)
		goto out;
	struct dbfs_options o;
	struct mfs_limits lim;
	rc = mfs_conf_parse(opts, &o, &lim, err, errlen);
	if (!rc)
		rc = mfs_user_limits_check(&mgr->user_limits, mgr->list, d->conf.owner, mgr->uid, d,
					   o.quota_bytes, o.quota_inodes, err, errlen);
	if (!rc)
		rc = record(mgr, d, opts, err, errlen);
	if (rc)
		goto out;
	memcpy(d->conf.opts, opts, MFS_OPTS_MAX);
	if (d->state == MFS_MOUNTED)
		apply_live(mgr, d, &o, &lim);
out:
	pthread_mutex_unlock(&mgr->lock);
	mfs_kv_free(&l);
	free(opts);
	if (rc)
		return rc;
	mfs_info("%s: config %s", cmd->name, cmd->opts);
	return 0;
}
