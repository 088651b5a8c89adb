/*
 * The inodes' names and the change feed's queue (dbfs/format.h "inode",
 * dbfs/names.c). Format 5: each inode's first name in its record (parent,
 * name_cookie naming one of its valid entries; 0 when it has none) and an
 * ilink row for every other entry, nothing else. Format 3 and 4: one row
 * per valid entry (none when marked stale). --repair rebuilds them from the
 * entries as the other passes left them. The queue "feeds" (and an older
 * store's "feed") is libmfsq's own
 * check (mfsq_check); a damaged queue is reported, not repaired (its events
 * would be guesses): a mount reads what is readable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/fsck/fsck.h"
#include "mfsq.h"

static size_t ilink_key(unsigned char *k, const struct fsck_dirent *d)
{
	dbfs_put_be64(k, d->val.ino);
	memcpy(k + 8, d->key, d->klen); /* parent BE + name */
	return 8 + d->klen;
}

/* Is this ilink row the twin of a valid entry? */
static bool row_valid(struct fsck *f, const MDB_val *k)
{
	if (k->mv_size <= 16 || k->mv_size > 16 + DBFS_NAME_MAX)
		return false;
	const unsigned char *p = k->mv_data;
	struct fsck_dirent *d = fsck_dirent_find(f, dbfs_get_be64(p + 8), p + 16, k->mv_size - 16);
	return d && !d->bad && !d->gone && d->val.ino == dbfs_get_be64(p);
}

static void check_ilink(struct fsck *f)
{
	MDB_dbi dbi = f->dbi_inode; /* name rows: keys longer than an inode's */
	int rc;
	uint64_t extra = 0, missing = 0;
	MDB_cursor *c;
	MDB_val k, v;
	fsck_lmdb_check(mdb_cursor_open(f->txn, dbi, &c), "ilink cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 8 && (!row_valid(f, &k) || v.mv_size))
			extra++;
	mdb_cursor_close(c);
	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		unsigned char kb[16 + DBFS_NAME_MAX];
		if (d->bad || d->gone || d->klen > 8 + DBFS_NAME_MAX)
			continue;
		MDB_val ik = {ilink_key(kb, d), kb};
		rc = mdb_get(f->txn, dbi, &ik, &v);
		if (rc == MDB_NOTFOUND)
			missing++;
		else
			fsck_lmdb_check(rc, "reading ilink");
	}
	if (!extra && !missing)
		return;
	fsck_problem(f,
		     "ilink (names of inodes for the change feed): %llu rows name no entry, "
		     "%llu entries have no row",
		     (unsigned long long)extra, (unsigned long long)missing);
	if (!f->fixing)
		return;
	fsck_lmdb_check(mdb_cursor_open(f->txn, dbi, &c), "ilink cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 8)
			fsck_lmdb_check(mdb_cursor_del(c, 0), "emptying ilink");
	mdb_cursor_close(c);
	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		unsigned char kb[16 + DBFS_NAME_MAX];
		if (d->bad || d->gone || d->klen > 8 + DBFS_NAME_MAX)
			continue;
		MDB_val ik = {ilink_key(kb, d), kb}, iv = {0, NULL};
		fsck_lmdb_check(mdb_put(f->txn, dbi, &ik, &iv, 0), "rebuilding ilink");
	}
	fsck_action(f, "rebuilt ilink from the directory entries");
}

/* Format 5: is entry d its inode's first name (the one in the record)? */
static bool is_first(struct fsck *f, const struct fsck_dirent *d)
{
	struct fsck_inode *c = fsck_inode_find(f, d->val.ino);
	return c && !c->bad && c->rec.name_cookie == d->val.cookie && c->rec.parent == d->parent;
}

static bool entry_ok(const struct fsck_dirent *d)
{
	return !d->bad && !d->gone && d->klen <= 8 + DBFS_NAME_MAX;
}

/* Format 5: rebuild, as dbfs's upgrade does (names.c): every row gone, the
 * first valid entry in key order (a directory's in its parent) in the
 * record, the others as rows. */
static void rebuild_names(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;
	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_inode, &c), "ilink cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 8)
			fsck_lmdb_check(mdb_cursor_del(c, 0), "emptying ilink");
	mdb_cursor_close(c);
	for (size_t i = 0; i < f->ninodes; i++)
		f->inodes[i].rec.name_cookie = 0;
	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		struct fsck_inode *in = fsck_inode_find(f, d->val.ino);
		if (!entry_ok(d) || !in || in->bad)
			continue;
		if (!in->rec.name_cookie &&
		    (!S_ISDIR(in->rec.mode) || in->rec.parent == d->parent)) {
			in->rec.parent = d->parent;
			in->rec.name_cookie = d->val.cookie;
			continue;
		}
		unsigned char kb[16 + DBFS_NAME_MAX];
		MDB_val ik = {ilink_key(kb, d), kb}, iv = {0, NULL};
		fsck_lmdb_check(mdb_put(f->txn, f->dbi_inode, &ik, &iv, 0), "rebuilding ilink");
	}
	for (size_t i = 0; i < f->ninodes; i++)
		if (!f->inodes[i].bad)
			fsck_put_inode(f, &f->inodes[i]);
	fsck_action(f, "rebuilt the inodes' names from the directory entries");
}

static void check_names(struct fsck *f)
{
	uint64_t extra = 0, missing = 0, wrong = 0;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;
	/* rows: each the twin of a valid entry that is not its inode's first */
	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_inode, &c), "ilink cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size <= 8)
			continue;
		const unsigned char *p = k.mv_data;
		struct fsck_dirent *d = k.mv_size > 16 && k.mv_size <= 16 + DBFS_NAME_MAX
			? fsck_dirent_find(f, dbfs_get_be64(p + 8), p + 16, k.mv_size - 16)
			: NULL;
		if (!d || !entry_ok(d) || d->val.ino != dbfs_get_be64(p) || is_first(f, d) ||
		    v.mv_size)
			extra++;
	}
	mdb_cursor_close(c);
	/* entries: the first in the record, every other one a row */
	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		if (!entry_ok(d) || is_first(f, d))
			continue;
		unsigned char kb[16 + DBFS_NAME_MAX];
		MDB_val ik = {ilink_key(kb, d), kb};
		rc = mdb_get(f->txn, f->dbi_inode, &ik, &v);
		if (rc == MDB_NOTFOUND)
			missing++;
		else
			fsck_lmdb_check(rc, "reading ilink");
	}
	/* records: a first name that is one of its entries, iff it has any */
	for (size_t i = 0; i < f->ninodes; i++)
		f->inodes[i].named = false;
	for (size_t i = 0; i < f->ndirents; i++)
		if (entry_ok(&f->dirents[i]) && is_first(f, &f->dirents[i]))
			fsck_inode_find(f, f->dirents[i].val.ino)->named = true;
	for (size_t i = 0; i < f->ninodes; i++) {
		struct fsck_inode *in = &f->inodes[i];
		if (!in->bad && (in->named != (in->links > 0) ||
				 (!in->named && in->rec.name_cookie)))
			wrong++;
	}
	if (!extra && !missing && !wrong)
		return;
	fsck_problem(f,
		     "inode names (for the change feed): %llu rows name no other entry, "
		     "%llu other entries have no row, %llu records name no entry or lack one",
		     (unsigned long long)extra, (unsigned long long)missing,
		     (unsigned long long)wrong);
	if (f->fixing)
		rebuild_names(f);
}

static void report(void *arg, const char *problem)
{
	fsck_unfixable(arg, "%s (the change feed; not repaired)", problem);
}

void fsck_pass_feed(struct fsck *f)
{
	if (f->sb.version < 3)
		return; /* dbfs upgrades it at its next read-write open */
	/* the upgrade to format 5 under way: names half moved (dbfs/upgrade5.c) */
	if (f->sb.version >= 5 && !f->upgrading)
		check_names(f);
	/* 'X' in the feed table: used with feed=off, ilink not kept (dbfs
	 * rebuilds it when the feed is on again) */
	MDB_dbi fdb;
	MDB_val k = {1, "X"}, v;
	bool stale =
	    mdb_dbi_open(f->txn, DBFS_DB_FEED, 0, &fdb) == 0 && mdb_get(f->txn, fdb, &k, &v) == 0;
	if (!stale && f->sb.version < 5 && !f->upgrading)
		check_ilink(f);
	/* the sharded queue, and an older store's (emptied once migrated) */
	static const char *const queues[] = {DBFS_FEED_QUEUE_SHARDED, DBFS_FEED_QUEUE};
	for (size_t i = 0; i < sizeof(queues) / sizeof(queues[0]); i++) {
		uint64_t problems = 0;
		int rc = mfsq_check(f->txn, queues[i], report, f, &problems);
		if (rc == ENOENT)
			continue; /* no feed (made with feed=off), or not that one */
		if (rc)
			fsck_fatal("%s: checking the change feed's queue: %s", f->store,
				   mfsq_strerror(rc));
	}
}
