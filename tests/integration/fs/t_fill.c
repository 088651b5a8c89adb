/* Fill the file system until it refuses, then free space and go on.
 *
 *   t_fill MOUNT OUTSIDE bytes ENOSPC|EDQUOT MAX_MIB
 *     writes files before filling, then writes 1 MiB chunks (each fsynced)
 *     until a write or fsync fails: it must fail with the given errno within
 *     MAX_MIB MiB; the files written before are intact; after deleting the
 *     filler (and one of the earlier files) new writes succeed again.
 *   t_fill MOUNT OUTSIDE inodes ENOSPC|EDQUOT MAX_FILES
 *     creates empty files until creation fails with the given errno within
 *     MAX_FILES files; after removing some, creating works again.
 *   t_fill MOUNT OUTSIDE verify
 *     checks the files that survived a previous "bytes" run (after a remount).
 */
#include "check.h"

#define MiB (1024 * 1024)
#define KEEP 4

static int errno_named(const char *s)
{
	if (strcmp(s, "ENOSPC") == 0)
		return ENOSPC;
	if (strcmp(s, "EDQUOT") == 0)
		return EDQUOT;
	fail("unknown errno name %s", s);
}

static void write_keep(int i, size_t size)
{
	char name[32];
	snprintf(name, sizeof name, "keep%d", i);
	uint8_t *buf = malloc(size);
	CHECK(buf);
	fill_pattern(buf, size, 100 + (uint32_t)i, 0);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	pwrite_all(fd, buf, size, 0);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
	free(buf);
}

static void verify_keep(int i, size_t size)
{
	char name[32];
	snprintf(name, sizeof name, "keep%d", i);
	uint8_t *buf = malloc(size + 1);
	CHECK(buf);
	int fd = open(name, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	size_t n = pread_all(fd, buf, size + 1, 0);
	if (n != size)
		fail("%s has %zu bytes, expected %zu", name, n, size);
	long long bad = pattern_mismatch(buf, size, 100 + (uint32_t)i, 0);
	if (bad >= 0)
		fail("%s: byte %lld is damaged", name, bad);
	CHECK(close(fd) == 0);
	free(buf);
}

/* Write 1 MiB chunks until refused; returns how many MiB were accepted. */
static long fill(const char *name, int want, long max_mib)
{
	uint8_t *buf = malloc(MiB);
	CHECK(buf);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	long mib;
	int err = 0;
	const char *call = "";
	for (mib = 0; mib <= max_mib; mib++) {
		fill_pattern(buf, MiB, 7, (uint64_t)mib * MiB);
		ssize_t n = pwrite(fd, buf, MiB, (off_t)mib * MiB);
		if (n < 0) {
			err = errno;
			call = "write";
			break;
		}
		if (n < MiB) /* a short write: the next one gives the error */
			continue;
		if (fsync(fd) != 0) {
			err = errno;
			call = "fsync";
			break;
		}
	}
	if (err == 0)
		fail("%s: still no error after writing %ld MiB", name, max_mib);
	if (err != want)
		fail("%s: %s failed after %ld MiB with errno %d (%s), expected %s", name, call,
		     mib, err, strerror(err), strerror(want));
	/* close may report the same error again; anything else is wrong. */
	if (close(fd) != 0 && errno != want)
		fail("%s: close failed with errno %d (%s)", name, errno, strerror(errno));
	free(buf);
	return mib;
}

static void bytes_mode(int want, long max_mib)
{
	for (int i = 0; i < KEEP; i++)
		write_keep(i, (size_t)MiB + 1000 * (size_t)i);
	long got = fill("filler", want, max_mib);
	printf("filler accepted %ld MiB before %s\n", got, strerror(want));
	for (int i = 0; i < KEEP; i++)
		verify_keep(i, (size_t)MiB + 1000 * (size_t)i);
	OK("refused with the expected errno; earlier files intact");

	/* While full, metadata operations either work or give the same errno;
	 * never EIO or anything else. */
	struct {
		const char *what;
		int rc;
	} ops[5];
	errno = 0;
	ops[0].what = "mkdir", ops[0].rc = mkdir("full-dir", 0755) == 0 ? 0 : errno;
	errno = 0;
	int cfd = open("full-file", O_WRONLY | O_CREAT, 0644);
	ops[1].what = "create", ops[1].rc = cfd >= 0 ? 0 : errno;
	if (cfd >= 0)
		close(cfd);
	errno = 0;
	ops[2].what = "symlink", ops[2].rc = symlink("target", "full-link") == 0 ? 0 : errno;
	errno = 0;
	ops[3].what = "rename", ops[3].rc = rename("keep3", "keep3.renamed") == 0 ? 0 : errno;
	if (ops[3].rc == 0)
		CHECK(rename("keep3.renamed", "keep3") == 0);
	errno = 0;
	ops[4].what = "chmod", ops[4].rc = chmod("keep2", 0600) == 0 ? 0 : errno;
	for (int i = 0; i < 5; i++) {
		if (ops[i].rc != 0 && ops[i].rc != want)
			fail("%s on a full file system failed with errno %d (%s), expected "
			     "success or %s",
			     ops[i].what, ops[i].rc, strerror(ops[i].rc), strerror(want));
		printf("%s when full: %s\n", ops[i].what,
		       ops[i].rc ? strerror(ops[i].rc) : "ok");
	}
	for (int i = 1; i < KEEP; i++)
		verify_keep(i, (size_t)MiB + 1000 * (size_t)i);
	OK("metadata operations when full: success or the expected errno");

	/* Freeing space makes writes work again. */
	CHECK(unlink("filler") == 0);
	CHECK(unlink("keep0") == 0);
	struct stat st;
	int fd = -1;
	for (int i = 0; i < 50; i++) { /* deferred reclaim: bounded wait */
		uint8_t *buf = malloc(2 * MiB);
		CHECK(buf);
		fill_pattern(buf, 2 * MiB, 55, 0);
		/* the create itself may still find no room (same wait) */
		fd = open("after", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int ok = 0, e = errno;
		if (fd >= 0) {
			ssize_t n = pwrite(fd, buf, 2 * MiB, 0);
			ok = n == 2 * MiB && fsync(fd) == 0;
			e = errno;
			CHECK(close(fd) == 0);
		}
		free(buf);
		if (ok)
			break;
		if (e != want)
			fail("write after freeing space: errno %d (%s)", e, strerror(e));
		if (i == 49)
			fail("write after freeing space still fails with %s after 5 s",
			     strerror(e));
		usleep(100000);
	}
	CHECK(stat("after", &st) == 0);
	CHECK_EQ(st.st_size, 2 * MiB);
	uint8_t *buf = malloc(2 * MiB);
	CHECK(buf);
	fd = open("after", O_RDONLY);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK_EQ(pread_all(fd, buf, 2 * MiB, 0), 2 * MiB);
	CHECK_EQ(pattern_mismatch(buf, 2 * MiB, 55, 0), -1);
	CHECK(close(fd) == 0);
	free(buf);
	for (int i = 1; i < KEEP; i++)
		verify_keep(i, (size_t)MiB + 1000 * (size_t)i);
	/* Metadata works too. */
	CHECK(mkdir("dir-after", 0755) == 0);
	write_file("dir-after/small", "small", 5, 0644);
	OK("writes succeed again after deleting files");
}

static void verify_mode(void)
{
	for (int i = 1; i < KEEP; i++)
		verify_keep(i, (size_t)MiB + 1000 * (size_t)i);
	size_t len;
	char *s = read_file("dir-after/small", &len);
	CHECK(len == 5 && memcmp(s, "small", 5) == 0);
	free(s);
	OK("files intact after remount");
}

static void inodes_mode(int want, long max_files)
{
	CHECK(mkdir("many", 0755) == 0);
	char name[64];
	long n;
	int err = 0;
	for (n = 0; n <= max_files; n++) {
		snprintf(name, sizeof name, "many/f%ld", n);
		int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0) {
			err = errno;
			break;
		}
		CHECK(close(fd) == 0);
	}
	if (err == 0)
		fail("created %ld files without an error", max_files + 1);
	if (err != want)
		fail("creating file %ld failed with errno %d (%s), expected %s", n, err,
		     strerror(err), strerror(want));
	printf("created %ld files before %s\n", n, strerror(want));
	/* The limit counts every inode (the root and "many" included), so a few
	 * fewer than MAX_FILES fit, but not many fewer. */
	if (n < max_files - 10)
		fail("refused after only %ld files, limit %ld", n, max_files);
	/* mkdir, symlink, mknod are refused the same way. */
	CHECK_ERR(mkdir("many/d", 0755), want);
	CHECK_ERR(symlink("x", "many/l"), want);
	CHECK_ERR(mkfifo("many/p", 0644), want);
	/* Hard links do not use an inode. */
	CHECK(link("many/f0", "many/link") == 0);
	OK("inode limit refused with the expected errno");
	for (long i = 0; i < 5; i++) {
		snprintf(name, sizeof name, "many/f%ld", i + 1);
		CHECK(unlink(name) == 0);
	}
	int ok = 0;
	for (int i = 0; i < 50 && !ok; i++) {
		int fd = open("many/again", O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd >= 0) {
			CHECK(close(fd) == 0);
			ok = 1;
		} else {
			if (errno != want)
				fail("create after unlink: errno %d", errno);
			usleep(100000);
		}
	}
	if (!ok)
		fail("still cannot create a file 5 s after removing 5");
	OK("creating works again after removing files");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	if (argc >= 4 && strcmp(argv[3], "verify") == 0) {
		verify_mode();
		return 0;
	}
	if (argc < 6)
		fail("usage: t_fill MOUNT OUTSIDE bytes|inodes ERRNO MAX | verify");
	int want = errno_named(argv[4]);
	long max = atol(argv[5]);
	if (strcmp(argv[3], "bytes") == 0)
		bytes_mode(want, max);
	else if (strcmp(argv[3], "inodes") == 0)
		inodes_mode(want, max);
	else
		fail("unknown mode %s", argv[3]);
	return 0;
}
