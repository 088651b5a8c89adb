/*
 * File contents (table "data"): blocks of fs->block_size bytes keyed by
 * (ino, block). A block's value may be shorter than a block: the rest reads
 * as zeros. A missing block is a hole. The inode's alloc counts every value
 * rounded up to DBFS_ALLOC_UNIT and the usage record follows it.
 *
 * The block size is the store's (superblock): DBFS_BLOCK_SIZE (64 KiB) in
 * stores made before format 1.1, one LMDB page less its header since (see
 * format.h), so that no write ever needs a run of contiguous free pages.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/internal.h"

static const unsigned char zeros[DBFS_BLOCK_SIZE];
static __thread unsigned char scratch[DBFS_BLOCK_SIZE];

static void data_key(unsigned char *kb, uint64_t ino, uint64_t blk, MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	dbfs_put_be64(kb + 8, blk);
	k->mv_size = 16;
	k->mv_data = kb;
}

static int block_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t blk, MDB_val *v)
{
	unsigned char kb[16];
	MDB_val k;
	data_key(kb, ino, blk, &k);
	int rc = dbfs_get(txn, fs->db_data, &k, v);
	if (rc == MDB_NOTFOUND) {
		v->mv_size = 0;
		v->mv_data = NULL;
		return 0;
	}
	return rc;
}

#define WRITTEN_COLLIDED UINT64_MAX
/* Above LMDB's largest in-page value for 4 KiB pages (about 2 KiB). */
#define INLINE_MAX 4096u

static uint64_t written_key(uint64_t ino, uint64_t blk)
{
	uint64_t k = (ino * 0x9e3779b97f4a7c15ull) ^ (blk * 0xc2b2ae3d27d4eb4full);
	return k == WRITTEN_COLLIDED ? k - 1 : k;
}

static int written_before(struct dbfs *fs, uint64_t ino, uint64_t blk)
{
	uint64_t k = written_key(ino, blk);
	const __typeof__(fs->written[0]) *w = &fs->written[k >> 56];
	return w->gen == fs->txn_gen && (w->key == k || w->key == WRITTEN_COLLIDED);
}

static void mark_written(struct dbfs *fs, uint64_t ino, uint64_t blk)
{
	uint64_t k = written_key(ino, blk);
	__typeof__(fs->written[0]) *w = &fs->written[k >> 56];
	if (w->gen != fs->txn_gen) {
		w->gen = fs->txn_gen;
		w->key = k;
	} else if (w->key != k) {
		w->key = WRITTEN_COLLIDED;
	}
}

/* Store a block's new value built from `old` (old_len bytes, may alias the
 * map) with buf copied at boff. */
static int block_put(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t blk,
		     const void *old, size_t old_len, size_t boff, const void *buf, size_t n,
		     int64_t *dalloc)
{
	unsigned char kb[16];
	MDB_val k, v;
	size_t new_len = boff + n > old_len ? boff + n : old_len;
	data_key(kb, ino, blk, &k);
	/* Where the old bytes live decides whether they survive the put. A
	 * small value sits in a leaf page shared with other records: if any
	 * put of this transaction dirtied that page, this put shifts bytes in
	 * it (with MDB_WRITEMAP the dirty page is in the map too): copy it.
	 * A large value has overflow pages of its own: committed before this
	 * transaction they stay intact through the put (LMDB never reuses
	 * pages in the transaction that frees them); written earlier in this
	 * transaction they may be reused by this very put: copy it then. */
	int again = old_len <= INLINE_MAX || written_before(fs, ino, blk);
	if (old_len && again && !(boff == 0 && n >= old_len)) {
		memcpy(scratch, old, old_len);
		old = scratch;
	}
	v.mv_size = new_len;
	int rc = dbfs_put(txn, fs->db_data, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	unsigned char *d = v.mv_data;
	if (boff == 0 && n >= old_len) {
		memcpy(d, buf, n);
	} else {
		if (old_len)
			memmove(d, old, old_len); /* may overlap: rewritten in place */
		if (boff > old_len)
			memset(d + old_len, 0, boff - old_len);
		memcpy(d + boff, buf, n);
	}
	*dalloc += (int64_t)dbfs_alloc_round(new_len) - (int64_t)dbfs_alloc_round(old_len);
	mark_written(fs, ino, blk);
	return 0;
}

static int finish(struct dbfs *fs, MDB_txn *txn, struct dbfs_inode *in, int64_t dalloc)
{
	if (!dalloc)
		return 0;
	in->alloc += (uint64_t)dalloc;
	return dbfs_usage_add(fs, txn, dalloc, 0);
}

int dbfs_data_write_cost(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t off, size_t len,
			 uint64_t *cost)
{
	const uint64_t bs = fs->block_size;
	*cost = 0;
	uint64_t end = off + len;
	for (uint64_t blk = off / bs; len && blk * bs < end; blk++) {
		uint64_t bstart = blk * bs;
		uint64_t hi = end - bstart > bs ? bs : end - bstart;
		MDB_val v;
		int rc = block_get(fs, txn, ino, blk, &v);
		if (rc)
			return rc;
		if (hi > v.mv_size)
			*cost += dbfs_alloc_round(hi) - dbfs_alloc_round(v.mv_size);
	}
	return 0;
}

int dbfs_data_write(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		    uint64_t off, const void *buf, size_t len)
{
	const uint64_t bs = fs->block_size;
	int64_t dalloc = 0;
	const unsigned char *p = buf;
	int rc0 = off + len > in->size ? dbfs_trim_uncover(fs, txn, ino, in, off + len) : 0;
	if (rc0)
		return rc0; /* blocks a truncate left to the reclaim must not show */
	while (len) {
		uint64_t blk = off / bs;
		size_t boff = (size_t)(off % bs);
		size_t n = bs - boff;
		if (n > len)
			n = len;
		MDB_val old;
		int rc = block_get(fs, txn, ino, blk, &old);
		if (rc)
			return rc;
		rc = block_put(fs, txn, ino, blk, old.mv_data, old.mv_size, boff, p, n, &dalloc);
		if (rc)
			return rc;
		p += n;
		off += n;
		len -= n;
	}
	if (off > in->size)
		in->size = off;
	return finish(fs, txn, in, dalloc);
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t (*dbfs_free_clock)(void) = mono_ns;

/* Bytes of data this transaction may still free with bounded deletes
 * (DBFS_FREE_MAX per transaction, see internal.h). */
static uint64_t *free_budget(struct dbfs *fs, MDB_txn *txn)
{
	uint64_t id = mdb_txn_id(txn);
	if (fs->free_gen != fs->txn_gen || fs->free_txn != id) {
		fs->free_gen = fs->txn_gen;
		fs->free_txn = id;
		fs->free_left = DBFS_FREE_MAX;
		fs->free_done = 0;
		fs->free_t0 = dbfs_free_clock();
	}
	return &fs->free_left;
}

/* Delete blocks [first, last] (last inclusive, UINT64_MAX for all). With
 * `more`, stop once the transaction's budget is spent (bytes, or its time
 * after FREE_BATCH blocks of this call: the clock is read once a batch)
 * and set *more if blocks are left; without, delete them all (and still
 * count them). */
#define FREE_BATCH 64
static int delete_range(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first,
			uint64_t last, int64_t *dalloc, int *more)
{
	unsigned char kb[16];
	MDB_val k, v;
	MDB_cursor *c;
	uint64_t *left = free_budget(fs, txn), did = 0;
	data_key(kb, ino, first, &k);
	int rc = mdb_cursor_open(txn, fs->db_data, &c);
	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0) {
		if (k.mv_size != 16 || dbfs_get_be64(k.mv_data) != ino ||
		    dbfs_get_be64((unsigned char *)k.mv_data + 8) > last)
			break;
		uint64_t n = dbfs_alloc_round(v.mv_size);
		if (more && (*left < n || (did && did % FREE_BATCH == 0 &&
					    dbfs_free_clock() - fs->free_t0 > DBFS_FREE_NS))) {
			*more = 1;
			break;
		}
		did++;
		*left = *left > n ? *left - n : 0;
		*dalloc -= (int64_t)n;
		rc = dbfs_cursor_del(c);
		if (rc)
			break;
		if ((fs->free_done += n) > atomic_load_explicit(&fs->free_most, memory_order_relaxed))
			atomic_store_explicit(&fs->free_most, fs->free_done, memory_order_relaxed);
		/* After a delete, MDB_NEXT yields the item that followed. */
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_data_free_cut(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first, uint64_t end,
		       uint64_t *cut)
{
	unsigned char kb[16];
	MDB_val k, v;
	MDB_cursor *c;
	uint64_t left = *free_budget(fs, txn), sum = 0;
	*cut = first;
	if (end <= first)
		return 0;
	data_key(kb, ino, end, &k);
	int rc = mdb_cursor_open(txn, fs->db_data, &c);
	if (rc)
		return rc;
	/* the block before (ino, end): the last one below end */
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	rc = mdb_cursor_get(c, &k, &v, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
	while (rc == 0) {
		if (k.mv_size != 16 || dbfs_get_be64(k.mv_data) != ino)
			break;
		uint64_t blk = dbfs_get_be64((unsigned char *)k.mv_data + 8);
		if (blk < first)
			break;
		sum += dbfs_alloc_round(v.mv_size);
		if (sum > left) {
			*cut = blk + 1;
			break;
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_PREV);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_data_read(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		   uint64_t off, size_t len, void *buf, size_t *got)
{
	unsigned char *p = buf;
	*got = 0;
	while (*got < len) {
		struct iovec iov[16];
		size_t n;
		int k, rc = dbfs_data_map(fs, txn, ino, in, off + *got, len - *got, iov, 16, &n, &k);
		if (rc)
			return rc;
		if (!n)
			break; /* end of file */
		for (int i = 0; i < k; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
		*got += n;
	}
	return 0;
}

int dbfs_data_delete_some(struct dbfs *fs, MDB_txn *txn, uint64_t ino, int64_t *dalloc,
			  int *more)
{
	*more = 0;
	return delete_range(fs, txn, ino, 0, UINT64_MAX, dalloc, more);
}

/* Zero [from, to) inside one block, shrinking the value when the range
 * reaches its end and deleting it when nothing is left. */
static int zero_in_block(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t blk, size_t from,
			 size_t to, int64_t *dalloc)
{
	MDB_val old;
	int rc = block_get(fs, txn, ino, blk, &old);
	if (rc || old.mv_size <= from)
		return rc;
	unsigned char kb[16];
	MDB_val k, v;
	data_key(kb, ino, blk, &k);
	size_t old_len = old.mv_size;
	size_t new_len = to >= old_len ? from : old_len;
	if (new_len == 0) {
		*dalloc -= (int64_t)dbfs_alloc_round(old_len);
		return dbfs_del(txn, fs->db_data, &k, NULL);
	}
	memcpy(scratch, old.mv_data, old_len);
	if (to < old_len)
		memset(scratch + from, 0, to - from);
	v.mv_size = new_len;
	rc = dbfs_put(txn, fs->db_data, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	memcpy(v.mv_data, scratch, new_len);
	*dalloc += (int64_t)dbfs_alloc_round(new_len) - (int64_t)dbfs_alloc_round(old_len);
	return 0;
}

static int truncate_blocks(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
			   uint64_t size, bool defer)
{
	const uint64_t bs = fs->block_size;
	int64_t dalloc = 0;
	int rc = 0;
	if (size > in->size && (rc = dbfs_trim_uncover(fs, txn, ino, in, size)))
		return rc;
	if (size < in->size) {
		bool later = false;
		if (defer && ((rc = dbfs_trim_truncate(fs, txn, ino, in, size, &later)) || later))
			return rc; /* a large tail: freed in the background (trim.c) */
		uint64_t first_whole = (size + bs - 1) / bs;
		rc = delete_range(fs, txn, ino, first_whole, UINT64_MAX, &dalloc, NULL);
		/* blocks that waited for the reclaim went with the others */
		if (!rc)
			rc = dbfs_trim_drop(fs, txn, ino, in);
		if (!rc && size % bs)
			rc = zero_in_block(fs, txn, ino, size / bs, (size_t)(size % bs), bs,
					   &dalloc);
		if (rc)
			return rc;
	}
	in->size = size;
	return finish(fs, txn, in, dalloc);
}

int dbfs_data_truncate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		       uint64_t size)
{
	return truncate_blocks(fs, txn, ino, in, size, true);
}

int dbfs_data_truncate_now(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
			   uint64_t size)
{
	return truncate_blocks(fs, txn, ino, in, size, false);
}

int dbfs_data_cut_block(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
			uint64_t size)
{
	const uint64_t bs = fs->block_size;
	int64_t dalloc = 0;
	int rc = size % bs ? zero_in_block(fs, txn, ino, size / bs, (size_t)(size % bs), bs,
					   &dalloc)
			   : 0;
	return rc ? rc : finish(fs, txn, in, dalloc);
}

int dbfs_data_drop(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		   uint64_t first, uint64_t end, uint64_t *freed, int *more)
{
	int64_t dalloc = 0;
	if (more)
		*more = 0;
	int rc = end > first ? delete_range(fs, txn, ino, first, end - 1, &dalloc, more) : 0;
	*freed = (uint64_t)-dalloc;
	return rc ? rc : finish(fs, txn, in, dalloc);
}

/* madvise(MADV_WILLNEED) the pages [a, b) of the map: advice, no wait. */
static void willneed(uintptr_t a, uintptr_t b)
{
	if (b > a)
		(void)madvise((void *)a, b - a, MADV_WILLNEED);
}

void dbfs_data_prefetch(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first,
			uint64_t end, bool down, uint64_t bytes)
{
	const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
	unsigned char kb[16];
	MDB_val k, v;
	MDB_cursor *c;
	uintptr_t lo = 0, hi = 0; /* the run of pages gathered */
	uint64_t sum = 0;
	if (end <= first || mdb_cursor_open(txn, fs->db_data, &c))
		return;
	data_key(kb, ino, down ? end : first, &k);
	int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (down) /* the block before (ino, end) */
		rc = mdb_cursor_get(c, &k, &v, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
	for (; !rc && sum < bytes; rc = mdb_cursor_get(c, &k, &v, down ? MDB_PREV : MDB_NEXT)) {
		uint64_t blk = k.mv_size == 16 ? dbfs_get_be64((unsigned char *)k.mv_data + 8) : 0;
		if (k.mv_size != 16 || dbfs_get_be64(k.mv_data) != ino || blk < first || blk >= end)
			break;
		/* the value's pages: a large one has pages of its own, which
		 * the cursor pointed at without reading them */
		uintptr_t a = (uintptr_t)v.mv_data & ~(ps - 1);
		uintptr_t b = ((uintptr_t)v.mv_data + v.mv_size + ps - 1) & ~(ps - 1);
		if (a == hi && hi) {
			hi = b;
		} else if (b == lo && lo) {
			lo = a;
		} else {
			willneed(lo, hi);
			lo = a;
			hi = b;
		}
		sum += dbfs_alloc_round(v.mv_size);
	}
	willneed(lo, hi);
	mdb_cursor_close(c);
}

int dbfs_data_held(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t first, uint64_t end,
		   uint64_t *bytes)
{
	unsigned char kb[16];
	MDB_val k, v;
	MDB_cursor *c;
	*bytes = 0;
	if (end <= first)
		return 0;
	data_key(kb, ino, first, &k);
	int rc = mdb_cursor_open(txn, fs->db_data, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16 || dbfs_get_be64(k.mv_data) != ino ||
		    dbfs_get_be64((unsigned char *)k.mv_data + 8) >= end)
			break;
		*bytes += dbfs_alloc_round(v.mv_size);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_data_punch(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		    uint64_t off, uint64_t len)
{
	const uint64_t bs = fs->block_size;
	int64_t dalloc = 0;
	uint64_t end = off + len;
	if (end > in->size)
		end = in->size;
	while (off < end) {
		uint64_t blk = off / bs;
		size_t boff = (size_t)(off % bs);
		uint64_t n = bs - boff;
		if (n > end - off)
			n = end - off;
		int rc;
		if (boff == 0 && n == bs) {
			uint64_t last = end / bs - 1;
			rc = delete_range(fs, txn, ino, blk, last, &dalloc, NULL);
			off = (last + 1) * bs;
		} else {
			rc = zero_in_block(fs, txn, ino, blk, boff, boff + n, &dalloc);
			off += n;
		}
		if (rc)
			return rc;
	}
	return finish(fs, txn, in, dalloc);
}

int dbfs_data_allocate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		       uint64_t off, uint64_t len)
{
	/* Materialise zeros over holes so that later writes in the range need
	 * no new space. Bytes already stored are kept. */
	const uint64_t bs = fs->block_size;
	int64_t dalloc = 0;
	uint64_t end = off + len;
	int rc0 = end > in->size ? dbfs_trim_uncover(fs, txn, ino, in, end) : 0;
	if (rc0)
		return rc0;
	for (uint64_t blk = off / bs; blk * bs < end; blk++) {
		uint64_t bstart = blk * bs;
		size_t hi = end - bstart > bs ? bs : end - bstart;
		MDB_val old;
		int rc = block_get(fs, txn, ino, blk, &old);
		if (rc)
			return rc;
		if (old.mv_size >= hi)
			continue;
		rc = block_put(fs, txn, ino, blk, old.mv_data, old.mv_size, old.mv_size, zeros,
			       hi - old.mv_size, &dalloc);
		if (rc)
			return rc;
	}
	return finish(fs, txn, in, dalloc);
}

/* Append `len` zero bytes to the iovecs (merged with a zero run before). */
static int map_zeros(struct iovec *iov, int n, int max, size_t len)
{
	if (n && iov[n - 1].iov_base >= (void *)zeros &&
	    iov[n - 1].iov_base < (void *)(zeros + sizeof(zeros)) &&
	    iov[n - 1].iov_len + len <= sizeof(zeros)) {
		iov[n - 1].iov_len += len;
		return n;
	}
	if (n == max)
		return -1;
	iov[n].iov_base = (void *)zeros;
	iov[n].iov_len = len;
	return n + 1;
}

/* Step the cursor to the next block of `ino`: its number, or UINT64_MAX
 * past the file's blocks. A failed step is a store failure in *rc, never
 * a hole: a read must not return zeros for data it could not read. */
static uint64_t next_block(MDB_cursor *c, uint64_t ino, MDB_val *k, MDB_val *v, int *rc)
{
	int r = mdb_cursor_get(c, k, v, MDB_NEXT);
	if (r && r != MDB_NOTFOUND)
		*rc = r;
	return (r == 0 && k->mv_size == 16 && dbfs_get_be64(k->mv_data) == ino)
		       ? dbfs_get_be64((unsigned char *)k->mv_data + 8)
		       : UINT64_MAX;
}

int dbfs_data_map(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		  uint64_t off, size_t len, struct iovec *iov, int max, size_t *got, int *niov)
{
	const uint64_t bs = fs->block_size;
	int n = 0;
	*got = 0;
	*niov = 0;
	if (off >= in->size)
		return 0;
	if (len > in->size - off)
		len = in->size - off;
	/* One cursor walks the blocks in order: a lookup for the first, then
	 * a step per stored block. */
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, fs->db_data, &c);
	if (rc)
		return rc;
	unsigned char kb[16];
	MDB_val k, v;
	data_key(kb, ino, off / bs, &k);
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	/* the cursor's block, UINT64_MAX when past this file's blocks */
	uint64_t cblk = UINT64_MAX;
	if (rc == 0 && k.mv_size == 16 && dbfs_get_be64(k.mv_data) == ino)
		cblk = dbfs_get_be64((unsigned char *)k.mv_data + 8);
	else if (rc && rc != MDB_NOTFOUND)
		goto out;
	rc = 0;
	while (len && n < max) {
		uint64_t blk = off / bs;
		size_t boff = (size_t)(off % bs);
		size_t want = bs - boff;
		if (want > len)
			want = len;
		while (cblk < blk && !rc) /* not expected: keys are in order */
			cblk = next_block(c, ino, &k, &v, &rc);
		if (rc)
			goto out;
		size_t have = 0;
		if (cblk == blk) {
			have = v.mv_size > boff ? v.mv_size - boff : 0;
			if (have > want)
				have = want;
		}
		if (have) {
			iov[n].iov_base = (char *)v.mv_data + boff;
			iov[n].iov_len = have;
			n++;
		}
		if (have < want) {
			int m = n < max ? map_zeros(iov, n, max, want - have) : -1;
			if (m < 0)
				want = have; /* out of iovecs: a short answer */
			else
				n = m;
		}
		*got += want;
		off += want;
		len -= want;
		if (!want)
			break;
		if (cblk == blk && (cblk = next_block(c, ino, &k, &v, &rc), rc))
			goto out;
	}
out:
	mdb_cursor_close(c);
	if (rc)
		*got = 0;
	else
		*niov = n;
	return rc;
}
