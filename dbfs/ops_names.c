/*
 * Core operations on names, on one transaction: lookup, mknod (files,
 * directories, symlinks, devices), link, unlink, rmdir and rename.
 */
#include "dbfs/ops_private.h"

#define DBFS_LINK_MAX 65000u

static unsigned mknod_op(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return DBFS_EV_CREATE;
	case S_IFDIR: return DBFS_EV_MKDIR;
	case S_IFLNK: return DBFS_EV_SYMLINK;
	default: return DBFS_EV_MKNOD;
	}
}

static int get_dir(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in)
{
	int rc = dbfs_inode_get(fs, txn, ino, in);
	if (rc)
		return rc;
	if (!S_ISDIR(in->mode))
		return -ENOTDIR;
	if (in->nlink == 0)
		return -ENOENT; /* removed directory (someone's cwd) */
	return 0;
}

/* 0 if `name` is not taken in `dir`, -EEXIST if it is. */
static int name_free(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t len)
{
	struct dbfs_dirent_val dv;
	int rc = dbfs_dir_lookup(fs, txn, dir, name, len, &dv);
	return rc == 0 ? -EEXIST : rc == -ENOENT ? 0 : rc;
}

static int check_inode_quota(struct dbfs *fs, MDB_txn *txn)
{
	uint64_t q = fs->quota_inodes;
	if (!q)
		return 0;
	struct dbfs_usage_rec u;
	int rc = dbfs_usage_get(fs, txn, &u);
	if (rc)
		return rc;
	return u.inodes >= q ? -EDQUOT : 0;
}

int dbfs_op_lookup(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name,
		   uint64_t *ino, struct dbfs_inode *in)
{
	struct dbfs_inode pin;
	size_t len = strlen(name);
	int rc = get_dir(fs, txn, parent, &pin);
	if (rc)
		return rc;
	if (len > DBFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!strcmp(name, ".")) {
		*ino = parent;
	} else if (!strcmp(name, "..")) {
		*ino = pin.parent;
	} else {
		struct dbfs_dirent_val dv;
		rc = dbfs_dir_lookup(fs, txn, parent, name, len, &dv);
		if (rc)
			return rc;
		*ino = dv.ino;
	}
	return dbfs_inode_get(fs, txn, *ino, in);
}

int dbfs_op_mknod(struct dbfs *fs, MDB_txn *txn, const struct dbfs_cred *cr, uint64_t parent,
		  const char *name, uint32_t mode, uint64_t rdev, const char *link,
		  uint64_t *ino, struct dbfs_inode *in)
{
	struct dbfs_inode pin;
	size_t len = strlen(name), llen = link ? strlen(link) : 0;
	int rc, has_default = 0;

	if ((rc = dbfs_name_check(name, len)))
		return rc;
	if ((rc = get_dir(fs, txn, parent, &pin)))
		return rc;
	if ((rc = name_free(fs, txn, parent, name, len)))
		return rc;
	if (link && (llen == 0 || llen > DBFS_SYMLINK_MAX))
		return llen ? -ENAMETOOLONG : -ENOENT;
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO: case S_IFSOCK:
	case S_IFCHR: case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	if ((rc = check_inode_quota(fs, txn)) || (rc = dbfs_space_check(fs)))
		return rc;
	if (S_ISLNK(mode)) {
		mode = S_IFLNK | 0777;
	} else if ((rc = dbfs_acl_inherit_mode(fs, txn, parent, &mode, cr->umask,
					       &has_default))) {
		return rc;
	}

	memset(in, 0, sizeof(*in));
	in->mode = mode;
	in->uid = cr->uid;
	in->gid = cr->gid;
	if (pin.mode & S_ISGID) {
		in->gid = pin.gid;
		if (S_ISDIR(mode))
			in->mode |= S_ISGID;
	}
	in->nlink = S_ISDIR(mode) ? 2 : 1;
	in->size = llen;
	in->rdev = rdev;
	if (S_ISDIR(mode)) {
		in->next_cookie = DBFS_COOKIE_FIRST;
		in->parent = parent;
	}
	dbfs_touch(in, 1, 1, 1);
	in->btime_sec = in->ctime_sec;
	in->btime_nsec = in->ctime_nsec;

	/* Changes start here. */
	if ((rc = dbfs_alloc_ino(fs, txn, ino)))
		return rc;
	if (!S_ISLNK(mode) && has_default &&
	    (rc = dbfs_acl_inherit(fs, txn, parent, *ino, in->mode)))
		return rc;
	/* the entry first: the record carries its name (names.c) */
	if ((rc = dbfs_dir_add(fs, txn, parent, &pin, name, len, *ino, in)))
		return rc;
	if ((rc = dbfs_inode_put_link(fs, txn, *ino, in, link, llen)))
		return rc;
	if (S_ISDIR(mode))
		pin.nlink++;
	dbfs_touch(&pin, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, parent, &pin)))
		return rc;
	if ((rc = dbfs_usage_add(fs, txn, 0, 1)))
		return rc;
	return note(fs, txn, &(struct dbfs_ev_note){.op = mknod_op(mode), .ino = *ino, .in = in,
						     .parent = parent, .name = name,
						     .name_len = len});
}

int dbfs_op_link(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t parent,
		 const char *name, struct dbfs_inode *in)
{
	struct dbfs_inode pin;
	size_t len = strlen(name);
	int rc;

	if ((rc = dbfs_name_check(name, len)))
		return rc;
	if ((rc = dbfs_inode_get(fs, txn, ino, in)))
		return rc;
	if (S_ISDIR(in->mode))
		return -EPERM;
	if (in->nlink == 0)
		return -ENOENT;
	if (in->nlink >= DBFS_LINK_MAX)
		return -EMLINK;
	if ((rc = dbfs_space_check(fs)))
		return rc;
	if ((rc = get_dir(fs, txn, parent, &pin)))
		return rc;
	if ((rc = name_free(fs, txn, parent, name, len)))
		return rc;
	/* noted before the new name exists: path is the name it had */
	struct dbfs_inode after = *in;
	after.nlink++;
	if ((rc = note(fs, txn, &(struct dbfs_ev_note){.op = DBFS_EV_LINK, .ino = ino, .in = &after,
							.new_parent = parent, .new_name = name,
							.new_name_len = len})))
		return rc;

	if ((rc = dbfs_dir_add(fs, txn, parent, &pin, name, len, ino, in)))
		return rc;
	in->nlink++;
	dbfs_touch(in, 0, 0, 1);
	dbfs_touch(&pin, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, ino, in)))
		return rc;
	return dbfs_inode_put(fs, txn, parent, &pin);
}

static int unlink_as(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name, int dir,
		     unsigned ev);

int dbfs_op_unlink(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name, int dir)
{
	return unlink_as(fs, txn, parent, name, dir, dir ? DBFS_EV_RMDIR : DBFS_EV_UNLINK);
}

int dbfs_op_expire_unlink(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name)
{
	return unlink_as(fs, txn, parent, name, 0, DBFS_EV_EXPIRE);
}

static int unlink_as(struct dbfs *fs, MDB_txn *txn, uint64_t parent, const char *name, int dir,
		     unsigned ev)
{
	struct dbfs_inode pin, cin;
	struct dbfs_dirent_val dv;
	size_t len = strlen(name);
	int rc;

	if (len > DBFS_NAME_MAX)
		return -ENAMETOOLONG;
	if ((rc = get_dir(fs, txn, parent, &pin)))
		return rc;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return dir ? (name[1] ? -ENOTEMPTY : -EINVAL) : -EISDIR;
	if ((rc = dbfs_dir_lookup(fs, txn, parent, name, len, &dv)))
		return rc;
	if ((rc = dbfs_inode_get(fs, txn, dv.ino, &cin)))
		return rc;
	if (dir && !S_ISDIR(cin.mode))
		return -ENOTDIR;
	if (!dir && S_ISDIR(cin.mode))
		return -EISDIR;
	if (dir && cin.nentries)
		return -ENOTEMPTY;

	if ((rc = dbfs_dir_remove(fs, txn, parent, &pin, name, len, &dv, &cin)))
		return rc;
	if (dir) {
		pin.nlink--;
		cin.nlink = 0;
	} else {
		cin.nlink--;
	}
	dbfs_touch(&cin, 0, 0, 1);
	dbfs_touch(&pin, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, parent, &pin)))
		return rc;
	if ((rc = dbfs_inode_put(fs, txn, dv.ino, &cin)))
		return rc;
	if ((rc = note(fs, txn, &(struct dbfs_ev_note){.op = ev, .ino = dv.ino, .in = &cin,
							.parent = parent, .name = name,
							.name_len = len})))
		return rc;
	return cin.nlink ? 0 : dbfs_inode_unlinked(fs, txn, dv.ino);
}

/* Is `dir` equal to or below `top`? Walks parent pointers up to the root. */
static int is_within(struct dbfs *fs, MDB_txn *txn, uint64_t dir, uint64_t top)
{
	for (int depth = 0; depth < 100000; depth++) {
		if (dir == top)
			return 1;
		if (dir == DBFS_ROOT_INO)
			return 0;
		struct dbfs_inode in;
		int rc = dbfs_inode_get(fs, txn, dir, &in);
		if (rc)
			return rc;
		dir = in.parent;
	}
	return -ELOOP;
}

int dbfs_op_rename(struct dbfs *fs, MDB_txn *txn, uint64_t op, const char *on, uint64_t np,
		   const char *nn, unsigned flags)
{
	struct dbfs_inode opin, npin_s, *npin, sin, din;
	struct dbfs_dirent_val sdv, ddv;
	size_t olen = strlen(on), nlen = strlen(nn);
	int rc, dst_exists;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if ((rc = dbfs_name_check(nn, nlen)))
		return rc;
	if (olen > DBFS_NAME_MAX)
		return -ENAMETOOLONG;
	if ((rc = get_dir(fs, txn, op, &opin)))
		return rc;
	if (np == op) {
		npin = &opin;
	} else {
		npin = &npin_s;
		if ((rc = get_dir(fs, txn, np, npin)))
			return rc;
	}
	if (!strcmp(on, ".") || !strcmp(on, "..") || !strcmp(nn, ".") || !strcmp(nn, ".."))
		return -EBUSY;
	if ((rc = dbfs_dir_lookup(fs, txn, op, on, olen, &sdv)))
		return rc;
	if ((rc = dbfs_inode_get(fs, txn, sdv.ino, &sin)))
		return rc;
	rc = dbfs_dir_lookup(fs, txn, np, nn, nlen, &ddv);
	if (rc && rc != -ENOENT)
		return rc;
	dst_exists = rc == 0;
	if ((flags & RENAME_EXCHANGE) && !dst_exists)
		return -ENOENT;
	if ((flags & RENAME_NOREPLACE) && dst_exists)
		return -EEXIST;
	if (dst_exists && ddv.ino == sdv.ino)
		return 0; /* same inode: nothing to do (POSIX) */
	if (dst_exists && (rc = dbfs_inode_get(fs, txn, ddv.ino, &din)))
		return rc;
	if (S_ISDIR(sin.mode) && op != np) {
		rc = is_within(fs, txn, np, sdv.ino);
		if (rc)
			return rc > 0 ? -EINVAL : rc;
	}
	if ((flags & RENAME_EXCHANGE) && S_ISDIR(din.mode) && op != np) {
		rc = is_within(fs, txn, op, ddv.ino);
		if (rc)
			return rc > 0 ? -EINVAL : rc;
	}

	if (flags & RENAME_EXCHANGE) {
		rc = dbfs_dir_replace(fs, txn, op, on, olen, &sdv, ddv.ino, din.mode & S_IFMT);
		if (!rc)
			rc = dbfs_dir_replace(fs, txn, np, nn, nlen, &ddv, sdv.ino,
					      sin.mode & S_IFMT);
		/* both names go before either comes: a removal may promote */
		if (!rc)
			rc = dbfs_name_removed(fs, txn, sdv.ino, &sin, op, sdv.cookie, on, olen);
		if (!rc)
			rc = dbfs_name_removed(fs, txn, ddv.ino, &din, np, ddv.cookie, nn, nlen);
		if (!rc)
			rc = dbfs_name_added(fs, txn, sdv.ino, &sin, np, ddv.cookie, nn, nlen);
		if (!rc)
			rc = dbfs_name_added(fs, txn, ddv.ino, &din, op, sdv.cookie, on, olen);
		if (rc)
			return rc;
		if (op != np) {
			int sd = S_ISDIR(sin.mode), dd = S_ISDIR(din.mode);
			opin.nlink += dd - sd;
			npin->nlink += sd - dd;
			if (sd)
				sin.parent = np;
			if (dd)
				din.parent = op;
		}
		dbfs_touch(&sin, 0, 0, 1);
		dbfs_touch(&din, 0, 0, 1);
		if ((rc = dbfs_inode_put(fs, txn, sdv.ino, &sin)) ||
		    (rc = dbfs_inode_put(fs, txn, ddv.ino, &din)))
			return rc;
	} else {
		if (dst_exists) {
			if (S_ISDIR(din.mode) && !S_ISDIR(sin.mode))
				return -EISDIR;
			if (!S_ISDIR(din.mode) && S_ISDIR(sin.mode))
				return -ENOTDIR;
			if (S_ISDIR(din.mode) && din.nentries)
				return -ENOTEMPTY;
			/* Changes start here. */
			if ((rc = dbfs_dir_remove(fs, txn, np, npin, nn, nlen, &ddv, &din)))
				return rc;
			if (S_ISDIR(din.mode)) {
				din.nlink = 0;
				npin->nlink--;
			} else {
				din.nlink--;
			}
			dbfs_touch(&din, 0, 0, 1);
			if ((rc = dbfs_inode_put(fs, txn, ddv.ino, &din)))
				return rc;
			if (!din.nlink && (rc = dbfs_inode_unlinked(fs, txn, ddv.ino)))
				return rc;
		}
		if ((rc = dbfs_dir_remove(fs, txn, op, &opin, on, olen, &sdv, &sin)))
			return rc;
		if ((rc = dbfs_dir_add(fs, txn, np, npin, nn, nlen, sdv.ino, &sin)))
			return rc;
		if (S_ISDIR(sin.mode) && op != np) {
			opin.nlink--;
			npin->nlink++;
			sin.parent = np;
		}
		dbfs_touch(&sin, 0, 0, 1);
		if ((rc = dbfs_inode_put(fs, txn, sdv.ino, &sin)))
			return rc;
	}
	dbfs_touch(&opin, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, op, &opin)))
		return rc;
	if (np != op) {
		dbfs_touch(npin, 0, 1, 1);
		if ((rc = dbfs_inode_put(fs, txn, np, npin)))
			return rc;
	}
	/* the parents' paths did not change: the moved entry is not above them */
	unsigned evf = (flags & RENAME_EXCHANGE) ? DBFS_EVF_EXCHANGE
			: dst_exists		  ? DBFS_EVF_REPLACED
						  : 0;
	return note(fs, txn, &(struct dbfs_ev_note){.op = DBFS_EV_RENAME, .flags = evf,
						     .ino = sdv.ino, .in = &sin, .parent = op,
						     .name = on, .name_len = olen, .new_parent = np,
						     .new_name = nn, .new_name_len = nlen});
}

/* Clear what a write, truncate or chown takes away (DBFS_SET_KILL_*). */
