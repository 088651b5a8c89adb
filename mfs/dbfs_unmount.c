/* Taking one DBFS down (see dbfs_unmount.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fuse_lowlevel.h>

#include "cache_budget.h"
#include "dbfs_unmount.h"
#include "feed_fs.h"
#include "flusher.h"
#include "inbox.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "uring.h"

/* How long an unmounted session may take to end before the next, harder step
 * (lazy unmount -> connection abort -> closing the device). */
#define END_WAIT_MS 1500

/* Wait until *flag (under mgr->lock) or ms elapse. Returns *flag. */
static bool wait_flag(struct mfs_manager *mgr, bool *flag, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&mgr->lock);
	while (!*flag)
		if (pthread_cond_timedwait(&mgr->cond, &mgr->lock, &ts) == ETIMEDOUT)
			break;
	bool v = *flag;
	pthread_mutex_unlock(&mgr->lock);
	return v;
}

void mfs_session_stop(struct mfs_manager *mgr, const char *what, bool *ended, unsigned conn,
		      struct mfs_session *sess)
{
	if (wait_flag(mgr, ended, END_WAIT_MS))
		return;
	mfs_warn("%s: still in use after unmount, aborting connection %u", what, conn);
	int rc = mfs_conn_abort(conn);
	if (rc)
		mfs_warn("%s: abort connection %u: %s", what, conn, strerror(-rc));
	if (!rc && wait_flag(mgr, ended, END_WAIT_MS))
		return;
	mfs_loop_abort(sess);
	/* on_end comes once its last request finished: closing the store
	 * before that would pull it from under a worker, so wait for it */
	while (!wait_flag(mgr, ended, 10000))
		mfs_warn("%s: a request is still running, waiting for it", what);
}

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

void mfs_dbfs_finish(struct mfs_manager *mgr, struct mfs_dbfs *d, const char *reason)
{
	pthread_mutex_lock(&mgr->lock);
	struct mfs_session *sess = d->sess;
	struct fuse_session *se = d->se;
	struct mfs_uring_sess *ring = d->ring;
	struct dbfs *fs = d->fs;
	bool held = d->held;
	int mp_dirfd = d->mp_dirfd, store_fd = d->store_fd;
	d->held = false;
	d->sess = NULL;
	d->se = NULL;
	d->ring = NULL;
	d->fs = NULL;
	d->state = MFS_UNMOUNTED;
	d->dev = 0;
	snprintf(d->reason, sizeof(d->reason), "%s", reason);
	mfs_cache_rebalance(mgr);
	mfs_dbfs_wait_unpinned(mgr, d); /* a status reader still using fs */
	pthread_mutex_unlock(&mgr->lock);
	/* No longer MOUNTED: nothing posts for it now. A flusher may be in its
	 * tick, which reaches its session (the cache trim): wait for it, and
	 * for the syncs queued, before anything goes. */
	if (fs)
		mfs_flusher_forget(fs);
	mfs_uring_detach(ring); /* before the loop session and se go */
	if (sess)
		mfs_loop_remove(sess);
	if (se && fs)
		dbfs_set_session(fs, NULL); /* its expiry thread tells the kernel no more */
	if (se)
		mfs_session_close(se);
	if (fs) {
		mfs_feed_detach(fs); /* its feed readers, before the store goes */
		dbfs_close(fs);
	}
	if (held) { /* the store was open through store_fd: closed after it */
		close(mp_dirfd);
		close(store_fd);
	}
	mfs_info("%s: unmounted from %s (%s)", d->conf.name, d->conf.mountpoint, reason);
}

int mfs_dbfs_unmount(struct mfs_manager *mgr, struct mfs_dbfs *d, bool force, const char *reason)
{
	/* the mount this DBFS made, by its identity: never what the path
	 * leads to now (a user may have swapped its components) */
	int rc = d->held ? mfs_unmount_held(d->mp_dirfd, d->mp_name, d->mnt_id, false) : -ENOENT;

	if (rc == -EBUSY && !force)
		return -EBUSY;
	if (rc == -EBUSY)
		rc = mfs_unmount_held(d->mp_dirfd, d->mp_name, d->mnt_id, true);
	if (rc == -ENOENT)
		mfs_warn("%s: its mount is no longer at %s: nothing else is unmounted",
			 d->conf.name, d->conf.mountpoint);
	else if (rc)
		mfs_warn("%s: unmount %s: %s", d->conf.name, d->conf.mountpoint, strerror(-rc));
	mfs_session_stop(mgr, d->conf.name, &d->session_ended, d->conn, d->sess);
	mfs_dbfs_finish(mgr, d, reason);
	return 0;
}

void mfs_dbfs_gone(struct mfs_manager *mgr, uint32_t id)
{
	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	bool go = d && d->state == MFS_MOUNTED && d->session_ended;
	if (go)
		d->state = MFS_UNMOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (!go)
		return;
	mfs_dbfs_finish(mgr, d, "unmounted outside mfs");
	if (mgr->single) {
		mfs_inbox_stop();
		return;
	}
	d->conf.want_mounted = false;
	mfs_dbfs_save(mgr, d);
}
