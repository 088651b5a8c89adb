/*
 * Fault injection for the unit tests: the countdown that makes the Nth
 * LMDB data call through the wrappers in internal.h fail with EIO, and a
 * store's file system that is full. Calls nothing else of the library.
 */
#include "dbfs/internal.h"

long dbfs_fail_countdown;
bool dbfs_fault_disk_full;

int dbfs_fail_check(void)
{
	return --dbfs_fail_countdown == 0;
}
