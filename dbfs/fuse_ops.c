/*
 * The FUSE low-level adapter: decode a request, run the core operation in
 * a read transaction or through the group committer, map the error, reply.
 * Every handler ends in exactly one fuse_reply_* (or fuse_reply_none).
 *
 * Lookup counts: every reply that hands the kernel an entry (lookup,
 * create, mknod, mkdir, symlink, link, readdirplus except . and ..) adds a
 * reference in fs->lookups; forget drops them and reaps unlinked inodes.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <fuse_lowlevel.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"
#include "dbfs/shared.h"

/* A read of up to 1 MiB over blocks of 4080 bytes, with zero runs (more
 * pieces than that are copied, see op_read). */
#define IOV_MAX_READ 320

static struct dbfs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void reply_err(fuse_req_t req, int rc)
{
	struct dbfs *fs = req_fs(req);
	int e = -dbfs_errno(rc);
	if (e)
		dbfs_count_error(fs, e);
	fuse_reply_err(req, e);
}

static void fill_entry(struct dbfs *fs, struct fuse_entry_param *e, uint64_t ino,
		       const struct dbfs_inode *in)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = fs->opt.attr_timeout;
	e->entry_timeout = fs->opt.entry_timeout;
	dbfs_inode_to_stat(in, ino, &e->attr);
}

/* Reply with an entry and count the kernel's new reference. */
static void reply_entry(fuse_req_t req, uint64_t ino, const struct dbfs_inode *in)
{
	struct dbfs *fs = req_fs(req);
	struct fuse_entry_param e;
	fill_entry(fs, &e, ino, in);
	if (dbfs_lookups_ref(&fs->lookups, ino, 1)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fuse_reply_entry(req, &e))
		dbfs_lookups_unref(&fs->lookups, ino, 1); /* interrupted: kernel took nothing */
}

static struct dbfs_cred req_cred(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct dbfs_cred cr = {c->uid, c->gid, c->umask};
	return cr;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct dbfs *fs = userdata;
	if (fs->opt.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	/* Wanted when the kernel has them. POSIX_ACL: the kernel enforces
	 * ACLs we store. NO_OPEN(DIR)_SUPPORT: see op_open. There is no create
	 * handler: a file made by FUSE_CREATE is released with a FUSE_RELEASE
	 * request until some open answered ENOSYS, while after FUSE_CREATE
	 * answered ENOSYS the kernel creates with FUSE_MKNOD and opens
	 * locally (still FMODE_CREATED, so O_CREAT|O_WRONLY on a new mode-0444
	 * file works). */
	static const unsigned caps[] = {
		FUSE_CAP_POSIX_ACL,      FUSE_CAP_DONT_MASK,       FUSE_CAP_READDIRPLUS,
		FUSE_CAP_PARALLEL_DIROPS, FUSE_CAP_ASYNC_DIO,      FUSE_CAP_CACHE_SYMLINKS,
		FUSE_CAP_NO_OPEN_SUPPORT, FUSE_CAP_NO_OPENDIR_SUPPORT,
	};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (conn->capable & caps[i])
			conn->want |= caps[i];
	/* With no open handler the kernel never tells us about O_TRUNC:
	 * let it send a setattr instead. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* shared: opens come here, so that closes send the flush that waits
	 * for the other processes (close-to-open, dbfs/shared.h) */
	fs->no_open = !fs->shared && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
	/* We are the only writer of the store: cached pages stay valid. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_write = 1u << 20;
	conn->max_readahead = DBFS_READ_AHEAD;
	conn->time_gran = 1;
}

/*
 * A new name's EEXIST in a shared store: the kernel believed the name
 * free (a negative or missing entry) while another process made it (the
 * invalidation is on its way). ESTALE makes the VFS run the call again
 * with LOOKUP_REVAL, which looks the name up afresh: an open with O_CREAT
 * then opens the file another process made, mkdir or O_EXCL get EEXIST
 * from the VFS, as on a local file system. Exclusive stores never see it.
 */
static int new_name_rc(fuse_req_t req, int rc)
{
	return rc == -EEXIST && req_fs(req)->shared ? -ESTALE : rc;
}

/* ---- opening ---- */

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

/* ---- lookups and attributes ---- */

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
		return dbfs_trim_uncover_piece(fs, txn, c->ino, (uint64_t)c->st.st_size,
					       &c->more) ?:
		       (c->more ? 0 : dbfs_op_setattr(fs, txn, c->ino, &c->st, c->set, &c->out));
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

static void mark_atime(struct dbfs *fs, uint64_t ino); /* with op_read's atime rule */

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct dbfs *fs = req_fs(req);
	char buf[DBFS_SYMLINK_MAX + 1];
	const char *t;
	size_t len = 0;
	MDB_txn *txn;
	fs->cnt.ops++;
	int rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = dbfs_inode_get_link(fs, txn, ino, &t, &len);
		if (!rc) {
			if (len > DBFS_SYMLINK_MAX)
				len = DBFS_SYMLINK_MAX;
			memcpy(buf, t, len);
		}
		dbfs_read_end(fs, txn);
	}
	if (rc) {
		reply_err(req, rc);
		return;
	}
	buf[len] = '\0';
	mark_atime(fs, ino);
	fuse_reply_readlink(req, buf);
}

/* ---- creating and removing names ---- */

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

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct mknod_ctx c = {.parent = parent, .name = name, .mode = mode, .rdev = rdev};
	int rc = do_mknod(req, &c);
	if (rc)
		reply_err(req, new_name_rc(req, rc));
	else
		reply_entry(req, c.ino, &c.in);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	op_mknod(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct mknod_ctx c = {.parent = parent, .name = name, .mode = S_IFLNK | 0777,
			      .link = link};
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

/* ---- file I/O ---- */

struct atime_ctx {
	uint64_t ino;
};

static int atime_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct dbfs_inode in;
	uint64_t ino = ((struct atime_ctx *)arg)->ino;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	dbfs_touch(&in, 1, 0, 0);
	return dbfs_inode_put(fs, txn, ino, &in);
}

/* relatime: update atime when it is not newer than mtime/ctime or older
 * than a day, so that reads rarely write. */
static int atime_due(const struct dbfs_inode *in)
{
	int64_t s;
	uint32_t ns;
	if (in->atime_sec < in->mtime_sec ||
	    (in->atime_sec == in->mtime_sec && in->atime_nsec <= in->mtime_nsec))
		return 1;
	if (in->atime_sec < in->ctime_sec ||
	    (in->atime_sec == in->ctime_sec && in->atime_nsec <= in->ctime_nsec))
		return 1;
	dbfs_now(&s, &ns);
	return s - in->atime_sec >= 86400;
}

/*
 * POSIX: reading a directory (readdir) or a symbolic link (readlink, and
 * so following it) marks its atime; here with op_read's relatime rule.
 * Call before the reply, after which the kernel asks for the attributes
 * again. What the kernel caches (listings, link targets) is read from us
 * again once it changed, which is when relatime wants the update anyway.
 */
static void mark_atime(struct dbfs *fs, uint64_t ino)
{
	struct dbfs_inode in;
	MDB_txn *txn;
	if (fs->opt.read_only || dbfs_read_begin(fs, &txn))
		return;
	int rc = dbfs_inode_get(fs, txn, ino, &in);
	dbfs_read_end(fs, txn);
	if (!rc && atime_due(&in)) {
		struct atime_ctx a = {ino};
		dbfs_write(fs, atime_fn, &a);
	}
}

/* Count a request that reads inode `ino`: open a read transaction and read
 * it. *txn is NULL when no transaction could be opened (nothing to end). */
static int read_inode(struct dbfs *fs, fuse_ino_t ino, MDB_txn **txn, struct dbfs_inode *in)
{
	fs->cnt.ops++;
	int rc = dbfs_read_begin(fs, txn);
	if (rc) {
		*txn = NULL;
		return rc;
	}
	return dbfs_inode_get(fs, *txn, ino, in);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct dbfs *fs = req_fs(req);
	struct iovec iov[IOV_MAX_READ];
	struct dbfs_inode in;
	MDB_txn *txn;
	void *tail = NULL;
	size_t got = 0;
	int n = 0;
	(void)fi;
	int rc = read_inode(fs, ino, &txn, &in);
	if (!txn) {
		reply_err(req, rc);
		return;
	}
	if (!rc && atime_due(&in) && !fs->opt.read_only) {
		/* Before the reply: the kernel asks for attributes again after a
		 * read, and must see the new atime. Rare (relatime). */
		struct atime_ctx a = {ino};
		dbfs_read_end(fs, txn);
		dbfs_write(fs, atime_fn, &a);
		rc = dbfs_read_begin(fs, &txn);
		if (rc) {
			reply_err(req, rc);
			return;
		}
		rc = dbfs_inode_get(fs, txn, ino, &in);
	}
	if (!rc && S_ISDIR(in.mode))
		rc = -EISDIR;
	if (!rc) {
		rc = dbfs_data_map(fs, txn, ino, &in, (uint64_t)off, size, iov, IOV_MAX_READ - 1,
				   &got, &n);
	}
	/* Out of iovecs (many short blocks and holes): copy the rest. A short
	 * reply is end of file to the kernel, which would shrink its size. */
	if (!rc && got < size && (uint64_t)off + got < in.size) {
		uint64_t at = (uint64_t)off + got;
		size_t rest = in.size - at < size - got ? (size_t)(in.size - at) : size - got, more;
		tail = malloc(rest);
		rc = tail ? dbfs_data_read(fs, txn, ino, &in, at, rest, tail, &more) : -ENOMEM;
		if (!rc) {
			iov[n].iov_base = tail;
			iov[n++].iov_len = more;
			got += more;
		}
	}
	if (rc) {
		dbfs_read_end(fs, txn);
		free(tail);
		reply_err(req, rc);
		return;
	}
	/* The iovecs point into the map: reply before ending the transaction. */
	fuse_reply_iov(req, iov, n);
	dbfs_read_end(fs, txn);
	free(tail);
	fs->cnt.read_bytes += got;
	dbfs_cache_note(fs, ino, got, in.size);
}

struct write_ctx {
	uint64_t ino, off;
	const void *buf;
	size_t len;
	unsigned kill;
	bool append; /* O_APPEND in a shared store: at the size in the store */
	int more;    /* a piece of the blocks it uncovers was freed: again */
};

static int write_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct write_ctx *c = arg;
	if (c->append) {
		/* the kernel's offset is its cached size, which another process
		 * may have outgrown: append where the file ends now */
		struct dbfs_inode in;
		int rc = dbfs_inode_get(fs, txn, c->ino, &in);
		if (rc)
			return rc;
		c->off = in.size;
	}
	/* first the blocks a truncate left to the reclaim that the write
	 * uncovers, a piece per pass (trim.c); the write in the last pass */
	return dbfs_trim_uncover_piece(fs, txn, c->ino, c->off + c->len, &c->more) ?:
	       (c->more ? 0 : dbfs_op_write(fs, txn, c->ino, c->off, c->buf, c->len, c->kill));
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct dbfs *fs = req_fs(req);
	struct write_ctx c = {ino, (uint64_t)off, buf, size, 0,
			      fs->shared && fi && (fi->flags & O_APPEND), 0};
	if (fs->killpriv_v2)
		c.kill = DBFS_SET_KILL_CAPS | (dbfs_io_write_kill() ? DBFS_SET_KILL_SUIDGID : 0);
	fs->cnt.ops++;
	int rc = -EINVAL;
	if (off >= 0)
		do
			rc = dbfs_write_sized(fs, write_fn, &c, size);
		while (!rc && c.more);
	if (rc) {
		reply_err(req, rc);
		return;
	}
	fs->cnt.write_bytes += size;
	fuse_reply_write(req, size);
	dbfs_cache_note(fs, ino, size, c.off + size);
	if (c.append && c.off != (uint64_t)off)
		dbfs_shared_self_inval(fs, ino); /* our kernel's size is off too */
}

/* A close. Exclusive: nothing to do (ENOSYS: the kernel sends no more).
 * Shared: return once the other processes' kernels forgot what this
 * process changed (close-to-open; a timeout still closes). */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	struct dbfs *fs = req_fs(req);
	if (!fs->shared) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	dbfs_shared_barrier(fs);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	struct dbfs *fs = req_fs(req);
	fs->cnt.ops++;
	int rc = dbfs_sync(fs); /* a failed flush: read-only (health.c) */
	fuse_reply_err(req, -rc);
}

struct falloc_ctx {
	uint64_t ino;
	int mode;
	uint64_t off, len;
	int more; /* a piece of the hole was punched, or of the blocks waiting
		   * for the reclaim that it uncovers freed: again (as setattr_fn) */
};

static int falloc_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct falloc_ctx *c = arg;
	int rc = 0;
	c->more = 0;
	if (c->mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) /* one it accepts */
		rc = dbfs_op_free_piece(fs, txn, c->ino, c->off, c->off + c->len, &c->more);
	else if (!(c->mode & FALLOC_FL_KEEP_SIZE))
		rc = dbfs_trim_uncover_piece(fs, txn, c->ino, c->off + c->len, &c->more);
	if (rc || c->more)
		return rc;
	return dbfs_op_fallocate(fs, txn, c->ino, c->mode, c->off, c->len);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct falloc_ctx c = {ino, mode, (uint64_t)off, (uint64_t)len, 0};
	(void)fi;
	req_fs(req)->cnt.ops++;
	int rc = off < 0 || len <= 0 ? -EINVAL : 0;
	if (!rc && ((uint64_t)off > DBFS_MAX_FILE_SIZE ||
		    (uint64_t)len > DBFS_MAX_FILE_SIZE - (uint64_t)off))
		rc = -EFBIG;
	if (!rc && !(mode & FALLOC_FL_PUNCH_HOLE)) {
		/* Allocation writes zeros: in pieces, so that each transaction
		 * stays within the space reserve. */
		uint64_t end = (uint64_t)off + (uint64_t)len;
		for (uint64_t at = (uint64_t)off; !rc && at < end; at += DBFS_BATCH_BYTES) {
			c.off = at;
			c.len = end - at < DBFS_BATCH_BYTES ? end - at : DBFS_BATCH_BYTES;
			do
				rc = dbfs_write_sized(req_fs(req), falloc_fn, &c, c.len);
			while (!rc && c.more);
		}
	} else if (!rc) {
		do
			rc = dbfs_write(req_fs(req), falloc_fn, &c);
		while (!rc && c.more);
	}
	reply_err(req, rc);
}

struct copy_ctx {
	uint64_t ino_in, off_in, ino_out, off_out;
	size_t len, copied;
	int more; /* a piece of the waiting blocks it uncovers was freed: again */
};

static int copy_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct copy_ctx *c = arg;
	return dbfs_trim_uncover_piece(fs, txn, c->ino_out, c->off_out + c->len, &c->more) ?:
	       (c->more ? 0
			: dbfs_op_copy_range(fs, txn, c->ino_in, c->off_in, c->ino_out,
					     c->off_out, c->len, &c->copied));
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct dbfs *fs = req_fs(req); /* the reply frees req */
	struct copy_ctx c = {ino_in, (uint64_t)off_in, ino_out, (uint64_t)off_out, len, 0, 0};
	(void)fi_in;
	(void)fi_out;
	fs->cnt.ops++;
	if (c.len > DBFS_BATCH_BYTES)
		c.len = DBFS_BATCH_BYTES; /* a short copy: the caller loops */
	int rc = -EINVAL;
	if (!flags)
		do
			rc = dbfs_write_sized(fs, copy_fn, &c, c.len);
		while (!rc && c.more);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_write(req, c.copied);
	if (!rc)
		dbfs_cache_note(fs, ino_out, c.copied, (uint64_t)off_out + c.copied);
}

/* ---- directories ---- */

struct rd_ctx {
	fuse_req_t req;
	struct dbfs *fs;
	MDB_txn *txn;
	char *buf;
	size_t size, used;
	int plus;
	int err;
};

static int rd_add(struct rd_ctx *r, const char *name, uint64_t ino, uint32_t type,
		  uint64_t next_off, int count_ref)
{
	size_t left = r->size - r->used;
	size_t n;
	if (r->plus) {
		struct fuse_entry_param e;
		struct dbfs_inode in;
		int rc = dbfs_inode_get(r->fs, r->txn, ino, &in);
		if (rc == -ENOENT)
			return 0; /* raced with a delete in the store: skip */
		if (rc) {
			r->err = rc;
			return 1;
		}
		fill_entry(r->fs, &e, ino, &in);
		if (!count_ref)
			e.ino = 0; /* . and ..: the kernel takes no reference */
		n = fuse_add_direntry_plus(r->req, r->buf + r->used, left, name, &e,
					   (off_t)next_off);
		if (n > left)
			return 1;
		if (count_ref && dbfs_lookups_ref(&r->fs->lookups, ino, 1)) {
			r->err = -ENOMEM;
			return 1;
		}
	} else {
		struct stat st;
		memset(&st, 0, sizeof(st));
		st.st_ino = ino;
		st.st_mode = type;
		n = fuse_add_direntry(r->req, r->buf + r->used, left, name, &st, (off_t)next_off);
		if (n > left)
			return 1;
	}
	r->used += n;
	return 0;
}

static int rd_cb(void *arg, uint64_t cookie, uint64_t ino, uint32_t type, const char *name,
		 size_t len)
{
	char nm[DBFS_NAME_MAX + 1];
	memcpy(nm, name, len);
	nm[len] = '\0';
	return rd_add(arg, nm, ino, type, cookie, 1);
}

static __thread char rd_buf[64 * 1024];

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct dbfs *fs = req_fs(req);
	struct dbfs_inode din;
	struct rd_ctx r = {.req = req, .fs = fs, .size = size, .plus = plus};
	fs->cnt.ops++;
	mark_atime(fs, ino);
	r.buf = size <= sizeof(rd_buf) ? rd_buf : malloc(size);
	if (!r.buf) {
		reply_err(req, -ENOMEM);
		return;
	}
	int rc = dbfs_read_begin(fs, &r.txn);
	if (!rc) {
		rc = dbfs_inode_get(fs, r.txn, ino, &din);
		if (!rc && !S_ISDIR(din.mode))
			rc = -ENOTDIR;
		uint64_t o = off < 0 ? 0 : (uint64_t)off;
		if (!rc && o < DBFS_COOKIE_DOT && rd_add(&r, ".", ino, S_IFDIR, DBFS_COOKIE_DOT, 0))
			o = UINT64_MAX;
		if (!rc && o < DBFS_COOKIE_DOTDOT && o != UINT64_MAX &&
		    rd_add(&r, "..", din.parent ? din.parent : ino, S_IFDIR, DBFS_COOKIE_DOTDOT, 0))
			o = UINT64_MAX;
		if (!rc && o != UINT64_MAX) {
			uint64_t from = o + 1 > DBFS_COOKIE_FIRST ? o + 1 : DBFS_COOKIE_FIRST;
			rc = dbfs_dir_iter(fs, r.txn, ino, from, rd_cb, &r);
			if (rc == 1)
				rc = 0;
		}
		if (!rc)
			rc = r.err;
		dbfs_read_end(fs, r.txn);
	}
	if (rc && !r.used)
		reply_err(req, rc);
	else
		fuse_reply_buf(req, r.buf, r.used);
	dbfs_cache_note(fs, ino, r.used, UINT64_MAX); /* the readdir cache */
	if (r.buf != rd_buf)
		free(r.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 1);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
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

/* ---- extended attributes ---- */

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

/*
 * The map guard around every request (guard.h): a SIGBUS in this store's
 * maps while the handler runs comes back here; the request gets EIO unless
 * its reply already went out, and every later request of the lost store
 * gets EIO at once. Forgets are never answered, and are not refused: they
 * only count down lookups.
 */
static bool guard_enter(fuse_req_t req, struct dbfs_guard *g)
{
	struct dbfs *fs = req_fs(req);
	if (atomic_load(&fs->map_lost)) {
		dbfs_count_error(fs, EIO);
		fuse_reply_err(req, EIO);
		return false;
	}
	dbfs_io_reply_reset();
	dbfs_guard_push(g, fs);
	return true;
}

static void guard_fault(fuse_req_t req, struct dbfs_guard *g)
{
	dbfs_guard_recovered(g);
	dbfs_count_error(g->fs, EIO);
	if (!dbfs_io_reply_sent())
		fuse_reply_err(req, EIO);
}

#define GUARDED(op, params, args)                           \
	static void g_##op params                           \
	{                                                   \
		struct dbfs_guard g;                        \
		if (!guard_enter(req, &g))                  \
			return;                             \
		if (sigsetjmp(g.jb, 0)) {                   \
			guard_fault(req, &g);               \
			return;                             \
		}                                           \
		op_##op args;                               \
		dbfs_guard_pop(&g);                         \
	}
#define GUARDED_NOREPLY(op, params, args)                   \
	static void g_##op params                           \
	{                                                   \
		struct dbfs_guard g;                        \
		dbfs_guard_push(&g, req_fs(req));           \
		if (sigsetjmp(g.jb, 0)) {                   \
			dbfs_guard_recovered(&g);           \
			return;                             \
		}                                           \
		op_##op args;                               \
		dbfs_guard_pop(&g);                         \
	}

typedef struct fuse_file_info ffi;
GUARDED(lookup, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
GUARDED_NOREPLY(forget, (fuse_req_t req, fuse_ino_t i, uint64_t n), (req, i, n))
GUARDED_NOREPLY(forget_multi, (fuse_req_t req, size_t c, struct fuse_forget_data *f), (req, c, f))
GUARDED(getattr, (fuse_req_t req, fuse_ino_t i, ffi *fi), (req, i, fi))
GUARDED(setattr, (fuse_req_t req, fuse_ino_t i, struct stat *a, int s, ffi *fi),
	(req, i, a, s, fi))
GUARDED(readlink, (fuse_req_t req, fuse_ino_t i), (req, i))
GUARDED(open, (fuse_req_t req, fuse_ino_t i, ffi *fi), (req, i, fi))
GUARDED(opendir, (fuse_req_t req, fuse_ino_t i, ffi *fi), (req, i, fi))
GUARDED(mknod, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t d),
	(req, p, n, m, d))
GUARDED(mkdir, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m), (req, p, n, m))
GUARDED(symlink, (fuse_req_t req, const char *l, fuse_ino_t p, const char *n), (req, l, p, n))
GUARDED(unlink, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
GUARDED(rmdir, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
GUARDED(rename,
	(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, unsigned f),
	(req, p, n, np, nn, f))
GUARDED(link, (fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn), (req, i, np, nn))
GUARDED(read, (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, ffi *fi), (req, i, s, o, fi))
GUARDED(write, (fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o, ffi *fi),
	(req, i, b, s, o, fi))
GUARDED(fsync, (fuse_req_t req, fuse_ino_t i, int d, ffi *fi), (req, i, d, fi))
GUARDED(readdir, (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, ffi *fi), (req, i, s, o, fi))
GUARDED(readdirplus, (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, ffi *fi),
	(req, i, s, o, fi))
GUARDED(fsyncdir, (fuse_req_t req, fuse_ino_t i, int d, ffi *fi), (req, i, d, fi))
GUARDED(statfs, (fuse_req_t req, fuse_ino_t i), (req, i))
GUARDED(setxattr,
	(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s, int f),
	(req, i, n, v, s, f))
GUARDED(getxattr, (fuse_req_t req, fuse_ino_t i, const char *n, size_t s), (req, i, n, s))
GUARDED(listxattr, (fuse_req_t req, fuse_ino_t i, size_t s), (req, i, s))
GUARDED(removexattr, (fuse_req_t req, fuse_ino_t i, const char *n), (req, i, n))
GUARDED(fallocate, (fuse_req_t req, fuse_ino_t i, int m, off_t o, off_t l, ffi *fi),
	(req, i, m, o, l, fi))
GUARDED(copy_file_range,
	(fuse_req_t req, fuse_ino_t i, off_t o, ffi *fi, fuse_ino_t i2, off_t o2, ffi *fi2,
	 size_t l, int f),
	(req, i, o, fi, i2, o2, fi2, l, f))

static const struct fuse_lowlevel_ops dbfs_ops = {
	.init = op_init,
	.lookup = g_lookup,
	.forget = g_forget,
	.forget_multi = g_forget_multi,
	.getattr = g_getattr,
	.setattr = g_setattr,
	.readlink = g_readlink,
	.open = g_open,
	.flush = op_flush,
	.opendir = g_opendir,
	.mknod = g_mknod,
	.mkdir = g_mkdir,
	.symlink = g_symlink,
	.unlink = g_unlink,
	.rmdir = g_rmdir,
	.rename = g_rename,
	.link = g_link,
	.read = g_read,
	.write = g_write,
	.fsync = g_fsync,
	.readdir = g_readdir,
	.readdirplus = g_readdirplus,
	.fsyncdir = g_fsyncdir,
	.statfs = g_statfs,
	.setxattr = g_setxattr,
	.getxattr = g_getxattr,
	.listxattr = g_listxattr,
	.removexattr = g_removexattr,
	.fallocate = g_fallocate,
	.copy_file_range = g_copy_file_range,
};

void dbfs_set_session(struct dbfs *fs, struct fuse_session *se)
{
	if (!se)
		dbfs_shared_session(fs, NULL); /* joined before the session goes */
	dbfs_expire_session(fs, se); /* fs->se, under the expiry thread's lock */
	if (se)
		dbfs_shared_session(fs, se); /* the notifier of a shared store */
}

const struct fuse_lowlevel_ops *dbfs_fuse_ops(void)
{
	return &dbfs_ops;
}
