/*
 * An older store's change feed (format 5: the queue "feed", one shard
 * whose seqs are the feed's) is moved into the sharded queue "feeds" in
 * place by the first read-write open (issue 21; dbfs/feed_migrate.c):
 * every retained event is read back from seq 1 with its seq, op, path and
 * writer, a subscription resumes after what it acknowledged, new events
 * follow densely, libmfsq's check passes on both queues, and the old
 * queue's subscriber is gone; a move a crash stopped half-way goes on
 * where it stopped. The old store is made from a new one: its
 * events copied into a one-shard queue as a format-5 build wrote them,
 * the sharded queue's tables and rows removed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

#define N 300 /* events: more than a feed block */

static char dir[64];
static struct dbfs *fs;
static const struct dbfs_cred cred = {0, 0, 022};

static void open_store(void)
{
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	o.initial_map_size = 16 << 20;
	int rc = dbfs_open(dir, &o, &fs, err, sizeof(err));
	ck_assert_msg(rc == 0, "dbfs_open: %d %s", rc, err);
}

static int mk_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	struct dbfs_inode in;
	uint64_t ino;
	return dbfs_op_mknod(f, txn, &cred, DBFS_ROOT_INO, arg, S_IFREG | 0644, 0, NULL, &ino, &in);
}

static void mk(const char *name)
{
	ck_assert_int_eq(dbfs_write(fs, mk_fn, (void *)name), 0);
}

struct seen {
	uint64_t seq, writer;
	uint32_t op;
	char path[32];
};

/* Read the feed from `from` (or the subscription `sub`) to its end. */
static size_t read_all(const char *sub, uint64_t from, struct seen *out, size_t max)
{
	struct dbfs_feed_reader *r;
	struct dbfs_feed_start st = {.from = DBFS_FEED_SEQ, .seq = from};
	ck_assert_int_eq(dbfs_feed_open(fs, sub, sub ? NULL : &st, &r), 0);
	struct dbfs_event ev[64];
	size_t n, k = 0;
	while (dbfs_feed_read(r, ev, 64, &n, 0) == 0)
		for (size_t i = 0; i < n && k < max; i++, k++) {
			out[k] = (struct seen){ev[i].seq, ev[i].writer, ev[i].op, ""};
			snprintf(out[k].path, sizeof(out[k].path), "%.*s", (int)ev[i].path_len,
				 ev[i].path);
		}
	dbfs_feed_close(r);
	return k;
}

/* The environment, raw, as libmfsq needs it. */
static MDB_env *raw_env(void)
{
	MDB_env *env;
	ck_assert_int_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 2048);
	mdb_env_set_mapsize(env, 16 << 20);
	ck_assert_int_eq(mdb_env_open(env, dir, MDB_NOTLS, 0600), 0);
	return env;
}

/* The store as a format-5 build left it. */
static void make_format_5(void)
{
	MDB_env *env = raw_env();
	mfsq_queue *nq, *oq;
	mfsq_sub *s;
	struct mfsq_config cfg; /* a format-5 build's (dbfs/feed.c then) */
	mfsq_config_default(&cfg);
	cfg.nshards = 1;
	cfg.subshard_msgs = 32768;
	cfg.subshard_bytes = 32u << 20;
	cfg.retain_max = 80;
	cfg.max_payload = DBFS_EV_REC_FIXED + 2 * (64u << 10) + DBFS_XATTR_NAME_MAX;
	ck_assert_int_eq(mfsq_open(env, DBFS_FEED_QUEUE_SHARDED, NULL, MFSQ_NO_LOG, &nq), 0);
	ck_assert_int_eq(mfsq_open(env, DBFS_FEED_QUEUE, &cfg, MFSQ_NO_LOG | MFSQ_CREATE, &oq), 0);
	ck_assert_int_eq(mfsq_subscribe(nq, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	struct mfsq_msg m[64];
	size_t n, total = 0;
	while (mfsq_dequeue(s, m, 64, &n, 0) == 0)
		for (size_t i = 0; i < n; i++) {
			uint64_t seq, writer, q;
			memcpy(&seq, m[i].data, 8);
			memcpy(&writer, (const char *)m[i].data + 8, 8);
			struct mfsq_msg_in in = {.data = (const char *)m[i].data + 16,
						 .len = m[i].len - 16,
						 .enqueuer = writer};
			ck_assert_int_eq(mfsq_enqueue(oq, NULL, &in, &q), 0);
			ck_assert_uint_eq(q, seq); /* the old queue's seqs were the feed's */
			total++;
		}
	ck_assert_uint_ge(total, N);
	mfsq_unsubscribe(s);
	ck_assert_int_eq(mfsq_subscribe(oq, "keep", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL,
					NULL, &s),
			 0);
	mfsq_unsubscribe(s);
	mfsq_close(nq);
	mfsq_close(oq);
	/* no sharded queue, no 'Q' rows, format 5 */
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	MDB_dbi dbi;
	ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
	ck_assert_int_eq(mdb_cursor_open(t, 1 /* MAIN_DBI */, &c), 0);
	char names[256][64];
	int nn = 0;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 6 && k.mv_size < 64 && !memcmp(k.mv_data, "feeds/", 6)) {
			ck_assert_int_lt(nn, 256);
			snprintf(names[nn++], 64, "%.*s", (int)k.mv_size, (char *)k.mv_data);
		}
	mdb_cursor_close(c);
	for (int i = 0; i < nn; i++) {
		ck_assert_int_eq(mdb_dbi_open(t, names[i], 0, &dbi), 0);
		ck_assert_int_eq(mdb_drop(t, dbi, 1), 0);
	}
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_FEED, 0, &dbi), 0);
	ck_assert_int_eq(mdb_cursor_open(t, dbi, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (((char *)k.mv_data)[0] == 'Q' || ((char *)k.mv_data)[0] == 'V')
			ck_assert_int_eq(mdb_cursor_del(c, 0), 0);
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_SUPER, 0, &dbi), 0);
	k = (MDB_val){2, "sb"};
	ck_assert_int_eq(mdb_get(t, dbi, &k, &v), 0);
	struct dbfs_super sb;
	memcpy(&sb, v.mv_data, sizeof(sb));
	sb.version = 5;
	v = (MDB_val){sizeof(sb), &sb};
	ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);
}

/* A move that stopped half-way (the process died after the transaction
 * that copied the old events below `upto`): those events in shard 0 of
 * "feeds" with their prefix and 'Q' row, the row 'W' saying where to go
 * on, as dbfs/feed_migrate.c's copy transactions leave them. */
static void half_moved(uint64_t upto)
{
	MDB_env *env = raw_env();
	mfsq_queue *nq, *oq;
	mfsq_sub *s;
	ck_assert_int_eq(mfsq_open(env, DBFS_FEED_QUEUE, NULL, MFSQ_NO_LOG, &oq), 0);
	struct mfsq_config cfg;
	mfsq_config_default(&cfg);
	cfg.nshards = 8;
	cfg.subshard_msgs = 32768;
	cfg.subshard_bytes = 32u << 20;
	cfg.retain_max = 80;
	cfg.max_payload = DBFS_EV_REC_FIXED + 2 * (64u << 10) + DBFS_XATTR_NAME_MAX + 16;
	ck_assert_int_eq(mfsq_open(env, DBFS_FEED_QUEUE_SHARDED, &cfg, MFSQ_NO_LOG | MFSQ_CREATE,
				   &nq),
			 0);
	ck_assert_int_eq(mfsq_subscribe(oq, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s), 0);
	/* read first: a dequeue must not run inside a write transaction */
	static unsigned char buf[N][512];
	static size_t len[N];
	uint64_t k0 = 0;
	struct mfsq_msg m[64];
	size_t n;
	while (mfsq_dequeue(s, m, 64, &n, 0) == 0)
		for (size_t i = 0; i < n; i++) {
			if (m[i].seq >= upto)
				continue;
			ck_assert_uint_le(m[i].len + 16, sizeof(buf[0]));
			memcpy(buf[k0], &m[i].seq, 8);
			memcpy(buf[k0] + 8, &m[i].enqueuer, 8);
			memcpy(buf[k0] + 16, m[i].data, m[i].len);
			len[k0++] = m[i].len + 16;
		}
	ck_assert_uint_eq(k0, upto - 1);
	MDB_txn *t;
	ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
	for (uint64_t i = 0; i < k0; i++) {
		struct mfsq_msg_in in = {.data = buf[i], .len = len[i],
					 .enqueuer = mfsq_enqueuer_in_shard(nq, 0, 0)};
		uint64_t q;
		ck_assert_int_eq(mfsq_enqueue(nq, t, &in, &q), 0);
		if (i == 0) { /* the copy's 'Q' row */
			unsigned char kb[13] = {'Q', 0, 0, 0, 0};
			dbfs_put_be64(kb + 5, 1);
			MDB_dbi qdb;
			MDB_val qk = {13, kb}, qv = {8, &q};
			ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_FEED, 0, &qdb), 0);
			ck_assert_int_eq(mdb_put(t, qdb, &qk, &qv, 0), 0);
		}
	}
	MDB_dbi dbi;
	MDB_val k = {1, "W"}, v = {8, &upto};
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_FEED, 0, &dbi), 0);
	ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mfsq_unsubscribe(s);
	mfsq_close(nq);
	mfsq_close(oq);
	mdb_env_close(env);
}

static void count_problem(void *arg, const char *problem)
{
	fprintf(stderr, "%s\n", problem);
	(*(int *)arg)++;
}

START_TEST(test_upgrade_to_shards)
{
	static struct seen before[N + 8], after[N + 8];
	char name[32];
	snprintf(dir, sizeof(dir), "/tmp/dbfs-feedup-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	open_store();
	struct dbfs_feed_start one = {.from = DBFS_FEED_SEQ, .seq = 1};
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "keep", &one, NULL), 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		mk(name);
	}
	ck_assert_int_eq(dbfs_feed_sub_ack(fs, "keep", 100), 0);
	size_t nb = read_all(NULL, 1, before, N + 8);
	ck_assert_uint_eq(nb, N);
	dbfs_close(fs);
	make_format_5();

	open_store();
	ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
	size_t na = read_all(NULL, 1, after, N + 8);
	ck_assert_uint_eq(na, nb);
	for (size_t i = 0; i < na; i++) {
		ck_assert_uint_eq(after[i].seq, i + 1);
		ck_assert_uint_eq(after[i].seq, before[i].seq);
		ck_assert_uint_eq(after[i].op, before[i].op);
		ck_assert_uint_eq(after[i].writer, before[i].writer);
		ck_assert_str_eq(after[i].path, before[i].path);
	}
	/* the subscription resumes after its acknowledgement */
	na = read_all("keep", 0, after, N + 8);
	ck_assert_uint_eq(na, N - 100);
	ck_assert_uint_eq(after[0].seq, 101);
	/* new events follow, dense */
	mk("new");
	na = read_all(NULL, N + 1, after, N + 8);
	ck_assert_uint_eq(na, 1);
	ck_assert_uint_eq(after[0].seq, N + 1);
	ck_assert_str_eq(after[0].path, "/new");
	/* both queues check clean; the old one has no subscriber left */
	int problems = 0;
	MDB_txn *t;
	ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
	ck_assert_int_eq(mfsq_check(t, DBFS_FEED_QUEUE_SHARDED, count_problem, &problems, NULL), 0);
	ck_assert_int_eq(mfsq_check(t, DBFS_FEED_QUEUE, count_problem, &problems, NULL), 0);
	mdb_txn_abort(t);
	ck_assert_int_eq(problems, 0);
	dbfs_close(fs);
	MDB_env *env = raw_env();
	mfsq_queue *oq;
	ck_assert_int_eq(mfsq_open(env, DBFS_FEED_QUEUE, NULL, MFSQ_NO_LOG, &oq), 0);
	ck_assert_int_eq(mfsq_subscriber_get(oq, "keep", NULL, NULL, NULL), ENOENT);
	mfsq_close(oq);
	mdb_env_close(env);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A move that a crash stopped half-way goes on where it stopped: every
 * event once, in order. */
START_TEST(test_upgrade_resumes)
{
	static struct seen before[N + 8], after[N + 8];
	char name[32];
	snprintf(dir, sizeof(dir), "/tmp/dbfs-feedup-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	open_store();
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		mk(name);
	}
	size_t nb = read_all(NULL, 1, before, N + 8);
	dbfs_close(fs);
	make_format_5();
	half_moved(150);
	open_store();
	size_t na = read_all(NULL, 1, after, N + 8);
	ck_assert_uint_eq(na, nb);
	for (size_t i = 0; i < na; i++) {
		ck_assert_uint_eq(after[i].seq, i + 1);
		ck_assert_str_eq(after[i].path, before[i].path);
	}
	dbfs_close(fs);
	/* each event once in the queue (readers would skip a copy) */
	MDB_env *env = raw_env();
	mfsq_queue *q;
	mfsq_sub *sub;
	struct mfsq_msg m[64];
	size_t n, total = 0;
	ck_assert_int_eq(mfsq_open(env, DBFS_FEED_QUEUE_SHARDED, NULL, MFSQ_NO_LOG, &q), 0);
	ck_assert_int_eq(mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &sub), 0);
	while (mfsq_dequeue(sub, m, 64, &n, 0) == 0)
		total += n;
	mfsq_unsubscribe(sub);
	mfsq_close(q);
	mdb_env_close(env);
	ck_assert_uint_eq(total, N);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dbfs-feed-upgrade");
	TCase *tc = tcase_create("upgrade");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_upgrade_to_shards);
	tcase_add_test(tc, test_upgrade_resumes);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
