/* loop.c's overlap count, which tells a heavy DBFS from a light one: a
 * request read while another of its session is unanswered overlaps it; one
 * read after the other's reply was sent does not, even while the thread
 * that sent that reply is not done with it yet (a loaded machine: it waits
 * for a CPU). Requests go to the pool through libfuse's custom I/O over
 * pipes, no kernel mount; the handler holds its thread to make both cases
 * happen for sure. */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "suites.h"

static int to_mfs[2], from_mfs[2];

static void on_end(void *arg)
{
	(void)arg;
}

static ssize_t in_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

static ssize_t out_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)fd;
	(void)userdata;
	return writev(from_mfs[1], iov, count);
}

static const struct fuse_custom_io pipes = {.read = in_read, .writev = out_writev};

/* The handler holds call number `hold_call` (1 = the first getattr) until
 * released: after its reply when `hold_after_reply`, else before it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int calls, hold_call;
static bool hold_after_reply, released, holding;

static void hold(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	pthread_mutex_lock(&lock);
	holding = true;
	pthread_cond_broadcast(&cond);
	while (!released && pthread_cond_timedwait(&cond, &lock, &ts) == 0)
		;
	holding = false;
	pthread_mutex_unlock(&lock);
}

static void release(void)
{
	pthread_mutex_lock(&lock);
	released = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void wait_holding(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&lock);
	while (!holding && pthread_cond_timedwait(&cond, &lock, &ts) == 0)
		;
	bool h = holding;
	pthread_mutex_unlock(&lock);
	ck_assert_msg(h, "the handler did not start holding within 10 s");
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st = {.st_ino = ino, .st_mode = S_IFDIR | 0755, .st_nlink = 2};
	int n = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
	bool mine = n == hold_call;

	if (mine && !hold_after_reply)
		hold();
	fuse_reply_attr(req, &st, 1.0);
	if (mine && hold_after_reply)
		hold();
}

static void send_req(uint32_t opcode, uint64_t unique, const void *arg, size_t len)
{
	char msg[256];
	struct fuse_in_header in = {.len = (uint32_t)(sizeof(in) + len),
				    .opcode = opcode,
				    .unique = unique,
				    .nodeid = FUSE_ROOT_ID};
	memcpy(msg, &in, sizeof(in));
	memcpy(msg + sizeof(in), arg, len);
	ck_assert_int_eq(write(to_mfs[1], msg, in.len), (ssize_t)in.len);
}

static void read_full(void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		struct pollfd p = {.fd = from_mfs[0], .events = POLLIN};
		ck_assert_msg(poll(&p, 1, 10000) == 1, "no reply within 10 s");
		ssize_t n = read(from_mfs[0], (char *)buf + got, len - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
}

/* The next reply: its unique. */
static uint64_t reply(void)
{
	struct fuse_out_header oh;
	char rest[512];
	read_full(&oh, sizeof(oh));
	ck_assert_uint_le(oh.len - sizeof(oh), sizeof(rest));
	read_full(rest, oh.len - sizeof(oh));
	return oh.unique;
}

static uint64_t overlapped(struct mfs_session *s)
{
	struct mfs_session_stats st;
	mfs_loop_stats(s, &st);
	return st.overlapped;
}

/* _i == 0: request 2 is read after request 1's reply while request 1's
 * thread still holds it: no overlap. _i == 1 (the counter counts at all):
 * request 2 is read while request 1 is unanswered: one overlap. */
START_TEST(overlap_only_while_unanswered)
{
	struct mfs_loop *loop;
	ck_assert_int_eq(mfs_loop_create(3, &loop), 0);
	ck_assert_int_eq(pipe(to_mfs), 0);
	ck_assert_int_eq(pipe(from_mfs), 0);
	char *argv[] = {"test_overlap", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	struct fuse_lowlevel_ops ops = {.getattr = op_getattr};
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	fuse_opt_free_args(&args);
	ck_assert_ptr_nonnull(se);
	ck_assert_int_eq(fuse_session_custom_io(se, mfs_loop_io(&pipes), to_mfs[0]), 0);
	struct mfs_session *s;
	ck_assert_int_eq(mfs_loop_add(loop, se, "overlap", on_end, NULL, &s), 0);

	struct fuse_init_in init = {.major = FUSE_KERNEL_VERSION, .minor = 31};
	send_req(FUSE_INIT, 1, &init, sizeof(init));
	ck_assert_uint_eq(reply(), 1);

	struct fuse_getattr_in ga = {0};
	hold_call = 1;
	hold_after_reply = _i == 0;
	send_req(FUSE_GETATTR, 2, &ga, sizeof(ga));
	if (hold_after_reply)
		ck_assert_uint_eq(reply(), 2);
	wait_holding();
	uint64_t before = overlapped(s);
	send_req(FUSE_GETATTR, 3, &ga, sizeof(ga));
	ck_assert_uint_eq(reply(), 3); /* read and answered by another worker */
	uint64_t after = overlapped(s);
	release();
	if (!hold_after_reply)
		ck_assert_uint_eq(reply(), 2);
	if (hold_after_reply)
		ck_assert_msg(after == before, "a request read after the last reply counted as "
					       "overlapping it (%llu -> %llu)",
			      (unsigned long long)before, (unsigned long long)after);
	else
		ck_assert_msg(after == before + 1, "a request read while another was unanswered: "
						   "overlapped %llu -> %llu",
			      (unsigned long long)before, (unsigned long long)after);

	mfs_loop_remove(s);
	for (int i = 0; i < 1000 && mfs_loop_graveyard(loop); i++) {
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	mfs_loop_destroy(loop);
	fuse_session_destroy(se);
	close(to_mfs[1]);
	close(from_mfs[0]);
	close(from_mfs[1]);
}
END_TEST

Suite *mfs_overlap_suite(void)
{
	Suite *s = suite_create("overlap");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, overlap_only_while_unanswered, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
