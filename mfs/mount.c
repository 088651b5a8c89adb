/* Mount mechanics (see mount.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <fuse_lowlevel.h>

#include "log.h"
#include "mount.h"

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
static void set_read_ahead(const char *mnt, unsigned bytes)
{
	struct statx stx;
	char path[96], val[16];

	if (statx(AT_FDCWD, mnt, AT_STATX_DONT_SYNC | AT_SYMLINK_NOFOLLOW, 0, &stx) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", stx.stx_dev_major,
		 stx.stx_dev_minor);
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
	if (read_ahead)
		set_read_ahead(mnt, read_ahead);
	*out = se;
	return 0;
}

static int run_fusermount(const char *mnt, bool lazy)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
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
	/* fusermount3 says nothing precise; a still-mounted path means busy */
	return mfs_mount_lookup(mnt, NULL, NULL, 0) == 0 ? -EBUSY : -EINVAL;
}

int mfs_unmount_path(const char *mnt, bool lazy)
{
	if (geteuid() != 0)
		return run_fusermount(mnt, lazy);
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

int mfs_mount_lookup(const char *mnt, dev_t *dev, char *fstype, size_t fstypelen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	/* 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw */
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		char point[4096], type[256];
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, point) != 3)
			continue;
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(dash + 3, "%255s", type) != 1)
			continue;
		unescape_mountinfo(point);
		if (strcmp(point, mnt))
			continue;
		/* the last match is the top of the stack */
		if (dev)
			*dev = makedev(maj, min);
		if (fstype)
			snprintf(fstype, fstypelen, "%s", type);
		rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

int mfs_is_mount_root(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) < 0)
		return -errno;
	if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	return mfs_mount_lookup(path, NULL, NULL, 0) == 0;
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
