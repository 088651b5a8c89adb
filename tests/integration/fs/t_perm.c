/* Permission enforcement for an unprivileged uid (65534), sticky directories.
 * Root prepares the tree; children drop to uid 65534 and check what they may
 * and may not do. */
#include "check.h"

#include <dirent.h>
#include <time.h>

static void as_nobody(void (*fn)(void *))
{
	as_user(NOBODY, NOBODY, fn, NULL);
}

static void setup(void)
{
	CHECK(mkdir("ro", 0755) == 0);                 /* root's, not writable */
	write_file("ro/secret", "s", 1, 0600);         /* unreadable */
	write_file("ro/public", "p", 1, 0644);         /* readable, not writable */
	write_file("ro/shared", "w", 1, 0666);         /* writable by all */
	write_file("ro/gread", "g", 1, 0640);          /* group-readable */
	CHECK(chown("ro/gread", 0, NOBODY) == 0);
	write_file("ro/notmine", "n", 1, 0604);        /* other-readable, owner can't */
	CHECK(chown("ro/notmine", NOBODY, 0) == 0);
	CHECK(chmod("ro/notmine", 0074) == 0);         /* owner has no rights at all */
	CHECK(mkdir("pub", 0777) == 0);
	CHECK(mkdir("nox", 0766) == 0);                /* no search for others */
	write_file("nox/f", "f", 1, 0644);
	CHECK(mkdir("nor", 0711) == 0);                /* no listing for others */
	write_file("nor/f", "f", 1, 0644);
	CHECK(mkdir("sticky", 01777) == 0);
	write_file("sticky/roots", "r", 1, 0666);
	write_file("sticky/others", "o", 1, 0666);
	CHECK(chown("sticky/others", 4444, 4444) == 0);
	write_file("pub/roots", "r", 1, 0644);
}

static void nobody_checks(void *arg)
{
	(void)arg;
	CHECK_EQ(geteuid(), NOBODY);
	char buf[8];
	/* Reading and writing files. */
	CHECK_ERR(open("ro/secret", O_RDONLY), EACCES);
	int fd = open("ro/public", O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, buf, 8), 1);
	CHECK(close(fd) == 0);
	CHECK_ERR(open("ro/public", O_WRONLY), EACCES);
	CHECK_ERR(open("ro/public", O_RDWR), EACCES);
	CHECK_ERR(open("ro/public", O_RDONLY | O_TRUNC), EACCES);
	CHECK_ERR(truncate("ro/public", 0), EACCES);
	fd = open("ro/shared", O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "W", 1), 1);
	CHECK(close(fd) == 0);
	fd = open("ro/gread", O_RDONLY); /* group match */
	CHECK(fd >= 0);
	CHECK(close(fd) == 0);
	/* The owner class applies even when "other" would allow more. */
	CHECK_ERR(open("ro/notmine", O_RDONLY), EACCES);
	CHECK_EQ(access("ro/public", R_OK), 0);
	CHECK_ERR(access("ro/public", W_OK), EACCES);
	CHECK_ERR(access("ro/secret", R_OK), EACCES);
	/* Directories: create, remove, rename need write+search on the parent. */
	CHECK_ERR(open("ro/new", O_WRONLY | O_CREAT, 0644), EACCES);
	CHECK_ERR(mkdir("ro/newdir", 0755), EACCES);
	CHECK_ERR(unlink("ro/shared"), EACCES);
	CHECK_ERR(rename("ro/shared", "ro/s2"), EACCES);
	CHECK_ERR(rename("ro/shared", "pub/stolen"), EACCES);
	CHECK_ERR(symlink("x", "ro/sym"), EACCES);
	CHECK_ERR(link("ro/shared", "ro/hl"), EACCES);
	CHECK_ERR(mkfifo("ro/fifo", 0644), EACCES);
	/* Search permission. */
	struct stat st;
	CHECK_ERR(stat("nox/f", &st), EACCES);
	CHECK_ERR(open("nox/f", O_RDONLY), EACCES);
	CHECK(opendir("nox") != NULL); /* read without search: listing works */
	/* Read permission on a directory. */
	errno = 0;
	DIR *d = opendir("nor");
	int e = errno;
	CHECK(d == NULL);
	CHECK_EQ(e, EACCES);
	CHECK(stat("nor/f", &st) == 0); /* search without read: lookup works */
	/* Creating in a world-writable directory: owned by the creator. */
	fd = open("pub/mine", O_WRONLY | O_CREAT | O_EXCL, 0640);
	CHECK(fd >= 0);
	CHECK(close(fd) == 0);
	CHECK(stat("pub/mine", &st) == 0);
	CHECK_EQ(st.st_uid, NOBODY);
	CHECK_EQ(st.st_gid, NOBODY);
	/* POSIX: the creating open may write a file whose new mode forbids
	 * writing; only a later open is refused. */
	fd = open("pub/readonly", O_WRONLY | O_CREAT | O_EXCL, 0444);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "r", 1), 1);
	CHECK(close(fd) == 0);
	CHECK_ERR(open("pub/readonly", O_WRONLY), EACCES);
	CHECK(mkdir("pub/mydir", 0700) == 0);
	CHECK_EQ((stat("pub/mydir", &st), st.st_uid), NOBODY);
	/* Without the sticky bit, anyone who may write the dir may remove. */
	CHECK(rename("pub/roots", "pub/moved") == 0);
	CHECK(unlink("pub/moved") == 0);
	/* Attribute changes are for the owner only. */
	CHECK_ERR(chmod("ro/shared", 0777), EPERM);
	CHECK(chmod("pub/mine", 0604) == 0);
	CHECK_ERR(chown("pub/mine", 0, (gid_t)-1), EPERM);
	CHECK_ERR(chown("pub/mine", (uid_t)-1, 0), EPERM); /* not a member of gid 0 */
	CHECK_ERR(chown("ro/shared", NOBODY, NOBODY), EPERM);
	struct timespec ts[2] = { { 1, 0 }, { 1, 0 } };
	CHECK_ERR(utimensat(AT_FDCWD, "ro/shared", ts, 0), EPERM);
	/* Setting the time to "now" needs only write permission. */
	CHECK(utimensat(AT_FDCWD, "ro/shared", NULL, 0) == 0);
	CHECK_ERR(utimensat(AT_FDCWD, "ro/public", NULL, 0), EACCES);
	/* A non-member cannot set S_ISGID: the kernel silently drops it. */
	CHECK(chown("pub/mine", (uid_t)-1, NOBODY) == 0);
	/* Sticky directory: only the owner of the file (or the dir) may remove. */
	CHECK_ERR2(unlink("sticky/roots"), EPERM, EACCES);
	CHECK_ERR2(unlink("sticky/others"), EPERM, EACCES);
	CHECK_ERR2(rename("sticky/roots", "sticky/mine2"), EPERM, EACCES);
	fd = open("sticky/mine", O_WRONLY | O_CREAT, 0666);
	CHECK(fd >= 0);
	CHECK(close(fd) == 0);
	CHECK(rename("sticky/mine", "sticky/mine2") == 0);
	CHECK_ERR2(rename("sticky/mine2", "sticky/roots"), EPERM, EACCES);
	CHECK(unlink("sticky/mine2") == 0);
	/* But writing a world-writable file in it is fine. */
	fd = open("sticky/roots", O_WRONLY);
	CHECK(fd >= 0);
	CHECK(close(fd) == 0);
	/* Privileged operations. */
	CHECK_ERR(mknod("pub/dev", S_IFCHR | 0600, 0x0103), EPERM);
}

static void sgid_drop_check(void *arg)
{
	(void)arg;
	/* chmod g+s on a file whose group the caller is not in: bit dropped. */
	CHECK(chmod("pub/notgrp", 02755) == 0);
	struct stat st;
	CHECK(stat("pub/notgrp", &st) == 0);
	CHECK_EQ(st.st_mode & 07777, 0755);
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	if (!is_root()) {
		printf("skip - permission tests need root to switch uid\n");
		return 77;
	}
	setup();
	as_nobody(nobody_checks);
	/* The parent still sees root's files intact. */
	size_t len;
	char *s = read_file("ro/shared", &len);
	CHECK(len == 1 && s[0] == 'W');
	free(s);
	CHECK_EQ(stat_of("ro/shared").st_mode & 07777, 0666);
	CHECK(access("sticky/roots", F_OK) == 0 && access("sticky/others", F_OK) == 0);
	OK("unprivileged access, sticky directory");

	write_file("pub/notgrp", "", 0, 0755);
	CHECK(chown("pub/notgrp", NOBODY, 0) == 0);
	as_nobody(sgid_drop_check);
	OK("S_ISGID dropped by chmod of a non-member");
	return 0;
}
