/*
 * Delayed work's delivery (issue 19): the queue "later" in the store's own
 * environment and the thread that carries out what falls due in it.
 *
 * Messages. One shard, one enqueuer; each message is a delayed one,
 * deliverable at its due time, tagged with its kind (DBFS_LATER_EXPIRE,
 * _RECLAIM, _SETTLE: internal.h); its payload is struct later_msg. The queue's delay shard holds
 * them in time buckets: nothing per message is in memory, and a restart
 * replays nothing (queue/delay.c).
 *
 * The thread ("dbfs-later"): one for the whole process, whatever the
 * number of stores (threads do not grow with the number of DBFSs,
 * ARCHITECTURE mechanism 1). A store joins its list once it has something
 * scheduled (at open when the expiry index has rows, else by the first
 * commit that schedules) and leaves it at dbfs_close. The thread sleeps
 * until the earliest due time over the list: per store, the queue's own
 * lower bound (mfsq_next_due, refreshed by each dequeue) and the earliest
 * schedule committed since it last looked (dbfs_expire_committed wakes
 * it), at most IDLE_MAX_US. For a store that is due it dequeues with
 * timeout 0 (which promotes what is due), and carries the messages out in
 * write batches of COMMIT_MAX,
 * each acknowledging its messages in its own transaction (mfsq_ack with
 * the batch's transaction): a removal and its acknowledgement commit
 * together, so after a crash each message is carried out exactly once.
 * After the commit it tells the kernel that the names are gone
 * (fuse_lowlevel_notify_delete), under se_lock, which dbfs_set_session
 * takes: the session never goes away under it.
 *
 * Reclaims (reclaim.c) are not messages: their rows (orphans marked "R",
 * truncated ranges) are the work list, and a commit that adds one bumps
 * the store's reclaim_seq. A store with reclaim work gets one piece
 * (DBFS_FREE_MAX, DBFS_FREE_NS; its pages read ahead first) per turn,
 * after its due messages, and then goes to the end of the list like any
 * store served: a 10 GiB reclaim on one store
 * holds the others back by one piece at most, and its own expiries not
 * at all. Between pieces, while requests wait to commit on that store,
 * its next piece waits too (YIELD_MAX_MS at most) without holding the
 * thread. Messages of kind DBFS_LATER_RECLAIM (from an older build) are
 * acknowledged as they come: the rows alone carry the work.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/expire.h"
#include "dbfs/guard.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

#define LATER_QUEUE    DBFS_LATER_QUEUE
#define LATER_SUB      "expire"
#define LATER_ENQUEUER 1
/* Messages one dequeue takes: what one promotion moves (1024), so the
 * stream never grows faster than the thread removes. */
#define TAKE_MAX    1024
#define COMMIT_MAX  128	      /* removals per write batch */
#define IDLE_MAX_US 5000000u  /* longest sleep: a safety net, not the pace */
#define RETRY_US    1000000u  /* after a failed run */
#define HIST_MS	    4096      /* lateness buckets of 1 ms; the last takes the rest */
#define NAMES_MAX   4096      /* names of one file removed at most */

struct later_msg {
	uint64_t ino;
	uint64_t due_sec;
};

/* A name removed by a batch: for the kernel, after the commit. */
struct gone {
	uint64_t parent, ino;
	size_t len;
	char name[DBFS_NAME_MAX + 1];
};

struct dbfs_expire {
	struct dbfs *fs;
	mfsq_queue *q;
	mfsq_sub *sub;
	/* under later.lock */
	struct dbfs_expire *next; /* in later.list */
	bool listed, busy, stop;  /* busy: the thread works on this store now */
	uint64_t wake_us;     /* earliest schedule committed since the thread looked */
	uint64_t retry_us;    /* after a failed run: not before */
	uint64_t tx_gen, tx_due_us; /* leader only: the transaction's earliest schedule */
	uint64_t tx_reclaim_gen;    /* leader only: the transaction added reclaim work */
	/* under later.lock: reclaim work is left while seq != done */
	uint64_t reclaim_seq, reclaim_done;
	uint64_t reclaim_at_us;	    /* the next piece not before (yield to writers) */
	unsigned reclaim_yields;    /* consecutive waits for writers */
	pthread_mutex_t se_lock;    /* fs->se while the thread tells the kernel */
	_Atomic uint64_t fired, stale, reclaimed, reclaim_pieces, settled;
	pthread_mutex_t hist_lock;
	uint64_t hist[HIST_MS + 1], late_max_us;
	struct mfsq_msg *msgs;      /* TAKE_MAX, the thread's */
	/* the batch being carried out (reset when it runs again) */
	struct gone *gone;
	size_t ngone, capgone;
	uint64_t bfired, bstale, bsettled;
	uint64_t fired_due[COMMIT_MAX];
};

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void config(struct mfsq_config *cfg)
{
	mfsq_config_default(cfg);
	cfg->nshards = 1;
	cfg->max_payload = sizeof(struct later_msg);
}

unsigned dbfs_expire_dbs_needed(void)
{
	struct mfsq_config cfg;
	config(&cfg);
	return mfsq_dbs_needed(&cfg);
}

/* ---- scheduling (inside the caller's transaction) ---- */

int dbfs_later_enqueue(struct dbfs *fs, MDB_txn *txn, unsigned tag, uint64_t ino,
		       uint64_t due_sec)
{
	return dbfs_later_enqueue_at(fs, txn, tag, ino, due_sec, due_sec * 1000000u);
}

int dbfs_later_enqueue_at(struct dbfs *fs, MDB_txn *txn, unsigned tag, uint64_t ino,
			  uint64_t word, uint64_t due)
{
	struct dbfs_expire *ex = fs->expire;
	struct later_msg m = {ino, word};
	struct mfsq_msg_in in = {
	    .data = &m, .len = sizeof(m), .enqueuer = LATER_ENQUEUER, .deliver_us = due,
	    .tag = tag};
	int rc = mfsq_enqueue(ex->q, txn, &in, NULL);
	if (rc == ENOSPC)
		return MDB_MAP_FULL; /* LMDB marked the transaction: grow, run again */
	if (rc)
		return dbfs_queue_err(rc);
	if (ex->tx_gen != fs->txn_gen || due < ex->tx_due_us) {
		ex->tx_gen = fs->txn_gen;
		ex->tx_due_us = due;
	}
	return 0;
}

int dbfs_expire_enqueue(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t due_sec)
{
	return dbfs_later_enqueue(fs, txn, DBFS_LATER_EXPIRE, ino, due_sec);
}

void dbfs_later_reclaim_noted(struct dbfs *fs)
{
	if (fs->expire)
		fs->expire->tx_reclaim_gen = fs->txn_gen;
}

/* The process's one delivery thread and the stores it serves. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC: work came, or a store is free */
	pthread_once_t once;
	struct dbfs_expire *list;
	bool started;
} later = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_ONCE_INIT, NULL, false};

static void later_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&later.cond);
	pthread_cond_init(&later.cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void *later_main(void *arg);

/* Put ex on the thread's list (starting the thread the first time) and
 * wake it. Under later.lock. The creator may be a request's thread: the
 * new one inherits its signal mask, so the host's signals stay where they
 * go (its class and CPUs it resets itself). */
static void later_join(struct dbfs_expire *ex)
{
	if (!ex->listed && !ex->stop) {
		ex->next = later.list;
		later.list = ex;
		ex->listed = true;
	}
	if (!later.started) {
		pthread_t t;
		later.started = pthread_create(&t, NULL, later_main, NULL) == 0;
		if (later.started)
			pthread_detach(t);
	}
	pthread_cond_broadcast(&later.cond);
}

void dbfs_expire_committed(struct dbfs *fs)
{
	struct dbfs_expire *ex = fs->expire;
	if (!ex || (ex->tx_gen != fs->txn_gen && ex->tx_reclaim_gen != fs->txn_gen))
		return;
	pthread_mutex_lock(&later.lock);
	if (ex->tx_gen == fs->txn_gen && ex->tx_due_us < ex->wake_us)
		ex->wake_us = ex->tx_due_us;
	if (ex->tx_reclaim_gen == fs->txn_gen)
		ex->reclaim_seq++;
	ex->tx_gen = ex->tx_reclaim_gen = 0;
	later_join(ex);
	pthread_mutex_unlock(&later.lock);
}

/* ---- carrying out (a write batch) ---- */

static int note_gone(struct dbfs_expire *ex, uint64_t parent, uint64_t ino, const char *name,
		     size_t len)
{
	if (ex->ngone == ex->capgone) {
		size_t cap = ex->capgone ? ex->capgone * 2 : 64;
		struct gone *g = realloc(ex->gone, cap * sizeof(*g));
		if (!g)
			return ENOMEM;
		ex->gone = g;
		ex->capgone = cap;
	}
	struct gone *g = &ex->gone[ex->ngone++];
	g->parent = parent;
	g->ino = ino;
	g->len = len;
	memcpy(g->name, name, len);
	g->name[len] = '\0';
	return 0;
}

/* The first name of `ino` (names.c): 0 with dir and name set,
 * MDB_NOTFOUND when it has none. */
static int first_name(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t *dir, char *name,
		      size_t *len)
{
	struct dbfs_inode in;
	const char *n;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc == -ENOENT)
		return MDB_NOTFOUND;
	if (!rc)
		rc = dbfs_first_name(fs, txn, &in, dir, &n, len);
	if (!rc) {
		memcpy(name, n, *len);
		name[*len] = '\0';
	}
	return rc;
}

/* Carry out the expiry of `ino` due at `due_sec`, if it is still due. */
static int expire_one(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t due_sec)
{
	struct dbfs_expire *ex = fs->expire;
	struct dbfs_inode in;
	uint64_t row;
	int rc = dbfs_expire_row(fs, txn, ino, &row);
	if (rc == MDB_NOTFOUND || (!rc && row != due_sec)) {
		ex->bstale++; /* cancelled, or rescheduled: another message */
		return 0;
	}
	if (rc)
		return rc;
	rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc == -ENOENT)
		return dbfs_expire_cancel(fs, txn, ino);
	if (rc)
		return rc;
	char name[DBFS_NAME_MAX + 1];
	for (unsigned n = 0; in.nlink && n < NAMES_MAX; n++) {
		uint64_t dir;
		size_t len;
		rc = first_name(fs, txn, ino, &dir, name, &len);
		if (rc == MDB_NOTFOUND)
			break;
		if (rc)
			return rc;
		rc = dbfs_op_expire_unlink(fs, txn, dir, name);
		if (dbfs_is_refusal(rc))
			break; /* a row naming no entry (fsck reports it): nothing changed */
		if (rc)
			return rc;
		if ((rc = note_gone(ex, dir, ino, name, len)))
			return rc;
	}
	if (ex->bfired < COMMIT_MAX)
		ex->fired_due[ex->bfired] = due_sec;
	ex->bfired++;
	/* the schedule is spent (an inode destroyed by the last unlink took
	 * its row already; one still open keeps its xattr until it goes) */
	return dbfs_expire_cancel(fs, txn, ino);
}

struct chunk {
	const struct mfsq_msg *m;
	size_t n;
};

static int deliver_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct dbfs_expire *ex = fs->expire;
	const struct chunk *c = arg;
	int rc = 0;
	ex->ngone = 0;
	ex->bfired = ex->bstale = ex->bsettled = 0;
	for (size_t i = 0; !rc && i < c->n; i++) {
		struct later_msg lm;
		bool known = c->m[i].tag == DBFS_LATER_EXPIRE || c->m[i].tag == DBFS_LATER_SETTLE;
		if (c->m[i].tag == DBFS_LATER_RECLAIM)
			continue; /* an older build's: the orphan row carries the work */
		if (!known || c->m[i].len != sizeof(lm)) {
			ex->bstale++; /* a kind this build does not know: dropped */
			continue;
		}
		memcpy(&lm, c->m[i].data, sizeof(lm));
		if (c->m[i].tag == DBFS_LATER_SETTLE) {
			bool fired;
			rc = dbfs_settle_fire(fs, txn, lm.ino, (uint32_t)lm.due_sec, &fired);
			ex->bsettled += fired;
			continue;
		}
		rc = expire_one(fs, txn, lm.ino, lm.due_sec);
	}
	if (rc)
		return dbfs_is_refusal(rc) ? MDB_CORRUPTED : rc; /* never commit half */
	rc = mfsq_ack(ex->sub, txn, &c->m[c->n - 1]);
	if (rc == ENOSPC)
		return MDB_MAP_FULL;
	return dbfs_queue_err(rc);
}

static void record_lateness(struct dbfs_expire *ex, uint64_t t_us)
{
	pthread_mutex_lock(&ex->hist_lock);
	for (uint64_t i = 0; i < ex->bfired && i < COMMIT_MAX; i++) {
		uint64_t due = ex->fired_due[i] * 1000000u;
		uint64_t late = t_us > due ? t_us - due : 0;
		uint64_t b = late / 1000u;
		ex->hist[b < HIST_MS ? b : HIST_MS]++;
		if (late > ex->late_max_us)
			ex->late_max_us = late;
	}
	pthread_mutex_unlock(&ex->hist_lock);
}

/* After a commit: the kernel forgets the names (it caches them long). */
static void tell_kernel(struct dbfs *fs, struct dbfs_expire *ex)
{
	pthread_mutex_lock(&ex->se_lock);
	for (size_t i = 0; fs->se && i < ex->ngone; i++) {
		struct gone *g = &ex->gone[i];
		fuse_lowlevel_notify_delete(fs->se, g->parent, g->ino, g->name, g->len);
	}
	pthread_mutex_unlock(&ex->se_lock);
}

/* The subscriber again from its stored position: after a batch that did
 * not commit, its position in memory had moved past what it was given. */
static int resubscribe(struct dbfs *fs, struct dbfs_expire *ex)
{
	int rc;
	mfsq_unsubscribe(ex->sub);
	ex->sub = NULL;
	DBFS_QCALL(fs, rc,
		   mfsq_subscribe(ex->q, LATER_SUB, MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL,
				  NULL, &ex->sub));
	return rc;
}

struct piece {
	int did, finished;
};

static int piece_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct piece *p = arg;
	int rc = dbfs_reclaim_step(fs, txn, &p->did, &p->finished);
	return dbfs_is_refusal(rc) ? MDB_CORRUPTED : rc;
}

/* A piece queued with requests that wait to commit would join their batch
 * and make them wait for its 64 MiB: the next piece waits until they have
 * committed in a batch of their own, for up to YIELD_MAX_MS (polled every
 * millisecond by the thread, which serves the other stores meanwhile). */
#define YIELD_MAX_MS 50
static bool writers_waiting(struct dbfs *fs)
{
	pthread_mutex_lock(&fs->wq_lock);
	bool busy = fs->wq_head || fs->wq_leader;
	pthread_mutex_unlock(&fs->wq_lock);
	return busy;
}

/* One piece of the store's reclaim work, a transaction of its own. 0:
 * none left (or not its turn yet), 1: more, else an error. */
static int reclaim_step(struct dbfs *fs, struct dbfs_expire *ex)
{
	pthread_mutex_lock(&later.lock);
	uint64_t seq = ex->reclaim_seq;
	bool want = seq != ex->reclaim_done && ex->reclaim_at_us <= now_us();
	pthread_mutex_unlock(&later.lock);
	if (!want)
		return 0;
	if (ex->reclaim_yields < YIELD_MAX_MS && writers_waiting(fs)) {
		ex->reclaim_yields++;
		pthread_mutex_lock(&later.lock);
		ex->reclaim_at_us = now_us() + 1000u;
		pthread_mutex_unlock(&later.lock);
		return 0;
	}
	ex->reclaim_yields = 0;
	/* this piece's pages and the next one's, read ahead without the
	 * writer: freeing a block reads its page, from the disk if it left
	 * the page cache (the next piece's have this one's time to come) */
	dbfs_reclaim_prefetch(fs, 2 * DBFS_FREE_MAX);
	struct piece p = {0, 0};
	int rc = dbfs_write_sized(fs, piece_fn, &p, DBFS_BATCH_BYTES); /* no data write joins */
	if (rc)
		return rc;
	if (!p.did) {
		pthread_mutex_lock(&later.lock);
		if (ex->reclaim_seq == seq) /* nothing committed meanwhile */
			ex->reclaim_done = seq;
		pthread_mutex_unlock(&later.lock);
		return 0;
	}
	if (p.finished)
		atomic_fetch_add(&ex->reclaimed, 1);
	else
		atomic_fetch_add(&ex->reclaim_pieces, 1);
	return 1;
}

/* One dequeue and what it brought, then one piece of reclaim work. 1:
 * there may be more due at once, 0: nothing more, else an error (the
 * caller waits a while). */
static int run_once(struct dbfs *fs, struct dbfs_expire *ex)
{
	size_t n = 0;
	int rc;
	if (!ex->sub && (rc = resubscribe(fs, ex)))
		return rc;
	DBFS_QCALL(fs, rc, mfsq_dequeue(ex->sub, ex->msgs, TAKE_MAX, &n, 0));
	if (rc == EAGAIN)
		rc = 0;
	else if (rc == MFSQ_LAGGED)
		rc = 1; /* cannot happen while it keeps up (TAKE_MAX); read on */
	else if (rc)
		return rc;
	for (size_t i = 0; i < n;) {
		/* in batches of COMMIT_MAX, each acknowledging its messages */
		size_t j = i + COMMIT_MAX < n ? i + COMMIT_MAX : n;
		struct chunk c = {ex->msgs + i, j - i};
		rc = dbfs_write(fs, deliver_fn, &c);
		if (rc) {
			resubscribe(fs, ex);
			return rc;
		}
		record_lateness(ex, now_us());
		atomic_fetch_add(&ex->fired, ex->bfired);
		atomic_fetch_add(&ex->stale, ex->bstale);
		atomic_fetch_add(&ex->settled, ex->bsettled);
		tell_kernel(fs, ex);
		i = j;
	}
	int more = n == TAKE_MAX || rc == 1;
	rc = reclaim_step(fs, ex);
	if (rc < 0 || rc > 1)
		return rc;
	return more || rc;
}

/* run_once under a guard of its own: the thread reads the maps. -EIO when
 * they faulted (the store is lost; the thread ends). */
static int run_guarded(struct dbfs *fs, struct dbfs_expire *ex)
{
	struct dbfs_guard g;
	dbfs_guard_push(&g, fs);
	if (sigsetjmp(g.jb, 0)) {
		dbfs_guard_recovered(&g);
		return -EIO;
	}
	int rc = run_once(fs, ex);
	dbfs_guard_pop(&g);
	return rc;
}

static void wait_until(uint64_t until_us, uint64_t now)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t at_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
			 (until_us - now) * 1000u;
	ts.tv_sec = (time_t)(at_ns / 1000000000u);
	ts.tv_nsec = (long)(at_ns % 1000000000u);
	pthread_cond_timedwait(&later.cond, &later.lock, &ts);
}

/* When a store wants the thread next (under later.lock). */
static uint64_t due_of(const struct dbfs_expire *ex, uint64_t now)
{
	uint64_t due = mfsq_next_due(ex->q);
	if (ex->wake_us < due)
		due = ex->wake_us;
	if (ex->reclaim_seq != ex->reclaim_done && ex->reclaim_at_us < due)
		due = ex->reclaim_at_us;
	if (due > now + IDLE_MAX_US)
		due = now + IDLE_MAX_US;
	return ex->retry_us > due ? ex->retry_us : due;
}

static void *later_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "dbfs-later");
	/* it inherits its creator's class and CPUs: a request's thread may
	 * be SCHED_IDLE (the governor's) or pinned (a ring's); it would then
	 * starve under load. Back to the normal class, on the process's CPUs. */
	struct sched_param sp = {0};
	cpu_set_t cpus;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (sched_getaffinity(getpid(), sizeof(cpus), &cpus) == 0)
		sched_setaffinity(0, sizeof(cpus), &cpus);
	pthread_mutex_lock(&later.lock);
	for (;;) {
		uint64_t now = now_us(), next = now + IDLE_MAX_US;
		struct dbfs_expire *ex, *pick = NULL;
		for (ex = later.list; ex; ex = ex->next) {
			if (ex->stop) /* dbfs_close waits to take it off the list */
				continue;
			uint64_t due = due_of(ex, now);
			if (due <= now) {
				pick = ex;
				break;
			}
			if (due < next)
				next = due;
		}
		if (!pick) {
			wait_until(next, now);
			continue;
		}
		/* the one due is served, then goes to the end of the list, so
		 * that a store with much to do does not keep the others waiting */
		struct dbfs_expire **pp = &later.list;
		while (*pp != pick)
			pp = &(*pp)->next;
		*pp = pick->next;
		pick->next = NULL;
		for (pp = &later.list; *pp; pp = &(*pp)->next)
			;
		*pp = pick;
		pick->wake_us = UINT64_MAX;
		pick->busy = true;
		pthread_mutex_unlock(&later.lock);
		int rc = run_guarded(pick->fs, pick);
		pthread_mutex_lock(&later.lock);
		pick->busy = false;
		pick->retry_us = rc < 0 || rc > 1 ? now_us() + RETRY_US : 0;
		if (rc == -EIO && atomic_load(&pick->fs->map_lost))
			pick->retry_us = UINT64_MAX; /* the store is lost: never again */
		pthread_cond_broadcast(&later.cond); /* dbfs_expire_stop may wait */
	}
	return NULL;
}

/* ---- open, close, session, stats ---- */

int dbfs_expire_start(struct dbfs *fs, char *err, size_t errlen)
{
	struct mfsq_config cfg;
	MDB_txn *txn;
	MDB_stat st = {0};
	int rc;
	if (fs->opt.read_only || !fs->db_expire)
		return 0;
	struct dbfs_expire *ex = calloc(1, sizeof(*ex));
	if (ex)
		ex->msgs = calloc(TAKE_MAX, sizeof(*ex->msgs));
	if (!ex || !ex->msgs) {
		free(ex);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	config(&cfg);
	for (int tries = 0;; tries++) {
		uint64_t seen = fs->map_size;
		rc = mfsq_open(fs->env, LATER_QUEUE, &cfg, MFSQ_CREATE, &ex->q);
		if (rc != ENOSPC || tries >= 3 || dbfs_grow_map(fs, seen))
			break;
	}
	if (!rc && (rc = resubscribe(fs, ex)))
		mfsq_close(ex->q);
	if (rc) {
		free(ex->msgs);
		free(ex);
		snprintf(err, errlen, "cannot open the queue of delayed work: %s",
			 mfsq_strerror(rc));
		return dbfs_errno(dbfs_queue_err(rc > 0 ? rc : EIO));
	}
	pthread_once(&later.once, later_init);
	pthread_mutex_init(&ex->se_lock, NULL);
	pthread_mutex_init(&ex->hist_lock, NULL);
	ex->fs = fs;
	ex->wake_us = UINT64_MAX;
	fs->expire = ex;
	/* something scheduled already (a restart): the thread now */
	MDB_stat ost = {0}, sst = {0}, tst = {0};
	if ((rc = dbfs_read_begin(fs, &txn)) == 0) {
		rc = mdb_stat(txn, fs->db_expire, &st) ?: mdb_stat(txn, fs->db_orphan, &ost);
		if (!rc && fs->db_settle)
			rc = mdb_stat(txn, fs->db_settle, &sst);
		if (!rc && fs->db_trim)
			rc = mdb_stat(txn, fs->db_trim, &tst);
		dbfs_read_end(fs, txn);
	}
	if (rc) {
		snprintf(err, errlen, "cannot read the expiry index: %s", mdb_strerror(rc));
		dbfs_expire_stop(fs);
		return dbfs_errno(rc);
	}
	/* expiries, reclaims left by a crash, bursts (or the periods' row) */
	if (st.ms_entries || ost.ms_entries || sst.ms_entries || tst.ms_entries) {
		pthread_mutex_lock(&later.lock);
		ex->wake_us = 0;
		/* orphans marked "R", truncated blocks: whatever waits */
		ex->reclaim_seq = ost.ms_entries || tst.ms_entries;
		later_join(ex);
		pthread_mutex_unlock(&later.lock);
	}
	return 0;
}

void dbfs_expire_stop(struct dbfs *fs)
{
	struct dbfs_expire *ex = fs->expire;
	if (!ex)
		return;
	pthread_mutex_lock(&later.lock);
	ex->stop = true;
	while (ex->busy) /* the thread is in a batch or a piece of this store */
		pthread_cond_wait(&later.cond, &later.lock);
	if (ex->listed) {
		struct dbfs_expire **pp = &later.list;
		while (*pp != ex)
			pp = &(*pp)->next;
		*pp = ex->next;
	}
	pthread_mutex_unlock(&later.lock);
	mfsq_unsubscribe(ex->sub);
	mfsq_close(ex->q);
	pthread_mutex_destroy(&ex->se_lock);
	pthread_mutex_destroy(&ex->hist_lock);
	free(ex->gone);
	free(ex->msgs);
	free(ex);
	fs->expire = NULL;
}

void dbfs_expire_session(struct dbfs *fs, struct fuse_session *se)
{
	struct dbfs_expire *ex = fs->expire;
	if (ex)
		pthread_mutex_lock(&ex->se_lock);
	fs->se = se;
	if (ex)
		pthread_mutex_unlock(&ex->se_lock);
}

static uint64_t percentile(const uint64_t *h, uint64_t total, unsigned pct)
{
	uint64_t want = (total * pct + 99) / 100, seen = 0;
	for (unsigned b = 0; b <= HIST_MS; b++) {
		seen += h[b];
		if (seen >= want && want)
			return (uint64_t)(b + 1) * 1000u; /* the bucket's upper end */
	}
	return 0;
}

int dbfs_expire_stats(struct dbfs *fs, struct dbfs_expire_stats *st)
{
	struct dbfs_expire *ex = fs->expire;
	MDB_txn *txn;
	MDB_stat ms = {0};
	memset(st, 0, sizeof(*st));
	if (!ex)
		return 0;
	st->fired = atomic_load(&ex->fired);
	st->stale = atomic_load(&ex->stale);
	pthread_mutex_lock(&ex->hist_lock);
	uint64_t total = 0;
	for (unsigned b = 0; b <= HIST_MS; b++)
		total += ex->hist[b];
	st->late_p50_us = percentile(ex->hist, total, 50);
	st->late_p99_us = percentile(ex->hist, total, 99);
	st->late_max_us = ex->late_max_us;
	pthread_mutex_unlock(&ex->hist_lock);
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return -EIO;
	rc = mdb_stat(txn, fs->db_expire, &ms) ?:
	     dbfs_reclaim_pending(fs, txn, &st->reclaim_files, &st->reclaim_bytes);
	dbfs_read_end(fs, txn);
	if (rc)
		return -EIO;
	st->pending = ms.ms_entries;
	st->reclaimed = atomic_load(&ex->reclaimed);
	st->reclaim_pieces = atomic_load(&ex->reclaim_pieces);
	st->freed_txn_max = atomic_load_explicit(&fs->free_most, memory_order_relaxed);
	st->settled = atomic_load(&ex->settled);
	if (!dbfs_read_begin(fs, &txn)) {
		if (dbfs_settle_pending(fs, txn, &st->settle_pending))
			st->settle_pending = 0;
		dbfs_read_end(fs, txn);
	}
	return 0;
}
