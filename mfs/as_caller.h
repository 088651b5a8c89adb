/*
 * Acting as the caller: the control thread takes a caller's file-system
 * identity (fsuid, fsgid, supplementary groups) while it resolves, checks
 * and opens what a command names, so that the kernel itself checks every
 * permission as it would for the caller: search permission on every
 * component, ACLs, read and write access, the sticky bit, and who owns
 * what is created.
 *
 * Linux keeps these ids per thread: setfsuid(2), setfsgid(2) and the raw
 * setgroups system call change the calling thread only (glibc's setgroups
 * would change every thread, so it is not used). While the fsuid is not 0
 * the kernel also drops the file capabilities (CAP_DAC_OVERRIDE,
 * CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_CHOWN...) from the thread's
 * effective set and gives them back when it returns to 0.
 *
 * Only a daemon running as root can take another identity. Otherwise (and
 * for a caller who is root or the daemon's own user) nothing is switched,
 * and mfs_as_access falls back to checking permission bits.
 *
 * Control thread only; between mfs_as_begin and mfs_as_end the thread must
 * do nothing but the command's own file operations (no logging to files, no
 * registry writes).
 */
#ifndef MFS_AS_CALLER_H
#define MFS_AS_CALLER_H

#include <stdbool.h>
#include <sys/types.h>

#include "caller.h"

struct mfs_as {
	bool switched;           /* the thread runs with who's ids */
	const struct mfs_caller *who;
	gid_t groups[MFS_MAX_GROUPS]; /* the thread's own groups, to restore */
	int ngroups;
};

/*
 * Take `who`'s file-system identity on this thread (see above). Returns 0,
 * or -errno of getgroups/setgroups/setfsuid (nothing is left switched).
 * Pair every successful call with mfs_as_end.
 */
int mfs_as_begin(const struct mfs_caller *who, struct mfs_as *as);

/* Return to the daemon's own identity. Never fails (aborts if the kernel
 * refuses to give the ids back: the thread must not go on as someone
 * else). */
void mfs_as_end(struct mfs_as *as);

/*
 * May the caller of `as` access `fd` (any kind of fd, O_PATH too) with
 * `mode` (R_OK, W_OK, X_OK ORed)? Switched: the kernel decides
 * (faccessat2 with AT_EACCESS); not switched: the kernel checks the daemon's
 * own access and, for a caller other than root and the daemon's user, the
 * permission bits are checked for the caller too. Returns 0, -EACCES, or
 * -errno of the check.
 */
int mfs_as_access(const struct mfs_as *as, int fd, int mode);

#endif
