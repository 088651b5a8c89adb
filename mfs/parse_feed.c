/* Parsers of the feed's verbs, subscribe and unsubscribe (see parse.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "conf.h"
#include "feed_line.h"
#include "kv.h"
#include "parse.h"

/* A subscription name: 1..DBFS_FEED_SUB_MAX bytes of [A-Za-z0-9._-]. */
static int take_sub(const char *v, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	size_t n = v ? strlen(v) : 0;
	bool ok = n >= 1 && n <= DBFS_FEED_SUB_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
		     (v[i] >= '0' && v[i] <= '9') || v[i] == '.' || v[i] == '_' || v[i] == '-';
	/* "x.json" would be the JSON twin of "x" in subscriptions/ */
	if (ok && n >= 5 && !strcmp(v + n - 5, ".json"))
		ok = false;
	if (!ok) {
		snprintf(err, errlen,
			 "sub must be 1 to %u of A-Z a-z 0-9 . _ - (not ending in .json)",
			 DBFS_FEED_SUB_MAX);
		return -EINVAL;
	}
	strcpy(cmd->sub, v);
	return 0;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int feed_value(const char *value, size_t len, struct mfs_cmd *cmd, bool subscribe,
		      char *err, size_t errlen)
{
	struct mfs_kvlist l;
	struct mfs_feed_filter f = {0};
	bool from = false, since = false;
	int rc;

	if (len > MFS_VALUE_MAX) {
		snprintf(err, errlen, "value longer than %d bytes", MFS_VALUE_MAX);
		return -E2BIG;
	}
	rc = mfs_kv_parse(value, len, MFS_KV_UNIQUE, &l, err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < l.n && !rc; i++) {
		const char *k = l.items[i].key, *v = l.items[i].value;
		if (!strcmp(k, "name")) {
			if (!v) {
				snprintf(err, errlen, "name needs a value");
				rc = -EINVAL;
			} else if (!mfs_name_valid(v, strlen(v), err, errlen)) {
				rc = -EINVAL;
			} else {
				strcpy(cmd->name, v);
			}
		} else if (!strcmp(k, "sub")) {
			rc = take_sub(v, cmd, err, errlen);
		} else if (subscribe && (!strcmp(k, "from") || !strcmp(k, "since"))) {
			bool is_from = k[0] == 'f';
			from |= is_from;
			since |= !is_from;
			if (!v) {
				rc = (snprintf(err, errlen, "%s needs a value", k), -EINVAL);
			} else {
				rc = mfs_feed_pos_parse(v, strlen(v), realtime_ns(), &cmd->pos, err,
							errlen);
				if (!rc && !is_from && cmd->pos.start.from != DBFS_FEED_TIME)
					rc = (snprintf(err, errlen,
						       "since needs a time (or -N[smhd]); "
						       "use from= for a sequence number"),
					      -EINVAL);
			}
		} else if (subscribe) {
			rc = mfs_feed_filter_key(&f, k, v, err, errlen);
			if (rc == -ENOENT)
				rc = (snprintf(err, errlen, "unknown key '%.64s'", k), -EINVAL);
			if (!rc && mfs_conf_set(cmd->opts, sizeof(cmd->opts), k, v))
				rc = (snprintf(err, errlen, "filters too long"), -EINVAL);
		} else {
			rc = (snprintf(err, errlen, "unknown key '%.64s'", k), -EINVAL);
		}
	}
	mfs_kv_free(&l);
	if (!rc && from && since)
		rc = (snprintf(err, errlen, "give from= or since=, not both"), -EINVAL);
	if (!rc && !cmd->name[0])
		rc = (snprintf(err, errlen, "missing key 'name'"), -EINVAL);
	if (!rc && !cmd->sub[0])
		rc = (snprintf(err, errlen, "missing key 'sub'"), -EINVAL);
	if (!rc && strlen(cmd->opts) > DBFS_FEED_SPEC_MAX)
		rc = (snprintf(err, errlen, "filters longer than %u bytes", DBFS_FEED_SPEC_MAX),
		      -EINVAL);
	mfs_feed_pos_fix(&cmd->pos);
	return rc;
}

int mfs_parse_subscribe(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			size_t errlen)
{
	return feed_value(value, len, cmd, true, err, errlen);
}

int mfs_parse_unsubscribe(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			  size_t errlen)
{
	return feed_value(value, len, cmd, false, err, errlen);
}
