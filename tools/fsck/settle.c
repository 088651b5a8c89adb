/*
 * Settled events' table (dbfs/format.h "settle", dbfs/settle.c): each row
 * has a 12-byte key (ino, period) with a period of 1 ..
 * DBFS_SETTLE_MS_MAX ms and a 24-byte value whose span is empty (hi 0:
 * only truncates so far) or lo <= hi; the row "P" holds at most
 * DBFS_SETTLE_MAX periods, each in range. A row may name a file that has
 * gone, or a period no longer wanted: its message drops it when it comes
 * (a note). --repair deletes a malformed row (its message then finds
 * nothing and is dropped); a bad "P" is deleted too (the durable
 * subscriptions' periods are written again when one subscribes or
 * unsubscribes; until then their settled events do not come). That each
 * row has its message in the queue "later" is not checked here (the
 * queue's own check runs in the expire pass).
 */
#include <inttypes.h>
#include <string.h>

#include "dbfs/feed.h"
#include "tools/fsck/fsck.h"

struct settle_row {
	uint64_t last_ns, lo, hi;
};

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool period_ok(uint32_t ms)
{
	return ms >= 1 && ms <= DBFS_SETTLE_MS_MAX;
}

/* The "P" row: NULL when it is well formed, else why not. */
static const char *periods_bad(const MDB_val *v)
{
	if (v->mv_size % 4 || v->mv_size / 4 > DBFS_SETTLE_MAX)
		return "malformed list of periods";
	for (size_t i = 0; i < v->mv_size; i += 4)
		if (!period_ok(get_be32((const unsigned char *)v->mv_data + i)))
			return "a period out of range";
	return NULL;
}

void fsck_pass_settle(struct fsck *f)
{
	MDB_dbi dbi;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t rows = 0, gone = 0;
	int rc = mdb_dbi_open(f->txn, DBFS_DB_SETTLE, 0, &dbi);
	if (rc == MDB_NOTFOUND)
		return; /* a store no newer build opened read-write yet */
	fsck_lmdb_check(rc, "opening settle");
	fsck_lmdb_check(mdb_cursor_open(f->txn, dbi, &c), "cursor on settle");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const unsigned char *kp = k.mv_data;
		const char *why = NULL;
		uint64_t ino = 0;
		uint32_t ms = 0;
		if (k.mv_size == 1 && kp[0] == 'P') {
			if ((why = periods_bad(&v))) {
				fsck_problem(f, "settle: the periods' row: %s", why);
				if (f->fixing)
					fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting a settle row");
			}
			continue;
		}
		if (k.mv_size != 12) {
			why = "malformed key";
		} else {
			ino = dbfs_get_be64(kp);
			ms = get_be32(kp + 8);
			struct settle_row r;
			if (!ino || !period_ok(ms)) {
				why = "malformed key";
			} else if (v.mv_size != sizeof(r)) {
				why = "malformed value";
			} else {
				memcpy(&r, v.mv_data, sizeof(r));
				if (r.hi && r.lo > r.hi)
					why = "its span ends before it starts";
			}
		}
		if (why) {
			fsck_problem(f, "settle row %" PRIu64 "/%" PRIu32 ": %s", ino, ms, why);
			if (f->fixing)
				fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting a settle row");
			continue;
		}
		rows++;
		struct fsck_inode *in = fsck_inode_find(f, ino);
		if (!in || in->bad || !S_ISREG(in->rec.mode) || !in->rec.nlink)
			gone++;
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading settle");
	mdb_cursor_close(c);
	if (gone)
		fsck_note(f, "settle: %" PRIu64 " of %" PRIu64 " bursts name a file gone (dropped "
			     "when their message comes)", gone, rows);
}
