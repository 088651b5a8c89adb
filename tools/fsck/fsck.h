/*
 * dbfs-fsck internals: an in-memory model of one store, loaded from an LMDB
 * transaction, and the three check passes that read (and with --repair,
 * rewrite) it. The checker reads the tables directly as dbfs/format.h
 * draws them, so it checks the format, not libdbfs's idea of it.
 *
 * Passes, in order (with --repair each runs on a model reloaded after the
 * previous one changed the store, all inside one write transaction):
 *   1. records: each record alone and its direct references (malformed keys
 *      and values, dangling dirents, dirent/dircook twins, block and xattr
 *      owners, blocks past EOF, stale orphan entries);
 *   2. tree: one name per directory, reachability from the root, orphans;
 *   3. counts: nlink, nentries, parent, alloc, usage, next_ino.
 */
#ifndef DBFS_FSCK_H
#define DBFS_FSCK_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dbfs/format.h"

/* Exit codes (documented in --help). */
enum {
	FSCK_EXIT_CLEAN = 0,
	FSCK_EXIT_PROBLEMS = 1,
	FSCK_EXIT_REPAIRED = 4,
	FSCK_EXIT_OPERROR = 8,
};

struct fsck_inode {
	uint64_t ino;
	struct dbfs_inode rec;
	bool bad;	       /* value malformed: not interpreted */
	bool orphan;	       /* listed in the orphan table */
	bool reclaim;	       /* ... marked "R": a deferred reclaim is queued (dbfs/reclaim.c) */
	bool reachable;	       /* from the root through valid dirents */
	uint64_t links;	       /* valid dirents naming this inode */
	uint64_t container;    /* parent of the first dirent naming it (0: none) */
	uint64_t subdirs;      /* directories: entries that are directories */
	uint64_t entries;      /* directories: entries */
	uint64_t max_cookie;   /* directories: largest entry cookie */
	uint64_t data_alloc;   /* sum of block lengths rounded up to DBFS_ALLOC_UNIT */
	uint64_t blocks;       /* data records */
	bool trim;	       /* has a row in "trim": blocks past its size wait (trim.c) */
	bool named;	       /* format 5: one of its entries is the record's first name (feed.c) */
	uint64_t trim_first, trim_last; /* ... the row's range of block numbers */
	size_t dfirst, dcount; /* directories: its dirents in fsck.dirents */
};

struct fsck_dirent {
	unsigned char *key; /* raw key: parent BE64 + name */
	size_t klen;
	uint64_t parent;
	struct dbfs_dirent_val val;
	bool bad;  /* malformed key, value or name */
	bool gone; /* deleted by this run */
	bool twin; /* its dircook record matched */
};

struct fsck {
	const char *store;
	bool repair, verbose, allow_orphans;
	bool fixing; /* the current pass may write */
	bool quiet;  /* count problems without printing them */
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi_super, dbi_inode, dbi_dirent, dbi_dircook, dbi_data, dbi_xattr, dbi_orphan;
	MDB_dbi dbi_trim; /* when has_trim (a store opened read-write by a newer build) */
	bool has_trim;
	struct dbfs_super sb;
	size_t inode_fixed; /* an inode record's fixed part: DBFS_INODE_V4_SIZE before format 5 */
	bool upgrading;     /* the upgrade to format 5 is under way (dbfs/upgrade5.c) */
	struct dbfs_usage_rec usage;
	bool usage_ok;
	struct fsck_inode *inodes;
	size_t ninodes;
	struct fsck_dirent *dirents;
	size_t ndirents;
	uint64_t ndircook, nblocks, nxattrs, norphans;
	unsigned long problems;
	unsigned long unfixable; /* problems --repair leaves alone */
	unsigned long notes;
};

/* model.c */
void fsck_load(struct fsck *f);
void fsck_unload(struct fsck *f);
struct fsck_inode *fsck_inode_find(struct fsck *f, uint64_t ino);
struct fsck_dirent *fsck_dirent_find(struct fsck *f, uint64_t parent, const void *name, size_t len);
void fsck_mark_reachable(struct fsck *f);

/* check.c, tree.c, counts.c: each returns true when it changed the store. */
bool fsck_pass_records(struct fsck *f);
bool fsck_pass_tree(struct fsck *f);
bool fsck_pass_counts(struct fsck *f);
/* feed.c: ilink (rebuilt by --repair) and the change feed's queue. */
void fsck_pass_feed(struct fsck *f);
/* expire.c: the expiry index against the files' user.dbfs.expire, and the
 * queue of delayed work. */
void fsck_pass_expire(struct fsck *f);
/* trim.c: deferred truncation's rows. load: into the model (fsck_load);
 * waits: may block `blk` of `in` lie past its size (a row's range)? */
/* settle.c: the settled events' rows (a malformed one is deleted). */
void fsck_pass_settle(struct fsck *f);
void fsck_load_trim(struct fsck *f);
bool fsck_trim_waits(const struct fsck_inode *in, uint64_t blk);
/* true when it changed the store (--repair): reload the model */
bool fsck_pass_trim(struct fsck *f);

/* repair.c: writes inside f->txn; any LMDB failure is fatal (exit 8, nothing
 * committed). */
void fsck_put_inode(struct fsck *f, const struct fsck_inode *in);
void fsck_del_key(struct fsck *f, MDB_dbi dbi, const void *key, size_t klen);
void fsck_del_dirent(struct fsck *f, struct fsck_dirent *d);
void fsck_delete_inode(struct fsck *f, uint64_t ino);
/* Link inode `ino` into /lost+found (created if missing); false if impossible. */
bool fsck_attach_lost_found(struct fsck *f, uint64_t ino);
void fsck_put_dircook(struct fsck *f, uint64_t parent, uint64_t cookie, uint64_t ino, uint32_t type,
		      const void *name, size_t len);

/* fsck.c */
void fsck_problem(struct fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsck_unfixable(struct fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsck_note(struct fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsck_action(struct fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void fsck_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fsck_lmdb_check(int rc, const char *what);
const char *fsck_type_name(uint32_t mode);
/* Printable copy of a name for messages (static buffer, one at a time per slot). */
const char *fsck_name(const void *name, size_t len, int slot);

static inline uint64_t fsck_round_alloc(uint64_t len)
{
	return (len + DBFS_ALLOC_UNIT - 1) / DBFS_ALLOC_UNIT * DBFS_ALLOC_UNIT;
}

/* The fixed part of inode record v: inode_fixed, but while the upgrade to
 * format 5 is under way records of both sizes are found (format.h). */
size_t fsck_inode_fixed(const struct fsck *f, const MDB_val *v);

#endif
