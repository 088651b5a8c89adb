/* Reading feed lines back: what both decoders share, and the text
 * decoder (see feed_line.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

int mfs_feed_number(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	if (!n || n > 20 || (n > 1 && s[0] == '0'))
		return -EINVAL;
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	if (x > max)
		return -EINVAL;
	*v = x;
	return 0;
}

/* Unescape a text field into w; its length in *outn. "-" is the empty
 * name. */
static int unescape(const char *s, size_t n, char *w, size_t *outn)
{
	size_t o = 0;

	if (n == 1 && s[0] == '-') {
		*outn = 0;
		return 0;
	}
	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c == 0x7f)
			return -EINVAL;
		if (c != '\\') {
			w[o++] = (char)c;
			continue;
		}
		if (n - i < 4 || s[i + 1] < '0' || s[i + 1] > '3' || s[i + 2] < '0' ||
		    s[i + 2] > '7' || s[i + 3] < '0' || s[i + 3] > '7')
			return -EINVAL;
		w[o++] = (char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 | (s[i + 3] - '0'));
		i += 3;
	}
	*outn = o;
	return 0;
}

const char *const mfs_feed_key_names[K_N] = {
	"seq", "time", "time_ns", "op", "ino", "path", "new_path", "parent", "new_parent",
	"type", "mode", "size", "uid", "gid", "pid", "attr", "xattr", "next",
	"path_b64", "new_path_b64", "xattr_b64", "nlink", "off", "len", "flags", "settle",
};

int mfs_feed_key_of(const char *s, size_t n)
{
	for (int k = 0; k < K_N; k++)
		if (strlen(mfs_feed_key_names[k]) == n && !memcmp(mfs_feed_key_names[k], s, n))
			return k;
	return -1;
}

/* A numeric key's value into ev; -EINVAL when out of range. */
int mfs_feed_set_number(struct dbfs_event *ev, int k, uint64_t v)
{
	switch (k) {
	case K_SEQ: ev->seq = v; break;
	case K_TIME_NS: ev->time_ns = v; break;
	case K_INO: ev->ino = v; break;
	case K_PARENT: ev->parent = v; break;
	case K_NEW_PARENT: ev->new_parent = v; break;
	case K_SIZE: ev->size = v; break;
	case K_NEXT: ev->gap_next = v; break;
	case K_OFF: ev->off = v; break;
	case K_LEN: ev->len = v; break;
	case K_SETTLE:
		if (v > UINT32_MAX)
			return -EINVAL;
		ev->attr_mask = (uint32_t)v; /* settled: the quiet period */
		break;
	case K_NLINK:
		if (v > UINT32_MAX)
			return -EINVAL;
		ev->nlink = (uint32_t)v;
		break;
	case K_UID:
	case K_GID:
	case K_PID:
		if (v > UINT32_MAX)
			return -EINVAL;
		*(k == K_UID ? &ev->uid : k == K_GID ? &ev->gid : &ev->pid) = (uint32_t)v;
		break;
	default: return -EINVAL;
	}
	return 0;
}

int mfs_feed_mode_of(const char *s, size_t n, uint32_t *perm)
{
	if (n != 4)
		return -EINVAL;
	*perm = 0;
	for (size_t i = 0; i < 4; i++) {
		if (s[i] < '0' || s[i] > '7')
			return -EINVAL;
		*perm = *perm << 3 | (uint32_t)(s[i] - '0');
	}
	return 0;
}

/* "a,b,c" of attribute names (empty: none) into *mask. */
static int attr_list(const char *s, size_t n, uint32_t *mask,
		     uint32_t (*bit_of)(const char *s, size_t len))
{
	*mask = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && s[j] != ',')
			j++;
		uint32_t bit = bit_of(s + i, j - i);
		if (!bit || (*mask & bit))
			return -EINVAL;
		*mask |= bit;
		if (j < n && j + 1 == n)
			return -EINVAL; /* a trailing comma */
		i = j + 1;
	}
	return 0;
}

void mfs_feed_rec_free(struct mfs_feed_rec *rec)
{
	free(rec->buf);
	memset(rec, 0, sizeof(*rec));
}

int mfs_feed_parse_text(const char *line, size_t len, struct mfs_feed_rec *rec, char *err,
			size_t errlen)
{
	struct dbfs_event *ev = &rec->ev;
	const char *f[6];
	size_t fl[6], nf = 0, pos = 0;
	bool seen[K_N] = {false};
	uint32_t type = 0, perm = 0;

	memset(rec, 0, sizeof(*rec));
	if (len && line[len - 1] == '\n')
		len--;
	if (memchr(line, '\n', len)) {
		snprintf(err, errlen, "a newline inside the line");
		return -EINVAL;
	}
	rec->buf = malloc(3 * (len + 1));
	if (!rec->buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	char *w = rec->buf;
	/* the positional fields: SEQ TIME OP INODE PATH, and NEWPATH by OP */
	while (nf < 6) {
		size_t j = pos;
		while (j < len && line[j] != ' ')
			j++;
		if (j == pos)
			FAIL("field %zu is missing or empty", nf + 1);
		f[nf] = line + pos;
		fl[nf++] = j - pos;
		pos = j < len ? j + 1 : j;
		if (j < len && pos == len)
			FAIL("a space at the end of the line");
		if (nf == 3 && !(ev->op = mfs_feed_op_of(f[2], fl[2])))
			FAIL("unknown operation '%.*s'", (int)(fl[2] < 20 ? fl[2] : 20), f[2]);
		if (nf == 5 && !mfs_feed_op_has_new(ev->op))
			break;
		if (j == len && nf < 5)
			FAIL("only %zu fields", nf);
		if (j == len && nf == 5)
			FAIL("no NEWPATH for %s", mfs_feed_op_name(ev->op));
	}
	if (mfs_feed_number(f[0], fl[0], UINT64_MAX, &ev->seq))
		FAIL("bad SEQ");
	if (mfs_feed_time_parse(f[1], fl[1], &ev->time_ns))
		FAIL("bad TIME");
	if (mfs_feed_number(f[3], fl[3], UINT64_MAX, &ev->ino))
		FAIL("bad INODE");
	if (unescape(f[4], fl[4], w, &ev->path_len))
		FAIL("bad PATH");
	ev->path = w;
	w += ev->path_len;
	*w++ = '\0';
	if (nf == 6) {
		if (unescape(f[5], fl[5], w, &ev->new_path_len))
			FAIL("bad NEWPATH");
		ev->new_path = w;
		w += ev->new_path_len;
		*w++ = '\0';
	}
	while (pos < len) {
		size_t j = pos, eq = 0;
		while (j < len && line[j] != ' ') {
			if (!eq && line[j] == '=')
				eq = j;
			j++;
		}
		if (j == pos || (j < len && j + 1 == len))
			FAIL("an empty field");
		if (!eq || eq == pos)
			FAIL("'%.*s' is not key=value", (int)(j - pos < 30 ? j - pos : 30), line + pos);
		const char *v = line + eq + 1;
		size_t vn = j - eq - 1;
		for (size_t c = pos; c < eq; c++)
			if (!((line[c] >= 'a' && line[c] <= 'z') || (line[c] >= '0' && line[c] <= '9') ||
			      line[c] == '_'))
				FAIL("bad key '%.*s'", (int)(eq - pos < 30 ? eq - pos : 30), line + pos);
		int k = mfs_feed_key_of(line + pos, eq - pos);
		bool known = k == K_PARENT || k == K_NEW_PARENT || k == K_TYPE || k == K_MODE ||
			     k == K_SIZE || k == K_UID || k == K_GID || k == K_PID ||
			     k == K_ATTR || k == K_XATTR || k == K_NEXT || k == K_NLINK ||
			     k == K_OFF || k == K_LEN || k == K_FLAGS || k == K_SETTLE;
		if (known && seen[k])
			FAIL("key %s twice", mfs_feed_key_names[k]);
		if (known)
			seen[k] = true;
		uint64_t x;
		if (!known) {
			/* a key of a later version: skipped */
		} else if (k == K_TYPE) {
			if (mfs_feed_type_of(v, vn, &type))
				FAIL("bad type");
		} else if (k == K_MODE) {
			if (mfs_feed_mode_of(v, vn, &perm))
				FAIL("bad mode");
		} else if (k == K_ATTR) {
			if (attr_list(v, vn, &ev->attr_mask, mfs_feed_attr_of))
				FAIL("bad attr");
		} else if (k == K_FLAGS) {
			if (attr_list(v, vn, &ev->flags, mfs_feed_flag_of) || !ev->flags)
				FAIL("bad flags");
		} else if (k == K_XATTR) {
			if (unescape(v, vn, w, &ev->xattr_len))
				FAIL("bad xattr");
			ev->xattr = w;
			w += ev->xattr_len;
			*w++ = '\0';
		} else if (mfs_feed_number(v, vn, UINT64_MAX, &x) || mfs_feed_set_number(ev, k, x)) {
			FAIL("bad %s", mfs_feed_key_names[k]);
		}
		pos = j + 1;
	}
	ev->mode = type | perm;
	return 0;
bad:
	mfs_feed_rec_free(rec);
	return -EINVAL;
}
