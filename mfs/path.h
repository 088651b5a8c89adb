/*
 * Resolving a user-given path once, as its caller, into held file
 * descriptors, on the control thread, without deadlocking.
 *
 * Paths from users are hostile: any component can be swapped for a symlink
 * or another directory between a check and its use (rename, RENAME_EXCHANGE).
 * So a path is walked one component at a time with openat2
 * (RESOLVE_NO_SYMLINKS, O_PATH|O_NOFOLLOW): every directory is held open
 * while the next name is looked up inside it, a symlink is read and its
 * text walked the same way, and the result is an O_PATH descriptor of the
 * object itself plus one of its parent. Every later check and action (empty,
 * owner, mount, open the store, unmount) uses those descriptors
 * ("/proc/self/fd/N" where a system call takes only a path), so what was
 * checked is what is used.
 *
 * While a control command runs, the kernel holds the lock of the manager
 * root's inode (setxattr takes it and waits for our reply). Looking up any
 * name inside the manager mount from the control thread would wait for that
 * lock forever, so the walk refuses to look inside a directory on the
 * manager's device. Nothing here asks a FUSE server for attributes
 * (AT_STATX_DONT_SYNC): a dead mount's cached attributes are not trusted,
 * see mount.h for telling dead mounts apart.
 *
 * Permissions: run the walk between mfs_as_begin/mfs_as_end (as_caller.h)
 * and the kernel checks search permission on every directory as the caller;
 * where no identity could be taken, the permission bits are checked.
 */
#ifndef MFS_PATH_H
#define MFS_PATH_H

#include <limits.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

struct mfs_as;

struct mfs_held {
	int fd;                  /* O_PATH of the object, -1 when it does not exist */
	int dirfd;               /* O_PATH of its parent directory, -1 for "/" */
	char name[NAME_MAX + 1]; /* its name in dirfd ("" for "/") */
	char path[PATH_MAX];     /* absolute, symlinks resolved, no "." or "..":
				  * for messages and the registry only */
	struct statx stx;        /* of fd: type, mode, owner, dev, mount id, and
				  * STATX_ATTR_MOUNT_ROOT, without a FUSE request */
};

#define MFS_HELD_INIT {.fd = -1, .dirfd = -1}

/*
 * Resolve absolute `path` (symlinks, ".", "..") into `h` (MFS_HELD_INIT or
 * released), never looking up a name in a directory whose st_dev is
 * `avoid`, checking search permission for `as` (NULL: the daemon itself).
 * Returns 0 with h->fd and h->dirfd held, or:
 *   -ENOENT   the last component does not exist: h->dirfd, h->name and
 *             h->path say where it would be, h->fd is -1 (another missing
 *             component: -ENOENT with nothing held and h->path of the
 *             missing part)
 *   -EXDEV    the path leads into (or is) the `avoid` file system
 *   -EACCES   no search permission for the caller in h->path
 *   -ENOTCONN a component is on a dead FUSE mount (h->path: where)
 *   -ELOOP, -ENOTDIR, -ENAMETOOLONG, -ENOMEM, -EINVAL (relative path)
 * On any error other than the first kind nothing is held.
 * Control thread; blocks on the file systems it walks.
 */
int mfs_path_hold(const char *path, dev_t avoid, const struct mfs_as *as, struct mfs_held *h);

/* Close what h holds (safe to call twice, and on MFS_HELD_INIT). */
void mfs_held_release(struct mfs_held *h);

/* "/proc/self/fd/N" for a held fd: the path that names exactly that object. */
void mfs_fd_path(int fd, char *buf, size_t cap);

/* "/proc/self/fd/DIRFD/NAME": the name in the held parent, as it is now
 * (crossing a mount on it, as a lookup does). */
void mfs_held_name_path(const struct mfs_held *h, char *buf, size_t cap);

/* Re-open h->name in h->dirfd into h->fd (closing the old one) and refresh
 * h->stx: after a stale mount on it was removed. Returns 0 or -errno. */
int mfs_held_reopen(struct mfs_held *h);

#endif
