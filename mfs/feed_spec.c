/* Feed positions and filters (see feed_spec.h). */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conf.h"
#include "feed_line.h"
#include "feed_spec.h"
#include "kv.h"

void mfs_feed_pos_fix(struct mfs_feed_pos *pos)
{
	pos->start.uuid = pos->has_uuid ? pos->uuid : NULL;
}

void mfs_feed_uuid_text(const uint8_t uuid[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", uuid[i]);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

static int uuid_parse(const char *s, size_t n, uint8_t uuid[16])
{
	int got = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '-')
			continue;
		int h = hexval(s[i]), l = i + 1 < n ? hexval(s[i + 1]) : -1;
		if (h < 0 || l < 0 || got == 16)
			return -EINVAL;
		uuid[got++] = (uint8_t)(h << 4 | l);
		i++;
	}
	return got == 16 ? 0 : -EINVAL;
}

/* A decimal number; leading zeros are allowed in positions. */
static int dec(const char *s, size_t n, uint64_t *v)
{
	while (n > 1 && s[0] == '0') {
		s++;
		n--;
	}
	return mfs_feed_number(s, n, UINT64_MAX, v);
}

int mfs_feed_pos_parse(const char *s, size_t len, uint64_t now_ns, struct mfs_feed_pos *pos,
		       char *err, size_t errlen)
{
	memset(pos, 0, sizeof(*pos));
	const char *colon = memchr(s, ':', len);
	uint64_t v;

	if (len == 3 && !memcmp(s, "now", 3)) {
		pos->start.from = DBFS_FEED_NOW;
		return 0;
	}
	if (len == 6 && !memcmp(s, "oldest", 6)) {
		pos->start.from = DBFS_FEED_OLDEST;
		return 0;
	}
	if (len && s[0] == '-') {
		static const struct {
			char c;
			uint64_t sec;
		} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
		uint64_t mul = 1;
		size_t n = len - 1;
		for (size_t u = 0; u < 4 && n; u++)
			if (s[len - 1] == units[u].c) {
				mul = units[u].sec;
				n--;
			}
		if (dec(s + 1, n, &v) || v > UINT64_MAX / 1000000000u / mul) {
			snprintf(err, errlen, "bad relative time '%.*s' (-N, -Ns, -Nm, -Nh, -Nd)",
				 (int)(len < 40 ? len : 40), s);
			return -EINVAL;
		}
		uint64_t back = v * mul * 1000000000u;
		pos->start.from = DBFS_FEED_TIME;
		pos->start.time_ns = back < now_ns ? now_ns - back : 0;
		return 0;
	}
	/* a time has '-' at 4 and 7 (a UUID:SEQ has its ':' later) */
	if (len >= 10 && s[4] == '-' && s[7] == '-' && (!colon || colon - s > 10) &&
	    (len == 10 || s[10] == 'T')) {
		if (mfs_feed_time_parse(s, len, &pos->start.time_ns)) {
			snprintf(err, errlen,
				 "bad time '%.*s' (2026-12-02T01:35:00.5Z, in UTC, or a date)",
				 (int)(len < 40 ? len : 40), s);
			return -EINVAL;
		}
		pos->start.from = DBFS_FEED_TIME;
		return 0;
	}
	if (colon) {
		if (uuid_parse(s, (size_t)(colon - s), pos->uuid)) {
			snprintf(err, errlen, "bad store UUID in '%.*s' (32 hex digits)",
				 (int)(len < 60 ? len : 60), s);
			return -EINVAL;
		}
		pos->has_uuid = true;
		len -= (size_t)(colon - s) + 1;
		s = colon + 1;
	}
	if (dec(s, len, &v) || v == 0) {
		snprintf(err, errlen,
			 "bad position '%.*s' (now, oldest, SEQ, UUID:SEQ, a time, -N[smhd])",
			 (int)(len < 40 ? len : 40), s);
		return -EINVAL;
	}
	pos->start.from = DBFS_FEED_SEQ;
	pos->start.seq = v;
	mfs_feed_pos_fix(pos);
	return 0;
}

static int prefix_value(const char *key, const char *v, char *out, char *err, size_t errlen)
{
	size_t n = v ? strlen(v) : 0;
	if (!n || v[0] != '/') {
		snprintf(err, errlen, "%s needs a path from the DBFS root, starting with '/'", key);
		return -EINVAL;
	}
	while (n > 1 && v[n - 1] == '/')
		n--; /* "/a/" is "/a" */
	if (n >= MFS_FEED_PATTERN_MAX) {
		snprintf(err, errlen, "%s is longer than %d bytes", key, MFS_FEED_PATTERN_MAX - 1);
		return -EINVAL;
	}
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

/* "a+b+c" of names into a bit mask, by `bit` (0: not a name). */
static int name_mask(const char *key, const char *v, uint32_t (*bit)(const char *s, size_t n),
		     uint32_t *mask, char *err, size_t errlen)
{
	*mask = 0;
	if (!v || !*v)
		goto bad;
	for (const char *p = v; *p;) {
		const char *e = strchr(p, '+');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		uint32_t b = bit(p, n);
		if (!b) {
			snprintf(err, errlen, "%s: unknown name '%.*s'", key, (int)(n < 30 ? n : 30), p);
			return -EINVAL;
		}
		*mask |= b;
		if (!e)
			break;
		p = e + 1;
		if (!*p)
			goto bad;
	}
	return 0;
bad:
	snprintf(err, errlen, "%s needs names joined by '+'", key);
	return -EINVAL;
}

static uint32_t op_bit(const char *s, size_t n)
{
	unsigned op = mfs_feed_op_of(s, n);
	return op && op != DBFS_EV_GAP ? 1u << op : 0;
}

static uint32_t type_bit(const char *s, size_t n)
{
	uint32_t mode;
	if (mfs_feed_type_of(s, n, &mode) || !mode)
		return 0;
	return 1u << (mode >> 12);
}

int mfs_feed_filter_key(struct mfs_feed_filter *f, const char *key, const char *v, char *err,
			size_t errlen)
{
	if (!strcmp(key, "path"))
		return prefix_value(key, v, f->path, err, errlen);
	if (!strcmp(key, "exclude"))
		return prefix_value(key, v, f->exclude, err, errlen);
	if (!strcmp(key, "glob")) {
		if (!v || !*v || strlen(v) >= MFS_FEED_PATTERN_MAX) {
			snprintf(err, errlen, "glob needs a pattern of 1 to %d bytes",
				 MFS_FEED_PATTERN_MAX - 1);
			return -EINVAL;
		}
		strcpy(f->glob, v);
		return 0;
	}
	if (!strcmp(key, "ops"))
		return name_mask(key, v, op_bit, &f->ops, err, errlen);
	if (!strcmp(key, "types"))
		return name_mask(key, v, type_bit, &f->types, err, errlen);
	if (!strcmp(key, "settle")) {
		uint64_t ms;
		if (!v || mfs_parse_uint(v, DBFS_SETTLE_MS_MAX, &ms) || !ms) {
			snprintf(err, errlen, "settle needs a quiet period in ms (1 to %u)",
				 DBFS_SETTLE_MS_MAX);
			return -EINVAL;
		}
		f->settle_ms = (uint32_t)ms;
		return 0;
	}
	if (!strcmp(key, "exclude_pid")) {
		uint64_t pid;
		if (!v || mfs_parse_uint(v, INT32_MAX, &pid) || !pid) {
			snprintf(err, errlen, "exclude_pid needs a process id");
			return -EINVAL;
		}
		f->exclude_pid = (uint32_t)pid;
		return 0;
	}
	return -ENOENT;
}

int mfs_feed_filter_parse(const char *text, struct mfs_feed_filter *f, char *err, size_t errlen)
{
	struct mfs_kvlist l = {0};
	int rc;

	memset(f, 0, sizeof(*f));
	if (!*text)
		return 0;
	rc = mfs_kv_parse(text, strlen(text), MFS_KV_UNIQUE, &l, err, errlen);
	for (size_t i = 0; !rc && i < l.n; i++) {
		rc = mfs_feed_filter_key(f, l.items[i].key, l.items[i].value, err, errlen);
		if (rc == -ENOENT) {
			snprintf(err, errlen, "unknown filter '%.40s'", l.items[i].key);
			rc = -EINVAL;
		}
	}
	mfs_kv_free(&l); /* empty after a refusal of mfs_kv_parse */
	return rc;
}

/* Is name (n bytes) prefix p or below it? */
static bool under(const char *p, const char *name, size_t n)
{
	size_t pn = strlen(p);
	if (pn == 1) /* "/" */
		return n > 0;
	return n >= pn && !memcmp(name, p, pn) && (n == pn || name[pn] == '/');
}

static bool glob_match(const char *pat, const char *name, size_t n)
{
	char buf[4096];
	if (!name || n >= sizeof(buf))
		return false;
	memcpy(buf, name, n);
	buf[n] = '\0';
	return fnmatch(pat, buf, 0) == 0;
}

bool mfs_feed_filter_match(const struct mfs_feed_filter *f, const struct dbfs_event *ev)
{
	if (ev->op == DBFS_EV_GAP)
		return true;
	if (ev->op == DBFS_EV_SETTLED && (!f->settle_ms || ev->attr_mask != f->settle_ms))
		return false; /* another reader's period, or none wanted */
	if (f->ops && !(f->ops & (1u << ev->op)))
		return false;
	if (f->types && !(f->types & (1u << ((ev->mode & S_IFMT) >> 12))))
		return false;
	if (f->exclude_pid && ev->pid == f->exclude_pid)
		return false;
	bool has_new = ev->new_path_len > 0;
	if (f->path[0] && !under(f->path, ev->path, ev->path_len) &&
	    !(has_new && under(f->path, ev->new_path, ev->new_path_len)))
		return false;
	if (f->glob[0] && !glob_match(f->glob, ev->path, ev->path_len) &&
	    !(has_new && glob_match(f->glob, ev->new_path, ev->new_path_len)))
		return false;
	if (f->exclude[0] && under(f->exclude, ev->path, ev->path_len) &&
	    (!has_new || under(f->exclude, ev->new_path, ev->new_path_len)))
		return false;
	return true;
}

int mfs_feed_name_parse(const char *name, uint64_t now_ns, bool *json, struct mfs_feed_pos *pos,
			struct mfs_feed_filter *f, char *err, size_t errlen)
{
	const char *spec;

	memset(pos, 0, sizeof(*pos));
	memset(f, 0, sizeof(*f));
	if (!strncmp(name, "events.json", 11)) {
		*json = true;
		spec = name + 11;
	} else if (!strncmp(name, "events", 6)) {
		*json = false;
		spec = name + 6;
	} else {
		return -ENOENT;
	}
	if (!*spec)
		return 0;
	if (*spec++ != '@')
		return -ENOENT;
	/* %XX-decode */
	size_t n = strlen(spec);
	char *t = malloc(n + 1), *w = t;
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (spec[i] != '%') {
			*w++ = spec[i];
			continue;
		}
		int h = i + 2 < n ? hexval(spec[i + 1]) : -1, l = h >= 0 ? hexval(spec[i + 2]) : -1;
		if (h < 0 || l < 0 || (h == 0 && l == 0)) {
			free(t);
			snprintf(err, errlen, "bad %%XX escape in '%.60s'", spec);
			return -EINVAL;
		}
		*w++ = (char)(h << 4 | l);
		i += 2;
	}
	*w = '\0';
	char *comma = strchr(t, ',');
	size_t plen = comma ? (size_t)(comma - t) : strlen(t);
	int rc = mfs_feed_pos_parse(t, plen, now_ns, pos, err, errlen);
	if (!rc && comma)
		rc = mfs_feed_filter_parse(comma + 1, f, err, errlen);
	free(t);
	return rc;
}
