/* Change-feed events as text and JSON lines, and back (see feed_line.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line.h"

/* ---- names of operations, types and setattr bits ---- */

/* The names of the formats, by enum dbfs_ev_op (the same as
 * dbfs_ev_op_name; the unit test holds them equal). */
static const char *const op_names[] = {
	[DBFS_EV_CREATE] = "create",     [DBFS_EV_MKDIR] = "mkdir",
	[DBFS_EV_MKNOD] = "mknod",       [DBFS_EV_SYMLINK] = "symlink",
	[DBFS_EV_LINK] = "link",         [DBFS_EV_UNLINK] = "unlink",
	[DBFS_EV_RMDIR] = "rmdir",       [DBFS_EV_RENAME] = "rename",
	[DBFS_EV_WRITE] = "write",       [DBFS_EV_TRUNCATE] = "truncate",
	[DBFS_EV_FALLOCATE] = "fallocate", [DBFS_EV_PUNCH] = "punch",
	[DBFS_EV_SETATTR] = "setattr",   [DBFS_EV_SETXATTR] = "setxattr",
	[DBFS_EV_REMOVEXATTR] = "removexattr", [DBFS_EV_EXPIRE] = "expire",
	[DBFS_EV_GAP] = "gap",
};

const char *mfs_feed_op_name(unsigned op)
{
	return op < sizeof(op_names) / sizeof(op_names[0]) ? op_names[op] : NULL;
}

unsigned mfs_feed_op_of(const char *name, size_t len)
{
	for (unsigned op = DBFS_EV_CREATE; op <= DBFS_EV_GAP; op++) {
		const char *n = mfs_feed_op_name(op);
		if (n && strlen(n) == len && !memcmp(n, name, len))
			return op;
	}
	return 0;
}

bool mfs_feed_op_has_new(unsigned op)
{
	return op == DBFS_EV_RENAME || op == DBFS_EV_LINK;
}

static const struct {
	uint32_t fmt;
	const char *name;
} types[] = {
	{S_IFREG, "file"}, {S_IFDIR, "dir"},     {S_IFLNK, "symlink"}, {S_IFIFO, "fifo"},
	{S_IFSOCK, "socket"}, {S_IFCHR, "char"}, {S_IFBLK, "block"},   {0, "unknown"},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

const char *mfs_feed_type_name(uint32_t mode)
{
	for (size_t i = 0; i < NTYPES; i++)
		if ((mode & S_IFMT) == types[i].fmt)
			return types[i].name;
	return "unknown";
}

int mfs_feed_type_of(const char *name, size_t len, uint32_t *mode)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (strlen(types[i].name) == len && !memcmp(types[i].name, name, len)) {
			*mode = types[i].fmt;
			return 0;
		}
	return -1;
}

/* FUSE_SET_ATTR_* bits (fuse_lowlevel.h), by the names the lines use. */
static const struct {
	uint32_t bit;
	const char *name;
} attrs[] = {
	{1u << 0, "mode"},  {1u << 1, "uid"},       {1u << 2, "gid"},       {1u << 3, "size"},
	{1u << 4, "atime"}, {1u << 5, "mtime"},     {1u << 7, "atime_now"}, {1u << 8, "mtime_now"},
	{1u << 10, "ctime"}, {1u << 11, "kill_suidgid"},
};
#define NATTRS (sizeof(attrs) / sizeof(attrs[0]))

/* dbfs_event.flags by name. */
static const struct {
	uint32_t bit;
	const char *name;
} evflags[] = {{DBFS_EVF_EXCHANGE, "exchange"}, {DBFS_EVF_REPLACED, "replaced"}};

static uint32_t flag_of(const char *s, size_t len)
{
	for (size_t i = 0; i < 2; i++)
		if (strlen(evflags[i].name) == len && !memcmp(evflags[i].name, s, len))
			return evflags[i].bit;
	return 0;
}

static void flag_names(uint32_t mask, void (*put)(const char *s, size_t n, void *arg), void *arg)
{
	for (size_t i = 0; i < 2; i++)
		if (mask & evflags[i].bit)
			put(evflags[i].name, strlen(evflags[i].name), arg);
}

/* Does the operation carry a range (off, len)? */
static bool op_has_range(unsigned op)
{
	return op == DBFS_EV_WRITE || op == DBFS_EV_FALLOCATE || op == DBFS_EV_PUNCH;
}

/* The bit of an attribute name, also "0xHEX" for bits without a name; 0
 * when it is none. */
static uint32_t attr_of(const char *s, size_t len)
{
	for (size_t i = 0; i < NATTRS; i++)
		if (strlen(attrs[i].name) == len && !memcmp(attrs[i].name, s, len))
			return attrs[i].bit;
	if (len < 3 || len > 10 || s[0] != '0' || s[1] != 'x')
		return 0;
	uint32_t v = 0;
	for (size_t i = 2; i < len; i++) {
		char c = s[i];
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
						    : 16;
		if (d == 16)
			return 0;
		v = v << 4 | d;
	}
	for (size_t i = 0; i < NATTRS; i++)
		if (v & attrs[i].bit)
			return 0; /* named bits go by their name */
	return v;
}

/* The names of mask, each passed to put (with its length). */
static void attr_names(uint32_t mask, void (*put)(const char *s, size_t n, void *arg), void *arg)
{
	char hex[16];
	for (size_t i = 0; i < NATTRS; i++)
		if (mask & attrs[i].bit)
			put(attrs[i].name, strlen(attrs[i].name), arg);
	uint32_t rest = mask;
	for (size_t i = 0; i < NATTRS; i++)
		rest &= ~attrs[i].bit;
	if (rest) {
		int n = snprintf(hex, sizeof(hex), "0x%x", rest);
		put(hex, (size_t)n, arg);
	}
}

/* ---- time ---- */

void mfs_feed_time_format(uint64_t ns, char out[MFS_FEED_TIME_MAX])
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(out, MFS_FEED_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%09uZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(ns % 1000000000u));
}

static int digits(const char *s, size_t n, unsigned *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (unsigned)(s[i] - '0');
	}
	return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's
 * days_from_civil). */
static int64_t days_of(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

int mfs_feed_time_parse(const char *s, size_t len, uint64_t *ns)
{
	unsigned y, mo, d, h = 0, mi = 0, sec = 0, frac = 0;
	static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (len < 10 || s[4] != '-' || s[7] != '-' || digits(s, 4, &y) || digits(s + 5, 2, &mo) ||
	    digits(s + 8, 2, &d))
		return -EINVAL;
	if (len > 10) {
		if (len < 20 || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
		    digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) || digits(s + 17, 2, &sec))
			return -EINVAL;
		size_t i = 19;
		if (s[i] == '.') {
			size_t k = ++i;
			while (i < len && i - k < 9 && s[i] >= '0' && s[i] <= '9')
				i++;
			if (i == k || digits(s + k, i - k, &frac))
				return -EINVAL;
			for (size_t z = i - k; z < 9; z++)
				frac *= 10;
		}
		if (i + 1 != len || s[i] != 'Z')
			return -EINVAL;
	}
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 59 || y > 2554)
		return -EINVAL;
	uint64_t t = (uint64_t)days_of(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	if (t > UINT64_MAX / 1000000000u - 1)
		return -EINVAL;
	*ns = t * 1000000000u + frac;
	return 0;
}

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence of a code point >= U+00A0 at s (n
 * bytes available), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0], cp;
	size_t len;

	if (c < 0xc2)
		return 0;
	if (c < 0xe0) {
		len = 2;
		cp = c & 0x1f;
	} else if (c < 0xf0) {
		len = 3;
		cp = c & 0x0f;
	} else if (c < 0xf5) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
		return 0;
	return len;
}

/* Is s valid UTF-8 (any code point but surrogates)? */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		size_t k = utf8_seq(s + i, n - i);
		if (!k && n - i >= 2 && s[i] == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] < 0xa0)
			k = 2; /* U+0080..U+009F: valid, only not printable */
		if (!k)
			return false;
		i += k;
	}
	return true;
}

/* ---- text ---- */

static void put_byte(struct mfs_buf *b, char c)
{
	if (!mfs_buf_reserve(b, 1))
		return;
	b->p[b->len++] = c;
	b->p[b->len] = '\0';
}

static void put_mem(struct mfs_buf *b, const char *s, size_t n)
{
	if (!n || !mfs_buf_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void mfs_feed_escape(const char *str, size_t len, struct mfs_buf *out)
{
	const unsigned char *s = (const unsigned char *)str;

	if (len == 1 && s[0] == '-') { /* "-" alone means "no name" */
		put_mem(out, "\\055", 4);
		return;
	}
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		if (c > 0x20 && c < 0x7f && c != '\\') {
			put_byte(out, (char)c);
			i++;
			continue;
		}
		size_t k = c >= 0x80 ? utf8_seq(s + i, len - i) : 0;
		if (k) {
			put_mem(out, str + i, k);
			i += k;
			continue;
		}
		char o[5] = {'\\', (char)('0' + (c >> 6)), (char)('0' + ((c >> 3) & 7)),
			     (char)('0' + (c & 7)), 0};
		put_mem(out, o, 4);
		i++;
	}
}

static void put_path(struct mfs_buf *b, const char *s, size_t n)
{
	if (!s || !n)
		put_byte(b, '-');
	else
		mfs_feed_escape(s, n, b);
}

static void put_attr_text(const char *s, size_t n, void *arg)
{
	struct mfs_buf *b = arg;
	if (b->len && b->p[b->len - 1] != '=')
		put_byte(b, ',');
	put_mem(b, s, n);
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
		put_byte(out, ' ');
		put_path(out, ev->new_path, ev->new_path_len);
	}
	mfs_buf_printf(out, " parent=%llu", (unsigned long long)ev->parent);
	if (mfs_feed_op_has_new(ev->op))
		mfs_buf_printf(out, " new_parent=%llu", (unsigned long long)ev->new_parent);
	mfs_buf_printf(out, " type=%s mode=%04o size=%llu uid=%u gid=%u pid=%u nlink=%u",
		       mfs_feed_type_name(ev->mode), ev->mode & 07777,
		       (unsigned long long)ev->size, ev->uid, ev->gid, ev->pid, ev->nlink);
	if (op_has_range(ev->op))
		mfs_buf_printf(out, " off=%llu len=%llu", (unsigned long long)ev->off,
			       (unsigned long long)ev->len);
	if (ev->op == DBFS_EV_SETATTR) {
		put_mem(out, " attr=", 6);
		attr_names(ev->attr_mask, put_attr_text, out);
	}
	if (ev->op == DBFS_EV_SETXATTR || ev->op == DBFS_EV_REMOVEXATTR) {
		put_mem(out, " xattr=", 7);
		put_path(out, ev->xattr, ev->xattr_len);
	}
	if (ev->flags & (DBFS_EVF_EXCHANGE | DBFS_EVF_REPLACED)) {
		put_mem(out, " flags=", 7);
		flag_names(ev->flags, put_attr_text, out);
	}
	put_byte(out, '\n');
}

/* A decimal number without sign or leading zeros, at most max. */
static int number(const char *s, size_t n, uint64_t max, uint64_t *v)
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

/* The keys of both formats: what they set, and which ones a line had. */
enum {
	K_SEQ, K_TIME, K_TIME_NS, K_OP, K_INO, K_PATH, K_NEW_PATH, K_PARENT, K_NEW_PARENT,
	K_TYPE, K_MODE, K_SIZE, K_UID, K_GID, K_PID, K_ATTR, K_XATTR, K_NEXT,
	K_PATH_B64, K_NEW_PATH_B64, K_XATTR_B64, K_NLINK, K_OFF, K_LEN, K_FLAGS, K_N
};
static const char *const key_names[K_N] = {
	"seq", "time", "time_ns", "op", "ino", "path", "new_path", "parent", "new_parent",
	"type", "mode", "size", "uid", "gid", "pid", "attr", "xattr", "next",
	"path_b64", "new_path_b64", "xattr_b64", "nlink", "off", "len", "flags",
};

static int key_of(const char *s, size_t n)
{
	for (int k = 0; k < K_N; k++)
		if (strlen(key_names[k]) == n && !memcmp(key_names[k], s, n))
			return k;
	return -1;
}

/* A numeric key's value into ev; -EINVAL when out of range. */
static int set_number(struct dbfs_event *ev, int k, uint64_t v)
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

static int mode_of(const char *s, size_t n, uint32_t *perm)
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

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto bad; } while (0)

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
	if (number(f[0], fl[0], UINT64_MAX, &ev->seq))
		FAIL("bad SEQ");
	if (mfs_feed_time_parse(f[1], fl[1], &ev->time_ns))
		FAIL("bad TIME");
	if (number(f[3], fl[3], UINT64_MAX, &ev->ino))
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
		int k = key_of(line + pos, eq - pos);
		bool known = k == K_PARENT || k == K_NEW_PARENT || k == K_TYPE || k == K_MODE ||
			     k == K_SIZE || k == K_UID || k == K_GID || k == K_PID ||
			     k == K_ATTR || k == K_XATTR || k == K_NEXT || k == K_NLINK ||
			     k == K_OFF || k == K_LEN || k == K_FLAGS;
		if (known && seen[k])
			FAIL("key %s twice", key_names[k]);
		if (known)
			seen[k] = true;
		uint64_t x;
		if (!known) {
			/* a key of a later version: skipped */
		} else if (k == K_TYPE) {
			if (mfs_feed_type_of(v, vn, &type))
				FAIL("bad type");
		} else if (k == K_MODE) {
			if (mode_of(v, vn, &perm))
				FAIL("bad mode");
		} else if (k == K_ATTR) {
			if (attr_list(v, vn, &ev->attr_mask, attr_of))
				FAIL("bad attr");
		} else if (k == K_FLAGS) {
			if (attr_list(v, vn, &ev->flags, flag_of) || !ev->flags)
				FAIL("bad flags");
		} else if (k == K_XATTR) {
			if (unescape(v, vn, w, &ev->xattr_len))
				FAIL("bad xattr");
			ev->xattr = w;
			w += ev->xattr_len;
			*w++ = '\0';
		} else if (number(v, vn, UINT64_MAX, &x) || set_number(ev, k, x)) {
			FAIL("bad %s", key_names[k]);
		}
		pos = j + 1;
	}
	ev->mode = type | perm;
	return 0;
bad:
	mfs_feed_rec_free(rec);
	return -EINVAL;
}

/* ---- JSON ---- */

static const char b64c[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put_b64(struct mfs_buf *b, const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		char q[4] = {b64c[v >> 18], b64c[(v >> 12) & 63],
			     i + 1 < n ? b64c[(v >> 6) & 63] : '=', i + 2 < n ? b64c[v & 63] : '='};
		put_mem(b, q, 4);
	}
}

/* A JSON string of s; invalid UTF-8 bytes become U+FFFD. */
static void put_json_str(struct mfs_buf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	put_byte(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			put_mem(b, e, 2);
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			put_byte(b, (char)c);
			i++;
		} else if (c == '\n') {
			put_mem(b, "\\n", 2);
			i++;
		} else if (c == '\t') {
			put_mem(b, "\\t", 2);
			i++;
		} else if (c < 0x80) {
			mfs_buf_printf(b, "\\u%04x", c);
			i++;
		} else if (n - i >= 2 && c == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] < 0xa0) {
			mfs_buf_printf(b, "\\u%04x", s[i + 1]); /* C1 control */
			i += 2;
		} else {
			size_t k = utf8_seq(s + i, n - i);
			if (k)
				put_mem(b, str + i, k);
			else
				put_mem(b, "\xef\xbf\xbd", 3);
			i += k ? k : 1;
		}
	}
	put_byte(b, '"');
}

static void put_json_name(struct mfs_buf *b, const char *key, const char *s, size_t n)
{
	mfs_buf_printf(b, ",\"%s\":", key);
	put_json_str(b, s ? s : "", s ? n : 0);
	if (s && !utf8_valid((const unsigned char *)s, n)) {
		mfs_buf_printf(b, ",\"%s_b64\":\"", key);
		put_b64(b, (const unsigned char *)s, n);
		put_byte(b, '"');
	}
}

static void put_attr_json(const char *s, size_t n, void *arg)
{
	struct mfs_buf *b = arg;
	if (b->p[b->len - 1] != '[')
		put_byte(b, ',');
	put_byte(b, '"');
	put_mem(b, s, n);
	put_byte(b, '"');
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
	if (op_has_range(ev->op))
		mfs_buf_printf(out, ",\"off\":%llu,\"len\":%llu", (unsigned long long)ev->off,
			       (unsigned long long)ev->len);
	if (ev->op == DBFS_EV_SETATTR) {
		put_mem(out, ",\"attr\":[", 9);
		attr_names(ev->attr_mask, put_attr_json, out);
		put_byte(out, ']');
	}
	if (ev->op == DBFS_EV_SETXATTR || ev->op == DBFS_EV_REMOVEXATTR)
		put_json_name(out, "xattr", ev->xattr, ev->xattr_len);
	if (ev->flags & (DBFS_EVF_EXCHANGE | DBFS_EVF_REPLACED)) {
		put_mem(out, ",\"flags\":[", 10);
		flag_names(ev->flags, put_attr_json, out);
		put_byte(out, ']');
	}
	put_mem(out, "}\n", 2);
}

/* A cursor over a JSON line. */
struct js {
	const char *s;
	size_t n, i;
};

static void ws(struct js *j)
{
	while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\r' ||
			       j->s[j->i] == '\n'))
		j->i++;
}

static bool eat(struct js *j, char c)
{
	ws(j);
	if (j->i < j->n && j->s[j->i] == c) {
		j->i++;
		return true;
	}
	return false;
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
						    : 16;
		if (d == 16)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* A JSON string at the cursor, decoded into w (NULL: only skipped); its
 * length in *outn. */
static int jstring(struct js *j, char *w, size_t *outn)
{
	size_t o = 0;

	if (!eat(j, '"'))
		return -EINVAL;
	size_t start = j->i;
	while (j->i < j->n && j->s[j->i] != '"') {
		unsigned char c = (unsigned char)j->s[j->i];
		if (c < 0x20)
			return -EINVAL;
		if (c != '\\') {
			size_t k = c < 0x80 ? 1 : 0;
			if (!k) {
				/* a raw multi-byte sequence must be valid UTF-8 */
				const unsigned char *p = (const unsigned char *)j->s + j->i;
				size_t left = j->n - j->i;
				k = utf8_seq(p, left);
				if (!k && left >= 2 && p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)
					k = 2;
				if (!k)
					return -EINVAL;
			}
			if (w)
				memcpy(w + o, j->s + j->i, k);
			o += k;
			j->i += k;
			continue;
		}
		if (++j->i >= j->n)
			return -EINVAL;
		char e = j->s[j->i++];
		unsigned cp;
		const char *simple = strchr("\"\\/bfnrt", e);
		if (e && simple) {
			static const char to[] = "\"\\/\b\f\n\r\t";
			if (w)
				w[o] = to[simple - "\"\\/bfnrt"];
			o++;
			continue;
		}
		if (e != 'u' || j->n - j->i < 4 || hex4(j->s + j->i, &cp))
			return -EINVAL;
		j->i += 4;
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return -EINVAL;
		if (cp >= 0xd800 && cp <= 0xdbff) {
			unsigned lo;
			if (j->n - j->i < 6 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u' ||
			    hex4(j->s + j->i + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
				return -EINVAL;
			j->i += 6;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		char u[4];
		size_t un;
		if (cp < 0x80) {
			u[0] = (char)cp;
			un = 1;
		} else if (cp < 0x800) {
			u[0] = (char)(0xc0 | cp >> 6);
			u[1] = (char)(0x80 | (cp & 63));
			un = 2;
		} else if (cp < 0x10000) {
			u[0] = (char)(0xe0 | cp >> 12);
			u[1] = (char)(0x80 | ((cp >> 6) & 63));
			u[2] = (char)(0x80 | (cp & 63));
			un = 3;
		} else {
			u[0] = (char)(0xf0 | cp >> 18);
			u[1] = (char)(0x80 | ((cp >> 12) & 63));
			u[2] = (char)(0x80 | ((cp >> 6) & 63));
			u[3] = (char)(0x80 | (cp & 63));
			un = 4;
		}
		if (w)
			memcpy(w + o, u, un);
		o += un;
	}
	(void)start;
	if (j->i >= j->n)
		return -EINVAL;
	j->i++;
	if (outn)
		*outn = o;
	return 0;
}

static int jnumber(struct js *j, uint64_t *v)
{
	ws(j);
	size_t k = j->i;
	while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
		k++;
	int rc = number(j->s + j->i, k - j->i, UINT64_MAX, v);
	j->i = k;
	return rc;
}

/* Skip any JSON value (for keys of a later version), depth-bounded. */
static int jskip(struct js *j, int depth)
{
	ws(j);
	if (depth > 32 || j->i >= j->n)
		return -EINVAL;
	char c = j->s[j->i];
	if (c == '"')
		return jstring(j, NULL, NULL);
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		j->i++;
		if (eat(j, close))
			return 0;
		do {
			if (c == '{' && (jstring(j, NULL, NULL) || !eat(j, ':')))
				return -EINVAL;
			if (jskip(j, depth + 1))
				return -EINVAL;
		} while (eat(j, ','));
		return eat(j, close) ? 0 : -EINVAL;
	}
	static const char *const words[] = {"true", "false", "null"};
	for (int w = 0; w < 3; w++) {
		size_t wl = strlen(words[w]);
		if (j->n - j->i >= wl && !memcmp(j->s + j->i, words[w], wl)) {
			j->i += wl;
			return 0;
		}
	}
	/* a number: -? int frac? exp? */
	size_t k = j->i;
	if (k < j->n && j->s[k] == '-')
		k++;
	size_t d = k;
	while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
		k++;
	if (k == d || (k - d > 1 && j->s[d] == '0'))
		return -EINVAL;
	if (k < j->n && j->s[k] == '.') {
		size_t f = ++k;
		while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
			k++;
		if (k == f)
			return -EINVAL;
	}
	if (k < j->n && (j->s[k] == 'e' || j->s[k] == 'E')) {
		k++;
		if (k < j->n && (j->s[k] == '+' || j->s[k] == '-'))
			k++;
		size_t e = k;
		while (k < j->n && j->s[k] >= '0' && j->s[k] <= '9')
			k++;
		if (k == e)
			return -EINVAL;
	}
	j->i = k;
	return 0;
}

/* Strict padded base64 of s (n bytes) into w; the length in *outn. */
static int unb64(const char *s, size_t n, char *w, size_t *outn)
{
	size_t o = 0;
	if (n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		unsigned v = 0;
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			const char *p = s[i + k] ? strchr(b64c, s[i + k]) : NULL;
			if (s[i + k] == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
				pad++;
				v <<= 6;
				continue;
			}
			if (!p || pad)
				return -EINVAL;
			v = v << 6 | (unsigned)(p - b64c);
		}
		if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
			return -EINVAL; /* bits past the end must be zero */
		w[o++] = (char)(v >> 16);
		if (pad < 2)
			w[o++] = (char)(v >> 8);
		if (pad < 1)
			w[o++] = (char)v;
	}
	*outn = o;
	return 0;
}

int mfs_feed_parse_json(const char *line, size_t len, struct mfs_feed_rec *rec, char *err,
			size_t errlen)
{
	struct dbfs_event *ev = &rec->ev;
	struct js j = {line, len, 0};
	bool seen[K_N] = {false};
	uint32_t type = 0, perm = 0;
	uint64_t time_text = 0;
	/* each name field's bytes: plain and base64 */
	char *name[K_N] = {NULL};
	size_t name_len[K_N] = {0};

	memset(rec, 0, sizeof(*rec));
	rec->buf = malloc(6 * (len + 1));
	if (!rec->buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	char *w = rec->buf;
	if (!eat(&j, '{'))
		FAIL("not a JSON object");
	if (!eat(&j, '}')) {
		do {
			char key[32];
			size_t kn;
			struct js save = j;
			ws(&j);
			/* keys we know are short: decode into key[] only when short */
			if (jstring(&j, NULL, &kn))
				FAIL("bad key");
			int k = -1;
			if (kn < sizeof(key)) {
				j = save;
				jstring(&j, key, &kn);
				k = key_of(key, kn);
			}
			if (!eat(&j, ':'))
				FAIL("no ':' after a key");
			if (k >= 0 && seen[k])
				FAIL("key %s twice", key_names[k]);
			if (k >= 0)
				seen[k] = true;
			ws(&j);
			uint64_t x;
			size_t sn;
			switch (k) {
			case -1:
				if (jskip(&j, 0))
					FAIL("bad value");
				break;
			case K_OP:
			case K_TYPE:
			case K_MODE:
			case K_TIME: {
				char v[48];
				struct js s2 = j;
				if (jstring(&j, NULL, &sn) || sn >= sizeof(v))
					FAIL("bad %s", key_names[k]);
				j = s2;
				jstring(&j, v, &sn);
				if (k == K_OP && !(ev->op = mfs_feed_op_of(v, sn)))
					FAIL("unknown operation");
				if (k == K_TYPE && mfs_feed_type_of(v, sn, &type))
					FAIL("bad type");
				if (k == K_MODE && mode_of(v, sn, &perm))
					FAIL("bad mode");
				if (k == K_TIME && mfs_feed_time_parse(v, sn, &time_text))
					FAIL("bad time");
				break;
			}
			case K_ATTR:
			case K_FLAGS: {
				uint32_t *mask = k == K_ATTR ? &ev->attr_mask : &ev->flags;
				if (!eat(&j, '['))
					FAIL("%s is not an array", key_names[k]);
				if (!eat(&j, ']')) {
					do {
						char v[48];
						struct js s2 = j;
						ws(&j);
						if (jstring(&j, NULL, &sn) || sn >= sizeof(v))
							FAIL("bad %s", key_names[k]);
						j = s2;
						ws(&j);
						jstring(&j, v, &sn);
						uint32_t bit = k == K_ATTR ? attr_of(v, sn)
									   : flag_of(v, sn);
						if (!bit || (*mask & bit))
							FAIL("bad %s", key_names[k]);
						*mask |= bit;
					} while (eat(&j, ','));
					if (!eat(&j, ']'))
						FAIL("bad %s", key_names[k]);
				}
				break;
			}
			case K_PATH:
			case K_NEW_PATH:
			case K_XATTR:
				name[k] = w;
				if (jstring(&j, w, &name_len[k]))
					FAIL("bad %s", key_names[k]);
				w += name_len[k];
				*w++ = '\0';
				break;
			case K_PATH_B64:
			case K_NEW_PATH_B64:
			case K_XATTR_B64: {
				char *raw = w + len + 1; /* scratch after this name's room */
				if (jstring(&j, raw, &sn) || unb64(raw, sn, w, &name_len[k]))
					FAIL("bad %s", key_names[k]);
				name[k] = w;
				w += name_len[k];
				*w++ = '\0';
				w += len + 1;
				break;
			}
			default:
				if (jnumber(&j, &x) || set_number(ev, k, x))
					FAIL("bad %s", key_names[k]);
			}
		} while (eat(&j, ','));
		if (!eat(&j, '}'))
			FAIL("bad object");
	}
	ws(&j);
	if (j.i != j.n)
		FAIL("text after the object");
	if (!seen[K_SEQ] || !seen[K_OP] || (!seen[K_TIME] && !seen[K_TIME_NS]))
		FAIL("seq, op and time are needed");
	if (seen[K_TIME] && !seen[K_TIME_NS])
		ev->time_ns = time_text;
	if (seen[K_TIME] && seen[K_TIME_NS] && time_text != ev->time_ns)
		FAIL("time and time_ns differ");
	static const int pairs[3][2] = {
		{K_PATH, K_PATH_B64}, {K_NEW_PATH, K_NEW_PATH_B64}, {K_XATTR, K_XATTR_B64}};
	for (int p = 0; p < 3; p++)
		if (seen[pairs[p][1]]) {
			name[pairs[p][0]] = name[pairs[p][1]];
			name_len[pairs[p][0]] = name_len[pairs[p][1]];
		}
	if (name[K_PATH] || seen[K_PATH_B64]) {
		ev->path = name[K_PATH];
		ev->path_len = name_len[K_PATH];
	}
	if (name[K_NEW_PATH]) {
		if (!mfs_feed_op_has_new(ev->op))
			FAIL("new_path for %s", mfs_feed_op_name(ev->op));
		ev->new_path = name[K_NEW_PATH];
		ev->new_path_len = name_len[K_NEW_PATH];
	}
	if (name[K_XATTR]) {
		ev->xattr = name[K_XATTR];
		ev->xattr_len = name_len[K_XATTR];
	}
	ev->mode = type | perm;
	return 0;
bad:
	mfs_feed_rec_free(rec);
	return -EINVAL;
}
