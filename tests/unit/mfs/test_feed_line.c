/* feed_line.h: the text and JSON lines of change-feed events, both ways. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "feed_line.h"
#include "suites.h"

static void same_name(const char *a, size_t an, const char *b, size_t bn)
{
	ck_assert_uint_eq(an, bn);
	if (an)
		ck_assert(!memcmp(a, b, an));
}

static void same_event(const struct dbfs_event *a, const struct dbfs_event *b)
{
	ck_assert_uint_eq(a->seq, b->seq);
	ck_assert_uint_eq(a->time_ns, b->time_ns);
	ck_assert_uint_eq(a->op, b->op);
	if (a->op == DBFS_EV_GAP) {
		ck_assert_uint_eq(a->gap_next, b->gap_next);
		return;
	}
	ck_assert_uint_eq(a->ino, b->ino);
	ck_assert_uint_eq(a->parent, b->parent);
	ck_assert_uint_eq(a->new_parent, b->new_parent);
	ck_assert_uint_eq(a->uid, b->uid);
	ck_assert_uint_eq(a->gid, b->gid);
	ck_assert_uint_eq(a->pid, b->pid);
	ck_assert_uint_eq(a->size, b->size);
	ck_assert_uint_eq(a->mode, b->mode);
	ck_assert_uint_eq(a->attr_mask, b->attr_mask);
	ck_assert_uint_eq(a->nlink, b->nlink);
	ck_assert_uint_eq(a->flags, b->flags);
	ck_assert_uint_eq(a->off, b->off);
	ck_assert_uint_eq(a->len, b->len);
	same_name(a->path, a->path_len, b->path, b->path_len);
	same_name(a->new_path, a->new_path_len, b->new_path, b->new_path_len);
	same_name(a->xattr, a->xattr_len, b->xattr, b->xattr_len);
}

/* Encode ev both ways, check each line's shape and that it decodes back. */
static void round_trip(const struct dbfs_event *ev)
{
	for (int json = 0; json < 2; json++) {
		struct mfs_buf b = {0};
		struct mfs_feed_rec rec;
		char err[128] = "";

		(json ? mfs_feed_line_json : mfs_feed_line_text)(ev, &b);
		ck_assert(!b.oom);
		ck_assert_uint_gt(b.len, 0);
		ck_assert_int_eq(b.p[b.len - 1], '\n');
		ck_assert_ptr_null(memchr(b.p, '\n', b.len - 1));
		if (!json)
			ck_assert_ptr_null(memchr(b.p, '\t', b.len));
		int rc = (json ? mfs_feed_parse_json : mfs_feed_parse_text)(b.p, b.len, &rec, err,
									  sizeof(err));
		ck_assert_msg(rc == 0, "%s line refused (%s): %s", json ? "JSON" : "text", err, b.p);
		same_event(ev, &rec.ev);
		/* and the decoded record encodes to the same line */
		struct mfs_buf b2 = {0};
		(json ? mfs_feed_line_json : mfs_feed_line_text)(&rec.ev, &b2);
		ck_assert_uint_eq(b.len, b2.len);
		ck_assert(!memcmp(b.p, b2.p, b.len));
		mfs_buf_free(&b2);
		mfs_feed_rec_free(&rec);
		mfs_buf_free(&b);
	}
}

static struct dbfs_event base(unsigned op)
{
	struct dbfs_event ev = {
		.seq = 42,
		.time_ns = 1764639300123456789ull,
		.op = op,
		.ino = 7,
		.parent = 1,
		.uid = 1000,
		.gid = 100,
		.pid = 4321,
		.size = 12,
		.mode = S_IFREG | 0644,
		.nlink = 1,
		.path = "/a/b",
		.path_len = 4,
	};
	if (mfs_feed_op_has_new(op)) {
		ev.new_parent = 9;
		ev.new_path = "/c/d";
		ev.new_path_len = 4;
		ev.flags = DBFS_EVF_REPLACED;
	}
	if (op == DBFS_EV_SETTLED)
		ev.attr_mask = 2500;
	if (op == DBFS_EV_WRITE || op == DBFS_EV_FALLOCATE || op == DBFS_EV_PUNCH ||
	    op == DBFS_EV_SETTLED) {
		ev.off = 4096;
		ev.len = 1ull << 40;
	}
	if (op == DBFS_EV_SETATTR)
		ev.attr_mask = 1 | 8 | (1u << 5);
	if (op == DBFS_EV_SETXATTR || op == DBFS_EV_REMOVEXATTR) {
		ev.xattr = "user.x";
		ev.xattr_len = 6;
	}
	if (op == DBFS_EV_GAP)
		ev.gap_next = 100;
	return ev;
}

START_TEST(every_op)
{
	for (unsigned op = DBFS_EV_CREATE; op <= DBFS_EV_GAP; op++) {
		ck_assert_ptr_nonnull(mfs_feed_op_name(op));
		ck_assert_str_eq(mfs_feed_op_name(op), dbfs_ev_op_name(op));
		ck_assert_uint_eq(mfs_feed_op_of(mfs_feed_op_name(op), strlen(mfs_feed_op_name(op))),
				  op);
		struct dbfs_event ev = base(op);
		round_trip(&ev);
	}
	ck_assert_uint_eq(mfs_feed_op_of("Create", 6), 0);
	ck_assert_ptr_null(mfs_feed_op_name(0));
	ck_assert_ptr_null(mfs_feed_op_name(DBFS_EV_OP_MAX + 1));
}
END_TEST

START_TEST(exact_text)
{
	struct dbfs_event ev = base(DBFS_EV_RENAME);
	struct mfs_buf b = {0};
	ev.path = "/a b";
	ev.path_len = 4;
	mfs_feed_line_text(&ev, &b);
	ck_assert_str_eq(b.p, "42 2025-12-02T01:35:00.123456789Z rename 7 /a\\040b /c/d parent=1 "
			      "new_parent=9 type=file mode=0644 size=12 uid=1000 gid=100 pid=4321 nlink=1 "
			      "flags=replaced\n");
	mfs_buf_free(&b);
	ev = base(DBFS_EV_GAP);
	mfs_feed_line_text(&ev, &b);
	ck_assert_str_eq(b.p, "42 2025-12-02T01:35:00.123456789Z gap 7 /a/b next=100\n");
	mfs_buf_free(&b);
	ev = base(DBFS_EV_WRITE);
	ev.path = NULL;
	ev.path_len = 0;
	mfs_feed_line_text(&ev, &b);
	ck_assert_str_eq(b.p, "42 2025-12-02T01:35:00.123456789Z write 7 - parent=1 type=file "
			      "mode=0644 size=12 uid=1000 gid=100 pid=4321 nlink=1 off=4096 "
			      "len=1099511627776\n");
	mfs_buf_free(&b);
	ev = base(DBFS_EV_SETATTR);
	ev.attr_mask |= 1u << 12;
	mfs_feed_line_json(&ev, &b);
	ck_assert_str_eq(b.p, "{\"seq\":42,\"time\":\"2025-12-02T01:35:00.123456789Z\","
			      "\"time_ns\":1764639300123456789,\"op\":\"setattr\",\"ino\":7,"
			      "\"path\":\"/a/b\",\"parent\":1,\"type\":\"file\",\"mode\":\"0644\","
			      "\"size\":12,\"uid\":1000,\"gid\":100,\"pid\":4321,\"nlink\":1,"
			      "\"attr\":[\"mode\",\"size\",\"mtime\",\"0x1000\"]}\n");
	mfs_buf_free(&b);
}
END_TEST

/* Every byte value 1..255 in a name, alone, in pairs and all together, in
 * the path, the new path and the xattr name, through both formats. */
START_TEST(every_byte)
{
	char all[300];
	size_t n = 0;
	all[n++] = '/';
	for (int c = 1; c < 256; c++)
		all[n++] = (char)c;
	struct dbfs_event ev = base(DBFS_EV_RENAME);
	ev.path = all;
	ev.path_len = n;
	ev.new_path = all;
	ev.new_path_len = n;
	round_trip(&ev);
	for (int c = 1; c < 256; c++) {
		for (int d = 0; d < 256; d += 17) {
			char one[4] = {'/', (char)c, (char)d, 0};
			ev = base(DBFS_EV_SETXATTR);
			ev.path = one;
			ev.path_len = d ? 3 : 2;
			ev.xattr = one + 1;
			ev.xattr_len = d ? 2 : 1;
			round_trip(&ev);
		}
	}
	/* a text line of any name holds no space, tab, newline or control byte
	 * but the separators */
	struct mfs_buf b = {0};
	ev = base(DBFS_EV_CREATE);
	ev.path = all;
	ev.path_len = n;
	mfs_feed_line_text(&ev, &b);
	unsigned spaces = 0;
	for (size_t i = 0; i < b.len - 1; i++) {
		unsigned char c = (unsigned char)b.p[i];
		ck_assert(c >= 0x20 && c != 0x7f);
		spaces += c == ' ';
	}
	ck_assert_uint_eq(spaces, 4 + 8); /* 5 fields, 8 keys */
	mfs_buf_free(&b);
}
END_TEST

START_TEST(names)
{
	struct mfs_buf b = {0};
	mfs_feed_escape("/é ü\\\n\t\x01\xff\xc3", 12, &b);
	ck_assert_str_eq(b.p, "/é\\040ü\\134\\012\\011\\001\\377\\303");
	mfs_buf_free(&b);
	/* C1 controls, surrogates and overlong forms are escaped */
	mfs_feed_escape("\xc2\x85\xed\xa0\x80\xc0\xaf", 7, &b);
	ck_assert_str_eq(b.p, "\\302\\205\\355\\240\\200\\300\\257");
	mfs_buf_free(&b);
	mfs_feed_escape("-", 1, &b);
	ck_assert_str_eq(b.p, "\\055");
	mfs_buf_free(&b);

	/* JSON: valid UTF-8 as is, invalid with a lossless _b64 twin */
	struct dbfs_event ev = base(DBFS_EV_CREATE);
	ev.path = "/x\xff\"y";
	ev.path_len = 5;
	mfs_feed_line_json(&ev, &b);
	ck_assert_ptr_nonnull(strstr(b.p, "\"path\":\"/x\xef\xbf\xbd\\\"y\",\"path_b64\":\"L3j/Ink=\""));
	mfs_buf_free(&b);
	ev.path = "/日本";
	ev.path_len = strlen(ev.path);
	mfs_feed_line_json(&ev, &b);
	ck_assert_ptr_nonnull(strstr(b.p, "\"path\":\"/日本\","));
	ck_assert_ptr_null(strstr(b.p, "_b64"));
	mfs_buf_free(&b);
	/* no name: "-" in text */
	ev.path = NULL;
	ev.path_len = 0;
	round_trip(&ev);
}
END_TEST

START_TEST(times)
{
	char t[MFS_FEED_TIME_MAX];
	uint64_t ns;
	mfs_feed_time_format(0, t);
	ck_assert_str_eq(t, "1970-01-01T00:00:00.000000000Z");
	ck_assert_int_eq(mfs_feed_time_parse(t, strlen(t), &ns), 0);
	ck_assert_uint_eq(ns, 0);
	ck_assert_int_eq(mfs_feed_time_parse("2024-02-29T12:00:01.5Z", 22, &ns), 0);
	ck_assert_uint_eq(ns, 1709208001500000000ull);
	ck_assert_int_eq(mfs_feed_time_parse("2024-02-29", 10, &ns), 0);
	ck_assert_uint_eq(ns, 1709164800000000000ull);
	static const char *const bad[] = {
		"",
		"2023-02-29",
		"2024-13-01",
		"1969-12-31T23:59:59Z",
		"2024-01-01T24:00:00Z",
		"2024-01-01T00:00:00",
		"2024-01-01T00:00:00.Z",
		"2024-01-01T00:00:00.1234567890Z",
		"2024-01-01T00:00:00+01:00",
		"2024-01-01 00:00:00Z",
		"2600-01-01",
		"+024-01-01",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(mfs_feed_time_parse(bad[i], strlen(bad[i]), &ns) == -EINVAL,
			      "accepted '%s'", bad[i]);
	for (uint64_t x = 1; x < UINT64_MAX / 3; x = x * 3 + 7) {
		if (x / 1000000000u > 18446744073ull - 1)
			break;
		mfs_feed_time_format(x, t);
		ck_assert_int_eq(mfs_feed_time_parse(t, strlen(t), &ns), 0);
		ck_assert_uint_eq(ns, x);
	}
}
END_TEST

START_TEST(refusals)
{
	static const char *const bad_text[] = {
		"",
		"\n",
		"1",
		"1 2025-12-02T01:35:00Z create 7",
		"x 2025-12-02T01:35:00Z create 7 /a",
		"01 2025-12-02T01:35:00Z create 7 /a",
		"1 yesterday create 7 /a",
		"1 2025-12-02T01:35:00Z Create 7 /a",
		"1 2025-12-02T01:35:00Z create 7 /a ",
		"1 2025-12-02T01:35:00Z create 7  /a",
		"1 2025-12-02T01:35:00Z create 7 /a\\",
		"1 2025-12-02T01:35:00Z create 7 /a\\40",
		"1 2025-12-02T01:35:00Z create 7 /a\\400",
		"1 2025-12-02T01:35:00Z create 7 /a\\x41",
		"1 2025-12-02T01:35:00Z create 7 /a\tb",
		"1 2025-12-02T01:35:00Z create 18446744073709551616 /a",
		"1 2025-12-02T01:35:00Z create 7 /a uid=4294967296",
		"1 2025-12-02T01:35:00Z create 7 /a uid=1 uid=1",
		"1 2025-12-02T01:35:00Z create 7 /a /b",
		"1 2025-12-02T01:35:00Z create 7 /a =1",
		"1 2025-12-02T01:35:00Z create 7 /a Uid=1",
		"1 2025-12-02T01:35:00Z create 7 /a mode=644",
		"1 2025-12-02T01:35:00Z create 7 /a type=pipe",
		"1 2025-12-02T01:35:00Z rename 7 /a",
		"1 2025-12-02T01:35:00Z setattr 7 /a attr=mode,",
		"1 2025-12-02T01:35:00Z setattr 7 /a attr=mode,mode",
		"1 2025-12-02T01:35:00Z setattr 7 /a attr=0x1",
		"1 2025-12-02T01:35:00Z create 7 /a\nb",
	};
	struct mfs_feed_rec rec;
	char err[128];
	for (size_t i = 0; i < sizeof(bad_text) / sizeof(bad_text[0]); i++) {
		err[0] = 0;
		ck_assert_msg(mfs_feed_parse_text(bad_text[i], strlen(bad_text[i]), &rec, err,
						  sizeof(err)) == -EINVAL,
			      "accepted '%s'", bad_text[i]);
		ck_assert(err[0]);
		ck_assert_ptr_null(rec.buf);
	}
	/* unknown keys of a later version are skipped */
	const char *later = "1 2025-12-02T01:35:00Z create 7 /a future=x uid=3";
	ck_assert_int_eq(mfs_feed_parse_text(later, strlen(later), &rec, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.ev.uid, 3);
	mfs_feed_rec_free(&rec);

	static const char *const bad_json[] = {
		"",
		"{}",
		"[]",
		"{\"seq\":1,\"op\":\"create\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"seq\":2}",
		"{\"seq\":-1,\"op\":\"create\",\"time_ns\":1}",
		"{\"seq\":1.5,\"op\":\"create\",\"time_ns\":1}",
		"{\"seq\":01,\"op\":\"create\",\"time_ns\":1}",
		"{\"seq\":1,\"op\":\"make\",\"time_ns\":1}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"path\":\"\\ud800\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"path\":\"\xff\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"path\":\"a\nb\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"path_b64\":\"L3j\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"path_b64\":\"L3l=\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"new_path\":\"/b\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"time\":\"2025-12-02T01:35:00Z\"}",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1} x",
		"{\"seq\":1,\"op\":\"create\",\"time_ns\":1,\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		"[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
	};
	for (size_t i = 0; i < sizeof(bad_json) / sizeof(bad_json[0]); i++) {
		err[0] = 0;
		ck_assert_msg(mfs_feed_parse_json(bad_json[i], strlen(bad_json[i]), &rec, err,
						  sizeof(err)) == -EINVAL,
			      "accepted '%s'", bad_json[i]);
		ck_assert(err[0]);
	}
	const char *ok = " { \"seq\" : 1 , \"op\":\"create\", \"time\":\"2025-12-02\", \"x\":"
			 "{\"y\":[true,null,-1.5e3]}, \"path\":\"\\u00e9\\ud83d\\ude00\" }\n";
	ck_assert_int_eq(mfs_feed_parse_json(ok, strlen(ok), &rec, err, sizeof(err)), 0);
	ck_assert_str_eq(rec.ev.path, "é😀");
	ck_assert_uint_eq(rec.ev.time_ns, 1764633600000000000ull);
	mfs_feed_rec_free(&rec);
}
END_TEST

Suite *mfs_feed_line_suite(void)
{
	Suite *s = suite_create("feed_line");
	TCase *tc = tcase_create("core");
	/* every_byte's 4,000 round trips took over Check's 4 s under ASan at
	 * load 40; meson's 60 s still bounds the whole run */
	tcase_set_timeout(tc, 50);
	tcase_add_test(tc, every_op);
	tcase_add_test(tc, exact_text);
	tcase_add_test(tc, every_byte);
	tcase_add_test(tc, names);
	tcase_add_test(tc, times);
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}
