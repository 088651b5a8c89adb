/*
 * dbfs-fsck: check (and repair) a DBFS store offline.
 *
 * Reads the LMDB tables directly as dbfs/format.h lays them out. Takes the
 * store's lock (STORE/dbfs.lock, flock LOCK_EX|LOCK_NB) first, so it never
 * looks at a store a daemon has open. A check runs in one read transaction;
 * --repair runs the three passes in one write transaction, reloading the
 * model after each pass that changed something, commits, and then checks the
 * result again from scratch.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsck.h"
#include "dbfs/recover.h"

/* Named databases a check may open at once: the store's tables, the feed's
 * queue of 8 shards (up to 2 + 8 * 83 subshard, delay and meta tables at
 * its hard limit, dbfs/feed.c), an older store's one-shard queue (85) and
 * the queue of delayed work (85); LMDB's per-transaction cost of a large
 * maxdbs does not matter here. */
#define FSCK_MAXDBS 1024

static const char usage_text[] =
    "Usage: dbfs-fsck [-r|--repair] [-v|--verbose] [--allow-orphans] STORE\n"
    "Check every invariant of the DBFS store in directory STORE (see dbfs/format.h).\n"
    "The store must not be in use: its lock STORE/dbfs.lock is taken first.\n"
    "A store that lost power is checked at its last durable point (STORE/dbfs.durable\n"
    "and the imaged points of STORE/dbfs.images that follow it):\n"
    "--repair restores it first; without --repair such a store is refused (exit 8).\n"
    "\n"
    "  -r, --repair     fix what can be fixed safely, in one transaction:\n"
    "                   recount nlink, nentries, directory parents, alloc, usage and\n"
    "                   next_ino; drop malformed records, dirents whose parent or\n"
    "                   inode is missing (with their dircook twins), dircook records\n"
    "                   without a matching dirent, data blocks of missing or non-regular\n"
    "                   inodes or past the file size, xattrs of missing inodes, extra\n"
    "                   names of directories; rebuild missing dircook records; delete\n"
    "                   orphans (unreachable inodes with nlink 0, as mounting would);\n"
    "                   move every other unreachable inode into /lost+found as '#INO'.\n"
    "                   Malformed inode records and a missing root are reported, not fixed.\n"
    "  -v, --verbose    print table sizes and each repair action\n"
    "      --allow-orphans  orphans (nlink 0, listed in the orphan table) are normal\n"
    "                   after a crash until the store is next opened: report them as\n"
    "                   notes, not problems\n"
    "  -h, --help       this text\n"
    "\n"
    "Output: one line per problem, then a summary line.\n"
    "Exit status:\n"
    "  0  the store is clean\n"
    "  1  problems found (without --repair), or problems left after --repair\n"
    "  4  --repair found problems and fixed all of them (the store is now clean)\n"
    "  8  operational error: cannot open, not a DBFS store, store in use, I/O error\n";

static struct fsck *g_fsck;

static void vline(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stdout);
	vprintf(fmt, ap);
	putchar('\n');
}

void fsck_problem(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	f->problems++;
	if (f->quiet)
		return;
	va_start(ap, fmt);
	vline("", fmt, ap);
	va_end(ap);
}

void fsck_unfixable(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	f->problems++;
	f->unfixable++;
	if (f->quiet)
		return;
	va_start(ap, fmt);
	vline("", fmt, ap);
	va_end(ap);
}

void fsck_note(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	f->notes++;
	if (f->quiet || !f->verbose)
		return;
	va_start(ap, fmt);
	vline("note: ", fmt, ap);
	va_end(ap);
}

void fsck_action(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	if (f->quiet || !f->verbose || !f->fixing)
		return;
	va_start(ap, fmt);
	vline("  repair: ", fmt, ap);
	va_end(ap);
}

void fsck_fatal(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("dbfs-fsck: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (g_fsck && g_fsck->txn && g_fsck->repair)
		fputs("dbfs-fsck: nothing was changed\n", stderr);
	exit(FSCK_EXIT_OPERROR);
}

void fsck_lmdb_check(int rc, const char *what)
{
	if (rc)
		fsck_fatal("%s: %s", what, mdb_strerror(rc));
}

const char *fsck_type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symlink";
	case S_IFCHR:
		return "char device";
	case S_IFBLK:
		return "block device";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	default:
		return "bad type";
	}
}

const char *fsck_name(const void *name, size_t len, int slot)
{
	static char buf[2][4 * DBFS_NAME_MAX + 1];
	const unsigned char *s = name;
	char *o = buf[slot & 1];

	if (len > DBFS_NAME_MAX)
		len = DBFS_NAME_MAX;
	for (size_t i = 0; i < len; i++) {
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\')
			*o++ = (char)s[i];
		else
			o += sprintf(o, "\\x%02x", s[i]);
	}
	*o = 0;
	return buf[slot & 1];
}

static int take_lock(const char *store)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/dbfs.lock", store);
	/* A dbfs_open that failed removes the lock file it made, under the
	 * lock (dbfs/format.h): lock again what the path names then. */
	for (int tries = 0; tries < 16; tries++) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fsck_fatal("%s: %s", path, strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			if (errno == EWOULDBLOCK)
				fsck_fatal("%s: store is in use (dbfs.lock is held); %s", store,
					   "unmount it first");
			fsck_fatal("%s: flock: %s", path, strerror(errno));
		}
		if (dbfs_lock_is_current(fd, path))
			return fd;
		close(fd);
	}
	fsck_fatal("%s: store is in use (dbfs.lock keeps changing)", store);
}

static void open_dbi(struct fsck *f, const char *name, MDB_dbi *dbi)
{
	int rc = mdb_dbi_open(f->txn, name, f->repair ? MDB_CREATE : 0, dbi);

	if (rc == MDB_NOTFOUND)
		fsck_fatal("%s: not a DBFS store (no table '%s')", f->store, name);
	fsck_lmdb_check(rc, name);
}

size_t fsck_inode_fixed(const struct fsck *f, const MDB_val *v)
{
	return f->upgrading ? dbfs_inode_fixed_mixed(v->mv_data, v->mv_size) : f->inode_fixed;
}

static void read_super(struct fsck *f)
{
	MDB_val k = {2, "sb"}, v;
	int rc = mdb_get(f->txn, f->dbi_super, &k, &v);

	if (rc == MDB_NOTFOUND)
		fsck_fatal("%s: not a DBFS store (no superblock)", f->store);
	fsck_lmdb_check(rc, "reading the superblock");
	if (v.mv_size != sizeof(f->sb))
		fsck_fatal("%s: superblock is %zu bytes, expected %zu", f->store, v.mv_size,
			   sizeof(f->sb));
	memcpy(&f->sb, v.mv_data, sizeof(f->sb));
	if (memcmp(f->sb.magic, DBFS_MAGIC, sizeof(DBFS_MAGIC)))
		fsck_fatal("%s: not a DBFS store (bad magic)", f->store);
	if (f->sb.byte_order != 0x0102030405060708ull)
		fsck_fatal("%s: store written with another byte order", f->store);
	if (f->sb.version < DBFS_FORMAT_OLDEST || f->sb.version > DBFS_FORMAT_VERSION)
		fsck_fatal("%s: format version %u, this dbfs-fsck knows %u to %u", f->store,
			   f->sb.version, DBFS_FORMAT_OLDEST, DBFS_FORMAT_VERSION);
	f->inode_fixed = f->sb.version >= 5 ? sizeof(struct dbfs_inode) : DBFS_INODE_V4_SIZE;
	MDB_val uk = {3, "up5"};
	if (f->sb.version < 5 && mdb_get(f->txn, f->dbi_super, &uk, &v) == 0) {
		struct dbfs_upgrade5 u = {0};
		memcpy(&u, v.mv_data, v.mv_size < sizeof(u) ? v.mv_size : sizeof(u));
		f->upgrading = true;
		if (!f->quiet)
			printf("%s: the upgrade from format %u to 5 is under way (phase %u): the "
			       "inodes' names are not checked; a read-write open finishes it\n",
			       f->store, f->sb.version, u.phase);
	}
	MDB_stat st;
	if (f->sb.block_size != DBFS_BLOCK_SIZE &&
	    (mdb_env_stat(f->env, &st) || f->sb.block_size != DBFS_PAGE_BLOCK(st.ms_psize)))
		fsck_fatal("%s: block size %u, expected %u or one page less 16 bytes", f->store,
			   f->sb.block_size, DBFS_BLOCK_SIZE);
}

static void begin(struct fsck *f, bool write)
{
	fsck_lmdb_check(mdb_txn_begin(f->env, NULL, write ? 0 : MDB_RDONLY, &f->txn),
			"beginning a transaction");
	f->dbi_super = 0;
	open_dbi(f, DBFS_DB_SUPER, &f->dbi_super);
	read_super(f);
	open_dbi(f, DBFS_DB_INODE, &f->dbi_inode);
	open_dbi(f, DBFS_DB_DIRENT, &f->dbi_dirent);
	open_dbi(f, DBFS_DB_DIRCOOK, &f->dbi_dircook);
	open_dbi(f, DBFS_DB_DATA, &f->dbi_data);
	open_dbi(f, DBFS_DB_XATTR, &f->dbi_xattr);
	open_dbi(f, DBFS_DB_ORPHAN, &f->dbi_orphan);
	fsck_load(f);
}

/* Refuse anything that is not a store before touching it (the lock file). */
static off_t store_size(const char *store)
{
	char path[4096];
	struct stat st;

	if (stat(store, &st) < 0)
		fsck_fatal("%s: %s", store, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		fsck_fatal("%s: not a directory", store);
	snprintf(path, sizeof(path), "%s/data.mdb", store);
	if (stat(path, &st) < 0)
		fsck_fatal("%s: not a DBFS store (%s: %s)", store, path, strerror(errno));
	return st.st_size;
}

static void open_env(struct fsck *f, off_t size)
{
	int rc, restored;
	char err[512];

	/* After a power loss, LMDB's newest meta page may name pages that
	 * never reached the disk; the store is what dbfs.durable names
	 * (dbfs/recover.h). Checking means restoring it first. */
	rc = dbfs_durable_recover(f->store, !f->repair, &restored, err, sizeof(err));
	if (rc == -EROFS)
		fsck_fatal("%s: the store lost power: mount it once (or use --repair) so that it "
			   "returns to its last durable point, then check it", f->store);
	if (rc)
		fsck_fatal("%s: %s", f->store, err);
	if (restored)
		fsck_note(f, "restored the last durable point after a power loss");

	fsck_lmdb_check(mdb_env_create(&f->env), "mdb_env_create");
	mdb_env_set_maxdbs(f->env, FSCK_MAXDBS);
	mdb_env_set_maxreaders(f->env, 16);
	/* Room for the repair's copy-on-write pages beyond the file's size. */
	if (f->repair)
		mdb_env_set_mapsize(f->env, (size_t)size + (size_t)size / 4 + (64u << 20));
	rc = mdb_env_open(f->env, f->store, f->repair ? 0 : MDB_RDONLY, 0644);
	if (!f->repair && (rc == EACCES || rc == EROFS)) {
		/* A read-only store: we hold dbfs.lock, so no writer can
		 * come; LMDB's own reader table is not needed. */
		mdb_env_close(f->env);
		fsck_lmdb_check(mdb_env_create(&f->env), "mdb_env_create");
		mdb_env_set_maxdbs(f->env, FSCK_MAXDBS);
		rc = mdb_env_open(f->env, f->store, MDB_RDONLY | MDB_NOLOCK, 0644);
	}
	if (rc)
		fsck_fatal("%s: cannot open the LMDB environment: %s", f->store, mdb_strerror(rc));
}

static void summary(struct fsck *f, const char *what)
{
	printf("%s: %zu inodes, %zu dirents, %" PRIu64 " dircook, %" PRIu64 " blocks, %" PRIu64
	       " xattrs, %" PRIu64 " orphans; %s\n",
	       f->store, f->ninodes, f->ndirents, f->ndircook, f->nblocks, f->nxattrs, f->norphans,
	       what);
}

static void run_passes(struct fsck *f)
{
	if (fsck_pass_trim(f)) /* first: which blocks may lie past a file's size */
		fsck_load(f);
	if (fsck_pass_records(f))
		fsck_load(f);
	if (fsck_pass_tree(f))
		fsck_load(f);
	fsck_pass_counts(f);
	fsck_pass_feed(f);
	fsck_pass_expire(f);
	fsck_pass_settle(f);
}

static int check_only(struct fsck *f)
{
	char what[128];

	begin(f, false);
	if (f->verbose)
		summary(f, "checking");
	run_passes(f);
	if (f->problems)
		snprintf(what, sizeof(what), "%lu problem%s", f->problems,
			 f->problems == 1 ? "" : "s");
	else
		snprintf(what, sizeof(what), "clean%s",
			 f->notes ? " (orphans left by a crash: mount to reclaim)" : "");
	summary(f, what);
	mdb_txn_abort(f->txn);
	f->txn = NULL;
	return f->problems ? FSCK_EXIT_PROBLEMS : FSCK_EXIT_CLEAN;
}

static int repair(struct fsck *f)
{
	unsigned long found;
	char what[160];

	begin(f, true);
	if (f->verbose)
		summary(f, "repairing");
	f->fixing = true;
	run_passes(f);
	f->fixing = false;
	found = f->problems;
	fsck_lmdb_check(mdb_txn_commit(f->txn), "committing the repair");
	f->txn = NULL;
	if (!found) {
		fsck_unload(f);
		return check_only(f);
	}
	/* Check the result from scratch; print what is left. */
	f->problems = f->unfixable = f->notes = 0;
	begin(f, false);
	printf("after repair:\n");
	run_passes(f);
	snprintf(what, sizeof(what), "%lu problem%s found, %lu left", found, found == 1 ? "" : "s",
		 f->problems);
	summary(f, what);
	mdb_txn_abort(f->txn);
	f->txn = NULL;
	return f->problems ? FSCK_EXIT_PROBLEMS : FSCK_EXIT_REPAIRED;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"repair", no_argument, NULL, 'r'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"allow-orphans", no_argument, NULL, 'O'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct fsck f = {0};
	int c, rc, lockfd;
	off_t size;

	g_fsck = &f;
	while ((c = getopt_long(argc, argv, "rvh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			f.repair = true;
			break;
		case 'v':
			f.verbose = true;
			break;
		case 'O':
			f.allow_orphans = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return FSCK_EXIT_CLEAN;
		default:
			fputs(usage_text, stderr);
			return FSCK_EXIT_OPERROR;
		}
	}
	if (optind != argc - 1) {
		fputs(usage_text, stderr);
		return FSCK_EXIT_OPERROR;
	}
	f.store = argv[optind];
	size = store_size(f.store);
	lockfd = take_lock(f.store);
	open_env(&f, size);
	rc = f.repair ? repair(&f) : check_only(&f);
	fsck_unload(&f);
	mdb_env_close(f.env);
	close(lockfd);
	return rc;
}
