/*
 * The clock: wall-clock time for inode timestamps (dbfs_now, dbfs_touch)
 * and the monotonic seconds that pace housekeeping (dbfs_mono_sec). Calls
 * nothing else of the library.
 */
#include <time.h>

#include "dbfs/internal.h"

void dbfs_now(int64_t *sec, uint32_t *nsec)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*sec = ts.tv_sec;
	*nsec = (uint32_t)ts.tv_nsec;
}

void dbfs_touch(struct dbfs_inode *in, int atime, int mtime, int ctime)
{
	int64_t s;
	uint32_t ns;
	dbfs_now(&s, &ns);
	if (atime) {
		in->atime_sec = s;
		in->atime_nsec = ns;
	}
	if (mtime) {
		in->mtime_sec = s;
		in->mtime_nsec = ns;
	}
	if (ctime) {
		in->ctime_sec = s;
		in->ctime_nsec = ns;
	}
}

int64_t dbfs_mono_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}
