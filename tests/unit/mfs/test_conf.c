/* conf.c: option checks, canonical text, live keys, names, sizes. */
#include <errno.h>
#include <string.h>

#include "conf.h"
#include "suites.h"

START_TEST(sizes)
{
	uint64_t v;
	ck_assert_int_eq(mfs_parse_size("123", &v), 0);
	ck_assert_uint_eq(v, 123);
	ck_assert_int_eq(mfs_parse_size("4K", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(mfs_parse_size("2g", &v), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	/* strtoull skips spaces and takes a sign: " -1" was 2^64-1 */
	static const char *const bad[] = {"", "-1", "1Q", "1KB", "K", "99999999999999999999",
					  "20000000T", " -1", " 12", "+5K", "\t1", "-0"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(mfs_parse_size(bad[i], &v) == -EINVAL, "accepted %s", bad[i]);
		ck_assert_msg(mfs_parse_uint(bad[i], UINT64_MAX, &v) == -EINVAL, "accepted %s",
			      bad[i]);
	}
	ck_assert_int_eq(mfs_parse_uint("1024", 1024, &v), 0);
	ck_assert_uint_eq(v, 1024);
	ck_assert_int_eq(mfs_parse_uint("1025", 1024, &v), -EINVAL);
	char err[128];
	ck_assert_int_eq(mfs_conf_check("quota_bytes", " -1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(mfs_conf_check("bandwidth", "+5K", err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(check)
{
	char err[128];
	ck_assert_int_eq(mfs_conf_check("iops", "100", err, sizeof(err)), 0);
	ck_assert_int_eq(mfs_conf_check("bandwidth", "10M", err, sizeof(err)), 0);
	ck_assert_int_eq(mfs_conf_check("max_concurrent", "2000", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(mfs_conf_check("durability", "full", err, sizeof(err)), 0);
	ck_assert_int_eq(mfs_conf_check("durability", "maybe", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(mfs_conf_check("colour", "red", err, sizeof(err)), -ENOENT);
	ck_assert_str_eq(err, "unknown key 'colour'");
	ck_assert_int_eq(mfs_conf_check("store", "/x", err, sizeof(err)), -EINVAL);
	ck_assert(mfs_conf_live("quota_bytes"));
	ck_assert(mfs_conf_live("iops"));
	ck_assert(!mfs_conf_live("durability"));
}
END_TEST

START_TEST(set_and_parse)
{
	char opts[64] = "";
	struct dbfs_options o;
	struct mfs_limits lim;
	char err[128];
	ck_assert_int_eq(mfs_conf_set(opts, sizeof(opts), "iops", "10"), 0);
	ck_assert_int_eq(mfs_conf_set(opts, sizeof(opts), "ro", NULL), 0);
	ck_assert_int_eq(mfs_conf_set(opts, sizeof(opts), "iops", "20"), 0);
	ck_assert_str_eq(opts, "ro,iops=20");
	ck_assert_int_eq(mfs_conf_parse(opts, &o, &lim, err, sizeof(err)), 0);
	ck_assert_uint_eq(lim.iops, 20);
	ck_assert(o.read_only);
	/* does not fit: unchanged */
	char small[12] = "iops=1";
	ck_assert_int_eq(mfs_conf_set(small, sizeof(small), "bandwidth", "100M"), -ENAMETOOLONG);
	ck_assert_str_eq(small, "iops=1");
	ck_assert_int_eq(mfs_conf_parse("nonsense=1", &o, &lim, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(names)
{
	char err[128];
	char long_name[70];
	memset(long_name, 'n', sizeof(long_name));
	ck_assert(mfs_name_valid("db-1.x_y", 8, err, sizeof(err)));
	ck_assert(mfs_name_valid("café", strlen("café"), err, sizeof(err)));
	ck_assert(mfs_name_valid(long_name, 64, err, sizeof(err)));
	ck_assert(!mfs_name_valid(long_name, 65, err, sizeof(err)));
	ck_assert(!mfs_name_valid("", 0, err, sizeof(err)));
	ck_assert(!mfs_name_valid("a/b", 3, err, sizeof(err)));
	ck_assert(!mfs_name_valid(".x", 2, err, sizeof(err)));
	ck_assert(!mfs_name_valid("-x", 2, err, sizeof(err)));
	ck_assert(!mfs_name_valid("a b", 3, err, sizeof(err)));
	ck_assert(!mfs_name_valid("a\tb", 3, err, sizeof(err)));
	ck_assert(!mfs_name_valid("a\xff", 2, err, sizeof(err)));
}
END_TEST

Suite *mfs_conf_suite(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("options");
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, check);
	tcase_add_test(tc, set_and_parse);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	return s;
}
