/*
 * Executing the unmount verb (see execute.h). The unmount is recorded in
 * the registry once it is done (a busy DBFS costs no write); an unmount the
 * registry cannot record is undone: the DBFS is mounted again as at
 * start-up (a job of the control loop), which is what a restart would do.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dbfs_unmount.h"
#include "execute.h"
#include "inbox.h"
#include "registry.h"
#include "validate.h"

static void set_state(struct mfs_manager *mgr, struct mfs_dbfs *d, enum mfs_state st)
{
	pthread_mutex_lock(&mgr->lock);
	d->state = st;
	pthread_mutex_unlock(&mgr->lock);
}

/* Record that d stays unmounted; when that fails, have it mounted again
 * (the control loop's next job, as at start-up). */
static int record(struct mfs_manager *mgr, struct mfs_dbfs *d, char *err, size_t errlen)
{
	struct mfs_conf c = d->conf;

	c.want_mounted = false;
	int rc = mfs_registry_record(mgr->reg, &c, d->id, err, errlen);
	if (!rc) {
		d->conf.want_mounted = false;
		return 0;
	}
	size_t n = strlen(err);
	pthread_mutex_lock(&mgr->lock);
	int qrc = mfs_inbox_remount(d->id);
	d->state = qrc ? MFS_FAILED : MFS_MOUNTING;
	if (qrc) {
		snprintf(d->reason, sizeof(d->reason),
			 "its unmount could not be recorded, nor could it be mounted again: %s",
			 strerror(-qrc));
		snprintf(err + n, errlen - n, "; nor can it be mounted again now (%s)",
			 strerror(-qrc));
	} else {
		snprintf(err + n, errlen - n, "; it is being mounted again");
	}
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

int mfs_execute_unmount(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_dbfs *d;

	pthread_mutex_lock(&mgr->lock);
	int rc = mfs_check_owned(mgr, &cmd->who, cmd->name, &d, err, errlen);
	if (!rc && d->state != MFS_MOUNTED) {
		snprintf(err, errlen, "DBFS %.120s is not mounted (%.120s)", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EINVAL;
	}
	if (!rc)
		d->state = MFS_UNMOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (rc)
		return rc;
	rc = mfs_dbfs_unmount(mgr, d, cmd->force, "unmounted by command");
	if (rc == -EBUSY) {
		snprintf(err, errlen, "DBFS %.120s is busy: files are open on %.120s (add force)",
			 d->conf.name, d->conf.mountpoint);
		set_state(mgr, d, MFS_MOUNTED);
		return rc;
	}
	return record(mgr, d, err, errlen);
}
