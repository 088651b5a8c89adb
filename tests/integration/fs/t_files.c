/* Regular files: open flags, reads and writes at any offset, O_DIRECT,
 * large and tiny I/O, truncate. Sparse files and fallocate are in t_sparse.c. */
#include "check.h"

#define MiB (1024 * 1024)

static void test_open_flags(void)
{
	int fd = open("f", O_RDWR | O_CREAT | O_EXCL, 0640);
	CHECK(fd >= 0);
	struct stat st = stat_of("f");
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0640);
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(st.st_nlink, 1);
	CHECK_EQ(st.st_uid, geteuid());
	CHECK_EQ(st.st_gid, getegid());
	CHECK_EQ(write(fd, "hello world", 11), 11);
	CHECK(close(fd) == 0);

	CHECK_ERR(open("f", O_RDWR | O_CREAT | O_EXCL, 0640), EEXIST);
	/* O_CREAT without O_EXCL opens the existing file and keeps its data. */
	fd = open("f", O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(stat_of("f").st_mode & 07777, 0640);
	char buf[32] = { 0 };
	CHECK_EQ(read(fd, buf, sizeof buf), 11);
	CHECK(memcmp(buf, "hello world", 11) == 0);
	CHECK(close(fd) == 0);

	fd = open("f", O_RDWR | O_TRUNC);
	CHECK(fd >= 0);
	CHECK_EQ(stat_of("f").st_size, 0);
	CHECK_EQ(read(fd, buf, sizeof buf), 0);
	CHECK(close(fd) == 0);

	/* O_TRUNC must drop the old bytes, not only the size. */
	CHECK(truncate("f", 11) == 0);
	fd = open("f", O_RDONLY);
	CHECK(fd >= 0);
	memset(buf, 'x', sizeof buf);
	CHECK_EQ(read(fd, buf, sizeof buf), 11);
	CHECK_EQ(first_nonzero((uint8_t *)buf, 11), -1);
	CHECK(close(fd) == 0);

	/* O_APPEND: every write lands at the end, whatever the offset. */
	CHECK(truncate("f", 0) == 0);
	int a = open("f", O_WRONLY | O_APPEND);
	int b = open("f", O_WRONLY | O_APPEND);
	CHECK(a >= 0 && b >= 0);
	CHECK_EQ(write(a, "one,", 4), 4);
	CHECK_EQ(write(b, "two,", 4), 4);
	CHECK(lseek(a, 0, SEEK_SET) == 0);
	CHECK_EQ(write(a, "three", 5), 5);
	CHECK(close(a) == 0 && close(b) == 0);
	size_t len;
	char *s = read_file("f", &len);
	CHECK_EQ(len, 13);
	CHECK(strcmp(s, "one,two,three") == 0);
	free(s);

	/* O_RDONLY descriptors refuse writes, O_WRONLY refuse reads. */
	fd = open("f", O_RDONLY);
	CHECK_ERR(write(fd, "x", 1), EBADF);
	CHECK(close(fd) == 0);
	fd = open("f", O_WRONLY);
	CHECK_ERR(read(fd, buf, 1), EBADF);
	CHECK(close(fd) == 0);
	CHECK(unlink("f") == 0);
	CHECK_ERR(open("f", O_RDONLY), ENOENT);
	OK("open flags: O_CREAT O_EXCL O_TRUNC O_APPEND");
}

/* Random pwrites into a 3 MiB file checked against a model, first through the
 * page cache, then with the cache dropped, then through O_DIRECT. */
static void test_pread_pwrite(void)
{
	const size_t size = 3 * MiB;
	uint8_t *model = calloc(1, size), *buf = malloc(size);
	CHECK(model && buf);
	int fd = open("rw", O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0);
	static const off_t offs[] = { 0, 1, 4095, 4096, 4097, 65535, 65536, 131071, 1048575,
				      1048576 + 7, 2 * MiB - 1 };
	uint32_t rnd = 12345;
	size_t maxend = 0;
	for (int i = 0; i < 200; i++) {
		off_t off;
		size_t len;
		rnd = rnd * 1103515245 + 12345;
		if (i < (int)(sizeof offs / sizeof offs[0])) {
			off = offs[i];
			len = 1 + (rnd >> 8) % 9000;
		} else {
			off = (rnd >> 4) % (size - 300000);
			rnd = rnd * 1103515245 + 12345;
			len = 1 + (rnd >> 8) % 300000;
		}
		fill_pattern(buf, len, (uint32_t)i, 0);
		memcpy(model + off, buf, len);
		pwrite_all(fd, buf, len, off);
		if ((size_t)off + len > maxend)
			maxend = (size_t)off + len;
	}
	CHECK_EQ(lseek(fd, 0, SEEK_END), maxend);
	CHECK_EQ(stat_of("rw").st_size, maxend);
	CHECK_EQ(pread_all(fd, buf, size, 0), maxend);
	CHECK(memcmp(buf, model, maxend) == 0);

	drop_cache(fd);
	CHECK(close(fd) == 0);
	fd = open("rw", O_RDONLY);
	CHECK(fd >= 0);
	memset(buf, 0xEE, size);
	CHECK_EQ(pread_all(fd, buf, size, 0), maxend);
	for (size_t i = 0; i < maxend; i++)
		if (buf[i] != model[i])
			fail("rw: byte %zu is 0x%02x after reopen, expected 0x%02x", i, buf[i],
			     model[i]);
	/* Unaligned reads across block boundaries. */
	for (off_t off = 4090; off < (off_t)maxend; off += 65536 + 3) {
		size_t n = pread_all(fd, buf, 20, off);
		CHECK(n > 0);
		CHECK(memcmp(buf, model + off, n) == 0);
	}
	CHECK(close(fd) == 0);

	/* Static and aligned for O_DIRECT; a heap buffer from posix_memalign
	 * made gcc's -Wnonnull under -fsanitize=address,undefined see a NULL. */
	static uint8_t dbuf[2 * MiB] __attribute__((aligned(4096)));
	fd = open("rw", O_RDONLY | O_DIRECT);
	CHECK(fd >= 0);
	memset(dbuf, 0xEE, 2 * MiB);
	CHECK_EQ(pread(fd, dbuf, MiB, MiB), MiB);
	CHECK(memcmp(dbuf, model + MiB, MiB) == 0);
	CHECK(close(fd) == 0);

	/* O_DIRECT writes are accepted and land where they should. */
	fd = open("rw", O_RDWR | O_DIRECT);
	CHECK(fd >= 0);
	fill_pattern(dbuf, 8192, 999, 0);
	CHECK_EQ(pwrite(fd, dbuf, 8192, 4096), 8192);
	memcpy(model + 4096, dbuf, 8192);
	CHECK(close(fd) == 0);
	fd = open("rw", O_RDONLY);
	CHECK_EQ(pread_all(fd, buf, 16384, 0), 16384);
	CHECK(memcmp(buf, model, 16384) == 0);
	CHECK(close(fd) == 0);

	CHECK(unlink("rw") == 0);
	free(model);
	free(buf);
	OK("pread/pwrite at any offset, O_DIRECT");
}

static void test_truncate(void)
{
	const size_t n = 100000;
	uint8_t *buf = malloc(300000);
	CHECK(buf);
	fill_pattern(buf, n, 7, 0);
	write_file("t", buf, n, 0644);
	CHECK(truncate("t", 50000) == 0);
	CHECK_EQ(stat_of("t").st_size, 50000);
	CHECK(truncate("t", 200000) == 0);
	CHECK_EQ(stat_of("t").st_size, 200000);
	int fd = open("t", O_RDWR);
	CHECK(fd >= 0);
	memset(buf, 0xAA, 300000);
	CHECK_EQ(pread_all(fd, buf, 300000, 0), 200000);
	CHECK_EQ(pattern_mismatch(buf, 50000, 7, 0), -1);
	long long nz = first_nonzero(buf + 50000, 150000);
	if (nz >= 0)
		fail("truncate: byte %lld reads 0x%02x after truncate down and up", 50000 + nz,
		     buf[50000 + nz]);
	/* Same after the cache is dropped (the file system must have cut the data). */
	drop_cache(fd);
	memset(buf, 0xAA, 300000);
	CHECK_EQ(pread_all(fd, buf, 300000, 0), 200000);
	CHECK_EQ(pattern_mismatch(buf, 50000, 7, 0), -1);
	nz = first_nonzero(buf + 50000, 150000);
	if (nz >= 0)
		fail("truncate: byte %lld reads 0x%02x after drop cache", 50000 + nz,
		     buf[50000 + nz]);
	/* Truncate inside a block, then write beyond: the gap is zeros. */
	CHECK(ftruncate(fd, 4097) == 0);
	CHECK_EQ(pwrite(fd, "q", 1, 10000), 1);
	drop_cache(fd);
	CHECK_EQ(pread_all(fd, buf, 20000, 0), 10001);
	CHECK_EQ(pattern_mismatch(buf, 4097, 7, 0), -1);
	CHECK_EQ(first_nonzero(buf + 4097, 10000 - 4097), -1);
	CHECK(ftruncate(fd, 0) == 0);
	CHECK_EQ(pread(fd, buf, 10, 0), 0);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, 0);
	CHECK(close(fd) == 0);
	CHECK_ERR(truncate("t", -1), EINVAL);
	CHECK(unlink("t") == 0);
	free(buf);
	OK("truncate up and down");
}

/* One 16 MiB write and read (split into many FUSE requests), and thousands
 * of one-byte appends (merged or not by the cache). */
static void test_big_and_tiny_io(void)
{
	const size_t size = 16 * MiB;
	uint8_t *buf;
	CHECK(posix_memalign((void **)&buf, 4096, size) == 0);
	fill_pattern(buf, size, 41, 0);
	int fd = open("bigio", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, size), size);
	CHECK(close(fd) == 0);
	fd = open("bigio", O_RDONLY | O_DIRECT);
	CHECK(fd >= 0);
	memset(buf, 0, size);
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		CHECK(n > 0);
		got += (size_t)n;
	}
	CHECK_EQ(pattern_mismatch(buf, size, 41, 0), -1);
	CHECK(close(fd) == 0);
	CHECK(unlink("bigio") == 0);

	fd = open("tiny", O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644);
	CHECK(fd >= 0);
	for (int i = 0; i < 5000; i++) {
		uint8_t c = pattern_byte(42, (uint64_t)i);
		CHECK_EQ(write(fd, &c, 1), 1);
	}
	drop_cache(fd);
	CHECK(close(fd) == 0);
	fd = open("tiny", O_RDONLY);
	CHECK(fd >= 0);
	drop_cache(fd);
	CHECK_EQ(pread_all(fd, buf, 10000, 0), 5000);
	CHECK_EQ(pattern_mismatch(buf, 5000, 42, 0), -1);
	CHECK(close(fd) == 0);
	CHECK(unlink("tiny") == 0);
	free(buf);
	OK("16 MiB single write/read, 5000 one-byte appends");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_open_flags();
	test_pread_pwrite();
	test_big_and_tiny_io();
	test_truncate();
	return 0;
}
