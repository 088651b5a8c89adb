/* Executing the sync verb (see execute.h). */
#include <errno.h>
#include <stdio.h>

#include "execute.h"
#include "flusher.h"
#include "validate.h"

int mfs_execute_sync(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_dbfs *d;
	struct dbfs *fs = NULL;

	pthread_mutex_lock(&mgr->lock);
	int rc = mfs_check_owned(mgr, &cmd->who, cmd->name, &d, err, errlen);
	if (!rc && d->state != MFS_MOUNTED) {
		snprintf(err, errlen, "DBFS %.120s is %.40s: sync needs it mounted", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EINVAL;
	}
	if (!rc)
		fs = d->fs;
	pthread_mutex_unlock(&mgr->lock);
	if (rc)
		return rc;
	/* Only this thread unmounts, after mfs_flusher_forget: fs stays valid
	 * for as long as the flusher holds the command. */
	mfs_flusher_sync(fs, cmd);
	return MFS_EXEC_LATER;
}
