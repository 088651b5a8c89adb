/*
 * Fault injection along every core operation of DBFS, SQLite style.
 *
 * Each scenario is one operation (or a store's open or close) on a copy of
 * a template store, driven through the FUSE handlers (fake_fuse.h) as the
 * kernel would send it. It runs once without faults: that gives the tree
 * "after". Then, for each kind of fault (the Nth LMDB call, allocation of
 * libdbfs, write to the store: inject.h) and N = 1, 2, ... until a run
 * makes fewer than N calls of that kind, it runs on a fresh copy with the
 * Nth call failing and checks:
 *   - the handler replies exactly once; an error is a plausible errno;
 *   - the store, closed, passes dbfs-fsck; reopened, its tree (every path,
 *     inode field, byte of data, xattr, and the usage record) equals the
 *     tree before or after the operation, and after it when the reply was
 *     a success; a read's reply equals the fault-free one (a readdir's may
 *     stop early);
 *   - nothing leaks (the sanitizer build's leak check, at exit).
 *
 * Usage: test_fault_dbfs FSCK [--full] [SCENARIO...]
 *   default: the Nth call fails once (a transient fault);
 *   --full:  also with every call from the Nth on failing (a persistent
 *            fault), a strict fsck after the clean reopen, durability=full
 *            (a flush of the meta page too), 1 MiB writes and fallocates.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "fake_fuse.h"
#include "harness.h"
#include "inject.h"

extern char **environ;

static const char *fsck_path;
static bool full;
static char base[256], tmpl[300], tmpl_orphans[300], work[300];
static const struct fuse_lowlevel_ops *ops;
static struct dbfs *fs;
static int failures;
static long points, points_kind[FAULT_KINDS], after_on_error;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void run_cmd(const char *const argv[], int *status)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	if (!getenv("FAULT_VERBOSE"))
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, argv[0], &fa, NULL, (char **)argv, environ))
		die(argv[0]);
	posix_spawn_file_actions_destroy(&fa);
	if (waitpid(pid, status, 0) < 0)
		die("waitpid");
}

/* Store directories are flat (data.mdb, lock.mdb, dbfs.lock): no spawn. */
static void rm_rf(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	char p[600];
	if (!dd)
		return;
	while ((e = readdir(dd))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
		if (unlink(p) && errno == EISDIR)
			rm_rf(p);
	}
	closedir(dd);
	rmdir(d);
}

static void copy_store(const char *from, const char *to)
{
	DIR *dd = opendir(from);
	struct dirent *e;
	char a[600], b[600];
	rm_rf(to);
	if (!dd || mkdir(to, 0755))
		die("copy_store");
	while ((e = readdir(dd))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
		int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || out < 0 || fstat(in, &st))
			die(a);
		for (off_t off = 0; off < st.st_size;) {
			ssize_t n =
			    copy_file_range(in, &off, out, NULL, (size_t)(st.st_size - off), 0);
			if (n <= 0)
				die("copy_file_range");
		}
		close(in);
		close(out);
	}
	closedir(dd);
}

static struct dbfs_options options(bool create)
{
	struct dbfs_options o;
	dbfs_options_init(&o);
	o.create = create;
	/* --full: every commit flushes its meta page too, one more write */
	o.durability = full ? DBFS_DURABLE_FULL : DBFS_DURABLE_NORMAL;
	o.initial_map_size = 4 << 20;
	return o;
}

static int open_store(const char *d, bool create)
{
	struct dbfs_options o = options(create);
	char err[256];
	int rc = dbfs_open(d, &o, &fs, err, sizeof(err));
	if (rc)
		fs = NULL;
	return rc;
}

static void must_open(const char *d)
{
	int rc = open_store(d, false);
	if (rc) {
		fprintf(stderr, "open %s: %s\n", d, strerror(-rc));
		exit(2);
	}
}

/* dbfs-fsck's exit status on the closed store. */
static int fsck(const char *d, bool strict)
{
	int st;
	if (strict)
		run_cmd((const char *[]){fsck_path, d, NULL}, &st);
	else
		run_cmd((const char *[]){fsck_path, "--allow-orphans", d, NULL}, &st);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---- the tree, as text ---- */

static FILE *dump_out;

struct ent {
	char name[256];
	uint64_t ino;
};
struct ents {
	struct ent *v;
	size_t n, cap;
};

static int collect(void *arg, uint64_t cookie, uint64_t ino, uint32_t type, const char *name,
		   size_t len)
{
	struct ents *e = arg;
	(void)cookie;
	(void)type;
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 16;
		e->v = realloc(e->v, e->cap * sizeof(*e->v));
	}
	snprintf(e->v[e->n].name, sizeof(e->v[e->n].name), "%.*s", (int)len, name);
	e->v[e->n++].ino = ino;
	return 0;
}

static void dump_inode(MDB_txn *t, const char *path, uint64_t ino)
{
	struct dbfs_inode in;
	int rc = dbfs_inode_get(fs, t, ino, &in);
	if (rc) {
		fprintf(dump_out, "%s: inode %llu unreadable (%d)\n", path, (unsigned long long)ino,
			rc);
		return;
	}
	fprintf(dump_out,
		"%s: mode %o uid %u gid %u nlink %u size %llu alloc %llu rdev %llu "
		"a %lld.%u m %lld.%u c %lld.%u",
		path, in.mode, in.uid, in.gid, in.nlink, (unsigned long long)in.size,
		(unsigned long long)in.alloc, (unsigned long long)in.rdev, (long long)in.atime_sec,
		in.atime_nsec, (long long)in.mtime_sec, in.mtime_nsec, (long long)in.ctime_sec,
		in.ctime_nsec);
	if (S_ISREG(in.mode)) {
		static char buf[1 << 16];
		uint64_t h = FAKE_HASH0;
		for (uint64_t off = 0; off < in.size;) {
			size_t got = 0;
			rc = dbfs_data_read(fs, t, ino, &in, off, sizeof(buf), buf, &got);
			if (rc || !got)
				break;
			h = fake_hash(h, buf, got);
			off += got;
		}
		fprintf(dump_out, " data %016llx%s", (unsigned long long)h,
			rc ? " (read error)" : "");
	} else if (S_ISLNK(in.mode)) {
		const char *target;
		size_t len;
		if (dbfs_inode_get_link(fs, t, ino, &target, &len) == 0)
			fprintf(dump_out, " -> %.*s", (int)len, target);
	}
	char names[4096];
	size_t need = 0;
	if (dbfs_xattr_list(fs, t, ino, names, sizeof(names), &need, 1) == 0) {
		for (size_t i = 0; i < need; i += strlen(names + i) + 1) {
			MDB_val v;
			if (dbfs_xattr_get(fs, t, ino, names + i, &v) == 0)
				fprintf(dump_out, " [%s=%.*s]", names + i, (int)v.mv_size,
					(const char *)v.mv_data);
		}
	}
	fputc('\n', dump_out);
	if (S_ISDIR(in.mode)) {
		struct ents e = {0};
		dbfs_dir_iter(fs, t, ino, 0, collect, &e);
		for (size_t i = 0; i < e.n; i++) {
			char sub[1024];
			snprintf(sub, sizeof(sub), "%s/%s", path, e.v[i].name);
			dump_inode(t, sub, e.v[i].ino);
		}
		free(e.v);
	}
}

/* The tree of the open store, as text (free it). */
static char *dump(void)
{
	char *s = NULL;
	size_t n = 0;
	MDB_txn *t;
	dump_out = open_memstream(&s, &n);
	if (dbfs_read_begin(fs, &t) == 0) {
		struct dbfs_usage_rec u;
		if (dbfs_usage_get(fs, t, &u) == 0)
			fprintf(dump_out, "usage bytes %llu inodes %llu\n",
				(unsigned long long)u.bytes, (unsigned long long)u.inodes);
		dump_inode(t, "", DBFS_ROOT_INO);
		dbfs_read_end(fs, t);
	} else {
		fprintf(dump_out, "no read transaction\n");
	}
	fclose(dump_out);
	return s;
}

/* ---- requests ---- */

static struct fuse_file_info fi0;

static int r_lookup(uint64_t parent, const char *name, uint64_t *ino)
{
	ops->lookup(fake_req(fs), parent, name);
	*ino = fake_reply.ino;
	return fake_reply.err;
}

/* Inode of a template path, looked up as the kernel would (one lookup
 * count each), outside the fault and the reply of the request around. */
static uint64_t L(uint64_t parent, const char *name)
{
	static struct fake_reply saved;
	uint64_t ino;
	saved = fake_reply;
	fault_pause(true);
	if (r_lookup(parent, name, &ino) || !ino) {
		fprintf(stderr, "lookup %s failed\n", name);
		exit(2);
	}
	fault_pause(false);
	fake_reply = saved;
	return ino;
}

/* Requests of a scenario: req_limit of them run (the others reply 0
 * without running), so that a fault-free run can stop after any of them. */
static long req_count, req_limit = -1;

#define REQ(call)                                                                                  \
	({                                                                                         \
		int e__ = 0;                                                                       \
		if (req_limit < 0 || ++req_count <= req_limit) {                                   \
			fuse_req_t req = fake_req(fs);                                             \
			ops->call;                                                                 \
			if (fake_reply.n != 1)                                                     \
				FAIL("%s: %d replies", #call, fake_reply.n);                       \
			e__ = fake_reply.err;                                                      \
		}                                                                                  \
		e__;                                                                               \
	})

/* Stop at the first error: the kernel would not go on either. */
#define TRY(call)                                                                                  \
	do {                                                                                       \
		int e_ = REQ(call);                                                                \
		if (e_)                                                                            \
			return e_;                                                                 \
	} while (0)

static char pattern[1 << 20];

static int setattr(uint64_t ino, int to_set, void (*fill)(struct stat *))
{
	struct stat st;
	memset(&st, 0, sizeof(st));
	fill(&st);
	return REQ(setattr(req, ino, &st, to_set, &fi0));
}

/* The template: /d/f1 (9000 bytes, user.x), /d/sub/, /e/, /f (20000
 * bytes, user.a, user.b), /s -> f, /big (1 byte at 3 MiB), /p (fifo),
 * /h a second name of /d/f1. */
static void make_template(void)
{
	uint64_t d, sub, f1, f, big;
	fake_ctx.uid = 1000;
	fake_ctx.gid = 1000;
	if (REQ(mkdir(req, 1, "d", 0755)) || REQ(mkdir(req, 1, "e", 0755)))
		die("template mkdir");
	d = L(1, "d");
	if (REQ(mkdir(req, d, "sub", 0700)) || REQ(mknod(req, d, "f1", S_IFREG | 0644, 0)) ||
	    REQ(mknod(req, 1, "f", S_IFREG | 0600, 0)) ||
	    REQ(mknod(req, 1, "big", S_IFREG | 0644, 0)) ||
	    REQ(mknod(req, 1, "p", S_IFIFO | 0644, 0)) || REQ(symlink(req, "f", 1, "s")))
		die("template mknod");
	sub = L(d, "sub");
	(void)sub;
	f1 = L(d, "f1");
	f = L(1, "f");
	big = L(1, "big");
	if (REQ(write(req, f1, pattern, 9000, 0, &fi0)) ||
	    REQ(write(req, f, pattern + 7, 20000, 0, &fi0)) ||
	    REQ(write(req, big, "z", 1, 3 << 20, &fi0)) ||
	    REQ(setxattr(req, f1, "user.x", "x1", 2, 0)) ||
	    REQ(setxattr(req, f, "user.a", "alpha", 5, 0)) ||
	    REQ(setxattr(req, f, "user.b", "beta", 4, 0)) || REQ(link(req, f1, 1, "h")))
		die("template data");
}

/* ---- scenarios ---- */

static int sc_create(void)
{
	TRY(mknod(req, 1, "new", S_IFREG | 0644, 0));
	uint64_t ino = fake_reply.ino;
	TRY(open(req, ino, &fi0));
	return REQ(write(req, ino, "new file", 8, 0, &fi0));
}
static int sc_mkdir(void)
{
	return REQ(mkdir(req, L(1, "d"), "nd", 0755));
}
static int sc_mknod(void)
{
	return REQ(mknod(req, 1, "fifo2", S_IFIFO | 0640, 0));
}
static int sc_mknod_dev(void)
{
	return REQ(mknod(req, 1, "chr", S_IFCHR | 0600, 0x0501));
}
static int sc_symlink(void)
{
	return REQ(symlink(req, "d/f1/../long/target", L(1, "d"), "sl"));
}
static int sc_link(void)
{
	return REQ(link(req, L(1, "f"), L(1, "e"), "f-link"));
}
static int sc_unlink(void)
{
	return REQ(unlink(req, 1, "s"));
}
static int sc_unlink_data(void)
{
	return REQ(unlink(req, 1, "f"));
}
/* The last name of a file the kernel holds, then the kernel forgets it:
 * its data is reaped in a later batch (here: the next write). */
static int sc_unlink_forget(void)
{
	uint64_t f = L(1, "f");
	TRY(unlink(req, 1, "f"));
	ops->forget(fake_req(fs), f, 1);
	return REQ(mkdir(req, 1, "after-reap", 0755));
}
static int sc_unlink_link(void)
{
	return REQ(unlink(req, 1, "h"));
}
static int sc_rmdir(void)
{
	return REQ(rmdir(req, 1, "e"));
}
static int sc_rename(void)
{
	return REQ(rename(req, 1, "f", 1, "g", 0));
}
static int sc_rename_over(void)
{
	return REQ(rename(req, 1, "f", L(1, "d"), "f1", 0));
}
static int sc_rename_dir(void)
{
	return REQ(rename(req, 1, "e", L(1, "d"), "e2", 0));
}
static int sc_rename_dir_over(void)
{
	return REQ(rename(req, L(1, "d"), "sub", 1, "e", 0));
}
static int sc_exchange(void)
{
	return REQ(rename(req, 1, "f", L(1, "d"), "sub", RENAME_EXCHANGE));
}
static int sc_write_small(void)
{
	return REQ(write(req, L(1, "f"), "hello", 5, 100, &fi0));
}
/* Large: 15 blocks, not aligned (--full: the 1 MiB of a FUSE max_write). */
static int sc_write_large(void)
{
	return REQ(write(req, L(1, "f"), pattern + 3, full ? sizeof(pattern) : 60000, 4000, &fi0));
}
static int sc_write_sparse(void)
{
	return REQ(write(req, L(1, "f"), "s", 1, 10 << 20, &fi0));
}
static void size_small(struct stat *st)
{
	st->st_size = 2000;
}
static void size_large(struct stat *st)
{
	st->st_size = 1 << 20;
}
static void size_zero(struct stat *st)
{
	st->st_size = 0;
}
static int sc_truncate_down(void)
{
	return setattr(L(1, "f"), FUSE_SET_ATTR_SIZE, size_small);
}
static int sc_truncate_up(void)
{
	return setattr(L(1, "f"), FUSE_SET_ATTR_SIZE, size_large);
}
static int sc_truncate_zero(void)
{
	return setattr(L(1, "big"), FUSE_SET_ATTR_SIZE, size_zero);
}
static int sc_fallocate(void)
{
	return REQ(fallocate(req, L(1, "f"), 0, 0, full ? 1 << 20 : 40000, &fi0));
}
static int sc_punch(void)
{
	return REQ(fallocate(req, L(1, "f"), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000,
			     12000, &fi0));
}
static void mode_fill(struct stat *st)
{
	st->st_mode = S_IFREG | 04751;
}
static void owner_fill(struct stat *st)
{
	st->st_uid = 7;
	st->st_gid = 8;
}
static void times_fill(struct stat *st)
{
	st->st_atim.tv_sec = 1000;
	st->st_atim.tv_nsec = 1;
	st->st_mtim.tv_sec = 2000;
	st->st_mtim.tv_nsec = 2;
}
static int sc_chmod(void)
{
	return setattr(L(1, "f"), FUSE_SET_ATTR_MODE, mode_fill);
}
static int sc_chown(void)
{
	return setattr(L(1, "f"), FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID, owner_fill);
}
static int sc_utimes(void)
{
	return setattr(L(1, "f"), FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME, times_fill);
}
static int sc_setxattr(void)
{
	return REQ(setxattr(req, L(1, "f"), "user.c", "gamma", 5, 0));
}
static int sc_setxattr_replace(void)
{
	return REQ(setxattr(req, L(1, "f"), "user.a", "ALPHA!", 6, XATTR_REPLACE));
}
static int sc_setxattr_acl(void)
{
	/* an access ACL: user::rw- group::r-- other::--- (version 2) */
	static const unsigned char acl[] = {2,	  0,	0, 0, 1,    0,	  6,	0,    0xff, 0xff,
					    0xff, 0xff, 4, 0, 4,    0,	  0xff, 0xff, 0xff, 0xff,
					    0x20, 0,	0, 0, 0xff, 0xff, 0xff, 0xff};
	return REQ(
	    setxattr(req, L(1, "f"), "system.posix_acl_access", (const char *)acl, sizeof(acl), 0));
}
static int sc_removexattr(void)
{
	return REQ(removexattr(req, L(1, "f"), "user.a"));
}
static int sc_readdir(void)
{
	return REQ(readdir(req, 1, 4096, 0, &fi0));
}
static int sc_readdirplus(void)
{
	return REQ(readdirplus(req, L(1, "d"), 4096, 0, &fi0));
}
static int sc_read(void)
{
	return REQ(read(req, L(1, "f"), 30000, 0, &fi0));
}
static int sc_readlink(void)
{
	return REQ(readlink(req, L(1, "s")));
}
static int sc_getxattr(void)
{
	return REQ(getxattr(req, L(1, "f"), "user.b", 100));
}
static int sc_listxattr(void)
{
	return REQ(listxattr(req, L(1, "f"), 100));
}
static int sc_statfs(void)
{
	return REQ(statfs(req, 1));
}
static int sc_fsync(void)
{
	uint64_t f = L(1, "f");
	TRY(write(req, f, "sync me", 7, 50, &fi0));
	return REQ(fsync(req, f, 0, &fi0));
}
static int sc_copy_range(void)
{
	return REQ(copy_file_range(req, L(1, "f"), 0, &fi0, L(1, "big"), 100, &fi0, 10000, 0));
}

/* Scenario kinds: a request run on the open store, the store's open, the
 * store's creation, the store's close after a write. */
enum { REQUEST, OPEN, CREATE, CLOSE };
enum { READ = 1, PREFIX = 2, NOCHANGE = 4 };

static const struct scenario {
	const char *name;
	int (*fn)(void);
	int type;
	bool orphans; /* from the template with an orphan (a crash) */
	int reply;    /* READ: compare the reply with the fault-free one;
		       * PREFIX: a shorter one is right too (readdir);
		       * NOCHANGE: may leave the tree as it was (statfs) */
} scenarios[] = {
#define S(n, ...)                                                                                  \
	{                                                                                          \
#n, sc_##n, REQUEST, false, __VA_ARGS__ + 0                                        \
	}
    S(create),
    S(mkdir),
    S(mknod),
    S(mknod_dev),
    S(symlink),
    S(link),
    S(unlink),
    S(unlink_data),
    S(unlink_forget),
    S(unlink_link),
    S(rmdir),
    S(rename),
    S(rename_over),
    S(rename_dir),
    S(rename_dir_over),
    S(exchange),
    S(write_small),
    S(write_large),
    S(write_sparse),
    S(truncate_down),
    S(truncate_up),
    S(truncate_zero),
    S(fallocate),
    S(punch),
    S(chmod),
    S(chown),
    S(utimes),
    S(setxattr),
    S(setxattr_replace),
    S(setxattr_acl),
    S(removexattr),
    S(fsync),
    S(copy_range),
    S(statfs, NOCHANGE),
    S(readdir, 3),
    S(readdirplus, 3),
    S(read, 1),
    S(readlink, 1),
    S(getxattr, 1),
    S(listxattr, 1),
#undef S
    {"open", NULL, OPEN, false, 0},
    {"open_orphans", NULL, OPEN, true, 0},
    {"create_store", NULL, CREATE, false, 0},
    {"close", sc_write_small, CLOSE, false, 0},
};

struct outcome {
	int err;
	uint64_t hash;
	size_t len;
	char *tree;
	int fsck;
};

/* Close the store, check it, reopen it and take its tree. */
static void settle(struct outcome *o)
{
	dbfs_close(fs);
	fs = NULL;
	o->fsck = fsck(work, false);
	must_open(work);
	o->tree = dump();
	dbfs_close(fs);
	fs = NULL;
	if (full && fsck(work, true))
		FAIL("strict fsck after a clean reopen");
}

static bool dir_empty(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	bool empty = true;
	if (!dd)
		return false;
	while ((e = readdir(dd)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	closedir(dd);
	return empty;
}

/* One run of a scenario; kind < 0: no fault. Returns the number of calls
 * of the armed kind it made. */
static long run(const struct scenario *s, int kind, long n, bool persist, struct outcome *o)
{
	long calls = 0;
	memset(o, 0, sizeof(*o));
	if (s->type == CREATE) {
		rm_rf(work);
		if (mkdir(work, 0755))
			die("mkdir");
	} else {
		copy_store(s->orphans ? tmpl_orphans : tmpl, work);
	}
	if (s->type == OPEN || s->type == CREATE) {
		if (kind >= 0)
			fault_arm(kind, n, persist, work);
		int rc = open_store(work, s->type == CREATE);
		calls = kind >= 0 ? fault_disarm() : 0;
		o->err = -rc;
		if (rc && s->type == CREATE && !dir_empty(work))
			FAIL("%s: failed create (%s) left files in the store directory", s->name,
			     strerror(-rc));
		if (rc && s->type == CREATE) {
			o->tree = strdup("(no store)\n");
			return calls;
		}
		if (rc && fsck(work, false))
			FAIL("%s: %s fault at %ld: the store fails fsck after the failed open",
			     s->name, kind >= 0 ? fault_kind_name[kind] : "no", n);
		if (rc)
			must_open(work);
	} else {
		must_open(work);
		if (kind >= 0)
			fault_arm(kind, n, persist, work);
		if (s->type == CLOSE) {
			fault_disarm();
			o->err = s->fn();
			fault_arm(kind >= 0 ? kind : 0, kind >= 0 ? n : 0, persist, work);
			dbfs_close(fs);
			fs = NULL;
			calls = fault_disarm();
			must_open(work);
		} else {
			o->err = s->fn();
			o->hash = fake_reply.hash;
			o->len = fake_reply.len;
			calls = kind >= 0 ? fault_disarm() : 0;
		}
	}
	settle(o);
	return calls;
}

static bool plausible(int e)
{
	return e == EIO || e == ENOMEM || e == ENOSPC || e == EAGAIN || e == EINVAL || e == EBUSY;
}

static void check_scenario(const struct scenario *s)
{
	struct outcome after, o;
	char *before_tree;

	/* before: the template as it is; after: the operation without faults */
	copy_store(s->orphans ? tmpl_orphans : tmpl, work);
	if (s->type == CREATE) {
		before_tree = strdup("(no store)\n");
	} else {
		must_open(work);
		before_tree = dump();
		dbfs_close(fs);
		fs = NULL;
	}
	/* a scenario of several requests: each may be the one that fails,
	 * so each tree after the first k requests is "before" for the next */
	char *partial[8];
	long nreq;
	req_count = 0;
	req_limit = LONG_MAX;
	run(s, -1, 0, false, &after);
	nreq = req_count;
	for (long k = 1; k < nreq && k < 8; k++) {
		struct outcome p;
		req_count = 0;
		req_limit = k;
		run(s, -1, 0, false, &p);
		partial[k] = p.tree;
	}
	req_limit = -1;
	if (after.err)
		FAIL("%s: fails without a fault: %s", s->name, strerror(after.err));
	if (after.fsck)
		FAIL("%s: fsck %d without a fault", s->name, after.fsck);
	if (!s->reply && s->type != OPEN && strcmp(after.tree, before_tree) == 0)
		FAIL("%s changed nothing", s->name);

	for (int persist = 0; persist <= (full ? 1 : 0); persist++) {
		for (int kind = 0; kind < FAULT_KINDS; kind++) {
			long n, calls;
			for (n = 1;; n += fault_stride()) {
				calls = run(s, kind, n, persist, &o);
				const char *how = persist ? "persistent" : "once";
				if (calls < n) { /* no fault: the run is the fault-free one */
					if (o.err || strcmp(o.tree, after.tree))
						FAIL("%s: %s, no fault hit, not as without faults",
						     s->name, fault_kind_name[kind]);
					free(o.tree);
					break;
				}
				points++;
				points_kind[kind]++;
				bool is_before = strcmp(o.tree, before_tree) == 0;
				for (long k = 1; k < nreq && k < 8; k++)
					is_before |= strcmp(o.tree, partial[k]) == 0;
				bool is_after = strcmp(o.tree, after.tree) == 0;
				if (o.fsck)
					FAIL("%s: %s fault %s at %ld: fsck status %d", s->name,
					     fault_kind_name[kind], how, n, o.fsck);
				if (o.err == 0 && !is_after) {
					FAIL("%s: %s fault %s at %ld: success but tree not as "
					     "after:\n--- got\n%s--- after\n%s",
					     s->name, fault_kind_name[kind], how, n, o.tree,
					     after.tree);
				} else if (o.err && !is_before && !is_after) {
					FAIL("%s: %s fault %s at %ld: error %s and the tree is "
					     "neither before nor after:\n--- got\n%s--- before\n%s"
					     "--- after\n%s",
					     s->name, fault_kind_name[kind], how, n,
					     strerror(o.err), o.tree, before_tree, after.tree);
				} else if (o.err && !plausible(o.err)) {
					FAIL("%s: %s fault %s at %ld: implausible error %s",
					     s->name, fault_kind_name[kind], how, n,
					     strerror(o.err));
				} else if (o.err && is_after && !is_before) {
					after_on_error++;
					/* An error for an operation that happened: the
					 * caller retries and gets EEXIST. Only a persistent
					 * fault may leave no way around it, and a failed
					 * flush after the meta page was written (the commit
					 * is on disk or not: the store goes read-only). */
					if (!persist && kind != FAULT_WRITE)
						FAIL("%s: %s fault once at %ld: error %s, yet the "
						     "operation was done",
						     s->name, fault_kind_name[kind], n,
						     strerror(o.err));
				}
				if ((s->reply & READ) && o.err == 0 &&
				    ((s->reply & PREFIX) ? o.len > after.len
							 : o.hash != after.hash))
					FAIL("%s: %s fault %s at %ld: success with a different "
					     "reply",
					     s->name, fault_kind_name[kind], how, n);
				free(o.tree);
				if (failures > 20)
					exit(1);
			}
			printf("%-18s %-5s %-10s N = 1..%ld%s\n", s->name, fault_kind_name[kind],
			       persist ? "persistent" : "once", calls, fault_stride_note());
		}
	}
	for (long k = 1; k < nreq && k < 8; k++)
		free(partial[k]);
	free(after.tree);
	free(before_tree);
}

/* After a write of the store failed (EIO), the store is read-only with a
 * reason until it is closed (dbfs/health.c); a reopen is healthy. */
static void check_health(void)
{
	char why[160] = "";
	uint64_t ino;
	/* durability=full: a commit writes and flushes, so the injected error
	 * meets the commit itself (with normal, a store in memory never
	 * flushes and one on a disk meets it at its next durable point) */
	bool was_full = full;
	full = true;
	copy_store(tmpl, work);
	must_open(work);
	if (dbfs_health(fs, why, sizeof(why)))
		FAIL("health: a fresh store is unhealthy: %s", why);
	fault_arm(FAULT_WRITE, 1, true, work);
	int e = REQ(mkdir(req, 1, "x", 0755));
	fault_disarm();
	if (e != EIO)
		FAIL("health: mkdir met a failed write: %s, expected EIO", strerror(e));
	if (dbfs_health(fs, why, sizeof(why)) != -EIO || !strstr(why, "commit failed"))
		FAIL("health: after the failed commit: '%s'", why);
	if ((e = REQ(mkdir(req, 1, "y", 0755))) != EROFS)
		FAIL("health: the next mkdir: %s, expected EROFS", strerror(e));
	if ((e = REQ(setxattr(req, L(1, "f"), "user.z", "z", 1, 0))) != EROFS)
		FAIL("health: the next setxattr: %s, expected EROFS", strerror(e));
	if (r_lookup(1, "f", &ino) || !ino || REQ(read(req, ino, 100, 0, &fi0)))
		FAIL("health: reads do not go on");
	/* the kernel forgets inodes: housekeeping keeps them for the next
	 * open instead of failing every second */
	ops->forget(fake_req(fs), ino, 100);
	/* ... and says -EIO once, for the owner to log the reason */
	if ((e = dbfs_tick(fs)) != -EIO)
		FAIL("health: the first dbfs_tick after the error: %s, expected EIO", strerror(-e));
	if ((e = dbfs_tick(fs)))
		FAIL("health: dbfs_tick on the read-only store: %s", strerror(-e));
	dbfs_close(fs);
	fs = NULL;
	if (fsck(work, true))
		FAIL("health: fsck after the failed commit");
	must_open(work);
	if (dbfs_health(fs, why, sizeof(why)) || REQ(mkdir(req, 1, "x", 0755)))
		FAIL("health: a reopened store is still read-only");
	dbfs_close(fs);
	fs = NULL;
	/* a failed fsync too: durable points are flushes of a store on a
	 * disk (one in memory makes none), so this half runs on /var/tmp */
	full = false;
	char disk[300];
	snprintf(disk, sizeof(disk), "/var/tmp/mfs-fault-health-XXXXXX");
	if (!mkdtemp(disk))
		die("mkdtemp /var/tmp");
	if (open_store(disk, true))
		die("create a store in /var/tmp");
	if (REQ(mkdir(req, 1, "z", 0755)))
		FAIL("health: mkdir before the fsync");
	fault_arm(FAULT_WRITE, 1, true, disk);
	e = REQ(fsync(req, 1, 0, &fi0));
	fault_disarm();
	if (e != EIO || dbfs_health(fs, why, sizeof(why)) != -EIO || !strstr(why, "flush failed"))
		FAIL("health: a failed fsync: %s, '%s'", strerror(e), why);
	if ((e = REQ(mkdir(req, 1, "w", 0755))) != EROFS)
		FAIL("health: mkdir after a failed fsync: %s, expected EROFS", strerror(e));
	dbfs_close(fs);
	fs = NULL;
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", disk);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", disk);
	full = was_full;
	printf("health: EIO, then EROFS, reads go on, reopen is writable\n");
}

int main(int argc, char **argv)
{
	int first = 2;
	if (argc < 2) {
		fprintf(stderr, "usage: %s FSCK [--full] [SCENARIO...]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	fsck_path = argv[1];
	if (argc > 2 && strcmp(argv[2], "--full") == 0) {
		full = true;
		first = 3;
	}
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (char)(i * 7 + i / 4093);
	ops = dbfs_fuse_ops();
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(base, sizeof(base), "%s/mfs-fault-XXXXXX", tmp);
	if (!mkdtemp(base))
		die("mkdtemp");
	snprintf(tmpl, sizeof(tmpl), "%s/template", base);
	snprintf(work, sizeof(work), "%s/work", base);
	if (mkdir(tmpl, 0755) || open_store(tmpl, true))
		die("template store");
	make_template();
	dbfs_close(fs);
	fs = NULL;
	if (fsck(tmpl, true))
		die("template fails fsck");
	/* the template as a crash leaves it with /f unlinked while open: /f is
	 * an orphan that the next open reclaims */
	snprintf(tmpl_orphans, sizeof(tmpl_orphans), "%s/orphans", base);
	copy_store(tmpl, work);
	must_open(work);
	L(1, "f");
	if (REQ(unlink(req, 1, "f")))
		die("orphan template");
	copy_store(work, tmpl_orphans);
	dbfs_close(fs);
	fs = NULL;
	if (fsck(tmpl_orphans, false) || !fsck(tmpl_orphans, true))
		die("orphan template: no orphan, or damaged");

	check_health();
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		bool pick = first >= argc;
		for (int a = first; a < argc; a++)
			pick |= strcmp(argv[a], scenarios[i].name) == 0;
		if (pick)
			check_scenario(&scenarios[i]);
	}
	rm_rf(base);
	printf("%ld fault points (lmdb %ld, alloc %ld, write %ld)%s; %ld errors left the "
	       "operation done; %d failures\n",
	       points, points_kind[FAULT_LMDB], points_kind[FAULT_ALLOC], points_kind[FAULT_WRITE],
	       fault_stride_note(), after_on_error, failures);
	return failures ? 1 : 0;
}
