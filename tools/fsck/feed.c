/*
 * The change feed's tables (format 3, dbfs/format.h): ilink, the name rows
 * in the inode table (one per valid entry, nothing else), and the queue "feed"
 * (libmfsq's own check, mfsq_check). --repair rebuilds ilink from the
 * entries as the other passes left them; a damaged queue is reported, not
 * repaired (its events would be guesses): a mount reads what is readable.
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

static void report(void *arg, const char *problem)
{
	fsck_unfixable(arg, "%s (the change feed; not repaired)", problem);
}

void fsck_pass_feed(struct fsck *f)
{
	if (f->sb.version < 3)
		return; /* dbfs upgrades it at its next read-write open */
	/* 'X' in the feed table: used with feed=off, ilink not kept (dbfs
	 * rebuilds it when the feed is on again) */
	MDB_dbi fdb;
	MDB_val k = {1, "X"}, v;
	bool stale =
	    mdb_dbi_open(f->txn, DBFS_DB_FEED, 0, &fdb) == 0 && mdb_get(f->txn, fdb, &k, &v) == 0;
	if (!stale)
		check_ilink(f);
	uint64_t problems = 0;
	int rc = mfsq_check(f->txn, DBFS_FEED_QUEUE, report, f, &problems);
	if (rc == ENOENT)
		return; /* no feed (made with feed=off) */
	if (rc)
		fsck_fatal("%s: checking the change feed's queue: %s", f->store, mfsq_strerror(rc));
}
