/* Start-up of the manager's DBFSs (see startup.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "dbfs_mount.h"
#include "inbox.h"
#include "log.h"
#include "mount.h"
#include "registry.h"
#include "startup.h"

int mfs_startup_mount_now(struct mfs_manager *mgr, struct mfs_dbfs *d, bool create, char *err,
			  size_t errlen)
{
	pthread_mutex_lock(&mgr->lock);
	d->state = MFS_MOUNTING;
	mfs_dbfs_link(mgr, d);
	pthread_mutex_unlock(&mgr->lock);
	int rc = mfs_dbfs_mount(mgr, d, create, err, errlen);
	if (rc) {
		pthread_mutex_lock(&mgr->lock);
		mfs_dbfs_unlink(mgr, d);
		pthread_mutex_unlock(&mgr->lock);
	}
	return rc;
}

void mfs_startup_remount(struct mfs_manager *mgr, uint32_t id)
{
	char err[512] = "";

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	bool go = d && d->state == MFS_MOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (!go)
		return;
	struct stat st;
	int rc = 0;
	if (stat(d->conf.mountpoint, &st) < 0 && mfs_errno_dead_mount(errno))
		rc = mfs_clean_stale(d->conf.mountpoint) < 0 ? -EBUSY : 0;
	if (rc)
		snprintf(err, sizeof(err), "stale mount at %.120s cannot be removed",
			 d->conf.mountpoint);
	else
		rc = mfs_dbfs_mount(mgr, d, false, err, sizeof(err));
	if (rc) {
		mfs_err("%s: re-mount failed: %s", d->conf.name, err);
		pthread_mutex_lock(&mgr->lock);
		d->state = MFS_FAILED;
		snprintf(d->reason, sizeof(d->reason), "%.255s", err);
		pthread_mutex_unlock(&mgr->lock);
	}
}

static int load_one(void *arg, const struct mfs_conf *c, uint32_t id)
{
	struct mfs_manager *mgr = arg;
	struct mfs_dbfs *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->conf = *c;
	d->id = id;
	pthread_mutex_lock(&mgr->lock);
	/* queued first, so that a failure leaves nothing behind; the control
	 * thread sees the job only after the lock, with d linked */
	if (c->want_mounted && mfs_inbox_remount(id)) {
		pthread_mutex_unlock(&mgr->lock);
		free(d);
		return -ENOMEM;
	}
	if (id >= mgr->next_id)
		mgr->next_id = id + 1;
	d->state = c->want_mounted ? MFS_MOUNTING : MFS_UNMOUNTED;
	mfs_dbfs_link(mgr, d);
	pthread_mutex_unlock(&mgr->lock);
	return 0;
}

int mfs_startup_load(struct mfs_manager *mgr)
{
	/* ids must stay unique across restarts: registry ids are kept */
	if (mgr->next_id == 0)
		mgr->next_id = 1;
	return mfs_registry_load(mgr->reg, load_one, mgr);
}
