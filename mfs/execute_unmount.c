/* Executing the unmount verb (see execute.h). */
#include <errno.h>
#include <stdio.h>

#include "dbfs_unmount.h"
#include "execute.h"
#include "validate.h"

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
		pthread_mutex_lock(&mgr->lock);
		d->state = MFS_MOUNTED;
		pthread_mutex_unlock(&mgr->lock);
		return rc;
	}
	d->conf.want_mounted = false;
	mfs_dbfs_save(mgr, d);
	return 0;
}
