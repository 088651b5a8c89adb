/*
 * crashload: the workload of the DBFS crash test, and its verifier.
 *
 *   crashload DIR LOG SEED MAXOPS   run (until an error, e.g. the daemon died)
 *   crashload --verify DIR LOG      check DIR against LOG
 *
 * Files live in DIR/c0 and DIR/c1 under NSLOTS fixed names. The workload
 * creates, overwrites, pwrites, truncates, renames, hard-links and unlinks
 * them, and now and then makes everything durable (fsync of every changed
 * file, then of both directories): a checkpoint. It logs to LOG, a file
 * outside the mount, one line per record, always *before* a change starts
 * and *after* a checkpoint returned:
 *
 *   D name                  name's state is undetermined from here on
 *   S name serial size      name holds exactly the bytes of LOG.ref/<serial>
 *   G name                  name does not exist
 *
 * so the last record of each name says what a crash must have kept. Besides
 * that it makes noise the log does not cover (a scratch tree of files and
 * directories, xattrs, files unlinked while open), which fsck still checks.
 *
 * A new run on the same DIR and LOG continues from the log: S names are
 * loaded (hard links recognised by st_ino), D names are removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NSLOTS 64
#define NINO   NSLOTS
#define MAXSZ  (3u << 20)

struct ino {
	bool live;
	unsigned char *data;
	size_t size, cap;
	bool dirty;   /* changed since the last fsync */
	ino_t st_ino; /* while loading */
};

struct slot {
	int ino;	 /* -1: no such name */
	char logged;	 /* 'D', 'S', 'G' or 0 (never logged) */
	uint64_t serial; /* of the S record */
};

static struct ino inodes[NINO];
static struct slot slots[NSLOTS];
static char dir[4096], logpath[4096], refdir[4200];
static int logfd = -1;
static uint64_t rng, serial;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* A failing call: the daemon may be gone (the test killed it) or it is a
 * bug; the driver knows which. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	fputs("crashload: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(e));
	exit(3);
}

static const char *slot_name(int s)
{
	static char buf[4][16];
	static int k;
	char *b = buf[k++ & 3];

	snprintf(b, 16, "c%d/f%02d", s & 1, s);
	return b;
}

static void slot_path(int s, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dir, slot_name(s));
}

static void ref_path(uint64_t ser, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%" PRIu64, refdir, ser);
}

static void logline(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	if (write(logfd, line, (size_t)n) != n)
		die("writing %s", logpath);
}

static void mark_dirty_slot(int s)
{
	if (slots[s].logged != 'D') {
		logline("D %s", slot_name(s));
		slots[s].logged = 'D';
	}
}

/* The content of inode i is about to change. */
static void mark_dirty_ino(int i)
{
	for (int s = 0; s < NSLOTS; s++)
		if (slots[s].ino == i)
			mark_dirty_slot(s);
	inodes[i].dirty = true;
}

static int new_ino(void)
{
	for (int i = 0; i < NINO; i++) {
		if (!inodes[i].live) {
			memset(&inodes[i], 0, sizeof(inodes[i]));
			inodes[i].live = true;
			return i;
		}
	}
	return -1;
}

static void drop_name(int s)
{
	int i = slots[s].ino;

	slots[s].ino = -1;
	for (int k = 0; k < NSLOTS; k++)
		if (slots[k].ino == i)
			return;
	free(inodes[i].data);
	inodes[i].data = NULL;
	inodes[i].live = false;
}

static void resize(struct ino *in, size_t size)
{
	if (size > in->cap) {
		size_t cap = in->cap ? in->cap : 65536;
		while (cap < size)
			cap *= 2;
		if (!(in->data = realloc(in->data, cap)))
			die("out of memory");
		in->cap = cap;
	}
	if (size > in->size)
		memset(in->data + in->size, 0, size - in->size);
	in->size = size;
}

static void fill(unsigned char *p, size_t n)
{
	for (size_t j = 0; j < n; j += 8) {
		uint64_t r = rnd();
		memcpy(p + j, &r, n - j < 8 ? n - j : 8);
	}
}

static void do_pwrite(int fd, struct ino *in, size_t off, size_t len)
{
	static unsigned char buf[1 << 20];

	if (len > sizeof(buf))
		len = sizeof(buf);
	if (off + len > MAXSZ)
		return;
	fill(buf, len);
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		die("pwrite %zu at %zu", len, off);
	if (off + len > in->size)
		resize(in, off + len);
	memcpy(in->data + off, buf, len);
}

static size_t some_length(void)
{
	switch (below(4)) {
	case 0:
		return 1 + below(100);
	case 1:
		return 1 + below(8192);
	case 2:
		return 1 + below(200000);
	default:
		return 1 + below(1 << 20);
	}
}

/* --- logged operations --- */

static void op_create(void)
{
	int s = (int)below(NSLOTS), i, fd;
	char p[4300];

	if (slots[s].ino >= 0) {
		i = slots[s].ino;
		mark_dirty_ino(i);
	} else {
		if ((i = new_ino()) < 0)
			return;
		mark_dirty_slot(s);
		slots[s].ino = i;
		inodes[i].dirty = true;
	}
	slot_path(s, p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("create %s", p);
	inodes[i].size = 0;
	for (int k = (int)below(4); k >= 0; k--)
		do_pwrite(fd, &inodes[i], inodes[i].size + (below(4) ? 0 : below(100000)),
			  some_length());
	if (close(fd) < 0)
		die("close %s", p);
}

static void op_modify(void)
{
	int s = (int)below(NSLOTS), i, fd;
	char p[4300];

	if ((i = slots[s].ino) < 0)
		return;
	mark_dirty_ino(i);
	slot_path(s, p, sizeof(p));
	if ((fd = open(p, O_WRONLY)) < 0)
		die("open %s", p);
	for (int k = (int)below(3); k >= 0; k--) {
		struct ino *in = &inodes[i];
		if (below(4) == 0) {
			size_t size = below(in->size + 200000);
			if (size > MAXSZ)
				size = MAXSZ;
			if (ftruncate(fd, (off_t)size) < 0)
				die("ftruncate %s %zu", p, size);
			resize(in, size);
		} else {
			do_pwrite(fd, in, below(in->size + 100000), some_length());
		}
	}
	if (close(fd) < 0)
		die("close %s", p);
}

static void op_rename(void)
{
	int a = (int)below(NSLOTS), b = (int)below(NSLOTS);
	char pa[4300], pb[4300];

	if (a == b || slots[a].ino < 0)
		return;
	mark_dirty_slot(a);
	mark_dirty_slot(b);
	slot_path(a, pa, sizeof(pa));
	slot_path(b, pb, sizeof(pb));
	if (rename(pa, pb) < 0)
		die("rename %s %s", pa, pb);
	if (slots[b].ino == slots[a].ino)
		return; /* links of one inode: nothing happens */
	if (slots[b].ino >= 0)
		drop_name(b);
	slots[b].ino = slots[a].ino;
	slots[a].ino = -1;
}

static void op_link(void)
{
	int a = (int)below(NSLOTS), b = (int)below(NSLOTS);
	char pa[4300], pb[4300];

	if (slots[a].ino < 0 || slots[b].ino >= 0)
		return;
	mark_dirty_slot(b);
	slot_path(a, pa, sizeof(pa));
	slot_path(b, pb, sizeof(pb));
	if (link(pa, pb) < 0)
		die("link %s %s", pa, pb);
	slots[b].ino = slots[a].ino;
}

static void op_unlink(void)
{
	int s = (int)below(NSLOTS);
	char p[4300];

	if (slots[s].ino < 0)
		return;
	mark_dirty_slot(s);
	slot_path(s, p, sizeof(p));
	if (unlink(p) < 0)
		die("unlink %s", p);
	drop_name(s);
}

static void fsync_path(const char *p, int flags)
{
	int fd = open(p, flags);

	if (fd < 0)
		die("open %s", p);
	if (fsync(fd) < 0)
		die("fsync %s", p);
	if (close(fd) < 0)
		die("close %s", p);
}

static void write_ref(int s)
{
	char p[4300], old[4300];
	struct ino *in = &inodes[slots[s].ino];
	uint64_t prev = slots[s].serial;
	FILE *f;

	ref_path(++serial, p, sizeof(p));
	if (!(f = fopen(p, "w")) || fwrite(in->data, 1, in->size, f) != in->size || fclose(f))
		die("writing %s", p);
	logline("S %s %" PRIu64 " %zu", slot_name(s), serial, in->size);
	slots[s].logged = 'S';
	slots[s].serial = serial;
	if (prev) {
		ref_path(prev, old, sizeof(old));
		unlink(old);
	}
}

/* Make everything durable, then say so in the log. */
static void checkpoint(void)
{
	char p[4300];

	for (int i = 0; i < NINO; i++) {
		if (!inodes[i].live || !inodes[i].dirty)
			continue;
		for (int s = 0; s < NSLOTS; s++) {
			if (slots[s].ino == i) {
				slot_path(s, p, sizeof(p));
				fsync_path(p, O_RDONLY);
				break;
			}
		}
		inodes[i].dirty = false;
	}
	for (int d = 0; d < 2; d++) {
		snprintf(p, sizeof(p), "%s/c%d", dir, d);
		fsync_path(p, O_RDONLY | O_DIRECTORY);
	}
	for (int s = 0; s < NSLOTS; s++) {
		if (slots[s].ino >= 0 && slots[s].logged != 'S') {
			write_ref(s);
		} else if (slots[s].ino < 0 && slots[s].logged != 'G' && slots[s].logged) {
			logline("G %s", slot_name(s));
			slots[s].logged = 'G';
			if (slots[s].serial) {
				ref_path(slots[s].serial, p, sizeof(p));
				unlink(p);
				slots[s].serial = 0;
			}
		}
	}
}

/* --- noise the log does not cover --- */

static int open_fds[8];

static void noise(void)
{
	static unsigned k;
	char p[4300], q[4300];
	unsigned n = k++ % 16;
	int fd, s;

	switch (below(5)) {
	case 0: /* scratch files and directories */
		snprintf(p, sizeof(p), "%s/tmp/t%u", dir, n);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			die("mkdir %s", p);
		snprintf(q, sizeof(q), "%s/f%u", p, (unsigned)below(4));
		if ((fd = open(q, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			die("create %s", q);
		{
			static unsigned char buf[70000];
			size_t len = below(sizeof(buf));
			if (write(fd, buf, len) != (ssize_t)len)
				die("write %s", q);
		}
		close(fd);
		break;
	case 1: /* remove a scratch directory */
		snprintf(p, sizeof(p), "%s/tmp/t%u", dir, n);
		for (int f = 0; f < 4; f++) {
			snprintf(q, sizeof(q), "%s/f%d", p, f);
			if (unlink(q) < 0 && errno != ENOENT)
				die("unlink %s", q);
		}
		if (rmdir(p) < 0 && errno != ENOENT)
			die("rmdir %s", p);
		break;
	case 2: /* a file unlinked while open, written after */
		snprintf(p, sizeof(p), "%s/tmp/o%u", dir, n % 8);
		if (open_fds[n % 8] > 0)
			close(open_fds[n % 8]);
		if ((fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0)
			die("create %s", p);
		if (unlink(p) < 0)
			die("unlink %s", p);
		if (pwrite(fd, p, strlen(p), (off_t)below(200000)) < 0)
			die("pwrite to unlinked %s", p);
		open_fds[n % 8] = fd;
		break;
	case 3: /* an xattr on a logged file (its bytes stay the same) */
		s = (int)below(NSLOTS);
		if (slots[s].ino < 0)
			break;
		slot_path(s, p, sizeof(p));
		if (setxattr(p, "user.crash", p, strlen(p), 0) < 0 && errno != ENOTSUP)
			die("setxattr %s", p);
		break;
	default: /* rename within the scratch tree */
		snprintf(p, sizeof(p), "%s/tmp/t%u/f0", dir, n);
		snprintf(q, sizeof(q), "%s/tmp/t%u/f1", dir, n);
		if (rename(p, q) < 0 && errno != ENOENT)
			die("rename %s", p);
		break;
	}
}

/* --- the log --- */

struct record {
	char kind;
	uint64_t serial;
	size_t size;
};

static bool parse_slot(const char *name, int *s)
{
	int d, n;
	char extra;

	if (sscanf(name, "c%d/f%d%c", &d, &n, &extra) != 2 || n < 0 || n >= NSLOTS || d != (n & 1))
		return false;
	*s = n;
	return true;
}

/* Last record of each slot; returns the largest serial. */
static uint64_t read_log(struct record *rec)
{
	char line[256], name[64];
	FILE *f = fopen(logpath, "r");
	uint64_t maxser = 0;

	memset(rec, 0, NSLOTS * sizeof(*rec));
	if (!f) {
		if (errno == ENOENT)
			return 0;
		die("%s", logpath);
	}
	while (fgets(line, sizeof(line), f)) {
		struct record r = {0};
		unsigned long long ser = 0, size = 0;
		int s;
		if (sscanf(line, "%c %63s %llu %llu", &r.kind, name, &ser, &size) < 2 ||
		    !parse_slot(name, &s) || !strchr("DSG", r.kind)) {
			fprintf(stderr, "crashload: %s: bad line: %s", logpath, line);
			exit(2);
		}
		r.serial = ser;
		r.size = size;
		rec[s] = r;
		if (ser > maxser)
			maxser = ser;
	}
	fclose(f);
	return maxser;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	if (ftw->level == 0)
		return 0;
	if (remove(p) < 0)
		die("remove %s", p);
	return 0;
}

static void load(void)
{
	struct record rec[NSLOTS];
	char p[4300];

	serial = read_log(rec);
	for (int d = 0; d < 2; d++) {
		snprintf(p, sizeof(p), "%s/c%d", dir, d);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			die("mkdir %s", p);
	}
	snprintf(p, sizeof(p), "%s/tmp", dir);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		die("mkdir %s", p);
	if (nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		die("clearing %s", p);
	for (int s = 0; s < NSLOTS; s++) {
		struct stat st;
		int fd, i = -1;
		slots[s].ino = -1;
		slots[s].logged = rec[s].kind;
		slots[s].serial = rec[s].serial;
		slot_path(s, p, sizeof(p));
		if (rec[s].kind == 'D') {
			if (unlink(p) < 0 && errno != ENOENT)
				die("unlink %s", p);
			continue;
		}
		if (rec[s].kind != 'S')
			continue;
		if ((fd = open(p, O_RDONLY)) < 0 || fstat(fd, &st) < 0)
			die("open %s (a synced file)", p);
		for (int k = 0; k < NINO; k++)
			if (inodes[k].live && inodes[k].st_ino == st.st_ino)
				i = k;
		if (i < 0) {
			i = new_ino();
			inodes[i].st_ino = st.st_ino;
			resize(&inodes[i], (size_t)st.st_size);
			if (pread(fd, inodes[i].data, inodes[i].size, 0) != (ssize_t)inodes[i].size)
				die("read %s", p);
		}
		close(fd);
		slots[s].ino = i;
	}
	checkpoint();
}

static int verify(void)
{
	static unsigned char a[1 << 16], b[1 << 16];
	struct record rec[NSLOTS];
	int bad = 0, synced = 0, gone = 0, open_ = 0;

	read_log(rec);
	for (int s = 0; s < NSLOTS; s++) {
		char p[4300], r[4300];
		struct stat st;
		int fd, rf;
		size_t off = 0;
		slot_path(s, p, sizeof(p));
		if (rec[s].kind == 'G') {
			gone++;
			if (lstat(p, &st) == 0 || errno != ENOENT) {
				fprintf(stderr, "crashload: %s exists, but was removed durably\n",
					p);
				bad++;
			}
			continue;
		}
		if (rec[s].kind != 'S') {
			open_ += rec[s].kind == 'D';
			continue;
		}
		synced++;
		ref_path(rec[s].serial, r, sizeof(r));
		if ((fd = open(p, O_RDONLY)) < 0) {
			fprintf(stderr, "crashload: %s (synced, %zu bytes): %s\n", p, rec[s].size,
				strerror(errno));
			bad++;
			continue;
		}
		if ((rf = open(r, O_RDONLY)) < 0)
			die("reference copy %s", r);
		for (;;) {
			ssize_t n = read(fd, a, sizeof(a)), m = read(rf, b, sizeof(b));
			if (n < 0)
				die("read %s", p);
			if (n != m || memcmp(a, b, (size_t)n)) {
				ssize_t k = 0;
				while (k < n && k < m && a[k] == b[k])
					k++;
				fstat(fd, &st);
				fprintf(
				    stderr,
				    "crashload: %s: differs from its synced content at byte %zu "
				    "(size %lld, synced size %zu)\n",
				    p, off + (size_t)k, (long long)st.st_size, rec[s].size);
				bad++;
				break;
			}
			if (n == 0)
				break;
			off += (size_t)n;
		}
		close(fd);
		close(rf);
	}
	printf("crashload: %d synced files and %d removed names verified, %d undetermined, "
	       "%d wrong\n",
	       synced, gone, open_, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t maxops;

	if (argc == 4 && !strcmp(argv[1], "--verify")) {
		snprintf(dir, sizeof(dir), "%s", argv[2]);
		snprintf(logpath, sizeof(logpath), "%s", argv[3]);
		snprintf(refdir, sizeof(refdir), "%s.ref", logpath);
		return verify();
	}
	if (argc != 5) {
		fprintf(stderr, "usage: crashload DIR LOG SEED MAXOPS\n"
				"       crashload --verify DIR LOG\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	snprintf(logpath, sizeof(logpath), "%s", argv[2]);
	snprintf(refdir, sizeof(refdir), "%s.ref", logpath);
	rng = strtoull(argv[3], NULL, 0);
	maxops = strtoull(argv[4], NULL, 0);
	if (mkdir(refdir, 0755) < 0 && errno != EEXIST)
		die("mkdir %s", refdir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		die("mkdir %s", dir);
	if ((logfd = open(logpath, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
		die("%s", logpath);
	load();
	for (uint64_t op = 0; op < maxops; op++) {
		switch (below(10)) {
		case 0:
		case 1:
			op_create();
			break;
		case 2:
		case 3:
		case 4:
			op_modify();
			break;
		case 5:
			op_rename();
			break;
		case 6:
			op_link();
			break;
		case 7:
			op_unlink();
			break;
		default:
			noise();
			break;
		}
		if (below(3) == 0)
			checkpoint();
	}
	checkpoint();
	return 0;
}
