/* Who sent a control request (see caller.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <grp.h>
#include <pwd.h>
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

int mfs_caller_of_uid(uid_t uid, struct mfs_caller *who)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	memset(who, 0, sizeof(*who));
	who->uid = uid;
	who->gid = 65534;
	int rc = getpwuid_r(uid, &pw, buf, sizeof(buf), &res);
	if (rc)
		return -rc;
	if (!res)
		return 0;
	who->gid = pw.pw_gid;
	int n = MFS_MAX_GROUPS;
	if (getgrouplist(pw.pw_name, pw.pw_gid, who->groups, &n) < 0)
		n = MFS_MAX_GROUPS; /* more than fit: the first ones */
	who->ngroups = n;
	return 0;
}
