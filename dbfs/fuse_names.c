/*
 * FUSE requests on names: lookup and forget (the kernel's references,
 * see fuse_private.h), and creating, removing, renaming and linking names.
 */
#include "dbfs/fuse_private.h"

struct lookup_ctx {
	uint64_t ino;
	struct dbfs_inode in;
};

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct dbfs *fs = req_fs(req);
	MDB_txn *txn;
	struct lookup_ctx l;
	fs->cnt.ops++;
	int rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = dbfs_op_lookup(fs, txn, parent, name, &l.ino, &l.in);
		dbfs_read_end(fs, txn);
	}
	if (rc == -ENOENT && fs->opt.entry_timeout > 0) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->opt.entry_timeout;
		fuse_reply_entry(req, &e); /* negative entry, cached */
	} else if (rc) {
		reply_err(req, rc);
	} else {
		reply_entry(req, l.ino, &l.in);
	}
}

static void forget_one(struct dbfs *fs, uint64_t ino, uint64_t n)
{
	if (dbfs_lookups_unref(&fs->lookups, ino, n) == 0) {
		dbfs_cache_forget(fs, ino);
		if (ino != DBFS_ROOT_INO)
			dbfs_reap_later(fs, ino);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct dbfs *fs = req_fs(req); /* the reply frees req */
	forget_one(fs, ino, nlookup);
	fuse_reply_none(req);
	dbfs_reap_due(fs);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	struct dbfs *fs = req_fs(req); /* the reply frees req */
	for (size_t i = 0; i < count; i++)
		forget_one(fs, f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
	dbfs_reap_due(fs);
}

struct mknod_ctx {
	struct dbfs_cred cr;
	uint64_t parent;
	const char *name;
	uint32_t mode;
	uint64_t rdev;
	const char *link;
	uint64_t ino;
	struct dbfs_inode in;
};

static int mknod_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct mknod_ctx *c = arg;
	return dbfs_op_mknod(fs, txn, &c->cr, c->parent, c->name, c->mode, c->rdev, c->link,
			     &c->ino, &c->in);
}

static int do_mknod(fuse_req_t req, struct mknod_ctx *c)
{
	struct dbfs *fs = req_fs(req);
	fs->cnt.ops++;
	c->cr = req_cred(req);
	return dbfs_write(fs, mknod_fn, c);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct mknod_ctx c = {.parent = parent, .name = name, .mode = mode, .rdev = rdev};
	int rc = do_mknod(req, &c);
	if (rc)
		reply_err(req, new_name_rc(req, rc));
	else
		reply_entry(req, c.ino, &c.in);
}

/*
 * open(O_CREAT) of a name the kernel knows is free: make the file and open
 * it in one request. A handle opened write-only is answered with direct
 * I/O. Without it the kernel's buffered write path (no writeback_cache)
 * ends a WRITE request after a page it filled only partly and that is not
 * up to date (fs/fuse/file.c, fuse_fill_write_pages): a write(2) that
 * starts inside a page that an earlier write filled partly goes as two
 * requests, so two commits, and tar's 10 KiB records cost 1.5 commits
 * each. Through a direct handle every write(2) is one request (up to
 * max_write). Nothing is lost by it: a write-only descriptor cannot be
 * mapped (mmap needs read access) nor read, and the kernel drops cached
 * pages of the range a direct write covers, so readers through other
 * descriptors see the new data. Read-write creates keep the page cache,
 * and so does every create with writeback_cache, which merges writes.
 * The kernel syncs no direct write itself: one with O_SYNC or O_DSYNC is
 * made durable by op_write (DBFS_FH_DIRECT). The handle holds no other
 * state (op_open); the kernel's later RELEASE of it is answered by libfuse.
 */
static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct mknod_ctx c = {.parent = parent, .name = name, .mode = S_IFREG | (mode & 07777)};
	int rc = do_mknod(req, &c);
	if (rc) {
		reply_err(req, new_name_rc(req, rc));
		return;
	}
	struct dbfs *fs = req_fs(req);
	struct fuse_entry_param e;
	fill_entry(fs, &e, c.ino, &c.in);
	fi->keep_cache = 1;
	/* with writeback_cache the kernel merges writes itself */
	fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY && !fs->opt.writeback_cache;
	fi->fh = fi->direct_io ? DBFS_FH_DIRECT : 0;
	if (dbfs_lookups_ref(&fs->lookups, c.ino, 1)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fuse_reply_create(req, &e, fi))
		dbfs_lookups_unref(&fs->lookups, c.ino, 1); /* interrupted: kernel took nothing */
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	op_mknod(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct mknod_ctx c = {.parent = parent, .name = name, .mode = S_IFLNK | 0777, .link = link};
	int rc = do_mknod(req, &c);
	if (rc)
		reply_err(req, new_name_rc(req, rc));
	else
		reply_entry(req, c.ino, &c.in);
}

struct unlink_ctx {
	uint64_t parent;
	const char *name;
	int dir;
};

static int unlink_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct unlink_ctx *c = arg;
	return dbfs_op_unlink(fs, txn, c->parent, c->name, c->dir);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct unlink_ctx c = {parent, name, 0};
	req_fs(req)->cnt.ops++;
	reply_err(req, dbfs_write(req_fs(req), unlink_fn, &c));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct unlink_ctx c = {parent, name, 1};
	req_fs(req)->cnt.ops++;
	reply_err(req, dbfs_write(req_fs(req), unlink_fn, &c));
}

struct rename_ctx {
	uint64_t op, np;
	const char *on, *nn;
	unsigned flags;
};

static int rename_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct rename_ctx *c = arg;
	return dbfs_op_rename(fs, txn, c->op, c->on, c->np, c->nn, c->flags);
}

/* If parent/name is a directory, drop the kernel's cached listing of it. */
static void inval_listing(struct dbfs *fs, uint64_t parent, const char *name)
{
	MDB_txn *txn;
	uint64_t ino;
	struct dbfs_inode in;

	if (!fs->se || dbfs_read_begin(fs, &txn))
		return;
	int rc = dbfs_op_lookup(fs, txn, parent, name, &ino, &in);
	dbfs_read_end(fs, txn);
	if (!rc && S_ISDIR(in.mode))
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct dbfs *fs = req_fs(req);
	struct rename_ctx c = {parent, newparent, name, newname, flags};
	fs->cnt.ops++;
	int rc = dbfs_write(fs, rename_fn, &c);
	if (!rc && parent != newparent) {
		/* committed; the kernel waits for our reply and holds no lock
		 * on the moved directory's pages */
		inval_listing(fs, newparent, newname);
		if (flags & RENAME_EXCHANGE)
			inval_listing(fs, parent, name);
	}
	reply_err(req, rc);
}

struct link_ctx {
	uint64_t ino, parent;
	const char *name;
	struct dbfs_inode in;
};

static int link_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct link_ctx *c = arg;
	return dbfs_op_link(fs, txn, c->ino, c->parent, c->name, &c->in);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct link_ctx c = {.ino = ino, .parent = newparent, .name = newname};
	req_fs(req)->cnt.ops++;
	int rc = dbfs_write(req_fs(req), link_fn, &c);
	if (rc)
		reply_err(req, new_name_rc(req, rc));
	else
		reply_entry(req, ino, &c.in);
}

GUARDED(lookup, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
GUARDED_NOREPLY(forget, (fuse_req_t req, fuse_ino_t i, uint64_t n), (req, i, n))
GUARDED_NOREPLY(forget_multi, (fuse_req_t req, size_t c, struct fuse_forget_data *f), (req, c, f))
GUARDED(mknod, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t d), (req, p, n, m, d))
GUARDED(create, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *fi),
	(req, p, n, m, fi))
GUARDED(mkdir, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m), (req, p, n, m))
GUARDED(symlink, (fuse_req_t req, const char *l, fuse_ino_t p, const char *n), (req, l, p, n))
GUARDED(unlink, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
GUARDED(rmdir, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
GUARDED(rename,
	(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, unsigned f),
	(req, p, n, np, nn, f))
GUARDED(link, (fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn), (req, i, np, nn))

void dbfs_fuse_names_ops(struct fuse_lowlevel_ops *o)
{
	o->lookup = g_lookup;
	o->forget = g_forget;
	o->forget_multi = g_forget_multi;
	o->mknod = g_mknod;
	o->create = g_create;
	o->mkdir = g_mkdir;
	o->symlink = g_symlink;
	o->unlink = g_unlink;
	o->rmdir = g_rmdir;
	o->rename = g_rename;
	o->link = g_link;
}
