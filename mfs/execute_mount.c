/*
 * Executing the mount verb (see execute.h): settle the configuration, check
 * it, claim the name, bring the DBFS up, register it; undo the claim when
 * bringing it up fails, and the mount too when registering it fails.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "conf.h"
#include "dbfs_mount.h"
#include "dbfs_unmount.h"
#include "execute.h"
#include "kv.h"
#include "log.h"
#include "registry.h"
#include "as_caller.h"
#include "user_limits.h"
#include "validate.h"

/* The registered configuration of cmd's DBFS (*d, NULL when new) with the
 * given paths over it, into conf. mgr->lock held. */
static int take_registered(struct mfs_manager *mgr, const struct mfs_cmd *cmd,
			   struct mfs_conf *conf, struct mfs_dbfs **d, char *err, size_t errlen)
{
	*d = mfs_find(mgr, cmd->name);
	if (*d && (*d)->state != MFS_UNMOUNTED && (*d)->state != MFS_FAILED) {
		snprintf(err, errlen, "DBFS %.120s is already %.120s", (*d)->conf.name,
			 mfs_state_name((*d)->state));
		return -EEXIST;
	}
	if (*d) {
		int rc = mfs_check_control(mgr, &cmd->who, *d, err, errlen);
		if (rc)
			return rc;
		*conf = (*d)->conf;
	} else {
		snprintf(conf->name, sizeof(conf->name), "%s", cmd->name);
		conf->owner = cmd->who.uid;
	}
	if (cmd->store[0])
		snprintf(conf->store, sizeof(conf->store), "%s", cmd->store);
	if (cmd->mountpoint[0])
		snprintf(conf->mountpoint, sizeof(conf->mountpoint), "%s", cmd->mountpoint);
	return 0;
}

/* Both paths known, the given options over the registered ones key by key,
 * the result valid; *ro tells whether it mounts read-only. */
static int settle_options(struct mfs_conf *conf, const struct mfs_cmd *cmd, bool *ro, char *err,
			  size_t errlen)
{
	int rc = 0;

	if (!conf->store[0])
		return (snprintf(err, errlen, "missing key 'store'"), -EINVAL);
	if (!conf->mountpoint[0])
		return (snprintf(err, errlen, "missing key 'mountpoint'"), -EINVAL);
	if (cmd->opts[0]) {
		struct mfs_kvlist l;
		rc = mfs_kv_parse(cmd->opts, strlen(cmd->opts), 0, &l, err, errlen);
		if (rc)
			return rc;
		for (size_t i = 0; !rc && i < l.n; i++)
			rc = mfs_conf_set(conf->opts, sizeof(conf->opts), l.items[i].key,
					  l.items[i].value);
		if (rc) {
			snprintf(err, errlen, "%s",
				 rc == -ENOMEM ? "out of memory" : "options too long");
			rc = rc == -ENOMEM ? -ENOMEM : -EINVAL;
		}
		mfs_kv_free(&l);
		if (rc)
			return rc;
	}
	struct dbfs_options o;
	struct mfs_limits lim;
	rc = mfs_conf_parse(conf->opts, &o, &lim, err, errlen);
	if (!rc)
		*ro = o.read_only;
	return rc;
}

/* The owner's per-user limits (user_limits.h) allow conf for d (NULL: a new
 * DBFS)? Takes mgr->lock. */
static int check_user_limits(struct mfs_manager *mgr, const struct mfs_conf *conf,
			     const struct mfs_dbfs *d, char *err, size_t errlen)
{
	struct dbfs_options o;
	struct mfs_limits lim;
	int rc = mfs_conf_parse(conf->opts, &o, &lim, err, errlen);

	if (rc)
		return rc;
	pthread_mutex_lock(&mgr->lock);
	rc = mfs_user_limits_check(&mgr->user_limits, mgr->list, conf->owner, mgr->uid, d,
				   o.quota_bytes, o.quota_inodes, err, errlen);
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

/* Claim the name for conf: d (*d, or a new entry linked in the list, *fresh)
 * becomes MOUNTING with conf; its previous configuration is kept in old. */
static int claim(struct mfs_manager *mgr, const struct mfs_cmd *cmd, const struct mfs_conf *conf,
		 struct mfs_dbfs **d, bool *fresh, struct mfs_conf *old, char *err, size_t errlen)
{
	pthread_mutex_lock(&mgr->lock);
	int rc = mfs_check_conflicts(mgr, *d, cmd->name, conf, err, errlen);
	if (rc)
		goto unlock;
	*fresh = !*d;
	if (*d) {
		*old = (*d)->conf;
	} else {
		*d = calloc(1, sizeof(**d));
		if (!*d) {
			rc = -ENOMEM;
			goto unlock;
		}
		(*d)->id = mgr->next_id++;
		(*d)->conf = *conf;
		mfs_dbfs_link(mgr, *d);
	}
	(*d)->conf = *conf;
	(*d)->conf.want_mounted = true;
	(*d)->state = MFS_MOUNTING;
	(*d)->reason[0] = '\0';
unlock:
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

/* Undo claim: drop a new entry, or give an old one back its configuration. */
static void release(struct mfs_manager *mgr, struct mfs_dbfs *d, bool fresh,
		    const struct mfs_conf *old)
{
	pthread_mutex_lock(&mgr->lock);
	if (fresh) {
		mfs_dbfs_unlink(mgr, d);
		free(d);
	} else {
		d->conf = *old;
		d->state = MFS_UNMOUNTED;
	}
	pthread_mutex_unlock(&mgr->lock);
}

/* Make the store directory in its held parent as the caller (so it is
 * theirs, and the kernel checks that they may), and hold it. */
static int make_store(const struct mfs_caller *who, struct mfs_held *h, char *err, size_t errlen)
{
	struct mfs_as as;
	int rc = mfs_as_begin(who, &as);

	if (!rc) {
		rc = mkdirat(h->dirfd, h->name, 0700) < 0 ? -errno : 0;
		mfs_as_end(&as);
	}
	if (rc) {
		snprintf(err, errlen, "cannot create store %.120s: %.120s", h->path, strerror(-rc));
		return rc;
	}
	rc = mfs_held_reopen(h);
	if (rc) {
		snprintf(err, errlen, "cannot open new store %.120s: %.120s", h->path,
			 strerror(-rc));
		unlinkat(h->dirfd, h->name, AT_REMOVEDIR);
	}
	return rc;
}

/* Remove the store directory this command made, and what an open that
 * failed may have left in it; a directory with anything else stays. */
static void remove_new_store(struct mfs_held *h)
{
	int fd = h->fd >= 0 ? openat(h->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;

	if (!dir && fd >= 0)
		close(fd);
	for (struct dirent *e; dir && (e = readdir(dir));)
		if (dbfs_is_store_file(e->d_name))
			unlinkat(h->fd, e->d_name, 0);
	if (dir)
		closedir(dir);
	if (unlinkat(h->dirfd, h->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		mfs_warn("cannot remove the new store %s: %s", h->path, strerror(errno));
}

/* A store formatted for another user: its (empty) root is theirs. The root
 * is reached through the held mount point parent: the mount just made. */
static void give_root(const struct mfs_cmd *cmd, const struct mfs_dbfs *d)
{
	struct stat rst;

	if (cmd->who.uid == geteuid() || !d->held)
		return;
	int fd = openat(d->mp_dirfd, d->mp_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &rst) == 0 && rst.st_uid == geteuid() && mfs_held_dir_empty(fd) &&
	    fchown(fd, cmd->who.uid, cmd->who.gid) < 0)
		mfs_warn("%s: chown of its root: %s", d->conf.name, strerror(errno));
	close(fd);
}

/* Create the store when asked, mount d; a store made here goes again when
 * the mount fails. */
static int bring_up(struct mfs_manager *mgr, const struct mfs_cmd *cmd, struct mfs_dbfs *d,
		    struct mfs_mount_paths *p, char *err, size_t errlen)
{
	int rc = p->mkstore ? make_store(&cmd->who, &p->store, err, errlen) : 0;

	if (!rc)
		rc = mfs_dbfs_mount(mgr, d, &cmd->who, p, cmd->create, err, errlen);
	if (!rc && cmd->create)
		give_root(cmd, d);
	if (rc && p->mkstore)
		remove_new_store(&p->store);
	return rc;
}

/*
 * Record mounted d in the registry. When that fails, take the mount down
 * again, and the store this command made: a mount that a restart would not
 * bring back (or a DBFS it would not know) is not made. The mount is
 * recorded after it is made, not before, so that undoing either never
 * needs a second write to the registry, which could fail as well.
 */
static int record(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_mount_paths *p,
		  char *err, size_t errlen)
{
	int rc = mfs_registry_record(mgr->reg, &d->conf, d->id, err, errlen);

	if (!rc)
		return 0;
	if (p->mkstore && p->store.fd < 0 && d->held) /* d took it over */
		p->store.fd = fcntl(d->store_fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_lock(&mgr->lock);
	d->state = MFS_UNMOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	mfs_dbfs_unmount(mgr, d, true, "its mount could not be recorded in the registry");
	if (p->mkstore)
		remove_new_store(&p->store);
	return rc;
}

int mfs_execute_mount(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	struct mfs_conf *conf = calloc(1, sizeof(*conf));
	struct mfs_conf old;
	struct mfs_dbfs *d;
	struct mfs_mount_paths paths = MFS_MOUNT_PATHS_INIT;
	bool ro = false, fresh = false;
	int rc;

	if (!conf)
		return -ENOMEM;
	pthread_mutex_lock(&mgr->lock);
	rc = take_registered(mgr, cmd, conf, &d, err, errlen);
	pthread_mutex_unlock(&mgr->lock);
	if (!rc)
		rc = settle_options(conf, cmd, &ro, err, errlen);
	if (!rc)
		rc = mfs_check_paths(mgr, &cmd->who, conf->store, conf->mountpoint, cmd->create, ro,
				     &paths, err, errlen);
	if (!rc)
		rc = check_user_limits(mgr, conf, d, err, errlen);
	if (!rc)
		rc = claim(mgr, cmd, conf, &d, &fresh, &old, err, errlen);
	if (rc)
		goto out;
	rc = bring_up(mgr, cmd, d, &paths, err, errlen);
	if (!rc)
		rc = record(mgr, d, &paths, err, errlen);
	if (rc)
		release(mgr, d, fresh, &old);
out:
	mfs_mount_paths_release(&paths);
	free(conf);
	return rc;
}
