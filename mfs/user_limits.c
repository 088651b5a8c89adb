/* Per-user limits on DBFSs and their quotas (see user_limits.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "conf.h"
#include "user_limits.h"

/* One kind of quota against its limit; `what` names the mount option. */
static int check_sum(uint64_t limit, uint64_t others, uint64_t mine, const char *what,
		     uid_t uid, char *err, size_t errlen)
{
	if (!limit)
		return 0;
	if (!mine) {
		snprintf(err, errlen,
			 "uid %u is limited to %" PRIu64 " in all (user_max_%s): give %s= of at "
			 "most %" PRIu64,
			 (unsigned)uid, limit, what + 6, what, others < limit ? limit - others : 0);
		return -EDQUOT;
	}
	if (others > limit || mine > limit - others) {
		snprintf(err, errlen,
			 "uid %u's quotas would add up to more than user_max_%s=%" PRIu64
			 " (%" PRIu64 " given to its other DBFSs)",
			 (unsigned)uid, what + 6, limit, others);
		return -EDQUOT;
	}
	return 0;
}

int mfs_user_limits_check(const struct mfs_user_limits *lim, const struct mfs_dbfs *list,
			  uid_t uid, uid_t exempt, const struct mfs_dbfs *self,
			  uint64_t quota_bytes, uint64_t quota_inodes, char *err, size_t errlen)
{
	uint64_t n = 0, bytes = 0, inodes = 0;

	if (uid == 0 || uid == exempt)
		return 0;
	for (const struct mfs_dbfs *d = list; d; d = d->next) {
		if (d == self || d->conf.owner != uid)
			continue;
		struct dbfs_options o;
		struct mfs_limits l;
		char e[128];
		n++;
		/* registered options are valid (checked when they were set) */
		if (mfs_conf_parse(d->conf.opts, &o, &l, e, sizeof(e)) == 0) {
			bytes += o.quota_bytes;
			inodes += o.quota_inodes;
		}
	}
	if (!self && lim->dbfs && n >= lim->dbfs) {
		snprintf(err, errlen, "uid %u has %" PRIu64 " DBFSs, the most it may have (user_max_dbfs)",
			 (unsigned)uid, n);
		return -EDQUOT;
	}
	int rc = check_sum(lim->bytes, bytes, quota_bytes, "quota_bytes", uid, err, errlen);
	if (!rc)
		rc = check_sum(lim->inodes, inodes, quota_inodes, "quota_inodes", uid, err, errlen);
	return rc;
}
