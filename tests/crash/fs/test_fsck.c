/*
 * dbfs-fsck against stores built table by table: a correct one, then one
 * broken in each way the format forbids. For each: the check's exit code,
 * then --repair's, then a check after the repair (clean unless the damage
 * is one fsck must not repair).
 *
 * Environment: DBFS_FSCK, the dbfs-fsck executable.
 */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storebuild.h"

struct ids {
	uint64_t dir, sub, big, small, empty, sym;
};

static char base[4096], store[4200], outpath[4200];

static void build_good(struct sb *s, struct ids *id)
{
	sb_create(s, store);
	id->dir = sb_mkdir(s, DBFS_ROOT_INO, "dir");
	id->big = sb_mkfile(s, id->dir, "big", 3 * DBFS_BLOCK_SIZE + 100, 1u << 1);
	id->small = sb_mkfile(s, DBFS_ROOT_INO, "small", 10, 0);
	sb_link(s, DBFS_ROOT_INO, "small-link", id->small);
	id->sub = sb_mkdir(s, id->dir, "sub");
	id->empty = sb_mkfile(s, id->sub, "empty", 0, 0);
	id->sym = sb_symlink(s, DBFS_ROOT_INO, "sym", "dir/big");
	sb_setxattr(s, id->small, "user.a", "1");
	sb_setxattr(s, id->dir, "user.b", "xyz");
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(base, sizeof(base), "%s/test_fsck.XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(store, sizeof(store), "%s/store", base);
	snprintf(outpath, sizeof(outpath), "%s/out", base);
	ck_assert_int_eq(mkdir(store, 0755), 0);
}

static void teardown(void)
{
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Run dbfs-fsck with up to two options; returns its exit code. */
static int fsck(const char *opt1, const char *opt2)
{
	const char *exe = getenv("DBFS_FSCK");
	int status;
	pid_t pid;

	ck_assert_msg(exe != NULL, "DBFS_FSCK is not set");
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		const char *argv[5];
		int n = 0, fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		argv[n++] = exe;
		if (opt1)
			argv[n++] = opt1;
		if (opt2)
			argv[n++] = opt2;
		argv[n++] = store;
		argv[n] = NULL;
		execv(exe, (char **)argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static const char *output(void)
{
	static char buf[8192];
	int fd = open(outpath, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;

	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	return buf;
}

#define EXPECT_FSCK(rc, o1, o2)                                                                    \
	do {                                                                                       \
		int got_ = fsck(o1, o2);                                                           \
		ck_assert_msg(got_ == (rc), "dbfs-fsck %s %s: exit %d, expected %d:\n%s",          \
			      (o1) ? (o1) : "", (o2) ? (o2) : "", got_, (rc), output());           \
	} while (0)

/* ---- damage, one kind per function ---- */

static void del_inode(struct sb *s, const struct ids *id)
{
	unsigned char k[16];
	struct dbfs_usage_rec u;

	sb_del(s, s->inode, k, sb_key_ino(k, id->small));
	sb_del(s, s->data, k, sb_key2(k, id->small, 0));
	sb_get_usage(s, &u);
	u.inodes--;
	u.bytes -= DBFS_ALLOC_UNIT;
	sb_put_usage(s, &u);
}

static void dirent_type(struct sb *s, const struct ids *id)
{
	struct dbfs_dirent_val dv;
	unsigned char k[8 + DBFS_NAME_MAX];

	sb_lookup(s, DBFS_ROOT_INO, "sym", &dv);
	dv.type = S_IFREG;
	sb_put(s, s->dirent, k, sb_key_name(k, DBFS_ROOT_INO, "sym"), &dv, sizeof(dv));
}

static void del_dircook(struct sb *s, const struct ids *id)
{
	struct dbfs_dirent_val dv;
	unsigned char k[16];

	sb_lookup(s, id->dir, "big", &dv);
	sb_del(s, s->dircook, k, sb_key2(k, id->dir, dv.cookie));
}

static void extra_dircook(struct sb *s, const struct ids *id)
{
	unsigned char k[16], v[12 + 5];
	uint32_t type = S_IFREG;

	memcpy(v, &id->small, 8);
	memcpy(v + 8, &type, 4);
	memcpy(v + 12, "ghost", 5);
	sb_put(s, s->dircook, k, sb_key2(k, DBFS_ROOT_INO, 4), v, sizeof(v));
}

static void cookie_range(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_get_inode(s, id->dir, &rec);
	rec.next_cookie = DBFS_COOKIE_FIRST + 1; /* "sub" has cookie FIRST + 1 */
	sb_put_inode(s, id->dir, &rec);
}

static void file_nlink(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_get_inode(s, id->small, &rec);
	rec.nlink = 3;
	sb_put_inode(s, id->small, &rec);
}

static void dir_nlink(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_get_inode(s, id->dir, &rec);
	rec.nlink = 2;
	sb_put_inode(s, id->dir, &rec);
}

static void nentries(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_get_inode(s, DBFS_ROOT_INO, &rec);
	rec.nentries += 5;
	sb_put_inode(s, DBFS_ROOT_INO, &rec);
}

static void dir_parent(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_get_inode(s, id->sub, &rec);
	rec.parent = DBFS_ROOT_INO;
	sb_put_inode(s, id->sub, &rec);
}

/* An unlinked file still open at a crash: nlink 0, in the orphan table. */
static void orphan(struct sb *s, const struct ids *id)
{
	unsigned char k[8];

	sb_unlink(s, id->dir, "big");
	sb_put(s, s->orphan, k, sb_key_ino(k, id->big), "", 0);
}

static void orphan_unlisted(struct sb *s, const struct ids *id)
{
	sb_unlink(s, id->dir, "big");
}

/* A name removed without its inode: the file is unreachable with nlink 1. */
static void lost_file(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_unlink(s, id->dir, "big");
	sb_get_inode(s, id->big, &rec);
	rec.nlink = 1;
	sb_put_inode(s, id->big, &rec);
}

static void lost_dir(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_unlink(s, DBFS_ROOT_INO, "dir");
	sb_get_inode(s, DBFS_ROOT_INO, &rec);
	rec.nlink++; /* keep the root's own count right: only "dir" is lost */
	sb_put_inode(s, DBFS_ROOT_INO, &rec);
}

/* dir/sub gets a name for dir: a cycle, cut off from the root. */
static void dir_cycle(struct sb *s, const struct ids *id)
{
	sb_link(s, id->sub, "loop", id->dir);
	sb_unlink(s, DBFS_ROOT_INO, "dir");
}

static void dir_two_names(struct sb *s, const struct ids *id)
{
	sb_link(s, DBFS_ROOT_INO, "dir2", id->sub);
}

static void put_block(struct sb *s, uint64_t ino, uint64_t blk, size_t len)
{
	static unsigned char buf[DBFS_BLOCK_SIZE + 1];
	unsigned char k[16];

	sb_put(s, s->data, k, sb_key2(k, ino, blk), buf, len);
}

static void block_past_eof(struct sb *s, const struct ids *id)
{
	put_block(s, id->big, 4, 100);
}

static void block_no_inode(struct sb *s, const struct ids *id)
{
	put_block(s, 999, 0, 100);
}

static void block_of_dir(struct sb *s, const struct ids *id)
{
	put_block(s, id->dir, 0, 100);
}

static void block_empty(struct sb *s, const struct ids *id)
{
	put_block(s, id->big, 1, 0);
}

static void block_too_long(struct sb *s, const struct ids *id)
{
	put_block(s, id->big, 1, DBFS_BLOCK_SIZE + 1);
}

static void alloc(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;
	struct dbfs_usage_rec u;

	sb_get_inode(s, id->big, &rec);
	rec.alloc += DBFS_ALLOC_UNIT;
	sb_put_inode(s, id->big, &rec);
	sb_get_usage(s, &u);
	u.bytes += DBFS_ALLOC_UNIT;
	sb_put_usage(s, &u);
}

static void usage_bytes(struct sb *s, const struct ids *id)
{
	struct dbfs_usage_rec u;

	sb_get_usage(s, &u);
	u.bytes += 1;
	sb_put_usage(s, &u);
}

static void usage_inodes(struct sb *s, const struct ids *id)
{
	struct dbfs_usage_rec u;

	sb_get_usage(s, &u);
	u.inodes -= 1;
	sb_put_usage(s, &u);
}

static void usage_missing(struct sb *s, const struct ids *id)
{
	sb_del(s, s->super, "usage", 5);
}

static void next_ino(struct sb *s, const struct ids *id)
{
	struct dbfs_super sup;

	sb_get_super(s, &sup);
	sup.next_ino = id->sym;
	sb_put_super(s, &sup);
}

static void xattr_no_inode(struct sb *s, const struct ids *id)
{
	sb_setxattr(s, 999, "user.x", "v");
}

static void orphan_no_inode(struct sb *s, const struct ids *id)
{
	unsigned char k[8];

	sb_put(s, s->orphan, k, sb_key_ino(k, 999), "", 0);
}

static void orphan_linked(struct sb *s, const struct ids *id)
{
	unsigned char k[8];

	sb_put(s, s->orphan, k, sb_key_ino(k, id->small), "", 0);
}

static void bad_name(struct sb *s, const struct ids *id)
{
	struct dbfs_dirent_val dv;
	unsigned char k[8 + DBFS_NAME_MAX];

	sb_lookup(s, DBFS_ROOT_INO, "small", &dv);
	sb_put(s, s->dirent, k, sb_key_name(k, DBFS_ROOT_INO, "a/b"), &dv, sizeof(dv));
}

static void short_inode(struct sb *s, const struct ids *id)
{
	unsigned char k[8];

	sb_put(s, s->inode, k, sb_key_ino(k, id->empty), "xx", 2);
}

static void huge_file(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	sb_get_inode(s, id->empty, &rec);
	rec.size = DBFS_MAX_FILE_SIZE + 1;
	sb_put_inode(s, id->empty, &rec);
}

static void bad_magic(struct sb *s, const struct ids *id)
{
	struct dbfs_super sup;

	sb_get_super(s, &sup);
	sup.magic[0] = 'X';
	sb_put_super(s, &sup);
}

static void bad_version(struct sb *s, const struct ids *id)
{
	struct dbfs_super sup;

	sb_get_super(s, &sup);
	sup.version = DBFS_FORMAT_VERSION + 1;
	sb_put_super(s, &sup);
}

static void bad_byte_order(struct sb *s, const struct ids *id)
{
	struct dbfs_super sup;

	sb_get_super(s, &sup);
	sup.byte_order = 0x0807060504030201ull;
	sb_put_super(s, &sup);
}

/* ---- deferred truncation (dbfs/trim.c) and settled events (dbfs/settle.c) ---- */

struct trim_row {
	uint64_t first, last, bytes;
};

static MDB_dbi table(struct sb *s, const char *name)
{
	MDB_dbi dbi;
	ck_assert_int_eq(mdb_dbi_open(s->txn, name, MDB_CREATE, &dbi), 0);
	return dbi;
}

/* big (blocks 0, 2 and 3: 64 KiB, 64 KiB, 100 bytes) truncated to one
 * block, the rest waiting for the reclaim; `bytes`, `first` and `flag` as
 * given (a correct row: 65536 + 4096, 1, 1). */
static void trim_big(struct sb *s, const struct ids *id, uint64_t bytes, uint64_t first,
		     uint32_t flag)
{
	struct dbfs_inode rec;
	unsigned char k[8];
	struct trim_row r = {first, 4, bytes};

	ck_assert_int_eq(sb_get_inode(s, id->big, &rec), 0);
	rec.size = DBFS_BLOCK_SIZE;
	rec.flags = flag;
	sb_put_inode(s, id->big, &rec);
	sb_put(s, table(s, DBFS_DB_TRIM), k, sb_key_ino(k, id->big), &r, sizeof(r));
}

static void trim_ok(struct sb *s, const struct ids *id)
{
	trim_big(s, id, DBFS_BLOCK_SIZE + 4096, 1, 1);
}

static void trim_bytes(struct sb *s, const struct ids *id)
{
	trim_big(s, id, 12345, 1, 1);
}

static void trim_no_flag(struct sb *s, const struct ids *id)
{
	trim_big(s, id, DBFS_BLOCK_SIZE + 4096, 1, 0);
}

static void trim_into_file(struct sb *s, const struct ids *id)
{
	trim_big(s, id, 2 * DBFS_BLOCK_SIZE + 4096, 0, 1);
}

static void trim_flag_no_row(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	table(s, DBFS_DB_TRIM);
	ck_assert_int_eq(sb_get_inode(s, id->small, &rec), 0);
	rec.flags = 1;
	sb_put_inode(s, id->small, &rec);
}

static void trim_fixed(struct sb *s, const struct ids *id)
{
	unsigned char k[8];
	MDB_val v;
	struct trim_row r;

	ck_assert_int_eq(sb_get(s, table(s, DBFS_DB_TRIM), k, sb_key_ino(k, id->big), &v), 0);
	ck_assert_uint_eq(v.mv_size, sizeof(r));
	memcpy(&r, v.mv_data, sizeof(r));
	ck_assert_uint_eq(r.bytes, DBFS_BLOCK_SIZE + 4096);
}

static void settle_row(struct sb *s, uint64_t ino, uint32_t ms, size_t vlen, uint64_t lo,
		       uint64_t hi)
{
	unsigned char k[12];
	uint64_t v[3] = {1, lo, hi};

	sb_key_ino(k, ino);
	k[8] = (unsigned char)(ms >> 24);
	k[9] = (unsigned char)(ms >> 16);
	k[10] = (unsigned char)(ms >> 8);
	k[11] = (unsigned char)ms;
	sb_put(s, table(s, DBFS_DB_SETTLE), k, 12, v, vlen);
}

static void settle_periods(struct sb *s, const unsigned char *p, size_t len)
{
	sb_put(s, table(s, DBFS_DB_SETTLE), "P", 1, p, len);
}

static void settle_ok(struct sb *s, const struct ids *id)
{
	static const unsigned char p[] = {0, 0, 0x03, 0xe8}; /* 1000 ms */

	settle_periods(s, p, sizeof(p));
	settle_row(s, id->small, 1000, 24, 0, 10);
	settle_row(s, 999, 1000, 24, 0, 0); /* a file gone: dropped when it comes */
}

static void settle_bad_value(struct sb *s, const struct ids *id)
{
	settle_row(s, id->small, 1000, 16, 0, 10);
}

static void settle_bad_period(struct sb *s, const struct ids *id)
{
	settle_row(s, id->small, 0, 24, 0, 10);
}

static void settle_bad_span(struct sb *s, const struct ids *id)
{
	settle_row(s, id->small, 1000, 24, 10, 5);
}

static void settle_bad_periods(struct sb *s, const struct ids *id)
{
	static const unsigned char p[] = {0, 0, 0x03}; /* not a multiple of 4 */

	settle_periods(s, p, sizeof(p));
}

/* ---- checks after repair ---- */

static void in_lost_found(struct sb *s, uint64_t ino)
{
	char name[32];
	uint64_t lf = sb_lookup(s, DBFS_ROOT_INO, "lost+found", NULL);

	ck_assert_msg(lf != 0, "no /lost+found");
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)ino);
	ck_assert_msg(sb_lookup(s, lf, name, NULL) == ino, "%s not in /lost+found", name);
}

static void big_in_lost_found(struct sb *s, const struct ids *id)
{
	in_lost_found(s, id->big);
}

static void dir_in_lost_found(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;

	in_lost_found(s, id->dir);
	ck_assert_int_eq(sb_get_inode(s, id->dir, &rec), 0);
	ck_assert_uint_eq(rec.parent, sb_lookup(s, DBFS_ROOT_INO, "lost+found", NULL));
	ck_assert_uint_eq(sb_lookup(s, id->dir, "big", NULL), id->big);
}

static void big_gone(struct sb *s, const struct ids *id)
{
	struct dbfs_inode rec;
	unsigned char k[16];
	MDB_val v;

	ck_assert_int_eq(sb_get_inode(s, id->big, &rec), MDB_NOTFOUND);
	ck_assert_int_eq(sb_get(s, s->data, k, sb_key2(k, id->big, 0), &v), MDB_NOTFOUND);
	ck_assert_int_eq(sb_get(s, s->orphan, k, sb_key_ino(k, id->big), &v), MDB_NOTFOUND);
}

static void sym_kept(struct sb *s, const struct ids *id)
{
	unsigned char k[8];
	MDB_val v;

	ck_assert_int_eq(sb_get(s, s->inode, k, sb_key_ino(k, id->sym), &v), 0);
	ck_assert_uint_eq(v.mv_size, sizeof(struct dbfs_inode) + 7);
	ck_assert(!memcmp((char *)v.mv_data + sizeof(struct dbfs_inode), "dir/big", 7));
}

struct fsck_case {
	const char *name;
	void (*damage)(struct sb *s, const struct ids *id);
	int check;  /* exit code of the check */
	int repair; /* exit code of --repair (then a check gives 0 if 4, else 1) */
	void (*after)(struct sb *s, const struct ids *id);
};

static const struct fsck_case cases[] = {
    {"clean", NULL, 0, 0, NULL},
    {"dangling dirent", del_inode, 1, 4, NULL},
    {"dirent type", dirent_type, 1, 4, sym_kept},
    {"missing dircook", del_dircook, 1, 4, NULL},
    {"extra dircook", extra_dircook, 1, 4, NULL},
    {"cookie past next_cookie", cookie_range, 1, 4, NULL},
    {"file nlink", file_nlink, 1, 4, NULL},
    {"directory nlink", dir_nlink, 1, 4, NULL},
    {"nentries", nentries, 1, 4, NULL},
    {"directory parent", dir_parent, 1, 4, NULL},
    {"orphan", orphan, 1, 4, big_gone},
    {"nlink 0 not in orphan table", orphan_unlisted, 1, 4, big_gone},
    {"unreachable file", lost_file, 1, 4, big_in_lost_found},
    {"unreachable directory", lost_dir, 1, 4, dir_in_lost_found},
    {"directory cycle", dir_cycle, 1, 4, NULL},
    {"directory with two names", dir_two_names, 1, 4, NULL},
    {"block past EOF", block_past_eof, 1, 4, NULL},
    {"block of missing inode", block_no_inode, 1, 4, NULL},
    {"block of a directory", block_of_dir, 1, 4, NULL},
    {"empty block", block_empty, 1, 4, NULL},
    {"block too long", block_too_long, 1, 4, NULL},
    {"alloc", alloc, 1, 4, NULL},
    {"usage bytes", usage_bytes, 1, 4, NULL},
    {"usage inodes", usage_inodes, 1, 4, NULL},
    {"usage missing", usage_missing, 1, 4, NULL},
    {"next_ino", next_ino, 1, 4, NULL},
    {"xattr of missing inode", xattr_no_inode, 1, 4, NULL},
    {"orphan entry of missing inode", orphan_no_inode, 1, 4, NULL},
    {"orphan entry of linked inode", orphan_linked, 1, 4, NULL},
    {"name with a slash", bad_name, 1, 4, NULL},
    {"malformed inode", short_inode, 1, 1, NULL},
    {"size above the maximum", huge_file, 1, 1, NULL},
    {"waiting blocks of a truncate", trim_ok, 0, 0, trim_fixed},
    {"trim row's byte count", trim_bytes, 1, 4, trim_fixed},
    {"trim row without the inode's flag", trim_no_flag, 1, 4, trim_fixed},
    {"trim row reaching into the file", trim_into_file, 1, 4, NULL},
    {"trim flag without a row", trim_flag_no_row, 1, 4, NULL},
    {"settle rows", settle_ok, 0, 0, NULL},
    {"settle row value", settle_bad_value, 1, 4, NULL},
    {"settle row period", settle_bad_period, 1, 4, NULL},
    {"settle row span", settle_bad_span, 1, 4, NULL},
    {"settle periods", settle_bad_periods, 1, 4, NULL},
    {"bad magic", bad_magic, 8, 8, NULL},
    {"bad version", bad_version, 8, 8, NULL},
    {"bad byte order", bad_byte_order, 8, 8, NULL},
};

START_TEST(test_case)
{
	const struct fsck_case *c = &cases[_i];
	struct ids id;
	struct sb s;

	fprintf(stderr, "case: %s\n", c->name);
	build_good(&s, &id);
	sb_close(&s);
	if (c->damage) {
		sb_open(&s, store);
		c->damage(&s, &id);
		sb_close(&s);
	}
	EXPECT_FSCK(c->check, NULL, NULL);
	if (getenv("FSCK_SHOW"))
		fprintf(stderr, "%s", output());
	EXPECT_FSCK(c->repair, "--repair", "-v");
	if (getenv("FSCK_SHOW"))
		fprintf(stderr, "%s", output());
	if (c->repair == 8)
		return;
	EXPECT_FSCK(c->repair == 1 ? 1 : 0, NULL, NULL);
	if (c->after) {
		sb_open(&s, store);
		c->after(&s, &id);
		sb_close(&s);
	}
}
END_TEST

START_TEST(test_orphans_allowed)
{
	struct ids id;
	struct sb s;

	build_good(&s, &id);
	orphan(&s, &id);
	sb_close(&s);
	EXPECT_FSCK(1, NULL, NULL);
	EXPECT_FSCK(0, "--allow-orphans", NULL);
}
END_TEST

START_TEST(test_locked)
{
	struct ids id;
	struct sb s;
	char lock[4300];
	int fd;

	build_good(&s, &id);
	sb_close(&s);
	snprintf(lock, sizeof(lock), "%s/dbfs.lock", store);
	fd = open(lock, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
	EXPECT_FSCK(8, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(output(), "in use"));
	EXPECT_FSCK(8, "--repair", NULL);
	close(fd);
	EXPECT_FSCK(0, NULL, NULL);
}
END_TEST

START_TEST(test_not_a_store)
{
	EXPECT_FSCK(8, NULL, NULL);
	EXPECT_FSCK(8, "--repair", NULL);
	ck_assert_int_eq(rmdir(store), 0);
	EXPECT_FSCK(8, NULL, NULL);
}
END_TEST

START_TEST(test_usage)
{
	EXPECT_FSCK(0, "--help", NULL);
	ck_assert_ptr_nonnull(strstr(output(), "Exit status"));
	EXPECT_FSCK(8, "--bogus", NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fsck");
	TCase *tc = tcase_create("fsck");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_case, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_orphans_allowed);
	tcase_add_test(tc, test_locked);
	tcase_add_test(tc, test_not_a_store);
	tcase_add_test(tc, test_usage);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
