/*
 * Space reserve.
 *
 * LMDB writes new pages past the end of what it uses. On a full file
 * system that write fails: as a short write (EIO at commit) without
 * MDB_WRITEMAP, as SIGBUS on the first touch of an unallocated page of the
 * map with it. Even a delete needs fresh pages (copy-on-write), so a store
 * that filled its disk could not free anything.
 *
 * So the leader keeps a reserve allocated (fallocate) past the last page
 * LMDB uses, larger than any one batch can write (DBFS_BATCH_BYTES), and
 * with MDB_WRITEMAP also prefaulted into the map. When the reserve cannot
 * be restored and LMDB's free list holds less than LOW_FREE, operations
 * that need space fail with ENOSPC before they change anything
 * (dbfs_space_check) while deletes proceed inside the reserve.
 *
 * Freed space must be usable at once. LMDB reuses the pages that commit N
 * freed only from transaction N+2 on (and only once no reader holds a
 * snapshot older than N; the read-transaction pool holds none, readtxn.c):
 * so on a full disk the leader commits the reaps of deleted files before
 * the batch that needs their room (commit.c), and when the free list's
 * only room is the newest commit's, one small commit makes it usable
 * (make_freed_usable), then a durable point releases what the previous
 * one pinned (durable.c). statfs's f_bavail says what a write can get under
 * these rules (dbfs_space_writable): 0 exactly when writes get ENOSPC.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "dbfs/internal.h"

#define RESERVE_MIN (2u << 20)
#define RESERVE_MAX (16u << 20)
#define PREFAULT_FROM (64u << 20)
/* Free-list bytes below which, with no room to grow, writes are refused:
 * two batches' worth, so that a batch never has to grow into the reserve. */
#define LOW_FREE (2 * DBFS_BATCH_BYTES)

/* LMDB's fixed database handles and meta pages (lmdb.h keeps them private) */
#define FREE_DBI 0
#define MAIN_DBI 1
#define NUM_METAS 2

/* The reserve scales with the store, so that a thousand small stores do
 * not pin gigabytes while a large one can still delete. */
static uint64_t reserve_for(uint64_t used)
{
	uint64_t r = used / 8;
	return r < RESERVE_MIN ? RESERVE_MIN : r > RESERVE_MAX ? RESERVE_MAX : r;
}

static uint64_t used_bytes(struct dbfs *fs, unsigned *psize)
{
	MDB_envinfo info;
	MDB_stat st;
	/* LMDB reads both from its meta page, in the map, which moves when it
	 * grows; the callers hold no transaction (statfs calls it too). */
	pthread_rwlock_rdlock(&fs->map_lock);
	mdb_env_info(fs->env, &info);
	mdb_env_stat(fs->env, &st);
	pthread_rwlock_unlock(&fs->map_lock);
	*psize = st.ms_psize;
	return ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
}

static uint64_t tree_pages(MDB_txn *t, MDB_dbi dbi)
{
	MDB_stat st;
	if (mdb_stat(t, dbi, &st))
		return 0;
	return (uint64_t)st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
}

/*
 * Pages in LMDB's free list, counted without reading it: every page up to
 * the last one is either a meta page, a page of a B-tree (the free list's
 * own, the main database's, or a named database's) or in the free list.
 * A named database's page counts are its record in the main database
 * (LMDB's MDB_db: pad u32, flags u16, depth u16, then branch, leaf and
 * overflow page counts, entries and root, 8 bytes each), so the queue's
 * tables (the change feed) are counted like DBFS's own. Needs the newest
 * snapshot (mdb_env_info describes the newest commit) and a main database
 * that holds only named databases; returns -1 otherwise.
 */
#define LMDB_DB_RECORD 48u
int64_t dbfs_free_pages_counted(struct dbfs *fs, MDB_txn *t)
{
	MDB_envinfo info;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t used = NUM_METAS + tree_pages(t, FREE_DBI) + tree_pages(t, MAIN_DBI);
	int rc;

	if (mdb_env_info(fs->env, &info) || info.me_last_txnid != mdb_txn_id(t) ||
	    mdb_cursor_open(t, MAIN_DBI, &c))
		return -1;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		uint64_t pg[3];
		if (v.mv_size != LMDB_DB_RECORD)
			break;
		memcpy(pg, (char *)v.mv_data + 8, sizeof(pg));
		used += pg[0] + pg[1] + pg[2];
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return -1;
	return used <= info.me_last_pgno + 1 ? (int64_t)(info.me_last_pgno + 1 - used) : -1;
}

/* Pages in LMDB's free list, by reading it: one record per transaction
 * that freed pages, each a count and the page numbers. */
uint64_t dbfs_free_pages_listed(MDB_txn *t)
{
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t pages = 0;

	if (mdb_cursor_open(t, FREE_DBI, &c) == 0) {
		while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
			if (v.mv_size >= sizeof(size_t))
				pages += *(size_t *)v.mv_data;
		mdb_cursor_close(c);
	}
	return pages;
}

uint64_t dbfs_free_pages_of(MDB_txn *t, size_t id)
{
	MDB_cursor *c;
	MDB_val k = {sizeof(id), &id}, v;
	uint64_t pages = 0;
	/* through a cursor: mdb_get refuses the free list (EINVAL) */
	if (mdb_cursor_open(t, FREE_DBI, &c))
		return 0;
	if (mdb_cursor_get(c, &k, &v, MDB_SET) == 0 && v.mv_size >= sizeof(size_t))
		pages = *(size_t *)v.mv_data;
	mdb_cursor_close(c);
	return pages;
}

/* Bytes in LMDB's free list (pages that deletes gave back); *newest gets
 * those the newest commit freed, which the next transaction cannot reuse. statfs asks
 * for it on every call, and programs call statfs often (stress-ng before
 * every file it makes), while the list can hold many thousand records:
 * count it when we can, read it when we must. */
static uint64_t free_bytes(struct dbfs *fs, unsigned psize, uint64_t *newest)
{
	MDB_txn *t;
	int64_t pages = -1;

	*newest = 0;
	for (int tries = 0; pages < 0 && tries < 3; tries++) {
		if (dbfs_read_begin(fs, &t))
			return 0;
		pages = dbfs_free_pages_counted(fs, t);
		if (pages < 0 && tries == 2)
			pages = (int64_t)dbfs_free_pages_listed(t);
		if (pages >= 0)
			*newest = dbfs_free_pages_of(t, mdb_txn_id(t)) * psize;
		dbfs_read_end(fs, t);
	}
	return (uint64_t)pages * psize;
}

/* Bytes of the store's file past the last page LMDB uses (the reserve). */
static uint64_t tail_bytes(struct dbfs *fs, uint64_t used)
{
	uint64_t end = fs->alloc_end;
	if (!fs->writemap) {
		struct stat sb;
		int fd;
		if (mdb_env_get_fd(fs->env, &fd) == 0 && fstat(fd, &sb) == 0)
			end = (uint64_t)sb.st_size;
	}
	return end > used ? end - used : 0;
}

uint64_t dbfs_slack_bytes(struct dbfs *fs)
{
	unsigned psize;
	uint64_t used = used_bytes(fs, &psize), newest;
	return tail_bytes(fs, used) + free_bytes(fs, psize, &newest);
}

/* Room the store's file system gives for growth, in bytes. */
static uint64_t room_bytes(struct dbfs *fs)
{
	struct statvfs sv;
	if (dbfs_fault_disk_full || statvfs(fs->dir, &sv) < 0)
		return 0;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Whether writes are refused (space_low) for a store whose reserve cannot
 * be restored, given the free list: the one rule refresh and statfs share. */
static bool too_low(uint64_t free)
{
	return free < LOW_FREE;
}

uint64_t dbfs_space_writable(struct dbfs *fs, uint64_t pending)
{
	unsigned psize;
	uint64_t used = used_bytes(fs, &psize), newest;
	uint64_t free = free_bytes(fs, psize, &newest) + pending;
	uint64_t want = reserve_for(used), grow = room_bytes(fs) + tail_bytes(fs, used);
	/* As dbfs_space_refresh decides: a batch (up to DBFS_BATCH_BYTES) may
	 * add data while the reserve can be kept whole, or else while the
	 * free list holds LOW_FREE. */
	if (grow < want && too_low(free))
		return 0;
	return (grow > want ? grow - want : 0) + (free > LOW_FREE ? free - LOW_FREE : 0) +
	       DBFS_BATCH_BYTES;
}

/*
 * On a full disk, the newest commit's freed pages (a delete's, a reap's)
 * are not reusable by the next transaction: if they are what keeps the
 * free list above LOW_FREE, commit one small change (the usage record
 * rewritten as it is) so that the batch after it may take them. Leader
 * only, with no write transaction open.
 */
static void make_freed_usable(struct dbfs *fs, uint64_t free, uint64_t newest)
{
	MDB_txn *txn;
	if (too_low(free) || !too_low(free - (newest < free ? newest : free)))
		return;
	pthread_rwlock_rdlock(&fs->map_lock);
	if (mdb_txn_begin(fs->env, NULL, 0, &txn) == 0) {
		if (dbfs_usage_touch(fs, txn) == 0 && mdb_txn_commit(txn) == 0)
			fs->cnt.commits++;
		else
			mdb_txn_abort(txn);
	}
	pthread_rwlock_unlock(&fs->map_lock);
}

static int allocate(struct dbfs *fs, int fd, uint64_t from, uint64_t to)
{
	if (dbfs_fault_disk_full)
		return -ENOSPC;
	if (fallocate(fd, 0, (off_t)from, (off_t)(to - from)) < 0)
		return -errno;
	if (fs->writemap && to > PREFAULT_FROM) {
		/* Prefault the range writable in one call rather than one page
		 * fault per page later; failure only costs speed. Small stores
		 * skip it: it would count against the process's RSS for pages a
		 * store may never use (a thousand stores, one process). */
		uint64_t at = from & ~((uint64_t)sysconf(_SC_PAGESIZE) - 1); /* EINVAL else */
		pthread_rwlock_rdlock(&fs->map_lock);
		if (to <= fs->map_size)
			madvise((char *)fs->map_addr + at, to - at, MADV_POPULATE_WRITE);
		pthread_rwlock_unlock(&fs->map_lock);
	}
	fs->alloc_end = to;
	return 0;
}

void dbfs_space_refresh(struct dbfs *fs)
{
	unsigned psize;
	int fd;
	uint64_t used = used_bytes(fs, &psize);
	uint64_t want = reserve_for(used);
	if (mdb_env_get_fd(fs->env, &fd))
		return;
	if (!fs->writemap) {
		struct stat sb;
		if (fstat(fd, &sb))
			return;
		fs->alloc_end = (uint64_t)sb.st_size;
	}
	if (fs->alloc_end < used)
		fs->alloc_end = used;
	if (fs->alloc_end >= used + want) {
		fs->space_low = fs->space_full = 0;
		return;
	}
	/* Allocate ahead, so this runs once per reserve's worth of growth
	 * rather than at every commit; small stores ahead by a quarter. */
	uint64_t far = used + want + (used < PREFAULT_FROM ? want / 4 : want), near = used + want;
	far = (far + psize - 1) / psize * psize; /* whole pages, as LMDB uses them */
	near = (near + psize - 1) / psize * psize;
	if (fs->writemap) {
		/* The map must cover what we allocate and prefault. */
		while (fs->map_size < far && dbfs_grow_map(fs, fs->map_size) == 0)
			;
		if (far > fs->map_size)
			far = fs->map_size;
		if (near > far)
			near = far;
	}
	int rc = allocate(fs, fd, fs->alloc_end, far);
	if (rc && far != near)
		rc = allocate(fs, fd, fs->alloc_end, near);
	fs->space_full = rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG;
	if (!rc) {
		fs->space_low = 0;
		return;
	}
	if (fs->space_full) {
		uint64_t newest, free = free_bytes(fs, psize, &newest);
		make_freed_usable(fs, free, newest);
		/* Pages freed since the last durable point are not reused
		 * before the next one (durable.c): on a full disk, make one
		 * before every batch, so that the rule above still holds. */
		dbfs_durable_point_leader(fs);
		fs->space_low = too_low(free);
	} else
		fs->space_low = 0; /* no fallocate here: see dbfs_open */
}

int dbfs_space_supported(int fd)
{
	/* A no-op allocation of the first page tells whether the file system
	 * supports fallocate at all (without it, MDB_WRITEMAP is not safe). */
	return fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
}

/*
 * Inodes waiting to be reaped (forgotten after their last unlink) and the
 * bytes they hold, as of `t`: statfs counts them as free already rather
 * than commit the reap, which on a disk costs a synced commit per statfs.
 * Returns false when more than STATFS_REAPS are queued.
 */
#define STATFS_REAPS 256

static bool pending_reaps(struct dbfs *fs, MDB_txn *t, uint64_t *inodes, uint64_t *bytes)
{
	uint64_t ino[STATFS_REAPS];
	size_t n;

	pthread_mutex_lock(&fs->reap_lock);
	n = fs->nreap;
	if (n && n <= STATFS_REAPS)
		memcpy(ino, fs->reap, n * sizeof(*ino));
	pthread_mutex_unlock(&fs->reap_lock);
	if (n > STATFS_REAPS)
		return false;
	*inodes = *bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct dbfs_inode in;
		/* a large file is not freed by its reap: it waits for the
		 * background reclaim and counts as used until then (reclaim.c) */
		if (dbfs_inode_get(fs, t, ino[i], &in) == 0 && in.nlink == 0 &&
		    !(fs->expire && in.alloc >= DBFS_RECLAIM_MIN)) {
			(*inodes)++;
			*bytes += in.alloc;
		}
	}
	return true;
}

int dbfs_statfs(struct dbfs *fs, struct statvfs *out)
{
	struct statvfs sv;
	struct dbfs_usage_rec u = {0, 0};
	uint64_t gone_inodes = 0, gone_bytes = 0;
	MDB_txn *txn;
	int rc;

	if (statvfs(fs->dir, &sv) < 0)
		memset(&sv, 0, sizeof(sv));
	for (int tries = 0;; tries++) {
		rc = dbfs_read_begin(fs, &txn);
		if (rc)
			return rc;
		rc = dbfs_usage_get(fs, txn, &u);
		bool counted = !rc && pending_reaps(fs, txn, &gone_inodes, &gone_bytes);
		dbfs_read_end(fs, txn);
		if (rc || counted)
			break;
		if (tries) /* reaped once and more queued again: count none */
			break;
		dbfs_reap_now(fs); /* more queued than we count: reap them */
	}
	if (rc)
		return rc;
	u.inodes = u.inodes > gone_inodes ? u.inodes - gone_inodes : 0;
	u.bytes = u.bytes > gone_bytes ? u.bytes - gone_bytes : 0;

	memset(out, 0, sizeof(*out));
	out->f_bsize = 4096;
	out->f_frsize = 4096;
	out->f_namemax = DBFS_NAME_MAX;
	uint64_t used = u.bytes / 4096;
	uint64_t slack = (dbfs_slack_bytes(fs) + gone_bytes) / 4096;
	uint64_t freeb = (sv.f_frsize ? (uint64_t)sv.f_bfree * sv.f_frsize / 4096 : 0) + slack;
	/* Available: what a write can get (0: it gets ENOSPC). Free counts
	 * the reserve and the margins too, as ext4 counts its root blocks. */
	uint64_t avail = dbfs_space_writable(fs, gone_bytes) / 4096;
	if (avail > freeb)
		avail = freeb;
	uint64_t qb = fs->quota_bytes;
	if (qb) {
		uint64_t qblocks = qb / 4096;
		uint64_t qfree = qblocks > used ? qblocks - used : 0;
		out->f_blocks = qblocks;
		out->f_bfree = qfree < freeb ? qfree : freeb;
		out->f_bavail = qfree < avail ? qfree : avail;
	} else {
		out->f_blocks = used + freeb;
		out->f_bfree = freeb;
		out->f_bavail = avail;
	}
	uint64_t qi = fs->quota_inodes;
	if (qi) {
		out->f_files = qi;
		out->f_ffree = out->f_favail = qi > u.inodes ? qi - u.inodes : 0;
	} else {
		/* No inode table to run out of: bounded by space (one 4 KiB
		 * page per inode at worst). */
		out->f_files = u.inodes + out->f_bfree;
		out->f_ffree = out->f_favail = out->f_bfree;
	}
	return 0;
}
