/* The monotonic clock in ns that the loop, the rings and the manager
 * share (loop.h: mfs_now_ns). A low helper: calls no other file. */
#include <time.h>

#include "loop.h"

uint64_t mfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
