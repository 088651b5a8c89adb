/*
 * A shared store's coherence (dbfs/shared.h): this process's writer id,
 * the wake-up word the processes share, and the notifier's pass, which
 * follows the other processes' change events and invalidates the kernel's
 * caches for what they changed (run by the pool's threads, shared_pool.c).
 *
 * Wake-up. The file dbfs.wake in the store's directory holds one 32-bit
 * word, mapped shared by every process of the store. A leader whose commit
 * enqueued events bumps it and wakes its futex (not FUTEX_PRIVATE: the
 * waiters are other processes); a notifier reads the feed until it is
 * empty, then waits on the word as it was before that read, so a commit
 * that lands between the read and the wait changed the word and the wait
 * returns at once. The wait is bounded (shared_pool.c's WAIT_MS): a lost
 * wake costs that long, never more.
 *
 * Close-to-open. The same page (struct dbfs_wake_page, shared.h) holds one
 * slot per sharing process: its writer id and the last sequence number its
 * notifier has applied. A close (FUSE flush) in one process is answered
 * once every other live process's notifier has applied the events this
 * process committed so far (shared_barrier.c): an open after the close,
 * through any mount, then finds the kernel's caches invalidated.
 *
 * Notifications follow libfuse's rules (fuse_lowlevel.h): they are sent
 * from a pool thread, never from a request, and the thread holds no lock and
 * no transaction of the store while it sends (the feed's read returned).
 * The kernel may wait inside a notification for a request of this mount
 * (an inval_entry takes the directory's lock); the workers serve it.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"
#include "dbfs/shared.h"

#define WAKE_FILE  "dbfs.wake"

static struct dbfs_wake_page *page(struct dbfs_shared *sh)
{
	return (struct dbfs_wake_page *)sh->wake;
}

/* A free slot for this process (or none: then others do not wait for it,
 * and it sees their changes only within the notifier's lag). */
static void claim_slot(struct dbfs_shared *sh)
{
	struct dbfs_wake_page *p = page(sh);
	sh->slot = -1;
	for (int i = 0; p && i < DBFS_WAKE_SLOTS; i++) {
		uint64_t zero = 0;
		if (atomic_load(&p->slot[i].writer) == 0 &&
		    atomic_compare_exchange_strong(&p->slot[i].writer, &zero, sh->writer)) {
			atomic_store(&p->slot[i].seq, UINT64_MAX);
			atomic_store(&p->waiting[i], 0);
			sh->slot = i;
			return;
		}
	}
}

/* The notifier applied everything up to `seq`: say so, wake the closes
 * waiting for it, in this and the other processes (their notifiers answer
 * the parked flushes, shared_barrier.c: woken through the wake word when
 * a process has any parked). */
static void applied(struct dbfs_shared *sh, uint64_t seq)
{
	struct dbfs_wake_page *p = page(sh);
	if (!p || sh->slot < 0 || atomic_load(&p->slot[sh->slot].seq) == seq)
		return;
	atomic_store(&p->slot[sh->slot].seq, seq);
	atomic_fetch_add(&p->applied, 1);
	syscall(SYS_futex, &p->applied, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	if (dbfs_wake_page_waiting(p)) {
		atomic_fetch_add(&p->wake, 1);
		syscall(SYS_futex, &p->wake, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	}
}

int dbfs_shared_open(struct dbfs *fs, char *err, size_t errlen)
{
	struct dbfs_shared *sh = calloc(1, sizeof(*sh));
	if (!sh) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	sh->wake_fd = -1;
	pthread_mutex_init(&sh->self_lock, NULL);
	pthread_mutex_init(&sh->park_lock, NULL);
	sh->pool_slot = -1;
	sh->evbuf = calloc(DBFS_SHARED_READ_MAX, sizeof(*sh->evbuf));
	if (!sh->evbuf) {
		free(sh);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = dbfs_shared_claim(sh, fs->dir, err, errlen);
	if (rc) {
		free(sh->evbuf);
		free(sh);
		return rc;
	}
	/* Unique among the live processes (the pid) and across their
	 * lifetimes (random bits); never 1, the exclusive opens' id. */
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint32_t)time(NULL);
	sh->writer = 1ull << 63 | (uint64_t)getpid() << 32 | rnd;
	char path[4200];
	snprintf(path, sizeof(path), "%s/" WAKE_FILE, fs->dir);
	sh->wake_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (sh->wake_fd >= 0 && ftruncate(sh->wake_fd, 4096) == 0) {
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, sh->wake_fd, 0);
		if (m != MAP_FAILED)
			sh->wake = m;
	}
	/* without it the notifier polls (shared_pool.c) and a close waits for
	 * nobody: slower, and close-to-open only within the notifier's lag */
	claim_slot(sh);
	fs->shared = sh;
	return 0;
}

void dbfs_shared_close(struct dbfs *fs)
{
	struct dbfs_shared *sh = fs->shared;
	if (!sh)
		return;
	dbfs_shared_session(fs, NULL);
	if (sh->wake && sh->slot >= 0)
		dbfs_wake_page_free_slot(page(sh), sh->slot, sh->writer);
	if (sh->wake)
		munmap((void *)sh->wake, 4096);
	if (sh->wake_fd >= 0)
		close(sh->wake_fd);
	dbfs_shared_unclaim(sh);
	pthread_mutex_destroy(&sh->self_lock);
	pthread_mutex_destroy(&sh->park_lock);
	free(sh->evbuf);
	free(sh);
	fs->shared = NULL;
}

bool dbfs_shared_close_waits(const struct dbfs_event *ev)
{
	switch (ev->op) {
	case DBFS_EV_UNLINK: /* names that go away, and what they named */
	case DBFS_EV_RMDIR:
	case DBFS_EV_RENAME:
	case DBFS_EV_EXPIRE:
		return true;
	case DBFS_EV_CREATE: /* a new name: seen within the lag */
	case DBFS_EV_MKNOD:
		return false;
	default:
		return dbfs_settle_is_write(ev); /* data and sizes */
	}
}

void dbfs_shared_committed(struct dbfs *fs, uint64_t data_seq)
{
	struct dbfs_shared *sh = fs->shared;
	if (!sh)
		return;
	if (data_seq) /* one leader at a time: it only grows */
		atomic_store(&sh->data_seq, data_seq);
	if (!sh->wake)
		return;
	atomic_fetch_add(sh->wake, 1);
	syscall(SYS_futex, sh->wake, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	atomic_fetch_add(&sh->wakes_sent, 1);
}

/* The last component of a path ("/a/b" -> "b"; "" for "/" or none). */
static const char *base(const char *p, size_t len, size_t *blen)
{
	size_t i = len;
	while (i > 0 && p[i - 1] != '/')
		i--;
	*blen = len - i;
	return p + i;
}

static void count(struct dbfs_shared *sh, _Atomic uint64_t *c, int rc)
{
	/* -ENOENT: the kernel does not have it cached, nothing to drop */
	if (rc && rc != -ENOENT)
		atomic_fetch_add(&sh->inval_failed, 1);
	else
		atomic_fetch_add(c, 1);
}

static void inval_entry(struct dbfs_shared *sh, uint64_t dir, const char *name, size_t len)
{
	if (!dir || !len)
		return;
	count(sh, &sh->inval_entry, fuse_lowlevel_notify_inval_entry(sh->se, dir, name, len));
}

/* off < 0: only the attributes; else the attributes and the data. */
static void inval_inode(struct dbfs_shared *sh, uint64_t ino, off_t off)
{
	if (!ino)
		return;
	count(sh, &sh->inval_inode, fuse_lowlevel_notify_inval_inode(sh->se, ino, off, 0));
}

static void removed(struct dbfs_shared *sh, const struct dbfs_event *ev)
{
	size_t bl;
	const char *b = base(ev->path, ev->path_len, &bl);
	if (!ev->parent || !bl)
		return;
	/* delete: local inotify watchers see it; the entry's dentry may not
	 * be cached (ENOENT): nothing else to drop then */
	int rc = fuse_lowlevel_notify_delete(sh->se, ev->parent, ev->ino, b, bl);
	if (rc == -ENOENT || rc == -ENOTDIR || rc == -EBUSY)
		inval_entry(sh, ev->parent, b, bl);
	else
		count(sh, &sh->inval_delete, rc);
	inval_inode(sh, ev->parent, -1);
	if (ev->nlink)
		inval_inode(sh, ev->ino, -1); /* another link is left: its count */
}

static void apply(struct dbfs_shared *sh, const struct dbfs_event *ev)
{
	size_t bl, nl;
	const char *b = base(ev->path, ev->path_len, &bl);
	const char *n = ev->new_path ? base(ev->new_path, ev->new_path_len, &nl) : NULL;
	switch (ev->op) {
	case DBFS_EV_CREATE:
	case DBFS_EV_MKDIR:
	case DBFS_EV_MKNOD:
	case DBFS_EV_SYMLINK:
		inval_entry(sh, ev->parent, b, bl); /* a cached negative entry */
		inval_inode(sh, ev->parent, 0);	    /* its mtime, nlink, listing */
		break;
	case DBFS_EV_LINK:
		if (n)
			inval_entry(sh, ev->new_parent, n, nl);
		inval_inode(sh, ev->new_parent, 0);
		inval_inode(sh, ev->ino, -1);
		break;
	case DBFS_EV_UNLINK:
	case DBFS_EV_RMDIR:
	case DBFS_EV_EXPIRE:
		removed(sh, ev);
		break;
	case DBFS_EV_RENAME:
		inval_entry(sh, ev->parent, b, bl);
		if (n)
			inval_entry(sh, ev->new_parent, n, nl);
		inval_inode(sh, ev->parent, 0);
		if (ev->new_parent != ev->parent)
			inval_inode(sh, ev->new_parent, 0);
		inval_inode(sh, ev->ino, -1); /* its ctime */
		break;
	case DBFS_EV_WRITE:
	case DBFS_EV_TRUNCATE:
	case DBFS_EV_FALLOCATE:
	case DBFS_EV_PUNCH:
		inval_inode(sh, ev->ino, 0);
		break;
	case DBFS_EV_SETATTR:
		inval_inode(sh, ev->ino, (ev->attr_mask & FUSE_SET_ATTR_SIZE) ? 0 : -1);
		break;
	case DBFS_EV_SETXATTR:
	case DBFS_EV_REMOVEXATTR:
		inval_inode(sh, ev->ino, -1); /* an ACL changes the mode */
		break;
	default:
		break; /* settled: nothing changed */
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void dbfs_shared_self_inval(struct dbfs *fs, uint64_t ino)
{
	struct dbfs_shared *sh = fs->shared;
	if (!sh)
		return;
	pthread_mutex_lock(&sh->self_lock);
	if (sh->nself == sizeof(sh->self) / sizeof(sh->self[0])) {
		memmove(sh->self, sh->self + 1, (sh->nself - 1) * sizeof(sh->self[0]));
		sh->nself--;
	}
	sh->self[sh->nself++] = ino;
	pthread_mutex_unlock(&sh->self_lock);
	if (sh->wake) { /* wakes the others too: they find nothing new */
		atomic_fetch_add(sh->wake, 1);
		syscall(SYS_futex, sh->wake, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	}
}

/* The notifier: what our own requests asked to invalidate. */
static void self_inval(struct dbfs_shared *sh)
{
	uint64_t inos[64];
	pthread_mutex_lock(&sh->self_lock);
	unsigned n = sh->nself;
	memcpy(inos, sh->self, n * sizeof(inos[0]));
	sh->nself = 0;
	pthread_mutex_unlock(&sh->self_lock);
	for (unsigned i = 0; i < n; i++)
		inval_inode(sh, inos[i], -1);
}

/* One pass of a store's notifier (from a pool thread, shared_pool.c):
 * answer what our own requests asked, read the feed to its end, apply the
 * others' events, publish how far it applied. */
void dbfs_shared_pass(struct dbfs *fs)
{
	struct dbfs_shared *sh = fs->shared;
	struct dbfs_event *ev = sh->evbuf;
	self_inval(sh);
	if (!sh->reader && dbfs_feed_open(fs, NULL, NULL, &sh->reader)) {
		sh->reader = NULL; /* a transient failure: again at the next pass */
		return;
	}
	for (;;) {
		size_t n = 0;
		int rc = dbfs_feed_read(sh->reader, ev, DBFS_SHARED_READ_MAX, &n, 0);
		if (rc == -EAGAIN) {
			uint64_t last = dbfs_feed_reader_next(sh->reader) - 1;
			dbfs_feed_seen(fs, last); /* this process's feed readers */
			applied(sh, last);
			return; /* read it all */
		}
		if (rc) {
			/* another process grew the map: a read takes its size
			 * (readtxn.c); anything else, again at the next pass */
			MDB_txn *t;
			if (!dbfs_read_begin(fs, &t))
				dbfs_read_end(fs, t);
			return;
		}
		uint64_t t = now_ns();
		for (size_t i = 0; i < n; i++) {
			if (ev[i].op == DBFS_EV_GAP) {
				atomic_fetch_add(&sh->gaps, ev[i].gap_next - ev[i].seq);
				continue;
			}
			if (ev[i].writer == sh->writer) {
				atomic_fetch_add(&sh->ev_own, 1);
				continue;
			}
			atomic_fetch_add(&sh->ev_others, 1);
			apply(sh, &ev[i]);
			uint64_t lag = t > ev[i].time_ns ? (t - ev[i].time_ns) / 1000 : 0;
			atomic_store(&sh->lag_last_us, lag);
			uint64_t bk = lag / 50;
			atomic_fetch_add(&sh->lag_hist[bk < DBFS_SHARED_HIST ? bk : DBFS_SHARED_HIST], 1);
			if (lag > atomic_load(&sh->lag_max_us))
				atomic_store(&sh->lag_max_us, lag);
		}
	}
}

void dbfs_shared_session(struct dbfs *fs, struct fuse_session *se)
{
	struct dbfs_shared *sh = fs->shared;
	if (!sh)
		return;
	if (sh->serving) {
		dbfs_shared_pool_leave(fs); /* no pass of it runs after this */
		dbfs_shared_serve_parked(fs, true);
	}
	if (sh->reader) {
		dbfs_feed_close(sh->reader);
		sh->reader = NULL;
	}
	sh->se = se;
	if (!se || !fs->feed)
		return;
	/* The reader starts here, before the kernel's first request to this
	 * mount is served: every change after anything it caches is read.
	 * Its position in the slot: from now on closes wait for it. */
	if (dbfs_feed_open(fs, NULL, NULL, &sh->reader))
		sh->reader = NULL; /* the pass tries again */
	else
		applied(sh, dbfs_feed_reader_next(sh->reader) - 1);
	if (dbfs_shared_pool_join(fs) && sh->reader) {
		dbfs_feed_close(sh->reader);
		sh->reader = NULL;
	}
}

static uint64_t percentile(const _Atomic uint64_t *h, uint64_t total, unsigned pct)
{
	uint64_t want = (total * pct + 99) / 100, seen = 0;
	for (unsigned b = 0; b <= DBFS_SHARED_HIST && want; b++) {
		seen += atomic_load(&h[b]);
		if (seen >= want)
			return (uint64_t)(b + 1) * 50u; /* the bucket's upper end */
	}
	return 0;
}

int dbfs_shared_stats(struct dbfs *fs, struct dbfs_shared_stats *st)
{
	struct dbfs_shared *sh = fs->shared;
	memset(st, 0, sizeof(*st));
	if (!sh)
		return 0;
	st->shared = true;
	st->processes = dbfs_lock_holders(fs->lock_fd);
	st->writer = sh->writer;
	unsigned nshards = dbfs_feed_shards(fs, &st->shard);
	struct dbfs_wake_page *p = page(sh);
	for (int i = 0; p && nshards && i < DBFS_WAKE_SLOTS; i++)
		if (atomic_load(&p->slot[i].writer))
			st->shards_used |= 1ull << (i % nshards);
	st->events_received = atomic_load(&sh->ev_others);
	st->events_own = atomic_load(&sh->ev_own);
	st->inval_entry = atomic_load(&sh->inval_entry);
	st->inval_inode = atomic_load(&sh->inval_inode);
	st->inval_delete = atomic_load(&sh->inval_delete);
	st->inval_failed = atomic_load(&sh->inval_failed);
	st->wakes_sent = atomic_load(&sh->wakes_sent);
	st->close_timeouts = atomic_load(&sh->barrier_timeouts);
	st->events_lost = atomic_load(&sh->gaps);
	uint64_t total = 0;
	for (unsigned b = 0; b <= DBFS_SHARED_HIST; b++)
		total += atomic_load(&sh->lag_hist[b]);
	st->lag_p50_us = percentile(sh->lag_hist, total, 50);
	st->lag_p99_us = percentile(sh->lag_hist, total, 99);
	st->lag_max_us = atomic_load(&sh->lag_max_us);
	return 0;
}
