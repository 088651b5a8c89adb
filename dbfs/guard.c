/*
 * The map guard: a SIGBUS in a store's map (its user truncated data.mdb
 * or lock.mdb while it was mounted) becomes EIO on that DBFS alone. See
 * guard.h for the contract and who sets guards.
 *
 * Why a recovery point and not a size check: a check before each access
 * races with the truncate (the user's process runs when it likes), and
 * LMDB reads its meta pages, its B-trees and its reader table through its
 * own maps, where no check of ours can sit. Why not keep the user from
 * truncating: the store is theirs (the kernel checks their access to it,
 * as_caller.c), and a descriptor they opened before the mount keeps its
 * write access whatever mode the file gets later.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"

static __thread struct dbfs_guard *top;

/* The read transactions this thread holds, innermost last (readtxn.c):
 * each holds fs's map lock for reading. Deeper nesting is not tracked
 * (and so not given back after a fault). */
#define HELD_MAX 8
static __thread struct held {
	struct dbfs *fs;
	MDB_txn *txn;
} held[HELD_MAX];
static __thread unsigned nheld;

static struct sigaction old_bus;

/* Environments dbfs_close could not close (dbfs_guard_keep). */
#define KEPT_MAX 64
static MDB_env *kept[KEPT_MAX];
static unsigned nkept;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

void dbfs_guard_keep(MDB_env *env)
{
	pthread_mutex_lock(&kept_lock);
	if (nkept < KEPT_MAX)
		kept[nkept++] = env;
	pthread_mutex_unlock(&kept_lock);
}

static int map_of(struct dbfs *fs, uintptr_t a)
{
	for (int i = 0; i < 2; i++) {
		uintptr_t lo = atomic_load_explicit(&fs->guard_lo[i], memory_order_relaxed);
		uintptr_t hi = atomic_load_explicit(&fs->guard_hi[i], memory_order_relaxed);
		if (lo && a >= lo && a < hi)
			return i;
	}
	return -1;
}

/* Async-signal context: atomics, siglongjmp, sigaction, raise only. */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct dbfs_guard *g = top;
	if (g && si->si_code == BUS_ADRERR) {
		uintptr_t a = (uintptr_t)si->si_addr;
		int which = map_of(g->fs, a);
		if (which >= 0) {
			g->addr = a;
			g->which = which;
			atomic_store(&g->fs->map_lost, 1); /* nobody starts another access */
			siglongjmp(g->jb, 1);
		}
	}
	/* Not a store's map: what would have happened without us. */
	if (old_bus.sa_flags & SA_SIGINFO) {
		if (old_bus.sa_sigaction) {
			old_bus.sa_sigaction(sig, si, uc);
			return;
		}
	} else if (old_bus.sa_handler != SIG_DFL && old_bus.sa_handler != SIG_IGN) {
		old_bus.sa_handler(sig);
		return;
	}
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGBUS, &dfl, NULL);
	if (si->si_code <= 0) /* sent, not a fault: returning would not repeat it */
		raise(sig);
}

static void install_once(void)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus};
	sigemptyset(&sa.sa_mask);
	/* SA_NODEFER: siglongjmp leaves the handler without restoring the
	 * mask (sigsetjmp(jb, 0) saves none: no syscall per request), and a
	 * SIGBUS blocked at the next fault would kill the process. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGBUS, &sa, &old_bus);
}

void dbfs_guard_install(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, install_once);
}

void dbfs_guard_push(struct dbfs_guard *g, struct dbfs *fs)
{
	g->fs = fs;
	g->prev = top;
	g->held = nheld;
	g->addr = 0;
	g->which = 0;
	top = g;
}

void dbfs_guard_pop(struct dbfs_guard *g)
{
	top = g->prev;
}

void dbfs_guard_read_taken(struct dbfs *fs, MDB_txn *txn)
{
	if (nheld < HELD_MAX)
		held[nheld] = (struct held){fs, txn};
	nheld++;
}

void dbfs_guard_read_txn(MDB_txn *txn)
{
	if (nheld && nheld <= HELD_MAX)
		held[nheld - 1].txn = txn;
}

void dbfs_guard_read_given(MDB_txn *txn)
{
	if (!nheld)
		return;
	unsigned i = nheld <= HELD_MAX ? nheld : HELD_MAX;
	if (txn && nheld <= HELD_MAX)
		while (i > 0 && held[i - 1].txn != txn)
			i--;
	if (i == 0)
		i = nheld <= HELD_MAX ? nheld : HELD_MAX; /* not found: the newest */
	if (nheld <= HELD_MAX)
		memmove(&held[i - 1], &held[i], (nheld - i) * sizeof(held[0]));
	nheld--;
}

/* Run fn(a) under a guard of its own: a cleanup step that faults too (the
 * lock file is gone as well, say) is skipped. 0 done, -1 it faulted. */
static int guarded(struct dbfs *fs, void (*fn)(void *), void *a)
{
	struct dbfs_guard g;
	dbfs_guard_push(&g, fs);
	if (sigsetjmp(g.jb, 0)) {
		dbfs_guard_pop(&g);
		return -1;
	}
	fn(a);
	dbfs_guard_pop(&g);
	return 0;
}

static void abort_txn(void *t)
{
	mdb_txn_abort(t);
}

void dbfs_guard_end_write(struct dbfs *fs)
{
	if (!fs->wtxn)
		return;
	/* mdb_txn_abort frees the dirty pages and releases LMDB's writer
	 * mutex (in lock.mdb); if even that faults, the lock file is gone
	 * and so is every other process's use of it. */
	guarded(fs, abort_txn, fs->wtxn);
	fs->wtxn = NULL;
	pthread_rwlock_unlock(&fs->map_lock);
}

static void lost(struct dbfs *fs, int which, uintptr_t addr)
{
	static const char *const file[] = {"data.mdb", "lock.mdb"};
	uintptr_t lo = atomic_load(&fs->guard_lo[which]);
	int healthy = 0;
	atomic_store(&fs->map_lost, 1);
	if (atomic_compare_exchange_strong(&fs->io_failed, &healthy, 1)) {
		snprintf(fs->io_reason, sizeof(fs->io_reason),
			 "%s was truncated under its map (SIGBUS at byte %llu of it); "
			 "the store needs dbfs-fsck",
			 file[which], (unsigned long long)(addr - lo));
		atomic_store(&fs->io_failed, 2);
	}
}

void dbfs_guard_recovered(struct dbfs_guard *g)
{
	struct dbfs *fs = g->fs;
	top = g->prev;
	lost(fs, g->which, g->addr);
	/* The read transactions taken inside g, innermost first. Each holds
	 * its store's map lock, which a later grow or close would wait for. */
	while (nheld > g->held) {
		if (nheld <= HELD_MAX) {
			struct held h = held[nheld - 1];
			if (h.txn)
				guarded(h.fs, abort_txn, h.txn);
			pthread_rwlock_unlock(&h.fs->map_lock);
		}
		nheld--;
	}
	/* A durable point this thread was making (pin_newest reads the meta
	 * pages). dur_lock checks errors: unlocking it fails unless this
	 * thread holds it, and no guard is pushed with it held (guard.h). */
	pthread_mutex_unlock(&fs->dur_lock);
	/* Writers waiting for a leader that will never come back (a durable
	 * point that paused them) give up (commit.c). */
	pthread_mutex_lock(&fs->wq_lock);
	pthread_cond_broadcast(&fs->wq_cond);
	pthread_mutex_unlock(&fs->wq_lock);
}

/* Where the file (dev, ino) is mapped: the lowest and highest address of
 * its mappings in /proc/self/maps. */
static void find_in_maps(dev_t dev, ino_t ino, uintptr_t *lo, uintptr_t *hi)
{
	char line[4400];
	*lo = *hi = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, off, in;
		unsigned maj, mn;
		if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &a, &b, &off, &maj, &mn, &in) != 6)
			continue;
		if (in != (unsigned long long)ino || makedev(maj, mn) != dev)
			continue;
		if (!*lo || a < *lo)
			*lo = (uintptr_t)a;
		if (b > *hi)
			*hi = (uintptr_t)b;
	}
	fclose(f);
}

void dbfs_guard_maps(struct dbfs *fs)
{
	struct stat sb[2];
	int fd;
	char path[4200];
	bool ok[2] = {false, false};
	if (mdb_env_get_fd(fs->env, &fd) == 0 && fstat(fd, &sb[0]) == 0)
		ok[0] = true;
	snprintf(path, sizeof(path), "%s/lock.mdb", fs->dir);
	if (stat(path, &sb[1]) == 0)
		ok[1] = true;
	for (int i = 0; i < 2; i++) {
		uintptr_t lo = 0, hi = 0;
		if (ok[i])
			find_in_maps(sb[i].st_dev, sb[i].st_ino, &lo, &hi);
		atomic_store(&fs->guard_lo[i], 0); /* never a torn range */
		atomic_store(&fs->guard_hi[i], hi);
		atomic_store(&fs->guard_lo[i], lo);
	}
}
