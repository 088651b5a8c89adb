/*
 * Mounting and unmounting one DBFS (see control_private.h): open its store,
 * serve it, and take it down again, also when programs hold files open.
 * Control thread only.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fuse_lowlevel.h>

#include "conf.h"
#include "control.h"
#include "control_private.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "uring.h"

/* How long an unmounted session may take to end before the next, harder step
 * (lazy unmount -> connection abort -> closing the device). */
#define END_WAIT_MS 1500

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
	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	while (!*flag)
		if (pthread_cond_timedwait(&mfs_ctl.mgr->cond, &mfs_ctl.mgr->lock, &ts) == ETIMEDOUT)
			break;
	bool v = *flag;
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
	return v;
}

/*
 * Make sure the session has ended after its mount was (or should have been)
 * removed: wait, then abort the connection, then stop serving it (closing the
 * device then aborts it).
 */
void mfs_session_stop(const char *what, bool *ended, unsigned conn, struct mfs_session *sess)
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
	/* on_end comes once its last request finished: closing the store
	 * before that would pull it from under a worker, so wait for it */
	while (!wait_flag(ended, 10000))
		mfs_warn("%s: a request is still running, waiting for it", what);
}

/* Close a session whose connection ended (or that the loop stopped serving). */
void mfs_session_close(struct fuse_session *se)
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
void mfs_dbfs_finish(struct mfs_dbfs *d, const char *reason)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_session *sess = d->sess;
	struct fuse_session *se = d->se;
	struct mfs_uring_sess *ring = d->ring;
	struct dbfs *fs = d->fs;
	d->sess = NULL;
	d->se = NULL;
	d->ring = NULL;
	d->fs = NULL;
	d->state = MFS_UNMOUNTED;
	d->dev = 0;
	snprintf(d->reason, sizeof(d->reason), "%s", reason);
	mfs_cache_rebalance();
	pthread_mutex_unlock(&mgr->lock);
	mfs_uring_detach(ring); /* before the loop session and se go */
	if (sess)
		mfs_loop_remove(sess);
	if (se)
		mfs_session_close(se);
	if (fs)
		dbfs_close(fs);
	mfs_info("%s: unmounted from %s (%s)", d->conf.name, d->conf.mountpoint, reason);
}

/*
 * Unmount a DBFS in state UNMOUNTING. Without force a busy mount gives
 * -EBUSY and stays mounted; with force it is detached and, if programs keep
 * it alive, its connection aborted.
 */
int mfs_dbfs_unmount(struct mfs_dbfs *d, bool force, const char *reason)
{
	int rc = mfs_unmount_path(d->conf.mountpoint, false);

	if (rc == -EBUSY && !force)
		return -EBUSY;
	if (rc == -EBUSY)
		rc = mfs_unmount_path(d->conf.mountpoint, true);
	if (rc)
		mfs_warn("%s: unmount %s: %s", d->conf.name, d->conf.mountpoint, strerror(-rc));
	mfs_session_stop(d->conf.name, &d->session_ended, d->conn, d->sess);
	mfs_dbfs_finish(d, reason);
	return 0;
}

/* A DBFS request that came over an io_uring queue (uring.h). */
static void received(void *fs, const void *buf, size_t len)
{
	dbfs_io_received(fs, buf, len);
}

static void fuse_opts_for(const struct mfs_dbfs *d, bool ro, char *out, size_t cap)
{
	char fsname[2 * PATH_MAX];

	mfs_fuse_opt_escape(fsname, sizeof(fsname), d->conf.store);
	/* As root the DBFS may belong to another user: let the kernel check
	 * permissions for everyone (default_permissions) instead. */
	snprintf(out, cap, "default_permissions,fsname=dbfs:%s,subtype=dbfs%s%s", fsname,
		 geteuid() == 0 || mfs_ctl.mgr->allow_other ? ",allow_other" : "", ro ? ",ro" : "");
}

/*
 * Open the store and mount it. `d` is in state MOUNTING and in the list.
 * On success it is MOUNTED; on failure nothing is left open or mounted.
 */
int mfs_dbfs_mount(struct mfs_dbfs *d, bool create, char *err, size_t errlen)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
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
	const struct fuse_custom_io *io = mgr->uring ? mfs_uring_io(mgr->uring) : dbfs_fuse_io();
	rc = mfs_mount_session(dbfs_fuse_ops(), io, fs, d->conf.mountpoint, opts, DBFS_READ_AHEAD,
			       &se, err, errlen);
	if (rc) {
		dbfs_close(fs);
		return rc;
	}
	struct mfs_uring_sess *ring = NULL;
	if (mgr->uring && mfs_uring_attach(mgr->uring, se, received, fs, &ring))
		mfs_warn("%s: no memory for io_uring queues: served over /dev/fuse", d->conf.name);
	dbfs_set_session(fs, se);
	dbfs_set_cache_callback(fs, mfs_cache_over, d);
	pthread_mutex_lock(&mgr->lock);
	d->session_ended = false;
	d->fs = fs;
	d->se = se;
	d->ring = ring;
	pthread_mutex_unlock(&mgr->lock);
	rc = mfs_loop_add(mgr->loop, se, d->conf.name, mfs_control_dbfs_ended, d, &sess);
	if (rc) {
		snprintf(err, errlen, "cannot serve the mount: %.120s", strerror(-rc));
		mfs_unmount_path(d->conf.mountpoint, true);
		mfs_uring_detach(ring);
		fuse_session_destroy(se);
		dbfs_close(fs);
		pthread_mutex_lock(&mgr->lock);
		d->fs = NULL;
		d->se = NULL;
		d->ring = NULL;
		pthread_mutex_unlock(&mgr->lock);
		return rc;
	}
	mfs_loop_set_limits(sess, &lim);
	if (ring)
		mfs_uring_bind(ring, sess);
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
	d->cache_mem = o.cache_limit;
	d->cache_limit = o.cache_limit; /* dbfs_open applied it */
	d->state = MFS_MOUNTED;
	d->reason[0] = '\0';
	d->mounted_at = (uint64_t)time(NULL);
	mfs_cache_rebalance();
	pthread_mutex_unlock(&mgr->lock);
	mfs_info("%s: mounted %s at %s", d->conf.name, d->conf.store, d->conf.mountpoint);
	return 0;
}
