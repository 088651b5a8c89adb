/*
 * A client that waits for each answer stays with one worker (sticky.h):
 * the pure mode switch, and the worker pool itself, driven without a kernel
 * mount: each session's fd is one end of a SOCK_SEQPACKET socket pair (one
 * message per request, as /dev/fuse reads), the test is the kernel at the
 * other end. The conditions hold whatever the scheduler does: only the
 * owner of a session can read it, and what changes the owner is counted.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "sticky.h"
#include "suites.h"

START_TEST(mode_switch)
{
	struct mfs_sticky st = {0};

	ck_assert(mfs_sticky_one_worker(&st));
	for (int i = 0; i < 100; i++)
		ck_assert(!mfs_sticky_note(&st, false, false));
	/* a background request queued now and then (a close's RELEASE): no */
	for (int i = 0; i < 100; i++)
		ck_assert(!mfs_sticky_note(&st, i % 8 == 0, i % 8 == 4));
	ck_assert(mfs_sticky_one_worker(&st));
	for (int i = 0; i < MFS_STICKY_WINDOW; i++)
		ck_assert(!mfs_sticky_note(&st, false, false));
	/* three of the last eight reads: every worker */
	ck_assert(!mfs_sticky_note(&st, false, true));
	ck_assert(!mfs_sticky_note(&st, false, false));
	ck_assert(!mfs_sticky_note(&st, true, false));
	ck_assert(mfs_sticky_note(&st, false, true));
	ck_assert(!mfs_sticky_one_worker(&st));
	/* back once at most two of the last eight did: the oldest of the
	 * three (three reads ago) leaves the window after five calm reads */
	for (int i = 0; i < 4; i++)
		ck_assert(!mfs_sticky_note(&st, false, false));
	ck_assert(mfs_sticky_note(&st, false, false));
	ck_assert(mfs_sticky_one_worker(&st));
	/* a queued request that turns out to be the kernel's own (a FORGET
	 * after an unlink) takes its mark back */
	for (int i = 0; i < MFS_STICKY_WINDOW; i++)
		ck_assert(!mfs_sticky_note(&st, false, false));
	for (int i = 0; i < 100; i++) {
		ck_assert(!mfs_sticky_note(&st, false, true));
		ck_assert(!mfs_sticky_background(&st));
	}
	ck_assert(mfs_sticky_one_worker(&st));
	/* forced (a request that took long): back after six calm reads */
	mfs_sticky_force(&st);
	ck_assert(!mfs_sticky_one_worker(&st));
	for (int i = 0; i < MFS_STICKY_WINDOW - MFS_STICKY_SWITCH; i++)
		ck_assert(!mfs_sticky_note(&st, false, false));
	ck_assert(mfs_sticky_note(&st, false, false));
	ck_assert(mfs_sticky_one_worker(&st));
}
END_TEST

/* Unlinks one after another: the kernel's FORGET of each unlink waits
 * behind the client's next requests for up to 8 reads (forget_batch), and
 * each of those finds it queued. From the same client thread while FORGETs
 * come, that is no second client: the session keeps its worker. From
 * another client thread, or with no FORGETs in the window (one thread's
 * asynchronous I/O), it is. */
START_TEST(forgets_behind_one_client)
{
	struct mfs_sticky st = {0};

	ck_assert(!mfs_sticky_note_from(&st, false, false, true)); /* the first UNLINK */
	ck_assert(!mfs_sticky_background(&st));                   /* its FORGET */
	for (int round = 0; round < 100; round++) {
		/* UNLINK, GETATTR, UNLINK, GETATTR... each finding a FORGET */
		for (int i = 0; i < 6; i++)
			ck_assert(!mfs_sticky_note_from(&st, false, true, true));
		ck_assert(!mfs_sticky_background(&st)); /* the FORGETs, at last */
		ck_assert(!mfs_sticky_background(&st));
	}
	ck_assert(mfs_sticky_one_worker(&st));
	/* another client thread's requests queued: every worker */
	ck_assert(!mfs_sticky_note_from(&st, false, true, false));
	ck_assert(!mfs_sticky_note_from(&st, false, true, false));
	ck_assert(mfs_sticky_note_from(&st, false, true, false));
	ck_assert(!mfs_sticky_one_worker(&st));

	/* one thread, no FORGET in the window: its queued requests count */
	struct mfs_sticky aio = {0};
	ck_assert(!mfs_sticky_note_from(&aio, false, true, true));
	ck_assert(!mfs_sticky_note_from(&aio, false, true, true));
	ck_assert(mfs_sticky_note_from(&aio, false, true, true));
	ck_assert(!mfs_sticky_one_worker(&aio));
	/* and once the FORGETs are out of the window again */
	struct mfs_sticky late = {0};
	ck_assert(!mfs_sticky_background(&late));
	for (int i = 0; i < MFS_STICKY_WINDOW; i++)
		ck_assert(!mfs_sticky_note_from(&late, false, false, true));
	ck_assert(!mfs_sticky_note_from(&late, false, true, true));
	ck_assert(!mfs_sticky_note_from(&late, false, true, true));
	ck_assert(mfs_sticky_note_from(&late, false, true, true));
	/* an overlap always counts */
	struct mfs_sticky ov = {0};
	ck_assert(!mfs_sticky_background(&ov));
	ck_assert(!mfs_sticky_note_from(&ov, true, true, true));
	ck_assert(!mfs_sticky_note_from(&ov, true, false, true));
	ck_assert(mfs_sticky_note_from(&ov, true, false, true));
}
END_TEST

static ssize_t sock_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

static ssize_t sock_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return writev(fd, iov, count);
}

static const struct fuse_custom_io sock_io = {.read = sock_read, .writev = sock_writev};

/* getattr of node 2 blocks until the test lets it go (struct gate). */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered, open;
};

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gate *g = fuse_req_userdata(req);

	(void)fi;
	if (ino == 2) {
		pthread_mutex_lock(&g->lock);
		g->entered = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->open)
			pthread_cond_wait(&g->cond, &g->lock);
		pthread_mutex_unlock(&g->lock);
	}
	fuse_reply_err(req, ENOSYS);
}

static const struct fuse_lowlevel_ops ops = {.getattr = op_getattr};

struct conn {
	struct fuse_session *se;
	struct mfs_session *s;
	int peer; /* the "kernel" end */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ended; /* on_end came: no worker is inside a request of s */
};

static void on_end(void *arg)
{
	struct conn *c = arg;

	pthread_mutex_lock(&c->lock);
	c->ended = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void send_req(struct conn *c, uint32_t opcode, uint64_t unique, uint64_t node)
{
	struct {
		struct fuse_in_header h;
		union {
			struct fuse_init_in init;
			struct fuse_getattr_in getattr;
		} a;
	} m = {.h = {.opcode = opcode, .unique = unique, .nodeid = node}};

	if (opcode == FUSE_INIT) {
		m.a.init.major = FUSE_KERNEL_VERSION;
		m.a.init.minor = 31;
		m.h.len = sizeof(m.h) + sizeof(m.a.init);
	} else {
		m.h.len = sizeof(m.h) + sizeof(m.a.getattr);
	}
	ck_assert_int_eq(write(c->peer, &m, m.h.len), (ssize_t)m.h.len);
}

/* Wait (10 s at most) for the next reply; returns the request it answers. */
static uint64_t next_reply(struct conn *c)
{
	char b[4096];
	struct pollfd p = {.fd = c->peer, .events = POLLIN};

	ck_assert_msg(poll(&p, 1, 10000) == 1, "no reply within 10 s");
	ssize_t n = read(c->peer, b, sizeof(b));
	ck_assert_int_ge(n, (ssize_t)sizeof(struct fuse_out_header));
	return ((struct fuse_out_header *)b)->unique;
}

static void wait_reply(struct conn *c, uint64_t unique)
{
	ck_assert_uint_eq(next_reply(c), unique);
}

/* A session served by `loop`, past its INIT. */
static void conn_open(struct conn *c, struct mfs_loop *loop, struct gate *g)
{
	char *argv[] = {"test_sticky", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	int sv[2];

	c->se = fuse_session_new(&args, &ops, sizeof(ops), g);
	fuse_opt_free_args(&args);
	ck_assert_ptr_nonnull(c->se);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	c->peer = sv[1];
	ck_assert_int_eq(fuse_session_custom_io(c->se, mfs_loop_io(&sock_io), sv[0]), 0);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->ended = false;
	ck_assert_int_eq(mfs_loop_add(loop, c->se, "sticky", on_end, c, &c->s), 0);
	send_req(c, FUSE_INIT, 1, 0);
	wait_reply(c, 1);
}

/* As loop.h asks: abort, wait for on_end (a worker may still be reading
 * a request of s), then remove and destroy. */
static void conn_close(struct conn *c)
{
	struct timespec until;

	mfs_loop_abort(c->s);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&c->lock);
	while (!c->ended && pthread_cond_timedwait(&c->cond, &c->lock, &until) == 0)
		;
	bool ended = c->ended;
	pthread_mutex_unlock(&c->lock);
	ck_assert_msg(ended, "on_end did not come within 10 s of the abort");
	mfs_loop_remove(c->s);
	fuse_session_destroy(c->se); /* closes its end */
	close(c->peer);
}

/* One request at a time, 2000 times, with 4 workers waiting: every request
 * is read by the worker that read the one before (no hand-off), unless
 * that worker gave the session back (no other work comes here, but a
 * request that took over 10 ms, its worker preempted on a busy machine,
 * does it too): then the next MFS_STICKY_WINDOW + 1 requests at most may
 * change worker, until one owns it again. */
START_TEST(sequential_client_keeps_its_worker)
{
	struct mfs_loop *loop;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, true};
	struct conn c;
	struct mfs_session_stats st;

	ck_assert_int_eq(mfs_loop_create(4, &loop), 0);
	conn_open(&c, loop, &g);
	for (uint64_t u = 2; u < 2002; u++) {
		send_req(&c, FUSE_GETATTR, u, 1);
		wait_reply(&c, u);
	}
	mfs_loop_stats(c.s, &st);
	ck_assert_uint_eq(st.ops, 2001);
	ck_assert_msg(st.handoffs <= (MFS_STICKY_WINDOW + 1) * st.releases,
		      "%llu of 2001 requests read by another worker than the one before; "
		      "%llu releases",
		      (unsigned long long)st.handoffs, (unsigned long long)st.releases);
	conn_close(&c);
	mfs_loop_destroy(loop);
}
END_TEST

/* Requests queued behind the one being served (MFS_STICKY_SWITCH reads in a
 * row find more): the owner gives the session back to the pool (counted in
 * releases), and every request is answered. */
START_TEST(queued_requests_release_the_session)
{
	struct mfs_loop *loop;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
	struct conn c;
	struct mfs_session_stats st;

	ck_assert_int_eq(mfs_loop_create(4, &loop), 0);
	conn_open(&c, loop, &g);
	send_req(&c, FUSE_GETATTR, 2, 1); /* a worker owns the session now */
	wait_reply(&c, 2);
	send_req(&c, FUSE_GETATTR, 3, 2); /* blocks in getattr */
	pthread_mutex_lock(&g.lock);
	while (!g.entered)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
	for (uint64_t u = 4; u < 8; u++) /* they wait: nobody else reads the fd */
		send_req(&c, FUSE_GETATTR, u, 1);
	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	/* the owner reads 4, 5, 6 with others queued, then any worker does;
	 * or, when the held request took over 10 ms (a busy machine), any
	 * worker took them while it was held: either is a release */
	unsigned seen = 0;
	for (int i = 0; i < 5; i++) {
		uint64_t u = next_reply(&c);
		ck_assert(u >= 3 && u < 8);
		seen |= 1u << u;
	}
	ck_assert_uint_eq(seen, 0xf8);
	mfs_loop_stats(c.s, &st);
	ck_assert_msg(st.releases >= 1, "the owner kept a session whose requests queued");
	conn_close(&c);
	mfs_loop_destroy(loop);
}
END_TEST

/* One worker, two sessions each with a client that waits for each answer:
 * an owner takes the other session's work and gives its own back, so both
 * get all their answers (none waits for ever on a worker busy elsewhere). */
struct client {
	struct conn *c;
	unsigned done;
};

static void *client_run(void *arg)
{
	struct client *cl = arg;

	for (uint64_t u = 2; u < 502; u++) {
		send_req(cl->c, FUSE_GETATTR, u, 1);
		wait_reply(cl->c, u);
		cl->done++;
	}
	return NULL;
}

START_TEST(two_sessions_share_one_worker)
{
	struct mfs_loop *loop;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, true};
	struct conn c[2];
	struct client cl[2] = {{&c[0], 0}, {&c[1], 0}};
	pthread_t t[2];

	ck_assert_int_eq(mfs_loop_create(1, &loop), 0);
	for (int i = 0; i < 2; i++)
		conn_open(&c[i], loop, &g);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, client_run, &cl[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(cl[0].done, 500);
	ck_assert_uint_eq(cl[1].done, 500);
	for (int i = 0; i < 2; i++)
		conn_close(&c[i]);
	mfs_loop_destroy(loop);
}
END_TEST

Suite *mfs_sticky_suite(void)
{
	Suite *s = suite_create("sticky");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, mode_switch);
	tcase_add_test(tc, forgets_behind_one_client);
	tcase_add_test(tc, sequential_client_keeps_its_worker);
	tcase_add_test(tc, queued_requests_release_the_session);
	tcase_add_test(tc, two_sessions_share_one_worker);
	suite_add_tcase(s, tc);
	return s;
}
