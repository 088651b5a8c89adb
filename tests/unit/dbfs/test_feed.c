/*
 * Unit tests of the change feed (dbfs/feed.h) through the dbfs API, on a
 * temporary store: every operation yields exactly its event with the right
 * fields, sequence numbers are dense across restarts, replay by sequence
 * number, time and from the oldest, durable subscriptions resume after a
 * restart at their last ack, gaps are explicit records, retention bounds
 * by events, bytes and age, idle subscriptions expire, a position of
 * another store is refused, feed=off has no feed, a format-2 store is
 * upgraded with paths for what it held, the queue's tables pass
 * mfsq_check, and a child killed with SIGKILL during a burst leaves no lost
 * and no invented event.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

static char dir[256];
static struct dbfs *fs;
static const struct dbfs_cred cred = {1000, 1000, 022};

static void open_with(const char *opts)
{
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	o.initial_map_size = 8 << 20;
	if (opts) {
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", opts);
		for (char *save, *kv = strtok_r(buf, ",", &save); kv;
		     kv = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(kv, '=');
			if (eq)
				*eq++ = 0;
			ck_assert_int_eq(dbfs_option_parse(&o, kv, eq, err, sizeof(err)), 0);
		}
	}
	int rc = dbfs_open(dir, &o, &fs, err, sizeof(err));
	ck_assert_msg(rc == 0, "dbfs_open: %d %s", rc, err);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/dbfs-feed-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	open_with(NULL);
	/* as a FUSE request's header would say (fuse_io.c) */
	dbfs_tls_caller = (struct dbfs_caller){1234, 5678, 4242};
	dbfs_tls_caller_set = 1;
}

static void teardown(void)
{
	dbfs_close(fs);
	fs = NULL;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	dbfs_tls_caller_set = 0;
}

static void reopen(const char *opts)
{
	dbfs_close(fs);
	open_with(opts);
}

/* ---- operations through the group commit ---- */

struct op {
	int kind;
	uint64_t a, b;
	const char *n1, *n2;
	uint32_t mode;
	uint64_t off, len;
	unsigned flags;
	uint64_t ino;
};
enum { MKNOD, UNLINK, RMDIR, RENAME, LINK, WRITE, WRITE2, SETATTR, FALLOC, SETX, REMX, SYMLINK,
       RENAME_MKNOD_FAIL };

static int op_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	struct op *o = arg;
	struct dbfs_inode in;
	static const char data[8192] = "x";
	switch (o->kind) {
	case MKNOD:
		return dbfs_op_mknod(f, txn, &cred, o->a, o->n1, o->mode, 0, NULL, &o->ino, &in);
	case SYMLINK:
		return dbfs_op_mknod(f, txn, &cred, o->a, o->n1, S_IFLNK | 0777, 0, o->n2, &o->ino,
				     &in);
	case UNLINK:
		return dbfs_op_unlink(f, txn, o->a, o->n1, 0);
	case RMDIR:
		return dbfs_op_unlink(f, txn, o->a, o->n1, 1);
	case RENAME:
		return dbfs_op_rename(f, txn, o->a, o->n1, o->b, o->n2, o->flags);
	case LINK:
		return dbfs_op_link(f, txn, o->ino, o->a, o->n1, &in);
	case WRITE:
		return dbfs_op_write(f, txn, o->ino, o->off, data, o->len, 0);
	case WRITE2: { /* two writes in one transaction: one event */
		int rc = dbfs_op_write(f, txn, o->ino, o->off, data, o->len, 0);
		return rc ? rc
			  : dbfs_op_write(f, txn, o->ino, o->off + 2 * o->len, data, o->len, 0);
	}
	case SETATTR: {
		struct stat st = {0};
		st.st_size = (off_t)o->off;
		st.st_mode = o->mode;
		return dbfs_op_setattr(f, txn, o->ino, &st, o->flags, &in);
	}
	case FALLOC:
		return dbfs_op_fallocate(f, txn, o->ino, (int)o->flags, o->off, o->len);
	case SETX:
		return dbfs_op_setxattr(f, txn, o->ino, o->n1, "v", 1, 0);
	case REMX:
		return dbfs_op_removexattr(f, txn, o->ino, o->n1);
	case RENAME_MKNOD_FAIL: { /* rename a/n1 to a/n2, create n2/new, then a store failure */
		int rc = dbfs_op_rename(f, txn, o->a, o->n1, o->a, o->n2, 0);
		uint64_t ino;
		if (!rc)
			rc = dbfs_op_mknod(f, txn, &cred, o->b, "new", S_IFREG | 0644, 0, NULL,
					   &ino, &in);
		return rc ? rc : EIO; /* not a refusal: the batch is aborted */
	}
	}
	return -EINVAL;
}

static int run(struct op o, uint64_t *ino)
{
	int rc = dbfs_write(fs, op_fn, &o);
	if (ino)
		*ino = o.ino;
	return rc;
}

static uint64_t mk(uint64_t parent, const char *name, uint32_t mode)
{
	uint64_t ino;
	ck_assert_int_eq(
	    run((struct op){.kind = MKNOD, .a = parent, .n1 = name, .mode = mode}, &ino), 0);
	return ino;
}

/* ---- reading ---- */

static struct dbfs_feed_reader *rd_open(const char *sub, const struct dbfs_feed_start *st)
{
	struct dbfs_feed_reader *r;
	int rc = dbfs_feed_open(fs, sub, st, &r);
	ck_assert_msg(rc == 0, "dbfs_feed_open: %d", rc);
	return r;
}

/* Read exactly one event (bounded wait) and check there is no second. */
static struct dbfs_event one(struct dbfs_feed_reader *r)
{
	struct dbfs_event ev[4];
	size_t n;
	ck_assert_int_eq(dbfs_feed_read(r, ev, 4, &n, 5000), 0);
	ck_assert_uint_eq(n, 1);
	struct dbfs_event e = ev[0];
	/* strings stay valid until the next read: copy what is checked */
	static char p[3][4096];
	memcpy(p[0], e.path, e.path_len);
	p[0][e.path_len] = 0;
	e.path = p[0];
	if (e.new_path) {
		memcpy(p[1], e.new_path, e.new_path_len);
		p[1][e.new_path_len] = 0;
		e.new_path = p[1];
	}
	if (e.xattr) {
		memcpy(p[2], e.xattr, e.xattr_len);
		p[2][e.xattr_len] = 0;
		e.xattr = p[2];
	}
	size_t m;
	ck_assert_int_eq(dbfs_feed_read(r, ev, 4, &m, 0), -EAGAIN);
	return e;
}

static void path_is(const struct dbfs_event *e, const char *p)
{
	ck_assert_uint_eq(e->path_len, strlen(p));
	ck_assert_msg(!memcmp(e->path, p, e->path_len), "path %.*s, expected %s", (int)e->path_len,
		      e->path, p);
}

/* A write to `ino` names the path `p` (its first name, format 5). */
static void write_names(struct dbfs_feed_reader *r, uint64_t ino, const char *p)
{
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = ino, .len = 1}, NULL), 0);
	struct dbfs_event e = one(r);
	path_is(&e, p);
}

static void op_ok(struct dbfs_feed_reader *r, struct op o, const char *p, const char *np)
{
	ck_assert_int_eq(run(o, NULL), 0);
	if (!r)
		return;
	struct dbfs_event e = one(r);
	path_is(&e, p);
	if (np) {
		ck_assert_uint_eq(e.new_path_len, strlen(np));
		ck_assert(!memcmp(e.new_path, np, e.new_path_len));
	}
}

/* Read everything there is now, up to `max` events into a copy (seq, op). */
static size_t drain(struct dbfs_feed_reader *r, uint64_t *seqs, unsigned *ops, size_t max)
{
	struct dbfs_event ev[64];
	size_t n, total = 0;
	while (dbfs_feed_read(r, ev, 64, &n, 0) == 0) {
		for (size_t i = 0; i < n && total < max; i++, total++) {
			seqs[total] = ev[i].seq;
			if (ops)
				ops[total] = ev[i].op;
		}
	}
	return total;
}

static int run_fsck(const char *opt);

/* ---- tests ---- */

START_TEST(test_record_codec)
{
	char path[300], np[300];
	struct dbfs_event e = {.op = DBFS_EV_RENAME,
			       .flags = 3,
			       .ino = 7,
			       .parent = 1,
			       .new_parent = 9,
			       .time_ns = 123456789,
			       .uid = 1,
			       .gid = 2,
			       .pid = 3,
			       .mode = S_IFREG | 0644,
			       .size = 99,
			       .off = 5,
			       .len = 6,
			       .attr_mask = 8,
			       .nlink = 2};
	/* every byte value but NUL and '/' in a name */
	size_t k = 0;
	path[k++] = '/';
	for (int c = 1; c < 256; c++)
		if (c != '/')
			path[k++] = (char)c;
	e.path = path;
	e.path_len = k;
	memcpy(np, "/a\nb/c d", 8);
	e.new_path = np;
	e.new_path_len = 8;
	e.xattr = "user.x";
	e.xattr_len = 6;
	unsigned char buf[1024];
	size_t len = dbfs_ev_encode(&e, buf);
	ck_assert_uint_eq(len, dbfs_ev_rec_size(&e));
	struct dbfs_event d = {.seq = 42};
	ck_assert_int_eq(dbfs_ev_decode(buf, len, &d), 0);
	ck_assert_uint_eq(d.seq, 42);
	ck_assert_uint_eq(d.op, e.op);
	ck_assert_uint_eq(d.flags, 3);
	ck_assert_uint_eq(d.ino, 7);
	ck_assert_uint_eq(d.new_parent, 9);
	ck_assert_uint_eq(d.time_ns, 123456789);
	ck_assert_uint_eq(d.pid, 3);
	ck_assert_uint_eq(d.nlink, 2);
	ck_assert_uint_eq(d.path_len, k);
	ck_assert(!memcmp(d.path, path, k));
	ck_assert(!memcmp(d.new_path, np, 8));
	ck_assert(!memcmp(d.xattr, "user.x", 6));
	/* damaged records are refused */
	for (size_t cut = 0; cut < len; cut++)
		ck_assert_int_eq(dbfs_ev_decode(buf, cut, &d), -EBADMSG);
	buf[1] = DBFS_EV_GAP; /* never stored */
	ck_assert_int_eq(dbfs_ev_decode(buf, len, &d), -EBADMSG);
	buf[1] = DBFS_EV_RENAME;
	buf[DBFS_EV_REC_FIXED] = 'x'; /* a path not from the root */
	ck_assert_int_eq(dbfs_ev_decode(buf, len, &d), -EBADMSG);
	for (unsigned op = 1; op <= DBFS_EV_OP_MAX; op++)
		ck_assert_uint_eq(
		    dbfs_ev_op_parse(dbfs_ev_op_name(op), strlen(dbfs_ev_op_name(op))), op);
	ck_assert_ptr_null(dbfs_ev_op_name(0));
	ck_assert_str_eq(dbfs_ev_op_name(DBFS_EV_REMOVEXATTR), "removexattr");
}
END_TEST

/* One table: each operation, its event, its fields. */
START_TEST(test_each_op_its_event)
{
	struct dbfs_feed_reader *r = rd_open(NULL, NULL);
	struct dbfs_event e;

	uint64_t d = mk(DBFS_ROOT_INO, "d", S_IFDIR | 0755);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_MKDIR);
	ck_assert_uint_eq(e.seq, 1);
	ck_assert_uint_eq(e.ino, d);
	ck_assert_uint_eq(e.parent, DBFS_ROOT_INO);
	path_is(&e, "/d");
	ck_assert_uint_eq(e.uid, 1234);
	ck_assert_uint_eq(e.gid, 5678);
	ck_assert_uint_eq(e.pid, 4242);
	ck_assert_uint_eq(e.mode, S_IFDIR | 0755);
	ck_assert_uint_gt(e.time_ns, 1600000000ull * 1000000000ull);

	uint64_t f = mk(d, "f", S_IFREG | 0640);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_CREATE);
	ck_assert_uint_eq(e.seq, 2);
	ck_assert_uint_eq(e.ino, f);
	ck_assert_uint_eq(e.parent, d);
	ck_assert_uint_eq(e.mode, S_IFREG | 0640);
	ck_assert_uint_eq(e.nlink, 1);
	path_is(&e, "/d/f");

	mk(d, "fifo", S_IFIFO | 0600);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_MKNOD);
	ck_assert_uint_eq(e.mode & S_IFMT, S_IFIFO);
	path_is(&e, "/d/fifo");

	ck_assert_int_eq(run((struct op){.kind = SYMLINK, .a = d, .n1 = "l", .n2 = "target"}, NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_SYMLINK);
	ck_assert_uint_eq(e.size, 6);
	path_is(&e, "/d/l");

	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = f, .off = 10, .len = 100}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_WRITE);
	ck_assert_uint_eq(e.ino, f);
	ck_assert_uint_eq(e.off, 10);
	ck_assert_uint_eq(e.len, 100);
	ck_assert_uint_eq(e.size, 110);
	ck_assert_uint_eq(e.parent, d);
	path_is(&e, "/d/f");

	/* two writes in one transaction: one event spanning both */
	ck_assert_int_eq(run((struct op){.kind = WRITE2, .ino = f, .off = 200, .len = 50}, NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_WRITE);
	ck_assert_uint_eq(e.off, 200);
	ck_assert_uint_eq(e.len, 150);
	ck_assert_uint_eq(e.size, 350);

	ck_assert_int_eq(
	    run((struct op){.kind = SETATTR, .ino = f, .off = 20, .flags = DBFS_SET_SIZE}, NULL),
	    0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_TRUNCATE);
	ck_assert_uint_eq(e.size, 20);

	ck_assert_int_eq(run((struct op){.kind = SETATTR,
					 .ino = f,
					 .mode = 0600,
					 .flags = DBFS_SET_MODE | DBFS_SET_MTIME_NOW},
			     NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_SETATTR);
	ck_assert_uint_eq(e.attr_mask, DBFS_SET_MODE | DBFS_SET_MTIME_NOW);
	ck_assert_uint_eq(e.mode, S_IFREG | 0600);

	ck_assert_int_eq(run((struct op){.kind = FALLOC, .ino = f, .off = 0, .len = 4096}, NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_FALLOCATE);
	ck_assert_uint_eq(e.len, 4096);
	ck_assert_uint_eq(e.size, 4096);

	ck_assert_int_eq(run((struct op){.kind = FALLOC,
					 .ino = f,
					 .off = 0,
					 .len = 100,
					 .flags = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE},
			     NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_PUNCH);
	ck_assert_uint_eq(e.off, 0);
	ck_assert_uint_eq(e.len, 100);

	ck_assert_int_eq(run((struct op){.kind = SETX, .ino = f, .n1 = "user.k"}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_SETXATTR);
	ck_assert_str_eq(e.xattr, "user.k");
	path_is(&e, "/d/f");

	ck_assert_int_eq(run((struct op){.kind = REMX, .ino = f, .n1 = "user.k"}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_REMOVEXATTR);
	ck_assert_str_eq(e.xattr, "user.k");

	ck_assert_int_eq(
	    run((struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "hard"}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_LINK);
	ck_assert_uint_eq(e.nlink, 2);
	path_is(&e, "/d/f");
	ck_assert_str_eq(e.new_path, "/hard");
	ck_assert_uint_eq(e.new_parent, DBFS_ROOT_INO);

	/* rename: one record, both paths, across directories */
	uint64_t d2 = mk(DBFS_ROOT_INO, "e", S_IFDIR | 0755);
	one(r);
	ck_assert_int_eq(
	    run((struct op){.kind = RENAME, .a = d, .n1 = "f", .b = d2, .n2 = "g"}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_RENAME);
	ck_assert_uint_eq(e.ino, f);
	ck_assert_uint_eq(e.parent, d);
	ck_assert_uint_eq(e.new_parent, d2);
	path_is(&e, "/d/f");
	ck_assert_str_eq(e.new_path, "/e/g");
	ck_assert_uint_eq(e.flags, 0);

	/* a directory renamed: the paths below it follow */
	ck_assert_int_eq(
	    run(
		(struct op){
		    .kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "e", .b = DBFS_ROOT_INO, .n2 = "E"},
		NULL),
	    0);
	e = one(r);
	ck_assert_str_eq(e.new_path, "/E");
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = f, .off = 0, .len = 1}, NULL), 0);
	e = one(r);
	/* f has two names: "/E/g" (parent d2) and "/hard" (parent 1): the lowest
	 * parent inode names it */
	path_is(&e, "/hard");

	/* replace and exchange */
	mk(DBFS_ROOT_INO, "x", S_IFREG | 0644);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = RENAME,
					 .a = DBFS_ROOT_INO,
					 .n1 = "x",
					 .b = DBFS_ROOT_INO,
					 .n2 = "hard"},
			     NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.flags, DBFS_EVF_REPLACED);
	mk(DBFS_ROOT_INO, "y", S_IFREG | 0644);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = RENAME,
					 .a = DBFS_ROOT_INO,
					 .n1 = "y",
					 .b = DBFS_ROOT_INO,
					 .n2 = "hard",
					 .flags = RENAME_EXCHANGE},
			     NULL),
			 0);
	e = one(r);
	ck_assert_uint_eq(e.flags, DBFS_EVF_EXCHANGE);
	path_is(&e, "/y");
	ck_assert_str_eq(e.new_path, "/hard");

	/* a refused operation yields nothing; a rename onto itself neither */
	ck_assert_int_eq(run((struct op){.kind = UNLINK, .a = d, .n1 = "nope"}, NULL), -ENOENT);
	ck_assert_int_eq(
	    run(
		(struct op){
		    .kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "y", .b = DBFS_ROOT_INO, .n2 = "y"},
		NULL),
	    0);
	size_t n;
	struct dbfs_event ev[2];
	ck_assert_int_eq(dbfs_feed_read(r, ev, 2, &n, 0), -EAGAIN);

	ck_assert_int_eq(run((struct op){.kind = UNLINK, .a = DBFS_ROOT_INO, .n1 = "y"}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_UNLINK);
	path_is(&e, "/y");
	ck_assert_uint_eq(e.nlink, 0);

	ck_assert_int_eq(run((struct op){.kind = UNLINK, .a = d, .n1 = "fifo"}, NULL), 0);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = UNLINK, .a = d, .n1 = "l"}, NULL), 0);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = RMDIR, .a = DBFS_ROOT_INO, .n1 = "d"}, NULL), 0);
	e = one(r);
	ck_assert_uint_eq(e.op, DBFS_EV_RMDIR);
	ck_assert_uint_eq(e.ino, d);
	path_is(&e, "/d");
	ck_assert_uint_eq(dbfs_feed_last_seq(fs), e.seq);
	dbfs_feed_close(r);
}
END_TEST

/* Names with any byte survive; a path is "/" joined names. */
START_TEST(test_names_any_byte)
{
	struct dbfs_feed_reader *r = rd_open(NULL, NULL);
	char name[256];
	size_t k = 0;
	for (int c = 1; c < 256 && k < 255; c++)
		if (c != '/')
			name[k++] = (char)c;
	name[k] = 0;
	uint64_t d = mk(DBFS_ROOT_INO, "sp ace\nnl", S_IFDIR | 0755);
	one(r);
	mk(d, name, S_IFREG | 0644);
	struct dbfs_event e = one(r);
	char want[600];
	snprintf(want, sizeof(want), "/sp ace\nnl/%s", name);
	path_is(&e, want);
	dbfs_feed_close(r);
}
END_TEST

/* The leader keeps the path of the directory it last named a child of,
 * and of the inode it last named (feed.c): a directory renamed (its own
 * name or an ancestor's), a batch aborted after a rename, a commit of
 * another writer, and the inode's own rename, link and unlink all leave
 * no stale path behind. */
START_TEST(test_dir_path_cache)
{
	struct dbfs_feed_reader *r = rd_open(NULL, NULL);
	struct dbfs_event e;
	uint64_t a = mk(DBFS_ROOT_INO, "a", S_IFDIR | 0755);
	one(r);
	uint64_t b = mk(a, "b", S_IFDIR | 0755);
	one(r);
	mk(b, "x", S_IFREG | 0644);
	path_is((e = one(r), &e), "/a/b/x");
	mk(b, "y", S_IFREG | 0644);
	path_is((e = one(r), &e), "/a/b/y");
	/* an ancestor renamed */
	ck_assert_int_eq(run((struct op){.kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "a",
					 .b = DBFS_ROOT_INO, .n2 = "c"},
			     NULL),
			 0);
	one(r);
	mk(b, "z", S_IFREG | 0644);
	path_is((e = one(r), &e), "/c/b/z");
	/* the directory itself renamed, in a batch that then fails */
	ck_assert_int_eq(run((struct op){.kind = RENAME_MKNOD_FAIL, .a = a, .n1 = "b", .n2 = "q",
					 .b = b},
			     NULL),
			 EIO);
	mk(b, "w", S_IFREG | 0644);
	path_is((e = one(r), &e), "/c/b/w");
	/* another writer (as another process sharing the store would) renames
	 * it: only the name row matters to paths */
	MDB_txn *txn;
	struct dbfs_inode bin;
	unsigned char kb[16];
	char cb[12 + 1];
	MDB_val k = {16, kb}, v;
	ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, 0, &txn), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, txn, b, &bin), 0);
	ck_assert_uint_eq(bin.parent, a);
	dbfs_put_be64(kb, a); /* its first name: the entry in the record */
	dbfs_put_be64(kb + 8, bin.name_cookie);
	ck_assert_int_eq(mdb_get(txn, fs->db_dircook, &k, &v), 0);
	ck_assert_uint_eq(v.mv_size, sizeof(cb));
	memcpy(cb, v.mv_data, sizeof(cb));
	cb[12] = 'o';
	v.mv_data = cb;
	ck_assert_int_eq(mdb_put(txn, fs->db_dircook, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	uint64_t fv = mk(b, "v", S_IFREG | 0644);
	path_is((e = one(r), &e), "/c/o/v");
	/* an inode's own path walks up to the cached directory */
	uint64_t sub = mk(b, "sub", S_IFDIR | 0755);
	one(r);
	uint64_t f = mk(sub, "f", S_IFREG | 0644);
	path_is((e = one(r), &e), "/c/o/sub/f");
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = f, .len = 10}, NULL), 0);
	path_is((e = one(r), &e), "/c/o/sub/f");
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = fv, .len = 10}, NULL), 0);
	path_is((e = one(r), &e), "/c/o/v");
	ck_assert_int_eq(run((struct op){.kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "c",
					 .b = DBFS_ROOT_INO, .n2 = "e"},
			     NULL),
			 0);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = f, .len = 10}, NULL), 0);
	path_is((e = one(r), &e), "/e/o/sub/f");
	/* the inode's own names change: a rename, a link, an unlink */
	uint64_t g = mk(sub, "g", S_IFREG | 0644);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = RENAME, .a = sub, .n1 = "g", .b = sub, .n2 = "g2"},
			     NULL),
			 0);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = g, .len = 10}, NULL), 0);
	path_is((e = one(r), &e), "/e/o/sub/g2");
	ck_assert_int_eq(run((struct op){.kind = LINK, .ino = g, .a = DBFS_ROOT_INO, .n1 = "h"},
			     NULL),
			 0);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = UNLINK, .a = sub, .n1 = "g2"}, NULL), 0);
	one(r);
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = g, .len = 10}, NULL), 0);
	e = one(r);
	path_is(&e, "/h");
	ck_assert_uint_eq(e.parent, DBFS_ROOT_INO);
	dbfs_feed_close(r);
}
END_TEST

/* Sequence numbers are dense, never reused, across a reopen; replay. */
START_TEST(test_seq_dense_replay)
{
	for (int i = 0; i < 10; i++) {
		char n[16];
		snprintf(n, sizeof(n), "a%d", i);
		mk(DBFS_ROOT_INO, n, S_IFREG | 0644);
	}
	uint8_t uuid[16];
	dbfs_feed_uuid(fs, uuid);
	reopen(NULL);
	ck_assert_uint_eq(dbfs_feed_last_seq(fs), 10);
	uint64_t t_mid = 0;
	for (int i = 0; i < 10; i++) {
		char n[16];
		snprintf(n, sizeof(n), "b%d", i);
		if (i == 5) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			t_mid = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		}
		mk(DBFS_ROOT_INO, n, S_IFREG | 0644);
	}
	uint64_t seqs[64];
	struct dbfs_feed_start st = {.from = DBFS_FEED_OLDEST};
	struct dbfs_feed_reader *r = rd_open(NULL, &st);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 20);
	for (int i = 0; i < 20; i++)
		ck_assert_uint_eq(seqs[i], (uint64_t)i + 1);
	dbfs_feed_close(r);

	st = (struct dbfs_feed_start){.from = DBFS_FEED_SEQ, .seq = 7, .uuid = uuid};
	r = rd_open(NULL, &st);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 14);
	ck_assert_uint_eq(seqs[0], 7);
	dbfs_feed_close(r);

	st = (struct dbfs_feed_start){.from = DBFS_FEED_TIME, .time_ns = t_mid};
	r = rd_open(NULL, &st);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 5);
	ck_assert_uint_eq(seqs[0], 16);
	dbfs_feed_close(r);

	/* from the end: nothing yet, then what comes */
	st = (struct dbfs_feed_start){.from = DBFS_FEED_SEQ, .seq = 21};
	r = rd_open(NULL, &st);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 0);
	ck_assert(!dbfs_feed_ready(r));
	mk(DBFS_ROOT_INO, "c", S_IFREG | 0644);
	ck_assert(dbfs_feed_ready(r));
	ck_assert_uint_eq(one(r).seq, 21);
	dbfs_feed_close(r);
}
END_TEST

/* A position of another store (or of this one re-created) is refused with
 * its own error; one beyond the end too. */
START_TEST(test_positions_refused)
{
	struct dbfs_feed_reader *r;
	uint8_t other[16];
	dbfs_feed_uuid(fs, other);
	other[0] ^= 1;
	struct dbfs_feed_start st = {.from = DBFS_FEED_SEQ, .seq = 1, .uuid = other};
	ck_assert_int_eq(dbfs_feed_open(fs, NULL, &st, &r), -ESTALE);
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "s", &st, NULL), -ESTALE);
	st = (struct dbfs_feed_start){.from = DBFS_FEED_SEQ, .seq = 5};
	ck_assert_int_eq(dbfs_feed_open(fs, NULL, &st, &r), -ERANGE);
	ck_assert_int_eq(dbfs_feed_open(fs, "bad name", NULL, &r), -EINVAL);
	ck_assert_int_eq(dbfs_feed_open(fs, "missing", NULL, &r), -ENOENT);
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "a/b", NULL, NULL), -EINVAL);
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "s", NULL, NULL), 0);
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "s", NULL, NULL), -EEXIST);
	r = rd_open("s", NULL);
	struct dbfs_feed_reader *r2;
	ck_assert_int_eq(dbfs_feed_open(fs, "s", NULL, &r2), -EBUSY);
	ck_assert_int_eq(dbfs_feed_sub_delete(fs, "s"), -EBUSY);
	ck_assert_int_eq(dbfs_feed_ack(r, 1), -ERANGE); /* nothing given yet */
	dbfs_feed_close(r);
	ck_assert_int_eq(dbfs_feed_sub_delete(fs, "s"), 0);
	ck_assert_int_eq(dbfs_feed_sub_delete(fs, "s"), -ENOENT);

	/* the store re-created: the old UUID is refused */
	uint8_t old[16];
	dbfs_feed_uuid(fs, old);
	dbfs_close(fs);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -f '%s'/*", dir);
	ck_assert_int_eq(system(cmd), 0);
	open_with(NULL);
	st = (struct dbfs_feed_start){.from = DBFS_FEED_OLDEST, .uuid = old};
	ck_assert_int_eq(dbfs_feed_open(fs, NULL, &st, &r), -ESTALE);
}
END_TEST

static int count_sub(void *a, const struct dbfs_feed_sub_info *i)
{
	ck_assert_str_eq(i->name, "sub.1");
	++*(int *)a;
	return 0;
}

/* A durable subscription resumes after its last ack across a restart;
 * what was given and not acked is given again. */
START_TEST(test_durable_resume)
{
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "sub.1", NULL, "filter=x"), 0);
	for (int i = 0; i < 10; i++) {
		char n[16];
		snprintf(n, sizeof(n), "a%d", i);
		mk(DBFS_ROOT_INO, n, S_IFREG | 0644);
	}
	struct dbfs_feed_reader *r = rd_open("sub.1", NULL);
	uint64_t seqs[64];
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 10);
	ck_assert_int_eq(dbfs_feed_ack(r, 4), 0);
	dbfs_feed_close(r);
	struct dbfs_feed_sub_info info;
	ck_assert_int_eq(dbfs_feed_sub_get(fs, "sub.1", &info), 0);
	ck_assert_uint_eq(info.next_seq, 5);
	ck_assert_uint_eq(info.lag, 6);
	ck_assert_str_eq(info.spec, "filter=x");
	ck_assert(!info.open);

	reopen(NULL);
	r = rd_open("sub.1", NULL);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 6);
	ck_assert_uint_eq(seqs[0], 5);
	ck_assert_uint_eq(seqs[5], 10);
	ck_assert_int_eq(dbfs_feed_ack(r, 10), 0);
	dbfs_feed_close(r);
	struct dbfs_feed_start st0;
	/* an ack without a reader (another process's), then a reopen */
	ck_assert_int_eq(dbfs_feed_sub_ack(fs, "sub.1", 11), -ERANGE);
	ck_assert_int_eq(dbfs_feed_sub_ack(fs, "nope", 3), -ENOENT);
	st0 = (struct dbfs_feed_start){.from = DBFS_FEED_SEQ, .seq = 3};
	r = rd_open("sub.1", &st0);
	ck_assert_int_eq(dbfs_feed_ack(r, 3), -ERANGE); /* not given yet */
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 8);
	ck_assert_int_eq(dbfs_feed_ack(r, 3), 0);
	ck_assert_int_eq(dbfs_feed_sub_ack(fs, "sub.1", 8), 0); /* while it is open */
	dbfs_feed_close(r);
	ck_assert_int_eq(dbfs_feed_sub_get(fs, "sub.1", &info), 0);
	ck_assert_uint_eq(info.next_seq, 9);
	reopen(NULL);
	r = rd_open("sub.1", NULL);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 2);
	ck_assert_uint_eq(seqs[0], 9);
	dbfs_feed_close(r);

	/* a replay moves it */
	struct dbfs_feed_start st = {.from = DBFS_FEED_SEQ, .seq = 2};
	r = rd_open("sub.1", &st);
	ck_assert_uint_eq(drain(r, seqs, NULL, 64), 9);
	ck_assert_uint_eq(seqs[0], 2);
	dbfs_feed_close(r);

	int count = 0;
	ck_assert_int_eq(dbfs_feed_sub_list(fs, count_sub, &count), 0);
	ck_assert_int_eq(count, 1);
}
END_TEST

/* Retention by events: a reader behind it gets an explicit gap record,
 * counted; a durable subscription that nobody reads does not hold it. */
START_TEST(test_gap_and_retention)
{
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "idle", NULL, NULL), 0);
	struct dbfs_feed_limits l = {.max_events = 300};
	ck_assert_int_eq(dbfs_feed_set_limits(fs, &l), 0);
	ck_assert_int_eq(dbfs_feed_set_limits(fs, &(struct dbfs_feed_limits){0}), -EINVAL);
	ck_assert_int_eq(
	    dbfs_feed_set_limits(
		fs, &(struct dbfs_feed_limits){.max_events = DBFS_FEED_EVENTS_MAX + 1}),
	    -EINVAL);
	struct dbfs_options po;
	dbfs_options_init(&po);
	ck_assert_int_eq(dbfs_option_parse(&po, "feed_events", "2000001", NULL, 0), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&po, "feed_bytes", "2G", NULL, 0), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&po, "feed_age", "-1", NULL, 0), -EINVAL);
	ck_assert_int_eq(dbfs_option_parse(&po, "feed_events", "0", NULL, 0), 0);
	for (int i = 0; i < 1000; i++) {
		char n[16];
		snprintf(n, sizeof(n), "f%d", i);
		mk(DBFS_ROOT_INO, n, S_IFREG | 0644);
	}
	ck_assert_int_eq(dbfs_tick(fs), 0);
	struct dbfs_feed_stats st;
	ck_assert_int_eq(dbfs_feed_stats(fs, &st), 0);
	ck_assert_uint_eq(st.next_seq, 1001);
	ck_assert_uint_eq(st.first_seq, 701);
	ck_assert_uint_eq(st.events, 300);
	ck_assert_uint_eq(st.trimmed, 700);
	ck_assert_uint_gt(st.bytes, 300 * 100);

	struct dbfs_feed_start from1 = {.from = DBFS_FEED_SEQ, .seq = 1};
	struct dbfs_feed_reader *r = rd_open(NULL, &from1);
	struct dbfs_event ev[8];
	size_t n;
	ck_assert_int_eq(dbfs_feed_read(r, ev, 8, &n, 0), 0);
	ck_assert_uint_ge(n, 2);
	ck_assert_uint_eq(ev[0].op, DBFS_EV_GAP);
	ck_assert_uint_eq(ev[0].seq, 1);
	ck_assert_uint_eq(ev[0].gap_next, 701);
	ck_assert_uint_eq(ev[1].seq, 701);
	uint64_t seqs[400];
	ck_assert_uint_eq(drain(r, seqs, NULL, 400), 300 - (n - 1));
	dbfs_feed_close(r);

	/* the idle subscription: behind retention, told with a gap */
	struct dbfs_feed_sub_info info;
	ck_assert_int_eq(dbfs_feed_sub_get(fs, "idle", &info), 0);
	ck_assert_uint_eq(info.next_seq, 701);
	ck_assert_uint_eq(info.lost, 700);
	r = rd_open("idle", NULL);
	ck_assert_int_eq(dbfs_feed_read(r, ev, 8, &n, 0), 0);
	ck_assert_uint_eq(ev[0].op, DBFS_EV_GAP);
	ck_assert_uint_eq(ev[0].seq, 1);
	ck_assert_uint_eq(ev[0].gap_next, 701);
	ck_assert_int_eq(dbfs_feed_ack(r, ev[n - 1].seq), 0);
	dbfs_feed_close(r);
	ck_assert_int_eq(dbfs_feed_sub_get(fs, "idle", &info), 0);
	ck_assert_uint_eq(info.gaps, 1);

	/* the queue dropped the old subshards: more events and ticks keep it
	 * within the bound plus a subshard, and its tables stay consistent */
	l.max_events = 100;
	ck_assert_int_eq(dbfs_feed_set_limits(fs, &l), 0);
	ck_assert_int_eq(dbfs_tick(fs), 0);
	ck_assert_int_eq(dbfs_feed_stats(fs, &st), 0);
	ck_assert_uint_eq(st.first_seq, 901);
	MDB_txn *t;
	uint64_t problems = 99;
	ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
	ck_assert_int_eq(mfsq_check(t, DBFS_FEED_QUEUE_SHARDED, NULL, NULL, &problems), 0);
	dbfs_read_end(fs, t);
	ck_assert_uint_eq(problems, 0);
}
END_TEST

/* Retention by bytes and by age. */
START_TEST(test_retention_bytes_age)
{
	struct dbfs_feed_limits l = {.max_bytes = 2000 * 1}; /* a few dozen records */
	ck_assert_int_eq(dbfs_feed_set_limits(fs, &l), 0);
	for (int i = 0; i < 2000; i++) {
		char n[16];
		snprintf(n, sizeof(n), "f%d", i);
		mk(DBFS_ROOT_INO, n, S_IFREG | 0644);
	}
	ck_assert_int_eq(dbfs_tick(fs), 0);
	struct dbfs_feed_stats st;
	ck_assert_int_eq(dbfs_feed_stats(fs, &st), 0);
	/* the newest block is kept whole: at most the bound plus one block */
	ck_assert_uint_le(st.events, DBFS_FEED_BLOCK);
	ck_assert_uint_gt(st.first_seq, 1);

	l = (struct dbfs_feed_limits){.max_age_sec = 1};
	ck_assert_int_eq(dbfs_feed_set_limits(fs, &l), 0);
	/* bounded wait: the events age past a second */
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(dbfs_tick(fs), 0);
		ck_assert_int_eq(dbfs_feed_stats(fs, &st), 0);
		if (st.events == 0)
			break;
		usleep(100000);
	}
	ck_assert_uint_eq(st.events, 0);
	ck_assert_uint_eq(st.first_seq, 2001);
}
END_TEST

/* An idle durable subscription expires. */
START_TEST(test_idle_expiry)
{
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "old", NULL, NULL), 0);
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "busy", NULL, NULL), 0);
	struct dbfs_feed_reader *busy = rd_open("busy", NULL);
	struct dbfs_feed_limits l;
	dbfs_feed_get_limits(fs, &l);
	l.sub_idle_sec = 1;
	ck_assert_int_eq(dbfs_feed_set_limits(fs, &l), 0);
	struct dbfs_feed_stats st;
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(dbfs_tick(fs), 0);
		ck_assert_int_eq(dbfs_feed_stats(fs, &st), 0);
		if (st.subs_expired)
			break;
		usleep(100000);
	}
	ck_assert_uint_eq(st.subs_expired, 1);
	ck_assert_uint_eq(st.subs, 1); /* the open one stays */
	struct dbfs_feed_sub_info info;
	ck_assert_int_eq(dbfs_feed_sub_get(fs, "old", &info), -ENOENT);
	ck_assert_int_eq(dbfs_feed_sub_get(fs, "busy", &info), 0);
	dbfs_feed_close(busy);
}
END_TEST

static _Atomic uint64_t notified;
static void on_commit(void *arg, uint64_t last)
{
	(void)arg;
	notified = last;
}

struct waiter {
	struct dbfs_feed_reader *r;
	int rc;
	uint64_t seq;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	struct dbfs_event ev[4];
	size_t n;
	w->rc = dbfs_feed_read(w->r, ev, 4, &n, -1);
	w->seq = w->rc ? 0 : ev[0].seq;
	return NULL;
}

/* A blocked read wakes on the commit; the callback is called with the seq. */
START_TEST(test_wake_and_notify)
{
	dbfs_feed_set_notify(fs, on_commit, NULL);
	struct waiter w = {rd_open(NULL, NULL), -1, 0};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &w), 0);
	usleep(50000); /* not a threshold: the read is right either way */
	mk(DBFS_ROOT_INO, "z", S_IFREG | 0644);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_eq(w.seq, 1);
	ck_assert_uint_eq(notified, 1);
	struct dbfs_event ev[1];
	size_t n;
	ck_assert_int_eq(dbfs_feed_read(w.r, ev, 1, &n, 10), -ETIMEDOUT);
	ck_assert_int_eq(dbfs_feed_read(w.r, ev, 0, &n, 0), -EINVAL);
	dbfs_feed_set_notify(fs, NULL, NULL);
	dbfs_feed_close(w.r);
}
END_TEST

/* feed=off: no feed, no events, no queue files; on again: the feed goes on
 * from where it was (no event for what happened meanwhile). */
START_TEST(test_feed_off)
{
	mk(DBFS_ROOT_INO, "before", S_IFREG | 0644);
	reopen("feed=off");
	struct dbfs_feed_reader *r;
	ck_assert(!dbfs_feed_enabled(fs));
	ck_assert_int_eq(dbfs_feed_open(fs, NULL, NULL, &r), -EOPNOTSUPP);
	ck_assert_int_eq(dbfs_feed_sub_create(fs, "s", NULL, NULL), -EOPNOTSUPP);
	struct dbfs_feed_stats st;
	ck_assert_int_eq(dbfs_feed_stats(fs, &st), -EOPNOTSUPP);
	ck_assert(!st.enabled);
	uint64_t dd = mk(DBFS_ROOT_INO, "during", S_IFDIR | 0755);
	uint64_t df = mk(dd, "inner", S_IFREG | 0644);
	ck_assert_int_eq(
	    run(
		(struct op){
		    .kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "before", .b = dd, .n2 = "moved"},
		NULL),
	    0);
	reopen(NULL);
	ck_assert_uint_eq(dbfs_feed_last_seq(fs), 1);
	/* names made while the feed was off are known again (ilink rebuilt) */
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = df, .off = 0, .len = 1}, NULL), 0);
	struct dbfs_feed_start o1 = {.from = DBFS_FEED_SEQ, .seq = 2};
	r = rd_open(NULL, &o1);
	struct dbfs_event e = one(r);
	path_is(&e, "/during/inner");
	dbfs_feed_close(r);
	dbfs_close(fs);
	fs = NULL;
	ck_assert_int_eq(run_fsck(NULL), 0);
	open_with(NULL);
	mk(DBFS_ROOT_INO, "after", S_IFREG | 0644);
	struct dbfs_feed_start o = {.from = DBFS_FEED_OLDEST};
	r = rd_open(NULL, &o);
	uint64_t seqs[8];
	ck_assert_uint_eq(drain(r, seqs, NULL, 8), 3);
	ck_assert_uint_eq(seqs[2], 3);
	dbfs_feed_close(r);

	/* a fresh store made with feed=off has no queue at all */
	dbfs_close(fs);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -f '%s'/*", dir);
	ck_assert_int_eq(system(cmd), 0);
	open_with("feed=off");
	char p[300];
	snprintf(p, sizeof(p), "%s/mfsq-feeds.acks", dir);
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_int_eq(dbfs_option_parse(&(struct dbfs_options){0}, "feed", "maybe", NULL, 0),
			 -EINVAL);
}
END_TEST

/* The feed's queue keeps no enqueue log (MFSQ_NO_LOG): its events go in
 * with the batches' transactions, and the log's 1 MiB ring would be most
 * of an idle DBFS's memory. */
START_TEST(test_no_enqueue_log)
{
	mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	reopen(NULL);
	mk(DBFS_ROOT_INO, "g", S_IFREG | 0644);
	ck_assert_uint_eq(dbfs_feed_last_seq(fs), 2);
	for (int i = 0; i < 8; i++) {
		char p[300];
		snprintf(p, sizeof(p), "%s/mfsq-feeds.log%d", dir, i);
		ck_assert_msg(access(p, F_OK) == -1, "%s exists", p);
	}
}
END_TEST

/* The closed store at `dir` opened with LMDB alone, in a write txn. */
static MDB_txn *raw_begin(MDB_env **env)
{
	MDB_txn *t;
	ck_assert_int_eq(mdb_env_create(env), 0);
	mdb_env_set_maxdbs(*env, 256);
	mdb_env_set_mapsize(*env, 8 << 20);
	ck_assert_int_eq(mdb_env_open(*env, dir, 0, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(*env, NULL, 0, &t), 0);
	return t;
}

/* Write format version `version` into the superblock (raw, in t). */
static void set_version(MDB_txn *t, uint32_t version)
{
	MDB_dbi dbi;
	MDB_val k = {2, "sb"}, v;
	struct dbfs_super sb;
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_SUPER, 0, &dbi), 0);
	ck_assert_int_eq(mdb_get(t, dbi, &k, &v), 0);
	memcpy(&sb, v.mv_data, sizeof(sb));
	sb.version = version;
	v.mv_data = &sb;
	ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
}

/* A store no other process shares writes into shard 0 of the feed's queue
 * and makes no other shard's tables (each open handle costs every
 * transaction of the store: mfsq.h, MFSQ_LAZY_SHARDS), also reopened. */
START_TEST(test_one_shard_made)
{
	mk(DBFS_ROOT_INO, "f", S_IFREG | 0644);
	reopen(NULL);
	mk(DBFS_ROOT_INO, "g", S_IFREG | 0644);
	ck_assert_uint_eq(dbfs_feed_last_seq(fs), 2);
	dbfs_close(fs);
	fs = NULL;
	MDB_env *env;
	MDB_txn *t = raw_begin(&env);
	MDB_cursor *c;
	MDB_val k, v;
	int shard0 = 0;
	ck_assert_int_eq(mdb_cursor_open(t, 1 /* MAIN_DBI */, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const char *n = k.mv_data;
		if (k.mv_size < 6 || memcmp(n, "feeds/", 6))
			continue;
		bool ok = (k.mv_size == 7 && (n[6] == 'm' || n[6] == 'x')) ||
			  (k.mv_size == 9 && !memcmp(n + 6, "d/0", 3)) ||
			  (k.mv_size > 10 && !memcmp(n + 6, "s/0/", 4));
		ck_assert_msg(ok, "table %.*s made", (int)k.mv_size, n);
		shard0 += k.mv_size > 10;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(t);
	mdb_env_close(env);
	ck_assert_int_eq(shard0, 2); /* the tail and its spare */
	open_with(NULL); /* for teardown */
}
END_TEST

/* A format-2 store (no ilink, no feed) is upgraded: events name paths of
 * what it held before. */
START_TEST(test_upgrade_from_2)
{
	uint64_t d = mk(DBFS_ROOT_INO, "old", S_IFDIR | 0755);
	uint64_t f = mk(d, "file", S_IFREG | 0644);
	dbfs_close(fs);
	fs = NULL;
	/* make it format 2: drop the tables format 3 added, set the version */
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	t = raw_begin(&env);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_INODE, 0, &dbi), 0);
	MDB_cursor *c;
	MDB_val ck, cv;
	ck_assert_int_eq(mdb_cursor_open(t, dbi, &c), 0);
	for (int rc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &ck, &cv, MDB_NEXT))
		if (ck.mv_size > 8)
			ck_assert_int_eq(mdb_cursor_del(c, 0), 0);
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_FEED, 0, &dbi), 0);
	ck_assert_int_eq(mdb_drop(t, dbi, 1), 0);
	set_version(t, 2);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);

	open_with(NULL);
	ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
	struct dbfs_feed_reader *r = rd_open(NULL, NULL);
	ck_assert_int_eq(run((struct op){.kind = WRITE, .ino = f, .off = 0, .len = 3}, NULL), 0);
	struct dbfs_event e = one(r);
	path_is(&e, "/old/file");
	ck_assert_uint_eq(e.parent, d);
	dbfs_feed_close(r);
}
END_TEST

/* Make the closed store at `dir` look as format 4 left it: records
 * without name_cookie, a name row for every entry (stale: none, and the
 * feed table's mark 'X'). */
static void make_format_4(bool stale)
{
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi ino_db, dirent_db, dbi;
	MDB_cursor *c;
	MDB_val k, v;
	t = raw_begin(&env);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_INODE, 0, &ino_db), 0);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_DIRENT, 0, &dirent_db), 0);
	ck_assert_int_eq(mdb_cursor_open(t, ino_db, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size > 8) {
			ck_assert_int_eq(mdb_cursor_del(c, 0), 0);
			continue;
		}
		char buf[sizeof(struct dbfs_inode) + DBFS_SYMLINK_MAX];
		size_t tail = v.mv_size - sizeof(struct dbfs_inode);
		memcpy(buf, v.mv_data, DBFS_INODE_V4_SIZE);
		memcpy(buf + DBFS_INODE_V4_SIZE, (char *)v.mv_data + sizeof(struct dbfs_inode), tail);
		MDB_val nv = {DBFS_INODE_V4_SIZE + tail, buf};
		unsigned char kb[8]; /* not the page's bytes: the put moves them */
		memcpy(kb, k.mv_data, 8);
		k.mv_data = kb;
		ck_assert_int_eq(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
	}
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_cursor_open(t, dirent_db, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !stale && !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct dbfs_dirent_val dv;
		unsigned char kb[16 + DBFS_NAME_MAX];
		MDB_val ik, iv = {0, NULL};
		memcpy(&dv, v.mv_data, sizeof(dv));
		dbfs_ilink_key(kb, dv.ino, dbfs_get_be64(k.mv_data), (char *)k.mv_data + 8,
			       k.mv_size - 8, &ik);
		ck_assert_int_eq(mdb_put(t, ino_db, &ik, &iv, 0), 0);
	}
	mdb_cursor_close(c);
	if (stale) {
		MDB_val x = {1, "X"}, e = {0, NULL};
		ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_FEED, 0, &dbi), 0);
		ck_assert_int_eq(mdb_put(t, dbi, &x, &e, 0), 0);
	}
	set_version(t, 4);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);
}

/* A format-4 store (a name row per entry, records without name_cookie;
 * or rows not kept, the feed was off) is upgraded in place: the records
 * grow, the first names move into them, dbfs-fsck agrees, a symlink keeps
 * its target, events name the same paths as before. A read-only open of
 * the old store reads it as it is. */
START_TEST(test_upgrade_from_4)
{
	uint64_t d = mk(DBFS_ROOT_INO, "old", S_IFDIR | 0755);
	uint64_t f = mk(d, "file", S_IFREG | 0644), l;
	ck_assert_int_eq(run((struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "hl"},
			     NULL),
			 0);
	ck_assert_int_eq(run((struct op){.kind = SYMLINK, .a = d, .n1 = "ln", .n2 = "tgt"}, &l), 0);
	for (int stale = 0; stale < 2; stale++) {
		dbfs_close(fs);
		fs = NULL;
		make_format_4(stale);
		ck_assert_int_eq(run_fsck(NULL), 0);
		open_with("ro");
		ck_assert_uint_eq(fs->sb_version, 4);
		MDB_txn *t;
		const char *tg;
		size_t tl;
		struct dbfs_inode in;
		ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
		ck_assert_int_eq(dbfs_inode_get_link(fs, t, l, &tg, &tl), 0);
		ck_assert_uint_eq(tl, 3);
		ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), 0);
		ck_assert_uint_eq(in.nlink, 2);
		mdb_txn_abort(t);
		dbfs_close(fs);
		fs = NULL;

		open_with(NULL);
		ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
		ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
		ck_assert_int_eq(dbfs_inode_get_link(fs, t, l, &tg, &tl), 0);
		ck_assert_uint_eq(tl, 3);
		ck_assert(!memcmp(tg, "tgt", 3));
		ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), 0);
		ck_assert_uint_eq(in.parent, DBFS_ROOT_INO); /* "hl": the lowest entry */
		ck_assert_uint_ne(in.name_cookie, 0);
		mdb_txn_abort(t);
		struct dbfs_feed_start o = {.from = DBFS_FEED_SEQ,
					    .seq = dbfs_feed_last_seq(fs) + 1};
		struct dbfs_feed_reader *r = rd_open(NULL, &o);
		write_names(r, f, "/hl");
		op_ok(r, (struct op){.kind = UNLINK, .a = DBFS_ROOT_INO, .n1 = "hl"}, "/hl", NULL);
		write_names(r, f, "/old/file");
		op_ok(r, (struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "hl"},
		      "/old/file", "/hl");
		dbfs_feed_close(r);
		dbfs_close(fs);
		fs = NULL;
		ck_assert_int_eq(run_fsck(NULL), 0);
		open_with(NULL);
	}
	(void)d;
}
END_TEST

/* Where an upgrade to format 5 stopped (dbfs/upgrade5.c): the phase of its
 * row "up5" (0: none; *klen: 0 at the phase's start), and how many records
 * have each size. */
static uint32_t up5_state(uint32_t *klen, size_t *v4, size_t *v5)
{
	MDB_env *env;
	MDB_txn *t = raw_begin(&env);
	MDB_dbi sdb, idb;
	MDB_cursor *c;
	MDB_val k = {3, "up5"}, v;
	uint32_t phase = 0;
	*klen = 0;
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_SUPER, 0, &sdb), 0);
	if (mdb_get(t, sdb, &k, &v) == 0) {
		memcpy(&phase, v.mv_data, sizeof(phase));
		memcpy(klen, (char *)v.mv_data + 4, sizeof(*klen));
	}
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_INODE, 0, &idb), 0);
	ck_assert_int_eq(mdb_cursor_open(t, idb, &c), 0);
	*v4 = *v5 = 0;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size == 8)
			(*(dbfs_inode_fixed_mixed(v.mv_data, v.mv_size) == 128 ? v5 : v4))++;
	mdb_cursor_close(c);
	mdb_txn_abort(t);
	mdb_env_close(env);
	return phase;
}

/* The upgrade goes in pieces (3 keys each here), each its own commit, and
 * goes on after a failure anywhere in it (a store with name rows, and one
 * without: 'X'): opens made to fail at the Nth LMDB call, N = 1, 4, 7 ...,
 * leave the store at a piece's end, half upgraded in phase 1 (records of
 * both sizes) and in phase 2, where dbfs-fsck finds it clean and a
 * read-only open reads every record and a symlink's target; each next open
 * goes on from there, and the last one ends as test_upgrade_from_4 does
 * (fsck clean, names right). An upgrade that finds the store upgraded
 * since it opened (another process of a shared store) leaves it alone. */
START_TEST(test_upgrade_in_pieces)
{
	uint64_t d = mk(DBFS_ROOT_INO, "old", S_IFDIR | 0755), f = 0, l;
	char n[32];
	for (int i = 0; i < 12; i++) {
		snprintf(n, sizeof(n), "f%02d", i);
		f = mk(i % 2 ? d : DBFS_ROOT_INO, n, S_IFREG | 0644);
	}
	ck_assert_int_eq(run((struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "hl"},
			     NULL),
			 0);
	ck_assert_int_eq(run((struct op){.kind = SYMLINK, .a = d, .n1 = "ln", .n2 = "tgt"}, &l), 0);
	for (int stale = 0; stale < 2; stale++) {
		dbfs_close(fs);
		fs = NULL;
		make_format_4(stale);
		long piece = dbfs_upgrade_piece;
		dbfs_upgrade_piece = 3;
		int failed = 0, mid[3] = {0};
		for (long nth = 1; nth < 100000; nth += 3) {
			struct dbfs_options o;
			char err[256];
			dbfs_options_init(&o);
			o.initial_map_size = 8 << 20;
			dbfs_fail_countdown = nth;
			int rc = dbfs_open(dir, &o, &fs, err, sizeof(err));
			dbfs_fail_countdown = 0;
			if (rc == 0)
				break;
			fs = NULL;
			failed++;
			size_t v4, v5;
			uint32_t klen, phase = up5_state(&klen, &v4, &v5);
			ck_assert_uint_le(phase, 2);
			if (phase == 1 && klen && v4 && v5)
				mid[1]++;
			if (phase == 2 && klen && !v4)
				mid[2]++;
			ck_assert_msg(run_fsck(NULL) == 0, "fsck after a failure at call %ld", nth);
			open_with("ro");
			MDB_txn *t;
			const char *tg;
			size_t tl;
			struct dbfs_inode in;
			ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
			ck_assert_int_eq(dbfs_inode_get_link(fs, t, l, &tg, &tl), 0);
			ck_assert_uint_eq(tl, 3);
			ck_assert(!memcmp(tg, "tgt", 3));
			ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), 0);
			ck_assert_uint_eq(in.nlink, 2);
			ck_assert_int_eq(dbfs_inode_get(fs, t, d, &in), 0);
			ck_assert(S_ISDIR(in.mode));
			mdb_txn_abort(t);
			dbfs_close(fs);
			fs = NULL;
		}
		dbfs_upgrade_piece = piece;
		ck_assert_ptr_nonnull(fs);
		ck_assert_msg(failed > 0 && mid[1] > 0 && mid[2] > 0,
			      "%d failed opens; stopped mid phase 1 %d times, mid phase 2 %d times", failed,
			      mid[1], mid[2]);
		ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
		dbfs_close(fs);
		fs = NULL;
		size_t v4, v5;
		uint32_t klen;
		ck_assert_uint_eq(up5_state(&klen, &v4, &v5), 0);
		ck_assert_uint_eq(v4, 0);
		ck_assert_int_eq(run_fsck(NULL), 0);
		open_with(NULL);
		struct dbfs_feed_start o = {.from = DBFS_FEED_SEQ,
					    .seq = dbfs_feed_last_seq(fs) + 1};
		struct dbfs_feed_reader *r = rd_open(NULL, &o);
		write_names(r, f, "/hl");
		dbfs_feed_close(r);
	}
	/* a second process that opened the shared store while it was format 4
	 * finds the upgrade done: nothing rebuilt (a rebuild would name f by
	 * "/hl", its lowest entry, again) */
	ck_assert_int_eq(run((struct op){.kind = UNLINK, .a = DBFS_ROOT_INO, .n1 = "hl"}, NULL), 0);
	ck_assert_int_eq(run((struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "hl"},
			     NULL),
			 0);
	fs->sb_version = 4;
	ck_assert_int_eq(dbfs_names_upgrade(fs), 0);
	ck_assert_uint_eq(fs->sb_version, DBFS_FORMAT_VERSION);
	MDB_txn *t;
	struct dbfs_inode in;
	ck_assert_int_eq(mdb_txn_begin(fs->env, NULL, MDB_RDONLY, &t), 0);
	ck_assert_int_eq(dbfs_inode_get(fs, t, f, &in), 0);
	ck_assert_uint_eq(in.parent, d);
	mdb_txn_abort(t);
}
END_TEST

/*
 * Crash safety: a child makes files in a burst (each create its own
 * commit, some batched by two threads) and is killed with SIGKILL; after
 * each kill the store is opened and the feed read from the start: the
 * sequence numbers are 1..N with no hole, and the set of names created by
 * the events is exactly the set of names in the root (none lost, none
 * invented), in commit order.
 */
static void *burst_thread(void *arg)
{
	int base = *(int *)arg;
	for (int i = 0;; i++) {
		char n[32];
		snprintf(n, sizeof(n), "t%d-%d", base, i);
		struct op o = {.kind = MKNOD, .a = DBFS_ROOT_INO, .n1 = n, .mode = S_IFREG | 0644};
		dbfs_write(fs, op_fn, &o);
	}
	return NULL;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int collect_root(void *arg, uint64_t cookie, uint64_t ino, uint32_t type, const char *name,
			size_t len)
{
	(void)cookie, (void)ino, (void)type;
	char ***v = arg;
	size_t n = 0;
	while ((*v)[n])
		n++;
	*v = realloc(*v, (n + 2) * sizeof(char *));
	(*v)[n] = strndup(name, len);
	(*v)[n + 1] = NULL;
	return 0;
}

START_TEST(test_crash_no_lost_no_invented)
{
	dbfs_close(fs);
	fs = NULL;
	uint64_t last = 0;
	for (int round = 0; round < 4; round++) {
		int go[2];
		ck_assert_int_eq(pipe(go), 0);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			open_with(NULL);
			int a = round * 2, b = round * 2 + 1;
			pthread_t t1, t2;
			pthread_create(&t1, NULL, burst_thread, &a);
			pthread_create(&t2, NULL, burst_thread, &b);
			/* tell the parent once this round committed events */
			for (int i = 0; i < 60000 && dbfs_feed_last_seq(fs) <= last; i++)
				usleep(1000);
			if (write(go[1], "g", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		close(go[1]);
		/* kill it once it has committed something new (bounded wait),
		 * a little later each round */
		struct pollfd pf = {.fd = go[0], .events = POLLIN};
		ck_assert_int_eq(poll(&pf, 1, 90000), 1);
		close(go[0]);
		usleep(10000 + (round * 7919 % 13) * 1000);
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);

		open_with(NULL);
		struct dbfs_feed_start o = {.from = DBFS_FEED_OLDEST};
		struct dbfs_feed_reader *r = rd_open(NULL, &o);
		char **names = calloc(1, sizeof(char *));
		size_t nev = 0, cap = 1024;
		char **created = malloc(cap * sizeof(char *));
		struct dbfs_event ev[64];
		size_t n;
		uint64_t expect = 1;
		while (dbfs_feed_read(r, ev, 64, &n, 0) == 0) {
			for (size_t i = 0; i < n; i++) {
				ck_assert_uint_eq(ev[i].seq, expect);
				expect++;
				ck_assert_uint_eq(ev[i].op, DBFS_EV_CREATE);
				if (nev == cap)
					created = realloc(created, (cap *= 2) * sizeof(char *));
				created[nev++] = strndup(ev[i].path + 1, ev[i].path_len - 1);
			}
		}
		dbfs_feed_close(r);
		ck_assert_uint_eq(expect - 1, dbfs_feed_last_seq(fs));
		ck_assert_uint_gt(expect - 1, last); /* the round committed something */
		last = expect - 1;
		MDB_txn *t;
		ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
		ck_assert_int_eq(
		    dbfs_dir_iter(fs, t, DBFS_ROOT_INO, DBFS_COOKIE_FIRST, collect_root, &names),
		    0);
		dbfs_read_end(fs, t);
		size_t nn = 0;
		while (names[nn])
			nn++;
		ck_assert_uint_eq(nn, nev);
		qsort(names, nn, sizeof(char *), name_cmp);
		qsort(created, nev, sizeof(char *), name_cmp);
		for (size_t i = 0; i < nn; i++) {
			ck_assert_str_eq(names[i], created[i]);
			free(names[i]);
			free(created[i]);
		}
		free(names);
		free(created);
		uint64_t problems = 1;
		ck_assert_int_eq(dbfs_read_begin(fs, &t), 0);
		ck_assert_int_eq(mfsq_check(t, DBFS_FEED_QUEUE_SHARDED, NULL, NULL, &problems), 0);
		dbfs_read_end(fs, t);
		ck_assert_uint_eq(problems, 0);
		dbfs_close(fs);
		fs = NULL;
	}
	open_with(NULL); /* for teardown */
}
END_TEST

/* Run dbfs-fsck (DBFS_FSCK) on the store with one option; its exit code. */
static int run_fsck(const char *opt)
{
	const char *exe = getenv("DBFS_FSCK");
	ck_assert_msg(exe != NULL, "DBFS_FSCK is not set");
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "'%s' %s '%s' >'%s.out' 2>&1", exe, opt ? opt : "", dir, dir);
	int st = system(cmd);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* An inode's first name lives in its record, its other names in rows
 * (names.c): link, unlink and rename of the first name and of an extra
 * one, rename's exchange, and the same with the feed off, each followed by
 * the paths the feed gives; dbfs-fsck finds the names right after. */
START_TEST(test_names_first_extra)
{
	struct dbfs_feed_reader *r = rd_open(NULL, NULL);
	uint64_t f = mk(DBFS_ROOT_INO, "a", S_IFREG | 0644);
	one(r);
	uint64_t d = mk(DBFS_ROOT_INO, "dir", S_IFDIR | 0755);
	one(r);
	op_ok(r, (struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "b"}, "/a", "/b");
	write_names(r, f, "/a");
	/* the first name goes: the other takes its place */
	op_ok(r, (struct op){.kind = UNLINK, .a = DBFS_ROOT_INO, .n1 = "a"}, "/a", NULL);
	write_names(r, f, "/b");
	op_ok(r, (struct op){.kind = LINK, .ino = f, .a = d, .n1 = "c"}, "/b", "/dir/c");
	write_names(r, f, "/b");
	/* the first name renamed while another exists: the lowest row is first */
	op_ok(r, (struct op){.kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "b", .b = d, .n2 = "e"},
	      "/b", "/dir/e");
	write_names(r, f, "/dir/c");
	/* an extra name renamed, then unlinked: the first stays */
	op_ok(r, (struct op){.kind = RENAME, .a = d, .n1 = "e", .b = DBFS_ROOT_INO, .n2 = "y"},
	      "/dir/e", "/y");
	write_names(r, f, "/dir/c");
	op_ok(r, (struct op){.kind = UNLINK, .a = DBFS_ROOT_INO, .n1 = "y"}, "/y", NULL);
	write_names(r, f, "/dir/c");
	/* the only name renamed */
	op_ok(r, (struct op){.kind = RENAME, .a = d, .n1 = "c", .b = DBFS_ROOT_INO, .n2 = "z"},
	      "/dir/c", "/z");
	write_names(r, f, "/z");
	/* exchange: f's only name with g's extra one */
	uint64_t g = mk(DBFS_ROOT_INO, "g", S_IFREG | 0644);
	one(r);
	op_ok(r, (struct op){.kind = LINK, .ino = g, .a = d, .n1 = "g2"}, "/g", "/dir/g2");
	op_ok(r, (struct op){.kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "z", .b = d, .n2 = "g2",
			     .flags = RENAME_EXCHANGE},
	      "/z", "/dir/g2");
	write_names(r, f, "/dir/g2");
	write_names(r, g, "/g");
	op_ok(r, (struct op){.kind = UNLINK, .a = DBFS_ROOT_INO, .n1 = "g"}, "/g", NULL);
	write_names(r, g, "/z");
	/* a directory's name (exchange with a file, then a plain rename) */
	uint64_t sub = mk(d, "sub", S_IFDIR | 0755);
	one(r);
	uint64_t in = mk(sub, "in", S_IFREG | 0644);
	one(r);
	op_ok(r, (struct op){.kind = RENAME, .a = d, .n1 = "sub", .b = DBFS_ROOT_INO, .n2 = "z",
			     .flags = RENAME_EXCHANGE},
	      "/dir/sub", "/z");
	write_names(r, in, "/z/in");
	write_names(r, g, "/dir/sub");
	op_ok(r, (struct op){.kind = RENAME, .a = DBFS_ROOT_INO, .n1 = "z", .b = d, .n2 = "s2"},
	      "/z", "/dir/s2");
	write_names(r, in, "/dir/s2/in");
	dbfs_feed_close(r);

	/* the feed off: the names are kept all the same */
	reopen("feed=off");
	op_ok(NULL, (struct op){.kind = LINK, .ino = g, .a = DBFS_ROOT_INO, .n1 = "h"}, NULL, NULL);
	op_ok(NULL, (struct op){.kind = UNLINK, .a = d, .n1 = "sub"}, NULL, NULL);
	op_ok(NULL, (struct op){.kind = RENAME, .a = d, .n1 = "g2", .b = DBFS_ROOT_INO, .n2 = "f"},
	      NULL, NULL);
	dbfs_close(fs);
	fs = NULL;
	ck_assert_int_eq(run_fsck(NULL), 0);
	open_with(NULL);
	struct dbfs_feed_start o = {.from = DBFS_FEED_SEQ, .seq = dbfs_feed_last_seq(fs) + 1};
	r = rd_open(NULL, &o);
	write_names(r, g, "/h");
	write_names(r, f, "/f");
	write_names(r, in, "/dir/s2/in");
	dbfs_feed_close(r);
}
END_TEST

/* Raw change of inode `ino`'s record (first name) or of a name row. */
static void damage_names(uint64_t ino, int what)
{
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	t = raw_begin(&env);
	ck_assert_int_eq(mdb_dbi_open(t, DBFS_DB_INODE, 0, &dbi), 0);
	unsigned char kb[16 + 2];
	MDB_val k = {8, kb}, v;
	dbfs_put_be64(kb, ino);
	if (what == 0) { /* the record's first name lost */
		struct dbfs_inode in;
		ck_assert_int_eq(mdb_get(t, dbi, &k, &v), 0);
		ck_assert_uint_eq(v.mv_size, sizeof(in));
		memcpy(&in, v.mv_data, sizeof(in));
		ck_assert_uint_ne(in.name_cookie, 0);
		in.name_cookie = 0;
		v = (MDB_val){sizeof(in), &in};
		ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
	} else if (what == 1) { /* a row naming no other entry */
		dbfs_ilink_key(kb, ino, DBFS_ROOT_INO, "zz", 2, &k);
		v = (MDB_val){0, NULL};
		ck_assert_int_eq(mdb_put(t, dbi, &k, &v, 0), 0);
	} else { /* its row lost (the one after the record) */
		MDB_cursor *c;
		ck_assert_int_eq(mdb_cursor_open(t, dbi, &c), 0);
		ck_assert_int_eq(mdb_cursor_get(c, &k, &v, MDB_SET), 0);
		ck_assert_int_eq(mdb_cursor_get(c, &k, &v, MDB_NEXT), 0);
		ck_assert_uint_gt(k.mv_size, 16);
		ck_assert_uint_eq(dbfs_get_be64(k.mv_data), ino);
		ck_assert_int_eq(mdb_cursor_del(c, 0), 0);
		mdb_cursor_close(c);
	}
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);
}

/* dbfs-fsck checks the inodes' names (and rebuilds them) and the feed's
 * queue (reports). */
START_TEST(test_fsck_feed)
{
	uint64_t d = mk(DBFS_ROOT_INO, "d", S_IFDIR | 0755), f = 0;
	for (int i = 0; i < 50; i++) {
		char n[16];
		snprintf(n, sizeof(n), "f%d", i);
		f = mk(d, n, S_IFREG | 0644);
	}
	ck_assert_int_eq(run((struct op){.kind = LINK, .ino = f, .a = DBFS_ROOT_INO, .n1 = "h2"},
			     NULL),
			 0);
	dbfs_close(fs);
	fs = NULL;
	ck_assert_int_eq(run_fsck(NULL), 0);
	for (int what = 0; what < 3; what++) {
		damage_names(what ? f : d, what);
		ck_assert_int_eq(run_fsck(NULL), 1);
		ck_assert_int_eq(run_fsck("--repair"), 4);
		ck_assert_int_eq(run_fsck(NULL), 0);
	}

	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	MDB_cursor *c;
	MDB_val k, v;
	/* a message of the queue lost: reported, not repaired */
	t = raw_begin(&env);
	ck_assert_int_eq(mdb_cursor_open(t, 1 /* MAIN_DBI */, &c), 0);
	char sub[64] = "";
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 10 && !memcmp(k.mv_data, "feeds/s/0/", 10) && k.mv_size < sizeof(sub))
			snprintf(sub, sizeof(sub), "%.*s", (int)k.mv_size, (char *)k.mv_data);
	mdb_cursor_close(c);
	ck_assert_str_ne(sub, "");
	/* the subshard holding the messages is the first; the last is the spare */
	ck_assert_int_eq(mdb_cursor_open(t, 1, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 10 && !memcmp(k.mv_data, "feeds/s/0/", 10)) {
			snprintf(sub, sizeof(sub), "%.*s", (int)k.mv_size, (char *)k.mv_data);
			break;
		}
	mdb_cursor_close(c);
	ck_assert_int_eq(mdb_dbi_open(t, sub, 0, &dbi), 0);
	unsigned char kb[8];
	dbfs_put_be64(kb, 10);
	ck_assert_int_eq(mdb_del(t, dbi, &(MDB_val){8, kb}, NULL), 0);
	ck_assert_int_eq(mdb_txn_commit(t), 0);
	mdb_env_close(env);
	ck_assert_int_eq(run_fsck(NULL), 1);
	ck_assert_int_eq(run_fsck("--repair"), 1);
	char out[600], line[600];
	snprintf(out, sizeof(out), "%s.out", dir);
	FILE *fp = fopen(out, "r");
	int seen = 0;
	while (fp && fgets(line, sizeof(line), fp))
		seen |= strstr(line, "queue feeds") && strstr(line, "change feed");
	if (fp)
		fclose(fp);
	ck_assert_msg(seen, "dbfs-fsck did not report the queue's damage");
	unlink(out);
	open_with(NULL); /* for teardown */
}
END_TEST

static Suite *feed_suite(void)
{
	Suite *s = suite_create("feed");
	TCase *tc = tcase_create("feed");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_record_codec);
	tcase_add_test(tc, test_each_op_its_event);
	tcase_add_test(tc, test_names_any_byte);
	tcase_add_test(tc, test_dir_path_cache);
	tcase_add_test(tc, test_seq_dense_replay);
	tcase_add_test(tc, test_positions_refused);
	tcase_add_test(tc, test_durable_resume);
	tcase_add_test(tc, test_gap_and_retention);
	tcase_add_test(tc, test_retention_bytes_age);
	tcase_add_test(tc, test_idle_expiry);
	tcase_add_test(tc, test_wake_and_notify);
	tcase_add_test(tc, test_feed_off);
	tcase_add_test(tc, test_no_enqueue_log);
	tcase_add_test(tc, test_one_shard_made);
	tcase_add_test(tc, test_upgrade_from_2);
	tcase_add_test(tc, test_crash_no_lost_no_invented);
	tcase_add_test(tc, test_fsck_feed);
	tcase_add_test(tc, test_names_first_extra);
	tcase_add_test(tc, test_upgrade_from_4);
	tcase_add_test(tc, test_upgrade_in_pieces);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(feed_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
