/*
 * LD_PRELOAD shim for tests/fault/t_eio.sh: while the file $FAULT_DIR/eio
 * exists, every write of a file under $FAULT_DIR/ (write, pwrite, writev,
 * fsync, fdatasync, and msync of a region mapped from such a file, which is
 * how LMDB with MDB_WRITEMAP commits) fails with EIO, as a failing disk
 * would. Files elsewhere are untouched.
 *
 * A slow disk, for tests/fault/t_slowflush.sh: while $FAULT_DIR/slow
 * exists, a flush (fsync, fdatasync, msync) of such a file does not return;
 * it creates $FAULT_DIR/stuck while it waits, so the test knows a flush is
 * held, and goes on (removing stuck) once slow is gone, or after 120 s so
 * that a broken test cannot hang the daemon for ever.
 *
 * A slow store read, for tests/fault/t_slowstat.sh: while
 * $FAULT_DIR/slowstat exists, an fstat of such a file (dbfs_usage fstats
 * data.mdb) does not return; the thread creates $FAULT_DIR/held.TID while
 * it waits (TID: its thread id, so the test can tell who is held), and
 * goes on once slowstat is gone, or after 120 s.
 *
 * A held background reclaim, for tests/integration/mfs/t_reclaim.sh: while
 * $FAULT_DIR/holdlater exists, the queue's delivery thread (dbfs-later)
 * stops in the first madvise(MADV_WILLNEED) after an mdb_cursor_open: the
 * read-ahead that starts every piece of a reclaim (dbfs_reclaim_prefetch
 * opens a cursor on the file's blocks, then advises them run by run), with
 * $FAULT_DIR/later_held present while it waits. Each $FAULT_DIR/step the
 * test creates lets it take one piece (the thread removes later_held, then
 * step). The thread goes on once holdlater is gone, or after 120 s. The
 * test sees what waits between two pieces without a race against how fast
 * the machine frees.
 */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define REAL(name)                                                                                 \
	static __typeof__(name) *real_##name;                                                      \
	if (!real_##name)                                                                          \
	real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static bool under_dir(int fd)
{
	const char *dir = getenv("FAULT_DIR");
	char p[40], path[PATH_MAX];
	if (!dir)
		return false;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = 0;
	size_t l = strlen(dir);
	return strncmp(path, dir, l) == 0 && path[l] == '/';
}

static bool failing(void)
{
	const char *dir = getenv("FAULT_DIR");
	char p[PATH_MAX];
	struct stat st;
	if (!dir)
		return false;
	snprintf(p, sizeof(p), "%s/eio", dir);
	return stat(p, &st) == 0;
}

static bool exists(const char *name)
{
	const char *dir = getenv("FAULT_DIR");
	char p[PATH_MAX];
	struct stat st;
	if (!dir)
		return false;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0;
}

static void hold_flush(void)
{
	char p[PATH_MAX];
	if (!exists("slow"))
		return;
	snprintf(p, sizeof(p), "%s/stuck", getenv("FAULT_DIR"));
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 12000 && exists("slow"); i++)
		usleep(10000);
	unlink(p);
}

static void hold_stat(void)
{
	char p[PATH_MAX];
	if (!exists("slowstat"))
		return;
	snprintf(p, sizeof(p), "%s/held.%ld", getenv("FAULT_DIR"), (long)syscall(SYS_gettid));
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 12000 && exists("slowstat"); i++)
		usleep(10000);
	unlink(p);
}

static void touch_file(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", getenv("FAULT_DIR"), name);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

static void remove_file(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", getenv("FAULT_DIR"), name);
	unlink(p);
}

static __thread bool cursor_opened; /* since this thread's last madvise */

/* LMDB's, with its handles as opaque pointers: the shim needs no lmdb.h */
int mdb_cursor_open(void *txn, unsigned int dbi, void **cursor);

int mdb_cursor_open(void *txn, unsigned int dbi, void **cursor)
{
	REAL(mdb_cursor_open);
	cursor_opened = true;
	return real_mdb_cursor_open(txn, dbi, cursor);
}

static void hold_later(void)
{
	char name[16] = "";
	bool first = cursor_opened;
	cursor_opened = false;
	if (!first || !exists("holdlater") || prctl(PR_GET_NAME, name) || strcmp(name, "dbfs-later"))
		return;
	touch_file("later_held");
	for (int i = 0; i < 60000 && exists("holdlater"); i++) {
		if (exists("step")) {
			remove_file("later_held");
			remove_file("step");
			return;
		}
		usleep(2000);
	}
	remove_file("later_held");
}

int madvise(void *addr, size_t len, int advice)
{
	REAL(madvise);
	if (advice == MADV_WILLNEED)
		hold_later();
	return real_madvise(addr, len, advice);
}

int fstat(int fd, struct stat *st)
{
	REAL(fstat);
	if (under_dir(fd))
		hold_stat();
	return real_fstat(fd, st);
}

int fstat64(int fd, struct stat64 *st)
{
	REAL(fstat64);
	if (under_dir(fd))
		hold_stat();
	return real_fstat64(fd, st);
}

static bool fail_fd(int fd)
{
	if (failing() && under_dir(fd)) {
		errno = EIO;
		return true;
	}
	return false;
}

/* Regions mapped from files under $FAULT_DIR. */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char *addr;
	size_t len;
} maps[64];

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	REAL(mmap);
	void *p = real_mmap(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED && fd >= 0 && under_dir(fd)) {
		pthread_mutex_lock(&maps_lock);
		for (int i = 0; i < 64; i++)
			if (!maps[i].addr) {
				maps[i].addr = p;
				maps[i].len = len;
				break;
			}
		pthread_mutex_unlock(&maps_lock);
	}
	return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return mmap(addr, len, prot, flags, fd, (off_t)off);
}

int munmap(void *addr, size_t len)
{
	REAL(munmap);
	pthread_mutex_lock(&maps_lock);
	for (int i = 0; i < 64; i++)
		if (maps[i].addr == addr)
			maps[i].addr = NULL;
	pthread_mutex_unlock(&maps_lock);
	return real_munmap(addr, len);
}

int msync(void *addr, size_t len, int flags)
{
	REAL(msync);
	bool ours = false;
	pthread_mutex_lock(&maps_lock);
	for (int i = 0; i < 64; i++)
		if (maps[i].addr && (char *)addr >= maps[i].addr &&
		    (char *)addr < maps[i].addr + maps[i].len)
			ours = true;
	pthread_mutex_unlock(&maps_lock);
	if (ours)
		hold_flush();
	if (ours && failing()) {
		errno = EIO;
		return -1;
	}
	return real_msync(addr, len, flags);
}

ssize_t write(int fd, const void *b, size_t n)
{
	REAL(write);
	return fail_fd(fd) ? -1 : real_write(fd, b, n);
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
	REAL(pwrite);
	return fail_fd(fd) ? -1 : real_pwrite(fd, b, n, off);
}

ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off)
{
	REAL(pwrite64);
	return fail_fd(fd) ? -1 : real_pwrite64(fd, b, n, off);
}

ssize_t writev(int fd, const struct iovec *v, int n)
{
	REAL(writev);
	return fail_fd(fd) ? -1 : real_writev(fd, v, n);
}

int fsync(int fd)
{
	REAL(fsync);
	if (under_dir(fd))
		hold_flush();
	return fail_fd(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(fdatasync);
	if (under_dir(fd))
		hold_flush();
	return fail_fd(fd) ? -1 : real_fdatasync(fd);
}
