/*
 * Executing the unmount verb (see execute.h). That it is to stay unmounted
 * is recorded in the registry first: an unmount the registry cannot record
 * is not made (a restart would mount the DBFS again); a busy DBFS gets its
 * record back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dbfs_unmount.h"
#include "execute.h"
#include "registry.h"
#include "validate.h"

/* Record d with want_mounted = want. */
static int record(struct mfs_manager *mgr, struct mfs_dbfs *d, bool want, char *err, size_t errlen)
{
	struct mfs_conf c = d->conf;

	c.want_mounted = want;
	return mfs_registry_record(mgr->reg, &c, d->id, err, errlen);
}

static void set_state(struct mfs_manager *mgr, struct mfs_dbfs *d, enum mfs_state st)
{
	pthread_mutex_lock(&mgr->lock);
	d->state = st;
	pthread_mutex_unlock(&mgr->lock);
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
	rc = record(mgr, d, false, err, errlen);
	if (rc) {
		set_state(mgr, d, MFS_MOUNTED);
		return rc;
	}
	rc = mfs_dbfs_unmount(mgr, d, cmd->force, "unmounted by command");
	if (rc == -EBUSY) {
		int n = snprintf(err, errlen, "DBFS %.120s is busy: files are open on %.120s (add force)",
				 d->conf.name, d->conf.mountpoint);
		char why[256];
		int rc2 = record(mgr, d, true, why, sizeof(why));
		if (rc2) {
			/* the registry says unmounted: so does the manager (want) */
			d->conf.want_mounted = false;
			if (n > 0 && (size_t)n < errlen)
				snprintf(err + n, errlen - (size_t)n,
					 "; the registry could not record that it stays mounted (%s):"
					 " a restart leaves it unmounted",
					 strerror(-rc2));
		}
		set_state(mgr, d, MFS_MOUNTED);
		return rc;
	}
	d->conf.want_mounted = false;
	return 0;
}
