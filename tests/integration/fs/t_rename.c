/* rename and renameat2: over files and empty directories, across directories,
 * RENAME_NOREPLACE, RENAME_EXCHANGE, into its own subtree. */
#include "check.h"

#include <linux/fs.h>
#include <sys/syscall.h>

static int rename2(const char *from, const char *to, unsigned flags)
{
	return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

static void content_is(const char *path, const char *want)
{
	size_t len;
	char *s = read_file(path, &len);
	if (len != strlen(want) || memcmp(s, want, len) != 0)
		fail("%s contains '%s', expected '%s'", path, s, want);
	free(s);
}

static void test_over_file(void)
{
	write_file("a", "AAA", 3, 0644);
	write_file("b", "BB", 2, 0600);
	ino_t ia = stat_of("a").st_ino;
	int fd = open("b", O_RDONLY);
	CHECK(fd >= 0);
	CHECK(rename("a", "b") == 0);
	CHECK_ERR(access("a", F_OK), ENOENT);
	CHECK_EQ(stat_of("b").st_ino, ia);
	CHECK_EQ(stat_of("b").st_mode & 07777, 0644);
	content_is("b", "AAA");
	/* The replaced file lives on for its open descriptor, with no links. */
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 0);
	char buf[4] = { 0 };
	CHECK_EQ(pread(fd, buf, 4, 0), 2);
	CHECK(memcmp(buf, "BB", 2) == 0);
	CHECK(close(fd) == 0);
	/* Renaming one hard link onto another is a no-op that keeps both. */
	CHECK(link("b", "b2") == 0);
	CHECK(rename("b", "b2") == 0);
	CHECK_EQ(stat_of("b").st_nlink, 2);
	CHECK_EQ(stat_of("b2").st_ino, ia);
	CHECK(rename("b", "b") == 0);
	CHECK(unlink("b2") == 0 && unlink("b") == 0);
	/* Replacing one name of a hard-linked file drops its link count. */
	write_file("h1", "H", 1, 0644);
	CHECK(link("h1", "h2") == 0);
	write_file("src", "S", 1, 0644);
	CHECK(rename("src", "h1") == 0);
	CHECK_EQ(stat_of("h2").st_nlink, 1);
	content_is("h2", "H");
	content_is("h1", "S");
	CHECK(unlink("h1") == 0 && unlink("h2") == 0);
	OK("rename over a file");
}

static void test_dirs(void)
{
	CHECK(mkdir("d1", 0755) == 0);
	CHECK(mkdir("d2", 0700) == 0);
	write_file("d1/f", "in d1", 5, 0644);
	write_file("file", "x", 1, 0644);
	ino_t i1 = stat_of("d1").st_ino;
	nlink_t top = stat_of(".").st_nlink;
	/* Directory over an empty directory. */
	CHECK(rename("d1", "d2") == 0);
	CHECK_EQ(stat_of("d2").st_ino, i1);
	CHECK_EQ(stat_of("d2").st_mode & 07777, 0755);
	content_is("d2/f", "in d1");
	CHECK_EQ(stat_of(".").st_nlink, top - 1);
	CHECK_ERR(access("d1", F_OK), ENOENT);
	/* Over a non-empty directory, type mismatches. */
	CHECK(mkdir("d3", 0755) == 0);
	CHECK_ERR2(rename("d3", "d2"), ENOTEMPTY, EEXIST);
	CHECK_ERR(rename("file", "d3"), EISDIR);
	CHECK_ERR(rename("d3", "file"), ENOTDIR);
	CHECK_ERR(rename("missing", "d3"), ENOENT);
	/* Across directories: a file and a directory; link counts follow. */
	CHECK(mkdir("d3/sub", 0755) == 0);
	CHECK_EQ(stat_of("d3").st_nlink, 3);
	CHECK(rename("d3/sub", "d2/sub") == 0);
	CHECK_EQ(stat_of("d3").st_nlink, 2);
	CHECK_EQ(stat_of("d2").st_nlink, 3);
	CHECK_EQ(stat_of("d2/sub/..").st_ino, i1);
	CHECK(rename("file", "d2/sub/file") == 0);
	content_is("d2/sub/file", "x");
	CHECK(rename("d2/sub/file", "d3/renamed") == 0);
	content_is("d3/renamed", "x");
	/* An open file keeps working while it is moved. */
	int fd = open("d3/renamed", O_RDWR);
	CHECK(fd >= 0);
	CHECK(rename("d3/renamed", "d2/moved") == 0);
	CHECK_EQ(pwrite(fd, "yz", 2, 1), 2);
	CHECK(close(fd) == 0);
	content_is("d2/moved", "xyz");
	/* Into its own subtree. */
	CHECK_ERR(rename("d2", "d2/sub/inside"), EINVAL);
	CHECK_ERR(rename("d2", "d2/inside"), EINVAL);
	CHECK_ERR(rename2("d2", "d2/sub/x", RENAME_NOREPLACE), EINVAL);
	/* Moving a parent onto its own child (non-empty) fails too. */
	CHECK_ERR2(rename("d2/sub", "d2"), ENOTEMPTY, EINVAL);
	CHECK(stat_of("d2/sub").st_ino != 0);
	OK("rename of directories, across directories, into own subtree");
}

static void test_noreplace(void)
{
	write_file("n1", "one", 3, 0644);
	write_file("n2", "two", 3, 0644);
	CHECK_ERR(rename2("n1", "n2", RENAME_NOREPLACE), EEXIST);
	content_is("n1", "one");
	content_is("n2", "two");
	CHECK(mkdir("nd", 0755) == 0);
	CHECK_ERR(rename2("n1", "nd", RENAME_NOREPLACE), EEXIST);
	CHECK(rename2("n1", "n3", RENAME_NOREPLACE) == 0);
	CHECK_ERR(access("n1", F_OK), ENOENT);
	content_is("n3", "one");
	CHECK(unlink("n2") == 0 && unlink("n3") == 0 && rmdir("nd") == 0);
	OK("RENAME_NOREPLACE");
}

static void test_exchange(void)
{
	write_file("x1", "first", 5, 0644);
	CHECK(mkdir("xd", 0755) == 0);
	CHECK(mkdir("xd/child", 0755) == 0);
	CHECK(mkdir("other", 0755) == 0);
	write_file("other/x2", "second", 6, 0600);
	ino_t i1 = stat_of("x1").st_ino, i2 = stat_of("other/x2").st_ino;
	CHECK(rename2("x1", "other/x2", RENAME_EXCHANGE) == 0);
	CHECK_EQ(stat_of("x1").st_ino, i2);
	CHECK_EQ(stat_of("other/x2").st_ino, i1);
	content_is("x1", "second");
	content_is("other/x2", "first");
	CHECK_EQ(stat_of("x1").st_mode & 07777, 0600);

	/* A file and a directory in different parents: link counts swap. */
	ino_t id = stat_of("xd").st_ino;
	nlink_t top = stat_of(".").st_nlink, oth = stat_of("other").st_nlink;
	CHECK(rename2("xd", "other/x2", RENAME_EXCHANGE) == 0);
	CHECK_EQ(stat_of("other/x2").st_ino, id);
	CHECK(S_ISDIR(stat_of("other/x2").st_mode));
	CHECK(S_ISREG(stat_of("xd").st_mode));
	content_is("xd", "first");
	CHECK_EQ(stat_of("other/x2/..").st_ino, stat_of("other").st_ino);
	CHECK_EQ(stat_of("other/x2/child/..").st_ino, id);
	CHECK_EQ(stat_of(".").st_nlink, top - 1);
	CHECK_EQ(stat_of("other").st_nlink, oth + 1);

	/* Two directories. */
	CHECK(mkdir("ya", 0755) == 0);
	CHECK(rename2("ya", "other/x2", RENAME_EXCHANGE) == 0);
	CHECK_EQ(stat_of("ya").st_ino, id);
	CHECK_EQ(stat_of("ya/..").st_ino, stat_of(".").st_ino);
	CHECK_EQ(stat_of("other/x2/..").st_ino, stat_of("other").st_ino);
	CHECK_ERR(rename2("ya", "nonexistent", RENAME_EXCHANGE), ENOENT);
	CHECK_ERR(rename2("ya", "ya/child", RENAME_EXCHANGE), EINVAL);
	CHECK_ERR(rename2("x1", "xd", RENAME_EXCHANGE | RENAME_NOREPLACE), EINVAL);
	OK("RENAME_EXCHANGE");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_over_file();
	test_dirs();
	test_noreplace();
	test_exchange();
	return 0;
}
