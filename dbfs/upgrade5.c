/*
 * The upgrade of a format 3 or 4 store to format 5 (dbfs/format.h "inode":
 * an inode's first name in its record, rows only for further names), made
 * at the first read-write open, in pieces: each its own transaction of at
 * most dbfs_upgrade_piece keys, so that a store of millions of inodes
 * neither writes them all in one commit (every page dirty at once, the
 * space of both trees until it commits) nor starts over after a crash.
 * The row "up5" in super says where the upgrade is; it commits with each
 * piece:
 *
 *   phase 1  every record rewritten at the format-5 size without a name
 *            (name_cookie 0), the format 3/4 name rows deleted; inode order
 *   phase 2  every directory entry names its inode: the first in the
 *            record, the others as rows (as names.c keeps them); dirent order
 *   last     (in phase 2's last piece) the mark 'X' of rows not kept
 *            (feed=off) and "up5" go, the superblock says 5
 *
 * At every piece boundary the store is whole: the records of either size
 * tell theirs by their length (dbfs_inode_fixed_mixed), a read-only open
 * reads it as a format-4 store, dbfs-fsck checks all but the names (it says
 * that the upgrade is under way), and the next read-write open goes on
 * from "up5". A piece that fails leaves the store at the previous boundary.
 * Runs at open only, before anything else of this process writes (store.c);
 * two processes opening one shared store go on from each other's pieces.
 */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

long dbfs_upgrade_piece = 16384;

static MDB_val key_up5 = {3, (void *)"up5"};

static long piece_keys(void)
{
	return dbfs_upgrade_piece > 0 ? dbfs_upgrade_piece : 1;
}

/* Where the upgrade is: the row, or phase 1 from the start. */
static int progress_get(struct dbfs *fs, MDB_txn *txn, struct dbfs_upgrade5 *u)
{
	MDB_val v;
	memset(u, 0, sizeof(*u));
	int rc = dbfs_get(txn, fs->db_super, &key_up5, &v);
	if (rc == MDB_NOTFOUND) {
		u->phase = 1;
		return 0;
	}
	if (rc)
		return rc;
	if (v.mv_size < 8 || v.mv_size > sizeof(*u))
		return MDB_CORRUPTED;
	memcpy(u, v.mv_data, v.mv_size);
	if ((u->phase != 1 && u->phase != 2) || 8 + (size_t)u->klen != v.mv_size)
		return MDB_CORRUPTED;
	return 0;
}

static int progress_put(struct dbfs *fs, MDB_txn *txn, const struct dbfs_upgrade5 *u)
{
	MDB_val v = {8 + (size_t)u->klen, (void *)u};
	return dbfs_put(txn, fs->db_super, &key_up5, &v, 0);
}

/* The cursor at the phase's next key (the first when klen is 0). */
static int seek(MDB_cursor *c, const struct dbfs_upgrade5 *u, MDB_val *k, MDB_val *v)
{
	if (!u->klen)
		return mdb_cursor_get(c, k, v, MDB_FIRST);
	unsigned char kb[sizeof(u->key)];
	memcpy(kb, u->key, u->klen); /* the cursor does not write through k */
	k->mv_size = u->klen;
	k->mv_data = kb;
	return mdb_cursor_get(c, k, v, MDB_SET_RANGE);
}

/* Record k/v at the format-5 size, without a name (one in it already:
 * rewritten all the same, by an earlier piece that did not commit). */
static int record_v5(MDB_cursor *c, MDB_val *k, MDB_val *v)
{
	struct dbfs_inode in;
	size_t tail = 0, fixed = v->mv_size;
	if (v->mv_size < DBFS_INODE_V4_SIZE)
		return 0; /* damaged: dbfs-fsck's business */
	memset(&in, 0, sizeof(in));
	memcpy(&in, v->mv_data, DBFS_INODE_V4_SIZE);
	if (S_ISLNK(in.mode) && in.size <= DBFS_SYMLINK_MAX && in.size < v->mv_size)
		tail = in.size;
	fixed -= tail;
	if (fixed != DBFS_INODE_V4_SIZE && fixed != sizeof(in))
		return 0; /* damaged */
	char buf[sizeof(in) + DBFS_SYMLINK_MAX];
	memcpy(buf, &in, sizeof(in));
	memcpy(buf + sizeof(in), (const char *)v->mv_data + fixed, tail);
	MDB_val nv = {sizeof(in) + tail, buf};
	unsigned char kb[8]; /* not the page's bytes: the put moves them */
	memcpy(kb, k->mv_data, 8);
	k->mv_data = kb;
	return mdb_cursor_put(c, k, &nv, MDB_CURRENT);
}

/* Phase 1, one piece: *u becomes the next record's key, or phase 2. */
static int piece_records(struct dbfs *fs, MDB_txn *txn, struct dbfs_upgrade5 *u)
{
	MDB_cursor *c;
	MDB_val k, v;
	long n = 0;
	int rc = mdb_cursor_open(txn, fs->db_inode, &c);
	if (rc)
		return rc;
	for (rc = seek(c, u, &k, &v); !rc; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8) { /* a format 3/4 name row */
			if ((rc = dbfs_cursor_del(c)))
				break;
			continue;
		}
		if (n++ == piece_keys()) { /* before a record: its rows follow it */
			u->klen = 8;
			memcpy(u->key, k.mv_data, 8);
			break;
		}
		if ((rc = record_v5(c, &k, &v)))
			break;
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND) {
		u->phase = 2;
		u->klen = 0;
		rc = 0;
	}
	return rc;
}

static int row_put(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t dir, const char *name,
		   size_t len)
{
	unsigned char kb[16 + DBFS_NAME_MAX];
	MDB_val k, v = {0, NULL};
	dbfs_ilink_key(kb, ino, dir, name, len, &k);
	return dbfs_put(txn, fs->db_inode, &k, &v, 0);
}

/* Phase 2, one piece: *u becomes the next entry's key, or *end is set. */
static int piece_entries(struct dbfs *fs, MDB_txn *txn, struct dbfs_upgrade5 *u, bool *end)
{
	MDB_cursor *c;
	MDB_val k, v;
	long n = 0;
	int rc = mdb_cursor_open(txn, fs->db_dirent, &c);
	if (rc)
		return rc;
	for (rc = seek(c, u, &k, &v); !rc; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct dbfs_dirent_val dv;
		struct dbfs_inode in;
		if (n++ == piece_keys()) {
			u->klen = (uint32_t)k.mv_size;
			memcpy(u->key, k.mv_data, k.mv_size);
			break;
		}
		if (k.mv_size <= 8 || k.mv_size > 8 + DBFS_NAME_MAX || v.mv_size != sizeof(dv))
			continue; /* damaged: dbfs-fsck's business */
		memcpy(&dv, v.mv_data, sizeof(dv));
		int r = dbfs_inode_get(fs, txn, dv.ino, &in);
		if (r == -ENOENT || r == -EIO)
			continue;
		if ((rc = r))
			break;
		uint64_t dir = dbfs_get_be64(k.mv_data);
		if (!in.name_cookie && (!S_ISDIR(in.mode) || in.parent == dir)) {
			in.parent = dir;
			in.name_cookie = dv.cookie;
			rc = dbfs_inode_put(fs, txn, dv.ino, &in);
		} else {
			rc = row_put(fs, txn, dv.ino, dir, (const char *)k.mv_data + 8,
				     k.mv_size - 8);
		}
		if (rc)
			break;
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND) {
		*end = true;
		rc = 0;
	}
	return rc;
}

/* The last piece's end: the version, no progress row, no 'X'. */
static int finish(struct dbfs *fs, MDB_txn *txn)
{
	int rc = 0;
	if (fs->db_feed) {
		/* format 3 and 4's mark of rows not kept (feed=off): rebuilt */
		MDB_val x = {1, (void *)"X"};
		rc = dbfs_del(txn, fs->db_feed, &x, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (!rc && (rc = dbfs_del(txn, fs->db_super, &key_up5, NULL)) == MDB_NOTFOUND)
		rc = 0;
	if (!rc)
		rc = dbfs_super_upgrade_fn(fs, txn, NULL);
	return rc;
}

/* Has another process (a shared store) finished the upgrade already? Then
 * there is no "up5" to go on from, and starting over would strip the
 * names of a store in use. */
static int finished(struct dbfs *fs, MDB_txn *txn, bool *yes)
{
	MDB_val k = {2, (void *)"sb"}, v;
	struct dbfs_super sb;
	int rc = dbfs_get(txn, fs->db_super, &k, &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(sb))
		return MDB_CORRUPTED;
	memcpy(&sb, v.mv_data, sizeof(sb));
	*yes = sb.version >= 5;
	if (*yes)
		fs->sb_version = sb.version;
	return 0;
}

static int piece_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	bool *done = arg, end = false;
	struct dbfs_upgrade5 u;
	uint32_t was = fs->sb_version;
	int rc = finished(fs, txn, done);
	if (rc || *done)
		return rc;
	rc = progress_get(fs, txn, &u);
	if (!rc && u.phase == 1)
		rc = piece_records(fs, txn, &u);
	else if (!rc)
		rc = piece_entries(fs, txn, &u, &end);
	if (!rc)
		rc = end ? finish(fs, txn) : progress_put(fs, txn, &u);
	if (rc)
		fs->sb_version = was; /* the transaction goes */
	else
		*done = end;
	return rc;
}

int dbfs_names_upgrade(struct dbfs *fs)
{
	bool done = false;
	int rc = 0;
	if (fs->feed)
		dbfs_feed_paths_changed(fs, 0);
	fs->upgrading = true;
	while (!rc && !done)
		rc = dbfs_write(fs, piece_fn, &done);
	fs->upgrading = false;
	return rc;
}
