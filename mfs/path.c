/* Resolving user paths once into held descriptors (see path.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <linux/openat2.h>

#include "as_caller.h"
#include "mount.h"
#include "path.h"

#define MAX_LINKS 40
#define STATX_WANT (STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID | STATX_INO | STATX_MNT_ID)

/* One name in a held directory, never following a symlink: an O_PATH
 * descriptor of the name itself. */
static int open_one(int dirfd, const char *name)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
	};
	int fd;

	if (!strcmp(name, "..")) /* the parent: RESOLVE_BENEATH forbids it */
		fd = openat(dirfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else
		fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Attributes without a request to a FUSE server (cached or none). */
static int stat_held(int fd, struct statx *stx)
{
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_WANT,
		  stx) < 0)
		return -errno;
	return 0;
}

static dev_t dev_of(const struct statx *stx)
{
	return makedev(stx->stx_dev_major, stx->stx_dev_minor);
}

void mfs_held_release(struct mfs_held *h)
{
	if (h->fd >= 0)
		close(h->fd);
	if (h->dirfd >= 0)
		close(h->dirfd);
	h->fd = h->dirfd = -1;
}

void mfs_fd_path(int fd, char *buf, size_t cap)
{
	snprintf(buf, cap, "/proc/self/fd/%d", fd);
}

void mfs_held_name_path(const struct mfs_held *h, char *buf, size_t cap)
{
	snprintf(buf, cap, "/proc/self/fd/%d/%s", h->dirfd, h->name);
}

int mfs_held_reopen(struct mfs_held *h)
{
	if (h->dirfd < 0)
		return -EINVAL;
	int fd = open_one(h->dirfd, h->name);
	if (fd < 0)
		return fd;
	int rc = stat_held(fd, &h->stx);
	if (rc) {
		close(fd);
		return rc;
	}
	if (h->fd >= 0)
		close(h->fd);
	h->fd = fd;
	return 0;
}

/* Append "/name" to the resolved path (kept only for messages). */
static int path_push(char *cur, const char *name)
{
	size_t len = strlen(cur), n = strlen(name);

	if (len + 1 + n + 1 > PATH_MAX)
		return -ENAMETOOLONG;
	if (len > 1)
		cur[len++] = '/';
	memcpy(cur + len, name, n + 1);
	return 0;
}

static void path_pop(char *cur)
{
	char *slash = strrchr(cur, '/');

	if (slash == cur)
		cur[1] = '\0';
	else if (slash)
		*slash = '\0';
}

struct walk {
	char rest[2 * PATH_MAX]; /* what is left to walk */
	char link[PATH_MAX];
	char next[2 * PATH_MAX];
};

int mfs_path_hold(const char *path, dev_t avoid, const struct mfs_as *as, struct mfs_held *h)
{
	struct walk *w = malloc(sizeof(*w));
	int dirfd = -1, links = 0, rc = 0;
	struct statx stx;

	h->fd = h->dirfd = -1;
	h->name[0] = '\0';
	strcpy(h->path, "/");
	if (!w)
		return -ENOMEM;
	if (path[0] != '/') {
		rc = -EINVAL;
		goto fail;
	}
	if (strlen(path) >= PATH_MAX) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	strcpy(w->rest, path);
	dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	char *p = w->rest;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		bool last = !end || !end[strspn(end, "/")];
		char name[NAME_MAX + 1];
		if (n > NAME_MAX) {
			rc = -ENAMETOOLONG;
			goto fail;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (!strcmp(name, "."))
			continue;
		/* about to look inside dirfd: never on the avoided device, and
		 * only with the caller's search permission */
		if ((rc = stat_held(dirfd, &stx)))
			goto fail;
		if (dev_of(&stx) == avoid) {
			rc = -EXDEV;
			goto fail;
		}
		if (as && (rc = mfs_as_access(as, dirfd, X_OK)))
			goto fail;
		int fd = open_one(dirfd, name);
		if (fd < 0) {
			rc = mfs_errno_dead_mount(-fd) ? -ENOTCONN : fd;
			if (rc == -ENOENT && last) {
				snprintf(h->name, sizeof(h->name), "%s", name);
				if (path_push(h->path, name))
					rc = -ENAMETOOLONG;
				else
					h->dirfd = dirfd, dirfd = -1;
			} else if (rc == -ENOENT || rc == -ENOTCONN) {
				path_push(h->path, name);
			}
			goto fail;
		}
		if ((rc = stat_held(fd, &stx))) {
			close(fd);
			goto fail;
		}
		if (!strcmp(name, "..")) {
			close(dirfd);
			dirfd = fd;
			path_pop(h->path);
			continue;
		}
		if (S_ISLNK(stx.stx_mode)) {
			ssize_t ln = ++links > MAX_LINKS ? -2 : readlinkat(fd, "", w->link, PATH_MAX - 1);
			close(fd);
			if (ln < 0) {
				rc = ln == -2 ? -ELOOP : -errno;
				goto fail;
			}
			w->link[ln] = '\0';
			if (w->link[0] == '/') {
				close(dirfd);
				dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (dirfd < 0) {
					rc = -errno;
					goto fail;
				}
				strcpy(h->path, "/");
			}
			size_t plen = strlen(p);
			if ((size_t)ln + 1 + plen + 1 > sizeof(w->next)) {
				rc = -ENAMETOOLONG;
				goto fail;
			}
			memcpy(w->next, w->link, (size_t)ln);
			w->next[ln] = '/';
			memcpy(w->next + ln + 1, p, plen + 1);
			memcpy(w->rest, w->next, (size_t)ln + plen + 2);
			p = w->rest;
			continue;
		}
		if ((rc = path_push(h->path, name))) {
			close(fd);
			goto fail;
		}
		if (!S_ISDIR(stx.stx_mode) && (!last || *p)) {
			/* "file/more" or "file/" */
			close(fd);
			rc = -ENOTDIR;
			goto fail;
		}
		if (last) {
			snprintf(h->name, sizeof(h->name), "%s", name);
			h->fd = fd;
			h->dirfd = dirfd;
			dirfd = -1;
			goto done;
		}
		close(dirfd);
		dirfd = fd;
	}
	/* the path ended in a directory reached by "." or "..", or is "/": hold it
	 * and, unless it is "/", its parent under its own name */
	if ((rc = stat_held(dirfd, &h->stx)))
		goto fail;
	if (strcmp(h->path, "/")) {
		const char *slash = strrchr(h->path, '/');
		snprintf(h->name, sizeof(h->name), "%s", slash + 1);
		h->fd = dirfd;
		dirfd = -1;
		h->dirfd = open_one(h->fd, "..");
		if (h->dirfd < 0) {
			rc = h->dirfd;
			h->dirfd = -1;
			goto fail;
		}
	} else {
		h->fd = dirfd;
		dirfd = -1;
	}
	stx = h->stx;
	goto check;
done:
	if ((rc = stat_held(h->fd, &h->stx)))
		goto fail;
	stx = h->stx;
check:
	if (dev_of(&stx) == avoid) {
		rc = -EXDEV;
		goto fail;
	}
	free(w);
	return 0;
fail:
	if (dirfd >= 0)
		close(dirfd);
	if (rc != -ENOENT || h->dirfd < 0)
		mfs_held_release(h);
	free(w);
	return rc;
}
