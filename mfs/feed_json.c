/* An event as a JSON line (see feed_line.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

const char mfs_feed_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put_b64(struct mfs_buf *b, const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		char q[4] = {mfs_feed_b64[v >> 18], mfs_feed_b64[(v >> 12) & 63],
			     i + 1 < n ? mfs_feed_b64[(v >> 6) & 63] : '=', i + 2 < n ? mfs_feed_b64[v & 63] : '='};
		mfs_buf_put(b, q, 4);
	}
}

/* A JSON string of s; invalid UTF-8 bytes become U+FFFD. */
static void put_json_str(struct mfs_buf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	mfs_buf_putc(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			mfs_buf_put(b, e, 2);
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			mfs_buf_putc(b, (char)c);
			i++;
		} else if (c == '\n') {
			mfs_buf_put(b, "\\n", 2);
			i++;
		} else if (c == '\t') {
			mfs_buf_put(b, "\\t", 2);
			i++;
		} else if (c < 0x80) {
			mfs_buf_printf(b, "\\u%04x", c);
			i++;
		} else if (n - i >= 2 && c == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] < 0xa0) {
			mfs_buf_printf(b, "\\u%04x", s[i + 1]); /* C1 control */
			i += 2;
		} else {
			size_t k = mfs_feed_utf8_seq(s + i, n - i);
			if (k)
				mfs_buf_put(b, str + i, k);
			else
				mfs_buf_put(b, "\xef\xbf\xbd", 3);
			i += k ? k : 1;
		}
	}
	mfs_buf_putc(b, '"');
}

static void put_json_name(struct mfs_buf *b, const char *key, const char *s, size_t n)
{
	mfs_buf_printf(b, ",\"%s\":", key);
	put_json_str(b, s ? s : "", s ? n : 0);
	if (s && !mfs_feed_utf8_valid((const unsigned char *)s, n)) {
		mfs_buf_printf(b, ",\"%s_b64\":\"", key);
		put_b64(b, (const unsigned char *)s, n);
		mfs_buf_putc(b, '"');
	}
}

static void put_attr_json(const char *s, size_t n, void *arg)
{
	struct mfs_buf *b = arg;
	if (b->p[b->len - 1] != '[')
		mfs_buf_putc(b, ',');
	mfs_buf_putc(b, '"');
	mfs_buf_put(b, s, n);
	mfs_buf_putc(b, '"');
}

void mfs_feed_line_json(const struct dbfs_event *ev, struct mfs_buf *out)
{
	char t[MFS_FEED_TIME_MAX];
	const char *op = mfs_feed_op_name(ev->op);

	mfs_feed_time_format(ev->time_ns, t);
	mfs_buf_printf(out, "{\"seq\":%llu,\"time\":\"%s\",\"time_ns\":%llu,\"op\":\"%s\"",
		       (unsigned long long)ev->seq, t, (unsigned long long)ev->time_ns,
		       op ? op : "unknown");
	if (ev->op == DBFS_EV_GAP) {
		mfs_buf_printf(out, ",\"next\":%llu}\n", (unsigned long long)ev->gap_next);
		return;
	}
	mfs_buf_printf(out, ",\"ino\":%llu", (unsigned long long)ev->ino);
	put_json_name(out, "path", ev->path, ev->path_len);
	if (mfs_feed_op_has_new(ev->op))
		put_json_name(out, "new_path", ev->new_path, ev->new_path_len);
	mfs_buf_printf(out, ",\"parent\":%llu", (unsigned long long)ev->parent);
	if (mfs_feed_op_has_new(ev->op))
		mfs_buf_printf(out, ",\"new_parent\":%llu", (unsigned long long)ev->new_parent);
	mfs_buf_printf(out,
		       ",\"type\":\"%s\",\"mode\":\"%04o\",\"size\":%llu,\"uid\":%u,\"gid\":%u,"
		       "\"pid\":%u,\"nlink\":%u",
		       mfs_feed_type_name(ev->mode), ev->mode & 07777,
		       (unsigned long long)ev->size, ev->uid, ev->gid, ev->pid, ev->nlink);
	if (mfs_feed_op_has_range(ev->op))
		mfs_buf_printf(out, ",\"off\":%llu,\"len\":%llu", (unsigned long long)ev->off,
			       (unsigned long long)ev->len);
	if (ev->op == DBFS_EV_SETTLED)
		mfs_buf_printf(out, ",\"settle\":%u", ev->attr_mask);
	if (ev->op == DBFS_EV_SETATTR) {
		mfs_buf_put(out, ",\"attr\":[", 9);
		mfs_feed_attr_names(ev->attr_mask, put_attr_json, out);
		mfs_buf_putc(out, ']');
	}
	if (ev->op == DBFS_EV_SETXATTR || ev->op == DBFS_EV_REMOVEXATTR)
		put_json_name(out, "xattr", ev->xattr, ev->xattr_len);
	if (ev->flags & (DBFS_EVF_EXCHANGE | DBFS_EVF_REPLACED)) {
		mfs_buf_put(out, ",\"flags\":[", 10);
		mfs_feed_flag_names(ev->flags, put_attr_json, out);
		mfs_buf_putc(out, ']');
	}
	mfs_buf_put(out, "}\n", 2);
}

/* A cursor over a JSON line. */
