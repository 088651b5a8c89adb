/*
 * FUSE requests on attributes: opening (which holds no state), getattr,
 * setattr (truncates in pieces), statfs and the extended attributes.
 */
#include "dbfs/fuse_private.h"

/*
 * Opening holds no state here (permissions are the kernel's, O_TRUNC comes
 * as a setattr). Where the kernel allows it, answer ENOSYS: it then opens
 * every file (directory) of this mount itself, with its page cache kept
 * (readdir cache for directories), and sends no open or release requests
 * again. libfuse 3.14 leaves that answer to the handler. A cached listing
 * goes stale only when its directory moves to another parent (a new ".."):
 * op_rename invalidates it then.
 */
static void reply_open(fuse_req_t req, struct fuse_file_info *fi, int kernel_opens, int dir)
{
	if (kernel_opens) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fi->cache_readdir = dir;
	fuse_reply_open(req, fi);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	reply_open(req, fi, req_fs(req)->no_open, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	reply_open(req, fi, req_fs(req)->no_opendir, 1);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dbfs *fs = req_fs(req);
	struct dbfs_inode in;
	MDB_txn *txn;
	(void)fi;
	fs->cnt.ops++;
	int rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = dbfs_inode_get(fs, txn, ino, &in);
		dbfs_read_end(fs, txn);
	}
	if (rc) {
		reply_err(req, rc);
		return;
	}
	struct stat st;
	dbfs_inode_to_stat(&in, ino, &st);
	fuse_reply_attr(req, &st, fs->opt.attr_timeout);
	dbfs_reap_due(fs);
}

struct setattr_ctx {
	uint64_t ino;
	struct stat st;
	unsigned set;
	struct dbfs_inode out;
	int more; /* a piece of the truncate was done: again */
};

/* A truncate that frees more than one transaction may is done in pieces
 * (dbfs_op_free_piece): a piece is committed alone (c->more), and the
 * caller comes again; the last piece and the operation share one. */
static int setattr_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct setattr_ctx *c = arg;
	c->more = 0;
	/* where the reclaim can take a large tail (trim.c), it does: what
	 * the truncate frees itself is then below DBFS_RECLAIM_MIN; growing
	 * over blocks that wait for it frees them in pieces first */
	if ((c->set & DBFS_SET_SIZE) && c->st.st_size >= 0 && fs->expire && fs->db_trim)
		return dbfs_trim_uncover_piece(fs, txn, c->ino, (uint64_t)c->st.st_size, &c->more)
			   ?: (c->more ? 0
				       : dbfs_op_setattr(fs, txn, c->ino, &c->st, c->set, &c->out));
	if ((c->set & DBFS_SET_SIZE) && c->st.st_size >= 0) {
		int rc = dbfs_op_free_piece(fs, txn, c->ino, (uint64_t)c->st.st_size, UINT64_MAX,
					    &c->more);
		if (rc || c->more)
			return rc;
	}
	return dbfs_op_setattr(fs, txn, c->ino, &c->st, c->set, &c->out);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct dbfs *fs = req_fs(req);
	struct setattr_ctx c = {.ino = ino, .st = *attr};
	(void)fi;
	fs->cnt.ops++;
	if (to_set & FUSE_SET_ATTR_MODE)
		c.set |= DBFS_SET_MODE;
	if (to_set & FUSE_SET_ATTR_UID)
		c.set |= DBFS_SET_UID;
	if (to_set & FUSE_SET_ATTR_GID)
		c.set |= DBFS_SET_GID;
	if (to_set & FUSE_SET_ATTR_SIZE)
		c.set |= DBFS_SET_SIZE;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		c.set |= DBFS_SET_ATIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		c.set |= DBFS_SET_ATIME;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		c.set |= DBFS_SET_MTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		c.set |= DBFS_SET_MTIME;
	if (to_set & FUSE_SET_ATTR_CTIME)
		c.set |= DBFS_SET_CTIME;
	/* FATTR_KILL_SUIDGID (libfuse's FUSE_SET_ATTR_KILL_SUID bit) */
	if (to_set & FUSE_SET_ATTR_KILL_SUID)
		c.set |= DBFS_SET_KILL_SUIDGID;
	if (fs->killpriv_v2 &&
	    (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE)))
		c.set |= DBFS_SET_KILL_CAPS;
	/* With killpriv_v2 the kernel drops what chown(2) and a write's
	 * file_remove_privs() would kill and flags it only along with a uid,
	 * gid or size. What is left of chown(f, -1, -1), which Linux makes
	 * clear S_ISUID and S_ISGID (with g+x) even for root, or of such a
	 * write, is a request that sets nothing but, with writeback_cache,
	 * the kernel's ctime: it means exactly that. */
	if (fs->killpriv_v2 && !(to_set & ~FUSE_SET_ATTR_CTIME))
		c.set |= DBFS_SET_KILL_SUIDGID | DBFS_SET_KILL_CAPS;
	int rc;
	do
		rc = dbfs_write(fs, setattr_fn, &c);
	while (!rc && c.more);
	if (rc) {
		reply_err(req, rc);
		return;
	}
	struct stat st;
	if (c.set & DBFS_SET_SIZE)
		dbfs_cache_truncated(fs, ino, c.out.size);
	dbfs_inode_to_stat(&c.out, ino, &st);
	fuse_reply_attr(req, &st, fs->opt.attr_timeout);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct dbfs *fs = req_fs(req);
	struct statvfs out;
	(void)ino;
	fs->cnt.ops++;
	int rc = dbfs_statfs(fs, &out);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_statfs(req, &out);
}

struct xattr_ctx {
	uint64_t ino;
	const char *name;
	const void *val;
	size_t len;
	int flags;
	int remove;
};

static int xattr_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct xattr_ctx *c = arg;
	if (c->remove)
		return dbfs_op_removexattr(fs, txn, c->ino, c->name);
	return dbfs_op_setxattr(fs, txn, c->ino, c->name, c->val, c->len, c->flags);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct xattr_ctx c = {ino, name, value, size, flags, 0};
	req_fs(req)->cnt.ops++;
	reply_err(req, dbfs_write(req_fs(req), xattr_fn, &c));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct xattr_ctx c = {ino, name, NULL, 0, 0, 1};
	req_fs(req)->cnt.ops++;
	reply_err(req, dbfs_write(req_fs(req), xattr_fn, &c));
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct dbfs *fs = req_fs(req);
	struct dbfs_inode in;
	MDB_txn *txn;
	MDB_val v;
	int rc = read_inode(fs, ino, &txn, &in);
	if (!txn) {
		reply_err(req, rc);
		return;
	}
	if (!rc)
		rc = dbfs_xattr_get(fs, txn, ino, name, &v);
	if (!rc && size && v.mv_size > size)
		rc = -ERANGE;
	if (rc)
		reply_err(req, rc);
	else if (!size)
		fuse_reply_xattr(req, v.mv_size);
	else
		fuse_reply_buf(req, v.mv_data, v.mv_size);
	dbfs_read_end(fs, txn);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct dbfs *fs = req_fs(req);
	struct dbfs_inode in;
	MDB_txn *txn;
	size_t need = 0;
	char *buf = NULL;
	fs->cnt.ops++;
	if (size && !(buf = malloc(size))) {
		reply_err(req, -ENOMEM);
		return;
	}
	int rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = dbfs_inode_get(fs, txn, ino, &in);
		if (!rc)
			rc = dbfs_xattr_list(fs, txn, ino, buf, size, &need,
					     fuse_req_ctx(req)->uid == 0);
		dbfs_read_end(fs, txn);
	}
	if (rc)
		reply_err(req, rc);
	else if (!size)
		fuse_reply_xattr(req, need);
	else
		fuse_reply_buf(req, buf, need);
	free(buf);
}

GUARDED(getattr, (fuse_req_t req, fuse_ino_t i, ffi *fi), (req, i, fi))
GUARDED(setattr, (fuse_req_t req, fuse_ino_t i, struct stat *a, int s, ffi *fi), (req, i, a, s, fi))
GUARDED(open, (fuse_req_t req, fuse_ino_t i, ffi *fi), (req, i, fi))
GUARDED(opendir, (fuse_req_t req, fuse_ino_t i, ffi *fi), (req, i, fi))
GUARDED(statfs, (fuse_req_t req, fuse_ino_t i), (req, i))
GUARDED(setxattr, (fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s, int f),
	(req, i, n, v, s, f))
GUARDED(getxattr, (fuse_req_t req, fuse_ino_t i, const char *n, size_t s), (req, i, n, s))
GUARDED(listxattr, (fuse_req_t req, fuse_ino_t i, size_t s), (req, i, s))
GUARDED(removexattr, (fuse_req_t req, fuse_ino_t i, const char *n), (req, i, n))

void dbfs_fuse_attr_ops(struct fuse_lowlevel_ops *o)
{
	o->getattr = g_getattr;
	o->setattr = g_setattr;
	o->open = g_open;
	o->opendir = g_opendir;
	o->statfs = g_statfs;
	o->setxattr = g_setxattr;
	o->getxattr = g_getxattr;
	o->listxattr = g_listxattr;
	o->removexattr = g_removexattr;
}
