/*
 * What the core operations' files share. No FUSE here. They call one way,
 * top row to bottom:
 *
 *   ops_names.c ops_data.c  names (lookup, mknod, link, unlink, rename);
 *                           contents (write, fallocate, copy, reap)
 *   ops_attr.c              attributes (setattr, xattrs, killing privileges)
 *
 * Write operations check every logical condition (existence, type, name,
 * quota) before their first change, so a refused operation changes
 * nothing even inside a shared batch (see commit.c).
 */
#ifndef DBFS_OPS_PRIVATE_H
#define DBFS_OPS_PRIVATE_H

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/xattr.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"

/* The change's event for the feed (feed_outbox.c), when the feed is on: after the
 * operation's last check, so that only a store failure (which aborts the
 * batch and what it noted) can follow. */
static inline int note(struct dbfs *fs, MDB_txn *txn, const struct dbfs_ev_note *n)
{
	return fs->feed ? dbfs_feed_note(fs, txn, n) : 0;
}

static inline int check_byte_quota(struct dbfs *fs, MDB_txn *txn, uint64_t cost)
{
	uint64_t q = fs->quota_bytes;
	if (!q || !cost)
		return 0;
	struct dbfs_usage_rec u;
	int rc = dbfs_usage_get(fs, txn, &u);
	if (rc)
		return rc;
	return u.bytes + cost > q ? -EDQUOT : 0;
}

/* Drop what a change of owner or contents kills (kill: DBFS_SET_KILL_*):
 * S_ISUID, S_ISGID with g+x, security.capability. Directories keep all. */
int dbfs_op_kill_priv(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		      unsigned kill);

#endif
