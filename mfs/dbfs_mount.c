/* Bringing one DBFS up (see dbfs_mount.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fuse_lowlevel.h>

#include "cache_budget.h"
#include "conf.h"
#include "as_caller.h"
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

/* Record that d is mounted and served by sess, from the held paths (taken
 * over by d). */
static void publish_mounted(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_session *sess,
			    struct mfs_mount_paths *p, uint64_t mnt_id, dev_t dev,
			    const struct dbfs_options *o, const struct mfs_limits *lim)
{
	pthread_mutex_lock(&mgr->lock);
	d->held = true;
	d->mp_dirfd = p->mp.dirfd;
	snprintf(d->mp_name, sizeof(d->mp_name), "%s", p->mp.name);
	d->store_fd = p->store.fd;
	p->mp.dirfd = p->store.fd = -1;
	d->mnt_id = mnt_id;
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

/*
 * Stores that an mfs before this one made for a user hold files that belong
 * to the daemon (root), which the user could not open now that stores are
 * opened as their owner: give them to the user whose directory holds them.
 * Only a regular file with one link, reached without following a symlink,
 * in a store directory that `who` owns, is given.
 */
static void adopt_store_files(const struct mfs_caller *who, int store_fd, const char *name)
{
	struct stat dir, st;

	if (geteuid() != 0 || who->uid == 0 || fstat(store_fd, &dir) < 0 || dir.st_uid != who->uid)
		return;
	int dfd = openat(store_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own offset */
	DIR *list = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!list) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	for (struct dirent *e; (e = readdir(list));) {
		const char *file = e->d_name;
		if (!dbfs_is_store_file(file))
			continue;
		int fd = openat(store_fd, file, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
		    st.st_uid == 0) {
			if (fchownat(fd, "", who->uid, who->gid, AT_EMPTY_PATH) < 0)
				mfs_warn("%s: cannot give %s to uid %u: %s", name, file,
					 (unsigned)who->uid, strerror(errno));
			else
				mfs_info("%s: %s now belongs to its owner, uid %u", name, file,
					 (unsigned)who->uid);
		}
		close(fd);
	}
	closedir(list);
}

/* Open the held store directory as `who`: the kernel checks the caller's
 * access to data.mdb and lock.mdb, and what is created is the caller's. */
static int open_store(const struct mfs_caller *who, int store_fd, const struct dbfs_options *o,
		      struct dbfs **fs, char *err, size_t errlen)
{
	char dir[64];
	struct mfs_as as;
	int rc = mfs_as_begin(who, &as);

	if (rc) {
		snprintf(err, errlen, "cannot act as uid %u: %s", (unsigned)who->uid,
			 strerror(-rc));
		return rc;
	}
	mfs_fd_path(store_fd, dir, sizeof(dir));
	rc = dbfs_open(dir, o, fs, err, errlen);
	mfs_as_end(&as);
	return rc;
}

int mfs_dbfs_mount(struct mfs_manager *mgr, struct mfs_dbfs *d, const struct mfs_caller *who,
		   struct mfs_mount_paths *p, bool create, char *err, size_t errlen)
{
	struct dbfs_options o;
	struct mfs_limits lim;
	struct dbfs *fs;
	struct fuse_session *se;
	struct mfs_session *sess;
	struct mfs_uring_sess *ring = NULL;
	char opts[3 * PATH_MAX], target[PATH_MAX];
	uint64_t mnt_id = 0;
	dev_t dev = 0;
	int rc;

	rc = mfs_conf_parse(d->conf.opts, &o, &lim, err, errlen);
	if (rc)
		return rc;
	o.create = create;
	if (o.max_readers && o.max_readers < mfs_loop_workers(mgr->loop) + 8)
		o.max_readers = mfs_loop_workers(mgr->loop) + 8;
	adopt_store_files(who, p->store.fd, d->conf.name);
	rc = open_store(who, p->store.fd, &o, &fs, err, errlen);
	if (rc)
		return rc;
	fuse_opts_for(mgr, d, o.read_only, opts, sizeof(opts));
	/* Mount on the held directory itself; fusermount3 (not root) checks
	 * the path again on its own, for the daemon's user. */
	if (geteuid() == 0)
		mfs_fd_path(p->mp.fd, target, sizeof(target));
	else
		snprintf(target, sizeof(target), "%s", p->mp.path);
	/* A shared store's close may be answered after its handler returned
	 * (dbfs/shared_barrier.c), which a ring entry cannot wait for: it
	 * goes back with its reply, and with one entry per CPU a close that
	 * waits for the other processes in its handler holds every request
	 * of the DBFS on that CPU behind it, while those processes'
	 * invalidations may wait for one of them (most closes of
	 * t_shared_cycle timed out so). Shared stores use /dev/fuse. */
	bool rings = mgr->uring && !o.shared;
	const struct fuse_custom_io *io =
	    rings ? mfs_uring_io(mgr->uring) : mfs_loop_io(dbfs_fuse_io());
	rc = mfs_mount_session(dbfs_fuse_ops(), io, fs, target, opts, 0, &se, err, errlen);
	if (rc)
		goto close_store;
	/* the mount's identity, without a request to it (nobody serves it yet) */
	rc = mfs_mount_id_at(p->mp.dirfd, p->mp.name, &mnt_id, &dev);
	if (rc) {
		snprintf(err, errlen, "cannot identify the new mount at %.120s: %s", p->mp.path,
			 strerror(-rc));
		fuse_session_unmount(se);
		fuse_session_destroy(se);
		goto close_store;
	}
	mfs_mount_set_read_ahead(dev, DBFS_READ_AHEAD);
	if (rings && mfs_uring_attach(mgr->uring, se, received, fs, &ring))
		mfs_warn("%s: no memory for io_uring queues: served over /dev/fuse", d->conf.name);
	dbfs_set_session(fs, se);
	dbfs_set_cache_callback(fs, mfs_inbox_cache_over, d);
	dbfs_set_point_callback(fs, mfs_inbox_point_due, d);
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
	publish_mounted(mgr, d, sess, p, mnt_id, dev, &o, &lim);
	mfs_info("%s: mounted %s at %s", d->conf.name, d->conf.store, d->conf.mountpoint);
	return 0;

unpublish:
	/* still MOUNTING: no reader used these pointers */
	pthread_mutex_lock(&mgr->lock);
	d->fs = NULL;
	d->se = NULL;
	d->ring = NULL;
	pthread_mutex_unlock(&mgr->lock);
	mfs_unmount_held(p->mp.dirfd, p->mp.name, mnt_id, true);
	mfs_uring_detach(ring);
	dbfs_set_session(fs, NULL); /* before se goes (dbfs's expiry thread) */
	/* fuse_session_unmount frees libfuse's copy of the mount point (and
	 * unmounts nothing more: libfuse sees the connection is gone) */
	fuse_session_unmount(se);
	fuse_session_destroy(se);
close_store:
	dbfs_close(fs);
	return rc;
}
