/*
 * DBFS configuration options: validation, the canonical options text kept in
 * the registry, and which options may change while mounted.
 *
 * Options are libdbfs's (dbfs_option_parse: durability, quota_bytes, ...)
 * plus the governor's:
 *   max_concurrent=N   requests of this DBFS in flight at once (0: no cap)
 *   iops=N             requests per second (0: unlimited)
 *   bandwidth=SIZE     read+write bytes per second (0: unlimited)
 * and mfs's own:
 *   feed_access=owner|all  who may read the change feed and subscribe
 *                      (owner: the DBFS's owner, who started mfs, root)
 * Pure functions: any thread, no locks.
 */
#ifndef MFS_CONF_H
#define MFS_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dbfs/dbfs.h"
#include "governor.h"

/* Parse "123", "4K", "2M", "1G", "1T" (powers of 1024): digits, then at most one
 * suffix; no space, no sign. -EINVAL if malformed or above 2^64-1. */
int mfs_parse_size(const char *s, uint64_t *out);
/* Parse a decimal number 0..max (no sign, no suffix). -EINVAL if malformed
 * or above max. */
int mfs_parse_uint(const char *s, uint64_t max, uint64_t *out);

/*
 * Check one option. Returns 0, -ENOENT for an unknown key, -EINVAL for a
 * malformed value (reason in err). name, store, mountpoint are not options.
 */
int mfs_conf_check(const char *key, const char *value, char *err, size_t errlen);

/* True for options a mounted DBFS can change live (quotas and limits). */
bool mfs_conf_live(const char *key);

/*
 * Parse canonical options text into libdbfs options (initialised to their
 * defaults first) and governor limits. -EINVAL with a reason when malformed.
 */
int mfs_conf_parse(const char *opts, struct dbfs_options *o, struct mfs_limits *lim, char *err,
		   size_t errlen);

/*
 * Set key (value NULL: bare) in the canonical text `opts` (capacity cap),
 * replacing an earlier value of the key. -ENAMETOOLONG when it does not fit
 * (opts unchanged), -EINVAL when opts is malformed, -ENOMEM.
 */
int mfs_conf_set(char *opts, size_t cap, const char *key, const char *value);

/*
 * A DBFS name: 1..64 bytes of printable UTF-8, not starting with '.' or '-',
 * without '/', '\', ',', '=', spaces or control characters.
 */
bool mfs_name_valid(const char *name, size_t len, char *err, size_t errlen);

#endif
