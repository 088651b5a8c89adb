/* Checks of a command against the file system and the manager's state (see
 * validate.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

bool mfs_dir_empty(const char *path)
{
	DIR *dir = opendir(path);
	bool empty = true;

	if (!dir)
		return false;
	for (struct dirent *e; empty && (e = readdir(dir));)
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(dir);
	return empty;
}

/* Is st_dev one of our mounts? Takes mgr->lock. */
static bool ours(struct mfs_manager *mgr, dev_t dev)
{
	bool found = dev == mgr->dev;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d && !found; d = d->next)
		found = d->dev && d->dev == dev;
	pthread_mutex_unlock(&mgr->lock);
	return found;
}

/*
 * Resolve a user path with mfs_path_resolve (never looking inside the
 * manager mount), cleaning a stale mount at its end. `what` names it in
 * reasons. On -ENOENT `out` may hold the would-be path (see path.h).
 */
static int resolve(struct mfs_manager *mgr, const char *what, const char *path, char *out,
		   char *err, size_t errlen)
{
	int rc = mfs_path_resolve(path, mgr->dev, out, PATH_MAX);

	if (rc == -ENOTCONN && mfs_clean_stale(out) > 0)
		rc = mfs_path_resolve(path, mgr->dev, out, PATH_MAX);
	if (rc == -EXDEV) {
		snprintf(err, errlen, "%s %.120s is inside the manager mount", what, path);
		return -EINVAL;
	}
	if (rc)
		snprintf(err, errlen, "%s %.120s: %s", what, path, strerror(-rc));
	return rc;
}

/* What a directory of a mount must be, besides existing outside our mounts. */
struct dir_rules {
	bool not_mount_root;
	bool writable; /* by the caller */
	bool empty;
};

/* Check directory `path` (resolved; `what` names it in reasons) by `rules`,
 * in the order the reasons are most useful in. */
static int check_dir(struct mfs_manager *mgr, const struct mfs_caller *who, const char *what,
		     const char *path, struct dir_rules rules, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		int rc = -errno;
		snprintf(err, errlen, "%s %.120s: %s", what, path, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s %.120s is not a directory", what, path);
		return -ENOTDIR;
	}
	if (rules.not_mount_root && mfs_is_mount_root(path) == 1) {
		snprintf(err, errlen, "%s %.120s is already a mount point", what, path);
		return -EBUSY;
	}
	if (ours(mgr, st.st_dev)) {
		snprintf(err, errlen, "%s %.120s is inside an mfs mount", what, path);
		return -EINVAL;
	}
	if (rules.writable && !mfs_caller_may_write(who, st.st_uid, st.st_gid, st.st_mode)) {
		snprintf(err, errlen, "%s %.120s is not writable by uid %u", what, path,
			 (unsigned)who->uid);
		return -EACCES;
	}
	if (rules.empty && !mfs_dir_empty(path)) {
		snprintf(err, errlen, "%s %.120s is not an empty directory", what, path);
		return -ENOTEMPTY;
	}
	return 0;
}

/* A store to create at `real` (resolved, missing): its parent must be a
 * directory that `who` may write, outside our mounts. */
static int check_new_store(struct mfs_manager *mgr, const struct mfs_caller *who, const char *real,
			   char *err, size_t errlen)
{
	char parent[PATH_MAX];
	struct stat st;

	strcpy(parent, real);
	char *slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "store parent %.120s is not a directory", parent);
		return -ENOTDIR;
	}
	if (!mfs_caller_may_write(who, st.st_uid, st.st_gid, st.st_mode)) {
		snprintf(err, errlen, "cannot create the store in %.120s: permission denied",
			 parent);
		return -EACCES;
	}
	if (ours(mgr, st.st_dev)) {
		snprintf(err, errlen, "store %.120s would be inside an mfs mount", real);
		return -EINVAL;
	}
	return 0;
}

int mfs_check_paths(struct mfs_manager *mgr, const struct mfs_caller *who, char *store, char *mnt,
		    bool create, bool ro, bool *mkstore, char *err, size_t errlen)
{
	const struct dir_rules mount_point = {
	    .not_mount_root = true, .writable = true, .empty = true};
	const struct dir_rules existing_store = {.writable = !ro};
	char real[PATH_MAX];
	int rc;

	*mkstore = false;
	rc = resolve(mgr, "mount point", mnt, real, err, errlen);
	if (rc)
		return rc;
	strcpy(mnt, real);
	rc = check_dir(mgr, who, "mount point", mnt, mount_point, err, errlen);
	if (rc)
		return rc;

	rc = resolve(mgr, "store", store, real, err, errlen);
	if (rc == -ENOENT && real[0] && create) {
		rc = check_new_store(mgr, who, real, err, errlen);
		if (rc)
			return rc;
		strcpy(store, real);
		*mkstore = true;
		return 0;
	}
	if (rc == -ENOENT) {
		snprintf(err, errlen, "store %.120s does not exist%s", store,
			 real[0] ? " (add create to make a new one)" : "");
		return rc;
	}
	if (rc)
		return rc;
	strcpy(store, real);
	return check_dir(mgr, who, "store", store, existing_store, err, errlen);
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
