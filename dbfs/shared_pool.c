/*
 * The notifier pool (dbfs/shared.h): DBFS_NOTIFIERS threads per process
 * run the notifier passes of every shared store the process has open, so
 * that threads do not grow with the number of shared stores (ARCHITECTURE
 * mechanism 1). A store is served by thread (table slot % DBFS_NOTIFIERS).
 *
 * A thread sleeps in one futex_waitv(2) on the wake words of its stores
 * (each in its store's dbfs.wake, shared with the other processes: no
 * FUTEX_PRIVATE) and on the pool's own word (private: joins, leaves and
 * pokes of this process). A store's word is read before its pass and the
 * wait is on that value, so a commit between the pass and the wait
 * returns at once. Waits are bounded: WAIT_MS, or LIVE_MS while a store
 * has closes parked (their liveness looks and timeouts,
 * shared_barrier.c). Stores past the FUTEX_WAITV_MAX - 1 a thread can
 * watch, a kernel without futex_waitv (before 5.16) or a store whose
 * dbfs.wake could not be mapped are polled every WAIT_MS instead.
 *
 * A thread may wait inside a pass for its kernel (an invalidation takes
 * a lock that a request of that mount holds until a worker answers it):
 * the other stores of that thread wait meanwhile; the workers are never
 * held by the pool (closes are parked, not waited for).
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "dbfs/shared.h"

#ifndef __NR_futex_waitv
#define __NR_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif
#ifndef FUTEX_WAITV_MAX
#define FUTEX_WAITV_MAX 128
struct futex_waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t __reserved;
};
#endif

#define WAIT_MS 200 /* the longest wait for a wake-up that got lost */
#define LIVE_MS 20  /* while closes are parked */
/* stores (as dbfs_shared_claim's table); a multiple of DBFS_NOTIFIERS */
#define POOL_MAX 1024

_Static_assert(POOL_MAX % DBFS_NOTIFIERS == 0, "every thread as many slots");

static struct {
	pthread_mutex_t lock;
	pthread_cond_t idle;	   /* a thread ended a pass */
	struct dbfs *fs[POOL_MAX]; /* slot % DBFS_NOTIFIERS: its thread */
	unsigned nfs;
	pthread_t thr[DBFS_NOTIFIERS];
	bool started, stop;
	bool joining; /* the last leave joins the threads: no start */
	struct dbfs *busy[DBFS_NOTIFIERS][POOL_MAX / DBFS_NOTIFIERS]; /* each thread's pass */
	unsigned nbusy[DBFS_NOTIFIERS];
	_Atomic uint32_t word[DBFS_NOTIFIERS]; /* private wake of each thread */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static void wake_thread(unsigned t)
{
	atomic_fetch_add(&pool.word[t], 1);
	syscall(SYS_futex, &pool.word[t], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static bool is_busy(unsigned t, struct dbfs *fs)
{
	for (unsigned i = 0; i < pool.nbusy[t]; i++)
		if (pool.busy[t][i] == fs)
			return true;
	return false;
}

static void *run(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	struct futex_waitv wv[FUTEX_WAITV_MAX];
	struct dbfs **mine = pool.busy[me];
	bool waitv = true;
	pthread_mutex_lock(&pool.lock);
	while (!pool.stop) {
		uint32_t own = atomic_load(&pool.word[me]);
		/* this pass's stores: a leave waits until the pass is over */
		unsigned n = 0, nwv = 0;
		for (unsigned i = me; i < POOL_MAX; i += DBFS_NOTIFIERS)
			if (pool.fs[i])
				mine[n++] = pool.fs[i];
		pool.nbusy[me] = n;
		pthread_mutex_unlock(&pool.lock);

		wv[nwv++] = (struct futex_waitv){.val = own,
						 .uaddr = (uintptr_t)&pool.word[me],
						 .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG};
		bool parked = false;
		for (unsigned i = 0; i < n; i++) {
			struct dbfs_shared *sh = mine[i]->shared;
			if (sh->wake && nwv < FUTEX_WAITV_MAX)
				wv[nwv++] = (struct futex_waitv){.val = atomic_load(sh->wake),
								 .uaddr = (uintptr_t)sh->wake,
								 .flags = FUTEX_32};
			dbfs_shared_serve_parked(mine[i], false);
			dbfs_shared_pass(mine[i]);
			parked |= dbfs_shared_serve_parked(mine[i], false) > 0;
		}

		struct timespec to;
		clock_gettime(CLOCK_MONOTONIC, &to);
		long ms = parked ? LIVE_MS : WAIT_MS;
		to.tv_nsec += ms * 1000000l;
		to.tv_sec += to.tv_nsec / 1000000000l;
		to.tv_nsec %= 1000000000l;
		if (waitv && syscall(__NR_futex_waitv, wv, nwv, 0, &to, CLOCK_MONOTONIC) < 0 &&
		    errno == ENOSYS)
			waitv = false;
		if (!waitv) /* the pool's word alone: the stores are polled */
			syscall(SYS_futex, &pool.word[me], FUTEX_WAIT_BITSET_PRIVATE, own, &to,
				NULL, FUTEX_BITSET_MATCH_ANY);

		pthread_mutex_lock(&pool.lock);
		pool.nbusy[me] = 0;
		pthread_cond_broadcast(&pool.idle);
	}
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

/* pool.lock held: start the threads (the first store), or stop and join
 * them (the last store left). */
static int start_threads(void)
{
	pool.stop = false;
	for (unsigned t = 0; t < DBFS_NOTIFIERS; t++) {
		if (pthread_create(&pool.thr[t], NULL, run, (void *)(uintptr_t)t)) {
			pool.stop = true;
			for (unsigned u = 0; u < t; u++)
				wake_thread(u);
			pthread_mutex_unlock(&pool.lock);
			for (unsigned u = 0; u < t; u++)
				pthread_join(pool.thr[u], NULL);
			pthread_mutex_lock(&pool.lock);
			return -EAGAIN;
		}
	}
	pool.started = true;
	return 0;
}

int dbfs_shared_pool_join(struct dbfs *fs)
{
	struct dbfs_shared *sh = fs->shared;
	int rc = 0;
	pthread_mutex_lock(&pool.lock);
	while (pool.joining)
		pthread_cond_wait(&pool.idle, &pool.lock);
	int slot = -1;
	for (int i = 0; i < POOL_MAX && slot < 0; i++)
		if (!pool.fs[i])
			slot = i;
	if (slot < 0)
		rc = -EAGAIN;
	else if (!pool.started)
		rc = start_threads();
	if (!rc) {
		pool.fs[slot] = fs;
		pool.nfs++;
		sh->pool_slot = slot;
		pthread_mutex_lock(&sh->park_lock);
		atomic_store(&sh->serving, true);
		pthread_mutex_unlock(&sh->park_lock);
		wake_thread((unsigned)slot % DBFS_NOTIFIERS);
	}
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

void dbfs_shared_pool_leave(struct dbfs *fs)
{
	struct dbfs_shared *sh = fs->shared;
	pthread_t join[DBFS_NOTIFIERS];
	bool last = false;
	if (sh->pool_slot < 0)
		return;
	unsigned t = (unsigned)sh->pool_slot % DBFS_NOTIFIERS;
	/* no close parks from now on: the caller answers those parked */
	pthread_mutex_lock(&sh->park_lock);
	atomic_store(&sh->serving, false);
	pthread_mutex_unlock(&sh->park_lock);
	pthread_mutex_lock(&pool.lock);
	pool.fs[sh->pool_slot] = NULL;
	pool.nfs--;
	sh->pool_slot = -1;
	wake_thread(t);
	while (is_busy(t, fs))
		pthread_cond_wait(&pool.idle, &pool.lock);
	if (pool.nfs == 0 && pool.started) {
		pool.stop = true;
		pool.started = false;
		memcpy(join, pool.thr, sizeof(join));
		for (unsigned u = 0; u < DBFS_NOTIFIERS; u++)
			wake_thread(u);
		pool.joining = last = true;
	}
	pthread_mutex_unlock(&pool.lock);
	if (!last)
		return;
	for (unsigned u = 0; u < DBFS_NOTIFIERS; u++)
		pthread_join(join[u], NULL);
	pthread_mutex_lock(&pool.lock);
	pool.joining = false;
	pthread_cond_broadcast(&pool.idle);
	pthread_mutex_unlock(&pool.lock);
}

void dbfs_shared_poke(struct dbfs *fs)
{
	int slot = fs->shared ? fs->shared->pool_slot : -1;
	if (slot >= 0)
		wake_thread((unsigned)slot % DBFS_NOTIFIERS);
}
