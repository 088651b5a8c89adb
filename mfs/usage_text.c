/* The text of a DBFS's usage history (see usage_store.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "usage_store.h"

struct walk {
	struct mfs_buf *b;
	uint64_t first_sec; /* minute rows stop before this minute */
};

static int line(void *arg, const struct mfs_usage_row *r)
{
	struct walk *w = arg;
	char date[32];
	time_t t = (time_t)r->t;
	struct tm tm;
	double s = r->span ? (double)r->span : 1.0;

	if (r->span == 60 && w->first_sec && r->t > w->first_sec - w->first_sec % 60)
		return 1; /* from here on the 1 s rows tell it */
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	mfs_buf_printf(w->b,
		       "%llu %s %u %.6g %.6g %.6g %.6g %.6g %.6g %llu %llu %llu %llu %llu %llu",
		       (unsigned long long)r->t, date, r->span, (double)r->ops / s,
		       (double)r->read_bytes / s, (double)r->write_bytes / s,
		       (double)r->errors / s, (double)r->throttled / s,
		       (double)r->feed_events / s, (unsigned long long)r->lat_p50_ns / 1000,
		       (unsigned long long)r->lat_p99_ns / 1000,
		       (unsigned long long)r->bytes_used, (unsigned long long)r->inodes_used,
		       (unsigned long long)r->cache_bytes, (unsigned long long)r->feed_lag);
	/* the line's end: what version 1 rows did not hold */
	if (r->version < 2) {
		mfs_buf_printf(w->b, " - - -\n");
		return 0;
	}
	mfs_buf_printf(w->b, " %.6g ", (double)r->flushes / s);
	mfs_usage_kinds_text(w->b, &r->kinds, 0);
	mfs_buf_putc(w->b, ' ');
	mfs_usage_kinds_text(w->b, &r->kinds, 1);
	mfs_buf_putc(w->b, '\n');
	return 0;
}

static int first(void *arg, const struct mfs_usage_row *r)
{
	*(uint64_t *)arg = r->t;
	return 1;
}

int mfs_usage_text(struct mfs_usage_store *st, const char *name, uint64_t now, uint64_t fine_sec,
		   struct mfs_buf *b)
{
	struct walk w = {b, 0};
	uint64_t from = now > fine_sec ? now - fine_sec : 0;
	int rc;

	mfs_buf_printf(b, "# time date span_s ops_per_s read_bytes_per_s write_bytes_per_s "
			  "errors_per_s throttled_per_s feed_events_per_s latency_p50_us "
			  "latency_p99_us bytes_used inodes_used cache_bytes feed_lag flushes_per_s "
			  "ops_by_kind errors_by_errno\n");
	rc = mfs_usage_each(st, name, MFS_RES_SEC, from, 0, first, &w.first_sec);
	if (rc >= 0)
		rc = mfs_usage_each(st, name, MFS_RES_MIN, 0, 0, line, &w);
	if (rc >= 0)
		rc = mfs_usage_each(st, name, MFS_RES_SEC, from, 0, line, &w);
	if (rc < 0) {
		mfs_buf_printf(b, "# error: the history cannot be read: %s\n", strerror(-rc));
		return rc;
	}
	return 0;
}
