/* Sparse files (holes read as zeros and take no space, SEEK_DATA/SEEK_HOLE),
 * files beyond 4 GiB and 16 TiB, fallocate (mode 0, KEEP_SIZE, PUNCH_HOLE,
 * ZERO_RANGE), st_blocks following allocation. */
#include "check.h"

#include <linux/falloc.h>

#define MiB (1024 * 1024)
#define GiB (1024ll * MiB)

static void test_sparse(void)
{
	int fd = open("sparse", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	const off_t off = 10 * MiB;
	CHECK_EQ(pwrite(fd, "Z", 1, off), 1);
	drop_cache(fd);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, off + 1);
	if ((long long)st.st_blocks * 512 > 1 * MiB)
		fail("sparse: 10 MiB hole + 1 byte uses st_blocks=%lld (%lld bytes), expected "
		     "under 1 MiB",
		     (long long)st.st_blocks, (long long)st.st_blocks * 512);
	uint8_t *buf = malloc(MiB);
	CHECK(buf);
	for (off_t o = 0; o < off; o += MiB) {
		memset(buf, 0xAA, MiB);
		CHECK_EQ(pread_all(fd, buf, MiB, o), MiB);
		long long nz = first_nonzero(buf, MiB);
		if (nz >= 0)
			fail("sparse: hole byte %lld reads 0x%02x", (long long)o + nz, buf[nz]);
	}
	char c = 0;
	CHECK_EQ(pread(fd, &c, 1, off), 1);
	CHECK_EQ(c, 'Z');
	CHECK_EQ(pread(fd, &c, 1, off + 1), 0);
	/* SEEK_DATA/SEEK_HOLE: exact, or the generic answer (all data, hole at
	 * EOF); never beyond the data, never past EOF. */
	off_t data = lseek(fd, 0, SEEK_DATA);
	CHECK(data >= 0 && data <= off);
	off_t hole = lseek(fd, 0, SEEK_HOLE);
	CHECK(hole >= 0 && hole <= off + 1);
	CHECK_EQ(lseek(fd, off, SEEK_DATA), off);
	CHECK_EQ(lseek(fd, off, SEEK_HOLE), off + 1);
	CHECK_ERR(lseek(fd, off + 1, SEEK_DATA), ENXIO);
	CHECK_ERR(lseek(fd, off + 100, SEEK_HOLE), ENXIO);
	CHECK(close(fd) == 0);
	CHECK(unlink("sparse") == 0);
	free(buf);
	OK("sparse file: holes read as zeros, small st_blocks");
}

static void test_large(void)
{
	int fd = open("large", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	/* Straddle the 4 GiB boundary (32-bit offset truncation) and go past it. */
	const off_t b4 = 4 * GiB;
	CHECK_EQ(pwrite(fd, "ABCD", 4, b4 - 2), 4);
	CHECK_EQ(pwrite(fd, "END", 3, 5 * GiB + 3), 3);
	drop_cache(fd);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, 5 * GiB + 6);
	if ((long long)st.st_blocks * 512 > 4 * MiB)
		fail("large: 5 GiB sparse file with 7 bytes uses %lld bytes",
		     (long long)st.st_blocks * 512);
	char buf[16];
	memset(buf, 'x', sizeof buf);
	CHECK_EQ(pread(fd, buf, 8, b4 - 4), 8);
	CHECK(memcmp(buf, "\0\0ABCD\0\0", 8) == 0);
	CHECK_EQ(pread(fd, buf, 16, 5 * GiB), 6);
	CHECK(memcmp(buf, "\0\0\0END", 6) == 0);
	/* Nothing aliased onto offset 0 or 1 GiB (offset wrap-around). */
	CHECK_EQ(pread(fd, buf, 8, 0), 8);
	CHECK_EQ(first_nonzero((uint8_t *)buf, 8), -1);
	CHECK_EQ(pread(fd, buf, 8, GiB + 1), 8);
	CHECK_EQ(first_nonzero((uint8_t *)buf, 8), -1);
	/* Truncate below 4 GiB and back up: the tail must be zeros again. */
	CHECK(ftruncate(fd, b4 - 1) == 0);
	CHECK(ftruncate(fd, 5 * GiB + 6) == 0);
	drop_cache(fd);
	CHECK_EQ(pread(fd, buf, 8, b4 - 4), 8);
	CHECK(memcmp(buf, "\0\0A\0\0\0\0\0", 8) == 0);
	CHECK_EQ(pread(fd, buf, 16, 5 * GiB), 6);
	CHECK_EQ(first_nonzero((uint8_t *)buf, 6), -1);
	/* Far offsets (17 TiB: block numbers beyond 32 bits for any block size up
	 * to 4 KiB): either EFBIG, or the data lands there and nowhere else. */
	const off_t far = 17ll * 1024 * GiB + 5;
	errno = 0;
	if (pwrite(fd, "far", 3, far) == 3) {
		drop_cache(fd);
		CHECK(fstat(fd, &st) == 0);
		CHECK_EQ(st.st_size, far + 3);
		CHECK_EQ(pread(fd, buf, 3, far), 3);
		CHECK(memcmp(buf, "far", 3) == 0);
		/* Not aliased onto 1 TiB + 5 (32-bit block number wrap) or 5. */
		CHECK_EQ(pread(fd, buf, 3, far - 16ll * 1024 * GiB), 3);
		CHECK_EQ(first_nonzero((uint8_t *)buf, 3), -1);
		CHECK_EQ(pread(fd, buf, 3, 5), 3);
		CHECK_EQ(first_nonzero((uint8_t *)buf, 3), -1);
	} else {
		int e = errno;
		CHECK_EQ(e, EFBIG);
		printf("note - a write at 17 TiB gives EFBIG\n");
	}
	CHECK(close(fd) == 0);
	CHECK(unlink("large") == 0);
	OK("file larger than 4 GiB");
}

static long long blocks_of(int fd)
{
	struct stat st;
	CHECK(fsync(fd) == 0);
	CHECK(fstat(fd, &st) == 0);
	return (long long)st.st_blocks * 512;
}

static void test_fallocate(void)
{
	uint8_t *buf = malloc(2 * MiB);
	CHECK(buf);
	int fd = open("fa", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	/* mode 0: extends the size, reads zeros, allocates. */
	CHECK(fallocate(fd, 0, 0, MiB) == 0);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, MiB);
	memset(buf, 0xAA, MiB);
	CHECK_EQ(pread_all(fd, buf, MiB, 0), MiB);
	CHECK_EQ(first_nonzero(buf, MiB), -1);
	long long used = blocks_of(fd);
	if (used < MiB)
		fail("fallocate mode 0 of 1 MiB: st_blocks shows %lld bytes allocated", used);
	/* KEEP_SIZE: allocates beyond EOF without changing the size. */
	CHECK(fallocate(fd, FALLOC_FL_KEEP_SIZE, MiB, MiB) == 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, MiB);
	CHECK_EQ(pread(fd, buf, 10, MiB), 0);
	CHECK(ftruncate(fd, 0) == 0);

	/* PUNCH_HOLE (with KEEP_SIZE, as Linux requires). */
	fill_pattern(buf, 2 * MiB, 3, 0);
	pwrite_all(fd, buf, 2 * MiB, 0);
	long long before = blocks_of(fd);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 256 * 1024, 512 * 1024) ==
	      0);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 3000) == 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, 2 * MiB);
	for (int pass = 0; pass < 2; pass++) {
		memset(buf, 0xEE, 2 * MiB);
		CHECK_EQ(pread_all(fd, buf, 2 * MiB, 0), 2 * MiB);
		CHECK_EQ(pattern_mismatch(buf, 1000, 3, 0), -1);
		CHECK_EQ(first_nonzero(buf + 1000, 3000), -1);
		CHECK_EQ(pattern_mismatch(buf + 4000, 256 * 1024 - 4000, 3, 4000), -1);
		CHECK_EQ(first_nonzero(buf + 256 * 1024, 512 * 1024), -1);
		CHECK_EQ(pattern_mismatch(buf + 768 * 1024, 2 * MiB - 768 * 1024, 3, 768 * 1024),
			 -1);
		drop_cache(fd);
	}
	long long after = blocks_of(fd);
	/* ZERO_RANGE is optional: it works, or it is refused as unsupported. */
	errno = 0;
	if (fallocate(fd, FALLOC_FL_ZERO_RANGE, 2 * MiB - 5000, 3000) == 0) {
		memset(buf, 0xEE, 2 * MiB);
		CHECK_EQ(pread_all(fd, buf, 2 * MiB, 0), 2 * MiB);
		CHECK_EQ(first_nonzero(buf + 2 * MiB - 5000, 3000), -1);
		CHECK_EQ(pattern_mismatch(buf + 2 * MiB - 2000, 2000, 3, 2 * MiB - 2000), -1);
		CHECK_EQ(pattern_mismatch(buf + 768 * 1024, 2 * MiB - 768 * 1024 - 5000, 3,
					  768 * 1024),
			 -1);
	} else {
		int e = errno;
		CHECK_EQ(e, EOPNOTSUPP);
	}
	if (after > before - 256 * 1024)
		fail("punch hole of 512 KiB freed only %lld bytes (st_blocks %lld -> %lld bytes)",
		     before - after, before, after);
	CHECK(close(fd) == 0);
	CHECK(unlink("fa") == 0);
	free(buf);
	OK("fallocate: mode 0, KEEP_SIZE, PUNCH_HOLE");
}

static void test_blocks(void)
{
	uint8_t *buf = malloc(4 * MiB);
	CHECK(buf);
	fill_pattern(buf, 4 * MiB, 5, 0);
	int fd = open("dense", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	pwrite_all(fd, buf, 4 * MiB, 0);
	long long used = blocks_of(fd);
	if (used < 4 * MiB || used > 5 * MiB)
		fail("4 MiB dense file: st_blocks shows %lld bytes, expected 4..5 MiB", used);
	CHECK(ftruncate(fd, MiB) == 0);
	used = blocks_of(fd);
	if (used < MiB || used > 2 * MiB)
		fail("after truncate to 1 MiB: st_blocks shows %lld bytes, expected 1..2 MiB",
		     used);
	CHECK(close(fd) == 0);
	CHECK(unlink("dense") == 0);
	free(buf);
	OK("st_blocks reflects allocation");
}

/* A file of scattered one-byte writes, one every 4080 bytes (the block size
 * of new stores): every block is a short stored value and a hole, so a read
 * of 1 MiB is some 500 pieces. It must come back whole: a short reply from
 * the file system is end of file to the kernel, which then shrinks its
 * cached size (cp copied only the first 650 KB, and stat said so too). */
static void test_fragmented(void)
{
	const int stride = 4080, n = 600;
	const off_t size = (off_t)(n - 1) * stride + 1;
	int fd = open("frag", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	for (int k = 0; k < n; k++)
		pwrite_all(fd, &(char){(char)('A' + k % 26)}, 1, (off_t)k * stride);
	drop_cache(fd);
	uint8_t *buf = malloc((size_t)size);
	CHECK(buf);
	memset(buf, 0xEE, (size_t)size);
	CHECK_EQ(pread_all(fd, buf, (size_t)size, 0), size);
	for (off_t i = 0; i < size; i++) {
		uint8_t want = i % stride ? 0 : (uint8_t)('A' + i / stride % 26);
		if (buf[i] != want)
			fail("fragmented file: byte %lld reads 0x%02x, expected 0x%02x",
			     (long long)i, buf[i], want);
	}
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, size);
	CHECK(close(fd) == 0);

	/* O_DIRECT: one read of 1 MiB is one request, and must not come short. */
	fd = open("frag", O_RDONLY | O_DIRECT);
	CHECK(fd >= 0);
	void *dbuf;
	CHECK(posix_memalign(&dbuf, 4096, MiB) == 0);
	CHECK_EQ(pread(fd, dbuf, MiB, 0), MiB);
	CHECK(memcmp(dbuf, buf, MiB) == 0);
	CHECK(close(fd) == 0);
	CHECK(unlink("frag") == 0);
	free(dbuf);
	free(buf);
	OK("fragmented file (a short value and a hole per block) reads back whole");
}

/* A hole or a truncate that frees more than one transaction of the store
 * may (64 MiB: dbfs_op_free_piece) is done in pieces; through the mount it
 * is still one call with the usual result. */
static void test_big_trim(void)
{
	const size_t chunk = 4 * MiB;
	const off_t size = 200 * MiB + 777, hole = MiB + 100, hole_end = 150 * MiB + 5;
	uint8_t *buf = malloc(chunk), *got = malloc(chunk);
	CHECK(buf && got);
	int fd = open("bigtrim", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	for (off_t off = 0; off < size; off += (off_t)chunk) {
		size_t n = size - off < (off_t)chunk ? (size_t)(size - off) : chunk;
		fill_pattern(buf, n, 9, (uint64_t)off);
		pwrite_all(fd, buf, n, off);
	}
	CHECK(fsync(fd) == 0);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, hole, hole_end - hole) == 0);
	drop_cache(fd);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, size);
	if (st.st_blocks * 512LL > size - (hole_end - hole) + 4 * MiB)
		fail("after a 149 MiB hole: st_blocks shows %lld bytes", st.st_blocks * 512LL);
	/* the edges of the hole, and inside it */
	CHECK_EQ(pread_all(fd, got, 200, hole - 100), 200);
	fill_pattern(buf, 100, 9, (uint64_t)(hole - 100));
	CHECK(memcmp(got, buf, 100) == 0);
	for (int i = 100; i < 200; i++)
		CHECK(got[i] == 0);
	CHECK_EQ(pread_all(fd, got, chunk, 80 * MiB), (ssize_t)chunk);
	for (size_t i = 0; i < chunk; i++)
		CHECK(got[i] == 0);
	CHECK_EQ(pread_all(fd, got, 200, hole_end - 100), 200);
	fill_pattern(buf, 100, 9, (uint64_t)hole_end);
	for (int i = 0; i < 100; i++)
		CHECK(got[i] == 0);
	CHECK(memcmp(got + 100, buf, 100) == 0);
	/* truncate what is left to 1000 bytes */
	CHECK(ftruncate(fd, 1000) == 0);
	drop_cache(fd);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, 1000);
	if (st.st_blocks * 512LL > 64 * 1024)
		fail("after truncate to 1000 bytes: st_blocks shows %lld bytes", st.st_blocks * 512LL);
	CHECK_EQ(pread_all(fd, got, chunk, 0), 1000);
	fill_pattern(buf, 1000, 9, 0);
	CHECK(memcmp(got, buf, 1000) == 0);
	/* grown again: zeros, not the old bytes */
	CHECK(ftruncate(fd, 100 * MiB) == 0);
	CHECK_EQ(pread_all(fd, got, chunk, 90 * MiB), (ssize_t)chunk);
	for (size_t i = 0; i < chunk; i++)
		CHECK(got[i] == 0);
	CHECK(close(fd) == 0);
	CHECK(unlink("bigtrim") == 0);
	free(buf);
	free(got);
	OK("a 149 MiB hole and a truncate of 200 MiB, done in pieces, read right");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_sparse();
	test_large();
	test_fallocate();
	test_blocks();
	test_fragmented();
	test_big_trim();
	return 0;
}
