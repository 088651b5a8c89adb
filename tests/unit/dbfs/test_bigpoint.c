/*
 * One device flush per fsync on a store whose free list is big (issue 16):
 * after many files were made and removed one commit each, LMDB's free
 * list holds thousands of records in hundreds of leaves; a small change
 * then fsynced must still be a listed durable point (dbfs/gained.c diffs
 * the two free lists from their roots, so its cost follows what changed,
 * not the free list's size). Counts only, no timing.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "dbfs/recover.h"

#define NFILES 12000

static char dir[256];
static struct dbfs *fs;
static const struct dbfs_cred cred = {1000, 1000, 022};

struct op {
	bool unlink;
	char name[24];
};

static int op_fn(struct dbfs *f, MDB_txn *t, void *arg)
{
	struct op *o = arg;
	struct dbfs_inode in;
	uint64_t ino;
	static const char data[3000] = "some bytes";
	if (o->unlink)
		return dbfs_op_unlink(f, t, DBFS_ROOT_INO, o->name, 0);
	int rc = dbfs_op_mknod(f, t, &cred, DBFS_ROOT_INO, o->name, S_IFREG | 0644, 0, NULL, &ino,
			       &in);
	return rc ? rc : dbfs_op_write(f, t, ino, 0, data, sizeof(data), 0);
}

static void each_file(bool unlink)
{
	for (int i = 0; i < NFILES; i++) {
		struct op o = {.unlink = unlink};
		snprintf(o.name, sizeof(o.name), "file%d", i);
		ck_assert_int_eq(dbfs_write(fs, op_fn, &o), 0);
	}
}

/* A new store under /dev/shm whose points are made as on a disk, listed
 * as on ext4 or XFS (imaged ones would come first). */
static void open_store(const char *name)
{
	snprintf(dir, sizeof(dir), "/dev/shm/dbfs-%s-XXXXXX", name);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dbfs_durable_test_on_disk = true;
	dbfs_durable_test_listed = 1;
	dbfs_durable_test_imaged = 0;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	o.durability = DBFS_DURABLE_NORMAL;
	o.initial_map_size = 64 << 20;
	ck_assert_msg(dbfs_open(dir, &o, &fs, err, sizeof(err)) == 0, "dbfs_open: %s", err);
}

static void close_store(void)
{
	dbfs_close(fs);
	dbfs_durable_test_listed = -1;
	dbfs_durable_test_imaged = -1;
	dbfs_durable_test_on_disk = false;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_big_free_list_one_flush)
{
	open_store("bigpoint");
	each_file(false);
	each_file(true);
	ck_assert_int_eq(dbfs_sync(fs), 0);

	MDB_txn *t;
	MDB_stat st;
	ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
	ck_assert_int_eq(mdb_stat(t, 0, &st), 0);
	mdb_txn_abort(t);
	fprintf(stderr, "test_bigpoint: free list of %zu records in %zu leaves, depth %u\n",
		st.ms_entries, st.ms_leaf_pages, st.ms_depth);
	/* big: more leaves than a walk of them could step over (512 before
	 * gained.c diffed from the roots) */
	ck_assert_uint_gt(st.ms_leaf_pages, 512);

	/* The point of that window was too big to list (two flushes); the
	 * next one gains one file's pages and tries again at once: every
	 * one must list (a pause after that one failure made the next
	 * DBFS_LIST_PAUSE points two flushes each). */
	ck_assert_uint_eq(fs->dur_list_pause, 0);
	struct dbfs_counters c0, c1;
	for (int i = 0; i < (int)DBFS_LIST_PAUSE + 5; i++) {
		struct op one = {.unlink = false};
		snprintf(one.name, sizeof(one.name), "small%d", i);
		dbfs_counters(fs, &c0);
		ck_assert_int_eq(dbfs_write(fs, op_fn, &one), 0);
		ck_assert_int_eq(dbfs_sync(fs), 0);
		dbfs_counters(fs, &c1);
		ck_assert_uint_eq(c1.flushes, c0.flushes + 1);
		ck_assert_msg(c1.flushes_listed == c0.flushes_listed + 1,
			      "point %d after the big one was not listed", i);
	}
	fprintf(stderr, "test_bigpoint: changed leaves read %lu, shared subtrees skipped %lu (all points)\n",
		(unsigned long)fs->dur_gained.stepped, (unsigned long)fs->dur_gained.skipped);
	close_store();
}
END_TEST

/* While the free lists stay too long to compare (every walk fails), the
 * points between two tries double up to DBFS_LIST_PAUSE: a walk is not
 * paid at every point for nothing; once walks succeed again, the next
 * failure pauses no point. Counts only. */
START_TEST(test_failed_walks_back_off)
{
	open_store("backoff");
	struct op one = {.unlink = false};
	/* tries at points 0, 1, 3, 6, 11, 20, 37, 70, 103: 9 of 128 */
	dbfs_durable_fault = DBFS_FAULT_GAIN_E2BIG;
	unsigned long t0 = fs->dur_gain_tries;
	for (int i = 0; i < 128; i++) {
		snprintf(one.name, sizeof(one.name), "f%d", i);
		ck_assert_int_eq(dbfs_write(fs, op_fn, &one), 0);
		ck_assert_int_eq(dbfs_sync(fs), 0);
	}
	ck_assert_uint_eq(fs->dur_gain_tries - t0, 9);
	ck_assert_uint_eq(fs->dur_list_backoff, DBFS_LIST_PAUSE);
	/* walks succeed again (after the pause left): then lists each time */
	dbfs_durable_fault = 0;
	struct dbfs_counters c0, c1;
	for (int i = 0; i < (int)DBFS_LIST_PAUSE + 1; i++) {
		snprintf(one.name, sizeof(one.name), "g%d", i);
		ck_assert_int_eq(dbfs_write(fs, op_fn, &one), 0);
		ck_assert_int_eq(dbfs_sync(fs), 0);
	}
	ck_assert_uint_eq(fs->dur_list_backoff, 0);
	snprintf(one.name, sizeof(one.name), "h");
	dbfs_counters(fs, &c0);
	ck_assert_int_eq(dbfs_write(fs, op_fn, &one), 0);
	ck_assert_int_eq(dbfs_sync(fs), 0);
	dbfs_counters(fs, &c1);
	ck_assert_uint_eq(c1.flushes_listed, c0.flushes_listed + 1);
	close_store();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dbfs-bigpoint");
	TCase *tc = tcase_create("bigpoint");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_big_free_list_one_flush);
	tcase_add_test(tc, test_failed_walks_back_off);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
