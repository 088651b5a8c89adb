/* The change feed of a DBFS (dbfs/feed.h). Not implemented yet: every
 * reader call answers -EOPNOTSUPP (the API is fixed; the outbox follows). */
#include <errno.h>
#include <string.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"

void dbfs_feed_uuid(struct dbfs *fs, uint8_t uuid[16])
{
	(void)fs;
	memset(uuid, 0, 16);
}
bool dbfs_feed_enabled(struct dbfs *fs)
{
	(void)fs;
	return false;
}
uint64_t dbfs_feed_last_seq(struct dbfs *fs)
{
	(void)fs;
	return 0;
}
void dbfs_feed_set_notify(struct dbfs *fs, void (*cb)(void *arg, uint64_t last_seq), void *arg)
{
	(void)fs, (void)cb, (void)arg;
}
int dbfs_feed_set_limits(struct dbfs *fs, const struct dbfs_feed_limits *l)
{
	(void)fs, (void)l;
	return -EOPNOTSUPP;
}
void dbfs_feed_get_limits(struct dbfs *fs, struct dbfs_feed_limits *l)
{
	(void)fs;
	memset(l, 0, sizeof(*l));
}
int dbfs_feed_stats(struct dbfs *fs, struct dbfs_feed_stats *st)
{
	(void)fs;
	memset(st, 0, sizeof(*st));
	return -EOPNOTSUPP;
}
int dbfs_feed_sub_create(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
			 const char *spec)
{
	(void)fs, (void)sub, (void)start, (void)spec;
	return -EOPNOTSUPP;
}
int dbfs_feed_sub_delete(struct dbfs *fs, const char *sub)
{
	(void)fs, (void)sub;
	return -EOPNOTSUPP;
}
int dbfs_feed_sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info)
{
	(void)fs, (void)sub, (void)info;
	return -EOPNOTSUPP;
}
int dbfs_feed_sub_list(struct dbfs *fs,
		       int (*cb)(void *arg, const struct dbfs_feed_sub_info *info), void *arg)
{
	(void)fs, (void)cb, (void)arg;
	return -EOPNOTSUPP;
}
int dbfs_feed_open(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
		   struct dbfs_feed_reader **out)
{
	(void)fs, (void)sub, (void)start, (void)out;
	return -EOPNOTSUPP;
}
int dbfs_feed_read(struct dbfs_feed_reader *r, struct dbfs_event *ev, size_t max, size_t *n,
		   int timeout_ms)
{
	(void)r, (void)ev, (void)max, (void)n, (void)timeout_ms;
	return -EOPNOTSUPP;
}
bool dbfs_feed_ready(struct dbfs_feed_reader *r)
{
	(void)r;
	return false;
}
int dbfs_feed_ack(struct dbfs_feed_reader *r, uint64_t seq)
{
	(void)r, (void)seq;
	return -EOPNOTSUPP;
}
uint64_t dbfs_feed_reader_next(const struct dbfs_feed_reader *r)
{
	(void)r;
	return 0;
}
void dbfs_feed_close(struct dbfs_feed_reader *r)
{
	(void)r;
}
