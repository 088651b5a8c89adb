/* Mount options of a DBFS: defaults and parsing of key=value strings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbfs/dbfs.h"

void dbfs_options_init(struct dbfs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->durability = DBFS_DURABLE_NORMAL;
	o->max_readers = 512;
	o->initial_map_size = 0; /* auto: see dbfs_open */
	o->attr_timeout = 86400.0;
	o->entry_timeout = 86400.0;
	o->writeback_cache = false;
	o->writemap = true;
	o->writemap_auto = true;
	o->commit_interval = 5.0;
	o->feed = true;
	o->feed_max_events = 1000000;
	o->feed_max_bytes = 64ull << 20;
	o->feed_max_age = 7 * 86400;
	o->feed_sub_idle = 30 * 86400;
}

static int parse_u64(const char *v, uint64_t *out, int sizes)
{
	char *end;
	/* digits only: strtoull would skip spaces and take a sign ("-1" is 2^64-1) */
	if (!v || *v < '0' || *v > '9')
		return -1;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || end == v)
		return -1;
	unsigned shift = 0;
	if (sizes && *end) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: return -1;
		}
		end++;
	}
	if (*end)
		return -1;
	if (shift && n > (~0ull >> shift))
		return -1;
	*out = (uint64_t)n << shift;
	return 0;
}

static int parse_bool(const char *v, bool *out)
{
	if (!v || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on"))
		*out = true;
	else if (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "off"))
		*out = false;
	else
		return -1;
	return 0;
}

static int parse_secs(const char *v, double *out)
{
	char *end;
	/* a digit first, as parse_u64: strtod skips spaces and takes a sign */
	if (!v || *v < '0' || *v > '9')
		return -1;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || *end || !(d >= 0.0) || d > 1e9)
		return -1;
	*out = d;
	return 0;
}

int dbfs_option_parse(struct dbfs_options *o, const char *key, const char *v, char *err,
		      size_t errlen)
{
	uint64_t n;
	int bad = 0;

	if (!strcmp(key, "create")) {
		bad = parse_bool(v, &o->create);
	} else if (!strcmp(key, "ro")) {
		bad = parse_bool(v, &o->read_only);
	} else if (!strcmp(key, "rw")) {
		bool b;
		bad = parse_bool(v, &b);
		if (!bad)
			o->read_only = !b;
	} else if (!strcmp(key, "durability")) {
		if (v && !strcmp(v, "full"))
			o->durability = DBFS_DURABLE_FULL;
		else if (v && !strcmp(v, "normal"))
			o->durability = DBFS_DURABLE_NORMAL;
		else if (v && !strcmp(v, "none"))
			o->durability = DBFS_DURABLE_NORMAL; /* kept for old configurations */
		else
			bad = 1;
	} else if (!strcmp(key, "max_readers")) {
		bad = parse_u64(v, &n, 0) || n < 8 || n > 65536;
		if (!bad)
			o->max_readers = (unsigned)n;
	} else if (!strcmp(key, "map_size")) {
		bad = parse_u64(v, &n, 1) || n < (1u << 20);
		if (!bad)
			o->initial_map_size = n;
	} else if (!strcmp(key, "quota_bytes")) {
		bad = parse_u64(v, &o->quota_bytes, 1);
	} else if (!strcmp(key, "mem")) {
		bad = parse_u64(v, &o->cache_limit, 1);
	} else if (!strcmp(key, "quota_inodes")) {
		bad = parse_u64(v, &o->quota_inodes, 0);
	} else if (!strcmp(key, "attr_timeout")) {
		bad = parse_secs(v, &o->attr_timeout);
	} else if (!strcmp(key, "entry_timeout")) {
		bad = parse_secs(v, &o->entry_timeout);
	} else if (!strcmp(key, "commit_interval")) {
		bad = parse_secs(v, &o->commit_interval) || o->commit_interval < 0.001 ||
		      o->commit_interval > 86400;
	} else if (!strcmp(key, "writemap")) {
		bad = parse_bool(v, &o->writemap);
		o->writemap_auto = false;
	} else if (!strcmp(key, "feed")) {
		bad = parse_bool(v, &o->feed);
	} else if (!strcmp(key, "feed_events")) {
		/* the queue's hard limit is 80 subshards of 32768 (feed.c) */
		bad = parse_u64(v, &o->feed_max_events, 0) || o->feed_max_events > 2000000;
	} else if (!strcmp(key, "feed_bytes")) {
		bad = parse_u64(v, &o->feed_max_bytes, 1) || o->feed_max_bytes > (1ull << 30);
	} else if (!strcmp(key, "feed_age")) {
		bad = parse_u64(v, &o->feed_max_age, 0);
	} else if (!strcmp(key, "feed_sub_idle")) {
		bad = parse_u64(v, &o->feed_sub_idle, 0);
	} else if (!strcmp(key, "shared")) {
		bad = parse_bool(v, &o->shared);
	} else if (!strcmp(key, "writeback_cache")) {
		bad = parse_bool(v, &o->writeback_cache);
	} else {
		if (err)
			snprintf(err, errlen, "unknown option '%s'", key);
		return -ENOENT;
	}
	if (bad) {
		if (err)
			snprintf(err, errlen, "invalid value '%s' for option '%s'", v ? v : "",
				 key);
		return -EINVAL;
	}
	return 0;
}
