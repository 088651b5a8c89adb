/* Start-up of the manager's DBFSs (see startup.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "caller.h"
#include "conf.h"
#include "dbfs_mount.h"
#include "inbox.h"
#include "log.h"
#include "mount.h"
#include "registry.h"
#include "startup.h"
#include "validate.h"

/* Hold one path given on the command line (single mode: the administrator's
 * own paths, taken as they are). */
static int hold_given(const char *what, const char *path, struct mfs_held *h, char *err,
		      size_t errlen)
{
	int rc = mfs_path_hold(path, (dev_t)-1, NULL, h);

	if (rc)
		snprintf(err, errlen, "%s %.120s: %s", what, path, strerror(-rc));
	return rc;
}

int mfs_startup_mount_now(struct mfs_manager *mgr, struct mfs_dbfs *d, bool create, char *err,
			  size_t errlen)
{
	struct mfs_mount_paths p = MFS_MOUNT_PATHS_INIT;
	struct mfs_caller self = {.uid = geteuid(), .gid = getegid()};
	int rc = hold_given("mount point", d->conf.mountpoint, &p.mp, err, errlen);

	if (!rc && p.mp.dirfd < 0)
		rc = (snprintf(err, errlen, "cannot mount on /"), -EBUSY);
	if (!rc && mfs_clean_stale_held(&p.mp) < 0)
		rc = (snprintf(err, errlen, "stale mount at %.120s cannot be removed",
			       d->conf.mountpoint),
		      -EBUSY);
	if (!rc)
		rc = hold_given("store", d->conf.store, &p.store, err, errlen);
	if (rc) {
		mfs_mount_paths_release(&p);
		return rc;
	}
	pthread_mutex_lock(&mgr->lock);
	d->state = MFS_MOUNTING;
	mfs_dbfs_link(mgr, d);
	pthread_mutex_unlock(&mgr->lock);
	rc = mfs_dbfs_mount(mgr, d, &self, &p, create, err, errlen);
	mfs_mount_paths_release(&p);
	if (rc) {
		pthread_mutex_lock(&mgr->lock);
		mfs_dbfs_unlink(mgr, d);
		pthread_mutex_unlock(&mgr->lock);
	}
	return rc;
}

/*
 * Mount a registered DBFS again, checked as a new mount by its owner would
 * be: its paths may have been swapped while mfs was down. Dead mounts of
 * its store left by a crash are removed first, wherever they are now.
 */
static int remount(struct mfs_manager *mgr, struct mfs_dbfs *d, char *err, size_t errlen)
{
	struct mfs_mount_paths p = MFS_MOUNT_PATHS_INIT;
	struct mfs_caller owner;
	char store[PATH_MAX], mnt[PATH_MAX], source[PATH_MAX + 8];
	struct dbfs_options o;
	struct mfs_limits lim;
	int rc = mfs_conf_parse(d->conf.opts, &o, &lim, err, errlen);

	if (!rc && (rc = mfs_caller_of_uid(d->conf.owner, &owner)))
		snprintf(err, errlen, "owner uid %u: %s", (unsigned)d->conf.owner, strerror(-rc));
	if (rc)
		return rc;
	snprintf(source, sizeof(source), "dbfs:%s", d->conf.store);
	mfs_clean_stale_source(source);
	snprintf(store, sizeof(store), "%s", d->conf.store);
	snprintf(mnt, sizeof(mnt), "%s", d->conf.mountpoint);
	rc = mfs_check_paths(mgr, &owner, store, mnt, false, o.read_only, &p, err, errlen);
	if (!rc)
		rc = mfs_dbfs_mount(mgr, d, &owner, &p, false, err, errlen);
	mfs_mount_paths_release(&p);
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
	int rc = remount(mgr, d, err, sizeof(err));
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
