/* Executing the forget verb (see execute.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execute.h"
#include "log.h"
#include "registry.h"
#include "validate.h"

int mfs_execute_forget(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_dbfs *d;

	pthread_mutex_lock(&mgr->lock);
	int rc = mfs_check_owned(mgr, &cmd->who, cmd->name, &d, err, errlen);
	if (!rc && d->state != MFS_UNMOUNTED && d->state != MFS_FAILED) {
		snprintf(err, errlen, "DBFS %.120s is %.120s: unmount it first", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EBUSY;
	}
	pthread_mutex_unlock(&mgr->lock);
	if (rc)
		return rc;
	if (mgr->reg) {
		rc = mfs_registry_del(mgr->reg, d->conf.name);
		if (rc && rc != -ENOENT) {
			snprintf(err, errlen, "cannot drop %.64s from the registry (%s): not done",
				 d->conf.name, strerror(-rc));
			return rc;
		}
	}
	pthread_mutex_lock(&mgr->lock);
	mfs_dbfs_unlink(mgr, d);
	pthread_mutex_unlock(&mgr->lock);
	mfs_info("%s: forgotten (store %s kept)", d->conf.name, d->conf.store);
	free(d);
	return 0;
}
