/* feed_spec.c: feed positions, filters and feed file names. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "feed_spec.h"
#include "suites.h"

static int pos(const char *s, struct mfs_feed_pos *p)
{
	char err[160];
	return mfs_feed_pos_parse(s, strlen(s), 1000000000000ull * 1000, p, err, sizeof(err));
}

START_TEST(positions)
{
	struct mfs_feed_pos p;
	ck_assert_int_eq(pos("now", &p), 0);
	ck_assert_int_eq(p.start.from, DBFS_FEED_NOW);
	ck_assert_int_eq(pos("oldest", &p), 0);
	ck_assert_int_eq(p.start.from, DBFS_FEED_OLDEST);
	ck_assert_int_eq(pos("17", &p), 0);
	ck_assert_int_eq(p.start.from, DBFS_FEED_SEQ);
	ck_assert_uint_eq(p.start.seq, 17);
	ck_assert_ptr_null(p.start.uuid);
	ck_assert_int_eq(pos("00112233-4455-6677-8899-aabbccddeeff:9", &p), 0);
	ck_assert_ptr_eq(p.start.uuid, p.uuid);
	ck_assert_uint_eq(p.uuid[0], 0x00);
	ck_assert_uint_eq(p.uuid[9], 0x99);
	ck_assert_uint_eq(p.start.seq, 9);
	ck_assert_int_eq(pos("2026-12-02T01:35:00.5Z", &p), 0);
	ck_assert_int_eq(p.start.from, DBFS_FEED_TIME);
	ck_assert_uint_eq(p.start.time_ns, 1796175300500000000ull);
	ck_assert_int_eq(pos("-90", &p), 0);
	ck_assert_uint_eq(p.start.time_ns, 1000000000000000ull - 90000000000ull);
	ck_assert_int_eq(pos("-2h", &p), 0);
	ck_assert_uint_eq(p.start.time_ns, 1000000000000000ull - 7200000000000ull);
	static const char *const bad[] = {"", "0", "x", "-", "-h", "-1w", "1.5", "12:3",
					  "00112233445566778899aabbccddeeff:", "2026-13-01",
					  "99999999999999999999", "now,"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(pos(bad[i], &p) == -EINVAL, "accepted '%s'", bad[i]);
}
END_TEST

static struct dbfs_event ev(unsigned op, const char *path, const char *new_path, uint32_t mode,
			    uint32_t pid)
{
	struct dbfs_event e = {.op = op, .path = path, .path_len = strlen(path), .mode = mode,
			       .pid = pid};
	if (new_path) {
		e.new_path = new_path;
		e.new_path_len = strlen(new_path);
	}
	return e;
}

START_TEST(filters)
{
	struct mfs_feed_filter f;
	char err[160];
	ck_assert_int_eq(mfs_feed_filter_parse("path=/src/,ops=create+rename,types=file", &f, err,
					       sizeof(err)),
			 0);
	struct dbfs_event e = ev(DBFS_EV_CREATE, "/src/a.c", NULL, S_IFREG | 0644, 1);
	ck_assert(mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_CREATE, "/srcx/a.c", NULL, S_IFREG, 1);
	ck_assert(!mfs_feed_filter_match(&f, &e)); /* a prefix of components, not bytes */
	e = ev(DBFS_EV_CREATE, "/src", NULL, S_IFREG, 1);
	ck_assert(mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_MKDIR, "/src/d", NULL, S_IFDIR, 1);
	ck_assert(!mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_WRITE, "/src/a.c", NULL, S_IFREG, 1);
	ck_assert(!mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_RENAME, "/tmp/x", "/src/x", S_IFREG, 1); /* moved in */
	ck_assert(mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_GAP, "", NULL, 0, 0); /* gaps always pass */
	ck_assert(mfs_feed_filter_match(&f, &e));

	ck_assert_int_eq(mfs_feed_filter_parse("glob=*.log,exclude=/var/self,exclude_pid=77", &f,
					       err, sizeof(err)),
			 0);
	e = ev(DBFS_EV_WRITE, "/a/b.log", NULL, S_IFREG, 1);
	ck_assert(mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_WRITE, "/a/b.log", NULL, S_IFREG, 77);
	ck_assert(!mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_WRITE, "/var/self/x.log", NULL, S_IFREG, 1);
	ck_assert(!mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_RENAME, "/var/self/x.log", "/out/x.log", S_IFREG, 1); /* moved out */
	ck_assert(mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_WRITE, "/a/b.txt", NULL, S_IFREG, 1);
	ck_assert(!mfs_feed_filter_match(&f, &e));

	/* settle=MS: settled events of that period only; none without it */
	e = ev(DBFS_EV_SETTLED, "/up/f", NULL, S_IFREG, 0);
	e.attr_mask = 1500;
	ck_assert(!mfs_feed_filter_match(&f, &e));
	ck_assert_int_eq(mfs_feed_filter_parse("settle=1500", &f, err, sizeof(err)), 0);
	ck_assert_uint_eq(f.settle_ms, 1500);
	ck_assert(mfs_feed_filter_match(&f, &e));
	e.attr_mask = 700;
	ck_assert(!mfs_feed_filter_match(&f, &e));
	e = ev(DBFS_EV_WRITE, "/up/f", NULL, S_IFREG, 1); /* the rest as without it */
	ck_assert(mfs_feed_filter_match(&f, &e));

	static const char *const bad[] = {"path=", "path=rel", "ops=", "ops=create+", "ops=gap",
					  "types=pipe", "exclude_pid=x", "glob=", "what=1",
					  "path=/a,path=/b", "settle=0", "settle=", "settle=1s",
					  "settle=86400001"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(mfs_feed_filter_parse(bad[i], &f, err, sizeof(err)) == -EINVAL,
			      "accepted '%s'", bad[i]);
}
END_TEST

START_TEST(names)
{
	bool json;
	struct mfs_feed_pos p;
	struct mfs_feed_filter f;
	char err[160];
	ck_assert_int_eq(mfs_feed_name_parse("events", 0, &json, &p, &f, err, sizeof(err)), 0);
	ck_assert(!json);
	ck_assert_int_eq(p.start.from, DBFS_FEED_NOW);
	ck_assert_int_eq(mfs_feed_name_parse("events.json@5,path=%2Fa%2Fb,ops=write", 0, &json, &p,
					     &f, err, sizeof(err)),
			 0);
	ck_assert(json);
	ck_assert_uint_eq(p.start.seq, 5);
	ck_assert_str_eq(f.path, "/a/b");
	ck_assert_uint_eq(f.ops, 1u << DBFS_EV_WRITE);
	ck_assert_int_eq(mfs_feed_name_parse("eventsx", 0, &json, &p, &f, err, sizeof(err)),
			 -ENOENT);
	ck_assert_int_eq(mfs_feed_name_parse("status", 0, &json, &p, &f, err, sizeof(err)),
			 -ENOENT);
	ck_assert_int_eq(mfs_feed_name_parse("events@", 0, &json, &p, &f, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(mfs_feed_name_parse("events@1,path=%2", 0, &json, &p, &f, err,
					     sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(mfs_feed_name_parse("events@1,path=%00", 0, &json, &p, &f, err,
					     sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(mfs_feed_name_parse("events@now,bogus=1", 0, &json, &p, &f, err,
					     sizeof(err)),
			 -EINVAL);
}
END_TEST

Suite *mfs_feed_spec_suite(void)
{
	Suite *s = suite_create("feed_spec");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, positions);
	tcase_add_test(tc, filters);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	return s;
}
