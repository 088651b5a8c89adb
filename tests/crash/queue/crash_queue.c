/* SPDX-License-Identifier: MIT */
/*
 * Crash test for libmfsq: SIGKILL a worker process many times in the middle
 * of batches of enqueues and dequeues, restart it, and check at the end:
 *
 * - no committed message is missing: the enqueuer thread commits, in ONE
 *   transaction, a batch of messages and its own per-enqueuer counters
 *   (the transactional outbox), so the counters say what was committed;
 * - none is delivered after its acknowledgement: the dequeuer thread acks
 *   inside a transaction that also records the last acknowledged number
 *   per enqueuer; every delivery must be exactly the next one (after a
 *   restart, the one after the last acknowledged) — checked live;
 * - order per enqueuer holds (the same check);
 * - delayed messages (enqueuers DELAYED.., all with the same delay, so due
 *   order is enqueue order) are promoted exactly once, in order, even when
 *   the kill lands in a promotion.
 *
 * With "own-ack" the dequeuer acknowledges in the queue's own transaction
 * (in this MDB_NOSYNC environment: the ack log, queue/acklog.c, no commit)
 * and records what it acknowledged in a MAP_SHARED file of its own, which
 * a kill does not lose either: before the call the numbers it is about to
 * acknowledge ("pending"), after it the ones it did ("done"). After a
 * restart the first delivery of each enqueuer must lie between the two
 * (the kill may land inside mfsq_ack), every later one be the next.
 *
 * With "own-enq" the enqueuer enqueues in the queue's own transactions
 * (the enqueue log, queue/enqlog.c: the call returns before any commit)
 * and keeps in a mapped file, per enqueuer, the numbers it handed to calls
 * ("sent", before the call) and those whose call returned. A call the
 * kill interrupted may have left a prefix of its messages: after a restart
 * each such range is a gap that deliveries may skip, as a whole from where
 * the first is missing; every number whose call returned must arrive.
 *
 * With "large" (implies own-enq) every payload is 4 KiB and ENQ_THREADS
 * threads enqueue, each for its own enqueuers: calls of up to 256 KiB go
 * through the group commit, not the log, and after a group of such large
 * values the queue's flusher thread commits the queued ones (groupcommit.c), so
 * the kill lands in commits that thread leads for other callers.
 *
 * Usage: crash_queue ITERATIONS [own-ack] [own-enq] [large]   (exit 0 on success)
 *        crash_queue worker DIR [own-ack] [own-enq] [large]   (internal)
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mfsq.h"

#define E	    8 /* enqueuers */
#define DELAYED	    6 /* enqueuers from here on send delayed messages */
#define DELAY_US    20000
#define MAX_BACKLOG 20000 /* enqueued, not yet acknowledged */
#define ENQ_THREADS 3	  /* "large": enqueuer e belongs to thread e % ENQ_THREADS */
#define LARGE	    4096  /* "large": payload bytes (the numbers in the first 16) */

static void crash_cfg(struct mfsq_config *c)
{
	mfsq_config_default(c);
	c->nshards = 3;
	c->subshard_msgs = 256;
	c->retain_max = 1024; /* the dequeuer may fall behind over many kills */
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static MDB_env *open_env(const char *dir)
{
	struct mfsq_config c;
	MDB_env *env;

	crash_cfg(&c);
	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, mfsq_dbs_needed(&c) + 8) ||
	    mdb_env_set_mapsize(env, (size_t)1 << 30) ||
	    mdb_env_open(env, dir, MDB_NOTLS | MDB_NOSYNC, 0644)) {
		fprintf(stderr, "cannot open env %s\n", dir);
		exit(2);
	}
	return env;
}

/* own-ack: what the dequeuer acknowledged, kept in DIR/acked (mapped) */
struct acked {
	_Atomic uint64_t pending[E], done[E];
};

/* own-enq: what the enqueuer handed to calls, kept in DIR/sent (mapped) */
#define MAX_GAPS 1024
struct sent {
	_Atomic uint64_t sent[E], returned[E];
	_Atomic uint32_t ngaps[E];
	struct {
		uint64_t a, b; /* [a, b): a prefix of it may be there, the rest not */
	} gap[E][MAX_GAPS];
};

struct app {
	MDB_env *env;
	mfsq_queue *q;
	MDB_dbi db;
	mfsq_sub *sub;
	struct acked *own; /* NULL: acks inside the application's transaction */
	struct sent *enq;  /* NULL: enqueues inside the application's transaction */
	int large;	   /* LARGE payloads from ENQ_THREADS enqueuer threads */
};

/* One enqueuer thread: enqueuers t, t + nt, t + 2 nt, ... of E. */
struct enq_thread {
	struct app *a;
	int t, nt;
};

static void *map_file(const char *dir, const char *name, size_t len)
{
	char path[300];
	void *a;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)len)) {
		fprintf(stderr, "cannot map %s\n", path);
		exit(2);
	}
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (a == MAP_FAILED) {
		fprintf(stderr, "cannot map %s\n", path);
		exit(2);
	}
	return a;
}

/* After a kill: the numbers of an interrupted call become a gap. */
static void sent_restart(struct sent *t)
{
	for (int e = 0; e < E; e++) {
		uint32_t n = t->ngaps[e];

		if (t->returned[e] >= t->sent[e])
			continue;
		if (n == MAX_GAPS) {
			fprintf(stderr, "too many gaps\n");
			exit(2);
		}
		t->gap[e][n].a = t->returned[e];
		t->gap[e][n].b = t->sent[e];
		t->ngaps[e] = n + 1;
		t->returned[e] = t->sent[e];
	}
}

/* Where the next delivery of @e may be if @c is not there: the end of the
 * gap holding @c, or @c when none does. */
static uint64_t gap_end(const struct sent *t, int e, uint64_t c)
{
	for (uint32_t i = 0; t && i < t->ngaps[e]; i++)
		if (t->gap[e][i].a <= c && c < t->gap[e][i].b)
			return t->gap[e][i].b;
	return c;
}

/* The application's own table: 'e'+i -> next number to enqueue for
 * enqueuer i, 'a'+i -> next number expected (after the last acked). */
static uint64_t get_ctr(MDB_txn *txn, MDB_dbi db, char kind, int i)
{
	char k[2] = {kind, (char)i};
	MDB_val key = {2, k}, val;
	uint64_t v = 0;

	if (!mdb_get(txn, db, &key, &val))
		memcpy(&v, val.mv_data, sizeof(v));
	return v;
}

static int put_ctr(MDB_txn *txn, MDB_dbi db, char kind, int i, uint64_t v)
{
	char k[2] = {kind, (char)i};
	MDB_val key = {2, k}, val = {sizeof(v), &v};

	return mdb_put(txn, db, &key, &val, 0);
}

/* The next number expected from each enqueuer: exactly known (lo == hi),
 * or after a restart of an own-ack run, anywhere in [lo, hi] until the
 * first delivery. */
struct expect {
	uint64_t lo[E], hi[E];
	const struct sent *gaps; /* own-enq: numbers that may be missing */
};

static void expect_load(struct app *a, struct expect *x)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(a->env, NULL, MDB_RDONLY, &txn);

	if (rc) {
		fprintf(stderr, "txn: %s\n", mfsq_strerror(rc));
		exit(3);
	}
	for (int i = 0; i < E; i++) {
		x->lo[i] = a->own ? a->own->done[i] : get_ctr(txn, a->db, 'a', i);
		x->hi[i] = a->own ? a->own->pending[i] : x->lo[i];
	}
	x->gaps = a->enq;
	mdb_txn_abort(txn);
}

/* Whether @v may come next from @e: in [lo, hi], or after gaps from there
 * (the same width: the range of an interrupted ack). */
static int expect_ok(const struct expect *x, int e, uint64_t v)
{
	uint64_t c = x->lo[e], w = x->hi[e] - x->lo[e];

	for (;;) {
		uint64_t nc = gap_end(x->gaps, e, c);

		if (v >= c && v <= c + w)
			return 1;
		if (nc == c)
			return 0;
		c = nc;
	}
}

/* Check one delivery of number @v from enqueuer @e against @x. */
static int expect_take(struct expect *x, uint64_t e, uint64_t v)
{
	if (e >= E || !expect_ok(x, (int)e, v))
		return -1;
	x->lo[e] = x->hi[e] = v + 1;
	return 0;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "worker: %s: %s\n", what, mfsq_strerror(rc));
	exit(3);
}

/* The worker's first committed (or, own-enq, returned) enqueue: one byte
 * to the parent on fd CRASHQ_READY_FD, so that most kills land while the
 * worker works, not while it (an ASan build on a loaded machine) still
 * starts up. */
static void tell_ready(void)
{
	static atomic_int told;
	const char *v = getenv("CRASHQ_READY_FD");

	if (!v || atomic_exchange(&told, 1))
		return;
	int fd = atoi(v);

	(void)!write(fd, "r", 1);
	close(fd);
}

static void *enqueuer(void *arg)
{
	struct enq_thread *et = arg;
	struct app *a = et->a;
	unsigned seed = (unsigned)getpid() * 31u + (unsigned)et->t;
	int mine = (E - et->t + et->nt - 1) / et->nt; /* enqueuers of this thread */
	static _Thread_local unsigned char big[64][LARGE];

	for (;;) {
		struct mfsq_msg_in in[64];
		uint64_t vals[64][2], next[E];
		MDB_txn *txn;
		int n = 1 + rand_r(&seed) % 64, rc;

		rc = mdb_txn_begin(a->env, NULL, a->enq ? MDB_RDONLY : 0, &txn);
		if (rc)
			die("txn", rc);
		uint64_t backlog = 0;
		for (int i = 0; i < E; i++) {
			next[i] = a->enq ? a->enq->sent[i] : get_ctr(txn, a->db, 'e', i);
			backlog +=
			    next[i] - (a->own ? a->own->done[i] : get_ctr(txn, a->db, 'a', i));
		}
		if (backlog > MAX_BACKLOG) {
			/* let the dequeuer catch up: over hundreds of kills an
			 * unbounded backlog outgrows retain_max (MFSQ_LAGGED) */
			mdb_txn_abort(txn);
			usleep(1000);
			continue;
		}
		uint64_t due = now_us() + DELAY_US;

		for (int j = 0; j < n; j++) {
			int e = et->t + et->nt * (rand_r(&seed) % mine);

			vals[j][0] = (uint64_t)e;
			vals[j][1] = next[e]++;
			in[j] = (struct mfsq_msg_in){.data = vals[j],
						     .len = sizeof(vals[j]),
						     .enqueuer = (uint64_t)e,
						     .deliver_us = e >= DELAYED ? due : 0};
			if (a->large) {
				memcpy(big[j], vals[j], sizeof(vals[j]));
				memset(big[j] + sizeof(vals[j]), (int)(vals[j][1] & 0xff),
				       LARGE - sizeof(vals[j]));
				in[j].data = big[j];
				in[j].len = LARGE;
			}
		}
		if (a->enq) {
			mdb_txn_abort(txn);
			/* before the call: maybe there (only this thread's own) */
			for (int i = et->t; i < E; i += et->nt)
				a->enq->sent[i] = next[i];
			rc = mfsq_enqueue_batch(a->q, NULL, in, (size_t)n, NULL);
			if (rc)
				die("enqueue", rc);
			for (int i = et->t; i < E; i += et->nt)
				a->enq->returned[i] = next[i];
			tell_ready();
			continue;
		}
		rc = mfsq_enqueue_batch(a->q, txn, in, (size_t)n, NULL);
		for (int i = 0; !rc && i < E; i++)
			rc = put_ctr(txn, a->db, 'e', i, next[i]);
		if (rc) {
			mdb_txn_abort(txn);
			if (rc == EAGAIN)
				continue;
			die("enqueue", rc);
		}
		rc = mdb_txn_commit(txn);
		if (rc)
			die("commit", rc);
		mfsq_notify(a->q);
		tell_ready();
	}
	return NULL;
}

/* The whole payload as the enqueuer wrote it (the numbers checked apart). */
static int payload_ok(const struct app *a, const struct mfsq_msg *m, uint64_t v)
{
	const unsigned char *p = m->data;

	if (m->len != (a->large ? LARGE : 2 * sizeof(uint64_t)))
		return 0;
	for (size_t i = 2 * sizeof(uint64_t); i < m->len; i++)
		if (p[i] != (unsigned char)(v & 0xff))
			return 0;
	return 1;
}

static void *dequeuer(void *arg)
{
	struct app *a = arg;
	mfsq_sub *s = a->sub;
	struct expect x;
	MDB_txn *txn;
	int rc;

	expect_load(a, &x);
	for (;;) {
		struct mfsq_msg out[32];
		size_t n;

		rc = mfsq_dequeue(s, out, 32, &n, 1000);
		if (rc == ETIMEDOUT)
			continue;
		if (rc)
			die("dequeue", rc);
		for (size_t j = 0; j < n; j++) {
			uint64_t v[2];

			memcpy(v, out[j].data, sizeof(v));
			if (!payload_ok(a, &out[j], v[1])) {
				fprintf(stderr,
					"VIOLATION: enqueuer %" PRIu64 " number %" PRIu64
					" has a damaged payload\n",
					v[0], v[1]);
				exit(4);
			}
			if (expect_take(&x, v[0], v[1])) {
				fprintf(stderr,
					"VIOLATION: enqueuer %" PRIu64 " got %" PRIu64
					" expected %" PRIu64 "..%" PRIu64 "\n",
					v[0], v[1], v[0] < E ? x.lo[v[0]] : 0,
					v[0] < E ? x.hi[v[0]] : 0);
				exit(4);
			}
		}
		if (a->own) {
			/* an enqueuer not seen since the restart keeps its range */
			for (int i = 0; i < E; i++)
				a->own->pending[i] = x.hi[i];
			if ((rc = mfsq_ack(s, NULL, NULL)))
				die("ack", rc);
			for (int i = 0; i < E; i++)
				a->own->done[i] = x.lo[i];
			continue;
		}
		if ((rc = mdb_txn_begin(a->env, NULL, 0, &txn)))
			die("txn", rc);
		rc = mfsq_ack(s, txn, NULL);
		for (int i = 0; !rc && i < E; i++)
			rc = put_ctr(txn, a->db, 'a', i, x.lo[i]);
		if (rc) {
			mdb_txn_abort(txn);
			die("ack", rc);
		}
		if ((rc = mdb_txn_commit(txn)))
			die("ack commit", rc);
	}
	return NULL;
}

static void app_open(struct app *a, const char *dir, int own, int enq, int large)
{
	struct mfsq_config c;
	MDB_txn *txn;
	int rc;

	a->large = large;
	a->own = own ? map_file(dir, "acked", sizeof(struct acked)) : NULL;
	a->enq = enq ? map_file(dir, "sent", sizeof(struct sent)) : NULL;
	if (a->enq)
		sent_restart(a->enq);
	a->env = open_env(dir);
	crash_cfg(&c);
	rc = mfsq_open(a->env, "crashq", &c, MFSQ_CREATE, &a->q);
	if (rc)
		die("open", rc);
	if ((rc = mdb_txn_begin(a->env, NULL, 0, &txn)) ||
	    (rc = mdb_dbi_open(txn, "app", MDB_CREATE, &a->db)) || (rc = mdb_txn_commit(txn)))
		die("app db", rc);
	/* before any enqueue: the first run must see every message */
	rc = mfsq_subscribe(a->q, "crash", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL,
			    &a->sub);
	if (rc)
		die("subscribe", rc);
}

static int worker(const char *dir, int own, int enq, int large)
{
	struct enq_thread et[ENQ_THREADS];
	pthread_t te[ENQ_THREADS], td;
	int nt = large ? ENQ_THREADS : 1;
	struct app a;

	app_open(&a, dir, own, enq, large);
	pthread_create(&td, NULL, dequeuer, &a);
	for (int t = 0; t < nt; t++) {
		et[t] = (struct enq_thread){&a, t, nt};
		pthread_create(&te[t], NULL, enqueuer, &et[t]);
	}
	pthread_join(te[0], NULL); /* never returns: killed */
	return 1;
}

/* After the last kill: everything committed and not acknowledged is there,
 * exactly once, in order; nothing else. */
static int verify(const char *dir, int own, int enqm, int large)
{
	struct app a;
	uint64_t enq[E], total = 0;
	struct expect x;
	MDB_txn *txn;
	mfsq_sub *s;
	int rc;

	app_open(&a, dir, own, enqm, large);
	if ((rc = mdb_txn_begin(a.env, NULL, MDB_RDONLY, &txn)))
		die("txn", rc);
	for (int i = 0; i < E; i++) {
		enq[i] = a.enq ? a.enq->sent[i] : get_ctr(txn, a.db, 'e', i);
		total += enq[i];
	}
	mdb_txn_abort(txn);
	expect_load(&a, &x);
	s = a.sub;
	for (;;) {
		struct mfsq_msg out[64];
		size_t n;
		int done = 1;

		for (int i = 0; i < E; i++)
			done &= gap_end(a.enq, i, x.lo[i]) >= enq[i];
		/* delayed ones may still be waiting: a bounded wait for them, then
		 * nothing more may come */
		rc = mfsq_dequeue(s, out, 64, &n, done ? 0 : 10000);
		if (rc == EAGAIN || rc == ETIMEDOUT)
			break;
		if (rc)
			die("dequeue", rc);
		for (size_t j = 0; j < n; j++) {
			uint64_t v[2];

			memcpy(v, out[j].data, sizeof(v));
			if (!payload_ok(&a, &out[j], v[1]) || expect_take(&x, v[0], v[1])) {
				fprintf(stderr,
					"VIOLATION at verify: enqueuer %" PRIu64 " got %" PRIu64
					"\n",
					v[0], v[1]);
				return 1;
			}
		}
	}
	/* an enqueuer not delivered since the last restart: its last
	 * acknowledgement may or may not have completed */
	for (int i = 0; i < E; i++)
		if (!expect_ok(&x, i, enq[i])) {
			fprintf(stderr,
				"MISSING: enqueuer %d committed %" PRIu64
				" delivered up to %" PRIu64 "..%" PRIu64 "\n",
				i, enq[i], x.lo[i], x.hi[i]);
			return 1;
		}
	printf("verified: %" PRIu64 " messages committed over all runs\n", total);
	mfsq_unsubscribe(s);
	mfsq_close(a.q);
	mdb_env_close(a.env);
	return total > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	char dir[256];
	const char *base = getenv("TMPDIR");
	int iters, rc, own = 0, enq = 0, large = 0, nopt = 0;
	unsigned seed = (unsigned)time(NULL);

	for (int i = 2; i < argc; i++) {
		own |= !strcmp(argv[i], "own-ack");
		enq |= !strcmp(argv[i], "own-enq");
		large |= !strcmp(argv[i], "large");
	}
	nopt = own + enq + large;
	enq |= large; /* large payloads go in the queue's own transactions */
	if (argc == 3 + nopt && !strcmp(argv[1], "worker"))
		return worker(argv[2], own, enq, large);
	if (argc != 2 + nopt || (iters = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: crash_queue ITERATIONS [own-ack] [own-enq] [large]\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s/mfsq-crash-XXXXXX", base ? base : "/tmp");
	if (!mkdtemp(dir))
		return 2;
	for (int i = 0; i < iters; i++) {
		struct timespec ts = {0, (long)(5 + rand_r(&seed) % 80) * 1000000L};
		int st, ready[2];
		/* Three kills in four come after the worker's first enqueue (the
		 * run then surely commits something); the fourth at a random
		 * point from its start, which may be its open and recovery. */
		int at_work = i % 4 != 0;

		if (pipe2(ready, O_CLOEXEC) < 0)
			return 2;
		pid_t pid = fork();

		if (pid < 0)
			return 2;
		if (pid == 0) {
			char *wargv[7] = {argv[0], "worker", dir};
			char fdv[16];
			int k = 3;

			snprintf(fdv, sizeof(fdv), "%d", ready[1]);
			if (fcntl(ready[1], F_SETFD, 0) < 0 || setenv("CRASHQ_READY_FD", fdv, 1))
				_exit(2);

			if (own)
				wargv[k++] = "own-ack";
			if (enq)
				wargv[k++] = "own-enq";
			if (large)
				wargv[k++] = "large";
			wargv[k] = NULL;
			execv("/proc/self/exe", wargv);
			_exit(2);
		}
		close(ready[1]);
		if (at_work) {
			struct pollfd pf = {ready[0], POLLIN, 0};

			/* a bound for a hang; a worker that died closes the pipe */
			if (poll(&pf, 1, 120000) == 0) {
				fprintf(stderr, "worker run %d enqueued nothing in 120 s\n", i);
				kill(pid, SIGKILL);
				return 1;
			}
		}
		close(ready[0]);
		/* not a wait for a condition: the kill lands at a random point */
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		if (waitpid(pid, &st, 0) != pid)
			return 2;
		if (!WIFSIGNALED(st)) {
			fprintf(stderr, "worker run %d exited on its own (status %d)\n", i,
				WEXITSTATUS(st));
			return 1;
		}
	}
	rc = verify(dir, own, enq, large);
	if (rc == 0) {
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", dir);
	} else {
		fprintf(stderr, "store kept in %s\n", dir);
	}
	return rc;
}
