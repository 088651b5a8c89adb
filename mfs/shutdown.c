/* The orderly stop of the manager (see shutdown.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "dbfs_unmount.h"
#include "inbox.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "shutdown.h"

/* The first MOUNTED DBFS, now UNMOUNTING, or NULL. */
static struct mfs_dbfs *take_mounted(struct mfs_manager *mgr)
{
	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mgr->list;
	while (d && d->state != MFS_MOUNTED)
		d = d->next;
	if (d)
		d->state = MFS_UNMOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	return d;
}

static void stop_manager_mount(struct mfs_manager *mgr)
{
	if (!mgr->manager_ended) {
		int rc = mfs_unmount_path(mgr->mountpoint, true);
		if (rc)
			mfs_warn("unmount %s: %s", mgr->mountpoint, strerror(-rc));
	}
	dev_t dev = mgr->dev;
	mfs_session_stop(mgr, "manager", &mgr->manager_ended, minor(dev) | (major(dev) << 20),
			 mgr->sess);
	mfs_loop_remove(mgr->sess);
	mfs_session_close(mgr->se);
	mgr->se = NULL;
	mgr->sess = NULL;
}

void mfs_shutdown(struct mfs_manager *mgr)
{
	mfs_inbox_close();
	mfs_info("stopping: unmounting every DBFS");
	for (struct mfs_dbfs *d; (d = take_mounted(mgr));)
		mfs_dbfs_unmount(mgr, d, true, "mfs stopped");
	if (mgr->se)
		stop_manager_mount(mgr);
	pthread_mutex_lock(&mgr->lock);
	while (mgr->list) {
		struct mfs_dbfs *d = mgr->list;
		mgr->list = d->next;
		free(d);
	}
	pthread_mutex_unlock(&mgr->lock);
}
