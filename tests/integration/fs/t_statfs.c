/* statfs reports a real size, free space and inode counts that follow what
 * is written and removed. */
#include "check.h"

#include <sys/statvfs.h>

#define MiB (1024 * 1024)

static struct statvfs sv(void)
{
	struct statvfs s;
	CHECK(statvfs(".", &s) == 0);
	return s;
}

static long long free_bytes(void)
{
	struct statvfs s = sv();
	return (long long)s.f_bfree * (long long)s.f_frsize;
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	struct statvfs s = sv();
	printf("bsize %lu frsize %lu blocks %llu bfree %llu bavail %llu files %llu ffree %llu "
	       "namemax %lu\n",
	       s.f_bsize, s.f_frsize, (unsigned long long)s.f_blocks,
	       (unsigned long long)s.f_bfree, (unsigned long long)s.f_bavail,
	       (unsigned long long)s.f_files, (unsigned long long)s.f_ffree, s.f_namemax);
	CHECK(s.f_bsize > 0);
	CHECK(s.f_frsize > 0);
	CHECK(s.f_blocks > 0);
	CHECK(s.f_bfree <= s.f_blocks);
	CHECK(s.f_bavail <= s.f_bfree);
	CHECK((long long)s.f_blocks * (long long)s.f_frsize >= 16 * MiB);
	CHECK(s.f_files > 0);
	CHECK(s.f_ffree <= s.f_files);
	CHECK(s.f_files - s.f_ffree >= 1); /* at least the root */
	CHECK_EQ(s.f_namemax, 255);
	OK("statfs fields are consistent");

	/* Inodes: 100 new files use 100 more, removing them gives them back. */
	unsigned long long used0 = s.f_files - s.f_ffree;
	char name[32];
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "i%d", i);
		write_file(name, "", 0, 0644);
	}
	s = sv();
	if (s.f_files - s.f_ffree != used0 + 100)
		fail("inodes used: %llu before, %llu after creating 100 files", used0,
		     (unsigned long long)(s.f_files - s.f_ffree));
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "i%d", i);
		CHECK(unlink(name) == 0);
	}
	/* Removal is immediate for unopened files, but allow the kernel's
	 * asynchronous forget a bounded while. */
	for (int i = 0; i < 100 && sv().f_files - sv().f_ffree != used0; i++)
		usleep(100000);
	s = sv();
	if (s.f_files - s.f_ffree != used0)
		fail("inodes used: %llu before, %llu after removing the 100 files", used0,
		     (unsigned long long)(s.f_files - s.f_ffree));
	OK("statfs inode counts follow creates and unlinks");

	/* Space: 16 MiB of data must show in f_bfree, and come back on unlink. */
	long long free0 = free_bytes();
	uint8_t *buf = malloc(MiB);
	CHECK(buf);
	int fd = open("space", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	for (int i = 0; i < 16; i++) {
		fill_pattern(buf, MiB, 9, (uint64_t)i * MiB);
		pwrite_all(fd, buf, MiB, (off_t)i * MiB);
	}
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
	long long free1 = free_bytes();
	printf("free bytes: %lld before, %lld after writing 16 MiB\n", free0, free1);
	if (free0 - free1 < 15 * MiB)
		fail("writing 16 MiB lowered free space by only %lld bytes", free0 - free1);
	CHECK(unlink("space") == 0);
	long long free2 = free_bytes();
	for (int i = 0; i < 100 && free2 - free1 < 15 * MiB; i++) {
		usleep(100000);
		free2 = free_bytes();
	}
	printf("free bytes: %lld after unlink\n", free2);
	if (free2 - free1 < 15 * MiB)
		fail("removing 16 MiB raised free space by only %lld bytes", free2 - free1);
	free(buf);
	OK("statfs free space follows writes and unlinks");
	return 0;
}
