/*
 * The wrappers behind inject.h. Built without _FILE_OFFSET_BITS so that
 * both the plain and the *64 names of the write calls can be defined
 * (liblmdb.so calls pwrite and ftruncate, libdbfs fallocate64).
 */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"

const char *const fault_kind_name[FAULT_KINDS] = {"lmdb", "alloc", "write"};

static struct {
	bool armed, persist, fired, paused, owner_only;
	pthread_t owner;
	enum fault_kind kind;
	long n, calls;
	char dir[PATH_MAX];
	size_t dirlen;
} f;

void fault_arm(enum fault_kind kind, long n, bool persist, const char *dir)
{
	f.kind = kind;
	f.n = n;
	f.persist = persist;
	f.calls = 0;
	f.fired = false;
	snprintf(f.dir, sizeof(f.dir), "%s/", dir ? dir : "");
	f.dirlen = strlen(f.dir);
	f.owner = pthread_self();
	f.armed = true;
}

void fault_owner_only(bool on)
{
	f.owner_only = on;
}

long fault_disarm(void)
{
	f.armed = false;
	return f.calls;
}

void fault_pause(bool pause)
{
	f.paused = pause;
}

bool fault_fired(void)
{
	return f.fired;
}

static bool fail(enum fault_kind kind)
{
	if (!f.armed || f.paused || f.kind != kind)
		return false;
	if (f.owner_only && !pthread_equal(pthread_self(), f.owner))
		return false;
	f.calls++;
	if (f.calls == f.n || (f.persist && f.calls > f.n)) {
		f.fired = true;
		return true;
	}
	return false;
}

/* FAULT_TRACE=1: say which call failed, with a backtrace. */
static void trace(const char *name)
{
	if (!getenv("FAULT_TRACE"))
		return;
	void *bt[16];
	fprintf(stderr, "fault: %s fails (call %ld)\n", name, f.calls);
	backtrace_symbols_fd(bt, backtrace(bt, 16), 2);
}

/* ---- LMDB ----
 * Every call libdbfs makes that can fail on a valid handle. Not wrapped:
 * mdb_env_info, mdb_env_stat, mdb_env_set_maxdbs/maxreaders before open
 * (LMDB 0.9 fails them only for a NULL or an open env), and the calls that
 * return nothing (abort, reset, close). */

#define WRAP_LMDB(ret_fail, name, params, args)                                                    \
	int __real_##name params;                                                                  \
	int __wrap_##name params;                                                                  \
	int __wrap_##name params                                                                   \
	{                                                                                          \
		if (fail(FAULT_LMDB)) {                                                            \
			trace(#name);                                                              \
			return ret_fail;                                                           \
		}                                                                                  \
		return __real_##name args;                                                         \
	}

WRAP_LMDB(ENOMEM, mdb_env_create, (MDB_env * *e), (e))
WRAP_LMDB(EIO, mdb_env_open, (MDB_env * e, const char *p, unsigned fl, mdb_mode_t m), (e, p, fl, m))
WRAP_LMDB(ENOMEM, mdb_env_set_mapsize, (MDB_env * e, size_t s), (e, s))
WRAP_LMDB(EIO, mdb_env_sync, (MDB_env * e, int force), (e, force))
WRAP_LMDB(ENOMEM, mdb_txn_begin, (MDB_env * e, MDB_txn *p, unsigned fl, MDB_txn **t), (e, p, fl, t))
WRAP_LMDB(MDB_READERS_FULL, mdb_txn_renew, (MDB_txn * t), (t))
WRAP_LMDB(EIO, mdb_dbi_open, (MDB_txn * t, const char *n, unsigned fl, MDB_dbi *d), (t, n, fl, d))
WRAP_LMDB(EIO, mdb_stat, (MDB_txn * t, MDB_dbi d, MDB_stat *s), (t, d, s))
WRAP_LMDB(EIO, mdb_get, (MDB_txn * t, MDB_dbi d, MDB_val *k, MDB_val *v), (t, d, k, v))
WRAP_LMDB(EIO, mdb_put, (MDB_txn * t, MDB_dbi d, MDB_val *k, MDB_val *v, unsigned fl),
	  (t, d, k, v, fl))
WRAP_LMDB(EIO, mdb_del, (MDB_txn * t, MDB_dbi d, MDB_val *k, MDB_val *v), (t, d, k, v))
WRAP_LMDB(ENOMEM, mdb_cursor_open, (MDB_txn * t, MDB_dbi d, MDB_cursor **c), (t, d, c))
WRAP_LMDB(EIO, mdb_cursor_get, (MDB_cursor * c, MDB_val *k, MDB_val *v, MDB_cursor_op op),
	  (c, k, v, op))
WRAP_LMDB(EIO, mdb_cursor_del, (MDB_cursor * c, unsigned fl), (c, fl))

/* A failed commit frees the transaction, as LMDB's does. */
int __real_mdb_txn_commit(MDB_txn *t);
int __wrap_mdb_txn_commit(MDB_txn *t);
int __wrap_mdb_txn_commit(MDB_txn *t)
{
	if (fail(FAULT_LMDB)) {
		trace("mdb_txn_commit");
		mdb_txn_abort(t);
		return EIO;
	}
	return __real_mdb_txn_commit(t);
}

/* ---- allocations of libdbfs ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_realpath(const char *path, char *resolved);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_realpath(const char *path, char *resolved);

void *__wrap_malloc(size_t n)
{
	if (fail(FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	if (fail(FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	if (fail(FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, n);
}

char *__wrap_realpath(const char *path, char *resolved)
{
	if (!resolved && fail(FAULT_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realpath(path, resolved);
}

/* ---- the fixed clock ---- */

int __real_clock_gettime(clockid_t c, struct timespec *ts);
int __wrap_clock_gettime(clockid_t c, struct timespec *ts);
time_t __wrap_time(time_t *t);

int __wrap_clock_gettime(clockid_t c, struct timespec *ts)
{
	if (c == CLOCK_REALTIME) {
		ts->tv_sec = 1700000000;
		ts->tv_nsec = 123456789;
		return 0;
	}
	return __real_clock_gettime(c, ts);
}

time_t __wrap_time(time_t *t)
{
	if (t)
		*t = 1700000000;
	return 1700000000;
}

/* ---- writes to the store (interposed for liblmdb.so too) ---- */

#define REAL(name)                                                                                 \
	static __typeof__(name) *real_##name;                                                      \
	if (!real_##name)                                                                          \
	real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static bool store_fd(int fd)
{
	char p[32], path[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = 0;
	return strncmp(path, f.dir, f.dirlen) == 0;
}

static bool fail_fd(int fd)
{
	if (!f.armed || f.paused || f.kind != FAULT_WRITE || !store_fd(fd))
		return false;
	if (fail(FAULT_WRITE)) {
		trace("write to the store");
		errno = EIO;
		return true;
	}
	return false;
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
	return fail_fd(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(fdatasync);
	return fail_fd(fd) ? -1 : real_fdatasync(fd);
}

int ftruncate(int fd, off_t len)
{
	REAL(ftruncate);
	return fail_fd(fd) ? -1 : real_ftruncate(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	REAL(ftruncate64);
	return fail_fd(fd) ? -1 : real_ftruncate64(fd, len);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	REAL(fallocate);
	return fail_fd(fd) ? -1 : real_fallocate(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	REAL(fallocate64);
	return fail_fd(fd) ? -1 : real_fallocate64(fd, mode, off, len);
}

/* The only msyncs are LMDB's, of the store's map. */
int msync(void *addr, size_t len, int flags)
{
	REAL(msync);
	if (fail(FAULT_WRITE)) {
		trace("msync");
		errno = EIO;
		return -1;
	}
	return real_msync(addr, len, flags);
}
