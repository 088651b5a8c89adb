/* Bringing one DBFS up (see dbfs_mount.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fuse_lowlevel.h>

#include "cache_budget.h"
#include "conf.h"
#include "dbfs_mount.h"
#include "inbox.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "uring.h"

/* A DBFS request that came over an io_uring queue (uring.h). */
static void received(void *fs, const void *buf, size_t len)
{
	dbfs_io_received(fs, buf, len);
}

static void fuse_opts_for(struct mfs_manager *mgr, const struct mfs_dbfs *d, bool ro, char *out,
			  size_t cap)
{
	char fsname[2 * PATH_MAX];

	mfs_fuse_opt_escape(fsname, sizeof(fsname), d->conf.store);
	/* As root the DBFS may belong to another user: let the kernel check
	 * permissions for everyone (default_permissions) instead. */
	snprintf(out, cap, "default_permissions,fsname=dbfs:%s,subtype=dbfs%s%s", fsname,
		 geteuid() == 0 || mgr->allow_other ? ",allow_other" : "", ro ? ",ro" : "");
}

/* Record that d is mounted and served by sess. */
static void publish_mounted(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_session *sess,
			    const struct dbfs_options *o, const struct mfs_limits *lim)
{
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
	d->limits = *lim;
	d->quota_bytes = o->quota_bytes;
	d->quota_inodes = o->quota_inodes;
	d->cache_mem = o->cache_limit;
	d->cache_limit = o->cache_limit; /* dbfs_open applied it */
	d->state = MFS_MOUNTED;
	d->reason[0] = '\0';
	d->mounted_at = (uint64_t)time(NULL);
	mfs_cache_rebalance(mgr);
	pthread_mutex_unlock(&mgr->lock);
}

int mfs_dbfs_mount(struct mfs_manager *mgr, struct mfs_dbfs *d, bool create, char *err,
		   size_t errlen)
{
	struct dbfs_options o;
	struct mfs_limits lim;
	struct dbfs *fs;
	struct fuse_session *se;
	struct mfs_session *sess;
	struct mfs_uring_sess *ring = NULL;
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
	fuse_opts_for(mgr, d, o.read_only, opts, sizeof(opts));
	const struct fuse_custom_io *io = mgr->uring ? mfs_uring_io(mgr->uring) : dbfs_fuse_io();
	rc = mfs_mount_session(dbfs_fuse_ops(), io, fs, d->conf.mountpoint, opts, DBFS_READ_AHEAD,
			       &se, err, errlen);
	if (rc)
		goto close_store;
	if (mgr->uring && mfs_uring_attach(mgr->uring, se, received, fs, &ring))
		mfs_warn("%s: no memory for io_uring queues: served over /dev/fuse", d->conf.name);
	dbfs_set_session(fs, se);
	dbfs_set_cache_callback(fs, mfs_inbox_cache_over, d);
	pthread_mutex_lock(&mgr->lock);
	d->session_ended = false;
	d->fs = fs;
	d->se = se;
	d->ring = ring;
	pthread_mutex_unlock(&mgr->lock);
	rc = mfs_loop_add(mgr->loop, se, d->conf.name, mfs_inbox_dbfs_ended, d, &sess);
	if (rc) {
		snprintf(err, errlen, "cannot serve the mount: %.120s", strerror(-rc));
		goto unpublish;
	}
	mfs_loop_set_limits(sess, &lim);
	if (ring)
		mfs_uring_bind(ring, sess);
	publish_mounted(mgr, d, sess, &o, &lim);
	mfs_info("%s: mounted %s at %s", d->conf.name, d->conf.store, d->conf.mountpoint);
	return 0;

unpublish:
	/* still MOUNTING: no reader used these pointers */
	pthread_mutex_lock(&mgr->lock);
	d->fs = NULL;
	d->se = NULL;
	d->ring = NULL;
	pthread_mutex_unlock(&mgr->lock);
	mfs_unmount_path(d->conf.mountpoint, true);
	mfs_uring_detach(ring);
	fuse_session_destroy(se);
close_store:
	dbfs_close(fs);
	return rc;
}
