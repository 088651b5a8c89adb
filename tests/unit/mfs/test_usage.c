/* usage_store.c, usage_kinds.c, usage_text.c: the history rows' versions
 * (a history written before rows carried kinds is read after the
 * upgrade), the kinds' encoding, the text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "suites.h"
#include "usage_kinds.h"
#include "usage_store.h"

/* A row as mfs wrote it before version 2 (frozen: the layout of the
 * struct mfs_usage_row of then, 112 bytes, its field `zero` 0). */
struct row_v1 {
	uint64_t t;
	uint32_t span;
	uint32_t zero;
	uint64_t ops, read_bytes, write_bytes, errors, throttled, feed_events;
	uint64_t lat_p50_ns, lat_p99_ns;
	uint64_t bytes_used, inodes_used, cache_bytes, feed_lag;
};

/* Put a version 1 row as the old mfs_usage_put did: the struct as it is. */
static void put_v1(struct mfs_usage_store *st, const char *name, const struct row_v1 *r)
{
	unsigned char k[80];
	size_t n = strlen(name);
	MDB_txn *txn;
	MDB_dbi dbi;

	memcpy(k, name, n);
	k[n] = 0;
	k[n + 1] = MFS_RES_SEC;
	for (int i = 0; i < 8; i++)
		k[n + 2 + i] = (unsigned char)(r->t >> (56 - 8 * i));
	MDB_val key = {n + 10, k}, val = {sizeof(*r), (void *)r};
	ck_assert_int_eq(mdb_txn_begin(mfs_usage_env(st), NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "history", 0, &dbi), 0);
	ck_assert_int_eq(mdb_put(txn, dbi, &key, &val, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
}

struct seen {
	int n;
	struct mfs_usage_row rows[4];
};

static int keep(void *arg, const struct mfs_usage_row *r)
{
	struct seen *s = arg;
	ck_assert_int_lt(s->n, 4);
	s->rows[s->n++] = *r;
	return 0;
}

START_TEST(upgrade)
{
	char dir[] = "/tmp/mfs-unit-usage.XXXXXX", path[64], err[256], cmd[96];
	struct mfs_usage_store *st;
	struct seen seen = {0};
	MDB_txn *txn;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/usage", dir);
	ck_assert_int_eq(mfs_usage_open(path, 0, &st, err, sizeof(err)), 0);
	/* the history of an mfs before the upgrade: one row of 1000 s */
	struct row_v1 old = {.t = 1000,
			     .span = 1,
			     .ops = 5,
			     .read_bytes = 4096,
			     .errors = 2,
			     .lat_p50_ns = 65536,
			     .bytes_used = 123,
			     .inodes_used = 7};
	ck_assert_uint_eq(sizeof(old), MFS_USAGE_ROW_V1_SIZE);
	put_v1(st, "a", &old);
	mfs_usage_close(st);

	/* the upgraded mfs opens it, adds a row, reads both */
	ck_assert_int_eq(mfs_usage_open(path, 0, &st, err, sizeof(err)), 0);
	struct mfs_usage_row r;
	memset(&r, 0, sizeof(r));
	r.t = 1001;
	r.span = 1;
	r.ops = 30;
	r.errors = 7;
	r.flushes = 3;
	r.commits = 21;
	r.kinds.ops[9] = 20; /* mkdir */
	r.kinds.ops[11] = 7; /* rmdir */
	r.kinds.ops[60] = 3; /* no name of ours */
	r.kinds.errs[ENOTEMPTY] = 7;
	r.kinds.errs[0] = 1; /* an errno past the table */
	ck_assert_int_eq(mfs_usage_begin(st, &txn), 0);
	ck_assert_int_eq(mfs_usage_put(st, txn, "a", MFS_RES_SEC, &r), 0);
	ck_assert_int_eq(mfs_usage_commit(txn), 0);
	ck_assert_int_eq(mfs_usage_each(st, "a", MFS_RES_SEC, 0, 0, keep, &seen), 0);
	ck_assert_int_eq(seen.n, 2);
	const struct mfs_usage_row *o = &seen.rows[0], *v = &seen.rows[1];
	ck_assert_uint_eq(o->version, 1);
	ck_assert_uint_eq(o->t, 1000);
	ck_assert_uint_eq(o->ops, 5);
	ck_assert_uint_eq(o->read_bytes, 4096);
	ck_assert_uint_eq(o->errors, 2);
	ck_assert_uint_eq(o->lat_p50_ns, 65536);
	ck_assert_uint_eq(o->bytes_used, 123);
	ck_assert_uint_eq(o->inodes_used, 7);
	ck_assert_uint_eq(o->flushes, 0);
	ck_assert_uint_eq(o->kinds.ops[9], 0);
	ck_assert_uint_eq(v->version, 2);
	ck_assert_uint_eq(v->ops, 30);
	ck_assert_uint_eq(v->flushes, 3);
	ck_assert_uint_eq(v->commits, 21);
	ck_assert_int_eq(memcmp(&v->kinds, &r.kinds, sizeof(r.kinds)), 0);

	/* the text: the old row's new columns are "-" */
	struct mfs_buf b = {0};
	ck_assert_int_eq(mfs_usage_text(st, "a", 1002, 3600, &b), 0);
	ck_assert_ptr_nonnull(strstr(b.p, " feed_lag flushes_per_s ops_by_kind errors_by_errno\n"));
	ck_assert_ptr_nonnull(
	    strstr(b.p, "\n1000 1970-01-01T00:16:40Z 1 5 4096 0 2 0 0 65 0 123 7 0 0 - - -\n"));
	ck_assert_ptr_nonnull(strstr(b.p, " 3 mkdir:20,rmdir:7,op60:3 other:1,ENOTEMPTY:7\n"));
	mfs_buf_free(&b);
	mfs_usage_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A row that is neither version (another size, a later version, a damaged
 * kinds encoding) is skipped, the others read. */
START_TEST(damaged)
{
	char dir[] = "/tmp/mfs-unit-usage.XXXXXX", path[64], err[256], cmd[96];
	struct mfs_usage_store *st;
	struct seen seen = {0};
	MDB_txn *txn;
	MDB_dbi dbi;
	unsigned char v[200];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/usage", dir);
	ck_assert_int_eq(mfs_usage_open(path, 0, &st, err, sizeof(err)), 0);
	struct mfs_usage_row r = {.t = 10, .span = 1, .ops = 1};
	ck_assert_int_eq(mfs_usage_begin(st, &txn), 0);
	ck_assert_int_eq(mfs_usage_put(st, txn, "a", MFS_RES_SEC, &r), 0);
	ck_assert_int_eq(mfs_usage_commit(txn), 0);
	ck_assert_int_eq(mdb_txn_begin(mfs_usage_env(st), NULL, 0, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "history", 0, &dbi), 0);
	unsigned char k[] = {'a', 0, MFS_RES_SEC, 0, 0, 0, 0, 0, 0, 0, 11};
	MDB_val key = {sizeof(k), k}, val;
	for (int c = 0; c < 4; c++) {
		memset(v, 0, sizeof(v));
		uint32_t ver = c == 2 ? 3 : 2;
		memcpy(v + 12, &ver, 4);
		uint16_t n = c == 3 ? 5 : 0; /* 5 entries promised, none there */
		memcpy(v + 128, &n, 2);
		val.mv_data = v;
		val.mv_size = c == 0 ? 100 : c == 1 ? 129 : 130;
		k[sizeof(k) - 1] = (unsigned char)(11 + c);
		ck_assert_int_eq(mdb_put(txn, dbi, &key, &val, 0), 0);
	}
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	ck_assert_int_eq(mfs_usage_each(st, "a", MFS_RES_SEC, 0, 0, keep, &seen), 0);
	ck_assert_int_eq(seen.n, 1);
	ck_assert_uint_eq(seen.rows[0].t, 10);
	mfs_usage_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(kinds_codec)
{
	struct mfs_usage_kinds k = {0}, d;
	unsigned char p[MFS_USAGE_KINDS_MAX];

	ck_assert_uint_eq(mfs_usage_kinds_put(p, &k), 2);
	ck_assert_int_eq(mfs_usage_kinds_get(p, 2, &d), 0);
	for (int i = 0; i < MFS_OPCODES; i++)
		k.ops[i] = (uint64_t)i << 40 | 1;
	for (int i = 0; i < DBFS_ERRNOS; i++)
		k.errs[i] = (uint64_t)i + 1;
	size_t n = mfs_usage_kinds_put(p, &k);
	ck_assert_uint_eq(n, MFS_USAGE_KINDS_MAX);
	ck_assert_int_eq(mfs_usage_kinds_get(p, n, &d), 0);
	ck_assert_int_eq(memcmp(&k, &d, sizeof(k)), 0);
	ck_assert_int_eq(mfs_usage_kinds_get(p, n - 1, &d), -EINVAL);
	ck_assert_int_eq(mfs_usage_kinds_get(p, 1, &d), -EINVAL);
	uint16_t bad = 0x100 + DBFS_ERRNOS;
	memcpy(p + 2, &bad, 2);
	ck_assert_int_eq(mfs_usage_kinds_get(p, n, &d), -EINVAL);
	/* differences never go below 0 */
	struct mfs_usage_kinds a = {0}, b = {0};
	a.ops[3] = 5;
	b.ops[3] = 7;
	b.errs[2] = 1;
	a.errs[2] = 4;
	mfs_usage_kinds_sub(&d, &a, &b);
	ck_assert_uint_eq(d.ops[3], 0);
	ck_assert_uint_eq(d.errs[2], 3);
	mfs_usage_kinds_add(&d, &a);
	ck_assert_uint_eq(d.ops[3], 5);
	ck_assert_uint_eq(d.errs[2], 7);
	ck_assert_str_eq(mfs_op_name(9), "mkdir");
	ck_assert_ptr_null(mfs_op_name(60));
	ck_assert_ptr_null(mfs_op_name(MFS_OPCODES));
	ck_assert_str_eq(mfs_errno_name(ENOENT), "ENOENT");
	ck_assert_str_eq(mfs_errno_name(0), "other");
}
END_TEST

Suite *mfs_usage_suite(void)
{
	Suite *s = suite_create("usage");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, upgrade);
	tcase_add_test(tc, damaged);
	tcase_add_test(tc, kinds_codec);
	suite_add_tcase(s, tc);
	return s;
}
