/* The kernel forgets inodes (FUSE FORGET) when its caches are dropped: every
 * name must still resolve afterwards, hard links still share an inode, open
 * files (even unlinked ones) keep working, and removed inodes are released. */
#include "check.h"

#include <sys/statvfs.h>

enum { N = 1500 };

static int drop_kernel_caches(void)
{
	/* this file system only: sync() would wait for every other one on
	 * the machine (another FUSE server's, however slow) */
	int dir = open(".", O_RDONLY | O_DIRECTORY);
	if (dir >= 0) {
		syncfs(dir);
		close(dir);
	}
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return 0;
	int ok = write(fd, "2", 1) == 1; /* dentries and inodes */
	close(fd);
	return ok;
}

static unsigned long long inodes_used(void)
{
	struct statvfs sv;
	CHECK(statvfs(".", &sv) == 0);
	return (unsigned long long)(sv.f_files - sv.f_ffree);
}

static void check_all(int with_links)
{
	char name[64], want[64];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "fg/d%d/f%d", i % 30, i);
		size_t len;
		char *s = read_file(name, &len);
		int wl = snprintf(want, sizeof want, "content %d", i);
		if (len != (size_t)wl || memcmp(s, want, len) != 0)
			fail("%s holds '%s' after the kernel forgot it", name, s);
		free(s);
		if (with_links && i % 10 == 0) {
			char lname[64];
			snprintf(lname, sizeof lname, "fg/links/l%d", i);
			struct stat a = stat_of(name), b = stat_of(lname);
			CHECK_EQ(a.st_ino, b.st_ino);
			CHECK_EQ(a.st_nlink, 2);
		}
	}
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	if (!is_root()) {
		printf("skip - dropping the kernel's caches needs root\n");
		return 77;
	}
	unsigned long long used0 = inodes_used();
	char name[64], buf[64];
	CHECK(mkdir("fg", 0755) == 0);
	CHECK(mkdir("fg/links", 0755) == 0);
	for (int d = 0; d < 30; d++) {
		snprintf(name, sizeof name, "fg/d%d", d);
		CHECK(mkdir(name, 0755) == 0);
	}
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "fg/d%d/f%d", i % 30, i);
		int len = snprintf(buf, sizeof buf, "content %d", i);
		write_file(name, buf, (size_t)len, 0644);
		if (i % 10 == 0) {
			char lname[64];
			snprintf(lname, sizeof lname, "fg/links/l%d", i);
			CHECK(link(name, lname) == 0);
		}
	}
	/* An unlinked file held open across the forget. */
	int held = open("fg/held", O_RDWR | O_CREAT, 0644);
	CHECK(held >= 0);
	CHECK_EQ(write(held, "held", 4), 4);
	CHECK(unlink("fg/held") == 0);

	if (!drop_kernel_caches()) {
		printf("skip - cannot write /proc/sys/vm/drop_caches\n");
		return 77;
	}
	check_all(1);
	char s[8] = { 0 };
	CHECK_EQ(pread(held, s, 4, 0), 4);
	CHECK(memcmp(s, "held", 4) == 0);
	OK("names resolve after the kernel forgot the inodes");

	/* Rename directories while forgotten, then look everything up again. */
	CHECK(drop_kernel_caches());
	CHECK(rename("fg/d0", "fg/links/moved") == 0);
	CHECK(rename("fg/links/moved", "fg/d0") == 0);
	CHECK(drop_kernel_caches());
	check_all(1);
	OK("renames of forgotten directories");

	/* Remove everything; the inodes are released after the forget. */
	CHECK(close(held) == 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "fg/d%d/f%d", i % 30, i);
		CHECK(unlink(name) == 0);
		if (i % 10 == 0) {
			snprintf(name, sizeof name, "fg/links/l%d", i);
			CHECK(unlink(name) == 0);
		}
	}
	for (int d = 0; d < 30; d++) {
		snprintf(name, sizeof name, "fg/d%d", d);
		CHECK(rmdir(name) == 0);
	}
	CHECK(rmdir("fg/links") == 0);
	CHECK(rmdir("fg") == 0);
	CHECK(drop_kernel_caches());
	for (int i = 0; i < 100 && inodes_used() != used0; i++)
		usleep(100000);
	if (inodes_used() != used0)
		fail("inodes used: %llu before, %llu after removing everything", used0,
		     inodes_used());
	OK("inodes released after removal and forget");
	return 0;
}
