/*
 * Fuzz target "feedline": the decoders of change-feed lines (mfs/feed_decode*.c),
 * text and JSON, as mfsctl watch and users' scripts rely on them.
 *
 * Input: one byte choosing the format (even: text, odd: JSON), then the line.
 *
 * Checks beyond "no crash":
 *   - a refusal is -EINVAL with a reason (or -ENOMEM) and leaves the record
 *     empty;
 *   - an accepted line re-encodes (in both formats) to a line that decodes
 *     to the same event, and encoding that event again gives the very same
 *     bytes (the encoders are canonical, the decoders lossless);
 *   - a text line never holds a tab, a newline but the last, or a control
 *     byte.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mfs/feed_line.h"

static bool same_name(const char *a, size_t an, const char *b, size_t bn)
{
	return an == bn && (!an || !memcmp(a, b, an));
}

static bool same(const struct dbfs_event *a, const struct dbfs_event *b)
{
	if (a->seq != b->seq || a->time_ns != b->time_ns || a->op != b->op)
		return false;
	if (a->op == DBFS_EV_GAP)
		return a->gap_next == b->gap_next;
	return a->ino == b->ino && a->parent == b->parent &&
	       (!mfs_feed_op_has_new(a->op) || a->new_parent == b->new_parent) &&
	       a->uid == b->uid && a->gid == b->gid && a->pid == b->pid && a->size == b->size &&
	       a->mode == b->mode && (a->op != DBFS_EV_SETATTR || a->attr_mask == b->attr_mask) &&
	       a->nlink == b->nlink && a->flags == b->flags &&
	       ((a->op != DBFS_EV_WRITE && a->op != DBFS_EV_FALLOCATE && a->op != DBFS_EV_PUNCH) ||
		(a->off == b->off && a->len == b->len)) &&
	       same_name(a->path, a->path_len, b->path, b->path_len) &&
	       (!mfs_feed_op_has_new(a->op) ||
		same_name(a->new_path, a->new_path_len, b->new_path, b->new_path_len)) &&
	       ((a->op != DBFS_EV_SETXATTR && a->op != DBFS_EV_REMOVEXATTR) ||
		same_name(a->xattr, a->xattr_len, b->xattr, b->xattr_len));
}

typedef int parse_fn(const char *, size_t, struct mfs_feed_rec *, char *, size_t);
typedef void encode_fn(const struct dbfs_event *, struct mfs_buf *);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool json = data[0] & 1;
	const char *line = (const char *)data + 1;
	size_t len = size - 1;
	struct mfs_feed_rec rec;
	char err[256] = "";
	int rc = (json ? mfs_feed_parse_json : mfs_feed_parse_text)(line, len, &rec, err,
								  sizeof(err));
	if (rc) {
		if (rc != -EINVAL && rc != -ENOMEM)
			fz_fail("refused with %d", rc);
		if (!err[0] || !memchr(err, '\0', sizeof(err)))
			fz_fail("refused without a reason");
		if (rec.buf)
			fz_fail("a refusal left the record allocated");
		return 0;
	}
	for (int f = 0; f < 2; f++) {
		encode_fn *enc = f ? mfs_feed_line_json : mfs_feed_line_text;
		parse_fn *dec = f ? mfs_feed_parse_json : mfs_feed_parse_text;
		struct mfs_buf a = {0}, b = {0};
		struct mfs_feed_rec r2;

		enc(&rec.ev, &a);
		if (a.oom)
			abort();
		if (!a.len || a.p[a.len - 1] != '\n' || memchr(a.p, '\n', a.len - 1))
			fz_fail("encoded line is not one line");
		for (size_t i = 0; !f && i + 1 < a.len; i++)
			if ((unsigned char)a.p[i] < 0x20 || a.p[i] == 0x7f)
				fz_fail("text line holds byte %#x", (unsigned char)a.p[i]);
		if (dec(a.p, a.len, &r2, err, sizeof(err)))
			fz_fail("own %s line refused: %s: %s", f ? "JSON" : "text", err, a.p);
		if (!same(&rec.ev, &r2.ev))
			fz_fail("%s line decodes to another event: %s", f ? "JSON" : "text", a.p);
		enc(&r2.ev, &b);
		if (a.len != b.len || memcmp(a.p, b.p, a.len))
			fz_fail("encoding is not canonical: %s", a.p);
		mfs_feed_rec_free(&r2);
		mfs_buf_free(&a);
		mfs_buf_free(&b);
	}
	mfs_feed_rec_free(&rec);
	return 0;
}
