/*
 * Core operations on attributes, on one transaction: setattr (mode,
 * owner, size, times), extended attributes, and killing privileges.
 */
#include "dbfs/ops_private.h"

int dbfs_op_kill_priv(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		      unsigned kill)
{
	if (S_ISDIR(in->mode))
		return 0;
	if (kill & DBFS_SET_KILL_SUIDGID) {
		in->mode &= ~(uint32_t)S_ISUID;
		if (in->mode & S_IXGRP)
			in->mode &= ~(uint32_t)S_ISGID;
	}
	if (kill & DBFS_SET_KILL_CAPS) {
		int rc = dbfs_xattr_remove(fs, txn, ino, "security.capability");
		if (rc && rc != -ENODATA)
			return rc;
	}
	return 0;
}

/* What setattr sets a timestamp to: now, the given time, or (NULL) nothing. */
static const struct timespec *chosen_time(unsigned set, unsigned now_bit, unsigned given_bit,
					  const struct timespec *now, const struct timespec *given)
{
	return set & now_bit ? now : set & given_bit ? given : NULL;
}

/* Set one timestamp of an inode to `t` (NULL: leave it). */
static void set_time(int64_t *sec, uint32_t *nsec, const struct timespec *t)
{
	if (t) {
		*sec = t->tv_sec;
		*nsec = (uint32_t)t->tv_nsec;
	}
}

int dbfs_op_setattr(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct stat *st,
		    unsigned set, struct dbfs_inode *in)
{
	int rc = dbfs_inode_get(fs, txn, ino, in);
	if (rc)
		return rc;
	if (set & DBFS_SET_SIZE) {
		if (S_ISDIR(in->mode))
			return -EISDIR;
		if (!S_ISREG(in->mode))
			return -EINVAL;
		if (st->st_size < 0)
			return -EINVAL;
		if ((uint64_t)st->st_size > DBFS_MAX_FILE_SIZE)
			return -EFBIG;
	}
	int64_t s;
	uint32_t ns;
	dbfs_now(&s, &ns);
	if (set & DBFS_SET_SIZE) {
		rc = dbfs_data_truncate(fs, txn, ino, in, (uint64_t)st->st_size);
		if (rc)
			return rc;
		/* Even when the size stays: the kernel sends this same request
		 * for truncate(2), ftruncate(2) and open(O_TRUNC), and POSIX
		 * has open(O_TRUNC) mark mtime and ctime on any existing file
		 * (ext4 and tmpfs update both on every truncate). */
		in->mtime_sec = s;
		in->mtime_nsec = ns;
	}
	if (set & DBFS_SET_MODE) {
		in->mode = (in->mode & S_IFMT) | (st->st_mode & 07777);
		if ((rc = dbfs_acl_chmod(fs, txn, ino, in->mode)))
			return rc;
	}
	if ((rc = dbfs_op_kill_priv(fs, txn, ino, in, set)))
		return rc;
	if (set & DBFS_SET_UID)
		in->uid = st->st_uid;
	if (set & DBFS_SET_GID)
		in->gid = st->st_gid;
	struct timespec now = {s, ns};
	set_time(&in->atime_sec, &in->atime_nsec,
		 chosen_time(set, DBFS_SET_ATIME_NOW, DBFS_SET_ATIME, &now, &st->st_atim));
	set_time(&in->mtime_sec, &in->mtime_nsec,
		 chosen_time(set, DBFS_SET_MTIME_NOW, DBFS_SET_MTIME, &now, &st->st_mtim));
	set_time(&in->ctime_sec, &in->ctime_nsec, set & DBFS_SET_CTIME ? &st->st_ctim : &now);
	if ((rc = dbfs_inode_put(fs, txn, ino, in)))
		return rc;
	/* DBFS_SET_* are FUSE_SET_ATTR_*'s bits; the kill bits are ours */
	unsigned mask = set & ~(DBFS_SET_KILL_SUIDGID | DBFS_SET_KILL_CAPS);
	bool trunc = (set & DBFS_SET_SIZE) && !(set & (DBFS_SET_MODE | DBFS_SET_UID | DBFS_SET_GID));
	return note(fs, txn, &(struct dbfs_ev_note){.op = trunc ? DBFS_EV_TRUNCATE : DBFS_EV_SETATTR,
						     .ino = ino, .in = in,
						     .attr_mask = trunc ? 0 : mask});
}

static int xattr_ns_check(const struct dbfs_inode *in, const char *name)
{
	if (!strncmp(name, "user.", 5)) {
		if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
			return -EPERM;
		return name[5] ? 0 : -EINVAL;
	}
	if (!strncmp(name, "trusted.", 8) || !strncmp(name, "security.", 9))
		return 0;
	if (!strcmp(name, DBFS_ACL_ACCESS) || !strcmp(name, DBFS_ACL_DEFAULT))
		return 0;
	return -EOPNOTSUPP;
}

/* Read inode `ino`, whose xattr `name` is to change, and check the name's
 * namespace against it. */
static int get_xattr_owner(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
			   struct dbfs_inode *in)
{
	int rc = dbfs_inode_get(fs, txn, ino, in);
	return rc ? rc : xattr_ns_check(in, name);
}

int dbfs_op_setxattr(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name,
		     const void *val, size_t len, int flags)
{
	struct dbfs_inode in;
	int rc = get_xattr_owner(fs, txn, ino, name, &in);
	if (rc)
		return rc;
	if (strlen(name) > DBFS_XATTR_NAME_MAX)
		return -ERANGE;
	if (len > DBFS_XATTR_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if ((rc = dbfs_space_check(fs)))
		return rc;
	int is_access = !strcmp(name, DBFS_ACL_ACCESS);
	int is_default = !strcmp(name, DBFS_ACL_DEFAULT);
	if (is_access || is_default) {
		if ((rc = dbfs_acl_valid(val, len)))
			return rc;
		if (is_default && !S_ISDIR(in.mode))
			return -EACCES;
		if (is_access)
			dbfs_acl_to_mode(val, len, &in.mode);
		/* An ACL of only the three base entries is the mode itself. */
		if (len <= 4 + 3 * 8 && !(is_default && len > 4)) {
			rc = dbfs_xattr_remove(fs, txn, ino, name);
			if (rc && rc != -ENODATA)
				return rc;
			rc = 0;
		} else {
			rc = dbfs_xattr_set(fs, txn, ino, name, val, len, flags);
		}
	} else if (dbfs_expire_name(name)) {
		rc = dbfs_expire_set(fs, txn, ino, &in, val, len, flags); /* expire.c */
	} else {
		rc = dbfs_xattr_set(fs, txn, ino, name, val, len, flags);
	}
	if (rc)
		return rc;
	dbfs_touch(&in, 0, 0, 1);
	if ((rc = dbfs_inode_put(fs, txn, ino, &in)))
		return rc;
	return note(fs, txn, &(struct dbfs_ev_note){.op = DBFS_EV_SETXATTR, .ino = ino, .in = &in,
						     .xattr = name});
}

int dbfs_op_removexattr(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const char *name)
{
	struct dbfs_inode in;
	int rc = get_xattr_owner(fs, txn, ino, name, &in);
	if (rc)
		return rc;
	if ((rc = dbfs_xattr_remove(fs, txn, ino, name)))
		return rc;
	if (dbfs_expire_name(name) && (rc = dbfs_expire_cancel(fs, txn, ino)))
		return rc;
	dbfs_touch(&in, 0, 0, 1);
	if ((rc = dbfs_inode_put(fs, txn, ino, &in)))
		return rc;
	return note(fs, txn, &(struct dbfs_ev_note){.op = DBFS_EV_REMOVEXATTR, .ino = ino,
						     .in = &in, .xattr = name});
}
