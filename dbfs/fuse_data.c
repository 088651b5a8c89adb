/*
 * FUSE requests on contents: readlink and read (with the relatime rule),
 * write, flush (close-to-open in a shared store), fsync, fallocate and
 * copy_file_range.
 */
#include "dbfs/fuse_private.h"
#include "dbfs/shared.h"

/* A read of up to 1 MiB over blocks of 4080 bytes, with zero runs (more
 * pieces than that are copied, see op_read). */
#define IOV_MAX_READ 320

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
	dbfs_fuse_mark_atime(fs, ino);
	fuse_reply_readlink(req, buf);
}

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
void dbfs_fuse_mark_atime(struct dbfs *fs, uint64_t ino)
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
	/* O_SYNC, O_DSYNC (or RWF_DSYNC) through a direct handle: the kernel
	 * sends no fsync after it (through the page cache it does) */
	if (!rc && fi && fi->fh == DBFS_FH_DIRECT && (fi->flags & O_DSYNC))
		rc = dbfs_sync(fs); /* committed, not durable: EIO as fsync's */
	if (rc) {
		reply_err(req, rc);
		return;
	}
	fs->cnt.write_bytes += size;
	fuse_reply_write(req, size);
	if (!fi || fi->fh != DBFS_FH_DIRECT) /* a direct write leaves no page */
		dbfs_cache_note(fs, ino, size, c.off + size);
	if (c.append && c.off != (uint64_t)off)
		dbfs_shared_self_inval(fs, ino); /* our kernel's size is off too */
}

/* A close. Exclusive: nothing to do (ENOSYS: the kernel sends no more).
 * Shared: answered once the other processes' kernels forgot what this
 * process changed (close-to-open; a timeout still closes), maybe later,
 * from the notifier (shared_barrier.c). */
void dbfs_fuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	struct dbfs *fs = req_fs(req);
	if (!fs->shared) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	dbfs_shared_flush(fs, req);
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

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
}

GUARDED(readlink, (fuse_req_t req, fuse_ino_t i), (req, i))
GUARDED(read, (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, ffi *fi), (req, i, s, o, fi))
GUARDED(write, (fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o, ffi *fi),
	(req, i, b, s, o, fi))
GUARDED(fsync, (fuse_req_t req, fuse_ino_t i, int d, ffi *fi), (req, i, d, fi))
GUARDED(fsyncdir, (fuse_req_t req, fuse_ino_t i, int d, ffi *fi), (req, i, d, fi))
GUARDED(fallocate, (fuse_req_t req, fuse_ino_t i, int m, off_t o, off_t l, ffi *fi),
	(req, i, m, o, l, fi))
GUARDED(copy_file_range,
	(fuse_req_t req, fuse_ino_t i, off_t o, ffi *fi, fuse_ino_t i2, off_t o2, ffi *fi2,
	 size_t l, int f),
	(req, i, o, fi, i2, o2, fi2, l, f))

void dbfs_fuse_data_ops(struct fuse_lowlevel_ops *o)
{
	o->readlink = g_readlink;
	o->read = g_read;
	o->write = g_write;
	o->fsync = g_fsync;
	o->fsyncdir = g_fsyncdir;
	o->fallocate = g_fallocate;
	o->copy_file_range = g_copy_file_range;
}
