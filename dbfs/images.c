/*
 * Imaged durable points: the writing side of dbfs.images (format.h; the
 * design is in durable.c, the replay in recover.c).
 *
 * A record is written with a few pwritev calls straight from the map (the
 * pages of a pinned snapshot: no writer changes them) and made durable by
 * one fdatasync of this file alone: a sequential write, where a flush of
 * data.mdb writes the same pages scattered over the store, and every page
 * version that a burst of commits left dirty since the last flush.
 *
 * Records overwrite bytes the file already has: past its end, a record
 * would change the file's size, and its fdatasync would then write the
 * inode too (ext4: a second write to wait for before the flush; with a
 * journal, a journal commit). So the file grows ahead of the records, by
 * DBFS_ILOG_GROW of zeros at a time, flushed with the record that needed
 * them; the records after it within that MiB flush their own bytes alone.
 * A chain that reaches zeros ends there (recover.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "dbfs/recover.h"

/* How far the chain may grow before a point is a checkpoint instead: a
 * quarter of the bytes the store's tree spans (meta's last page), within
 * [DBFS_ILOG_MIN, DBFS_ILOG_MAX]. The checkpoint flushes what the kernel
 * has not yet written back of data.mdb; a larger log would only move
 * that cost and take disk space from small stores. */
static uint64_t log_limit(const struct dbfs *fs, const unsigned char *meta)
{
	uint64_t last;
	memcpy(&last, meta + DBFS_LMDB_META_LASTPG, sizeof(last));
	uint64_t l = (last + 1) * fs->dur_psize / 4;
	return l < DBFS_ILOG_MIN ? DBFS_ILOG_MIN : l > DBFS_ILOG_MAX ? DBFS_ILOG_MAX : l;
}

/* Open (make) dbfs.images; a new file's directory entry is flushed before
 * any record in it counts on being found. A new file gets the owner of
 * dbfs.durable: root may serve a store that it made for a user (mfs gives
 * the store's files to the user), and the user must be able to open it. */
static int open_log(struct dbfs *fs)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/" DBFS_ILOG_FILE, fs->dir);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		struct stat st;
		if (fd >= 0 && fstat(fs->dur_fd, &st) == 0 &&
		    (st.st_uid != geteuid() || st.st_gid != getegid()))
			(void)!fchown(fd, st.st_uid, st.st_gid);
		int dfd = fd >= 0 ? open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (dfd < 0 || fsync(dfd) < 0) {
			int e = errno;
			if (dfd >= 0)
				close(dfd);
			if (fd >= 0)
				close(fd);
			return e;
		}
		close(dfd);
	}
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return e;
	}
	fs->img_fd = fd;
	fs->img_size = (uint64_t)st.st_size;
	return 0;
}

/* Make the file at least `end` bytes long with zeros, in whole
 * DBFS_ILOG_GROW, if it is not: they are flushed with the record. */
static int grow_log(struct dbfs *fs, uint64_t end)
{
	static const unsigned char zero[64 << 10];
	if (end <= fs->img_size)
		return 0;
	uint64_t to = (end + DBFS_ILOG_GROW - 1) / DBFS_ILOG_GROW * DBFS_ILOG_GROW;
	for (uint64_t at = fs->img_size; at < to;) {
		size_t k = to - at < sizeof(zero) ? (size_t)(to - at) : sizeof(zero);
		errno = 0;
		ssize_t w = pwrite(fs->img_fd, zero, k, (off_t)at);
		if (w <= 0)
			return errno ? errno : ENOSPC;
		at += (uint64_t)w;
	}
	fs->img_size = to;
	return 0;
}

/* Write the images of pg[0..n) from the map at off, folding each into *h.
 * The caller holds the map lock. */
static int write_images(struct dbfs *fs, const uint64_t *pg, uint64_t n, off_t off, uint64_t *h)
{
	enum { BATCH = 64 };
	struct iovec iov[BATCH];
	size_t ps = fs->dur_psize;
	for (uint64_t i = 0; i < n;) {
		int k = 0;
		for (; k < BATCH && i < n; k++, i++) {
			if (!fs->map_addr || (pg[i] + 1) * ps > fs->map_size)
				return EFBIG; /* not a page of the map: a checkpoint */
			iov[k].iov_base = (void *)(fs->map_addr + pg[i] * ps);
			iov[k].iov_len = ps;
			*h = dbfs_page_hash(*h, iov[k].iov_base, ps);
		}
		ssize_t want = (ssize_t)(k * ps);
		errno = 0;
		if (pwritev(fs->img_fd, iov, k, off) != want)
			return errno ? errno : ENOSPC;
		off += want;
	}
	return 0;
}

int dbfs_images_append(struct dbfs *fs, uint64_t txnid, const unsigned char *meta,
		       const uint64_t *pg, uint64_t n)
{
	uint32_t ps = fs->dur_psize;
	uint64_t head = dbfs_irec_head_len(n, ps), len = head + n * ps;
	if (n > DBFS_DREC_LIST_MAX || head > DBFS_DREC_SLOT2 ||
	    (fs->img_tail && fs->img_tail + len > log_limit(fs, meta)))
		return EFBIG;
	int rc = fs->img_fd < 0 ? open_log(fs) : 0;
	if (rc) {
		/* a directory that takes no new file (EACCES, EROFS, ENOSPC):
		 * points of this store are checkpoints from now on */
		fs->dur_imaged = false;
		return EFBIG;
	}
	struct dbfs_irec r;
	memset(&r, 0, sizeof(r));
	memcpy(r.magic, DBFS_ILOG_MAGIC, 8);
	r.version = DBFS_ILOG_VERSION;
	r.psize = ps;
	r.dseq = fs->dur_seq;
	r.lseq = fs->img_lseq + 1;
	r.base = fs->dur_txn;
	r.txnid = txnid;
	r.n = n;
	dbfs_boot_id(r.boot);
	memcpy(r.meta, meta, DBFS_DREC_META);
	uint64_t h = dbfs_irec_head_sum(&r, pg);
	if ((rc = grow_log(fs, fs->img_tail + len)))
		return rc;
	pthread_rwlock_rdlock(&fs->map_lock);
	rc = write_images(fs, pg, n, (off_t)(fs->img_tail + head), &h);
	pthread_rwlock_unlock(&fs->map_lock);
	if (rc)
		return rc;
	r.sum = h;
	unsigned char *b = fs->dur_buf;
	memset(b, 0, head);
	memcpy(b, &r, sizeof(r));
	memcpy(b + sizeof(r), pg, n * 8);
	errno = 0;
	if (pwrite(fs->img_fd, b, head, (off_t)fs->img_tail) != (ssize_t)head)
		return errno ? errno : ENOSPC;
	if (dbfs_durable_fault == DBFS_FAULT_IMAGES_EIO) {
		dbfs_durable_fault = 0; /* a test: the device failed the flush */
		return EIO;
	}
	if (fdatasync(fs->img_fd) < 0)
		return errno;
	fs->img_tail += len;
	fs->img_lseq++;
	return 0;
}

void dbfs_images_reset(struct dbfs *fs)
{
	fs->img_tail = 0;
	fs->img_lseq = 0;
}

void dbfs_images_close(struct dbfs *fs)
{
	if (fs->img_fd >= 0)
		close(fs->img_fd);
	fs->img_fd = -1;
	dbfs_images_reset(fs);
}
