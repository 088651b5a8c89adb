/* Who sent a control request, and what they may write (see caller.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <fuse_lowlevel.h>

#include "caller.h"

static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		/* pid (comm) state ppid ...: comm may hold spaces and parens */
		char *p = strrchr(buf, ')');
		if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
			ppid = 0;
	}
	fclose(f);
	return (pid_t)ppid;
}

void mfs_caller_from_req(void *reqp, struct mfs_caller *who)
{
	fuse_req_t req = reqp;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	memset(who, 0, sizeof(*who));
	who->uid = ctx->uid;
	who->gid = ctx->gid;
	who->pid = ctx->pid;
	who->ppid = parent_of(ctx->pid);
	int n = fuse_req_getgroups(req, MFS_MAX_GROUPS, who->groups);
	who->ngroups = n < 0 ? 0 : (n > MFS_MAX_GROUPS ? MFS_MAX_GROUPS : n);
}

int mfs_caller_may_write(const struct mfs_caller *who, uid_t uid, gid_t gid, mode_t mode)
{
	if (who->uid == 0)
		return 1;
	if (who->uid == uid)
		return (mode & S_IWUSR) != 0;
	bool in_group = who->gid == gid;
	for (int i = 0; i < who->ngroups && !in_group; i++)
		in_group = who->groups[i] == gid;
	if (in_group)
		return (mode & S_IWGRP) != 0;
	return (mode & S_IWOTH) != 0;
}
