/*
 * Who sent a control request, and the reason their last refused command was
 * refused (served as user.mfs.error).
 *
 * The reason is kept per (uid, parent pid of the caller): `setfattr` and the
 * `getfattr -n user.mfs.error` that follows it are two processes of one
 * shell (or one mfsctl), so they share a parent; a caller with no entry of
 * its own gets the latest reason of its uid. Any thread.
 */
#ifndef MFS_CALLER_H
#define MFS_CALLER_H

#include <stddef.h>
#include <sys/types.h>

#define MFS_MAX_GROUPS 64

struct mfs_caller {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	pid_t ppid;
	int ngroups;
	gid_t groups[MFS_MAX_GROUPS];
};

/* Fill `who` from a FUSE request (fuse_req_t passed as void *). */
void mfs_caller_from_req(void *req, struct mfs_caller *who);

/* Remember that `who`'s command failed with errno `err` for `reason`. */
void mfs_error_record(const struct mfs_caller *who, int err, const char *reason);

/* Write "ENAME (N): reason\n" (or "0: no refused command\n") into buf. */
void mfs_error_text(const struct mfs_caller *who, char *buf, size_t cap);

/* May `who` write a file with this owner/group/mode (permission bits)? */
int mfs_caller_may_write(const struct mfs_caller *who, uid_t uid, gid_t gid, mode_t mode);

#endif
