/*
 * The store's file does not grow without bound under steady churn in the
 * default durability mode (issue 16): files are made, written and removed
 * over and over with a bounded live set, durable points follow the
 * commit_interval on a virtual clock, and the pages of the file that no
 * table uses must level off at about one window's churn (a durable point's
 * pin keeps what the window freed until the next point). Live growth (the
 * feed's kept events) is not counted. Size bounds only (pages), no timing.
 * Fails when pins are never let go (checked with durable.c keeping every
 * pin after the 50th transaction: 69,721 -> 841,791 pages unused).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbfs/internal.h"

#define NNAMES 32
#define FILE_BYTES (48u << 10)
#define STEP_NS 50000000ll /* virtual time per operation: 100 per point */

static char dir[256];
static struct dbfs *fs;
static const struct dbfs_cred cred = {1000, 1000, 022};
static int64_t vclock = 1000000000000ll;
static unsigned char buf[FILE_BYTES];

static int64_t test_clock(void)
{
	return vclock;
}

struct op {
	int kind; /* 0 create, 1 write, 2 unlink */
	char name[16];
	uint64_t ino;
	uint64_t off;
	size_t len;
};

static int op_fn(struct dbfs *f, MDB_txn *t, void *arg)
{
	struct op *o = arg;
	struct dbfs_inode in;
	switch (o->kind) {
	case 0:
		return dbfs_op_mknod(f, t, &cred, DBFS_ROOT_INO, o->name, S_IFREG | 0644, 0, NULL,
				     &o->ino, &in);
	case 1:
		return dbfs_op_write(f, t, o->ino, o->off, buf, o->len, 0);
	default:
		return dbfs_op_unlink(f, t, DBFS_ROOT_INO, o->name, 0);
	}
}

static void run(struct op *o)
{
	ck_assert_int_eq(dbfs_write_sized(fs, op_fn, o, o->kind == 1 ? o->len : 0), 0);
	vclock += STEP_NS;
	ck_assert_int_eq(dbfs_tick(fs), 0);
}

/* Pages of the file that no table uses: the last page LMDB has used
 * (plus the two meta pages) less the pages of every table. */
static uint64_t unused_pages(void)
{
	MDB_envinfo info;
	MDB_txn *t;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_dbi main_dbi;
	MDB_stat st;
	mdb_env_info(fs->env, &info);
	ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
	ck_assert_int_eq(mdb_dbi_open(t, NULL, 0, &main_dbi), 0);
	uint64_t used = 2;
	for (MDB_dbi d = 0; d <= 1; d++) {
		ck_assert_int_eq(mdb_stat(t, d, &st), 0);
		used += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
	}
	ck_assert_int_eq(mdb_cursor_open(t, main_dbi, &cur), 0);
	while (!mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char name[128];
		MDB_dbi d;
		snprintf(name, sizeof(name), "%.*s", (int)k.mv_size, (char *)k.mv_data);
		if (mdb_dbi_open(t, name, 0, &d) == 0 && mdb_stat(t, d, &st) == 0)
			used += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(t);
	return info.me_last_pgno + 1 - used;
}

/* rounds of churn: every name in turn is removed if it exists, else
 * made and written in 16 KiB pieces; every 37th step an fsync. */
static void churn(int rounds, uint64_t *ino)
{
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < NNAMES; i++) {
			struct op o = {0};
			snprintf(o.name, sizeof(o.name), "f%d", i);
			if (ino[i]) {
				o.kind = 2;
				run(&o);
				ino[i] = 0;
				continue;
			}
			o.kind = 0;
			run(&o);
			ino[i] = o.ino;
			for (uint64_t off = 0; off < FILE_BYTES; off += 16384) {
				o.kind = 1;
				o.off = off;
				o.len = 16384;
				run(&o);
			}
			if ((r * NNAMES + i) % 37 == 0)
				ck_assert_int_eq(dbfs_sync(fs), 0);
		}
	}
}

START_TEST(test_churn_levels_off)
{
	snprintf(dir, sizeof(dir), "/dev/shm/dbfs-bloat-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dbfs_durable_test_on_disk = true; /* points wherever /tmp is */
	dbfs_durable_clock = test_clock;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	o.durability = DBFS_DURABLE_NORMAL;
	o.initial_map_size = 8 << 20;
	o.commit_interval = 5;
	o.feed_max_events = 2000; /* its kept events: a bounded live set too */
	ck_assert_msg(dbfs_open(dir, &o, &fs, err, sizeof(err)) == 0, "dbfs_open: %s", err);
	uint64_t ino[NNAMES] = {0};
	churn(40, ino); /* a window's churn */
	uint64_t warm = unused_pages(), end = warm;
	for (int k = 0; k < 8; k++) {
		churn(40, ino);
		end = unused_pages();
		if (getenv("TEST_BLOAT_VERBOSE"))
			fprintf(stderr, "test_bloat: %d more rounds: %lu pages unused\n", 40 * (k + 1),
				(unsigned long)end);
	}
	fprintf(stderr, "test_bloat: %lu pages unused after 40 rounds, %lu after 360\n",
		(unsigned long)warm, (unsigned long)end);
	/* 320 more rounds (about 10,000 operations and 100 durable points) of
	 * the same churn reuse what the first 40 freed: the file holds a
	 * window's churn more than its tables, whatever the time it ran. */
	ck_assert_uint_le(end, warm + warm / 16);
	dbfs_close(fs);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dbfs-bloat");
	TCase *tc = tcase_create("bloat");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_churn_levels_off);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
