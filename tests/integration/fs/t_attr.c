/* chmod, chown, umask, set-group-ID directories, setuid/setgid cleared on
 * write, truncate and chown by non-root. Timestamps are in t_times.c. */
#include "check.h"

#include <sys/xattr.h>

static void test_chmod_chown(void)
{
	write_file("f", "x", 1, 0644);
	CHECK(chmod("f", 0754) == 0);
	CHECK_EQ(stat_of("f").st_mode & 07777, 0754);
	int fd = open("f", O_RDONLY);
	CHECK(fchmod(fd, 04711) == 0);
	CHECK_EQ(stat_of("f").st_mode & 07777, 04711);
	CHECK(fchmod(fd, 0) == 0);
	CHECK_EQ(stat_of("f").st_mode & 07777, 0);
	CHECK(S_ISREG(stat_of("f").st_mode));
	CHECK(close(fd) == 0);
	CHECK(mkdir("d", 0700) == 0);
	CHECK(chmod("d", 01777) == 0);
	CHECK_EQ(stat_of("d").st_mode & 07777, 01777);
	CHECK(S_ISDIR(stat_of("d").st_mode));
	if (is_root()) {
		CHECK(chown("f", 1234, 5678) == 0);
		CHECK_EQ(stat_of("f").st_uid, 1234);
		CHECK_EQ(stat_of("f").st_gid, 5678);
		CHECK(chown("f", (uid_t)-1, 42) == 0);
		CHECK_EQ(stat_of("f").st_uid, 1234);
		CHECK_EQ(stat_of("f").st_gid, 42);
		CHECK(chown("f", 7, (gid_t)-1) == 0);
		CHECK_EQ(stat_of("f").st_uid, 7);
		CHECK_EQ(stat_of("f").st_gid, 42);
		CHECK(chown("d", 4000000000u, 4000000001u) == 0);
		CHECK_EQ(stat_of("d").st_uid, 4000000000u);
		CHECK_EQ(stat_of("d").st_gid, 4000000001u);
	}
	OK("chmod, chown");
}

static void test_umask_sgid_dir(void)
{
	umask(022);
	write_file("um", "", 0, 0666);
	CHECK_EQ(stat_of("um").st_mode & 07777, 0644);
	CHECK(mkdir("umd", 0777) == 0);
	CHECK_EQ(stat_of("umd").st_mode & 07777, 0755);
	CHECK(mkfifo("umf", 0666) == 0);
	CHECK_EQ(stat_of("umf").st_mode & 07777, 0644);
	umask(077);
	CHECK(mkdir("umd2", 0777) == 0);
	CHECK_EQ(stat_of("umd2").st_mode & 07777, 0700);
	umask(0);
	OK("umask applied to new files");

	if (!is_root())
		return;
	/* New entries in a set-group-ID directory take its group; new
	 * subdirectories inherit the bit. */
	CHECK(mkdir("sg", 0777) == 0);
	CHECK(chown("sg", 0, 4321) == 0);
	CHECK(chmod("sg", 02777) == 0);
	write_file("sg/f", "", 0, 0644);
	CHECK_EQ(stat_of("sg/f").st_gid, 4321);
	CHECK(mkdir("sg/sub", 0755) == 0);
	CHECK_EQ(stat_of("sg/sub").st_gid, 4321);
	CHECK((stat_of("sg/sub").st_mode & S_ISGID) != 0);
	CHECK(symlink("f", "sg/l") == 0);
	CHECK_EQ(stat_of("sg/l").st_gid, 4321);
	OK("set-group-ID directory inheritance");
}

/* Child bodies running as uid/gid 65534. */
static void write_as_nobody(void *arg)
{
	int fd = open(arg, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "w", 1), 1);
	CHECK(close(fd) == 0);
}

static void truncate_as_nobody(void *arg)
{
	CHECK(truncate(arg, 1) == 0);
}

static void chgrp_as_nobody(void *arg)
{
	CHECK(chown(arg, (uid_t)-1, NOBODY) == 0);
}

static void chown_nothing_as_nobody(void *arg)
{
	CHECK(chown(arg, (uid_t)-1, (gid_t)-1) == 0);
}

static void test_suid_clear(void)
{
	if (!is_root()) {
		printf("skip - setuid clearing needs root\n");
		return;
	}
	/* Write by a non-root owner clears S_ISUID and S_ISGID (with g+x). */
	write_file("su", "data", 4, 0777);
	CHECK(chown("su", NOBODY, NOBODY) == 0);
	CHECK(chmod("su", 06777) == 0);
	CHECK_EQ(stat_of("su").st_mode & 07777, 06777);
	as_user(NOBODY, NOBODY, write_as_nobody, "su");
	CHECK_EQ(stat_of("su").st_mode & 07777, 0777);
	/* truncate by a non-root owner too. */
	CHECK(chmod("su", 06777) == 0);
	as_user(NOBODY, NOBODY, truncate_as_nobody, "su");
	CHECK_EQ(stat_of("su").st_mode & 07777, 0777);
	/* Write by root (CAP_FSETID) keeps them. */
	CHECK(chmod("su", 06777) == 0);
	write_as_nobody("su");
	CHECK_EQ(stat_of("su").st_mode & 07777, 06777);
	/* S_ISGID without group execute is not cleared by a write. */
	CHECK(chmod("su", 02766) == 0);
	as_user(NOBODY, NOBODY, write_as_nobody, "su");
	CHECK_EQ(stat_of("su").st_mode & 07777, 02766);
	/* chown by the non-root owner clears both. */
	CHECK(chown("su", NOBODY, 0) == 0);
	CHECK(chmod("su", 06755) == 0);
	as_user(NOBODY, NOBODY, chgrp_as_nobody, "su");
	CHECK_EQ(stat_of("su").st_gid, NOBODY);
	CHECK_EQ(stat_of("su").st_mode & 07777, 0755);
	/* Even chown with owner and group -1 clears them (Linux: for root
	 * too), but S_ISGID only with group execute. */
	CHECK(chmod("su", 06755) == 0);
	as_user(NOBODY, NOBODY, chown_nothing_as_nobody, "su");
	CHECK_EQ(stat_of("su").st_mode & 07777, 0755);
	CHECK(chmod("su", 06755) == 0);
	CHECK(chown("su", (uid_t)-1, (gid_t)-1) == 0);
	CHECK_EQ(stat_of("su").st_mode & 07777, 0755);
	CHECK(chmod("su", 06745) == 0);
	CHECK(chown("su", (uid_t)-1, (gid_t)-1) == 0);
	CHECK_EQ(stat_of("su").st_mode & 07777, 02745);
	OK("setuid/setgid cleared on write, truncate and chown by non-root");
}

/* A valid VFS_CAP_REVISION_2 value (cap_net_bind_service, permitted). */
static const unsigned char caps_v2[20] = {0x01, 0x00, 0x00, 0x02, 0x00, 0x04};

static int has_caps(const char *path)
{
	unsigned char v[64];
	ssize_t n = getxattr(path, "security.capability", v, sizeof(v));
	if (n < 0)
		CHECK_EQ(errno, ENODATA);
	return n > 0;
}

static void set_caps(const char *path)
{
	CHECK(setxattr(path, "security.capability", caps_v2, sizeof(caps_v2), 0) == 0);
	CHECK(has_caps(path));
}

static void test_caps_clear(void)
{
	if (!is_root()) {
		printf("skip - file capabilities need root\n");
		return;
	}
	/* Any write, truncate or chown removes file capabilities, even root's. */
	write_file("capf", "data", 4, 0755);
	set_caps("capf");
	write_as_nobody("capf");
	CHECK(!has_caps("capf"));
	set_caps("capf");
	CHECK(truncate("capf", 2) == 0);
	CHECK(!has_caps("capf"));
	set_caps("capf");
	CHECK(chown("capf", NOBODY, NOBODY) == 0);
	CHECK(!has_caps("capf"));
	/* Reading and stat do not. */
	set_caps("capf");
	free(read_file("capf", &(size_t){0}));
	stat_of("capf");
	CHECK(has_caps("capf"));
	OK("file capabilities removed on write, truncate and chown");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_chmod_chown();
	test_umask_sgid_dir();
	test_suid_clear();
	test_caps_clear();
	return 0;
}
