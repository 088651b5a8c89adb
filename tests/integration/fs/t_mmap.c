/* Shared writable mmap and copy_file_range. */
#include "check.h"

#include <sys/mman.h>

#define MiB (1024 * 1024)

static void test_shared_mmap(void)
{
	const size_t size = 2 * MiB + 12345;
	int fd = open("m", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)size) == 0);
	uint8_t *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	CHECK_EQ(first_nonzero(map, size), -1);
	fill_pattern(map, size, 11, 0);
	/* A read() through another descriptor sees the mapping's bytes. */
	int fd2 = open("m", O_RDONLY);
	CHECK(fd2 >= 0);
	uint8_t *buf = malloc(size);
	CHECK(buf);
	CHECK_EQ(pread_all(fd2, buf, size, 0), size);
	CHECK_EQ(pattern_mismatch(buf, size, 11, 0), -1);
	/* And a write() is seen by the mapping. */
	CHECK_EQ(pwrite(fd2 = open("m", O_RDWR), "WXYZ", 4, 4094), 4);
	CHECK(memcmp(map + 4094, "WXYZ", 4) == 0);
	CHECK(close(fd2) == 0);
	memcpy(buf, map, size);
	CHECK(msync(map, size, MS_SYNC) == 0);
	CHECK(munmap(map, size) == 0);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);

	/* Bytes reach the file system: read them bypassing the page cache. */
	fd = open("m", O_RDONLY);
	CHECK(fd >= 0);
	drop_cache(fd);
	uint8_t *back = malloc(size);
	CHECK(back);
	memset(back, 0, size);
	CHECK_EQ(pread_all(fd, back, size, 0), size);
	for (size_t i = 0; i < size; i++)
		if (back[i] != buf[i])
			fail("mmap: byte %zu is 0x%02x after msync+reopen, expected 0x%02x", i,
			     back[i], buf[i]);
	CHECK(close(fd) == 0);

	uint8_t *dbuf;
	CHECK(posix_memalign((void **)&dbuf, 4096, MiB) == 0);
	fd = open("m", O_RDONLY | O_DIRECT);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, dbuf, MiB, MiB), MiB);
	CHECK(memcmp(dbuf, buf + MiB, MiB) == 0);
	CHECK(close(fd) == 0);
	free(dbuf);

	/* Dirty pages written back by munmap+close alone (no msync). */
	fd = open("m", O_RDWR);
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	memcpy(map + 100, "mapped-write", 12);
	CHECK(munmap(map, 8192) == 0);
	CHECK(close(fd) == 0);
	fd = open("m", O_RDONLY);
	drop_cache(fd);
	char s[16] = { 0 };
	CHECK_EQ(pread(fd, s, 12, 100), 12);
	CHECK(memcmp(s, "mapped-write", 12) == 0);
	CHECK(close(fd) == 0);

	CHECK(unlink("m") == 0);
	free(buf);
	free(back);
	OK("shared writable mmap");
}

static void copy_range(int in, off_t off_in, int out, off_t off_out, size_t len)
{
	while (len > 0) {
		ssize_t n = copy_file_range(in, &off_in, out, &off_out, len, 0);
		CHECK(n > 0);
		len -= (size_t)n;
	}
}

static void test_copy_file_range(void)
{
	const size_t size = 3 * MiB;
	uint8_t *buf = malloc(size);
	CHECK(buf);
	fill_pattern(buf, size, 21, 0);
	write_file("src", buf, size, 0644);
	int in = open("src", O_RDONLY);
	int out = open("dst", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(in >= 0 && out >= 0);
	CHECK_EQ(write(out, "head", 4), 4);
	copy_range(in, 4096 + 13, out, 100, 2 * MiB);
	/* copy_file_range with explicit offsets leaves the file offsets alone. */
	CHECK_EQ(lseek(in, 0, SEEK_CUR), 0);
	CHECK_EQ(lseek(out, 0, SEEK_CUR), 4);
	struct stat st;
	CHECK(fstat(out, &st) == 0);
	CHECK_EQ(st.st_size, 100 + 2 * MiB);
	drop_cache(out);
	memset(buf, 0xEE, size);
	CHECK_EQ(pread_all(out, buf, size, 0), 100 + 2 * MiB);
	CHECK(memcmp(buf, "head", 4) == 0);
	CHECK_EQ(first_nonzero(buf + 4, 96), -1);
	CHECK_EQ(pattern_mismatch(buf + 100, 2 * MiB, 21, 4096 + 13), -1);
	/* Copying past the source's end copies nothing. */
	off_t oi = (off_t)size, oo = 0;
	CHECK_EQ(copy_file_range(in, &oi, out, &oo, 100, 0), 0);
	/* Whole-file copy via the file offsets. */
	int out2 = open("dst2", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(out2 >= 0);
	size_t left = size;
	while (left > 0) {
		ssize_t n = copy_file_range(in, NULL, out2, NULL, left, 0);
		CHECK(n > 0);
		left -= (size_t)n;
	}
	CHECK_EQ(lseek(in, 0, SEEK_CUR), size);
	drop_cache(out2);
	CHECK_EQ(pread_all(out2, buf, size, 0), size);
	CHECK_EQ(pattern_mismatch(buf, size, 21, 0), -1);
	CHECK(close(in) == 0 && close(out) == 0 && close(out2) == 0);
	CHECK(unlink("src") == 0 && unlink("dst") == 0 && unlink("dst2") == 0);
	free(buf);
	OK("copy_file_range");
}

static void test_private_mmap(void)
{
	write_file("p", "private-original", 16, 0644);
	int fd = open("p", O_RDWR);
	CHECK(fd >= 0);
	char *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(map != MAP_FAILED);
	memcpy(map, "PRIVATE", 7);
	CHECK(munmap(map, 4096) == 0);
	CHECK(close(fd) == 0);
	size_t len;
	char *s = read_file("p", &len);
	CHECK(len == 16 && memcmp(s, "private-original", 16) == 0);
	free(s);
	CHECK(unlink("p") == 0);
	OK("private mmap does not change the file");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_shared_mmap();
	test_private_mmap();
	test_copy_file_range();
	return 0;
}
