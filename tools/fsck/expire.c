/*
 * File expiry's tables (dbfs/format.h "expire", dbfs/expire.c): every row
 * of the expiry index names a regular file whose user.dbfs.expire is
 * "@due" with the row's due; every file with links and that attribute has
 * its row; and the queue "later" that carries the schedules (libmfsq's own
 * check). --repair deletes rows that match no attribute, and the attribute
 * of a file without a row (its schedule cannot be trusted: set it again);
 * a damaged queue is reported, not repaired.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tools/fsck/fsck.h"
#include "mfsq.h"

#define XNAME "user.dbfs.expire"

/* The attribute's value of `ino` as due seconds: true when it has one
 * that reads "@N". */
static bool xattr_due(struct fsck *f, uint64_t ino, uint64_t *due)
{
	unsigned char kb[8 + sizeof(XNAME) - 1];
	MDB_val k = {sizeof(kb), kb}, v;
	dbfs_put_be64(kb, ino);
	memcpy(kb + 8, XNAME, sizeof(XNAME) - 1);
	int rc = mdb_get(f->txn, f->dbi_xattr, &k, &v);
	if (rc == MDB_NOTFOUND)
		return false;
	fsck_lmdb_check(rc, "reading an xattr");
	const char *p = v.mv_data;
	uint64_t n = 0;
	if (v.mv_size < 2 || v.mv_size > 21 || p[0] != '@')
		return false;
	for (size_t i = 1; i < v.mv_size; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		n = n * 10 + (uint64_t)(p[i] - '0');
	}
	*due = n;
	return true;
}

static void drop_xattr(struct fsck *f, uint64_t ino)
{
	unsigned char kb[8 + sizeof(XNAME) - 1];
	dbfs_put_be64(kb, ino);
	memcpy(kb + 8, XNAME, sizeof(XNAME) - 1);
	fsck_del_key(f, f->dbi_xattr, kb, sizeof(kb));
}

static void check_rows(struct fsck *f, MDB_dbi dbi)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;
	fsck_lmdb_check(mdb_cursor_open(f->txn, dbi, &c), "cursor on expire");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const char *why = NULL;
		uint64_t ino = k.mv_size == 8 ? dbfs_get_be64(k.mv_data) : 0, due = 0, xdue;
		struct fsck_inode *in = ino ? fsck_inode_find(f, ino) : NULL;
		if (k.mv_size != 8 || v.mv_size != 8)
			why = "malformed";
		else if ((due = dbfs_get_be64(v.mv_data)), !in || in->bad)
			why = "names no inode";
		else if (!S_ISREG(in->rec.mode))
			why = "names no regular file";
		else if (!xattr_due(f, ino, &xdue))
			why = "the file has no user.dbfs.expire";
		else if (xdue != due)
			why = "its time is not the file's user.dbfs.expire";
		if (!why)
			continue;
		fsck_problem(f, "expiry index: the row of inode %llu (due %llu) %s",
			     (unsigned long long)ino, (unsigned long long)due, why);
		if (f->fixing) {
			fsck_lmdb_check(mdb_cursor_del(c, 0), "deleting an expiry row");
			if (in && !in->bad)
				drop_xattr(f, ino);
			fsck_action(f, "deleted it (set user.dbfs.expire again)");
		}
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading expire");
}

static void check_files(struct fsck *f, MDB_dbi dbi)
{
	for (size_t i = 0; i < f->ninodes; i++) {
		struct fsck_inode *in = &f->inodes[i];
		uint64_t due;
		if (in->bad || !in->rec.nlink || !xattr_due(f, in->ino, &due))
			continue;
		unsigned char kb[8];
		MDB_val k = {8, kb}, v;
		dbfs_put_be64(kb, in->ino);
		int rc = mdb_get(f->txn, dbi, &k, &v);
		if (rc != MDB_NOTFOUND) {
			fsck_lmdb_check(rc, "reading expire");
			continue;
		}
		fsck_problem(f, "inode %llu has user.dbfs.expire @%llu but no expiry row: it never "
				"expires",
			     (unsigned long long)in->ino, (unsigned long long)due);
		if (f->fixing) {
			drop_xattr(f, in->ino);
			fsck_action(f, "removed its user.dbfs.expire (set it again)");
		}
	}
}

static void report(void *arg, const char *problem)
{
	fsck_unfixable(arg, "%s (delayed work; not repaired)", problem);
}

void fsck_pass_expire(struct fsck *f)
{
	MDB_dbi dbi;
	int rc = mdb_dbi_open(f->txn, DBFS_DB_EXPIRE, 0, &dbi);
	if (rc == MDB_NOTFOUND)
		return; /* a store no newer build opened read-write yet */
	fsck_lmdb_check(rc, "opening expire");
	check_rows(f, dbi);
	check_files(f, dbi);
	uint64_t problems = 0;
	rc = mfsq_check(f->txn, DBFS_LATER_QUEUE, report, f, &problems);
	if (rc && rc != ENOENT)
		fsck_fatal("%s: checking the queue of delayed work: %s", f->store,
			   mfsq_strerror(rc));
}
