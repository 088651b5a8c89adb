/*
 * Who sent a control request (uid, gid, groups, pid and parent pid). What
 * the caller may do is checked by the kernel itself (as_caller.h). Any
 * thread; nothing here blocks except reading /proc.
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

/* `who` for a user known only by uid (the owner of a registered DBFS, when
 * it is mounted again at start): gid and supplementary groups from the
 * user database; a uid it does not know gets gid 65534 ("nogroup") and no
 * groups. Returns 0, or -errno of the lookup. Any thread. */
int mfs_caller_of_uid(uid_t uid, struct mfs_caller *who);


#endif
