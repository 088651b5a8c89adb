/*
 * Deferred truncation's table (dbfs/format.h "trim", dbfs/trim.c): each
 * row names a regular file with DBFS_INODE_TRIM in its flags, its range
 * starts at or past the file's last block, and its bytes are what the
 * file's blocks in the range hold; a file with the flag has a row. The
 * blocks of a row's range are the one place data may lie past a file's
 * size (fsck_trim_waits, for check.c). --repair drops a row it cannot
 * trust (its blocks past the size then go as any others there), rewrites
 * a wrong byte count and sets or clears the flag.
 */
#include <inttypes.h>
#include <string.h>

#include "tools/fsck/fsck.h"

#define INODE_TRIM 1u /* DBFS_INODE_TRIM (dbfs/internal.h) */

struct trim_rec {
	uint64_t first, last, bytes;
};

void fsck_load_trim(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_dbi_open(f->txn, DBFS_DB_TRIM, 0, &f->dbi_trim);
	f->has_trim = rc == 0;
	if (rc == MDB_NOTFOUND)
		return; /* a store no newer build opened read-write yet */
	fsck_lmdb_check(rc, "opening trim");
	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_trim, &c), "cursor on trim");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct trim_rec r;
		struct fsck_inode *in =
		    k.mv_size == 8 ? fsck_inode_find(f, dbfs_get_be64(k.mv_data)) : NULL;
		if (!in || in->bad || v.mv_size != sizeof(r))
			continue; /* fsck_pass_trim says so */
		memcpy(&r, v.mv_data, sizeof(r));
		in->trim = true;
		in->trim_first = r.first;
		in->trim_last = r.last;
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading trim");
	mdb_cursor_close(c);
}

bool fsck_trim_waits(const struct fsck_inode *in, uint64_t blk)
{
	return in->trim && blk >= in->trim_first && blk < in->trim_last;
}

/* What the blocks [first, last) of `ino` hold (alloc units). */
static uint64_t held(struct fsck *f, uint64_t ino, uint64_t first, uint64_t last)
{
	unsigned char kb[16];
	MDB_val k = {16, kb}, v;
	MDB_cursor *c;
	uint64_t sum = 0;
	int rc;
	dbfs_put_be64(kb, ino);
	dbfs_put_be64(kb + 8, first);
	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_data, &c), "cursor on data");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16 || dbfs_get_be64(k.mv_data) != ino ||
		    dbfs_get_be64((unsigned char *)k.mv_data + 8) >= last)
			break;
		sum += fsck_round_alloc(v.mv_size);
	}
	if (rc && rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading data");
	mdb_cursor_close(c);
	return sum;
}

static void set_flag(struct fsck *f, struct fsck_inode *in, bool on)
{
	if (!f->fixing)
		return;
	in->rec.flags = on ? in->rec.flags | INODE_TRIM : in->rec.flags & ~INODE_TRIM;
	fsck_put_inode(f, in);
	fsck_action(f, "inode %" PRIu64 ": flag of waiting blocks %s", in->ino,
		    on ? "set" : "cleared");
}

static void check_rows(struct fsck *f)
{
	const uint64_t bs = f->sb.block_size;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;
	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_trim, &c), "cursor on trim");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct trim_rec r;
		uint64_t ino = k.mv_size == 8 ? dbfs_get_be64(k.mv_data) : 0;
		struct fsck_inode *in = ino ? fsck_inode_find(f, ino) : NULL;
		const char *why = NULL;
		if (!ino || v.mv_size != sizeof(r))
			why = "malformed row";
		else if (!in)
			why = "no such inode";
		else if (in->bad || !S_ISREG(in->rec.mode))
			why = "not a regular file";
		if (!why) {
			memcpy(&r, v.mv_data, sizeof(r));
			if (r.first < (in->rec.size + bs - 1) / bs || r.last < r.first)
				why = "its range reaches into the file";
		}
		if (why) {
			fsck_problem(f, "trim row of inode %" PRIu64 ": %s", ino, why);
			if (f->fixing) {
				fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting a trim row");
				if (in && !in->bad && (in->rec.flags & INODE_TRIM))
					set_flag(f, in, false);
			}
			continue;
		}
		if (!(in->rec.flags & INODE_TRIM)) {
			fsck_problem(f, "inode %" PRIu64 ": has a trim row but not its flag", ino);
			set_flag(f, in, true);
		}
		uint64_t h = held(f, ino, r.first, r.last);
		if (h != r.bytes) {
			fsck_problem(f, "trim row of inode %" PRIu64 ": %" PRIu64
					" bytes counted, its blocks hold %" PRIu64, ino, r.bytes, h);
			if (f->fixing) {
				r.bytes = h;
				MDB_val nv = {sizeof(r), &r};
				fsck_lmdb_check(mdb_cursor_put(c, &k, &nv, MDB_CURRENT),
						"rewriting a trim row");
			}
		}
		/* a state of a healthy store: the next mount goes on with it */
		fsck_note(f, "inode %" PRIu64 ": %" PRIu64 " bytes past its size wait for the "
			     "background reclaim", ino, h);
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading trim");
	mdb_cursor_close(c);
}

bool fsck_pass_trim(struct fsck *f)
{
	unsigned long before = f->problems;
	if (f->has_trim)
		check_rows(f);
	for (size_t i = 0; i < f->ninodes; i++) {
		struct fsck_inode *in = &f->inodes[i];
		if (!in->bad && (in->rec.flags & INODE_TRIM) && !in->trim) {
			fsck_problem(f, "inode %" PRIu64 ": flag of waiting blocks without a trim row",
				     in->ino);
			set_flag(f, in, false);
		}
	}
	return f->fixing && f->problems != before;
}
