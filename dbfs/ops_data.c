/*
 * Core operations on contents, on one transaction: write, fallocate,
 * freeing a range in pieces, copy_file_range, and reaping an inode.
 */
#include "dbfs/ops_private.h"

#define COPY_MAX (64u << 20)

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
	if ((rc = dbfs_op_kill_priv(fs, txn, ino, &in, kill)) ||
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
