/*
 * Close-to-open in a shared store (dbfs/shared.h): a close (FUSE flush) is
 * answered once every other live process's notifier has applied this
 * process's last event of a kind closes wait for (a write, truncate,
 * fallocate, punch or size change; an unlink, rmdir, rename or expiry:
 * dbfs_shared_close_waits) committed before it, read from their slots in
 * dbfs.wake. New names and attribute changes are not waited for (they are
 * seen within the notifiers' lag, as the issue asks): a close after a
 * create or a chmod costs no round trip to the other processes; waiting
 * for every event made creates through two processes 13x slower than
 * through one (tools/bench/shared --fs-rows).
 *
 * Why a close is parked, not waited for in its worker. A notifier's
 * invalidation may wait in its kernel for a lock that a request of its own
 * mount holds (an inval_entry takes the directory's lock, which a create
 * in that directory holds until it is answered), and that request waits
 * for a worker of its process. If the workers all waited in closes for the
 * other process, whose workers all waited in closes for this one, neither
 * notifier could go on: two processes under symmetric load stalled until
 * the closes' timeout (tools/bench/shared --cycle showed 30 timeouts in
 * 80 closes with two workers each). So a close that cannot be answered at
 * once is put on this store's parked list and its worker returns; the
 * notifier answers it when the others' slots have caught up, woken through
 * the wake word: a notifier that advances its slot bumps the word while
 * any process has closes parked (waiting[] in the page).
 *
 * A process killed with SIGKILL leaves its slot: a close that waited 20 ms
 * looks whether the slot's process still holds dbfs.lock (/proc/locks,
 * at most every 20 ms per store) and frees the slot if not. A close still
 * waiting after BARRIER_MS (a wedged process) is answered anyway and
 * counted (shared_close_timeouts).
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"
#include "dbfs/shared.h"

#define BARRIER_MS 2000 /* the longest a close waits for the other processes */
#define LIVE_MS	   20	/* a slot this slow: is its process alive? */

static struct dbfs_wake_page *page(struct dbfs_shared *sh)
{
	return (struct dbfs_wake_page *)sh->wake;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Free slot i (seq first: a waiter never sees a new owner's old seq). */
void dbfs_wake_page_free_slot(struct dbfs_wake_page *p, int i, uint64_t writer)
{
	atomic_store(&p->slot[i].seq, UINT64_MAX);
	atomic_store(&p->waiting[i], 0);
	atomic_compare_exchange_strong(&p->slot[i].writer, &writer, 0);
}

bool dbfs_wake_page_waiting(struct dbfs_wake_page *p)
{
	for (int i = 0; i < DBFS_WAKE_SLOTS; i++)
		if (atomic_load(&p->waiting[i]))
			return true;
	return false;
}

/* The first other process's slot that has not applied `want`; -1: none. */
static int behind(struct dbfs_shared *sh, uint64_t want)
{
	struct dbfs_wake_page *p = page(sh);
	for (int i = 0; i < DBFS_WAKE_SLOTS; i++) {
		uint64_t w = atomic_load(&p->slot[i].writer);
		if (w && w != sh->writer && atomic_load(&p->slot[i].seq) < want)
			return i;
	}
	return -1;
}

/* Is the process of slot i, writer id w (its pid in bits 32..62), still
 * holding dbfs.lock? */
static bool writer_alive(struct dbfs *fs, int i, uint64_t w)
{
	pid_t pid = (pid_t)((w >> 32) & 0x7fffffff);
	return dbfs_lock_slot_alive(fs->lock_fd, i, pid);
}

/* May a close made at t0 be answered now? 0 yes; 1 not yet; -ETIMEDOUT
 * (counted): answer it all the same. */
static int ready(struct dbfs *fs, uint64_t want, uint64_t t0)
{
	struct dbfs_shared *sh = fs->shared;
	for (;;) {
		int b = behind(sh, want);
		if (b < 0)
			return 0;
		uint64_t now = now_ms();
		uint64_t last = atomic_load(&sh->live_check_ms);
		if (now - t0 >= LIVE_MS && now - last >= LIVE_MS &&
		    atomic_compare_exchange_strong(&sh->live_check_ms, &last, now)) {
			/* slow: is it alive at all? (a SIGKILL leaves its slot) */
			uint64_t w = atomic_load(&page(sh)->slot[b].writer);
			if (w && !writer_alive(fs, b, w)) {
				dbfs_wake_page_free_slot(page(sh), b, w);
				continue;
			}
		}
		if (now - t0 >= BARRIER_MS) {
			atomic_fetch_add(&sh->barrier_timeouts, 1);
			return -ETIMEDOUT;
		}
		return 1;
	}
}

/* No notifier to answer a parked close: wait here (futex on applied). */
static void wait_here(struct dbfs *fs, uint64_t want, uint64_t t0)
{
	struct dbfs_wake_page *p = page(fs->shared);
	for (;;) {
		uint32_t gen = atomic_load(&p->applied);
		if (ready(fs, want, t0) <= 0)
			return;
		struct timespec ts = {0, 10 * 1000000l};
		syscall(SYS_futex, &p->applied, FUTEX_WAIT, gen, &ts, NULL, 0);
	}
}

static void waiting_add(struct dbfs_shared *sh, int d)
{
	if (sh->slot >= 0)
		atomic_fetch_add(&page(sh)->waiting[sh->slot], (uint32_t)d);
}

void dbfs_shared_flush(struct dbfs *fs, struct fuse_req *req)
{
	struct dbfs_shared *sh = fs->shared;
	if (!sh || !page(sh)) {
		fuse_reply_err(req, 0);
		return;
	}
	uint64_t want = atomic_load(&sh->data_seq), t0 = now_ms();
	if (ready(fs, want, t0) <= 0) {
		fuse_reply_err(req, 0);
		return;
	}
	/* a ring entry goes back when the handler returns: answer here */
	struct dbfs_parked *n = dbfs_io_reply_later_ok() ? malloc(sizeof(*n)) : NULL;
	if (n) {
		*n = (struct dbfs_parked){.req = req, .want = want, .t0_ms = t0};
		pthread_mutex_lock(&sh->park_lock);
		if (atomic_load(&sh->serving)) { /* its notifier will answer it */
			n->next = sh->parked;
			sh->parked = n;
		} else {
			free(n);
			n = NULL;
		}
		pthread_mutex_unlock(&sh->park_lock);
	}
	if (!n) { /* nobody to answer it later */
		wait_here(fs, want, t0);
		fuse_reply_err(req, 0);
		return;
	}
	/* Counted before the look below: a slot that advances after that look
	 * sees the count and bumps the wake word, so the notifier wakes. */
	waiting_add(sh, 1);
	dbfs_shared_serve_parked(fs, false);
	dbfs_shared_poke(fs); /* a notifier asleep on an empty list: shorter waits now */
}

unsigned dbfs_shared_serve_parked(struct dbfs *fs, bool all)
{
	struct dbfs_shared *sh = fs->shared;
	struct dbfs_parked *done = NULL, **pp;
	unsigned left = 0, answered = 0;
	pthread_mutex_lock(&sh->park_lock);
	for (pp = &sh->parked; *pp;) {
		struct dbfs_parked *n = *pp;
		if (all || ready(fs, n->want, n->t0_ms) <= 0) {
			*pp = n->next;
			n->next = done;
			done = n;
			answered++;
		} else {
			pp = &n->next;
			left++;
		}
	}
	pthread_mutex_unlock(&sh->park_lock);
	if (answered)
		waiting_add(sh, -(int)answered);
	while (done) { /* replies outside the lock: a reply writes to /dev/fuse */
		struct dbfs_parked *n = done;
		done = n->next;
		fuse_reply_err(n->req, 0);
		free(n);
	}
	return left;
}
