/*
 * On-store layout of a DBFS (format version 5; version 1 to 4 stores are
 * upgraded in place when opened read-write, see dbfs/durable.c and
 * dbfs/names.c).
 *
 * A store is a directory holding one LMDB environment (data.mdb, lock.mdb)
 * and a lock file `dbfs.lock` (flock'ed exclusively by the process that has
 * the store open). An opener that made the lock file and then refuses or
 * fails removes it again, while it holds the lock (a refused open leaves
 * nothing behind); so whoever takes the lock checks afterwards that the
 * path still names the file it locked (dbfs_lock_is_current), or tries
 * again. The environment holds these named databases:
 *
 *   "super"   fixed records: the superblock and the usage counters
 *   "inode"   one record per inode
 *   "dirent"  name -> inode, per directory (lookups)
 *   "dircook" cookie -> name, per directory (readdir in stable order)
 *   "data"    file contents in blocks of DBFS_BLOCK_SIZE
 *   "xattr"   extended attributes
 *   "orphan"  inodes with no links left that were still open
 *   "feed"    the change feed's own records (dbfs/feed.c)
 *   "feeds/..." the change feed's queue (libmfsq queue "feeds", a shard per
 *              process, queue/format.h)
 *   "feed/..." an older store's (queue "feed", one shard; emptied once migrated)
 *   "expire"  the expiry index: files with a user.dbfs.expire (dbfs/expire.c)
 *   "later/..." the queue of delayed work (libmfsq queue "later", expire_run.c)
 *   "settle"  files written lately, waiting for their settled events (dbfs/settle.c)
 *   "trim"    truncated files' blocks waiting for the background reclaim (dbfs/trim.c)
 *
 * Integers in keys are big-endian so that memcmp order is numeric order and
 * all records of one inode or directory are adjacent. Integers in values are
 * little-endian (host order on the x86-64 and arm64 machines we support;
 * dbfs_open refuses a store whose superblock reads wrong).
 *
 * super:
 *   key "sb"     value struct dbfs_super
 *   key "usage"  value struct dbfs_usage_rec
 *   key "up5"    value struct dbfs_upgrade5: only while the format 3/4 -> 5
 *                upgrade is under way (dbfs/upgrade5.c): where it goes on
 *
 * inode:
 *   key  +----------------+
 *        | ino   u64 BE   |
 *        +----------------+
 *   value struct dbfs_inode, followed for symlinks by the target bytes
 *   (no NUL). Format 4 and older: the record lacks the last 8 bytes
 *   (name_cookie) of struct dbfs_inode (DBFS_INODE_V4_SIZE); while such a
 *   store is upgraded (key "up5" in super), records of both sizes are
 *   found, each told by its own length (dbfs_inode_fixed_mixed).
 *   An inode's names (for the change feed's paths, kept whether the feed
 *   is on or off; dbfs/names.c): the first in the record itself, parent
 *   and name_cookie naming the entry in dircook (name_cookie 0: no name);
 *   every other name (extra hard links only) as a row right after the
 *   record (ilink):
 *   key  +----------------+----------------+----------------------+
 *        | ino   u64 BE   | parent u64 BE  | name (1..255 bytes)  |
 *        +----------------+----------------+----------------------+
 *   value: empty. One row per directory entry of the inode other than
 *   the one in its record. (Format 3 and 4 had a row for every entry, the
 *   lowest naming the inode, and none while the feed was off.)
 *
 * dirent:
 *   key  +----------------+----------------------+
 *        | parent u64 BE  | name (1..255 bytes)  |
 *        +----------------+----------------------+
 *   value struct dbfs_dirent_val
 *
 * dircook:
 *   key  +----------------+----------------+
 *        | parent u64 BE  | cookie u64 BE  |
 *        +----------------+----------------+
 *   value +-----------+----------+---------------------+
 *         | ino u64   | type u32 | name (1..255 bytes) |
 *         +-----------+----------+---------------------+
 *   Cookies come from the directory inode's next_cookie and are never
 *   reused, so a readdir offset stays valid while entries come and go.
 *   Cookies 1 and 2 are "." and ".."; entries start at DBFS_COOKIE_FIRST.
 *
 * data:
 *   key  +----------------+----------------+
 *        | ino   u64 BE   | block u64 BE   |
 *        +----------------+----------------+
 *   value: 1..B bytes of the block starting at file offset block * B, where
 *   B is the superblock's block_size. A missing block is a hole; bytes past
 *   the end of a stored value read as zeros. No block lies wholly at or past
 *   the file size.
 *   B is DBFS_PAGE_BLOCK(page size), one LMDB page less its 16-byte header:
 *   a full block fills exactly one overflow page, so rewriting a block frees
 *   and takes single pages and never needs a run of contiguous free pages
 *   (LMDB searches its free list for such runs in time that grows with the
 *   list). Stores made before kept B = DBFS_BLOCK_SIZE (64 KiB, 17 pages).
 *
 * xattr:
 *   key  +----------------+----------------------------+
 *        | ino   u64 BE   | name (1..255 bytes, no NUL) |
 *        +----------------+----------------------------+
 *   value: the attribute value (0..DBFS_XATTR_MAX bytes)
 *
 * orphan:
 *   key  +----------------+
 *        | ino   u64 BE   |
 *        +----------------+
 *   value: empty. An inode with nlink 0 is in this table until its
 *   records are deleted; dbfs_open deletes every inode listed here.
 *
 * expire (made by a read-write open; an older store has none):
 *   key  +----------------+      value  +----------------------------+
 *        | ino   u64 BE   |             | due  u64 BE (s since epoch) |
 *        +----------------+             +----------------------------+
 *   One row per inode whose xattr user.dbfs.expire is "@due" (an inode
 *   with links; one unlinked and still open may keep the xattr without
 *   a row). Each row has a delayed message (ino, due) in the queue
 *   "later"; messages matching no row are stale and dropped.
 *
 * settle (made by a read-write open; an older store has none):
 *   key  +----------------+-----------+   value  +---------+--------+--------+
 *        | ino   u64 BE   | ms u32 BE |          | last_ns | lo u64 | hi u64 |
 *        +----------------+-----------+          +---------+--------+--------+
 *   One row per (file, quiet period) written since its last settled event:
 *   last_ns the commit time of its last write, [lo, hi) the bytes written
 *   in the burst. Each row has exactly one delayed message (ino, ms) in the
 *   queue "later". Key "P" (1 byte): the quiet periods the durable
 *   subscriptions want, u32 BE each (dbfs_settle_set).
 *
 * trim (format 4; made by a read-write open; an older store has none):
 *   key  +----------------+      value  +-----------+----------+-----------+
 *        | ino   u64 BE   |             | first u64 | last u64 | bytes u64 |
 *        +----------------+             +-----------+----------+-----------+
 *   One row per regular file whose blocks [first, last) (block numbers)
 *   lie past its size after a large truncate, waiting for the background
 *   reclaim; bytes is what they hold (alloc units, still in the inode's
 *   alloc). first >= ceil(size / B); no block of the file is numbered
 *   last or more. The inode's flags has DBFS_INODE_TRIM (1) while it has
 *   a row (internal.h). The one exception to "no block lies past the
 *   file size" below.
 *
 * feed (format 3): see dbfs/feed.c
 *   key 'M'                         value struct dbfs_feed_meta (dbfs_tick and
 *                                   close rewrite it; an open counts the
 *                                   queue's events beyond it)
 *   key 'X'                         empty (format 3 and 4): ilink is stale
 *                                   (opened with feed=off); the upgrade to
 *                                   5 rebuilds the names and deletes it
 *   key 'F'                         value u64: the retention floor, the first
 *                                   seq retained (dbfs_tick raises it)
 *   key 'I' | first seq u64 BE      value struct dbfs_feed_block: one row per
 *                                   DBFS_FEED_BLOCK events (seq % 256 == 1)
 *   key 'S' | name (1..40 bytes)    value struct dbfs_feed_subrec, then the
 *                                   subscription's spec text (no NUL)
 *
 * Accounting: an inode's `alloc` is the sum over its data records of the
 * value length rounded up to DBFS_ALLOC_UNIT; st_blocks = alloc / 512.
 * usage.bytes is the sum of alloc over all inodes, usage.inodes the number
 * of inode records.
 */
#ifndef DBFS_FORMAT_H
#define DBFS_FORMAT_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define DBFS_MAGIC          "DBFS-LMDB"  /* 9 bytes + NUL, in dbfs_super.magic */
#define DBFS_FORMAT_VERSION 7u  /* 2: the store has dbfs.durable; 3: ilink rows, feed;
				 * 4: dbfs.durable of version 2 (listed records),
				 * the table "trim" and DBFS_INODE_TRIM (a build
				 * that knows neither would uncover waiting blocks
				 * when a file grows again: it must refuse these);
				 * 5: an inode's first name in its record
				 * (name_cookie), ilink rows only for the others;
				 * 6: the change feed in the queue "feeds", a shard
				 * per process (a build of 5 would write into the
				 * emptied "feed", which this one no longer reads);
				 * 7: durable points may be imaged (dbfs.images): a
				 * build of 6 would not replay them after a power
				 * loss, and would return to the checkpoint, whose
				 * pages may have been reused since */
#define DBFS_INODE_V4_SIZE  120u /* an inode record's fixed part before format 5 */
#define DBFS_FORMAT_OLDEST  1u  /* the oldest version this build opens */
#define DBFS_BLOCK_SHIFT    16
#define DBFS_BLOCK_SIZE     (1u << DBFS_BLOCK_SHIFT)  /* 64 KiB: the largest block size */
#define DBFS_PAGE_BLOCK(psize) ((psize) - 16u)         /* block size of new stores */
#define DBFS_ALLOC_UNIT     4096u
#define DBFS_NAME_MAX       255u
#define DBFS_XATTR_NAME_MAX 255u
#define DBFS_XATTR_MAX      65536u
#define DBFS_SYMLINK_MAX    4095u
#define DBFS_MAX_FILE_SIZE  (1ull << 50)  /* 1 PiB; larger gives EFBIG */
#define DBFS_ROOT_INO       1ull
#define DBFS_COOKIE_DOT     1ull
#define DBFS_COOKIE_DOTDOT  2ull
#define DBFS_COOKIE_FIRST   3ull

#define DBFS_DB_SUPER   "super"
#define DBFS_DB_INODE   "inode"
#define DBFS_DB_DIRENT  "dirent"
#define DBFS_DB_DIRCOOK "dircook"
#define DBFS_DB_DATA    "data"
#define DBFS_DB_XATTR   "xattr"
#define DBFS_DB_ORPHAN  "orphan"
#define DBFS_DB_FEED    "feed"
#define DBFS_DB_EXPIRE  "expire" /* the expiry index: ino BE -> due seconds BE (expire.c) */
#define DBFS_DB_SETTLE  "settle" /* (ino, ms) -> the burst waiting to settle (settle.c) */
#define DBFS_DB_TRIM    "trim"   /* ino -> a truncated file's blocks waiting (trim.c) */
#define DBFS_LATER_QUEUE "later" /* the libmfsq queue of delayed work (expire_run.c) */
#define DBFS_FEED_QUEUE "feed" /* the libmfsq queue's name: its tables are "feed/..." */
/* the feed's queue with a shard per process (dbfs/feed_shards.c): a store
 * made before it keeps "feed", one shard, until an open migrates it
 * (dbfs/feed_migrate.c; the table "feed"'s row 'V' says it is done) */
#define DBFS_FEED_QUEUE_SHARDED "feeds"
/* the queue's own files beside data.mdb (its ack and enqueue logs) */
#define DBFS_FEED_FILES "mfsq-" DBFS_FEED_QUEUE "."
#define DBFS_FEEDS_FILES "mfsq-" DBFS_FEED_QUEUE_SHARDED "."
#define DBFS_LATER_FILES "mfsq-" DBFS_LATER_QUEUE "." /* and the queue of delayed work's */

struct dbfs_super {
	char magic[16];         /* DBFS_MAGIC, NUL padded */
	uint32_t version;       /* DBFS_FORMAT_VERSION */
	uint32_t block_size;    /* DBFS_PAGE_BLOCK(page size), or DBFS_BLOCK_SIZE */
	uint64_t next_ino;      /* next inode number to hand out; never reused */
	int64_t created_sec;    /* creation time (seconds since the epoch) */
	uint8_t uuid[16];
	uint64_t byte_order;    /* 0x0102030405060708 written in host order */
};

struct dbfs_usage_rec {
	uint64_t bytes;         /* sum of inode alloc */
	uint64_t inodes;        /* number of inode records */
};

struct dbfs_inode {
	uint32_t mode;          /* type and permission bits (st_mode) */
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;         /* directories: 2 + subdirectories */
	uint64_t size;          /* bytes; symlinks: target length */
	uint64_t alloc;         /* bytes allocated in "data" (see Accounting) */
	int64_t atime_sec, mtime_sec, ctime_sec, btime_sec;
	uint32_t atime_nsec, mtime_nsec, ctime_nsec, btime_nsec;
	uint64_t rdev;
	uint64_t next_cookie;   /* directories: next dircook cookie */
	uint64_t nentries;      /* directories: number of entries */
	uint64_t parent;        /* the directory of the first name (dbfs/names.c);
				 * directories: the parent directory (root: itself) */
	uint32_t flags;         /* 1: blocks wait in "trim" (DBFS_INODE_TRIM); others 0 */
	uint32_t pad;
	uint64_t name_cookie;   /* format 5: the first name's cookie in parent's
				 * dircook; 0: none (unlinked, or the root) */
};

struct dbfs_feed_meta {
	uint64_t next_seq;      /* the next event's number (1 first) */
	uint64_t bytes;         /* record bytes enqueued ever (running sum) */
	uint64_t last_ns;       /* commit time of the newest event */
};

struct dbfs_feed_block {
	uint64_t bytes_before;  /* dbfs_feed_meta.bytes before the block's first event */
	uint64_t first_ns;      /* commit time of its first event */
};

struct dbfs_feed_subrec {
	uint64_t created_ns, active_ns;
	uint64_t gaps;          /* gap records given */
	uint64_t lost;          /* events lost to retention */
	uint64_t acked;         /* next seq not acknowledged (as dbfs last wrote it) */
	uint32_t spec_len;
	uint32_t pad;
};

struct dbfs_dirent_val {
	uint64_t ino;
	uint64_t cookie;        /* the entry's key in dircook */
	uint32_t type;          /* S_IFMT bits of the child's mode */
	uint32_t pad;
};

/* Key helpers: big-endian u64 in key bytes. */
static inline void dbfs_put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)v;
		v >>= 8;
	}
}

static inline uint64_t dbfs_get_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* After flock(fd) on STORE/dbfs.lock at `path`: is it still the file that
 * path names? No: a failed opener removed it meanwhile, open it again. */
static inline bool dbfs_lock_is_current(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}


/*
 * dbfs.durable: which LMDB transaction is durable (dbfs/durable.c).
 *
 * In the default durability mode LMDB commits without flushing
 * (MDB_NOSYNC), so the meta pages of data.mdb may reach the disk before the
 * pages they point at. This file names the newest transaction whose pages
 * are all on the disk, and keeps a copy of its LMDB meta page. After a
 * reboot, dbfs_open writes that copy over both meta pages of data.mdb
 * before LMDB reads them.
 *
 * Two slots of DBFS_DREC_SLOT2 bytes (the file is DBFS_DREC_FILE_SIZE
 * long, every byte written, so that rewriting a slot changes no file
 * system metadata); record `seq` goes to slot seq & 1, so a torn write
 * leaves the other slot whole. The valid record (magic, version, sum) with
 * the larger seq rules, unless it is a *listed* record whose pages are not
 * all on the disk (then the other slot rules, dbfs/recover.c):
 *
 *   slot +--------+---------+-------+-----+-------+-------+--------+
 *        | magic  | version | flags | seq | txnid | psize | boot   |
 *        | 8      | 4       | 4     | 8   | 8     | 4     | 40     |
 *        +--------+---------+-------+-----+-------+-------+--------+
 *        | meta: bytes [16, 16+DBFS_DREC_META) of LMDB meta page    |
 *        |       txnid & 1 as committed (the page header excluded)  |
 *        +----------------------------------------------------------+
 *        | sum: FNV-1a 64 of everything above, then (version 2)     |
 *        |      dbfs_drec_list_sum of the list                      |
 *        +----------------------------------------------------------+
 *   at DBFS_DREC_HEAD (version 2):
 *        +-----------+------------------+------------------+-----+
 *        | n u64     | pgno u64, hash u64 (dbfs_page_hash) | ... |  n pairs
 *        +-----------+------------------+------------------+-----+
 *
 * flags DBFS_DREC_TRUST_LMDB: every commit is flushed (durability=full),
 * LMDB's own meta pages are right, nothing is restored. DBFS_DREC_LISTED:
 * the record was pushed to the disk before data.mdb's flush, not after it
 * (one flush per durable point instead of two); it lists every page of
 * its transaction's tree that the previous record's tree did not use,
 * with the hash each page must have, and counts only if they all do. n is
 * at most DBFS_DREC_LIST_MAX. boot is the kernel's boot_id when written:
 * a record of this boot means no power was lost since (the page cache held
 * every write), so nothing is restored either. A store without this file
 * (format 1, or a copy without it), or with no valid record in it, is
 * trusted as LMDB left it: the file is made, grown or rewritten only
 * right after a full flush of data.mdb.
 *
 * Version 1 (format 2 stores before listed records): 2 slots of
 * DBFS_DREC_SLOT (512) bytes, no list; still read, and replaced by
 * version 2's layout at the next read-write open.
 */
#define DBFS_DREC_FILE  "dbfs.durable"
#define DBFS_DREC_MAGIC "DBFSDUR1"
#define DBFS_DREC_SLOT  512u   /* version 1's slot */
#define DBFS_DREC_META  256u
#define DBFS_DREC_TRUST_LMDB 1u
#define DBFS_DREC_LISTED     2u
#define DBFS_DREC_VERSION    2u
#define DBFS_DREC_HEAD  512u   /* where a version-2 slot's list begins */
#define DBFS_DREC_LIST_MAX 4096u /* pages a listed record names at most */
#define DBFS_DREC_SLOT2 69632u /* 68 KiB: head, n, DBFS_DREC_LIST_MAX pairs */
#define DBFS_DREC_FILE_SIZE (2u * DBFS_DREC_SLOT2)

struct dbfs_drec {
	char magic[8];
	uint32_t version;       /* 1 or 2 */
	uint32_t flags;
	uint64_t seq;
	uint64_t txnid;
	uint32_t psize;         /* LMDB page size of data.mdb */
	char boot[40];          /* boot_id, NUL padded */
	unsigned char meta[DBFS_DREC_META];
	uint64_t sum;
};

/* One listed page: its number in data.mdb and dbfs_page_hash of its bytes. */
struct dbfs_drec_page {
	uint64_t pgno;
	uint64_t hash;
};

static inline uint64_t dbfs_drec_sum(const struct dbfs_drec *r)
{
	const unsigned char *p = (const unsigned char *)r;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < offsetof(struct dbfs_drec, sum); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* A 64-bit hash of n bytes (n a multiple of 8) from seed h: eight bytes a
 * step, so that hashing a 4 KiB page costs about a microsecond (FNV's byte
 * steps cost ten). It tells a page that was written from one that was not
 * or was torn, not an adversary's forgery. */
static inline uint64_t dbfs_page_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		uint64_t w;
		__builtin_memcpy(&w, c + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return h ^ (h >> 32);
}

/* Version 2's sum: the head's FNV, then the list (n and its pairs). */
static inline uint64_t dbfs_drec_list_sum(const struct dbfs_drec *r, const void *list,
					  uint64_t n)
{
	uint64_t h = dbfs_page_hash(dbfs_drec_sum(r), &n, sizeof(n));
	return dbfs_page_hash(h, list, (size_t)n * sizeof(struct dbfs_drec_page));
}

/* LMDB 0.9's meta page (data format MDB_DATA_VERSION 1): after the 16-byte
 * page header, MDB_meta ends with mm_last_pg and mm_txnid (8 bytes each)
 * at these offsets within the part dbfs_drec.meta copies. */
#define DBFS_LMDB_META_MAGIC 0xBEEFC0DEu
#define DBFS_LMDB_META_LASTPG 120u
#define DBFS_LMDB_META_TXNID 128u
#define DBFS_LMDB_META_END   136u

/*
 * dbfs.images: the log of imaged durable points (dbfs/images.c writes it,
 * dbfs/recover.c replays it; the design is in dbfs/durable.c).
 *
 * An imaged point makes transaction T' durable without a flush of
 * data.mdb: it appends the images of the pages T''s tree gained since the
 * previous point T (gained.c) to this file and flushes only this file.
 * The records since the last record of dbfs.durable (the *checkpoint*:
 * data.mdb flushed, then named) form a chain; after a reboot they are
 * replayed, in order, over data.mdb, and the newest one's meta page is
 * written over both of LMDB's. A checkpoint starts the chain again from
 * offset 0 (older records stay in the file until overwritten, and are
 * told apart by dseq). Each record starts at a multiple of its psize:
 *
 *   +------------------------------------------+ record offset
 *   | struct dbfs_irec                         |
 *   | n page numbers (u64)                     |
 *   | zeros up to the next multiple of psize   |
 *   +------------------------------------------+
 *   | n page images, psize bytes each, in the  |
 *   | order of the page numbers                |
 *   +------------------------------------------+ next record
 *
 * A record counts only if its magic, version and psize are right, its dseq
 * is the checkpoint's seq, its lseq is one more than the previous one's
 * (the first: 1), its base is the txnid of the point before it (the
 * checkpoint's, or the previous record's), its meta is T''s and its sum
 * (dbfs_irec_sum) matches: the first record that does not ends the chain
 * (a torn append: the point before it was never acknowledged; zeros past
 * the last record end it too: the file grows ahead of its records, a MiB
 * of zeros at a time, DBFS_ILOG_GROW, so that a record's flush need not
 * write the file's size). The file is made at the first imaged point (and
 * its directory entry flushed); it never shrinks: a chain grows to a
 * quarter of the store's tree, within 8 and 64 MiB (DBFS_ILOG_MIN, _MAX in
 * dbfs/internal.h), past which a point is a checkpoint instead (and one
 * record of at most DBFS_DREC_LIST_MAX pages may start before that
 * limit).
 */
#define DBFS_ILOG_FILE    "dbfs.images"
#define DBFS_ILOG_MAGIC   "DBFSIMG1"
#define DBFS_ILOG_VERSION 1u

struct dbfs_irec {
	char magic[8];
	uint32_t version;
	uint32_t psize;         /* LMDB page size of data.mdb */
	uint64_t dseq;          /* seq of the dbfs.durable record this chain follows */
	uint64_t lseq;          /* 1, 2, ... within the chain */
	uint64_t base;          /* txnid of the point before (record or chain) */
	uint64_t txnid;         /* the point this record makes durable */
	uint64_t n;             /* pages imaged, at most DBFS_DREC_LIST_MAX */
	char boot[40];          /* boot_id when written */
	unsigned char meta[DBFS_DREC_META]; /* txnid's meta page, as in dbfs_drec */
	uint64_t sum;
};

/* Bytes from a record's start to its first image. */
static inline uint64_t dbfs_irec_head_len(uint64_t n, uint32_t psize)
{
	uint64_t h = sizeof(struct dbfs_irec) + n * 8;
	return (h + psize - 1) / psize * psize;
}

/* The sum of a record: dbfs_page_hash over its head (up to sum), then
 * its page numbers, then its images, in that order (h carries on). */
static inline uint64_t dbfs_irec_head_sum(const struct dbfs_irec *r, const uint64_t *pgno)
{
	uint64_t h = dbfs_page_hash(0x84222325cbf29ce4ull, r, offsetof(struct dbfs_irec, sum));
	return dbfs_page_hash(h, pgno, (size_t)r->n * 8);
}

/*
 * The upgrade to format 5 (dbfs/upgrade5.c), in pieces: phase 1 rewrites
 * the records at the format-5 size without names and deletes the format
 * 3/4 name rows, in inode order; phase 2 names every inode from the
 * directory entries, in dirent order. `key` (klen bytes) is the first
 * inode key (phase 1) or dirent key (phase 2) not done yet.
 */
struct dbfs_upgrade5 {
	uint32_t phase;         /* 1 or 2 */
	uint32_t klen;          /* 0: the phase starts at the table's first key */
	unsigned char key[8 + 255];
};

_Static_assert(sizeof(struct dbfs_inode) == 128, "format 5's record size");

/*
 * The fixed part of an inode record of `len` bytes at `v` in a store below
 * format 5, whose records may be of either size while it is upgraded: 128
 * bytes (a symlink: + its target) is a format-5 record, anything else is
 * read as a format-4 one (a damaged record included, as before).
 */
static inline size_t dbfs_inode_fixed_mixed(const void *v, size_t len)
{
	uint32_t mode;
	uint64_t size;
	if (len < DBFS_INODE_V4_SIZE)
		return DBFS_INODE_V4_SIZE;
	__builtin_memcpy(&mode, v, sizeof(mode));
	__builtin_memcpy(&size, (const char *)v + 16, sizeof(size));
	uint64_t tail = S_ISLNK(mode) ? size : 0;
	if (tail <= len && len - tail == 128)
		return 128;
	return DBFS_INODE_V4_SIZE;
}

#endif
