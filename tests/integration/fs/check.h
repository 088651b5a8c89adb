/* Tiny assertion helpers for the file-system integration tests.
 *
 * Every test program takes the mount directory as argv[1] (and a directory on
 * another file system as argv[2]), works relative to it, prints one line per
 * passed step, and on the first failed check prints file:line, the expression
 * and errno, then exits 1. Exit 77 means "skipped".
 */
#ifndef MFS_TEST_CHECK_H
#define MFS_TEST_CHECK_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(expr)                                                                          \
	do {                                                                                 \
		if (!(expr)) {                                                               \
			int e_ = errno;                                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n", __FILE__, \
				__LINE__, #expr, e_, strerror(e_));                          \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

/* expr must fail (return -1 or NULL-like negative) with errno == err. */
#define CHECK_ERR(expr, err)                                                                 \
	do {                                                                                 \
		errno = 0;                                                                   \
		long long r_ = (long long)(expr);                                            \
		int e_ = errno;                                                              \
		if (r_ != -1 || e_ != (err)) {                                               \
			fprintf(stderr,                                                      \
				"%s:%d: CHECK failed: %s: expected -1 errno %s, got %lld errno " \
				"%d (%s)\n",                                                 \
				__FILE__, __LINE__, #expr, #err, r_, e_, strerror(e_));      \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

/* Either of two acceptable errno values (POSIX allows both). */
#define CHECK_ERR2(expr, err1, err2)                                                         \
	do {                                                                                 \
		errno = 0;                                                                   \
		long long r_ = (long long)(expr);                                            \
		int e_ = errno;                                                              \
		if (r_ != -1 || (e_ != (err1) && e_ != (err2))) {                            \
			fprintf(stderr,                                                      \
				"%s:%d: CHECK failed: %s: expected -1 errno %s or %s, got "  \
				"%lld errno %d (%s)\n",                                      \
				__FILE__, __LINE__, #expr, #err1, #err2, r_, e_,             \
				strerror(e_));                                               \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

/* CHECK and CHECK_EQ report errno as it is after evaluating their arguments
 * (usually set by the failed call just before); CHECK_ERR clears it first. */
#define CHECK_EQ(a, b)                                                                       \
	do {                                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);                          \
		if (a_ != b_) {                                                              \
			int e_ = errno;                                                      \
			fprintf(stderr,                                                      \
				"%s:%d: CHECK failed: %s == %s: got %lld (0x%llx), expected " \
				"%lld (0x%llx) (errno %d: %s)\n",                            \
				__FILE__, __LINE__, #a, #b, a_, (unsigned long long)a_, b_,  \
				(unsigned long long)b_, e_, strerror(e_));                   \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

#define OK(name) printf("ok - %s\n", name)

static inline void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Enter the mount directory given on the command line. */
static inline void enter(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		fail("usage: %s MOUNT_DIR [OUTSIDE_DIR ...]", argv[0]);
	CHECK(chdir(argv[1]) == 0);
	umask(0);
}

static inline int is_root(void)
{
	return geteuid() == 0;
}

/* Write exactly len bytes at off or fail. */
static inline void pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, off);
		CHECK(n > 0);
		p += n;
		len -= (size_t)n;
		off += n;
	}
}

/* Read exactly len bytes at off (short only at EOF); returns bytes read. */
static inline size_t pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, p + got, len - got, off + (off_t)got);
		CHECK(n >= 0);
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return got;
}

static inline void write_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	CHECK(fd >= 0);
	pwrite_all(fd, buf, len, 0);
	CHECK(close(fd) == 0);
}

/* Whole file content (malloc'd, NUL-terminated); *len gets its size. */
static inline char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	char *buf = malloc((size_t)st.st_size + 1);
	CHECK(buf != NULL);
	size_t n = pread_all(fd, buf, (size_t)st.st_size, 0);
	CHECK_EQ(n, st.st_size);
	buf[n] = 0;
	CHECK(close(fd) == 0);
	if (len)
		*len = n;
	return buf;
}

static inline struct stat stat_of(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		int e = errno;
		fail("lstat(%s): %s", path, strerror(e));
	}
	return st;
}

/* Deterministic pseudo-random bytes: the content of a file is a function of
 * (seed, offset), so any byte can be checked without keeping a copy. */
static inline uint8_t pattern_byte(uint32_t seed, uint64_t off)
{
	uint64_t x = off * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
	x ^= x >> 31;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 29;
	return (uint8_t)x;
}

static inline void fill_pattern(uint8_t *buf, size_t len, uint32_t seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(seed, off + i);
}

/* Index of the first byte of buf that differs from the pattern, or -1. */
static inline long long pattern_mismatch(const uint8_t *buf, size_t len, uint32_t seed,
					 uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern_byte(seed, off + i))
			return (long long)i;
	return -1;
}

static inline long long first_nonzero(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return (long long)i;
	return -1;
}

/* Drop the kernel's cached pages of fd so the next read asks the file system. */
static inline void drop_cache(int fd)
{
	CHECK(fsync(fd) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
}

#define NOBODY 65534

/* Run fn(arg) in a child process as uid/gid 65534 with no supplementary
 * groups; fail unless the child exits 0. */
static inline void as_user(uid_t uid, gid_t gid, void (*fn)(void *), void *arg)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
		    setresuid(uid, uid, uid) != 0) {
			perror("dropping privileges");
			_exit(1);
		}
		fn(arg);
		fflush(stdout);
		_exit(0);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("child running as uid %d failed (status 0x%x)", (int)uid, status);
}

#endif
