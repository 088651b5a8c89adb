/* Checks of a command against the file system and the manager's state (see
 * validate.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "as_caller.h"
#include "dbfs/feed.h"
#include "feed_fs.h"
#include "mount.h"
#include "path.h"
#include "validate.h"

static bool may_control(struct mfs_manager *mgr, const struct mfs_caller *who,
			const struct mfs_dbfs *d)
{
	return who->uid == 0 || who->uid == mgr->uid || d->conf.owner == who->uid;
}

int mfs_check_control(struct mfs_manager *mgr, const struct mfs_caller *who,
		      const struct mfs_dbfs *d, char *err, size_t errlen)
{
	if (may_control(mgr, who, d))
		return 0;
	snprintf(err, errlen, "DBFS %.120s belongs to uid %u", d->conf.name,
		 (unsigned)d->conf.owner);
	return -EPERM;
}

int mfs_check_owned(struct mfs_manager *mgr, const struct mfs_caller *who, const char *name,
		    struct mfs_dbfs **d, char *err, size_t errlen)
{
	*d = mfs_find(mgr, name);
	if (!*d) {
		snprintf(err, errlen, "no DBFS named %.120s", name);
		return -ENOENT;
	}
	return mfs_check_control(mgr, who, *d, err, errlen);
}

int mfs_check_feed(struct mfs_manager *mgr, const struct mfs_caller *who, const char *name,
		   struct mfs_dbfs **d, char *err, size_t errlen)
{
	*d = mfs_find(mgr, name);
	if (!*d) {
		snprintf(err, errlen, "no DBFS named %.120s", name);
		return -ENOENT;
	}
	if (!mfs_feed_may(mgr, *d, who)) {
		snprintf(err, errlen,
			 "the feed of %.120s is for its owner (uid %u) and root; "
			 "its option feed_access=all opens it",
			 name, (unsigned)(*d)->conf.owner);
		return -EACCES;
	}
	if ((*d)->state != MFS_MOUNTED || !(*d)->fs) {
		snprintf(err, errlen, "DBFS %.120s is %s, not mounted", name,
			 mfs_state_name((*d)->state));
		return -EINVAL;
	}
	if (!dbfs_feed_enabled((*d)->fs)) {
		snprintf(err, errlen, "DBFS %.120s is mounted with feed=off", name);
		return -EOPNOTSUPP;
	}
	return 0;
}

bool mfs_held_dir_empty(int fd)
{
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = dfd < 0 ? NULL : fdopendir(dfd);
	bool empty = true;

	if (!dir) {
		if (dfd >= 0)
			close(dfd);
		return false;
	}
	for (struct dirent *e; empty && (e = readdir(dir));)
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(dir);
	return empty;
}

void mfs_mount_paths_release(struct mfs_mount_paths *p)
{
	mfs_held_release(&p->mp);
	mfs_held_release(&p->store);
	p->mkstore = false;
}

/* Is st_dev one of our mounts? Takes mgr->lock. */
static bool ours(struct mfs_manager *mgr, const struct statx *stx)
{
	dev_t dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	bool found = dev == mgr->dev;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d && !found; d = d->next)
		found = d->dev && d->dev == dev;
	pthread_mutex_unlock(&mgr->lock);
	return found;
}

/*
 * Resolve and hold a user path as `who` (never inside the manager mount).
 * `what` names it in reasons. On -ENOENT with h->dirfd held, only the last
 * component is missing (see path.h); the reason is left to the caller.
 */
static int hold(struct mfs_manager *mgr, const struct mfs_caller *who, const char *what,
		const char *path, struct mfs_held *h, char *err, size_t errlen)
{
	struct mfs_as as;
	int rc = mfs_as_begin(who, &as);

	if (rc) {
		snprintf(err, errlen, "cannot act as uid %u: %s", (unsigned)who->uid, strerror(-rc));
		return rc;
	}
	rc = mfs_path_hold(path, mgr->dev, &as, h);
	mfs_as_end(&as);
	if (rc == -EXDEV) {
		snprintf(err, errlen, "%s %.120s is inside the manager mount", what, path);
		return -EINVAL;
	}
	if (rc == -EACCES)
		snprintf(err, errlen, "%s %.120s: uid %u may not search %.120s", what, path,
			 (unsigned)who->uid, h->path);
	else if (rc == -ENOTCONN)
		snprintf(err, errlen, "%s %.120s: %.120s is a dead mount", what, path, h->path);
	else if (rc && rc != -ENOENT)
		snprintf(err, errlen, "%s %.120s: %s", what, path, strerror(-rc));
	return rc;
}

/* May `who` access the held `fd` with `mode`, as the kernel decides? */
static int access_as(const struct mfs_caller *who, int fd, int mode)
{
	struct mfs_as as;
	int rc = mfs_as_begin(who, &as);

	if (!rc) {
		rc = mfs_as_access(&as, fd, mode);
		mfs_as_end(&as);
	}
	return rc;
}

static int check_mount_point(struct mfs_manager *mgr, const struct mfs_caller *who,
			     const char *mnt, struct mfs_held *h, char *err, size_t errlen)
{
	int rc = hold(mgr, who, "mount point", mnt, h, err, errlen);

	if (rc == -ENOENT)
		snprintf(err, errlen, "mount point %.120s: %s", mnt, strerror(ENOENT));
	if (rc)
		return rc;
	if (h->dirfd < 0) {
		snprintf(err, errlen, "mount point %.120s is the root directory", mnt);
		return -EBUSY;
	}
	rc = mfs_clean_stale_held(h); /* as the daemon: only dead mounts go */
	if (rc < 0) {
		snprintf(err, errlen, "stale mount at %.120s cannot be removed: %s", h->path,
			 strerror(-rc));
		return -EBUSY;
	}
	const struct statx *stx = &h->stx;
	if (!S_ISDIR(stx->stx_mode)) {
		snprintf(err, errlen, "mount point %.120s is not a directory", h->path);
		return -ENOTDIR;
	}
	if (stx->stx_attributes & STATX_ATTR_MOUNT_ROOT) {
		snprintf(err, errlen, "mount point %.120s is already a mount point", h->path);
		return -EBUSY;
	}
	if (ours(mgr, stx)) {
		snprintf(err, errlen, "mount point %.120s is inside an mfs mount", h->path);
		return -EINVAL;
	}
	if (access_as(who, h->fd, W_OK)) {
		snprintf(err, errlen, "mount point %.120s is not writable by uid %u", h->path,
			 (unsigned)who->uid);
		return -EACCES;
	}
	if (who->uid != 0 && (stx->stx_mode & S_ISVTX) && stx->stx_uid != who->uid) {
		snprintf(err, errlen,
			 "mount point %.120s is a sticky directory of uid %u: only its owner may "
			 "mount on it",
			 h->path, (unsigned)stx->stx_uid);
		return -EACCES;
	}
	if (!mfs_held_dir_empty(h->fd)) {
		snprintf(err, errlen, "mount point %.120s is not an empty directory", h->path);
		return -ENOTEMPTY;
	}
	return 0;
}

/* A store to create as h->name in the held h->dirfd: a directory that `who`
 * may write, outside our mounts. */
static int check_new_store(struct mfs_manager *mgr, const struct mfs_caller *who,
			   struct mfs_held *h, char *err, size_t errlen)
{
	struct statx parent;
	char *slash = strrchr(h->path, '/');
	int plen = slash == h->path ? 1 : (int)(slash - h->path);

	if (statx(h->dirfd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &parent) < 0 ||
	    !S_ISDIR(parent.stx_mode)) {
		snprintf(err, errlen, "store parent %.*s is not a directory", plen, h->path);
		return -ENOTDIR;
	}
	if (access_as(who, h->dirfd, W_OK | X_OK)) {
		snprintf(err, errlen, "cannot create the store in %.*s: permission denied", plen,
			 h->path);
		return -EACCES;
	}
	if (ours(mgr, &parent)) {
		snprintf(err, errlen, "store %.120s would be inside an mfs mount", h->path);
		return -EINVAL;
	}
	return 0;
}

static int check_store(struct mfs_manager *mgr, const struct mfs_caller *who, const char *store,
		       bool create, bool ro, struct mfs_mount_paths *p, char *err, size_t errlen)
{
	struct mfs_held *h = &p->store;
	int rc = hold(mgr, who, "store", store, h, err, errlen);

	if (rc == -ENOENT && h->dirfd >= 0 && create) {
		rc = check_new_store(mgr, who, h, err, errlen);
		p->mkstore = !rc;
		return rc;
	}
	if (rc == -ENOENT) {
		snprintf(err, errlen, "store %.120s does not exist%s", store,
			 h->dirfd >= 0 ? " (add create to make a new one)" : "");
		return rc;
	}
	if (rc)
		return rc;
	if (!S_ISDIR(h->stx.stx_mode)) {
		snprintf(err, errlen, "store %.120s is not a directory", h->path);
		return -ENOTDIR;
	}
	if (ours(mgr, &h->stx)) {
		snprintf(err, errlen, "store %.120s is inside an mfs mount", h->path);
		return -EINVAL;
	}
	if (access_as(who, h->fd, R_OK | X_OK | (ro ? 0 : W_OK))) {
		snprintf(err, errlen, "store %.120s is not %s by uid %u", h->path,
			 ro ? "readable" : "writable", (unsigned)who->uid);
		return -EACCES;
	}
	return 0;
}

int mfs_check_paths(struct mfs_manager *mgr, const struct mfs_caller *who, char *store, char *mnt,
		    bool create, bool ro, struct mfs_mount_paths *p, char *err, size_t errlen)
{
	int rc = check_mount_point(mgr, who, mnt, &p->mp, err, errlen);

	if (!rc)
		rc = check_store(mgr, who, store, create, ro, p, err, errlen);
	if (rc) {
		mfs_mount_paths_release(p);
		return rc;
	}
	strcpy(mnt, p->mp.path);
	strcpy(store, p->store.path);
	return 0;
}

int mfs_check_conflicts(struct mfs_manager *mgr, const struct mfs_dbfs *self, const char *name,
			const struct mfs_conf *conf, char *err, size_t errlen)
{
	for (struct mfs_dbfs *x = mgr->list; x; x = x->next) {
		if (x == self)
			continue;
		if (!strcmp(x->conf.name, name)) {
			snprintf(err, errlen, "DBFS %.120s exists", x->conf.name);
			return -EEXIST;
		}
		if (!strcmp(x->conf.store, conf->store)) {
			snprintf(err, errlen, "store %.120s is used by DBFS %.120s", conf->store,
				 x->conf.name);
			return -EBUSY;
		}
		if (!strcmp(x->conf.mountpoint, conf->mountpoint) && x->state != MFS_UNMOUNTED &&
		    x->state != MFS_FAILED) {
			snprintf(err, errlen, "mount point %.120s is used by DBFS %.120s",
				 conf->mountpoint, x->conf.name);
			return -EBUSY;
		}
	}
	return 0;
}
