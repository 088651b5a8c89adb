/* Mount mechanics (see mount.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "mount.h"
#include "path.h"

void mfs_fuse_opt_escape(char *out, size_t outlen, const char *s)
{
	size_t p = 0;

	for (; *s && p + 2 < outlen; s++) {
		if (*s == ',' || *s == '\\')
			out[p++] = '\\';
		out[p++] = *s;
	}
	out[p] = '\0';
}

/*
 * The kernel gives a FUSE mount the default readahead (128 KiB) whatever
 * the file system offers in its INIT reply, so a sequential reader costs
 * one request per 128 KiB. The mount's bdi takes a larger window from
 * root. statx with AT_STATX_DONT_SYNC gives the mount's device without a
 * request to the file system (which nobody serves yet).
 */
void mfs_mount_set_read_ahead(dev_t dev, unsigned bytes)
{
	char path[96], val[16];
	const char *mnt = path;

	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		mfs_debug("%s: cannot set readahead (%s): %s", mnt, path, strerror(errno));
		return;
	}
	int n = snprintf(val, sizeof(val), "%u", bytes >> 10);
	if (write(fd, val, (size_t)n) != n)
		mfs_debug("%s: cannot set readahead: %s", mnt, strerror(errno));
	close(fd);
}

int mfs_mount_session(const struct fuse_lowlevel_ops *ops, const struct fuse_custom_io *io,
		      void *userdata, const char *mnt, const char *fuse_opts, unsigned read_ahead,
		      struct fuse_session **out, char *err, size_t errlen)
{
	char *argv[] = {"mfs", "-o", (char *)fuse_opts, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se;

	se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
	fuse_opt_free_args(&args);
	if (!se) {
		snprintf(err, errlen, "bad FUSE options '%s'", fuse_opts);
		return -EINVAL;
	}
	if (fuse_session_mount(se, mnt) != 0) {
		snprintf(err, errlen, "mounting %s failed", mnt);
		fuse_session_destroy(se);
		return -EIO;
	}
	int rc = io ? fuse_session_custom_io(se, io, fuse_session_fd(se)) : 0;
	if (rc) {
		snprintf(err, errlen, "setting the FUSE channel of %s: %s", mnt, strerror(-rc));
		fuse_session_unmount(se);
		fuse_session_destroy(se);
		return rc;
	}
	struct statx stx;
	if (read_ahead &&
	    statx(AT_FDCWD, mnt, AT_STATX_DONT_SYNC | AT_SYMLINK_NOFOLLOW, 0, &stx) == 0)
		mfs_mount_set_read_ahead(makedev(stx.stx_dev_major, stx.stx_dev_minor), read_ahead);
	*out = se;
	return 0;
}

/* fusermount3 -u [-z] mnt; keep_fd stays open in it (a held directory that
 * mnt names through /proc/self/fd), -1 for none. */
static int run_fusermount(const char *mnt, bool lazy, int keep_fd)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (keep_fd >= 0)
			fcntl(keep_fd, F_SETFD, 0);
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (lazy)
			execlp("fusermount3", "fusermount3", "-u", "-q", "-z", "--", mnt, NULL);
		else
			execlp("fusermount3", "fusermount3", "-u", "-q", "--", mnt, NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (keep_fd >= 0)
		return -EIO; /* the caller knows what to look for */
	/* fusermount3 says nothing precise; a still-mounted path means busy */
	return mfs_mount_lookup(mnt, NULL, NULL, 0) == 0 ? -EBUSY : -EINVAL;
}

int mfs_unmount_path(const char *mnt, bool lazy)
{
	if (geteuid() != 0)
		return run_fusermount(mnt, lazy, -1);
	if (umount2(mnt, lazy ? MNT_DETACH : 0) == 0)
		return 0;
	return -errno;
}

/* Undo the octal escapes (\040 for a space...) of /proc/self/mountinfo. */
static void unescape_mountinfo(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* One line of /proc/self/mountinfo, its fields unescaped:
 * 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw */
struct mountinfo {
	unsigned long long id;
	dev_t dev;
	char point[PATH_MAX];
	char type[64];
	char source[PATH_MAX];
};

static bool parse_mountinfo(const char *line, struct mountinfo *m)
{
	unsigned maj, min;
	const char *dash = strstr(line, " - ");

	m->source[0] = '\0';
	if (!dash || sscanf(line, "%llu %*u %u:%u %*s %4095s", &m->id, &maj, &min, m->point) != 4 ||
	    sscanf(dash + 3, "%63s %4095s", m->type, m->source) < 1)
		return false;
	m->dev = makedev(maj, min);
	unescape_mountinfo(m->point);
	unescape_mountinfo(m->source);
	return true;
}

/* Call fn(m, arg) for every line of /proc/self/mountinfo, in its order,
 * until fn returns non-zero. Returns that value, 0 at the end, -ENOMEM, or
 * -errno of fopen. */
static int mountinfo_each(int (*fn)(const struct mountinfo *m, void *arg), void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	struct mountinfo *m = malloc(sizeof(*m));
	char *line = NULL;
	size_t cap = 0;
	int rc = f ? 0 : -errno;

	if (f && !m)
		rc = -ENOMEM;
	while (rc == 0 && getline(&line, &cap, f) > 0)
		if (parse_mountinfo(line, m))
			rc = fn(m, arg);
	free(line);
	free(m);
	if (f)
		fclose(f);
	return rc;
}

struct lookup {
	const char *point;
	dev_t *dev;
	char *fstype;
	size_t fstypelen;
	bool found;
};

static int lookup_one(const struct mountinfo *m, void *arg)
{
	struct lookup *l = arg;

	if (strcmp(m->point, l->point))
		return 0;
	/* the last match is the top of the stack: go on */
	if (l->dev)
		*l->dev = m->dev;
	if (l->fstype)
		snprintf(l->fstype, l->fstypelen, "%s", m->type);
	l->found = true;
	return 0;
}

int mfs_mount_lookup(const char *mnt, dev_t *dev, char *fstype, size_t fstypelen)
{
	struct lookup l = {.point = mnt, .dev = dev, .fstype = fstype, .fstypelen = fstypelen};
	int rc = mountinfo_each(lookup_one, &l);

	return rc ? rc : l.found ? 0 : -ENOENT;
}

int mfs_conn_abort(unsigned conn)
{
	const char *dir = "/sys/fs/fuse/connections";
	char path[128];

	snprintf(path, sizeof(path), "%s/%u/abort", dir, conn);
	if (access(path, F_OK) < 0 && geteuid() == 0)
		mount("fusectl", dir, "fusectl", 0, NULL); /* may already be mounted */
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = write(fd, "1", 1) == 1 ? 0 : -errno;
	close(fd);
	return rc;
}

int mfs_clean_stale(const char *mnt)
{
	struct stat st;

	if (stat(mnt, &st) == 0 || !mfs_errno_dead_mount(errno))
		return 0;
	mfs_warn("%s: stale mount (transport endpoint is not connected), unmounting it", mnt);
	int rc = mfs_unmount_path(mnt, true);
	if (rc) {
		mfs_err("%s: cannot unmount the stale mount: %s", mnt, strerror(-rc));
		return rc;
	}
	return 1;
}

int mfs_mount_probe(const char *path)
{
	struct statx stx;
	struct statfs sfs;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
		return mfs_errno_dead_mount(errno) ? MFS_MP_DEAD : -errno;
	if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return -EOPNOTSUPP;
	if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return MFS_MP_NONE;
	if (statfs(path, &sfs) == 0)
		return MFS_MP_LIVE;
	return mfs_errno_dead_mount(errno) ? MFS_MP_DEAD : MFS_MP_LIVE;
}

/* A bound on what mfs_clean_stale_held removes: more is not a crash's
 * leftovers but something else going on. */
#define MAX_STALE 64

struct type_of {
	uint64_t id;
	char *type;
	size_t cap;
};

static int type_of_one(const struct mountinfo *m, void *arg)
{
	struct type_of *t = arg;

	if (m->id != t->id)
		return 0;
	snprintf(t->type, t->cap, "%s", m->type);
	return 1;
}

/* The file system type of the mount with ID `id`, from mountinfo. */
static int type_of_mount(uint64_t id, char *type, size_t cap)
{
	struct type_of t = {.id = id, .type = type, .cap = cap};
	int rc = mountinfo_each(type_of_one, &t);

	return rc == 1 ? 0 : rc ? rc : -ENOENT;
}

int mfs_clean_stale_held(struct mfs_held *h)
{
	char path[PATH_MAX], type[64];
	uint64_t id;
	int n = 0;

	mfs_held_name_path(h, path, sizeof(path));
	for (; n < MAX_STALE; n++) {
		int st = mfs_mount_probe(path);
		if (st != MFS_MP_DEAD)
			break;
		/* only what an mfs left: a command must not take away another
		 * file system's mount, dead or not */
		if (mfs_mount_id_at(h->dirfd, h->name, &id, NULL) || type_of_mount(id, type, sizeof(type)) ||
		    strcmp(type, "fuse.dbfs"))
			return -EBUSY;
		mfs_warn("%s: stale mount (transport endpoint is not connected), unmounting it",
			 h->path);
		int rc = geteuid() == 0 ? (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) ? -errno : 0)
					: run_fusermount(path, true, h->dirfd);
		if (rc) {
			mfs_err("%s: cannot unmount the stale mount: %s", h->path, strerror(-rc));
			return rc;
		}
	}
	if (n) {
		int rc = mfs_held_reopen(h);
		if (rc)
			return rc;
	}
	return n;
}

int mfs_mount_id_at(int dirfd, const char *name, uint64_t *mnt_id, dev_t *dev)
{
	struct statx stx;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	*mnt_id = stx.stx_mnt_id;
	if (dev)
		*dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	return 0;
}

int mfs_unmount_held(int dirfd, const char *name, uint64_t mnt_id, bool lazy)
{
	char path[PATH_MAX];
	uint64_t now;

	int rc = mfs_mount_id_at(dirfd, name, &now, NULL);
	if (rc)
		return mfs_errno_dead_mount(-rc) ? rc : -ENOENT;
	if (now != mnt_id)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, name);
	if (geteuid() != 0) {
		rc = run_fusermount(path, lazy, dirfd);
		/* fusermount3 says nothing precise: still there means busy */
		if (rc && mfs_mount_id_at(dirfd, name, &now, NULL) == 0 && now == mnt_id)
			rc = -EBUSY;
		return rc;
	}
	if (umount2(path, (lazy ? MNT_DETACH : 0) | UMOUNT_NOFOLLOW) == 0)
		return 0;
	return -errno;
}

struct clean_source {
	const char *source;
	int removed;
};

static int clean_source_one(const struct mountinfo *m, void *arg)
{
	struct clean_source *c = arg;
	struct mfs_held h = MFS_HELD_INIT;
	uint64_t now;
	char path[PATH_MAX];

	if (strncmp(m->type, "fuse", 4) || strcmp(m->source, c->source))
		return 0;
	if (mfs_path_hold(m->point, (dev_t)-1, NULL, &h) == 0 && h.dirfd >= 0 &&
	    mfs_mount_id_at(h.dirfd, h.name, &now, NULL) == 0 && now == m->id) {
		mfs_held_name_path(&h, path, sizeof(path));
		if (mfs_mount_probe(path) == MFS_MP_DEAD &&
		    mfs_unmount_held(h.dirfd, h.name, m->id, true) == 0) {
			mfs_warn("%s: removed a stale mount of %s", h.path, c->source);
			c->removed++;
		}
	}
	mfs_held_release(&h);
	return 0;
}

/* One pass over mountinfo: the top of a stack first hides the rest. */
static int clean_source_pass(const char *source)
{
	struct clean_source c = {.source = source};

	mountinfo_each(clean_source_one, &c);
	return c.removed;
}

int mfs_clean_stale_source(const char *source)
{
	int n = 0;

	for (int k, round = 0; round < MAX_STALE && (k = clean_source_pass(source)) > 0; round++)
		n += k;
	return n;
}
