/* The superblock and the usage record (table "super"), and the quotas the
 * usage is held to. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"

static MDB_val key_sb = {2, (void *)"sb"};
static MDB_val key_usage = {5, (void *)"usage"};

uint64_t dbfs_page_block(struct dbfs *fs)
{
	MDB_stat st;
	if (mdb_env_stat(fs->env, &st) || st.ms_psize < 1024 ||
	    DBFS_PAGE_BLOCK(st.ms_psize) > DBFS_BLOCK_SIZE)
		return DBFS_BLOCK_SIZE;
	return DBFS_PAGE_BLOCK(st.ms_psize);
}

int dbfs_format(struct dbfs *fs, MDB_txn *txn)
{
	struct dbfs_super sb;
	memset(&sb, 0, sizeof(sb));
	memcpy(sb.magic, DBFS_MAGIC, sizeof(DBFS_MAGIC));
	sb.version = DBFS_FORMAT_VERSION;
	sb.block_size = (uint32_t)dbfs_page_block(fs);
	sb.next_ino = DBFS_ROOT_INO + 1;
	sb.created_sec = time(NULL);
	sb.byte_order = 0x0102030405060708ull;
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid))
		memset(sb.uuid, 0x5a, sizeof(sb.uuid));
	MDB_val v = {sizeof(sb), &sb};
	int rc = dbfs_put(txn, fs->db_super, &key_sb, &v, MDB_NOOVERWRITE);
	if (rc)
		return rc;
	fs->sb_version = sb.version; /* the root's record in this format's size */

	struct dbfs_inode root;
	memset(&root, 0, sizeof(root));
	root.mode = S_IFDIR | 0755;
	/* The root belongs to whoever makes the store: the thread's file-system
	 * ids (a daemon acting for a caller takes theirs; setfsuid(-1) changes
	 * nothing and tells them). With 0, a DBFS made by a non-root daemon had
	 * a root its own user could not write. */
	root.uid = (uint32_t)setfsuid((uid_t)-1);
	root.gid = (uint32_t)setfsgid((gid_t)-1);
	root.nlink = 2;
	root.next_cookie = DBFS_COOKIE_FIRST;
	root.parent = DBFS_ROOT_INO;
	dbfs_touch(&root, 1, 1, 1);
	root.btime_sec = root.ctime_sec;
	root.btime_nsec = root.ctime_nsec;
	rc = dbfs_inode_put(fs, txn, DBFS_ROOT_INO, &root);
	if (rc)
		return rc;
	struct dbfs_usage_rec u = {0, 1};
	v.mv_size = sizeof(u);
	v.mv_data = &u;
	return dbfs_put(txn, fs->db_super, &key_usage, &v, 0);
}

int dbfs_super_check(struct dbfs *fs, MDB_txn *txn, char *err, size_t errlen)
{
	MDB_val v;
	int rc = dbfs_get(txn, fs->db_super, &key_sb, &v);
	if (rc == MDB_NOTFOUND) {
		snprintf(err, errlen, "not a DBFS store (no superblock)");
		return -EINVAL;
	}
	if (rc) {
		snprintf(err, errlen, "cannot read superblock: %s", mdb_strerror(rc));
		return rc;
	}
	struct dbfs_super sb;
	if (v.mv_size != sizeof(sb)) {
		snprintf(err, errlen, "damaged superblock (size %zu)", v.mv_size);
		return -EINVAL;
	}
	memcpy(&sb, v.mv_data, sizeof(sb));
	if (memcmp(sb.magic, DBFS_MAGIC, sizeof(DBFS_MAGIC))) {
		snprintf(err, errlen, "not a DBFS store (bad magic)");
		return -EINVAL;
	}
	if (sb.byte_order != 0x0102030405060708ull) {
		snprintf(err, errlen, "store was written on a machine of another byte order");
		return -EINVAL;
	}
	if (sb.version < DBFS_FORMAT_OLDEST || sb.version > DBFS_FORMAT_VERSION) {
		snprintf(err, errlen,
			 "unsupported store format version %u (this build reads %u to %u)",
			 sb.version, DBFS_FORMAT_OLDEST, DBFS_FORMAT_VERSION);
		return -EINVAL;
	}
	fs->sb_version = sb.version;
	memcpy(fs->uuid, sb.uuid, sizeof(fs->uuid));
	if (sb.block_size != DBFS_BLOCK_SIZE && sb.block_size != dbfs_page_block(fs)) {
		snprintf(err, errlen, "unsupported block size %u", sb.block_size);
		return -EINVAL;
	}
	fs->block_size = sb.block_size;
	struct dbfs_inode root;
	rc = dbfs_inode_get(fs, txn, DBFS_ROOT_INO, &root);
	if (rc && !dbfs_is_refusal(rc)) {
		snprintf(err, errlen, "cannot read the root directory: %s", mdb_strerror(rc));
		return rc; /* a read error, not a damaged store */
	}
	if (rc || !S_ISDIR(root.mode)) {
		snprintf(err, errlen, "damaged store: root directory missing");
		return -EINVAL;
	}
	return 0;
}

/* Format 1 -> 2: dbfs.durable exists now (dbfs_durable_start made it
 * before this commit), so older builds, which would not read it, must
 * refuse the store. 2 -> 3: ilink is filled (dbfs_feed_upgrade, before
 * this commit) and "feed" exists; older builds would not keep them. 3 -> 4:
 * dbfs.durable has version 2's layout (dbfs_durable_start laid it out
 * before this commit), which older builds would misread. 4 -> 5: in the
 * last piece of dbfs_names_upgrade (upgrade5.c: inode records grew, first
 * names in them; that piece sets DBFS_FORMAT_VERSION, 6 since the feed's
 * shards, and the move below still runs, no 'V' being there).
 * 5 -> 6: the change feed moves into the sharded queue "feeds" at the
 * feed's start, after this commit (dbfs/feed_migrate.c: a store marked 6
 * whose move has not run yet still has the old queue and no row 'V': the
 * next read-write open with the feed on moves it). 6 -> 7: nothing moves;
 * the open's last durable point is a checkpoint, and only after it, which
 * holds version 7, are points imaged (dbfs_durable_opened). */
int dbfs_super_upgrade_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	MDB_val v;
	struct dbfs_super sb;
	(void)arg;
	int rc = dbfs_get(txn, fs->db_super, &key_sb, &v);
	if (rc)
		return rc;
	memcpy(&sb, v.mv_data, sizeof(sb));
	sb.version = DBFS_FORMAT_VERSION;
	v.mv_size = sizeof(sb);
	v.mv_data = &sb;
	if ((rc = dbfs_put(txn, fs->db_super, &key_sb, &v, 0)))
		return rc;
	fs->sb_version = sb.version;
	return 0;
}

int dbfs_alloc_ino(struct dbfs *fs, MDB_txn *txn, uint64_t *ino)
{
	MDB_val v;
	int rc = dbfs_get(txn, fs->db_super, &key_sb, &v);
	if (rc)
		return rc;
	struct dbfs_super sb;
	if (v.mv_size != sizeof(sb))
		return -EIO;
	memcpy(&sb, v.mv_data, sizeof(sb));
	*ino = sb.next_ino++;
	v.mv_size = sizeof(sb);
	v.mv_data = &sb;
	return dbfs_put(txn, fs->db_super, &key_sb, &v, 0);
}

int dbfs_usage_get(struct dbfs *fs, MDB_txn *txn, struct dbfs_usage_rec *u)
{
	MDB_val v;
	int rc = dbfs_get(txn, fs->db_super, &key_usage, &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*u))
		return -EIO;
	memcpy(u, v.mv_data, sizeof(*u));
	return 0;
}

/* Add to the usage record and write it back, even unchanged. */
static int usage_write(struct dbfs *fs, MDB_txn *txn, int64_t dbytes, int64_t dinodes)
{
	struct dbfs_usage_rec u;
	int rc = dbfs_usage_get(fs, txn, &u);
	if (rc)
		return rc;
	u.bytes += (uint64_t)dbytes;
	u.inodes += (uint64_t)dinodes;
	MDB_val v = {sizeof(u), &u};
	return dbfs_put(txn, fs->db_super, &key_usage, &v, 0);
}

int dbfs_usage_add(struct dbfs *fs, MDB_txn *txn, int64_t dbytes, int64_t dinodes)
{
	if (!dbytes && !dinodes)
		return 0;
	return usage_write(fs, txn, dbytes, dinodes);
}

int dbfs_usage_touch(struct dbfs *fs, MDB_txn *txn)
{
	return usage_write(fs, txn, 0, 0);
}

void dbfs_set_quota(struct dbfs *fs, uint64_t quota_bytes, uint64_t quota_inodes)
{
	fs->quota_bytes = quota_bytes;
	fs->quota_inodes = quota_inodes;
}

int dbfs_usage(struct dbfs *fs, struct dbfs_usage *u)
{
	MDB_txn *txn;
	struct dbfs_usage_rec r;
	/* Status readers call it from outside any request of this DBFS. */
	struct dbfs_guard g;
	dbfs_guard_push(&g, fs);
	if (sigsetjmp(g.jb, 0)) {
		dbfs_guard_recovered(&g);
		return -EIO;
	}
	int rc = dbfs_read_begin(fs, &txn);
	if (rc) {
		dbfs_guard_pop(&g);
		return dbfs_errno(rc);
	}
	rc = dbfs_usage_get(fs, txn, &r);
	dbfs_read_end(fs, txn);
	dbfs_guard_pop(&g);
	if (rc)
		return dbfs_errno(rc);
	u->bytes = r.bytes;
	u->inodes = r.inodes;
	u->map_size = fs->map_size;
	struct stat sb;
	mdb_filehandle_t fd;
	/* Allocated bytes: with MDB_WRITEMAP the file is as long as the map.
	 * fstat of the env's own descriptor: no path walk per store (with
	 * 1,000 DBFSs the lookups were a tenth of reading `metrics`). */
	u->file_size = mdb_env_get_fd(fs->env, &fd) == 0 && fstat(fd, &sb) == 0
			       ? (uint64_t)sb.st_blocks * 512 : 0;
	return 0;
}
