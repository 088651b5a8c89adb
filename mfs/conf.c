/* DBFS configuration options (see conf.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "kv.h"
#include "manager.h"

int mfs_parse_size(const char *s, uint64_t *out)
{
	char *end;

	/* digits only: strtoull would skip spaces and take a sign ("-1" is 2^64-1) */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	unsigned shift = 0;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	case 't': case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1])
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int mfs_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9') /* as mfs_parse_size */
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int governor_key(const char *key, const char *value, struct mfs_limits *lim, char *err,
			size_t errlen)
{
	uint64_t v;

	if (!strcmp(key, "max_concurrent")) {
		if (mfs_parse_uint(value, 1024, &v))
			goto bad;
		lim->max_concurrent = (unsigned)v;
	} else if (!strcmp(key, "iops")) {
		if (mfs_parse_uint(value, 100000000, &v))
			goto bad;
		lim->iops = v;
	} else if (!strcmp(key, "bandwidth")) {
		if (mfs_parse_size(value, &v))
			goto bad;
		lim->bandwidth = v;
	} else {
		return -ENOENT;
	}
	return 0;
bad:
	snprintf(err, errlen, "bad value '%.40s' for %s", value ? value : "", key);
	return -EINVAL;
}

/* Options of mfs itself: feed_access=owner|all (who may read the feed;
 * read from the options text where it is checked, feed_fs.c). -ENOENT
 * when key is none of them. */
static int mfs_key(const char *key, const char *value, char *err, size_t errlen)
{
	if (strcmp(key, "feed_access"))
		return -ENOENT;
	if (value && (!strcmp(value, "owner") || !strcmp(value, "all")))
		return 0;
	snprintf(err, errlen, "feed_access is owner or all");
	return -EINVAL;
}

static bool reserved_key(const char *key)
{
	return !strcmp(key, "name") || !strcmp(key, "store") || !strcmp(key, "mountpoint") ||
	       !strcmp(key, "force");
}

int mfs_conf_check(const char *key, const char *value, char *err, size_t errlen)
{
	struct mfs_limits lim = {0};
	struct dbfs_options o;

	if (reserved_key(key)) {
		snprintf(err, errlen, "'%s' is not an option here", key);
		return -EINVAL;
	}
	int rc = mfs_key(key, value, err, errlen);
	if (rc != -ENOENT)
		return rc;
	rc = governor_key(key, value, &lim, err, errlen);
	if (rc != -ENOENT)
		return rc;
	dbfs_options_init(&o);
	rc = dbfs_option_parse(&o, key, value, err, errlen);
	if (rc == -ENOENT)
		snprintf(err, errlen, "unknown key '%.64s'", key);
	else if (rc)
		rc = -EINVAL;
	return rc;
}

bool mfs_conf_live(const char *key)
{
	static const char *const live[] = {"quota_bytes", "quota_inodes", "max_concurrent",
					    "iops",        "bandwidth",    "mem",
					    "commit_interval", "feed_access", "feed_events",
					    "feed_bytes", "feed_age", "feed_sub_idle"};
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (!strcmp(key, live[i]))
			return true;
	return false;
}

int mfs_conf_parse(const char *opts, struct dbfs_options *o, struct mfs_limits *lim, char *err,
		   size_t errlen)
{
	struct mfs_kvlist l;
	int rc = 0;

	dbfs_options_init(o);
	memset(lim, 0, sizeof(*lim));
	if (!*opts)
		return 0;
	rc = mfs_kv_parse(opts, strlen(opts), 0, &l, err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < l.n && !rc; i++) {
		rc = mfs_key(l.items[i].key, l.items[i].value, err, errlen);
		if (rc != -ENOENT)
			continue;
		rc = governor_key(l.items[i].key, l.items[i].value, lim, err, errlen);
		if (rc != -ENOENT)
			continue;
		rc = dbfs_option_parse(o, l.items[i].key, l.items[i].value, err, errlen);
		if (rc == -ENOENT)
			snprintf(err, errlen, "unknown key '%.64s'", l.items[i].key);
		if (rc)
			rc = -EINVAL;
	}
	mfs_kv_free(&l);
	return rc;
}

static bool append_raw(char *buf, size_t cap, size_t *pos, char c)
{
	if (*pos + 1 >= cap)
		return false;
	buf[(*pos)++] = c;
	buf[*pos] = '\0';
	return true;
}

static bool append_item(char *buf, size_t cap, size_t *pos, const char *key, const char *value)
{
	if (*pos && !append_raw(buf, cap, pos, ','))
		return false;
	if (!mfs_kv_escape(buf, cap, pos, key))
		return false;
	if (!value)
		return true;
	return append_raw(buf, cap, pos, '=') && mfs_kv_escape(buf, cap, pos, value);
}

int mfs_conf_set(char *opts, size_t cap, const char *key, const char *value)
{
	struct mfs_kvlist l = {0};
	char err[128];
	char *out = malloc(cap);
	size_t pos = 0;
	bool ok = true;

	if (!out)
		return -ENOMEM;
	out[0] = '\0';
	int rc = *opts ? mfs_kv_parse(opts, strlen(opts), 0, &l, err, sizeof(err)) : 0;
	if (rc) {
		free(out);
		return rc == -ENOMEM ? -ENOMEM : -EINVAL;
	}
	for (size_t i = 0; i < l.n && ok; i++)
		if (strcmp(l.items[i].key, key))
			ok = append_item(out, cap, &pos, l.items[i].key, l.items[i].value);
	mfs_kv_free(&l);
	ok = ok && append_item(out, cap, &pos, key, value);
	if (ok)
		memcpy(opts, out, pos + 1);
	free(out);
	return ok ? 0 : -ENAMETOOLONG;
}

bool mfs_name_valid(const char *name, size_t len, char *err, size_t errlen)
{
	if (len == 0 || len > MFS_NAME_MAX) {
		snprintf(err, errlen, "a name must be 1 to %d bytes long", MFS_NAME_MAX);
		return false;
	}
	if (!mfs_utf8_printable(name, len) || memchr(name, '\0', len)) {
		snprintf(err, errlen, "a name must be printable UTF-8");
		return false;
	}
	if (len == 7 && !memcmp(name, "metrics", 7)) { /* the manager root's file */
		snprintf(err, errlen, "the name 'metrics' is reserved");
		return false;
	}
	if (name[0] == '.' || name[0] == '-') {
		snprintf(err, errlen, "a name must not start with '.' or '-'");
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		if (strchr("/\\,= \t", name[i])) {
			snprintf(err, errlen, "a name must not contain '/', '\\', ',', '=' or spaces");
			return false;
		}
	}
	return true;
}
