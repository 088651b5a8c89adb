/*
 * Deferred truncation (issue 19): a truncate that would free
 * DBFS_RECLAIM_MIN or more returns at once; the whole blocks past the new
 * size stay where they are, past the file's end, and the delivery thread
 * of the queue "later" (expire_run.c) frees them in pieces of
 * DBFS_FREE_MAX (or what DBFS_FREE_NS allows when their pages must come
 * from the disk), from the top down, in transactions of its own.
 *
 * The file stays alive: it may be written, extended or truncated again
 * at once. Its waiting blocks are keyed (ino, block) like its live ones,
 * so what keeps them apart is an invariant, not a key: one row per file
 * in the table "trim" (format.h) holds the range [first, last) of block
 * numbers that wait, and
 *
 *   - first >= the file's block count (ceil(size / block_size)): no
 *     waiting block is ever inside the file, reads never reach one;
 *   - every block of the file numbered first or more waits (no live block
 *     lies past the size, format.h), none is numbered last or more;
 *   - bytes is what the waiting blocks hold (alloc units).
 *
 * Each operation that grows the size (a write or copy past the end, a
 * truncate up, an fallocate) first deletes the waiting blocks the new
 * size uncovers and raises first, a piece per transaction as the reclaim
 * does (dbfs_trim_uncover_piece, from fuse_ops.c), then does its work;
 * the reclaim lowers last. Both run under LMDB's one writer, so the
 * reclaim can never free a block written after the truncate: such a block
 * is below first by then. A later truncate down merges its blocks
 * into the row (first goes down). The inode carries DBFS_INODE_TRIM while
 * it has a row, so that a write looks the row up only then.
 *
 * Space: the waiting blocks stay in the inode's alloc (st_blocks counts
 * them, as blocks past the end that fallocate keeps) and so in the usage
 * record, which falls piece by piece: statfs, quotas and stats are exact
 * at every commit; stats show what waits (reclaim_files, reclaim_bytes).
 * After a crash the row is still there and the freeing goes on.
 */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

struct trim_rec {
	uint64_t first, last; /* block numbers: [first, last) wait */
	uint64_t bytes;	      /* what they hold (alloc units) */
};

static void trim_key(uint64_t ino, unsigned char kb[8], MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	k->mv_size = 8;
	k->mv_data = kb;
}

/* 0 with *r, MDB_NOTFOUND, or a store failure. */
static int row_get(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct trim_rec *r)
{
	unsigned char kb[8];
	MDB_val k, v;
	trim_key(ino, kb, &k);
	int rc = dbfs_get(txn, fs->db_trim, &k, &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*r))
		return MDB_CORRUPTED;
	memcpy(r, v.mv_data, sizeof(*r));
	return 0;
}

static int row_put(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct trim_rec *r)
{
	unsigned char kb[8];
	MDB_val k, v = {sizeof(*r), (void *)r};
	trim_key(ino, kb, &k);
	return dbfs_put(txn, fs->db_trim, &k, &v, 0);
}

static int row_del(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in)
{
	unsigned char kb[8];
	MDB_val k;
	trim_key(ino, kb, &k);
	in->flags &= ~DBFS_INODE_TRIM;
	int rc = dbfs_del(txn, fs->db_trim, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The inode's row: 0 with *r, MDB_NOTFOUND when it has none (a flag
 * without a row is cleared in `in`), or a store failure. */
static int row_of(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		  struct trim_rec *r)
{
	if (!(in->flags & DBFS_INODE_TRIM) || !fs->db_trim)
		return MDB_NOTFOUND;
	int rc = row_get(fs, txn, ino, r);
	if (rc == MDB_NOTFOUND)
		in->flags &= ~DBFS_INODE_TRIM;
	return rc;
}

int dbfs_trim_truncate(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		       uint64_t size, bool *deferred)
{
	const uint64_t bs = fs->block_size;
	struct trim_rec r;
	*deferred = false;
	if (!fs->db_trim || !fs->expire || size >= in->size)
		return 0; /* no thread to free them (read-only), or not a truncate down */
	int rc = row_of(fs, txn, ino, in, &r);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	bool have = rc == 0;
	uint64_t waiting = have ? r.bytes : 0;
	if (!have && in->alloc < DBFS_RECLAIM_MIN)
		return 0; /* small: freed by the truncate itself */
	uint64_t first = (size + bs - 1) / bs, end = (in->size + bs - 1) / bs, moved, head;
	if ((rc = dbfs_data_cut_block(fs, txn, ino, in, size)))
		return rc;
	/* what the live blocks in [first, end) hold: count the shorter side */
	if (end - first <= first) {
		rc = dbfs_data_held(fs, txn, ino, first, end, &moved);
	} else {
		rc = dbfs_data_held(fs, txn, ino, 0, first, &head);
		moved = in->alloc - waiting - head;
	}
	if (rc)
		return rc;
	if (!have && moved < DBFS_RECLAIM_MIN)
		return 0; /* the truncate frees them (its partial block is cut already) */
	if (!have)
		r = (struct trim_rec){first, end, 0};
	r.first = first;
	r.bytes += moved;
	if ((rc = row_put(fs, txn, ino, &r)))
		return rc;
	in->flags |= DBFS_INODE_TRIM;
	in->size = size;
	dbfs_later_reclaim_noted(fs);
	*deferred = true;
	return 0;
}

/* Delete the waiting blocks a size of new_size uncovers: all of them, or
 * with `more` what the transaction may still free (*more when some are
 * left: those below the first one left are gone, so first stays valid). */
static int uncover(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		   uint64_t new_size, int *more)
{
	const uint64_t bs = fs->block_size;
	struct trim_rec r;
	int rc = row_of(fs, txn, ino, in, &r);
	if (rc)
		return rc == MDB_NOTFOUND ? 0 : rc;
	uint64_t end = (new_size + bs - 1) / bs, freed;
	if (end <= r.first)
		return 0;
	uint64_t upto = end < r.last ? end : r.last;
	if ((rc = dbfs_data_drop(fs, txn, ino, in, r.first, upto, &freed, more)))
		return rc;
	bool left = more && *more;
	if (!left && upto >= r.last)
		return row_del(fs, txn, ino, in);
	if (!left)
		r.first = end;
	r.bytes = r.bytes > freed ? r.bytes - freed : 0;
	return row_put(fs, txn, ino, &r);
}

int dbfs_trim_uncover(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in,
		      uint64_t new_size)
{
	return uncover(fs, txn, ino, in, new_size, NULL);
}

int dbfs_trim_uncover_piece(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t new_size,
			    int *more)
{
	struct dbfs_inode in;
	MDB_stat st;
	*more = 0;
	if (!fs->db_trim)
		return 0;
	/* the table's own count (no lookup): most writes find it empty */
	int rc = mdb_stat(txn, fs->db_trim, &st);
	if (rc || !st.ms_entries)
		return rc;
	if ((rc = dbfs_inode_get(fs, txn, ino, &in)))
		return rc == -ENOENT ? 0 : rc; /* the operation reports it */
	if (!(in.flags & DBFS_INODE_TRIM))
		return 0;
	rc = uncover(fs, txn, ino, &in, new_size, more);
	return rc ? rc : dbfs_inode_put(fs, txn, ino, &in);
}

int dbfs_trim_drop(struct dbfs *fs, MDB_txn *txn, uint64_t ino, struct dbfs_inode *in)
{
	if (!(in->flags & DBFS_INODE_TRIM) || !fs->db_trim)
		return 0;
	return row_del(fs, txn, ino, in);
}

int dbfs_trim_step(struct dbfs *fs, MDB_txn *txn, int *did, int *finished)
{
	MDB_cursor *c;
	MDB_val k, v;
	struct dbfs_inode in;
	struct trim_rec r;
	*did = *finished = 0;
	if (!fs->db_trim)
		return 0;
	int rc = mdb_cursor_open(txn, fs->db_trim, &c);
	if (rc)
		return rc;
	rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	uint64_t ino = !rc && k.mv_size == 8 ? dbfs_get_be64(k.mv_data) : 0;
	mdb_cursor_close(c);
	if (rc)
		return rc == MDB_NOTFOUND ? 0 : rc;
	if (!ino || v.mv_size != sizeof(r))
		return MDB_CORRUPTED; /* dbfs-fsck says which */
	memcpy(&r, v.mv_data, sizeof(r));
	*did = 1;
	rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc || !(in.flags & DBFS_INODE_TRIM)) {
		unsigned char kb[8];
		trim_key(ino, kb, &k);
		return dbfs_del(txn, fs->db_trim, &k, NULL); /* stale: not ours */
	}
	/* from the top down: [cut, last) is what this transaction may free;
	 * stopped by its time (DBFS_FREE_NS), it leaves the top of that range
	 * (more), and last stays */
	uint64_t cut, freed;
	int more = 0;
	if ((rc = dbfs_data_free_cut(fs, txn, ino, r.first, r.last, &cut)) ||
	    (rc = dbfs_data_drop(fs, txn, ino, &in, cut, r.last, &freed, &more)))
		return rc;
	if (!more && cut <= r.first) {
		*finished = 1;
		rc = row_del(fs, txn, ino, &in);
	} else {
		if (!more)
			r.last = cut;
		r.bytes = r.bytes > freed ? r.bytes - freed : 0;
		rc = row_put(fs, txn, ino, &r);
	}
	return rc ? rc : dbfs_inode_put(fs, txn, ino, &in);
}

void dbfs_trim_prefetch(struct dbfs *fs, MDB_txn *txn, uint64_t bytes)
{
	MDB_cursor *c;
	MDB_val k, v;
	struct trim_rec r;
	if (!fs->db_trim || mdb_cursor_open(txn, fs->db_trim, &c))
		return;
	int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	mdb_cursor_close(c);
	if (rc || k.mv_size != 8 || v.mv_size != sizeof(r))
		return;
	memcpy(&r, v.mv_data, sizeof(r));
	/* the step frees from the top down */
	dbfs_data_prefetch(fs, txn, dbfs_get_be64(k.mv_data), r.first, r.last, true, bytes);
}

int dbfs_trim_pending(struct dbfs *fs, MDB_txn *txn, uint64_t *files, uint64_t *bytes)
{
	MDB_cursor *c;
	MDB_val k, v;
	*files = *bytes = 0;
	if (!fs->db_trim)
		return 0;
	int rc = mdb_cursor_open(txn, fs->db_trim, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct trim_rec r;
		if (v.mv_size != sizeof(r))
			continue;
		memcpy(&r, v.mv_data, sizeof(r));
		(*files)++;
		*bytes += r.bytes;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
