/* loop.c: sessions served by the worker pool, without a kernel mount (each
 * session's fd is a pipe nobody writes to, through libfuse's custom I/O);
 * and the transport's pure parts: the request costs it routes by
 * (dbfs_request_cost), a ring thread's roaming, the class changes. */
#include <dirent.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/dbfs.h"
#include "loop.h"
#include "loop_private.h"
#include "colocate.h"
#include "ring_roam.h"
#include "suites.h"
#include "thread_sched.h"

static ssize_t pipe_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

static ssize_t pipe_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return writev(fd, iov, count);
}

static const struct fuse_custom_io pipe_io = {.read = pipe_read, .writev = pipe_writev};

static void on_end(void *arg)
{
	(void)arg;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A removed session is freed once no worker can still hold an epoll event
 * naming it; workers that sit idle in epoll_wait must not keep it forever,
 * nor must the express thread (governor=latency, run `_i` == 1). */
START_TEST(graveyard_empties_while_idle)
{
	struct mfs_loop *loop;
	ck_assert_int_eq(mfs_loop_create(4, &loop), 0);
	ck_assert_int_eq(mfs_loop_set_latency(loop, _i == 1), 0);
	sleep_ms(50); /* let every worker start its first wait */

	for (int round = 0; round < 2; round++) {
		char *argv[] = {"test_loop", NULL};
		struct fuse_args args = FUSE_ARGS_INIT(1, argv);
		struct fuse_lowlevel_ops ops = {0};
		struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
		fuse_opt_free_args(&args);
		ck_assert_ptr_nonnull(se);
		int p[2];
		ck_assert_int_eq(pipe(p), 0);
		ck_assert_int_eq(fuse_session_custom_io(se, &pipe_io, p[0]), 0);

		struct mfs_session *s;
		ck_assert_int_eq(mfs_loop_add(loop, se, "idle", on_end, NULL, &s), 0);
		sleep_ms(20);
		mfs_loop_remove(s);
		unsigned left = mfs_loop_graveyard(loop);
		for (int i = 0; i < 1000 && left; i++) {
			sleep_ms(10);
			left = mfs_loop_graveyard(loop);
		}
		ck_assert_msg(left == 0, "round %d: %u removed sessions still not freed after 10 s",
			      round, left);
		fuse_session_destroy(se); /* closes p[0] */
		close(p[1]);
	}
	mfs_loop_destroy(loop);
}
END_TEST

/* A timer tick (2 ms apart while a session is throttled or watched)
 * wakes one idle worker, not all of them. Level-triggered, a worker woken
 * for the tick passed the wake-up on to the next (epoll's ready list)
 * until one had read it; while the first waited for loop->lock (held by
 * a worker serving), every idle worker woke, each to take the lock and
 * find nothing: 8 wake-ups per tick. Here the test holds the lock as
 * such a worker does, 3 ms at a time. */
START_TEST(a_tick_wakes_one_worker)
{
	struct mfs_loop *loop;
	ck_assert_int_eq(mfs_loop_create(8, &loop), 0);
	sleep_ms(50); /* let every worker start its first wait */
	pthread_mutex_lock(&loop->lock);
	mfs_loop_watch(loop, mfs_now_ns()); /* ticks until 100 ms without reads */
	uint64_t gen0 = loop->gen, ticks0 = loop->ticks;
	pthread_mutex_unlock(&loop->lock);
	for (int i = 0; i < 30; i++) {
		pthread_mutex_lock(&loop->lock);
		mfs_loop_watch(loop, mfs_now_ns());
		sleep_ms(3);
		pthread_mutex_unlock(&loop->lock);
		sleep_ms(1);
	}
	sleep_ms(10); /* the last hold's wake-ups read their tick */
	pthread_mutex_lock(&loop->lock);
	uint64_t waits = loop->gen - gen0, ticks = loop->ticks - ticks0;
	pthread_mutex_unlock(&loop->lock);
	ck_assert_uint_gt(ticks, 10);
	/* at most one wake-up per expiry (the ones during a hold wake a worker
	 * each), and each worker's WAIT_MS timeout */
	ck_assert_msg(waits <= 2 * ticks + 8, "%llu waits started for %llu ticks",
		      (unsigned long long)waits, (unsigned long long)ticks);
	mfs_loop_destroy(loop);
}
END_TEST

/* Jobs posted to the pool (mfs_loop_post, used by the io_uring queues for
 * requests that may wait long) each run once, on a worker, in order when one
 * worker takes them, also while the workers are busy with each other's. */
struct job_log {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int ran[64];
	int n;
	pthread_t self;
	bool on_caller; /* some job ran on the posting thread */
};

struct one_job {
	struct mfs_loop_job job;
	struct job_log *log;
	int id;
};

static void job_fn(void *arg)
{
	struct one_job *j = arg;
	struct job_log *l = j->log;

	sleep_ms(j->id % 4 == 0 ? 2 : 0); /* keep a worker busy now and then */
	pthread_mutex_lock(&l->lock);
	if (pthread_equal(pthread_self(), l->self))
		l->on_caller = true;
	l->ran[l->n++] = j->id;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

START_TEST(posted_jobs_run_once_in_order)
{
	unsigned workers = _i == 0 ? 1 : 4;
	struct mfs_loop *loop;
	struct job_log l = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct one_job jobs[64];

	l.self = pthread_self();
	ck_assert_int_eq(mfs_loop_create(workers, &loop), 0);
	for (int i = 0; i < 64; i++) {
		jobs[i] = (struct one_job){.job = {.fn = job_fn, .arg = &jobs[i]}, .log = &l, .id = i};
		mfs_loop_post(loop, &jobs[i].job);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&l.lock);
	while (l.n < 64 && pthread_cond_timedwait(&l.cond, &l.lock, &ts) == 0)
		;
	int n = l.n;
	pthread_mutex_unlock(&l.lock);
	ck_assert_msg(n == 64, "%d of 64 jobs ran within 10 s", n);
	sleep_ms(20); /* a job run twice would show now */
	ck_assert_int_eq(l.n, 64);
	ck_assert(!l.on_caller);
	bool seen[64] = {false};
	for (int i = 0; i < 64; i++) {
		ck_assert_msg(!seen[l.ran[i]], "job %d ran twice", l.ran[i]);
		seen[l.ran[i]] = true;
		if (workers == 1)
			ck_assert_int_eq(l.ran[i], i);
	}
	mfs_loop_destroy(loop);
}
END_TEST

/* A request as /dev/fuse lays it out: header, then `op` (oplen bytes). */
static size_t request(void *buf, uint32_t opcode, const void *op, size_t oplen)
{
	struct fuse_in_header in = {.opcode = opcode, .unique = 1, .nodeid = 1};

	in.len = (uint32_t)(sizeof(in) + oplen);
	memcpy(buf, &in, sizeof(in));
	memcpy((char *)buf + sizeof(in), op, oplen);
	return sizeof(in) + oplen;
}

static unsigned cost_of_write(uint32_t size, size_t oplen)
{
	char b[256];
	struct fuse_write_in w = {.size = size};

	return dbfs_request_cost(b, request(b, FUSE_WRITE, &w, oplen));
}

static unsigned cost_of_setattr(uint32_t valid)
{
	char b[256];
	struct fuse_setattr_in a = {.valid = valid};

	return dbfs_request_cost(b, request(b, FUSE_SETATTR, &a, sizeof(a)));
}

static unsigned cost_of(uint32_t opcode)
{
	char b[256];
	char op[64] = {0};

	return dbfs_request_cost(b, request(b, opcode, op, sizeof(op)));
}

/* What the rings route by: syncs and big or freeing changes may wait long;
 * other changes wait for a commit; the rest is served from the map. */
START_TEST(request_costs)
{
	const unsigned C = DBFS_COST_COMMIT, L = DBFS_COST_LONG;
	const uint32_t always_long[] = {FUSE_FSYNC, FUSE_FSYNCDIR, FUSE_SYNCFS, FUSE_FLUSH};
	const uint32_t long_changes[] = {FUSE_COPY_FILE_RANGE, FUSE_FALLOCATE};
	const uint32_t changes[] = {FUSE_MKNOD,	 FUSE_MKDIR,	FUSE_UNLINK,	  FUSE_RMDIR,
				    FUSE_RENAME, FUSE_RENAME2,	FUSE_LINK,	  FUSE_SYMLINK,
				    FUSE_CREATE, FUSE_SETXATTR, FUSE_REMOVEXATTR, FUSE_TMPFILE};
	const uint32_t reads[] = {FUSE_LOOKUP,	    FUSE_GETATTR,  FUSE_READ,	   FUSE_READDIR,
				  FUSE_READDIRPLUS, FUSE_GETXATTR, FUSE_LISTXATTR, FUSE_FORGET,
				  FUSE_STATFS,	    FUSE_OPEN,	   FUSE_READLINK,  FUSE_ACCESS};

	for (size_t i = 0; i < sizeof(always_long) / sizeof(always_long[0]); i++)
		ck_assert_uint_eq(cost_of(always_long[i]), L);
	for (size_t i = 0; i < sizeof(long_changes) / sizeof(long_changes[0]); i++)
		ck_assert_uint_eq(cost_of(long_changes[i]), C | L);
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		ck_assert_uint_eq(cost_of(changes[i]), C);
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		ck_assert_uint_eq(cost_of(reads[i]), 0);
	/* writes: long above DBFS_COST_BIG_WRITE bytes, not at it */
	ck_assert_uint_eq(cost_of_write(4096, sizeof(struct fuse_write_in)), C);
	ck_assert_uint_eq(cost_of_write(DBFS_COST_BIG_WRITE, sizeof(struct fuse_write_in)), C);
	ck_assert_uint_eq(cost_of_write(DBFS_COST_BIG_WRITE + 1, sizeof(struct fuse_write_in)),
			  C | L);
	ck_assert_uint_eq(cost_of_write(1u << 20, sizeof(struct fuse_write_in)), C | L);
	/* a setattr is long when it truncates */
	ck_assert_uint_eq(cost_of_setattr(FATTR_SIZE), C | L);
	ck_assert_uint_eq(cost_of_setattr(FATTR_SIZE | FATTR_MTIME), C | L);
	ck_assert_uint_eq(cost_of_setattr(FATTR_MODE | FATTR_UID), C);
	/* cut before the fixed arguments: by opcode alone; before the header: 0 */
	ck_assert_uint_eq(cost_of_write(1u << 20, 8), C);
	char b[64];
	size_t n = request(b, FUSE_FSYNC, "", 0);
	ck_assert_uint_eq(dbfs_request_cost(b, n), L);
	ck_assert_uint_eq(dbfs_request_cost(b, sizeof(struct fuse_in_header) - 1), 0);
}
END_TEST

static unsigned allowed_cpus(void)
{
	cpu_set_t set;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	return (unsigned)CPU_COUNT(&set);
}

/* A ring thread leaves its CPU at a read of 256 KiB or more, stays away
 * while small requests come within 5 ms of the last big read, and is
 * pinned home at the first small one after that. (Forked test: the
 * affinity changes are the test process's own.) */
START_TEST(ring_roams_for_big_reads)
{
	cpu_set_t all;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
	if (CPU_COUNT(&all) < 2)
		return; /* one CPU: never roams */
	unsigned home = 0;
	while (!CPU_ISSET(home, &all))
		home++;
	struct mfs_ring_roam r;
	char b[128];
	struct fuse_read_in big = {.size = 1u << 20}, small = {.size = 4096};
	size_t nbig = request(b, FUSE_READ, &big, sizeof(big));

	mfs_ring_roam_init(&r, home, &all);
	mfs_ring_roam_start(&r);
	ck_assert_uint_eq(allowed_cpus(), 1);
	mfs_ring_roam_note(&r, b, nbig, 1000000000ull);
	ck_assert(r.roaming);
	ck_assert_uint_eq(allowed_cpus(), (unsigned)CPU_COUNT(&all));
	ck_assert_uint_eq(mfs_ring_roam_count(&r), 1);
	mfs_ring_roam_note(&r, b, nbig, 1001000000ull); /* still roaming: no new count */
	ck_assert_uint_eq(mfs_ring_roam_count(&r), 1);
	size_t nsmall = request(b, FUSE_READ, &small, sizeof(small));
	mfs_ring_roam_note(&r, b, nsmall, 1005000000ull); /* 4 ms after the last big one */
	ck_assert(r.roaming);
	mfs_ring_roam_note(&r, b, nsmall, 1006000001ull); /* 5 ms after */
	ck_assert(!r.roaming);
	ck_assert_uint_eq(allowed_cpus(), 1);
	ck_assert_uint_eq(mfs_ring_roam_count(&r), 1);
}
END_TEST

/* A worker moves to the CPU its client thread last ran on, once per
 * MFS_COLOCATE_NS for the same client, and runs anywhere again when
 * released; the CPU is read right from /proc/PID/stat even with ") (" in
 * the thread's name. The "client" is a second thread pinned to the other
 * CPU and parked. (Forked test: affinities are the process's own.) */
static void *parked(void *arg)
{
	pthread_barrier_t *b = arg;

	pthread_barrier_wait(b); /* pinned and named: the test may look */
	pthread_barrier_wait(b); /* the test is done */
	return NULL;
}

START_TEST(worker_moves_to_client_cpu)
{
	cpu_set_t all;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
	if (CPU_COUNT(&all) < 2)
		return; /* one CPU: never pinned */
	int a = 0, b;
	while (!CPU_ISSET(a, &all))
		a++;
	for (b = a + 1; !CPU_ISSET(b, &all); b++)
		;
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 2);
	pthread_attr_t at;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(b, &one);
	pthread_attr_init(&at);
	ck_assert_int_eq(pthread_attr_setaffinity_np(&at, sizeof(one), &one), 0);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, &at, parked, &bar), 0);
	pthread_setname_np(t, "c) (1 2 3");
	pthread_barrier_wait(&bar);
	/* the client's tid, as fuse_in_header.pid carries it */
	char path[300], line[256];
	pid_t tid = 0;
	snprintf(path, sizeof(path), "/proc/self/task");
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == (int)syscall(SYS_gettid))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f && fgets(line, sizeof(line), f) && !strcmp(line, "c) (1 2 3\n"))
			tid = atoi(e->d_name);
		if (f)
			fclose(f);
	}
	closedir(d);
	ck_assert_int_gt(tid, 0);
	ck_assert_int_eq(mfs_colocate_cpu_of(tid), b);
	ck_assert_int_eq(mfs_colocate_cpu_of(0), -1);

	struct mfs_colocate c;
	mfs_colocate_init(&c);
	ck_assert(mfs_colocate_note(&c, tid, 1000000000ull));
	ck_assert(c.pinned);
	ck_assert_uint_eq(allowed_cpus(), 1);
	ck_assert_int_eq(sched_getcpu(), b);
	ck_assert(!mfs_colocate_note(&c, tid, 1000000001ull)); /* checked just now */
	ck_assert(!mfs_colocate_note(&c, tid, 1000000000ull + MFS_COLOCATE_NS)); /* there already */
	ck_assert(!mfs_colocate_note(&c, 0, 2000000000ull)); /* no client: nothing */
	/* another client thread: looked up, but not within MFS_COLOCATE_NEW_NS */
	pid_t me = (pid_t)syscall(SYS_gettid);
	uint64_t last = c.checked_ns;
	ck_assert(!mfs_colocate_note(&c, me, last + MFS_COLOCATE_NEW_NS - 1));
	ck_assert_uint_eq(c.checked_ns, last);
	ck_assert(!mfs_colocate_note(&c, me, last + MFS_COLOCATE_NEW_NS)); /* we run on b too */
	ck_assert_uint_eq(c.checked_ns, last + MFS_COLOCATE_NEW_NS);
	ck_assert_int_eq(c.pid, me);
	ck_assert_uint_eq(mfs_colocate_moves(&c), 1);
	mfs_colocate_release(&c);
	ck_assert(!c.pinned);
	ck_assert_uint_eq(allowed_cpus(), (unsigned)CPU_COUNT(&all));
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&bar);
	pthread_attr_destroy(&at);
}
END_TEST

/* mfs_sched_set_idle changes the class only when it must, and follows it. */
START_TEST(sched_idle_in_and_out)
{
	bool idle = false;

	ck_assert_int_eq(mfs_sched_set_idle(&idle, true), 0);
	ck_assert(idle);
	ck_assert_int_eq(sched_getscheduler(0), SCHED_IDLE);
	ck_assert_int_eq(mfs_sched_set_idle(&idle, true), 0); /* no change, no call */
	int rc = mfs_sched_set_idle(&idle, false);
	if (rc == -EPERM) { /* not root, RLIMIT_NICE under 20: the way back is refused */
		ck_assert(idle);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert(!idle);
	ck_assert_int_eq(sched_getscheduler(0), SCHED_OTHER);
	uint64_t t0 = mfs_sched_cpu_ns();
	for (volatile unsigned i = 0; i < 1000000; i++)
		;
	ck_assert_uint_gt(mfs_sched_cpu_ns(), t0);
}
END_TEST

Suite *mfs_loop_suite(void)
{
	Suite *s = suite_create("loop");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, graveyard_empties_while_idle, 0, 2);
	tcase_add_loop_test(tc, posted_jobs_run_once_in_order, 0, 2);
	tcase_add_test(tc, a_tick_wakes_one_worker);
	tcase_add_test(tc, request_costs);
	tcase_add_test(tc, ring_roams_for_big_reads);
	tcase_add_test(tc, worker_moves_to_client_cpu);
	tcase_add_test(tc, sched_idle_in_and_out);
	suite_add_tcase(s, tc);
	return s;
}
