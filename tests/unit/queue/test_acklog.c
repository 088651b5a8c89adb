/* SPDX-License-Identifier: MIT */
/*
 * The ack log (queue/acklog.c): acknowledgements of own transactions in an
 * MDB_NOSYNC environment go to a shared mapping instead of a commit, survive
 * a SIGKILL of the process, are folded into the store later, and are never
 * used in an environment that syncs.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "helpers.h"

#define NMSG 10

static struct tenv T;
static mfsq_queue *Q;

static void cfg(struct mfsq_config *c)
{
	small_cfg(c, 1, 64); /* one shard: message k has seq k + 1 */
}

static void open_q(unsigned envflags)
{
	struct mfsq_config c;

	tenv_open_flags(&T, 0, envflags);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, MFSQ_CREATE, &Q), 0);
}

static void setup(void)
{
	open_q(MDB_NOSYNC);
}

static void teardown(void)
{
	mfsq_close(Q);
	Q = NULL;
	tenv_destroy(&T);
}

/* A durable subscriber "k" from the start, and NMSG messages 0..NMSG-1. */
static void fill(void)
{
	mfsq_sub *s;

	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	mfsq_unsubscribe(s);
	for (int i = 0; i < NMSG; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1, (uint64_t)i, NULL), 0);
}

/* The number of message @m (put_msg's payload). */
static uint64_t num(const struct mfsq_msg *m)
{
	uint64_t e, k;

	ck_assert_int_eq(parse_msg(m, &e, &k), 0);
	return k;
}

/* What subscriber "k" receives first now. */
static uint64_t first_of_k(void)
{
	struct mfsq_msg m;
	mfsq_sub *s;
	uint64_t k;

	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	get_one(s, &m);
	k = num(&m);
	mfsq_unsubscribe(s);
	return k;
}

enum { ACK, ACK_SEEK };

/*
 * A second process (the parent's queue is not touched in it): opens the
 * queue, takes @take messages as "k", acknowledges them, optionally seeks
 * back to message 2, and is killed with SIGKILL before it could fold or
 * close anything. Exit codes other than the kill say what failed.
 */
static int killed_child(int take, int what)
{
	struct mfsq_msg out[NMSG];
	struct mfsq_stats st;
	struct mfsq_config c;
	MDB_env *env;
	mfsq_queue *q;
	mfsq_sub *s;
	size_t n;

	cfg(&c);
	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4 * mfsq_dbs_needed(NULL) + 64) ||
	    mdb_env_open(env, T.dir, MDB_NOTLS | MDB_NOSYNC, 0644))
		return 10;
	if (mfsq_open(env, "q", &c, 0, &q) ||
	    mfsq_subscribe(q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s))
		return 11;
	if (mfsq_dequeue(s, out, (size_t)take, &n, 10000) || n != (size_t)take)
		return 12;
	if (mfsq_ack(s, NULL, NULL))
		return 13;
	if (what == ACK_SEEK && mfsq_seek_seq(s, 0, 3)) /* message 2 */
		return 14;
	mfsq_stats(q, &st);
	if (st.acks_logged != 1 || st.ack_folds != 0)
		return 15; /* the ack must be in the log only */
	raise(SIGKILL);
	return 16;
}

static void run_killed_child(int take, int what)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(killed_child(take, what));
	wait_child(pid, SIGKILL);
}

/* An ack in an MDB_NOSYNC environment costs no commit; the log is a file. */
START_TEST(ack_without_commit)
{
	struct mfsq_msg out[NMSG];
	struct mfsq_stats a, b;
	struct stat sb;
	char path[300];
	mfsq_sub *s;
	size_t n;

	fill();
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 10000), 0);
	ck_assert_uint_eq(n, 4);
	mfsq_stats(Q, &a);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	mfsq_stats(Q, &b);
	ck_assert_uint_eq(b.commit_groups, a.commit_groups);
	ck_assert_uint_eq(b.acks_logged, a.acks_logged + 1);
	ck_assert_uint_eq(b.acked, a.acked + 4);
	snprintf(path, sizeof(path), "%s/mfsq-q.acks", T.dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_ge((uint64_t)sb.st_size, MFSQ_ACK_SLOTS * sizeof(struct mfsq_ack_slot));
	mfsq_unsubscribe(s);
}
END_TEST

/* A logged ack survives a SIGKILL: the next subscriber resumes after it. */
START_TEST(ack_survives_kill)
{
	struct mfsq_stats st;

	fill();
	run_killed_child(4, ACK);
	ck_assert_uint_eq(first_of_k(), 4);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.acks_reaped, 1);
	/* the slot was folded and cleared: reaped once, and the store holds it */
	ck_assert_uint_eq(first_of_k(), 4);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.acks_reaped, 1);
}
END_TEST

/* A seek back after logged acks is written through to the slot. */
START_TEST(seek_after_logged_ack)
{
	fill();
	run_killed_child(6, ACK_SEEK);
	ck_assert_uint_eq(first_of_k(), 2);
}
END_TEST

/* A slot of another boot is dropped unread: after a machine crash the
 * store may have lost messages its positions point past. */
START_TEST(other_boot_dropped)
{
	struct mfsq_stats st;
	char path[300], boot[MFSQ_BOOT_ID_LEN];
	int fd;

	fill();
	run_killed_child(4, ACK);
	snprintf(path, sizeof(path), "%s/mfsq-q.acks", T.dir);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	memset(boot, 'x', sizeof(boot));
	for (unsigned i = 0; i < MFSQ_ACK_SLOTS; i++) { /* the child's slot is one of them */
		uint32_t magic = 0;
		/* the stride: the header and one position, rounded up to 64 bytes */
		off_t at = (off_t)(i * ((sizeof(struct mfsq_ack_slot) + 8 + 63) & ~(size_t)63));

		ck_assert_int_eq(pread(fd, &magic, sizeof(magic), at), sizeof(magic));
		if (magic == MFSQ_ACK_MAGIC)
			ck_assert_int_eq(pwrite(fd, boot, sizeof(boot),
						at + (off_t)offsetof(struct mfsq_ack_slot, boot)),
					 sizeof(boot));
	}
	close(fd);
	ck_assert_uint_eq(first_of_k(), 0); /* delivered again */
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.acks_reaped, 0);
}
END_TEST

/* Logged positions reach the store: when the subscriber is closed, and
 * when it waits in a dequeue after MFSQ_ACK_FOLD_US. */
START_TEST(folds)
{
	struct mfsq_msg out[NMSG];
	struct mfsq_config c;
	struct mfsq_stats st;
	char path[300];
	mfsq_sub *s;
	size_t n;
	int rc = 0;

	fill();
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 3, &n, 10000), 0);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	/* idle in a dequeue: the fold comes (bounded wait, no timing asserted) */
	for (int i = 0; i < 200 && (mfsq_stats(Q, &st), !st.ack_folds); i++) {
		rc = mfsq_dequeue(s, out, NMSG, &n, 50);
		ck_assert(rc == 0 || rc == ETIMEDOUT);
		if (!rc) /* the rest; their ack goes to the log too */
			ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	}
	ck_assert_uint_ge(st.ack_folds, 1);
	mfsq_unsubscribe(s); /* folds what is left */
	/* without the log file, the store alone: everything acknowledged */
	mfsq_close(Q);
	snprintf(path, sizeof(path), "%s/mfsq-q.acks", T.dir);
	ck_assert_int_eq(unlink(path), 0);
	tenv_reopen(&T);
	cfg(&c);
	ck_assert_int_eq(mfsq_open(T.env, "q", &c, 0, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(put_msg(Q, NULL, 1, 99, NULL), 0);
	get_one(s, &out[0]);
	ck_assert_uint_eq(num(&out[0]), 99);
	mfsq_unsubscribe(s);
}
END_TEST

/* Retention counts a logged position that the store does not have yet. */
START_TEST(retention_sees_logged)
{
	struct mfsq_config c;
	struct mfsq_msg out[16];
	struct mfsq_stats st;
	mfsq_sub *s;
	size_t n, got = 0;

	mfsq_close(Q);
	small_cfg(&c, 1, 8);
	ck_assert_int_eq(mfsq_open(T.env, "r", &c, MFSQ_CREATE, &Q), 0);
	ck_assert_int_eq(mfsq_subscribe(Q, "d", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(put_msg(Q, NULL, 1, (uint64_t)i, NULL), 0);
	while (got < 64) {
		ck_assert_int_eq(mfsq_dequeue(s, out, 16, &n, 10000), 0);
		got += n;
	}
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.ack_folds, 0);
	ck_assert_int_eq(mfsq_tick(Q), 0);
	mfsq_stats(Q, &st);
	ck_assert_uint_eq(st.subshards_live, 1);
	mfsq_unsubscribe(s);
}
END_TEST

/* A live process's slot is not reaped by another process. */
START_TEST(live_slot_kept)
{
	struct mfsq_msg out[NMSG];
	mfsq_sub *s;
	size_t n;
	pid_t pid;

	fill();
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	ck_assert_int_eq(mfsq_dequeue(s, out, 4, &n, 10000), 0);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mfsq_config c;
		struct mfsq_stats ss;
		MDB_env *env;
		mfsq_queue *q;
		mfsq_sub *o;

		cfg(&c);
		if (mdb_env_create(&env) ||
		    mdb_env_set_maxdbs(env, 4 * mfsq_dbs_needed(NULL) + 64) ||
		    mdb_env_open(env, T.dir, MDB_NOTLS | MDB_NOSYNC, 0644) ||
		    mfsq_open(env, "q", &c, 0, &q) ||
		    mfsq_subscribe(q, "other", MFSQ_SUB_DURABLE, NULL, NULL, &o))
			_exit(10);
		mfsq_stats(q, &ss);
		mfsq_unsubscribe(o);
		mfsq_close(q);
		mdb_env_close(env);
		_exit(ss.acks_reaped ? 11 : 0);
	}
	wait_child(pid, 0);
	mfsq_unsubscribe(s);
	ck_assert_uint_eq(first_of_k(), 4);
}
END_TEST

/* More durable subscribers than slots: the others commit their acks. */
START_TEST(slots_exhausted)
{
	mfsq_sub *s[MFSQ_ACK_SLOTS + 1];
	struct mfsq_msg m;
	struct mfsq_stats a, b;

	for (int i = 0; i <= MFSQ_ACK_SLOTS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "s%d", i);
		ck_assert_int_eq(mfsq_subscribe(Q, name, MFSQ_SUB_DURABLE, NULL, NULL, &s[i]), 0);
	}
	ck_assert_int_eq(put_msg(Q, NULL, 1, 0, NULL), 0);
	for (int i = 0; i <= MFSQ_ACK_SLOTS; i++) {
		get_one(s[i], &m);
		mfsq_stats(Q, &a);
		ck_assert_int_eq(mfsq_ack(s[i], NULL, NULL), 0);
		mfsq_stats(Q, &b);
		if (i < MFSQ_ACK_SLOTS) {
			ck_assert_uint_eq(b.acks_logged, a.acks_logged + 1);
		} else {
			ck_assert_uint_eq(b.acks_logged, a.acks_logged);
			ck_assert_uint_eq(b.commit_groups, a.commit_groups + 1);
		}
	}
	for (int i = 0; i <= MFSQ_ACK_SLOTS; i++)
		mfsq_unsubscribe(s[i]);
}
END_TEST

/* An environment that syncs commits every ack and has no log file. */
START_TEST(synced_env_commits)
{
	struct mfsq_msg m;
	struct mfsq_stats a, b;
	struct stat sb;
	char path[300];
	mfsq_sub *s;

	teardown();
	open_q(MDB_NOMETASYNC);
	fill();
	ck_assert_int_eq(mfsq_subscribe(Q, "k", MFSQ_SUB_DURABLE, NULL, NULL, &s), 0);
	get_one(s, &m);
	mfsq_stats(Q, &a);
	ck_assert_int_eq(mfsq_ack(s, NULL, NULL), 0);
	mfsq_stats(Q, &b);
	ck_assert_uint_eq(b.acks_logged, 0);
	ck_assert_uint_eq(b.commit_groups, a.commit_groups + 1);
	snprintf(path, sizeof(path), "%s/mfsq-q.acks", T.dir);
	ck_assert_int_eq(stat(path, &sb), -1);
	ck_assert_int_eq(errno, ENOENT);
	mfsq_unsubscribe(s);
}
END_TEST

Suite *suite_acklog(void)
{
	Suite *s = suite_create("acklog");
	TCase *tc = tcase_create("acklog");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ack_without_commit);
	tcase_add_test(tc, ack_survives_kill);
	tcase_add_test(tc, seek_after_logged_ack);
	tcase_add_test(tc, other_boot_dropped);
	tcase_add_test(tc, folds);
	tcase_add_test(tc, retention_sees_logged);
	tcase_add_test(tc, live_slot_kept);
	tcase_add_test(tc, slots_exhausted);
	tcase_add_test(tc, synced_env_commits);
	suite_add_tcase(s, tc);
	return s;
}
