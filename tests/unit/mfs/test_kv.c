/* kv.c: the mount-option style parser of control values. */
#include <errno.h>
#include <string.h>

#include "kv.h"
#include "suites.h"

static int parse(const char *s, unsigned flags, struct mfs_kvlist *l)
{
	char err[128];
	return mfs_kv_parse(s, strlen(s), flags, l, err, sizeof(err));
}

START_TEST(simple)
{
	struct mfs_kvlist l;
	ck_assert_int_eq(parse("name=a,create,store=/x", MFS_KV_UNIQUE, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.items[0].key, "name");
	ck_assert_str_eq(l.items[0].value, "a");
	ck_assert_ptr_null(l.items[1].value);
	ck_assert_str_eq(l.items[2].value, "/x");
	mfs_kv_free(&l);
}
END_TEST

START_TEST(escapes)
{
	struct mfs_kvlist l;
	ck_assert_int_eq(parse("store=/a\\,b,x=c\\\\d,y=e=f", MFS_KV_UNIQUE, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.items[0].value, "/a,b");
	ck_assert_str_eq(l.items[1].value, "c\\d");
	ck_assert_str_eq(l.items[2].value, "e=f");
	mfs_kv_free(&l);
}
END_TEST

START_TEST(refusals)
{
	static const char *const bad[] = {
		"", ",", "a,,b", "a,", "=v", "a\\", "Key=1", "a b=1", "x=\x01", "x=\xff",
		"x=\xc0\x80", "x=\xed\xa0\x80", "x=\xe2\x82",
	};
	struct mfs_kvlist l;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i], 0, &l) == -EINVAL, "accepted '%s'", bad[i]);
	ck_assert_int_eq(parse("a=1,a=2", MFS_KV_UNIQUE, &l), -EINVAL);
	ck_assert_int_eq(parse("a=1,a=2", 0, &l), 0);
	mfs_kv_free(&l);
	/* an embedded NUL is a control character */
	char err[64];
	ck_assert_int_eq(mfs_kv_parse("a=b\0c", 5, 0, &l, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(utf8)
{
	ck_assert(mfs_utf8_printable("café", strlen("café")));
	ck_assert(mfs_utf8_printable("日本", strlen("日本")));
	ck_assert(mfs_utf8_printable("\xf0\x9f\x98\x80", 4));
	ck_assert(!mfs_utf8_printable("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	ck_assert(!mfs_utf8_printable("\xc2\x85", 2));         /* C1 control */
	ck_assert(!mfs_utf8_printable("\x7f", 1));
}
END_TEST

START_TEST(escape_roundtrip)
{
	char buf[64];
	size_t pos = 0;
	struct mfs_kvlist l;
	strcpy(buf, "k=");
	pos = 2;
	ck_assert(mfs_kv_escape(buf, sizeof(buf), &pos, "a,b\\c=d"));
	ck_assert_int_eq(parse(buf, MFS_KV_UNIQUE, &l), 0);
	ck_assert_str_eq(l.items[0].value, "a,b\\c=d");
	mfs_kv_free(&l);
	pos = 0;
	ck_assert(!mfs_kv_escape(buf, 4, &pos, "abcdef"));
	ck_assert_uint_lt(strlen(buf), 4);
}
END_TEST

Suite *mfs_kv_suite(void)
{
	Suite *s = suite_create("kv");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, simple);
	tcase_add_test(tc, escapes);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, utf8);
	tcase_add_test(tc, escape_roundtrip);
	suite_add_tcase(s, tc);
	return s;
}
