/*
 * Core file-system operations on one transaction. No FUSE here.
 *
 * Write operations check every logical condition (existence, type, name,
 * quota) before their first change, so a refused operation changes
 * nothing even inside a shared batch (see commit.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/xattr.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"

#define DBFS_LINK_MAX 65000u
#define COPY_MAX      (64u << 20)

/* The change's event for the feed (feed_outbox.c), when the feed is on: after the
 * operation's last check, so that only a store failure (which aborts the
 * batch and what it noted) can follow. */
static int note(struct dbfs *fs, MDB_txn *txn, const struct dbfs_ev_note *n)
{
	return fs->feed ? dbfs_feed_note(fs, txn, n) : 0;
}

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

static int check_byte_quota(struct dbfs *fs, MDB_txn *txn, uint64_t cost)
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
	if ((rc = dbfs_inode_put_link(fs, txn, *ino, in, link, llen)))
		return rc;
	if ((rc = dbfs_dir_add(fs, txn, parent, &pin, name, len, *ino, mode & S_IFMT)))
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

	if ((rc = dbfs_dir_add(fs, txn, parent, &pin, name, len, ino, in->mode & S_IFMT)))
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

	if ((rc = dbfs_dir_remove(fs, txn, parent, &pin, name, len, &dv)))
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
			if ((rc = dbfs_dir_remove(fs, txn, np, npin, nn, nlen, &ddv)))
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
		if ((rc = dbfs_dir_remove(fs, txn, op, &opin, on, olen, &sdv)))
			return rc;
		if ((rc = dbfs_dir_add(fs, txn, np, npin, nn, nlen, sdv.ino, sin.mode & S_IFMT)))
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
static int kill_priv(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
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
	if ((rc = kill_priv(fs, txn, ino, in, set)))
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

/* Read the regular file `ino`: -EISDIR for a directory, `other` for any
 * other type. */
static int get_file(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in, int other)
{
	int rc = dbfs_inode_get(fs, txn, ino, in);
	if (rc)
		return rc;
	if (S_ISDIR(in->mode))
		return -EISDIR;
	return S_ISREG(in->mode) ? 0 : other;
}

int dbfs_op_write(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t off, const void *buf,
		  size_t len, unsigned kill)
{
	struct dbfs_inode in;
	uint64_t cost = 0;
	int rc = get_file(fs, txn, ino, &in, -EINVAL);
	if (rc)
		return rc;
	if (off > DBFS_MAX_FILE_SIZE || len > DBFS_MAX_FILE_SIZE - off)
		return -EFBIG;
	if (!len)
		return 0;
	if ((rc = dbfs_space_check(fs)))
		return rc;
	if (fs->quota_bytes) {
		if ((rc = dbfs_data_write_cost(fs, txn, ino, off, len, &cost)))
			return rc;
		if ((rc = check_byte_quota(fs, txn, cost)))
			return rc;
	}
	if ((rc = kill_priv(fs, txn, ino, &in, kill)) ||
	    (rc = dbfs_data_write(fs, txn, ino, &in, off, buf, len)))
		return rc;
	dbfs_touch(&in, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, ino, &in)))
		return rc;
	return note(fs, txn, &(struct dbfs_ev_note){.op = DBFS_EV_WRITE, .ino = ino, .in = &in,
						     .off = off, .len = len});
}

int dbfs_op_fallocate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int mode, uint64_t off,
		      uint64_t len)
{
	struct dbfs_inode in;
	int rc = get_file(fs, txn, ino, &in, -ENODEV);
	if (rc)
		return rc;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (len == 0)
		return -EINVAL;
	if (off > DBFS_MAX_FILE_SIZE || len > DBFS_MAX_FILE_SIZE - off)
		return -EFBIG;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		rc = dbfs_data_punch(fs, txn, ino, &in, off, len);
	} else {
		uint64_t end = off + len, cost = 0;
		if ((mode & FALLOC_FL_KEEP_SIZE) && end > in.size)
			end = in.size;
		if (end > off) {
			if ((rc = dbfs_space_check(fs)) ||
			    (rc = dbfs_data_write_cost(fs, txn, ino, off, end - off, &cost)) ||
			    (rc = check_byte_quota(fs, txn, cost)))
				return rc;
			rc = dbfs_data_allocate(fs, txn, ino, &in, off, end - off);
		}
		if (!rc && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > in.size)
			in.size = off + len;
	}
	if (rc)
		return rc;
	dbfs_touch(&in, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, ino, &in)))
		return rc;
	return note(fs, txn, &(struct dbfs_ev_note){
				     .op = (mode & FALLOC_FL_PUNCH_HOLE) ? DBFS_EV_PUNCH
									: DBFS_EV_FALLOCATE,
				     .ino = ino, .in = &in, .off = off, .len = len});
}

int dbfs_op_free_piece(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t off, uint64_t end,
		       int *more)
{
	const uint64_t bs = fs->block_size;
	struct dbfs_inode in;
	uint64_t cut;
	*more = 0;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc || !S_ISREG(in.mode) || off >= in.size)
		return rc == -ENOENT ? 0 : rc;
	bool truncate = end == UINT64_MAX;
	uint64_t first = off / bs + (off % bs != 0);
	uint64_t last = (end < in.size ? end : in.size) / bs; /* whole blocks: [first, last) */
	if (truncate)
		last = UINT64_MAX;
	if ((rc = dbfs_data_free_cut(fs, txn, ino, first, last, &cut)) || cut == first ||
	    cut * bs >= in.size)
		return rc;
	if (truncate)
		rc = dbfs_data_truncate_now(fs, txn, ino, &in, cut * bs);
	else
		rc = dbfs_data_punch(fs, txn, ino, &in, cut * bs, (last - cut) * bs);
	if (rc)
		return rc;
	*more = 1;
	dbfs_touch(&in, 0, 1, 1);
	return dbfs_inode_put(fs, txn, ino, &in);
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

static __thread unsigned char copybuf[DBFS_BLOCK_SIZE];

int dbfs_op_copy_range(struct dbfs *fs, MDB_txn *txn, uint64_t ino_in, uint64_t off_in,
		       uint64_t ino_out, uint64_t off_out, size_t len, size_t *copied)
{
	struct dbfs_inode src, dst;
	int rc;
	*copied = 0;
	if ((rc = dbfs_inode_get(fs, txn, ino_in, &src)) ||
	    (rc = dbfs_inode_get(fs, txn, ino_out, &dst)))
		return rc;
	if (!S_ISREG(src.mode) || !S_ISREG(dst.mode))
		return S_ISDIR(src.mode) || S_ISDIR(dst.mode) ? -EISDIR : -EINVAL;
	if (off_in >= src.size)
		return 0;
	if (len > src.size - off_in)
		len = src.size - off_in;
	if (len > COPY_MAX)
		len = COPY_MAX;
	if (off_out > DBFS_MAX_FILE_SIZE || len > DBFS_MAX_FILE_SIZE - off_out)
		return -EFBIG;
	if (ino_in == ino_out && off_in < off_out + len && off_out < off_in + len)
		return -EINVAL;
	if ((rc = dbfs_space_check(fs)))
		return rc;
	if (fs->quota_bytes) {
		uint64_t cost;
		if ((rc = dbfs_data_write_cost(fs, txn, ino_out, off_out, len, &cost)) ||
		    (rc = check_byte_quota(fs, txn, cost)))
			return rc;
	}
	while (*copied < len) {
		struct iovec iov[4];
		size_t got, chunk = fs->block_size - ((off_in + *copied) % fs->block_size);
		if (chunk > len - *copied)
			chunk = len - *copied;
		if ((rc = dbfs_inode_get(fs, txn, ino_in, &src)))
			return rc;
		int n;
		if ((rc = dbfs_data_map(fs, txn, ino_in, &src, off_in + *copied, chunk, iov, 4,
					&got, &n)))
			return rc;
		size_t at = 0;
		for (int i = 0; i < n; i++) {
			memcpy(copybuf + at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
		if (!at)
			break;
		if (ino_in == ino_out)
			dst = src;
		if ((rc = dbfs_data_write(fs, txn, ino_out, &dst, off_out + *copied, copybuf, at)))
			return rc;
		if ((rc = dbfs_inode_put(fs, txn, ino_out, &dst)))
			return rc;
		*copied += at;
	}
	dbfs_touch(&dst, 0, 1, 1);
	if ((rc = dbfs_inode_put(fs, txn, ino_out, &dst)))
		return rc;
	if (!*copied)
		return 0;
	return note(fs, txn, &(struct dbfs_ev_note){.op = DBFS_EV_WRITE, .ino = ino_out,
						     .in = &dst, .off = off_out, .len = *copied});
}

int dbfs_op_reap(struct dbfs *fs, MDB_txn *txn, uint64_t ino)
{
	struct dbfs_inode in;
	/* shared: it waits in the orphan table (dbfs/shared.h) */
	if (fs->shared || dbfs_lookups_count(&fs->lookups, ino))
		return 0;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (in.nlink)
		return 0;
	bool later;
	if ((rc = dbfs_reclaim_defer(fs, txn, ino, &in, &later)) || later)
		return rc; /* a large file: freed in the background (reclaim.c) */
	int more;
	rc = dbfs_inode_destroy(fs, txn, ino, &more);
	if (!rc && more)
		dbfs_reap_queue(fs, ino); /* the rest in the next batch */
	return rc;
}
