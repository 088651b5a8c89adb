/*
 * Resolving user-given paths on the control thread without deadlocking.
 *
 * While a control command runs, the kernel holds the lock of the manager
 * root's inode (setxattr takes it and waits for our reply). Looking up any
 * name inside the manager mount from the control thread would wait for that
 * lock forever. So user paths are resolved here component by component, and
 * the walk refuses to look inside a directory on the manager's device.
 */
#ifndef MFS_PATH_H
#define MFS_PATH_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Resolve absolute `path` (symlinks, `.`, `..`) into `out` (cap bytes)
 * without looking up a name in a directory whose st_dev is `avoid`.
 * Returns 0 when the path exists, or:
 *   -EXDEV     the path leads into (or is) the `avoid` file system
 *   -ENOENT    the last component does not exist: `out` holds the resolved
 *              parent joined with that name (other missing parts: -ENOENT
 *              with out empty)
 *   -ENOTCONN  the last component is a dead FUSE mount: `out` holds it
 *   -ELOOP, -ENOTDIR, -ENAMETOOLONG, -EACCES, -EINVAL (relative path)
 * Control thread; blocks on the file systems it walks.
 */
int mfs_path_resolve(const char *path, dev_t avoid, char *out, size_t cap);

#endif
