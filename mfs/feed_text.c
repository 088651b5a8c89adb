/* An event as a text line, and the escaping of names (see feed_line.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

void mfs_feed_escape(const char *str, size_t len, struct mfs_buf *out)
{
	const unsigned char *s = (const unsigned char *)str;

	if (len == 1 && s[0] == '-') { /* "-" alone means "no name" */
		mfs_buf_put(out, "\\055", 4);
		return;
	}
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		if (c > 0x20 && c < 0x7f && c != '\\') {
			mfs_buf_putc(out, (char)c);
			i++;
			continue;
		}
		size_t k = c >= 0x80 ? mfs_feed_utf8_seq(s + i, len - i) : 0;
		if (k) {
			mfs_buf_put(out, str + i, k);
			i += k;
			continue;
		}
		char o[5] = {'\\', (char)('0' + (c >> 6)), (char)('0' + ((c >> 3) & 7)),
			     (char)('0' + (c & 7)), 0};
		mfs_buf_put(out, o, 4);
		i++;
	}
}

static void put_path(struct mfs_buf *b, const char *s, size_t n)
{
	if (!s || !n)
		mfs_buf_putc(b, '-');
	else
		mfs_feed_escape(s, n, b);
}

static void put_attr_text(const char *s, size_t n, void *arg)
{
	struct mfs_buf *b = arg;
	if (b->len && b->p[b->len - 1] != '=')
		mfs_buf_putc(b, ',');
	mfs_buf_put(b, s, n);
}

void mfs_feed_line_text(const struct dbfs_event *ev, struct mfs_buf *out)
{
	char t[MFS_FEED_TIME_MAX];
	const char *op = mfs_feed_op_name(ev->op);

	mfs_feed_time_format(ev->time_ns, t);
	mfs_buf_printf(out, "%llu %s %s %llu ", (unsigned long long)ev->seq, t, op ? op : "unknown",
		       (unsigned long long)ev->ino);
	put_path(out, ev->path, ev->path_len);
	if (ev->op == DBFS_EV_GAP) {
		mfs_buf_printf(out, " next=%llu\n", (unsigned long long)ev->gap_next);
		return;
	}
	if (mfs_feed_op_has_new(ev->op)) {
		mfs_buf_putc(out, ' ');
		put_path(out, ev->new_path, ev->new_path_len);
	}
	mfs_buf_printf(out, " parent=%llu", (unsigned long long)ev->parent);
	if (mfs_feed_op_has_new(ev->op))
		mfs_buf_printf(out, " new_parent=%llu", (unsigned long long)ev->new_parent);
	mfs_buf_printf(out, " type=%s mode=%04o size=%llu uid=%u gid=%u pid=%u nlink=%u",
		       mfs_feed_type_name(ev->mode), ev->mode & 07777,
		       (unsigned long long)ev->size, ev->uid, ev->gid, ev->pid, ev->nlink);
	if (mfs_feed_op_has_range(ev->op))
		mfs_buf_printf(out, " off=%llu len=%llu", (unsigned long long)ev->off,
			       (unsigned long long)ev->len);
	if (ev->op == DBFS_EV_SETTLED)
		mfs_buf_printf(out, " settle=%u", ev->attr_mask);
	if (ev->op == DBFS_EV_SETATTR) {
		mfs_buf_put(out, " attr=", 6);
		mfs_feed_attr_names(ev->attr_mask, put_attr_text, out);
	}
	if (ev->op == DBFS_EV_SETXATTR || ev->op == DBFS_EV_REMOVEXATTR) {
		mfs_buf_put(out, " xattr=", 7);
		put_path(out, ev->xattr, ev->xattr_len);
	}
	if (ev->flags & (DBFS_EVF_EXCHANGE | DBFS_EVF_REPLACED)) {
		mfs_buf_put(out, " flags=", 7);
		mfs_feed_flag_names(ev->flags, put_attr_text, out);
	}
	mfs_buf_putc(out, '\n');
}

/* A decimal mfs_feed_number without sign or leading zeros, at most max. */
