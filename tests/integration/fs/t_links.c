/* Hard links and st_nlink, symlinks and readlink, mknod of FIFOs, sockets and
 * (as root) device nodes. */
#include "check.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

static void test_hard_links(void)
{
	CHECK(mkdir("l", 0755) == 0);
	CHECK(mkdir("l/sub", 0755) == 0);
	write_file("l/a", "data", 4, 0644);
	struct stat st = stat_of("l/a");
	ino_t ino = st.st_ino;
	CHECK_EQ(st.st_nlink, 1);
	CHECK(link("l/a", "l/b") == 0);
	CHECK(link("l/b", "l/sub/c") == 0);
	CHECK_EQ(stat_of("l/a").st_nlink, 3);
	CHECK_EQ(stat_of("l/b").st_nlink, 3);
	CHECK_EQ(stat_of("l/sub/c").st_nlink, 3);
	CHECK_EQ(stat_of("l/sub/c").st_ino, ino);
	int fd = open("l/a", O_RDWR);
	CHECK(fd >= 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 3);
	/* A write through one name is seen through the others. */
	CHECK_EQ(pwrite(fd, "DA", 2, 0), 2);
	size_t len;
	char *s = read_file("l/sub/c", &len);
	CHECK(len == 4 && memcmp(s, "DAta", 4) == 0);
	free(s);
	/* Attributes are shared. */
	CHECK(chmod("l/b", 0600) == 0);
	CHECK_EQ(stat_of("l/sub/c").st_mode & 07777, 0600);
	CHECK(unlink("l/a") == 0);
	CHECK_EQ(stat_of("l/b").st_nlink, 2);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 2);
	CHECK(rename("l/sub/c", "l/c") == 0);
	CHECK_EQ(stat_of("l/c").st_nlink, 2);
	CHECK(unlink("l/b") == 0);
	CHECK_EQ(stat_of("l/c").st_nlink, 1);
	CHECK(unlink("l/c") == 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 0);
	CHECK(close(fd) == 0);
	/* Refusals. */
	write_file("l/e", "", 0, 0644);
	CHECK_ERR(link("l/sub", "l/dirlink"), EPERM);
	CHECK_ERR(link("l/missing", "l/x"), ENOENT);
	CHECK_ERR(link("l/e", "l/e"), EEXIST);
	CHECK_ERR(link("l/e", "l/sub"), EEXIST);
	CHECK_ERR(link("l/e", "l/nodir/x"), ENOENT);
	/* A link through a symlink: link() does not follow, linkat can. */
	CHECK(symlink("e", "l/sym") == 0);
	CHECK(link("l/sym", "l/sym2") == 0);
	CHECK(S_ISLNK(stat_of("l/sym2").st_mode));
	CHECK_EQ(stat_of("l/sym").st_nlink, 2);
	CHECK(linkat(AT_FDCWD, "l/sym", AT_FDCWD, "l/e2", AT_SYMLINK_FOLLOW) == 0);
	CHECK_EQ(stat_of("l/e2").st_ino, stat_of("l/e").st_ino);
	CHECK_EQ(stat_of("l/e").st_nlink, 2);
	OK("hard links and st_nlink");
}

static void test_symlinks(void)
{
	CHECK(mkdir("s", 0755) == 0);
	write_file("s/target", "T", 1, 0644);
	CHECK(symlink("target", "s/rel") == 0);
	CHECK(symlink("../s/target", "s/up") == 0);
	CHECK(symlink("/nonexistent/abs/path", "s/abs") == 0);
	CHECK(symlink("dangling", "s/dang") == 0);
	char buf[5000];
	CHECK_EQ(readlink("s/rel", buf, sizeof buf), 6);
	CHECK(memcmp(buf, "target", 6) == 0);
	CHECK_EQ(readlink("s/abs", buf, sizeof buf), 21);
	CHECK(memcmp(buf, "/nonexistent/abs/path", 21) == 0);
	/* A short buffer truncates without a terminator. */
	memset(buf, '#', sizeof buf);
	CHECK_EQ(readlink("s/abs", buf, 4), 4);
	CHECK(memcmp(buf, "/non#", 5) == 0);
	struct stat st = stat_of("s/abs");
	CHECK(S_ISLNK(st.st_mode));
	CHECK_EQ(st.st_size, 21);
	CHECK(stat("s/up", &st) == 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_ino, stat_of("s/target").st_ino);
	size_t len;
	char *s = read_file("s/rel", &len);
	CHECK(len == 1 && s[0] == 'T');
	free(s);
	CHECK_ERR(stat("s/dang", &st), ENOENT);
	CHECK(lstat("s/dang", &st) == 0);
	CHECK_ERR(readlink("s/target", buf, sizeof buf), EINVAL);
	/* Through a symlink to a directory. */
	CHECK(symlink(".", "s/self") == 0);
	CHECK_EQ(stat_of("s/self/self/self/target").st_ino, stat_of("s/target").st_ino);
	/* A creat through a dangling symlink creates its target. */
	int fd = open("s/dang", O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK(close(fd) == 0);
	CHECK(S_ISREG(stat_of("s/dangling").st_mode));
	/* Targets are byte strings: newlines, invalid UTF-8, spaces kept. */
	static const char odd[] = "a\nb \xff\xfe/\x01c";
	CHECK(symlink(odd, "s/odd") == 0);
	CHECK_EQ(readlink("s/odd", buf, sizeof buf), sizeof odd - 1);
	CHECK(memcmp(buf, odd, sizeof odd - 1) == 0);
	/* Long targets, up to PATH_MAX - 1 bytes. */
	char *longt = malloc(4096);
	CHECK(longt);
	memset(longt, 'a', 4095);
	for (int i = 100; i < 4095; i += 100)
		longt[i] = '/';
	longt[4095] = 0;
	CHECK(symlink(longt, "s/long") == 0);
	CHECK_EQ(readlink("s/long", buf, sizeof buf), 4095);
	CHECK(memcmp(buf, longt, 4095) == 0);
	CHECK_EQ(stat_of("s/long").st_size, 4095);
	free(longt);
	/* Ownership of the link itself. */
	if (is_root()) {
		CHECK(lchown("s/rel", 1234, 5678) == 0);
		CHECK_EQ(stat_of("s/rel").st_uid, 1234);
		CHECK_EQ(stat_of("s/target").st_uid, 0);
	}
	CHECK(unlink("s/rel") == 0);
	CHECK(S_ISREG(stat_of("s/target").st_mode));
	OK("symlinks and readlink");
}

static void test_special(void)
{
	CHECK(mkdir("sp", 0755) == 0);
	CHECK(mkfifo("sp/fifo", 0640) == 0);
	struct stat st = stat_of("sp/fifo");
	CHECK(S_ISFIFO(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0640);
	/* The FIFO works as a pipe. */
	int fd = open("sp/fifo", O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "pipe", 4), 4);
	char buf[8] = { 0 };
	CHECK_EQ(read(fd, buf, sizeof buf), 4);
	CHECK(memcmp(buf, "pipe", 4) == 0);
	CHECK(close(fd) == 0);
	CHECK(mknod("sp/fifo2", S_IFIFO | 0600, 0) == 0);
	CHECK(S_ISFIFO(stat_of("sp/fifo2").st_mode));

	CHECK(mknod("sp/sock", S_IFSOCK | 0600, 0) == 0);
	CHECK(S_ISSOCK(stat_of("sp/sock").st_mode));
	/* A bound unix socket on this file system accepts connections. */
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char cwd[200];
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	CHECK(snprintf(addr.sun_path, sizeof addr.sun_path, "%s/sp/bound", cwd) <
	      (int)sizeof addr.sun_path);
	int srv = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(srv >= 0);
	CHECK(bind(srv, (struct sockaddr *)&addr, sizeof addr) == 0);
	CHECK(listen(srv, 1) == 0);
	CHECK(S_ISSOCK(stat_of("sp/bound").st_mode));
	int cli = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(cli, (struct sockaddr *)&addr, sizeof addr) == 0);
	int acc = accept(srv, NULL, NULL);
	CHECK(acc >= 0);
	CHECK_EQ(write(cli, "hi", 2), 2);
	CHECK_EQ(read(acc, buf, 2), 2);
	CHECK(memcmp(buf, "hi", 2) == 0);
	CHECK(close(acc) == 0 && close(cli) == 0 && close(srv) == 0);
	CHECK(unlink("sp/bound") == 0);

	if (is_root()) {
		CHECK(mknod("sp/null", S_IFCHR | 0666, makedev(1, 3)) == 0);
		st = stat_of("sp/null");
		CHECK(S_ISCHR(st.st_mode));
		CHECK_EQ(major(st.st_rdev), 1);
		CHECK_EQ(minor(st.st_rdev), 3);
		CHECK_EQ(st.st_size, 0);
		CHECK(mknod("sp/blk", S_IFBLK | 0600, makedev(259, 65537)) == 0);
		st = stat_of("sp/blk");
		CHECK(S_ISBLK(st.st_mode));
		CHECK_EQ(major(st.st_rdev), 259);
		CHECK_EQ(minor(st.st_rdev), 65537);
		CHECK(rename("sp/blk", "sp/blk2") == 0);
		CHECK_EQ(stat_of("sp/blk2").st_rdev, makedev(259, 65537));
		OK("mknod of character and block devices");
	} else {
		CHECK_ERR(mknod("sp/null", S_IFCHR | 0666, makedev(1, 3)), EPERM);
	}
	CHECK_ERR(mknod("sp/fifo", S_IFIFO | 0600, 0), EEXIST);
	OK("mknod of FIFOs and sockets");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_hard_links();
	test_symlinks();
	test_special();
	return 0;
}
