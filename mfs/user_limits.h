/*
 * Per-user limits of a manager (-o user_max_dbfs=N,user_max_bytes=SIZE,
 * user_max_inodes=N at start): how many DBFSs a user other than root and
 * the manager's own user may have registered, and how many data bytes and
 * inodes their quotas may add up to. A limit on bytes or inodes makes a
 * quota of that kind mandatory for such a user's DBFS, so that the sum
 * means what it says: every byte a user can write is within some quota.
 */
#ifndef MFS_USER_LIMITS_H
#define MFS_USER_LIMITS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "manager.h"

/* struct mfs_user_limits is in manager.h (a field of the manager). */

/*
 * May `uid` have one more DBFS (self == NULL) or change `self` so that it
 * has these quotas (0: none)? `list` is the manager's list (mgr->lock
 * held); root and `exempt` (the manager's user) are never limited.
 * Returns 0, or -EDQUOT with the reason in err.
 */
int mfs_user_limits_check(const struct mfs_user_limits *lim, const struct mfs_dbfs *list,
			  uid_t uid, uid_t exempt, const struct mfs_dbfs *self,
			  uint64_t quota_bytes, uint64_t quota_inodes, char *err, size_t errlen);

#endif
