/*
 * The commands of the control protocol as the control thread runs them:
 * check everything against the file system and the manager's state, then
 * change it (mount, unmount, config, forget). A refused command changes
 * nothing. Control thread only.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fuse_lowlevel.h>

#include "conf.h"
#include "control_private.h"
#include "kv.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "path.h"
#include "registry.h"

static int may_control(const struct mfs_caller *who, const struct mfs_dbfs *d)
{
	return who->uid == 0 || who->uid == mfs_ctl.mgr->uid || (d && d->conf.owner == who->uid);
}

void mfs_dbfs_save(struct mfs_dbfs *d)
{
	if (!mfs_ctl.mgr->reg)
		return;
	int rc = mfs_registry_put(mfs_ctl.mgr->reg, &d->conf, d->id);
	if (rc)
		mfs_err("%s: cannot update the registry: %s", d->conf.name, strerror(-rc));
}

static bool dir_empty(const char *path)
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

/* lock held: is st_dev one of our mounts? */
static bool ours(dev_t dev)
{
	if (dev == mfs_ctl.mgr->dev)
		return true;
	for (struct mfs_dbfs *d = mfs_ctl.mgr->list; d; d = d->next)
		if (d->dev && d->dev == dev)
			return true;
	return false;
}

/*
 * Resolve a user path with mfs_path_resolve (never looking inside the
 * manager mount), cleaning a stale mount at its end. `what` names it in
 * reasons. On -ENOENT `out` may hold the would-be path (see path.h).
 */
static int resolve(const char *what, const char *path, char *out, char *err, size_t errlen)
{
	int rc = mfs_path_resolve(path, mfs_ctl.mgr->dev, out, PATH_MAX);

	if (rc == -ENOTCONN && mfs_clean_stale(out) > 0)
		rc = mfs_path_resolve(path, mfs_ctl.mgr->dev, out, PATH_MAX);
	if (rc == -EXDEV) {
		snprintf(err, errlen, "%s %.120s is inside the manager mount", what, path);
		return -EINVAL;
	}
	if (rc)
		snprintf(err, errlen, "%s %.120s: %s", what, path, strerror(-rc));
	return rc;
}

/*
 * Check the paths of a mount for `who`, as the file system is now, and
 * replace them by their resolved form. *mkstore is set when the store must
 * be created.
 */
static int check_paths(const struct mfs_caller *who, char *store, char *mnt, bool create,
		       bool ro, bool *mkstore, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;
	int rc;

	*mkstore = false;
	rc = resolve("mount point", mnt, real, err, errlen);
	if (rc)
		return rc;
	strcpy(mnt, real);
	if (stat(mnt, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "mount point %.120s: %s", mnt, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "mount point %.120s is not a directory", mnt);
		return -ENOTDIR;
	}
	if (mfs_is_mount_root(mnt) == 1) {
		snprintf(err, errlen, "mount point %.120s is already a mount point", mnt);
		return -EBUSY;
	}
	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	bool inside = ours(st.st_dev);
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
	if (inside) {
		snprintf(err, errlen, "mount point %.120s is inside an mfs mount", mnt);
		return -EINVAL;
	}
	if (!mfs_caller_may_write(who, st.st_uid, st.st_gid, st.st_mode)) {
		snprintf(err, errlen, "mount point %.120s is not writable by uid %u", mnt,
			 (unsigned)who->uid);
		return -EACCES;
	}
	if (!dir_empty(mnt)) {
		snprintf(err, errlen, "mount point %.120s is not an empty directory", mnt);
		return -ENOTEMPTY;
	}

	rc = resolve("store", store, real, err, errlen);
	if (rc == -ENOENT && real[0] && create) {
		/* a new store: its parent exists (resolved) and must be writable */
		char parent[PATH_MAX];
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
		pthread_mutex_lock(&mfs_ctl.mgr->lock);
		inside = ours(st.st_dev);
		pthread_mutex_unlock(&mfs_ctl.mgr->lock);
		if (inside) {
			snprintf(err, errlen, "store %.120s would be inside an mfs mount", real);
			return -EINVAL;
		}
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
	if (stat(store, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "store %.120s: %s", store, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "store %.120s is not a directory", store);
		return -ENOTDIR;
	}
	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	inside = ours(st.st_dev);
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
	if (inside) {
		snprintf(err, errlen, "store %.120s is inside an mfs mount", store);
		return -EINVAL;
	}
	if (!ro && !mfs_caller_may_write(who, st.st_uid, st.st_gid, st.st_mode)) {
		snprintf(err, errlen, "store %.120s is not writable by uid %u", store,
			 (unsigned)who->uid);
		return -EACCES;
	}
	return 0;
}

/* Remove a store directory this command created (nothing else in it). */
static void remove_new_store(const char *store)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/data.mdb", store);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lock.mdb", store);
	unlink(path);
	rmdir(store);
}

static int exec_mount(struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	struct mfs_conf *conf = calloc(1, sizeof(*conf));
	struct mfs_dbfs *d, *fresh = NULL;
	bool mkstore = false;
	int rc;

	if (!conf)
		return -ENOMEM;
	pthread_mutex_lock(&mgr->lock);
	d = mfs_find(mgr, cmd->name);
	if (d && d->state != MFS_UNMOUNTED && d->state != MFS_FAILED) {
		snprintf(err, errlen, "DBFS %.120s is already %.120s", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EEXIST;
		goto unlock;
	}
	if (d && !may_control(&cmd->who, d)) {
		snprintf(err, errlen, "DBFS %.120s belongs to uid %u", d->conf.name,
			 (unsigned)d->conf.owner);
		rc = -EPERM;
		goto unlock;
	}
	if (d) {
		*conf = d->conf;
	} else {
		snprintf(conf->name, sizeof(conf->name), "%s", cmd->name);
		conf->owner = cmd->who.uid;
	}
	if (cmd->store[0])
		snprintf(conf->store, sizeof(conf->store), "%s", cmd->store);
	if (cmd->mountpoint[0])
		snprintf(conf->mountpoint, sizeof(conf->mountpoint), "%s", cmd->mountpoint);
	pthread_mutex_unlock(&mgr->lock);

	rc = -EINVAL;
	if (!conf->store[0]) {
		snprintf(err, errlen, "missing key 'store'");
		goto out;
	}
	if (!conf->mountpoint[0]) {
		snprintf(err, errlen, "missing key 'mountpoint'");
		goto out;
	}
	/* the given options override the registered ones, key by key */
	if (cmd->opts[0]) {
		struct mfs_kvlist l;
		rc = mfs_kv_parse(cmd->opts, strlen(cmd->opts), 0, &l, err, errlen);
		if (rc)
			goto out;
		for (size_t i = 0; !rc && i < l.n; i++)
			if (mfs_conf_set(conf->opts, sizeof(conf->opts), l.items[i].key,
					 l.items[i].value))
				rc = (snprintf(err, errlen, "options too long"), -EINVAL);
		mfs_kv_free(&l);
		if (rc)
			goto out;
	}
	struct dbfs_options o;
	struct mfs_limits lim;
	rc = mfs_conf_parse(conf->opts, &o, &lim, err, errlen);
	if (rc)
		goto out;
	rc = check_paths(&cmd->who, conf->store, conf->mountpoint, cmd->create, o.read_only,
			 &mkstore, err, errlen);
	if (rc)
		goto out;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *x = mgr->list; x; x = x->next) {
		if (x == d)
			continue;
		if (!strcmp(x->conf.name, cmd->name)) {
			snprintf(err, errlen, "DBFS %.120s exists", x->conf.name);
			rc = -EEXIST;
		} else if (!strcmp(x->conf.store, conf->store)) {
			snprintf(err, errlen, "store %.120s is used by DBFS %.120s", conf->store,
				 x->conf.name);
			rc = -EBUSY;
		} else if (!strcmp(x->conf.mountpoint, conf->mountpoint) &&
			   x->state != MFS_UNMOUNTED && x->state != MFS_FAILED) {
			snprintf(err, errlen, "mount point %.120s is used by DBFS %.120s",
				 conf->mountpoint, x->conf.name);
			rc = -EBUSY;
		}
		if (rc)
			goto unlock;
	}
	struct mfs_conf old;
	if (d) {
		old = d->conf;
	} else {
		fresh = d = calloc(1, sizeof(*d));
		if (!d) {
			rc = -ENOMEM;
			goto unlock;
		}
		d->id = mgr->next_id++;
		d->conf = *conf;
		mfs_dbfs_link(d);
	}
	d->conf = *conf;
	d->conf.want_mounted = true;
	d->state = MFS_MOUNTING;
	d->reason[0] = '\0';
	pthread_mutex_unlock(&mgr->lock);

	if (mkstore) {
		if (mkdir(conf->store, 0700) < 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot create store %.120s: %.120s", conf->store,
				 strerror(errno));
		} else if (cmd->who.uid != geteuid() &&
			   chown(conf->store, cmd->who.uid, cmd->who.gid) < 0) {
			mfs_warn("chown %s: %s", conf->store, strerror(errno));
		}
	}
	if (!rc)
		rc = mfs_dbfs_mount(d, cmd->create, err, errlen);
	/* a store formatted for another user: its (empty) root is theirs */
	struct stat rst;
	if (!rc && cmd->create && cmd->who.uid != geteuid() && stat(conf->mountpoint, &rst) == 0 &&
	    rst.st_uid == geteuid() && dir_empty(conf->mountpoint) &&
	    chown(conf->mountpoint, cmd->who.uid, cmd->who.gid) < 0)
		mfs_warn("%s: chown of its root: %s", conf->name, strerror(errno));
	if (rc) {
		if (mkstore)
			remove_new_store(conf->store);
		pthread_mutex_lock(&mgr->lock);
		if (fresh) {
			mfs_dbfs_unlink(d);
			free(d);
		} else {
			d->conf = old;
			d->state = MFS_UNMOUNTED;
		}
		pthread_mutex_unlock(&mgr->lock);
		goto out;
	}
	mfs_dbfs_save(d);
	goto out;
unlock:
	pthread_mutex_unlock(&mgr->lock);
out:
	free(conf);
	return rc;
}

static int exec_unmount(struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find(mgr, cmd->name);
	int rc = 0;
	if (!d) {
		snprintf(err, errlen, "no DBFS named %.120s", cmd->name);
		rc = -ENOENT;
	} else if (!may_control(&cmd->who, d)) {
		snprintf(err, errlen, "DBFS %.120s belongs to uid %u", d->conf.name,
			 (unsigned)d->conf.owner);
		rc = -EPERM;
	} else if (d->state != MFS_MOUNTED) {
		snprintf(err, errlen, "DBFS %.120s is not mounted (%.120s)", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EINVAL;
	} else {
		d->state = MFS_UNMOUNTING;
	}
	pthread_mutex_unlock(&mgr->lock);
	if (rc)
		return rc;
	rc = mfs_dbfs_unmount(d, cmd->force, "unmounted by command");
	if (rc == -EBUSY) {
		snprintf(err, errlen, "DBFS %.120s is busy: files are open on %.120s (add force)",
			 d->conf.name, d->conf.mountpoint);
		pthread_mutex_lock(&mgr->lock);
		d->state = MFS_MOUNTED;
		pthread_mutex_unlock(&mgr->lock);
		return rc;
	}
	d->conf.want_mounted = false;
	mfs_dbfs_save(d);
	return 0;
}

static int exec_config(struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	struct mfs_kvlist l;
	int rc = mfs_kv_parse(cmd->opts, strlen(cmd->opts), 0, &l, err, errlen);

	if (rc)
		return rc;
	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find(mgr, cmd->name);
	char *opts = NULL;
	if (!d) {
		snprintf(err, errlen, "no DBFS named %.120s", cmd->name);
		rc = -ENOENT;
		goto out;
	}
	if (!may_control(&cmd->who, d)) {
		snprintf(err, errlen, "DBFS %.120s belongs to uid %u", d->conf.name,
			 (unsigned)d->conf.owner);
		rc = -EPERM;
		goto out;
	}
	bool live = d->state == MFS_MOUNTED;
	if (d->state == MFS_MOUNTING || d->state == MFS_UNMOUNTING) {
		snprintf(err, errlen, "DBFS %.120s is %.120s; try again", d->conf.name,
			 mfs_state_name(d->state));
		rc = -EBUSY;
		goto out;
	}
	opts = malloc(MFS_OPTS_MAX);
	if (!opts) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(opts, d->conf.opts, MFS_OPTS_MAX);
	for (size_t i = 0; i < l.n; i++) {
		if (live && !mfs_conf_live(l.items[i].key)) {
			snprintf(err, errlen, "'%.120s' cannot change while %.120s is mounted",
				 l.items[i].key, d->conf.name);
			rc = -EINVAL;
			goto out;
		}
		if (mfs_conf_set(opts, MFS_OPTS_MAX, l.items[i].key, l.items[i].value)) {
			snprintf(err, errlen, "options too long");
			rc = -EINVAL;
			goto out;
		}
	}
	struct dbfs_options o;
	struct mfs_limits lim;
	rc = mfs_conf_parse(opts, &o, &lim, err, errlen);
	if (rc)
		goto out;
	memcpy(d->conf.opts, opts, MFS_OPTS_MAX);
	if (live) {
		dbfs_set_quota(d->fs, o.quota_bytes, o.quota_inodes);
		mfs_loop_set_limits(d->sess, &lim);
		d->limits = lim;
		d->quota_bytes = o.quota_bytes;
		d->quota_inodes = o.quota_inodes;
		d->cache_mem = o.cache_limit;
		d->cache_limit = UINT64_MAX; /* apply it anew */
		mfs_cache_rebalance();
	}
	pthread_mutex_unlock(&mgr->lock);
	mfs_dbfs_save(d);
	mfs_kv_free(&l);
	free(opts);
	mfs_info("%s: config %s", cmd->name, cmd->opts);
	return 0;
out:
	pthread_mutex_unlock(&mgr->lock);
	mfs_kv_free(&l);
	free(opts);
	return rc;
}

static int exec_forget(struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	int rc = 0;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find(mgr, cmd->name);
	if (!d) {
		snprintf(err, errlen, "no DBFS named %.120s", cmd->name);
		rc = -ENOENT;
	} else if (!may_control(&cmd->who, d)) {
		snprintf(err, errlen, "DBFS %.120s belongs to uid %u", d->conf.name,
			 (unsigned)d->conf.owner);
		rc = -EPERM;
	} else if (d->state != MFS_UNMOUNTED && d->state != MFS_FAILED) {
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
			snprintf(err, errlen, "registry: %.120s", strerror(-rc));
			return rc;
		}
	}
	pthread_mutex_lock(&mgr->lock);
	mfs_dbfs_unlink(d);
	pthread_mutex_unlock(&mgr->lock);
	mfs_info("%s: forgotten (store %s kept)", d->conf.name, d->conf.store);
	free(d);
	return 0;
}

void mfs_cmd_run(struct mfs_cmd *cmd)
{
	char err[512] = "";
	int rc;

	switch (cmd->kind) {
	case MFS_CMD_MOUNT:
		rc = exec_mount(cmd, err, sizeof(err));
		break;
	case MFS_CMD_UNMOUNT:
		rc = exec_unmount(cmd, err, sizeof(err));
		break;
	case MFS_CMD_CONFIG:
		rc = exec_config(cmd, err, sizeof(err));
		break;
	case MFS_CMD_FORGET:
		rc = exec_forget(cmd, err, sizeof(err));
		break;
	default:
		rc = -EINVAL;
		snprintf(err, sizeof(err), "unknown command");
	}
	if (rc && !err[0])
		snprintf(err, sizeof(err), "%.120s", strerror(-rc));
	mfs_cmd_answer(cmd, rc, err);
}
