/* Taking a caller's file-system identity on the control thread (see as_caller.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "as_caller.h"
#include "log.h"

/* The raw system call: glibc's setgroups(3) changes every thread. */
static int thread_setgroups(int n, const gid_t *groups)
{
	return syscall(SYS_setgroups, (size_t)n, groups) < 0 ? -errno : 0;
}

int mfs_as_begin(const struct mfs_caller *who, struct mfs_as *as)
{
	as->switched = false;
	as->who = who;
	as->ngroups = 0;
	if (geteuid() != 0 || who->uid == 0)
		return 0;
	int n = getgroups(MFS_MAX_GROUPS, as->groups);
	if (n < 0)
		return -errno;
	as->ngroups = n;
	int rc = thread_setgroups(who->ngroups, who->groups);
	if (rc)
		return rc;
	/* setfsuid/setfsgid report the previous id, never an error: ask again */
	setfsgid(who->gid);
	setfsuid(who->uid);
	if ((gid_t)setfsgid((gid_t)-1) != who->gid || (uid_t)setfsuid((uid_t)-1) != who->uid) {
		as->switched = true;
		mfs_as_end(as);
		return -EPERM;
	}
	as->switched = true;
	return 0;
}

void mfs_as_end(struct mfs_as *as)
{
	if (!as->switched)
		return;
	setfsuid(geteuid());
	setfsgid(getegid());
	if ((uid_t)setfsuid((uid_t)-1) != geteuid() || (gid_t)setfsgid((gid_t)-1) != getegid() ||
	    thread_setgroups(as->ngroups, as->groups)) {
		mfs_err("cannot return to the daemon's own identity; stopping");
		abort();
	}
	as->switched = false;
}

/* Permission bits of `st` for `who` (no ACLs: the fallback only). */
static bool bits_allow(const struct mfs_caller *who, const struct stat *st, int mode)
{
	mode_t m = st->st_mode;
	int shift = 0; /* other */

	if (who->uid == st->st_uid) {
		shift = 6;
	} else {
		bool in_group = who->gid == st->st_gid;
		for (int i = 0; i < who->ngroups && !in_group; i++)
			in_group = who->groups[i] == st->st_gid;
		if (in_group)
			shift = 3;
	}
	int have = (int)((m >> shift) & 7);
	return (have & mode) == mode;
}

int mfs_as_access(const struct mfs_as *as, int fd, int mode)
{
	if (faccessat(fd, "", mode, AT_EACCESS | AT_EMPTY_PATH) < 0)
		return -errno;
	const struct mfs_caller *who = as->who;
	if (as->switched || !who || who->uid == 0 || who->uid == geteuid())
		return 0;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	return bits_allow(who, &st, mode) ? 0 : -EACCES;
}
