/* Executing the subscribe and unsubscribe verbs (see execute.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "execute.h"
#include "feed_settle.h"
#include "feed_spec.h"
#include "log.h"
#include "validate.h"

/* The store of a DBFS whose feed the caller may use. The control thread is
 * the only one that unmounts, so fs stays open while the executor runs. */
static int feed_store(struct mfs_manager *mgr, struct mfs_cmd *cmd, struct dbfs **fs, char *err,
		      size_t errlen)
{
	struct mfs_dbfs *d;

	pthread_mutex_lock(&mgr->lock);
	int rc = mfs_check_feed(mgr, &cmd->who, cmd->name, &d, err, errlen);
	if (!rc)
		*fs = d->fs;
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

int mfs_execute_subscribe(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct dbfs *fs;
	int rc = feed_store(mgr, cmd, &fs, err, errlen);

	if (rc)
		return rc;
	mfs_feed_pos_fix(&cmd->pos);
	/* its settle period wanted before it exists: no burst of its first
	 * moments is missed (the parser checked the filters already) */
	struct mfs_feed_filter f;
	if (!mfs_feed_filter_parse(cmd->opts, &f, err, errlen) && f.settle_ms &&
	    (rc = mfs_feed_settle_sync(fs, f.settle_ms))) {
		if (rc == -ENOSPC)
			snprintf(err, errlen,
				 "%.120s has %u distinct settle periods already (the most)",
				 cmd->name, DBFS_SETTLE_MAX);
		else
			snprintf(err, errlen, "%s", strerror(-rc));
		return rc;
	}
	err[0] = '\0';
	rc = dbfs_feed_sub_create(fs, cmd->sub,
				  cmd->pos.start.from == DBFS_FEED_NOW ? NULL : &cmd->pos.start,
				  cmd->opts);
	if (rc && f.settle_ms)
		mfs_feed_settle_sync(fs, 0); /* as it was */
	switch (rc) {
	case 0:
		mfs_info("%s: subscription %s created (uid %u)", cmd->name, cmd->sub,
			 (unsigned)cmd->who.uid);
		break;
	case -EEXIST:
		snprintf(err, errlen, "%.120s has a subscription %s already", cmd->name, cmd->sub);
		break;
	case -ESTALE:
		snprintf(err, errlen,
			 "the position names another store (or this one before it was "
			 "re-created): its UUID is not the feed's of %.120s",
			 cmd->name);
		break;
	case -ERANGE:
		snprintf(err, errlen, "sequence number beyond the end of the feed of %.120s",
			 cmd->name);
		break;
	default:
		snprintf(err, errlen, "%s", strerror(-rc));
	}
	return rc;
}

int mfs_execute_unsubscribe(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err,
			    size_t errlen)
{
	struct dbfs *fs;
	int rc = feed_store(mgr, cmd, &fs, err, errlen);

	if (rc)
		return rc;
	rc = dbfs_feed_sub_delete(fs, cmd->sub);
	if (rc == -ENOENT)
		snprintf(err, errlen, "%.120s has no subscription %s", cmd->name, cmd->sub);
	else if (rc == -EBUSY)
		snprintf(err, errlen, "subscription %s is being read: close its reader first",
			 cmd->sub);
	else if (rc)
		snprintf(err, errlen, "%s", strerror(-rc));
	else
		mfs_info("%s: subscription %s deleted (uid %u)", cmd->name, cmd->sub,
			 (unsigned)cmd->who.uid);
	if (!rc)
		mfs_feed_settle_sync(fs, 0); /* its period may be wanted no more */
	return rc;
}
