/* An unlinked file that is still open keeps working until its last close, and
 * its inode is released after that. */
#include "check.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#define MiB (1024 * 1024)

static unsigned long long inodes_used(void)
{
	struct statvfs sv;
	CHECK(statvfs(".", &sv) == 0);
	return (unsigned long long)(sv.f_files - sv.f_ffree);
}

static int listed(const char *name)
{
	DIR *d = opendir(".");
	CHECK(d != NULL);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, name) == 0;
	CHECK(closedir(d) == 0);
	return n;
}

/* O_TMPFILE is optional: it works (a nameless file that linkat can name), or
 * it is refused as unsupported. */
static void test_tmpfile(void)
{
	errno = 0;
	int fd = open(".", O_TMPFILE | O_RDWR, 0600);
	if (fd < 0) {
		int e = errno;
		if (e != EOPNOTSUPP && e != EISDIR)
			fail("O_TMPFILE failed with errno %d (%s), expected success or EOPNOTSUPP",
			     e, strerror(e));
		printf("note - O_TMPFILE not supported (%s)\n", strerror(e));
		return;
	}
	CHECK_EQ(write(fd, "tmpfile", 7), 7);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_EQ(listed("tmp-named"), 0);
	CHECK(linkat(fd, "", AT_FDCWD, "tmp-named", AT_EMPTY_PATH) == 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 1);
	CHECK(close(fd) == 0);
	size_t len;
	char *s = read_file("tmp-named", &len);
	CHECK(len == 7 && memcmp(s, "tmpfile", 7) == 0);
	free(s);
	CHECK(unlink("tmp-named") == 0);
	OK("O_TMPFILE and linkat");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	CHECK(mkdir("u", 0755) == 0);
	CHECK(chdir("u") == 0);
	unsigned long long used0 = inodes_used();
	uint8_t *buf = malloc(2 * MiB);
	CHECK(buf);
	fill_pattern(buf, MiB, 1, 0);
	int fd = open("victim", O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	pwrite_all(fd, buf, MiB, 0);
	int fd2 = open("victim", O_RDONLY);
	CHECK(fd2 >= 0);
	CHECK(unlink("victim") == 0);
	struct stat st;
	CHECK_ERR(stat("victim", &st), ENOENT);
	CHECK_EQ(listed("victim"), 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_size, MiB);

	/* Reads, writes, truncate, chmod, xattr-free metadata keep working. */
	fill_pattern(buf, MiB, 2, MiB);
	pwrite_all(fd, buf, MiB, MiB);
	drop_cache(fd);
	memset(buf, 0, 2 * MiB);
	CHECK_EQ(pread_all(fd2, buf, 2 * MiB, 0), 2 * MiB);
	CHECK_EQ(pattern_mismatch(buf, MiB, 1, 0), -1);
	CHECK_EQ(pattern_mismatch(buf + MiB, MiB, 2, MiB), -1);
	CHECK(ftruncate(fd, MiB + 10) == 0);
	CHECK(fstat(fd2, &st) == 0);
	CHECK_EQ(st.st_size, MiB + 10);
	CHECK(fchmod(fd, 0640) == 0);
	CHECK(fstat(fd2, &st) == 0);
	CHECK_EQ(st.st_mode & 07777, 0640);
	CHECK(fsetxattr(fd, "user.orphan", "yes", 3, 0) == 0);
	char xv[8] = { 0 };
	CHECK_EQ(fgetxattr(fd2, "user.orphan", xv, sizeof xv), 3);
	CHECK(memcmp(xv, "yes", 3) == 0);
	/* A shared mapping of the unlinked file. */
	uint8_t *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	memcpy(map, "MAPPED", 6);
	CHECK(msync(map, 4096, MS_SYNC) == 0);
	CHECK(munmap(map, 4096) == 0);
	char s[8] = { 0 };
	CHECK_EQ(pread(fd2, s, 6, 0), 6);
	CHECK(memcmp(s, "MAPPED", 6) == 0);
	/* Reopen through /proc: the inode, not the name, is what counts. */
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int fd3 = open(proc, O_RDWR);
	CHECK(fd3 >= 0);
	CHECK_EQ(pwrite(fd3, "P", 1, 1), 1);
	CHECK_EQ(pread(fd2, s, 2, 0), 2);
	CHECK(memcmp(s, "MP", 2) == 0);
	/* The name is free for an unrelated new file. */
	write_file("victim", "new", 3, 0644);
	CHECK(stat("victim", &st) == 0);
	CHECK_EQ(st.st_size, 3);
	CHECK_EQ(pread(fd2, s, 2, 0), 2);
	CHECK(memcmp(s, "MP", 2) == 0);
	CHECK(unlink("victim") == 0);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd3) == 0);
	CHECK(close(fd) == 0);
	/* Still alive through the last descriptor. */
	CHECK_EQ(pread(fd2, s, 6, 0), 6);
	CHECK(memcmp(s, "MPPPED", 6) == 0);
	CHECK(close(fd2) == 0);
	OK("unlinked open file works until last close");

	/* After the last close the inode is released (bounded wait: the kernel
	 * forgets the inode asynchronously). */
	int i;
	for (i = 0; i < 100 && inodes_used() != used0; i++)
		usleep(100000);
	if (inodes_used() != used0)
		fail("inodes in use: %llu before, %llu after the last close", used0,
		     inodes_used());
	OK("inode released after last close");
	free(buf);
	test_tmpfile();
	return 0;
}
