/*
 * A store's lifetime: opening it (the lock file, the LMDB environment, the
 * named databases, format, orphan reclaim), its periodic housekeeping and
 * sync, and closing it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "dbfs/guard.h"
#include "dbfs/internal.h"
#include "dbfs/recover.h"
#include "dbfs/shared.h"

static int open_dbis(struct dbfs *fs, MDB_txn *txn, unsigned flags)
{
	static const struct {
		const char *name;
		size_t off;
	} dbs[] = {
		{DBFS_DB_SUPER, offsetof(struct dbfs, db_super)},
		{DBFS_DB_INODE, offsetof(struct dbfs, db_inode)},
		{DBFS_DB_DIRENT, offsetof(struct dbfs, db_dirent)},
		{DBFS_DB_DIRCOOK, offsetof(struct dbfs, db_dircook)},
		{DBFS_DB_DATA, offsetof(struct dbfs, db_data)},
		{DBFS_DB_XATTR, offsetof(struct dbfs, db_xattr)},
		{DBFS_DB_ORPHAN, offsetof(struct dbfs, db_orphan)},
	};
	for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]); i++) {
		int rc = mdb_dbi_open(txn, dbs[i].name, flags,
				      (MDB_dbi *)((char *)fs + dbs[i].off));
		if (rc)
			return rc;
	}
	/* Format 3's table: made when the store opens read-write; a
	 * read-only older store has none. */
	int rc = mdb_dbi_open(txn, DBFS_DB_FEED, flags, &fs->db_feed);
	if (rc == MDB_NOTFOUND && !(flags & MDB_CREATE)) {
		fs->db_feed = 0;
		rc = 0;
	}
	/* the expiry index (expire.c) likewise: an older store has none */
	if (!rc)
		rc = mdb_dbi_open(txn, DBFS_DB_EXPIRE, flags, &fs->db_expire);
	if (rc == MDB_NOTFOUND && !(flags & MDB_CREATE)) {
		fs->db_expire = 0;
		rc = 0;
	}
	/* and the settle table (settle.c) */
	if (!rc)
		rc = mdb_dbi_open(txn, DBFS_DB_SETTLE, flags, &fs->db_settle);
	if (rc == MDB_NOTFOUND && !(flags & MDB_CREATE)) {
		fs->db_settle = 0;
		rc = 0;
	}
	/* and the truncated blocks waiting for the reclaim (trim.c) */
	if (!rc)
		rc = mdb_dbi_open(txn, DBFS_DB_TRIM, flags, &fs->db_trim);
	if (rc == MDB_NOTFOUND && !(flags & MDB_CREATE)) {
		fs->db_trim = 0;
		rc = 0;
	}
	return rc;
}

/* What dbfs_open made in the store's directory, to remove again when it
 * refuses or fails: a refused open changes nothing on disk. */
enum {
	MADE_DATA = 1 << 0,    /* data.mdb */
	MADE_ENVLOCK = 1 << 1, /* lock.mdb */
	MADE_LOCK = 1 << 2,    /* dbfs.lock */
	MADE_DUR = 1 << 3,     /* dbfs.durable */
};

/* Remove what `made` names; the caller still holds dbfs.lock, and has
 * closed the environment. */
static void unmake(struct dbfs *fs, unsigned made)
{
	static const struct {
		unsigned bit;
		const char *name;
	} files[] = {{MADE_DATA, "data.mdb"},
		     {MADE_ENVLOCK, "lock.mdb"},
		     {MADE_LOCK, "dbfs.lock"},
		     {MADE_DUR, DBFS_DREC_FILE},
		     {MADE_DUR, DBFS_ILOG_FILE}}; /* made by a point of the open */
	char path[4200];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (!(made & files[i].bit))
			continue;
		snprintf(path, sizeof(path), "%s/%s", fs->dir, files[i].name);
		unlink(path);
	}
	/* a store this call made: the queues' files are its too */
	DIR *d = made & MADE_DATA ? opendir(fs->dir) : NULL;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (strncmp(e->d_name, DBFS_FEED_FILES, strlen(DBFS_FEED_FILES)) &&
		    strncmp(e->d_name, DBFS_FEEDS_FILES, strlen(DBFS_FEEDS_FILES)) &&
		    strncmp(e->d_name, DBFS_LATER_FILES, strlen(DBFS_LATER_FILES)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", fs->dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

bool dbfs_is_store_file(const char *name)
{
	static const char *const names[] = {"data.mdb", "lock.mdb", "dbfs.lock", DBFS_DREC_FILE,
					    DBFS_ILOG_FILE, "dbfs.wake"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return (!strncmp(name, DBFS_FEED_FILES, strlen(DBFS_FEED_FILES)) ||
		!strncmp(name, DBFS_FEEDS_FILES, strlen(DBFS_FEEDS_FILES)) ||
		!strncmp(name, DBFS_LATER_FILES, strlen(DBFS_LATER_FILES))) &&
	       !strchr(name, '/');
}

/* Open and lock dbfs.lock, creating it if missing (MADE_LOCK in *made),
 * for a read-only open too: a store restored from a backup of data.mdb has
 * none, and without it a read-only and a read-write open would not
 * exclude each other (LMDB makes lock.mdb there anyway, so the directory
 * is written either way). Another opener that failed may have removed the
 * file we locked (format.h): then try again. */
static int lock_store(struct dbfs *fs, unsigned *made, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/dbfs.lock", fs->dir);
	for (int tries = 0; tries < 16; tries++) {
		bool created = false;
		fs->lock_fd = open(path, (fs->opt.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (fs->lock_fd < 0 && errno == ENOENT) {
			fs->lock_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			created = fs->lock_fd >= 0;
			if (fs->lock_fd < 0 && errno == EEXIST)
				continue; /* made by another opener meanwhile */
		}
		if (fs->lock_fd < 0) {
			int e = errno;
			snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
			return -e;
		}
		/* exclusive, or shared (dbfs/shared_lock.c) */
		int rc = dbfs_lock_take(fs->lock_fd, fs->opt.shared, fs->dir, err, errlen);
		if (rc) {
			/* Not ours to remove, even if we made it: its holder
			 * opened it after us. */
			close(fs->lock_fd);
			fs->lock_fd = -1;
			return rc;
		}
		if (dbfs_lock_is_current(fs->lock_fd, path)) {
			if (created)
				*made |= MADE_LOCK;
			/* shared: the mark the others read (shared_lock.c) */
			if (fs->shared && (rc = dbfs_lock_mark(fs->lock_fd, fs->shared->slot))) {
				snprintf(err, errlen, "cannot mark %s: %s", path, strerror(-rc));
				close(fs->lock_fd);
				fs->lock_fd = -1;
				return rc;
			}
			return 0;
		}
		close(fs->lock_fd);
		fs->lock_fd = -1;
	}
	snprintf(err, errlen, "store %s is in use (its lock file keeps changing)", fs->dir);
	return -EBUSY;
}

struct reclaim_ctx {
	uint64_t count;
	int more;
};

static int reclaim_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct reclaim_ctx *c = arg;
	return dbfs_orphans_reclaim(fs, txn, &c->count, &c->more);
}

/* Destroy every orphan, in as many transactions as their data needs. */
static int reclaim(struct dbfs *fs)
{
	struct reclaim_ctx c = {0, 0};
	int rc;
	do
		rc = dbfs_write(fs, reclaim_fn, &c);
	while (!rc && c.more);
	return rc;
}

/* Check the environment's data file against what its meta page claims, so
 * that a truncated file is refused instead of faulting on access. */
static int check_size(struct dbfs *fs, char *err, size_t errlen)
{
	MDB_envinfo info;
	MDB_stat st;
	struct stat sb;
	char path[4200];
	mdb_env_info(fs->env, &info);
	mdb_env_stat(fs->env, &st);
	snprintf(path, sizeof(path), "%s/data.mdb", fs->dir);
	if (stat(path, &sb) < 0) {
		snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
		return -errno;
	}
	if ((uint64_t)sb.st_size < ((uint64_t)info.me_last_pgno + 1) * st.ms_psize) {
		snprintf(err, errlen, "store is damaged: %s is truncated (%lld bytes, needs %llu)",
			 path, (long long)sb.st_size,
			 (unsigned long long)((info.me_last_pgno + 1) * (uint64_t)st.ms_psize));
		return -EINVAL;
	}
	return 0;
}

/* Before an open that may change the file (MDB_WRITEMAP extends it): is
 * this an intact DBFS store, or an empty environment we may format? */
static int precheck(struct dbfs *fs, bool create, char *err, size_t errlen)
{
	MDB_txn *txn;
	int rc = check_size(fs, err, errlen);
	if (rc)
		return rc;
	rc = mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &txn);
	if (rc) {
		snprintf(err, errlen, "cannot read store: %s", mdb_strerror(rc));
		return dbfs_errno(rc);
	}
	rc = open_dbis(fs, txn, 0);
	if (rc == MDB_NOTFOUND) {
		MDB_stat st;
		rc = 0;
		if (!create || mdb_stat(txn, 1 /* MAIN_DBI */, &st) || st.ms_entries) {
			snprintf(err, errlen, "not a DBFS store (missing tables)");
			rc = -EINVAL;
		}
	} else if (rc == MDB_INCOMPATIBLE || rc == MDB_INVALID || rc == MDB_CORRUPTED) {
		snprintf(err, errlen, "store is damaged or not a DBFS store: %s", mdb_strerror(rc));
		rc = -EINVAL;
	} else if (rc) {
		snprintf(err, errlen, "cannot read the store: %s", mdb_strerror(rc));
		rc = dbfs_errno(rc);
	} else {
		rc = dbfs_errno(dbfs_super_check(fs, txn, err, errlen));
	}
	mdb_txn_abort(txn);
	return rc;
}

/*
 * The map is address space; growing it remaps the file, and the process
 * loses every page table entry of the store (the first read of each page
 * afterwards is a page fault in the kernel's copy of a FUSE reply: a 1 GiB
 * read after a 1 GiB write ran at 70% of its speed). So by default the map
 * starts as large as the store's file system, between 256 MiB and 16 GiB,
 * and it rarely grows. With MDB_WRITEMAP the file is as long as the map,
 * but sparse: only what space.c allocates takes room. 1,000 stores of
 * 16 GiB use an eighth of the 128 TiB of address space.
 */
static uint64_t auto_map_size(const char *dir)
{
	const uint64_t lo = 256ull << 20, hi = 16ull << 30;
	struct statvfs sv;
	if (statvfs(dir, &sv) < 0)
		return lo;
	uint64_t total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return total < lo ? lo : total > hi ? hi : total;
}

/*
 * Where the store is on a disk, MDB_WRITEMAP costs more than it saves:
 * pages dirtied through the map take longer to flush than written ones
 * (ext4 on this machine's disk: 8 random 4 KiB pages, msync 4.7 ms and
 * fdatasync 3.7 ms when dirtied through a shared map, 0.9 ms when written
 * with pwrite), and every first store into a page after its write-back is
 * a write-protect fault (a 4 KiB update committed in 100 us against 30).
 * In memory (tmpfs) it saves the copy at commit and nothing is flushed.
 */
static bool in_memory(const char *dir)
{
	struct statfs sf;
	return statfs(dir, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

static int open_env(struct dbfs *fs, const char *dir, unsigned flags, uint64_t map, char *err,
		    size_t errlen)
{
	int rc = dbfs_meta_check(dir, err, errlen); /* LMDB trusts them */
	if (rc)
		return rc;
	rc = mdb_env_create(&fs->env);
	if (rc) {
		snprintf(err, errlen, "mdb_env_create: %s", mdb_strerror(rc));
		return -ENOMEM;
	}
	mdb_env_set_mapsize(fs->env, map);
	/* every write transaction copies an array of maxdbs entries (LMDB):
	 * no room for the feed's queues when a read-write open keeps no feed */
	bool feed = fs->opt.feed || fs->opt.read_only;
	mdb_env_set_maxdbs(fs->env,
			   64 + (feed ? dbfs_feed_dbs_needed() : 0) + dbfs_expire_dbs_needed());
	mdb_env_set_maxreaders(fs->env, fs->opt.max_readers ? fs->opt.max_readers : 512);
	rc = mdb_env_open(fs->env, dir, flags, 0600);
	if (!rc)
		return 0;
	if (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_PANIC)
		snprintf(err, errlen, "store is damaged or not an LMDB store: %s", mdb_strerror(rc));
	else if (rc == MDB_VERSION_MISMATCH)
		snprintf(err, errlen, "store was written by an incompatible LMDB version");
	else
		snprintf(err, errlen, "cannot open store: %s", mdb_strerror(rc));
	mdb_env_close(fs->env);
	fs->env = NULL;
	return rc > 0 ? -rc : -EINVAL;
}

/* The rest of dbfs_open once the environment is open: the size check, the
 * tables, the superblock (a format when new), durable points, the format
 * upgrade and the orphan reclaim. 0 or a negative errno with err set; the
 * caller closes what it opened. Reads the maps: under a guard (dbfs_open). */
static int open_tables(struct dbfs *fs, const struct dbfs_options *o, char *err, size_t errlen)
{
	int rc;
	if ((rc = check_size(fs, err, errlen)))
		return rc;
	MDB_envinfo info;
	mdb_env_info(fs->env, &info);
	fs->map_size = info.me_mapsize;
	/* a shared store's table is not reset at open: dead processes' slots
	 * would pin the free list from the open's first write on (readers.c);
	 * a failure (LMDB's reader mutex) leaves them to the tick */
	(void)dbfs_readers_check(fs);

	/* Open (or create) the named databases and check the superblock. */
	MDB_txn *txn;
	rc = mdb_txn_begin(fs->env, NULL, o->read_only ? MDB_RDONLY : 0, &txn);
	if (rc) {
		snprintf(err, errlen, "cannot begin transaction: %s", mdb_strerror(rc));
		rc = dbfs_errno(rc);
		return rc;
	}
	rc = open_dbis(fs, txn, o->read_only ? 0 : MDB_CREATE);
	if (rc) {
		mdb_txn_abort(txn);
		if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE)
			snprintf(err, errlen, "not a DBFS store (missing tables)");
		else
			snprintf(err, errlen, "cannot open tables: %s", mdb_strerror(rc));
		rc = rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE ? -EINVAL : dbfs_errno(rc);
		return rc;
	}
	MDB_val k = {2, (void *)"sb"}, v;
	/* A read that failed is no missing superblock: never "not a DBFS
	 * store" (or a format) for an I/O error. */
	MDB_stat st = {0};
	int got = mdb_get(txn, fs->db_super, &k, &v);
	if (got == MDB_NOTFOUND && o->create)
		got = mdb_stat(txn, fs->db_inode, &st) ?: MDB_NOTFOUND;
	if (got && got != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		snprintf(err, errlen, "cannot read the store: %s", mdb_strerror(got));
		rc = dbfs_errno(got);
		return rc;
	}
	int fresh = got == MDB_NOTFOUND;
	if (fresh && o->create) {
		if (st.ms_entries) {
			mdb_txn_abort(txn);
			snprintf(err, errlen, "not a DBFS store (no superblock but inodes)");
			rc = -EINVAL;
			return rc;
		}
		rc = dbfs_format(fs, txn);
		if (rc) {
			mdb_txn_abort(txn);
			snprintf(err, errlen, "cannot format store: %s", mdb_strerror(rc));
			rc = dbfs_errno(rc);
			return rc;
		}
	}
	rc = dbfs_super_check(fs, txn, err, errlen);
	if (rc) {
		mdb_txn_abort(txn);
		rc = dbfs_errno(rc);
		return rc;
	}
	rc = mdb_txn_commit(txn);
	if (rc) {
		snprintf(err, errlen, "cannot commit: %s", mdb_strerror(rc));
		rc = dbfs_errno(rc);
		return rc;
	}
	dbfs_find_map(fs);

	if (!o->read_only) {
		if ((rc = dbfs_durable_start(fs, err, errlen)))
			return rc;
		/* the names (and the version, in the same commit) */
		if (fs->sb_version < 5 && (rc = dbfs_errno(dbfs_names_upgrade(fs)))) {
			snprintf(err, errlen, "cannot upgrade the store's format: %s", strerror(-rc));
			return rc;
		}
		if (fs->sb_version < DBFS_FORMAT_VERSION &&
		    (rc = dbfs_errno(dbfs_write(fs, dbfs_super_upgrade_fn, NULL)))) {
			snprintf(err, errlen, "cannot upgrade the store's format: %s", strerror(-rc));
			return rc;
		}
		/* shared: orphans may be open in another process (shared.h) */
		rc = !fs->shared || dbfs_lock_alone(fs->lock_fd) ? reclaim(fs) : 0;
		if (rc) {
			rc = dbfs_errno(rc);
			snprintf(err, errlen, "cannot reclaim orphans: %s", strerror(-rc));
			return rc;
		}
		if ((rc = dbfs_feed_start(fs, err, errlen)))
			return rc;
		/* delayed work's queue has one subscriber, one process's: not
		 * while shared (shared.h) */
		if (!fs->shared && ((rc = dbfs_settle_start(fs, err, errlen)) || /* before its thread */
				    (rc = dbfs_expire_start(fs, err, errlen))))
			return rc;
		if ((rc = dbfs_errno(dbfs_durable_point(fs)))) {
			snprintf(err, errlen, "cannot flush the store: %s", strerror(-rc));
			return rc;
		}
		dbfs_durable_opened(fs);
	} else if ((rc = dbfs_feed_start(fs, err, errlen))) {
		return rc;
	}
	return 0;
}

/*
 * open_tables under a guard: the store's user may cut data.mdb or lock.mdb
 * under the map while it is opened (on the manager's thread), and a SIGBUS
 * there is an error of this open, not the end of the process (guard.h).
 * After one, fs->env is NULL (the environment is kept, never closed:
 * closing could fault again) and the result -EIO.
 */
static int open_guarded(struct dbfs *fs, const struct dbfs_options *o, char *err, size_t errlen)
{
	struct dbfs_guard g;
	dbfs_guard_maps(fs);
	dbfs_guard_push(&g, fs);
	int rc;
	if (sigsetjmp(g.jb, 0)) {
		dbfs_guard_recovered(&g);
		snprintf(err, errlen, "%s changed size while it was opened: %s", fs->dir,
			 fs->io_reason);
		rc = -EIO;
	} else {
		rc = open_tables(fs, o, err, errlen);
		dbfs_guard_pop(&g);
	}
	/* lost also when the fault came inside a write of the open (the
	 * group commit's own guard answered it) */
	if (rc && atomic_load(&fs->map_lost)) {
		dbfs_guard_keep(fs->env);
		fs->env = NULL;
		dbfs_durable_drop(fs);
	}
	return rc;
}

/* What a shared open cannot give (dbfs/shared.h): -EINVAL and why. */
static int shared_refusals(struct dbfs *fs, const struct dbfs_options *o, char *err,
			   size_t errlen)
{
	const char *why = NULL;
	if (o->writeback_cache)
		why = "writeback_cache is refused with shared: the kernel would keep writes, "
		      "sizes and times that the other processes cannot see";
	else if (o->read_only)
		why = "ro is refused with shared: the cache invalidation follows the change "
		      "feed, which a read-only open does not open";
	else if (!o->feed)
		why = "feed=off is refused with shared: the processes see each other's "
		      "changes through the change feed";
	else if (o->durability != DBFS_DURABLE_FULL && !in_memory(fs->dir))
		why = "shared needs durability=full on a store that is not in memory: the "
		      "durable points of durability=normal (dbfs.durable) are one process's";
	if (!why)
		return 0;
	snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

int dbfs_open(const char *dir, const struct dbfs_options *o, struct dbfs **out, char *err,
	      size_t errlen)
{
	char scratch[8];
	struct stat sb;
	int rc;
	if (!err) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = '\0';

	if (stat(dir, &sb) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return rc;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", dir);
		return -ENOTDIR;
	}

	struct dbfs *fs = calloc(1, sizeof(*fs));
	/* Absolute: the daemon changes directory when it detaches. */
	if (!fs || !(fs->dir = realpath(dir, NULL))) {
		free(fs);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fs->opt = *o;
	fs->lock_fd = -1;
	fs->quota_bytes = o->quota_bytes;
	fs->quota_inodes = o->quota_inodes;
	pthread_rwlockattr_t rwa;
	pthread_rwlockattr_init(&rwa);
	pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&fs->map_lock, &rwa);
	pthread_rwlockattr_destroy(&rwa);
	pthread_mutex_init(&fs->wq_lock, NULL);
	pthread_mutex_init(&fs->rpool_lock, NULL);
	pthread_cond_init(&fs->wq_cond, NULL);
	fs->wq_tail = &fs->wq_head;
	pthread_mutex_init(&fs->reap_lock, NULL);
	/* Error-checking: the map guard unlocks it after a SIGBUS if, and only
	 * if, the faulting thread holds it (guard.c). */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&fs->dur_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&fs->dur_stat_lock, NULL);
	dbfs_guard_install();
	fs->dur_fd = -1;
	fs->img_fd = -1;
	fs->commit_interval_ms = 5000;
	dbfs_set_commit_interval(fs, o->commit_interval);
	dbfs_cache_init(fs);
	fs->cache.limit = o->cache_limit;
	if ((rc = dbfs_lookups_init(&fs->lookups))) {
		snprintf(err, errlen, "out of memory");
		goto fail_lookups;
	}

	/* No store and no create: refuse before making anything. */
	char path[4200];
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	int exists = stat(path, &sb) == 0;
	unsigned made = 0;
	if (!exists && !o->create) {
		snprintf(err, errlen, "no DBFS store in %s (use 'create' to make one)", dir);
		rc = -ENOENT;
		goto fail_lock;
	}
	if (o->shared && (rc = shared_refusals(fs, o, err, errlen)))
		goto fail_lock;
	if (o->shared && (rc = dbfs_shared_open(fs, err, errlen)))
		goto fail_lock;
	if ((rc = lock_store(fs, &made, err, errlen))) {
		dbfs_shared_close(fs);
		goto fail_lock;
	}
	/* Again, under the lock: a concurrent opener may have made or removed it. */
	exists = stat(path, &sb) == 0;
	if (!exists && !o->create) {
		snprintf(err, errlen, "no DBFS store in %s (use 'create' to make one)", dir);
		rc = -ENOENT;
		goto fail_env;
	}
	if (!exists)
		made |= MADE_DATA;
	char envlock[4200];
	snprintf(envlock, sizeof(envlock), "%s/lock.mdb", dir);
	if (access(envlock, F_OK) < 0 && errno == ENOENT)
		made |= MADE_ENVLOCK;
	snprintf(envlock, sizeof(envlock), "%s/" DBFS_DREC_FILE, dir);
	if (access(envlock, F_OK) < 0 && errno == ENOENT)
		made |= MADE_DUR;
	/* Never format over an existing file, even an empty one: it was a
	 * store that someone truncated. */
	if (exists && sb.st_size == 0) {
		snprintf(err, errlen, "store is damaged: %s is empty (remove it to make a new store)",
			 path);
		rc = -EINVAL;
		goto fail_env;
	}

	uint64_t map = o->initial_map_size ? o->initial_map_size : auto_map_size(dir);
	if (exists && (uint64_t)sb.st_size > map)
		map = (uint64_t)sb.st_size;
	map = (map + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	unsigned flags = MDB_NOTLS;
	if (o->read_only)
		flags |= MDB_RDONLY;
	/* Not `full`: LMDB flushes nothing, durable points do (durable.c). */
	if (o->durability != DBFS_DURABLE_FULL)
		flags |= MDB_NOSYNC;
	/* After a reboot, LMDB must read the durable point's meta page. */
	int restored;
	if (exists && (rc = dbfs_durable_recover(fs->dir, o->read_only, &restored, err, errlen)))
		goto fail_env;
	/* MDB_WRITEMAP writes pages straight into the file's page cache (no
	 * copy at commit), but touching an unallocated page of a full file
	 * system raises SIGBUS: only where fallocate lets us keep a reserve
	 * (space.c). It also extends the file to the map size at open, so a
	 * damaged store is first checked through a read-only open. */
	fs->dur_trust = o->durability == DBFS_DURABLE_FULL ||
			(in_memory(fs->dir) && !dbfs_durable_test_on_disk);
	if (o->writemap && !o->read_only && dbfs_space_supported(fs->lock_fd) &&
	    (!o->writemap_auto || in_memory(fs->dir))) {
		if (exists) {
			rc = open_env(fs, dir, MDB_NOTLS | MDB_RDONLY, map, err, errlen);
			if (rc)
				goto fail_env;
			rc = precheck(fs, o->create, err, errlen);
			mdb_env_close(fs->env);
			if (rc)
				goto fail_env;
		}
		flags |= MDB_WRITEMAP;
		fs->writemap = 1;
	}
	if ((rc = open_env(fs, dir, flags, map, err, errlen)))
		goto fail_env;
	rc = open_guarded(fs, o, err, errlen);
	if (rc && !fs->env)
		goto fail_env; /* its maps faulted: the environment is kept */
	if (rc)
		goto fail_open;
	*out = fs;
	return 0;

fail_open:
	dbfs_expire_stop(fs);
	dbfs_settle_stop(fs);
	dbfs_feed_stop(fs);
	while (fs->rpool_n) /* the open's own reads (the feed's start) */
		mdb_txn_abort(fs->rpool[--fs->rpool_n]);
	dbfs_durable_stop(fs);
	mdb_env_close(fs->env);
fail_env:
	/* files made by this open may be another sharing process's by now */
	if (!fs->opt.shared || dbfs_lock_alone(fs->lock_fd))
		unmake(fs, made);
	close(fs->lock_fd);
	dbfs_shared_close(fs);
fail_lock:
	dbfs_lookups_destroy(&fs->lookups);
fail_lookups:
	dbfs_cache_destroy(fs);
	free(fs->dir);
	free(fs);
	return rc;
}

/* What closing does to the LMDB environment; under a guard (dbfs_close). */
static void close_env(struct dbfs *fs)
{
	dbfs_shared_session(fs, NULL); /* the notifier reads the feed */
	if (!fs->opt.read_only && !atomic_load(&fs->map_lost)) {
		/* The session is gone: the kernel holds no inode any more, and
		 * it may have dropped its last forgets at unmount. */
		dbfs_reap_now(fs);
		/* shared: the last process out reclaims (shared.h) */
		if (!fs->shared || dbfs_lock_alone(fs->lock_fd))
			reclaim(fs); /* leaves large files to the next open (reclaim.c) */
	}
	dbfs_expire_stop(fs); /* its thread stops between two pieces */
	dbfs_settle_stop(fs);
	dbfs_feed_stop(fs);
	while (fs->rpool_n)
		mdb_txn_abort(fs->rpool[--fs->rpool_n]);
	dbfs_durable_stop(fs); /* a last durable point (none on a lost store) */
	mdb_env_close(fs->env);
}

void dbfs_close(struct dbfs *fs)
{
	if (!fs)
		return;
	struct dbfs_guard g;
	dbfs_guard_push(&g, fs);
	if (sigsetjmp(g.jb, 0) == 0) {
		close_env(fs);
		dbfs_guard_pop(&g);
	} else {
		/* Its maps faulted on the way: the environment is left as it
		 * is (never closed twice), with the descriptors LMDB holds. */
		dbfs_guard_recovered(&g);
		dbfs_guard_keep(fs->env);
		dbfs_durable_drop(fs);
	}
	close(fs->lock_fd);
	dbfs_shared_close(fs);
	dbfs_lookups_destroy(&fs->lookups);
	dbfs_cache_destroy(fs);
	pthread_rwlock_destroy(&fs->map_lock);
	free(fs->reap);
	free(fs->dir);
	free(fs);
}

int dbfs_sync(struct dbfs *fs)
{
	return dbfs_errno(dbfs_durable_point(fs)); /* under the request's guard */
}

int dbfs_tick(struct dbfs *fs)
{
	dbfs_cache_trim(fs);
	/* Once: the owner learns of a failed store (and logs its reason). */
	if (atomic_load(&fs->io_failed) == 2 && !atomic_exchange(&fs->health_told, 1))
		return -EIO;
	if (fs->opt.read_only || atomic_load(&fs->map_lost))
		return 0;
	/* The manager's thread, outside any request: a guard of its own. */
	struct dbfs_guard g;
	dbfs_guard_push(&g, fs);
	if (sigsetjmp(g.jb, 0)) {
		dbfs_guard_recovered(&g);
		return -EIO;
	}
	(void)dbfs_readers_check(fs); /* readers.c; a failure: the next tick's */
	int rc = dbfs_reap_now(fs);
	int frc = dbfs_feed_tick(fs);
	int drc = dbfs_durable_tick(fs);
	dbfs_guard_pop(&g);
	return dbfs_errno(rc ? rc : frc ? frc : drc);
}

const char *dbfs_dir(const struct dbfs *fs)
{
	return fs->dir;
}
