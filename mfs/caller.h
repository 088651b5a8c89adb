/*
 * Who sent a control request (uid, gid, groups, pid and parent pid), and
 * what that caller may write, as the kernel would decide it from the mode
 * bits. Any thread; nothing here blocks except reading /proc.
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

/* Fill `who` from a FUSE request (fuse_req_t passed as void *): its context,
 * its supplementary groups (at most MFS_MAX_GROUPS; none when the kernel
 * cannot tell) and the parent of its pid from /proc (0 when gone). No
 * errors. A FUSE worker, inside the request. */
void mfs_caller_from_req(void *req, struct mfs_caller *who);

/* May `who` write a file with this owner/group/mode (permission bits)?
 * 1 or 0; root always may. Pure: any thread. */
int mfs_caller_may_write(const struct mfs_caller *who, uid_t uid, gid_t gid, mode_t mode);

#endif
