/*
 * The control thread (see control.h): command queue, mount, unmount,
 * config, forget, re-mount at startup and the orderly stop.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fuse_lowlevel.h>

#include "conf.h"
#include "control.h"
#include "kv.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "path.h"
#include "registry.h"

/* How long an unmounted session may take to end before the next, harder step
 * (lazy unmount -> connection abort -> closing the device). */
#define END_WAIT_MS 1500

enum job_kind {
	JOB_CMD,     /* a user's command */
	JOB_ENDED,   /* a DBFS's connection went away without us */
	JOB_REMOUNT, /* mount a registered DBFS at startup */
};

struct job {
	enum job_kind kind;
	struct mfs_cmd *cmd;
	uint32_t id;
	struct job *next;
};

/* Everything below is protected by mgr->lock. */
static struct {
	struct mfs_manager *mgr;
	pthread_cond_t wake; /* a job was queued or a stop was asked */
	struct job *head, *tail;
	bool stop;
	bool stopping; /* the stop has begun: refuse new commands */
} ctl;

const char *mfs_state_name(enum mfs_state st)
{
	static const char *const names[] = {
		[MFS_UNMOUNTED] = "unmounted", [MFS_MOUNTING] = "mounting",
		[MFS_MOUNTED] = "mounted",     [MFS_UNMOUNTING] = "unmounting",
		[MFS_FAILED] = "failed",
	};
	return names[st];
}

struct mfs_dbfs *mfs_find(struct mfs_manager *mgr, const char *name)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (!strcmp(d->conf.name, name))
			return d;
	return NULL;
}

struct mfs_dbfs *mfs_find_id(struct mfs_manager *mgr, uint32_t id)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (d->id == id)
			return d;
	return NULL;
}

/* lock held: add d to the list, which stays in name order */
static void link_dbfs(struct mfs_dbfs *d)
{
	struct mfs_dbfs **pp = &ctl.mgr->list;

	while (*pp && strcmp((*pp)->conf.name, d->conf.name) < 0)
		pp = &(*pp)->next;
	d->next = *pp;
	*pp = d;
}

/* lock held */
static void unlink_dbfs(struct mfs_dbfs *d)
{
	for (struct mfs_dbfs **pp = &ctl.mgr->list; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			return;
		}
	}
}

/* lock held */
static void enqueue(struct job *j)
{
	j->next = NULL;
	if (ctl.tail)
		ctl.tail->next = j;
	else
		ctl.head = j;
	ctl.tail = j;
	pthread_cond_signal(&ctl.wake);
}

void mfs_control_init(struct mfs_manager *mgr)
{
	pthread_condattr_t a;

	ctl.mgr = mgr;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&ctl.wake, &a);
	pthread_cond_init(&mgr->cond, &a);
	pthread_condattr_destroy(&a);
}

static void answer(struct mfs_cmd *cmd, int rc, const char *reason)
{
	if (rc) {
		mfs_error_record(&cmd->who, -rc, reason);
		mfs_warn("refused %s from uid %u: %s: %s",
			 cmd->kind == MFS_CMD_MOUNT     ? "mount"
			 : cmd->kind == MFS_CMD_UNMOUNT ? "unmount"
			 : cmd->kind == MFS_CMD_CONFIG  ? "config"
							: "forget",
			 (unsigned)cmd->who.uid, strerror(-rc), reason);
	}
	if (cmd->req)
		fuse_reply_err(cmd->req, -rc);
}

void mfs_control_submit(struct mfs_cmd *cmd)
{
	struct job *j = calloc(1, sizeof(*j));

	pthread_mutex_lock(&ctl.mgr->lock);
	if (ctl.stopping || ctl.stop || !j) {
		pthread_mutex_unlock(&ctl.mgr->lock);
		answer(cmd, j ? -ESHUTDOWN : -ENOMEM, j ? "mfs is stopping" : "out of memory");
		free(cmd);
		free(j);
		return;
	}
	j->kind = JOB_CMD;
	j->cmd = cmd;
	enqueue(j);
	pthread_mutex_unlock(&ctl.mgr->lock);
}

void mfs_control_stop(void)
{
	pthread_mutex_lock(&ctl.mgr->lock);
	ctl.stop = true;
	pthread_cond_signal(&ctl.wake);
	pthread_mutex_unlock(&ctl.mgr->lock);
}

void mfs_control_dbfs_ended(void *arg)
{
	struct mfs_dbfs *d = arg;
	struct job *j = calloc(1, sizeof(*j));

	pthread_mutex_lock(&ctl.mgr->lock);
	d->session_ended = true;
	pthread_cond_broadcast(&ctl.mgr->cond);
	if (d->state == MFS_MOUNTED && j) {
		j->kind = JOB_ENDED;
		j->id = d->id;
		enqueue(j);
		j = NULL;
	}
	pthread_mutex_unlock(&ctl.mgr->lock);
	free(j);
}

void mfs_control_manager_ended(void *arg)
{
	struct mfs_manager *mgr = arg;

	pthread_mutex_lock(&mgr->lock);
	mgr->manager_ended = true;
	ctl.stop = true;
	pthread_cond_broadcast(&mgr->cond);
	pthread_cond_signal(&ctl.wake);
	pthread_mutex_unlock(&mgr->lock);
}

/* Wait until *flag (under mgr->lock) or ms elapse. Returns *flag. */
static bool wait_flag(bool *flag, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ctl.mgr->lock);
	while (!*flag)
		if (pthread_cond_timedwait(&ctl.mgr->cond, &ctl.mgr->lock, &ts) == ETIMEDOUT)
			break;
	bool v = *flag;
	pthread_mutex_unlock(&ctl.mgr->lock);
	return v;
}

/*
 * Make sure the session has ended after its mount was (or should have been)
 * removed: wait, then abort the connection, then stop serving it (closing the
 * device then aborts it).
 */
static void end_session(const char *what, bool *ended, unsigned conn, struct mfs_session *sess)
{
	if (wait_flag(ended, END_WAIT_MS))
		return;
	mfs_warn("%s: still in use after unmount, aborting connection %u", what, conn);
	int rc = mfs_conn_abort(conn);
	if (rc)
		mfs_warn("%s: abort connection %u: %s", what, conn, strerror(-rc));
	if (!rc && wait_flag(ended, END_WAIT_MS))
		return;
	mfs_loop_abort(sess);
	wait_flag(ended, 60000);
}

/* Close a session whose connection ended (or that the loop stopped serving). */
static void close_session(struct fuse_session *se)
{
	struct pollfd p = {.fd = fuse_session_fd(se), .events = 0};

	/* fuse_session_unmount frees the mount point and closes the device;
	 * it unmounts again only when the connection is still alive, which
	 * after mfs_loop_abort would hit whatever is now at the path. */
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR))
		fuse_session_unmount(se);
	fuse_session_destroy(se);
}

/* Tear down a mounted DBFS whose session ended. State becomes UNMOUNTED. */
static void finish_dbfs(struct mfs_dbfs *d, const char *reason)
{
	struct mfs_manager *mgr = ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_session *sess = d->sess;
	struct fuse_session *se = d->se;
	struct dbfs *fs = d->fs;
	d->sess = NULL;
	d->se = NULL;
	d->fs = NULL;
	d->state = MFS_UNMOUNTED;
	d->dev = 0;
	snprintf(d->reason, sizeof(d->reason), "%s", reason);
	pthread_mutex_unlock(&mgr->lock);
	if (sess)
		mfs_loop_remove(sess);
	if (se)
		close_session(se);
	if (fs)
		dbfs_close(fs);
	mfs_info("%s: unmounted from %s (%s)", d->conf.name, d->conf.mountpoint, reason);
}

/*
 * Unmount a DBFS in state UNMOUNTING. Without force a busy mount gives
 * -EBUSY and stays mounted; with force it is detached and, if programs keep
 * it alive, its connection aborted.
 */
static int unmount_dbfs(struct mfs_dbfs *d, bool force, const char *reason)
{
	int rc = mfs_unmount_path(d->conf.mountpoint, false);

	if (rc == -EBUSY && !force)
		return -EBUSY;
	if (rc == -EBUSY)
		rc = mfs_unmount_path(d->conf.mountpoint, true);
	if (rc)
		mfs_warn("%s: unmount %s: %s", d->conf.name, d->conf.mountpoint, strerror(-rc));
	end_session(d->conf.name, &d->session_ended, d->conn, d->sess);
	finish_dbfs(d, reason);
	return 0;
}

static void fuse_opts_for(const struct mfs_dbfs *d, bool ro, char *out, size_t cap)
{
	char fsname[2 * PATH_MAX];

	mfs_fuse_opt_escape(fsname, sizeof(fsname), d->conf.store);
	/* As root the DBFS may belong to another user: let the kernel check
	 * permissions for everyone (default_permissions) instead. */
	snprintf(out, cap, "default_permissions,fsname=dbfs:%s,subtype=dbfs%s%s", fsname,
		 geteuid() == 0 || ctl.mgr->allow_other ? ",allow_other" : "", ro ? ",ro" : "");
}

/*
 * Open the store and mount it. `d` is in state MOUNTING and in the list.
 * On success it is MOUNTED; on failure nothing is left open or mounted.
 */
static int mount_dbfs(struct mfs_dbfs *d, bool create, char *err, size_t errlen)
{
	struct mfs_manager *mgr = ctl.mgr;
	struct dbfs_options o;
	struct mfs_limits lim;
	struct dbfs *fs;
	struct fuse_session *se;
	struct mfs_session *sess;
	char opts[3 * PATH_MAX];
	int rc;

	rc = mfs_conf_parse(d->conf.opts, &o, &lim, err, errlen);
	if (rc)
		return rc;
	o.create = create;
	if (o.max_readers && o.max_readers < mfs_loop_workers(mgr->loop) + 8)
		o.max_readers = mfs_loop_workers(mgr->loop) + 8;
	mfs_clean_stale(d->conf.mountpoint);
	rc = dbfs_open(d->conf.store, &o, &fs, err, errlen);
	if (rc)
		return rc;
	fuse_opts_for(d, o.read_only, opts, sizeof(opts));
	rc = mfs_mount_session(dbfs_fuse_ops(), fs, d->conf.mountpoint, opts, &se, err, errlen);
	if (rc) {
		dbfs_close(fs);
		return rc;
	}
	pthread_mutex_lock(&mgr->lock);
	d->session_ended = false;
	d->fs = fs;
	d->se = se;
	pthread_mutex_unlock(&mgr->lock);
	rc = mfs_loop_add(mgr->loop, se, d->conf.name, mfs_control_dbfs_ended, d, &sess);
	if (rc) {
		snprintf(err, errlen, "cannot serve the mount: %.120s", strerror(-rc));
		mfs_unmount_path(d->conf.mountpoint, true);
		fuse_session_destroy(se);
		dbfs_close(fs);
		pthread_mutex_lock(&mgr->lock);
		d->fs = NULL;
		d->se = NULL;
		pthread_mutex_unlock(&mgr->lock);
		return rc;
	}
	mfs_loop_set_limits(sess, &lim);
	/* The new mount's device (its minor is the FUSE connection id): one
	 * getattr that the pool answers, instead of scanning mountinfo. */
	struct stat st;
	dev_t dev = 0;
	if (stat(d->conf.mountpoint, &st) == 0)
		dev = st.st_dev;
	else
		mfs_warn("%s: stat %s: %s", d->conf.name, d->conf.mountpoint, strerror(errno));
	pthread_mutex_lock(&mgr->lock);
	d->dev = dev;
	d->conn = minor(dev) | (major(dev) << 20);
	d->sess = sess;
	d->limits = lim;
	d->quota_bytes = o.quota_bytes;
	d->quota_inodes = o.quota_inodes;
	d->state = MFS_MOUNTED;
	d->reason[0] = '\0';
	d->mounted_at = (uint64_t)time(NULL);
	pthread_mutex_unlock(&mgr->lock);
	mfs_info("%s: mounted %s at %s", d->conf.name, d->conf.store, d->conf.mountpoint);
	return 0;
}

int mfs_control_mount_now(struct mfs_dbfs *d, bool create, char *err, size_t errlen)
{
	pthread_mutex_lock(&ctl.mgr->lock);
	d->state = MFS_MOUNTING;
	link_dbfs(d);
	pthread_mutex_unlock(&ctl.mgr->lock);
	int rc = mount_dbfs(d, create, err, errlen);
	if (rc) {
		pthread_mutex_lock(&ctl.mgr->lock);
		unlink_dbfs(d);
		pthread_mutex_unlock(&ctl.mgr->lock);
	}
	return rc;
}

static int may_control(const struct mfs_caller *who, const struct mfs_dbfs *d)
{
	return who->uid == 0 || who->uid == ctl.mgr->uid || (d && d->conf.owner == who->uid);
}

static void save(struct mfs_dbfs *d)
{
	if (!ctl.mgr->reg)
		return;
	int rc = mfs_registry_put(ctl.mgr->reg, &d->conf, d->id);
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
	if (dev == ctl.mgr->dev)
		return true;
	for (struct mfs_dbfs *d = ctl.mgr->list; d; d = d->next)
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
	int rc = mfs_path_resolve(path, ctl.mgr->dev, out, PATH_MAX);

	if (rc == -ENOTCONN && mfs_clean_stale(out) > 0)
		rc = mfs_path_resolve(path, ctl.mgr->dev, out, PATH_MAX);
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
	pthread_mutex_lock(&ctl.mgr->lock);
	bool inside = ours(st.st_dev);
	pthread_mutex_unlock(&ctl.mgr->lock);
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
		pthread_mutex_lock(&ctl.mgr->lock);
		inside = ours(st.st_dev);
		pthread_mutex_unlock(&ctl.mgr->lock);
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
	pthread_mutex_lock(&ctl.mgr->lock);
	inside = ours(st.st_dev);
	pthread_mutex_unlock(&ctl.mgr->lock);
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
	struct mfs_manager *mgr = ctl.mgr;
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
		link_dbfs(d);
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
		rc = mount_dbfs(d, cmd->create, err, errlen);
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
			unlink_dbfs(d);
			free(d);
		} else {
			d->conf = old;
			d->state = MFS_UNMOUNTED;
		}
		pthread_mutex_unlock(&mgr->lock);
		goto out;
	}
	save(d);
	goto out;
unlock:
	pthread_mutex_unlock(&mgr->lock);
out:
	free(conf);
	return rc;
}

static int exec_unmount(struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_manager *mgr = ctl.mgr;

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
	rc = unmount_dbfs(d, cmd->force, "unmounted by command");
	if (rc == -EBUSY) {
		snprintf(err, errlen, "DBFS %.120s is busy: files are open on %.120s (add force)",
			 d->conf.name, d->conf.mountpoint);
		pthread_mutex_lock(&mgr->lock);
		d->state = MFS_MOUNTED;
		pthread_mutex_unlock(&mgr->lock);
		return rc;
	}
	d->conf.want_mounted = false;
	save(d);
	return 0;
}

static int exec_config(struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_manager *mgr = ctl.mgr;
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
	}
	pthread_mutex_unlock(&mgr->lock);
	save(d);
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
	struct mfs_manager *mgr = ctl.mgr;
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
	unlink_dbfs(d);
	pthread_mutex_unlock(&mgr->lock);
	mfs_info("%s: forgotten (store %s kept)", d->conf.name, d->conf.store);
	free(d);
	return 0;
}

static void run_cmd(struct mfs_cmd *cmd)
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
	answer(cmd, rc, err);
}

static void run_ended(uint32_t id)
{
	struct mfs_manager *mgr = ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	bool go = d && d->state == MFS_MOUNTED && d->session_ended;
	if (go)
		d->state = MFS_UNMOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (!go)
		return;
	finish_dbfs(d, "unmounted outside mfs");
	if (mgr->single) {
		mfs_control_stop();
		return;
	}
	d->conf.want_mounted = false;
	save(d);
}

static void run_remount(uint32_t id)
{
	struct mfs_manager *mgr = ctl.mgr;
	char err[512] = "";

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	bool go = d && d->state == MFS_MOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (!go)
		return;
	struct stat st;
	int rc = 0;
	if (stat(d->conf.mountpoint, &st) < 0 && errno == ENOTCONN)
		rc = mfs_clean_stale(d->conf.mountpoint) < 0 ? -EBUSY : 0;
	if (rc)
		snprintf(err, sizeof(err), "stale mount at %.120s cannot be removed",
			 d->conf.mountpoint);
	else
		rc = mount_dbfs(d, false, err, sizeof(err));
	if (rc) {
		mfs_err("%s: re-mount failed: %s", d->conf.name, err);
		pthread_mutex_lock(&mgr->lock);
		d->state = MFS_FAILED;
		snprintf(d->reason, sizeof(d->reason), "%s", err);
		pthread_mutex_unlock(&mgr->lock);
	}
}

static int load_one(void *arg, const struct mfs_conf *c, uint32_t id)
{
	struct mfs_manager *mgr = arg;
	struct mfs_dbfs *d = calloc(1, sizeof(*d));
	struct job *j = calloc(1, sizeof(*j));

	if (!d || !j) {
		free(d);
		free(j);
		return -ENOMEM;
	}
	d->conf = *c;
	d->id = id;
	pthread_mutex_lock(&mgr->lock);
	if (id >= mgr->next_id)
		mgr->next_id = id + 1;
	d->state = c->want_mounted ? MFS_MOUNTING : MFS_UNMOUNTED;
	link_dbfs(d);
	if (c->want_mounted) {
		j->kind = JOB_REMOUNT;
		j->id = id;
		enqueue(j);
		j = NULL;
	}
	pthread_mutex_unlock(&mgr->lock);
	free(j);
	return 0;
}

int mfs_control_load(void)
{
	struct mfs_manager *mgr = ctl.mgr;

	/* ids must stay unique across restarts: registry ids are kept */
	if (mgr->next_id == 0)
		mgr->next_id = 1;
	return mfs_registry_load(mgr->reg, load_one, mgr);
}

static void stop_all(void)
{
	struct mfs_manager *mgr = ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	ctl.stopping = true;
	struct job *jobs = ctl.head;
	ctl.head = ctl.tail = NULL;
	pthread_mutex_unlock(&mgr->lock);
	while (jobs) {
		struct job *j = jobs;
		jobs = j->next;
		if (j->kind == JOB_CMD) {
			answer(j->cmd, -ESHUTDOWN, "mfs is stopping");
			free(j->cmd);
		}
		free(j);
	}
	mfs_info("stopping: unmounting every DBFS");
	for (;;) {
		pthread_mutex_lock(&mgr->lock);
		struct mfs_dbfs *d = mgr->list;
		while (d && d->state != MFS_MOUNTED)
			d = d->next;
		if (d)
			d->state = MFS_UNMOUNTING;
		pthread_mutex_unlock(&mgr->lock);
		if (!d)
			break;
		unmount_dbfs(d, true, "mfs stopped");
	}
	if (mgr->se) {
		if (!mgr->manager_ended) {
			int rc = mfs_unmount_path(mgr->mountpoint, true);
			if (rc)
				mfs_warn("unmount %s: %s", mgr->mountpoint, strerror(-rc));
		}
		dev_t dev = mgr->dev;
		end_session("manager", &mgr->manager_ended, minor(dev) | (major(dev) << 20),
			    mgr->sess);
		mfs_loop_remove(mgr->sess);
		close_session(mgr->se);
		mgr->se = NULL;
		mgr->sess = NULL;
	}
	/* free the list */
	pthread_mutex_lock(&mgr->lock);
	while (mgr->list) {
		struct mfs_dbfs *d = mgr->list;
		mgr->list = d->next;
		free(d);
	}
	pthread_mutex_unlock(&mgr->lock);
}

int mfs_control_run(void)
{
	struct mfs_manager *mgr = ctl.mgr;

	for (;;) {
		pthread_mutex_lock(&mgr->lock);
		while (!ctl.head && !ctl.stop)
			pthread_cond_wait(&ctl.wake, &mgr->lock);
		if (ctl.stop) {
			pthread_mutex_unlock(&mgr->lock);
			break;
		}
		struct job *j = ctl.head;
		ctl.head = j->next;
		if (!ctl.head)
			ctl.tail = NULL;
		pthread_mutex_unlock(&mgr->lock);
		switch (j->kind) {
		case JOB_CMD:
			run_cmd(j->cmd);
			free(j->cmd);
			break;
		case JOB_ENDED:
			run_ended(j->id);
			break;
		case JOB_REMOUNT:
			run_remount(j->id);
			break;
		}
		free(j);
	}
	stop_all();
	return 0;
}
