/*
 * FUSE listings: readdir and readdirplus (whose entries the kernel
 * references, see fuse_private.h), marking the directory's atime.
 */
#include "dbfs/fuse_private.h"

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
	dbfs_fuse_mark_atime(fs, ino);
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

GUARDED(readdir, (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, ffi *fi), (req, i, s, o, fi))
GUARDED(readdirplus, (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, ffi *fi), (req, i, s, o, fi))

void dbfs_fuse_dir_ops(struct fuse_lowlevel_ops *o)
{
	o->readdir = g_readdir;
	o->readdirplus = g_readdirplus;
}
