/*
 * File expiry's schedule (dbfs/expire.h): the value of user.dbfs.expire,
 * the expiry index, and what a setxattr or removexattr of it writes.
 *
 * A schedule is three things, written in the transaction of the xattr
 * change, so that they commit or vanish together:
 *   - the attribute itself, as "@EPOCH" (what getfattr shows);
 *   - a row of the table "expire" (the index, the truth of what is due):
 *
 *       key: ino u64 BE     value: due u64 BE (seconds since the epoch)
 *
 *   - a delayed message in the queue "later" (expire_run.c), deliverable
 *     at the due time, carrying (ino, due).
 * A reschedule rewrites the row and enqueues a new message; a cancel
 * deletes the row. The queue cannot take a message back (its delay shard
 * keeps nothing per message in memory, and nothing to look one up by),
 * so the old message stays: when it is delivered it no longer matches
 * the row (none, or another due) and is dropped. The row goes with the
 * inode's xattrs when the inode is destroyed (dbfs_xattr_delete_all).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#include "dbfs/expire.h"
#include "dbfs/internal.h"

int dbfs_expire_parse(const void *val, size_t len, int64_t now_sec, uint32_t now_nsec,
		      uint64_t *due_sec)
{
	const char *v = val;
	uint64_t n = 0;
	if (len < 2 || (v[0] != '+' && v[0] != '@'))
		return -EINVAL;
	for (size_t i = 1; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		unsigned d = (unsigned)(v[i] - '0');
		if (n > (DBFS_EXPIRE_MAX_SEC - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	if (v[0] == '+') {
		/* never early: from the next whole second */
		uint64_t base = (uint64_t)(now_sec < 0 ? 0 : now_sec) + (now_nsec ? 1 : 0);
		if (n > DBFS_EXPIRE_MAX_SEC - base)
			return -ERANGE;
		n += base;
	}
	*due_sec = n;
	return 0;
}

bool dbfs_expire_name(const char *name)
{
	return !strcmp(name, DBFS_EXPIRE_XATTR);
}

static void row_key(unsigned char kb[8], uint64_t ino, MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	k->mv_size = 8;
	k->mv_data = kb;
}

int dbfs_expire_row(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint64_t *due_sec)
{
	unsigned char kb[8];
	MDB_val k, v;
	if (!fs->db_expire)
		return MDB_NOTFOUND;
	row_key(kb, ino, &k);
	int rc = dbfs_get(txn, fs->db_expire, &k, &v);
	if (rc)
		return rc;
	if (v.mv_size != 8)
		return MDB_CORRUPTED;
	*due_sec = dbfs_get_be64(v.mv_data);
	return 0;
}

int dbfs_expire_set(struct dbfs *fs, MDB_txn *txn, uint64_t ino, const struct dbfs_inode *in,
		    const void *val, size_t len, int flags)
{
	int64_t s;
	uint32_t ns;
	uint64_t due;
	char text[32];
	int rc;

	/* every refusal before the first change */
	if (S_ISDIR(in->mode))
		return -EISDIR;
	if (!S_ISREG(in->mode))
		return -EINVAL;
	dbfs_now(&s, &ns);
	if ((rc = dbfs_expire_parse(val, len, s, ns, &due)))
		return rc;
	/* removal needs the names of the inode: kept only with the feed */
	if (!fs->feed || !fs->db_expire || !fs->expire)
		return -EOPNOTSUPP;
	/* a removal without write access to the directory: the owner's
	 * (or root's) decision only, as in a sticky directory */
	const struct dbfs_caller *who = dbfs_feed_caller(fs);
	if (who && who->uid != 0 && who->uid != in->uid)
		return -EPERM;
	int n = snprintf(text, sizeof(text), "@%llu", (unsigned long long)due);
	if ((rc = dbfs_xattr_set(fs, txn, ino, DBFS_EXPIRE_XATTR, text, (size_t)n, flags)))
		return rc; /* EEXIST/ENODATA of the flags: nothing written yet */
	unsigned char kb[8], vb[8];
	MDB_val k, v = {8, vb};
	row_key(kb, ino, &k);
	dbfs_put_be64(vb, due);
	if ((rc = dbfs_put(txn, fs->db_expire, &k, &v, 0)))
		return rc;
	return dbfs_expire_enqueue(fs, txn, ino, due);
}

int dbfs_expire_cancel(struct dbfs *fs, MDB_txn *txn, uint64_t ino)
{
	unsigned char kb[8];
	MDB_val k;
	if (!fs->db_expire)
		return 0;
	row_key(kb, ino, &k);
	int rc = dbfs_del(txn, fs->db_expire, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
