/* path.c: resolving user paths while keeping out of one device. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "path.h"
#include "suites.h"

static char dir[64];

static void setup(void)
{
	char p[128];
	strcpy(dir, "/tmp/mfs-unit-path.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/a/b", dir);
	snprintf(p, sizeof(p), "%s/a", dir);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/a/b", dir);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	char t[128];
	snprintf(p, sizeof(p), "%s/abs", dir);
	snprintf(t, sizeof(t), "%s/a/b", dir);
	ck_assert_int_eq(symlink(t, p), 0);
	snprintf(p, sizeof(p), "%s/a/rel", dir);
	ck_assert_int_eq(symlink("b/../b", p), 0);
	snprintf(p, sizeof(p), "%s/loop", dir);
	ck_assert_int_eq(symlink("loop", p), 0);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(resolves)
{
	char in[256], out[PATH_MAX], want[256];
	snprintf(want, sizeof(want), "%s/a/b", dir);
	snprintf(in, sizeof(in), "%s/abs", dir);
	ck_assert_int_eq(mfs_path_resolve(in, (dev_t)-1, out, sizeof(out)), 0);
	ck_assert_str_eq(out, want);
	snprintf(in, sizeof(in), "%s//a/./rel/", dir);
	ck_assert_int_eq(mfs_path_resolve(in, (dev_t)-1, out, sizeof(out)), 0);
	ck_assert_str_eq(out, want);
	snprintf(in, sizeof(in), "%s/a/b/../../abs/new", dir);
	ck_assert_int_eq(mfs_path_resolve(in, (dev_t)-1, out, sizeof(out)), -ENOENT);
	snprintf(want, sizeof(want), "%s/a/b/new", dir);
	ck_assert_str_eq(out, want);
	snprintf(in, sizeof(in), "%s/no/new", dir);
	ck_assert_int_eq(mfs_path_resolve(in, (dev_t)-1, out, sizeof(out)), -ENOENT);
	ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(refuses)
{
	char in[256], out[PATH_MAX];
	struct stat st;
	snprintf(in, sizeof(in), "%s/loop", dir);
	ck_assert_int_eq(mfs_path_resolve(in, (dev_t)-1, out, sizeof(out)), -ELOOP);
	ck_assert_int_eq(mfs_path_resolve("rel", (dev_t)-1, out, sizeof(out)), -EINVAL);
	/* never looks inside the avoided device */
	ck_assert_int_eq(stat(dir, &st), 0);
	snprintf(in, sizeof(in), "%s/a", dir);
	ck_assert_int_eq(mfs_path_resolve(in, st.st_dev, out, sizeof(out)), -EXDEV);
	ck_assert_int_eq(mfs_path_resolve(dir, st.st_dev, out, sizeof(out)), -EXDEV);
	snprintf(in, sizeof(in), "%s/abs/x", dir);
	ck_assert_int_eq(mfs_path_resolve(in, (dev_t)-1, out, sizeof(out)), -ENOENT);
}
END_TEST

Suite *mfs_path_suite(void)
{
	Suite *s = suite_create("path");
	TCase *tc = tcase_create("resolve");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, resolves);
	tcase_add_test(tc, refuses);
	suite_add_tcase(s, tc);
	return s;
}
