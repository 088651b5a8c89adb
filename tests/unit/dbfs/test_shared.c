/*
 * Shared stores at the libdbfs level (issue 21; dbfs/shared.h), with two
 * real processes on one real LMDB store: the lock modes refuse each other
 * with their reason; writers in both processes get distinct inode numbers,
 * an exact usage record and one dense feed whose events name their
 * writer and come from that writer's own shard (three writers, one of
 * them killed, and one after it); an inode unlinked in one process waits
 * in the orphan table until the last process closes the store; the reader
 * slot of a process killed in a read is cleared by the next open and by
 * the tick.
 *
 * Every child is forked before the parent opens anything of the store
 * (LMDB: an environment must not cross a fork), except in the "held
 * exclusively" case, where the child is refused before it opens LMDB.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"

static char dir[64];
static const struct dbfs_cred cred = {0, 0, 022};

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/dbfs-shared-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static int open_mode(bool shared, bool create, struct dbfs **fs, char *err, size_t len)
{
	struct dbfs_options o;
	dbfs_options_init(&o);
	o.create = create;
	o.shared = shared;
	o.durability = DBFS_DURABLE_FULL; /* /tmp may be a disk */
	o.initial_map_size = 16 << 20;
	return dbfs_open(dir, &o, fs, err, len);
}

struct mk_ctx {
	const char *name;
	uint64_t ino;
	int unlink;
};

static int mk_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct mk_ctx *c = arg;
	struct dbfs_inode in;
	if (c->unlink)
		return dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, c->name, 0);
	return dbfs_op_mknod(fs, txn, &cred, DBFS_ROOT_INO, c->name, S_IFREG | 0644, 0, NULL,
			     &c->ino, &in);
}

static uint64_t mk(struct dbfs *fs, const char *name)
{
	struct mk_ctx c = {name, 0, 0};
	ck_assert_int_eq(dbfs_write(fs, mk_fn, &c), 0);
	return c.ino;
}

/* one byte over a pipe, each way: the processes' steps in order */
static void say(int fd)
{
	ck_assert_int_eq(write(fd, "x", 1), 1);
}

static void hear(int fd)
{
	char b;
	ck_assert_int_eq(read(fd, &b, 1), 1);
}

/* The child's side: no ck_assert there (CK_NOFORK: a failure would go on
 * with the parent's remaining tests in the child); exit 2 instead. */
static void csay(int fd)
{
	if (write(fd, "x", 1) != 1)
		_exit(2);
}

static void chear(int fd)
{
	char b;
	if (read(fd, &b, 1) != 1)
		_exit(2);
}

static void reap(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
}

START_TEST(test_lock_modes)
{
	int up[2], down[2];
	char err[256];
	struct dbfs *fs, *two;
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]); /* the parent gone: EOF, not a wait for ever */
		/* the other process: holds the store shared until told */
		if (open_mode(true, true, &fs, err, sizeof(err)))
			_exit(1);
		csay(up[1]);
		chear(down[0]);
		dbfs_close(fs);
		_exit(0);
	}
	hear(up[0]);
	ck_assert_int_eq(open_mode(false, false, &fs, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "mounted shared by another process"), "%s", err);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(open_mode(true, false, &two, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "already mounted by this process"), "%s", err);
	struct dbfs_options o;
	dbfs_options_init(&o);
	o.shared = true;
	o.writeback_cache = true;
	o.durability = DBFS_DURABLE_FULL;
	ck_assert_int_eq(dbfs_open(dir, &o, &two, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "writeback_cache is refused with shared"), "%s", err);
	o.writeback_cache = false;
	o.feed = false;
	ck_assert_int_eq(dbfs_open(dir, &o, &two, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "feed=off is refused with shared"), "%s", err);
	dbfs_close(fs);
	say(down[1]);
	reap(pid);

	/* held exclusively: a shared open is refused, before LMDB */
	ck_assert_msg(open_mode(false, false, &fs, err, sizeof(err)) == 0, "%s", err);
	pid = fork();
	if (pid == 0) {
		struct dbfs *c;
		int rc = open_mode(true, false, &c, err, sizeof(err));
		_exit(rc == -EBUSY && strstr(err, "mounted exclusively") ? 0 : 1);
	}
	reap(pid);
	dbfs_close(fs);
}
END_TEST

#define N 150

START_TEST(test_two_writers)
{
	int up[2], down[2];
	char err[256], name[32];
	struct dbfs *fs;
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	/* made once, exclusively: both then open it shared */
	ck_assert_msg(open_mode(false, true, &fs, err, sizeof(err)) == 0, "%s", err);
	dbfs_close(fs);
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		if (open_mode(true, false, &fs, err, sizeof(err)))
			_exit(1);
		csay(up[1]);
		chear(down[0]);
		for (int i = 0; i < N; i++) {
			snprintf(name, sizeof(name), "c%d", i);
			struct mk_ctx c = {name, 0, 0};
			if (dbfs_write(fs, mk_fn, &c))
				_exit(3);
		}
		dbfs_close(fs);
		_exit(0);
	}
	hear(up[0]);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	say(down[1]); /* both write at once */
	uint64_t mine[N];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		mine[i] = mk(fs, name);
	}
	reap(pid);
	/* every name, distinct inodes, the usage record exact */
	MDB_txn *t;
	uint64_t seen[2 * N];
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	for (int i = 0; i < 2 * N; i++) {
		struct dbfs_inode in;
		snprintf(name, sizeof(name), "%c%d", i < N ? 'p' : 'c', i % N);
		ck_assert_int_eq(dbfs_op_lookup(fs, t, DBFS_ROOT_INO, name, &seen[i], &in), 0);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(seen[i], seen[j]);
	}
	struct dbfs_usage_rec u;
	ck_assert_int_eq(dbfs_usage_get(fs, t, &u), 0);
	dbfs_read_end(fs, t);
	ck_assert_uint_eq(seen[0], mine[0]);
	ck_assert_uint_eq(u.inodes, 2 * N + 1);
	/* one dense feed; each event names its writer: two, neither 1 */
	struct dbfs_feed_reader *r;
	struct dbfs_feed_start st = {.from = DBFS_FEED_SEQ, .seq = 1};
	ck_assert_int_eq(dbfs_feed_open(fs, NULL, &st, &r), 0);
	struct dbfs_event ev[64];
	uint64_t next = 1, w[2] = {0, 0}, nw[2] = {0, 0};
	uint32_t sh[2] = {0, 0};
	size_t n;
	while (dbfs_feed_read(r, ev, 64, &n, 0) == 0) {
		for (size_t i = 0; i < n; i++) {
			ck_assert_uint_eq(ev[i].seq, next++);
			ck_assert_uint_eq(ev[i].op, DBFS_EV_CREATE);
			ck_assert_uint_ne(ev[i].writer, 1);
			int k = w[0] == 0 || w[0] == ev[i].writer ? 0 : 1;
			if (k == 1)
				ck_assert(w[1] == 0 || w[1] == ev[i].writer);
			/* each writer's events in one shard of its own */
			if (nw[k])
				ck_assert_uint_eq(ev[i].shard, sh[k]);
			sh[k] = ev[i].shard;
			w[k] = ev[i].writer;
			nw[k]++;
		}
	}
	dbfs_feed_close(r);
	ck_assert_uint_eq(next, 2 * N + 1);
	ck_assert_uint_eq(nw[0], N);
	ck_assert_uint_eq(nw[1], N);
	ck_assert_msg(sh[0] != sh[1], "both writers enqueued into shard %u", sh[0]);
	dbfs_close(fs);
}
END_TEST

/* A writer child: opens shared, says so, waits, writes N files named
 * PREFIXi, then closes or (kill) dies by SIGKILL with the store open. */
static pid_t writer_child(int up[2], int down[2], char prefix, bool kill)
{
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	if (pid)
		return pid;
	char err[256], name[32];
	struct dbfs *fs;
	close(up[0]);
	close(down[1]);
	if (open_mode(true, false, &fs, err, sizeof(err)))
		_exit(1);
	csay(up[1]);
	chear(down[0]);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "%c%d", prefix, i);
		struct mk_ctx c = {name, 0, 0};
		if (dbfs_write(fs, mk_fn, &c))
			_exit(3);
	}
	if (kill)
		raise(SIGKILL);
	dbfs_close(fs);
	_exit(0);
}

static void reap_killed(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child: %d", st);
}

/* Read the feed from seq `from` to its end: every event dense from there;
 * per writer (up to 4) its count and its one shard. Returns the next seq. */
static uint64_t read_writers(struct dbfs *fs, uint64_t from, uint64_t w[4], uint64_t nw[4],
			     uint32_t sh[4])
{
	struct dbfs_feed_reader *r;
	struct dbfs_feed_start st = {.from = DBFS_FEED_SEQ, .seq = from};
	ck_assert_int_eq(dbfs_feed_open(fs, NULL, &st, &r), 0);
	struct dbfs_event ev[64];
	uint64_t next = from;
	size_t n;
	while (dbfs_feed_read(r, ev, 64, &n, 0) == 0) {
		for (size_t i = 0; i < n; i++) {
			ck_assert_uint_eq(ev[i].seq, next++);
			int k = 0;
			while (k < 4 && nw[k] && w[k] != ev[i].writer)
				k++;
			ck_assert_int_lt(k, 4);
			if (nw[k])
				ck_assert_uint_eq(ev[i].shard, sh[k]);
			w[k] = ev[i].writer;
			sh[k] = ev[i].shard;
			nw[k]++;
		}
	}
	dbfs_feed_close(r);
	return next;
}

/*
 * Three processes write at once, each into a shard of its own; one is
 * killed with the store open: its shard's events are all in the feed the
 * others read, dense and in order with theirs, and a process that opens
 * afterwards takes the store on from there (its events follow, dense).
 */
START_TEST(test_three_writers_one_killed)
{
	int up[3][2], down[3][2];
	char err[256], name[32];
	struct dbfs *fs;
	ck_assert_msg(open_mode(false, true, &fs, err, sizeof(err)) == 0, "%s", err);
	dbfs_close(fs);
	pid_t a = writer_child(up[0], down[0], 'a', false);
	pid_t b = writer_child(up[1], down[1], 'b', true);
	hear(up[0][0]);
	hear(up[1][0]);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	say(down[0][1]);
	say(down[1][1]);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		mk(fs, name);
	}
	reap(a);
	reap_killed(b);
	uint64_t w[4] = {0}, nw[4] = {0};
	uint32_t sh[4] = {0};
	ck_assert_uint_eq(read_writers(fs, 1, w, nw, sh), 3 * N + 1);
	for (int k = 0; k < 3; k++) {
		ck_assert_uint_eq(nw[k], N);
		for (int j = 0; j < k; j++)
			ck_assert_msg(sh[j] != sh[k], "writers %d and %d share shard %u", j, k,
				      sh[k]);
	}
	/* a new process after the kill: its events follow, dense */
	dbfs_close(fs);
	pid_t c = writer_child(up[2], down[2], 'c', false);
	hear(up[2][0]);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	say(down[2][1]);
	reap(c);
	uint64_t w2[4] = {0}, nw2[4] = {0};
	uint32_t sh2[4] = {0};
	ck_assert_uint_eq(read_writers(fs, 3 * N + 1, w2, nw2, sh2), 4 * N + 1);
	ck_assert_uint_eq(nw2[0], N);
	ck_assert_uint_eq(nw2[1], 0);
	dbfs_close(fs);
}
END_TEST

START_TEST(test_orphan_waits_for_the_last)
{
	int up[2], down[2];
	char err[256];
	struct dbfs *fs;
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	ck_assert_msg(open_mode(false, true, &fs, err, sizeof(err)) == 0, "%s", err);
	uint64_t ino = mk(fs, "o");
	dbfs_close(fs);
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		/* holds the store open, as a process with "o" open would */
		if (open_mode(true, false, &fs, err, sizeof(err)))
			_exit(1);
		csay(up[1]);
		chear(down[0]);
		dbfs_close(fs);
		_exit(0);
	}
	hear(up[0]);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	struct mk_ctx c = {"o", 0, 1};
	ck_assert_int_eq(dbfs_write(fs, mk_fn, &c), 0);
	ck_assert_int_eq(dbfs_reap_now(fs), 0);
	MDB_txn *t;
	struct dbfs_inode in;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, ino, &in), 0); /* kept: shared */
	ck_assert_uint_eq(in.nlink, 0);
	dbfs_read_end(fs, t);
	dbfs_close(fs); /* not the last: the child holds it */
	say(down[1]);
	reap(pid); /* the last out: reclaims */
	ck_assert_msg(open_mode(false, false, &fs, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, ino, &in), -ENOENT);
	dbfs_read_end(fs, t);
	dbfs_close(fs);
}
END_TEST

/* A child that opens the store shared and holds a read transaction (its
 * LMDB reader slot pins that snapshot) until it is killed; `up` hears
 * when it holds it. */
static pid_t reader_child(int up[2])
{
	char err[256];
	struct dbfs *fs;
	MDB_txn *t;
	ck_assert_int_eq(pipe(up), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		if (open_mode(true, false, &fs, err, sizeof(err)) || dbfs_read_begin(fs, &t))
			_exit(1);
		csay(up[1]);
		for (;;)
			pause();
	}
	close(up[1]);
	hear(up[0]);
	close(up[0]);
	return pid;
}

static void kill_child(pid_t pid)
{
	int st;
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFSIGNALED(st));
}

/* Issue 16: a process killed in a read leaves its reader slot in
 * lock.mdb, which LMDB does not reset while another process uses the
 * store. A shared open clears it (another holder, `keeper`, stays up),
 * and so does the tick of a store that was open before the death. */
START_TEST(test_dead_reader_cleared)
{
	int up[2], down[2], kup[2];
	char err[256];
	struct dbfs *fs;
	ck_assert_msg(open_mode(false, true, &fs, err, sizeof(err)) == 0, "%s", err);
	dbfs_close(fs);
	ck_assert_int_eq(pipe(kup), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t keeper = fork();
	if (keeper == 0) {
		close(kup[0]);
		close(down[1]);
		if (open_mode(true, false, &fs, err, sizeof(err)))
			_exit(1);
		csay(kup[1]);
		chear(down[0]);
		dbfs_close(fs);
		_exit(0);
	}
	hear(kup[0]);

	/* at the open */
	pid_t r = reader_child(up);
	kill_child(r);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_ge(fs->cnt.readers_cleared, 1);
	dbfs_close(fs);

	/* at a tick */
	r = reader_child(up);
	ck_assert_msg(open_mode(true, false, &fs, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(fs->cnt.readers_cleared, 0);
	kill_child(r);
	ck_assert_int_eq(dbfs_tick(fs), 0);
	ck_assert_uint_ge(fs->cnt.readers_cleared, 1);
	uint64_t n = fs->cnt.readers_cleared;
	ck_assert_int_eq(dbfs_tick(fs), 0); /* nothing more to clear */
	ck_assert_uint_eq(fs->cnt.readers_cleared, n);
	dbfs_close(fs);

	say(down[1]);
	reap(keeper);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dbfs-shared");
	TCase *tc = tcase_create("shared");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lock_modes);
	tcase_add_test(tc, test_two_writers);
	tcase_add_test(tc, test_three_writers_one_killed);
	tcase_add_test(tc, test_orphan_waits_for_the_last);
	tcase_add_test(tc, test_dead_reader_cleared);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK); /* the tests fork their own */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
