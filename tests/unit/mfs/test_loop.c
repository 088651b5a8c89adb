/* loop.c: sessions served by the worker pool, without a kernel mount (each
 * session's fd is a pipe nobody writes to, through libfuse's custom I/O). */
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "suites.h"

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

Suite *mfs_loop_suite(void)
{
	Suite *s = suite_create("loop");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, graveyard_empties_while_idle, 0, 2);
	tcase_add_loop_test(tc, posted_jobs_run_once_in_order, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
