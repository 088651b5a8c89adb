/*
 * fs-stress: randomized data-integrity stress against an in-memory model.
 *
 *   fs-stress DIR SEED OPS [MAX_FILE_SIZE [MANIFEST]]
 *   fs-stress --check DIR MANIFEST
 *
 * Works in DIR/stress.SEED: NDIRS directories, NSLOTS name slots spread over
 * them, inodes created, written (pwrite at random offsets, across 64 KiB
 * blocks, past EOF to make holes), truncated up and down, renamed (also over
 * another file and between hard links of one inode), hard-linked, unlinked
 * (also while open: the fd stays usable), fsync'ed and closed. The model
 * holds every inode's bytes; every read is compared byte for byte, every
 * stat's st_size and st_nlink, and every directory listing, periodically
 * and at the end. The first difference stops the run with the op number, the
 * seed and the recent operations on that inode. With MANIFEST, the names
 * left at the end are written there ("path size nlink hash" per line), and
 * --check compares a directory (say, after a remount) with it. Exit 0 on
 * success, 1 on a difference or an unexpected error, 2 on bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

#define NDIRS	4
#define NINODES 48     /* live model inodes at most */
#define NSLOTS	64     /* names */
#define NFDS	12     /* open descriptors */
#define HISTORY 16384  /* remembered notes (operations, several per rename) */
#define BLOCK	65536u /* DBFS_BLOCK_SIZE: aim writes at its edges */

struct inode {
	bool live;
	unsigned char *data;
	size_t size, cap;
	unsigned nlink;
	unsigned id; /* for messages: never reused */
};

struct fd {
	int fd; /* -1: free */
	int ino;
	bool append; /* opened O_APPEND: writes go to the end */
};

static struct inode inodes[NINODES];
static int slots[NSLOTS]; /* inode index or -1 */
static struct fd fds[NFDS];
static char root[4096];
static uint64_t rng, seed, opno, nnotes;
static size_t max_size = 1u << 20;
static unsigned next_id = 1;

static struct {
	uint64_t op;
	unsigned id;
	char what[96];
} history[HISTORY];

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static void note(int ino, const char *fmt, ...)
{
	va_list ap;
	size_t h = nnotes++ % HISTORY;

	history[h].op = opno;
	history[h].id = ino >= 0 ? inodes[ino].id : 0;
	va_start(ap, fmt);
	vsnprintf(history[h].what, sizeof(history[h].what), fmt, ap);
	va_end(ap);
}

static void dump_history(unsigned id)
{
	uint64_t from = nnotes > HISTORY ? nnotes - HISTORY : 0;
	int shown = 0;

	fprintf(stderr, "recent operations on inode #%u (op: what):\n", id);
	for (uint64_t n = from; n < nnotes; n++) {
		size_t h = n % HISTORY;
		if (history[h].id == id || id == 0) {
			fprintf(stderr, "  %" PRIu64 ": %s\n", history[h].op, history[h].what);
			shown++;
		}
	}
	if (!shown)
		fprintf(stderr, "  (none in the last %d notes)\n", HISTORY);
}

static void fail(int ino, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(int ino, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fs-stress: FAIL at op %" PRIu64 " (seed %" PRIu64 "): ", opno, seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_history(ino >= 0 ? inodes[ino].id : 0);
	exit(1);
}

static void slot_path(int s, char *buf, size_t len)
{
	snprintf(buf, len, "%s/d%d/n%02d", root, s % NDIRS, s);
}

/* --- model --- */

static int new_inode(void)
{
	for (int i = 0; i < NINODES; i++) {
		if (!inodes[i].live) {
			memset(&inodes[i], 0, sizeof(inodes[i]));
			inodes[i].live = true;
			inodes[i].id = next_id++;
			return i;
		}
	}
	return -1;
}

static bool open_anywhere(int ino)
{
	for (int i = 0; i < NFDS; i++)
		if (fds[i].fd >= 0 && fds[i].ino == ino)
			return true;
	return false;
}

static void maybe_free(int ino)
{
	if (inodes[ino].nlink == 0 && !open_anywhere(ino)) {
		free(inodes[ino].data);
		inodes[ino].data = NULL;
		inodes[ino].live = false;
	}
}

static void model_resize(struct inode *in, size_t size)
{
	if (size > in->cap) {
		size_t cap = in->cap ? in->cap : 4096;
		while (cap < size)
			cap *= 2;
		in->data = realloc(in->data, cap);
		if (!in->data)
			fail(-1, "out of memory");
		in->cap = cap;
	}
	if (size > in->size)
		memset(in->data + in->size, 0, size - in->size);
	in->size = size;
}

/* --- checks --- */

static void check_stat(int ino, const struct stat *st, const char *where)
{
	struct inode *in = &inodes[ino];

	if (!S_ISREG(st->st_mode))
		fail(ino, "%s: mode %o is not a regular file", where, st->st_mode);
	if ((size_t)st->st_size != in->size)
		fail(ino, "%s: st_size %lld, model %zu", where, (long long)st->st_size, in->size);
	if (st->st_nlink != in->nlink)
		fail(ino, "%s: st_nlink %lu, model %u", where, (unsigned long)st->st_nlink,
		     in->nlink);
}

static void check_bytes(int ino, int fd, size_t off, size_t len, const char *where)
{
	static unsigned char buf[1 << 20];
	struct inode *in = &inodes[ino];
	size_t done = 0;

	if (off > in->size)
		off = in->size;
	if (len > in->size - off)
		len = in->size - off;
	while (done < len) {
		size_t want = len - done < sizeof(buf) ? len - done : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)(off + done));
		if (n < 0)
			fail(ino, "%s: pread(%zu, %zu): %s", where, want, off + done,
			     strerror(errno));
		if (n == 0)
			fail(ino, "%s: EOF at %zu, model size %zu", where, off + done, in->size);
		if (memcmp(buf, in->data + off + done, (size_t)n)) {
			size_t i = 0;
			while (buf[i] == in->data[off + done + i])
				i++;
			fail(ino, "%s: byte %zu is %#x, model %#x (read of %zu at %zu)", where,
			     off + done + i, buf[i], in->data[off + done + i], want, off + done);
		}
		done += (size_t)n;
	}
	/* Nothing past the end. */
	if (off + len == in->size) {
		ssize_t n = pread(fd, buf, 1, (off_t)in->size);
		if (n != 0)
			fail(ino, "%s: read past EOF (%zu) returned %zd", where, in->size, n);
	}
}

static void verify_slot(int s, bool whole)
{
	char path[4200];
	struct stat st;
	int ino = slots[s], fd;

	slot_path(s, path, sizeof(path));
	if (ino < 0) {
		if (lstat(path, &st) == 0 || errno != ENOENT)
			fail(-1, "%s: exists (or lstat error %s), model has no such name", path,
			     strerror(errno));
		return;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0)
		fail(ino, "open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		fail(ino, "fstat %s: %s", path, strerror(errno));
	check_stat(ino, &st, path);
	if (whole) {
		check_bytes(ino, fd, 0, inodes[ino].size, path);
	} else {
		size_t off = below(inodes[ino].size + 1);
		check_bytes(ino, fd, off, below(2 * BLOCK), path);
	}
	close(fd);
}

static void verify_dirs(void)
{
	for (int d = 0; d < NDIRS; d++) {
		char path[4200];
		bool seen[NSLOTS] = {false};
		DIR *dir;
		struct dirent *e;

		snprintf(path, sizeof(path), "%s/d%d", root, d);
		dir = opendir(path);
		if (!dir)
			fail(-1, "opendir %s: %s", path, strerror(errno));
		while ((errno = 0, e = readdir(dir))) {
			int s;
			char extra;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (sscanf(e->d_name, "n%d%c", &s, &extra) != 1 || s < 0 || s >= NSLOTS ||
			    s % NDIRS != d)
				fail(-1, "%s: unexpected entry '%s'", path, e->d_name);
			if (seen[s])
				fail(-1, "%s: entry '%s' listed twice", path, e->d_name);
			seen[s] = true;
			if (slots[s] < 0)
				fail(-1, "%s: entry '%s' listed, model has no such name", path,
				     e->d_name);
		}
		if (errno)
			fail(-1, "readdir %s: %s", path, strerror(errno));
		closedir(dir);
		for (int s = d; s < NSLOTS; s += NDIRS)
			if (slots[s] >= 0 && !seen[s])
				fail(slots[s], "%s: entry 'n%02d' missing from readdir", path, s);
	}
}

static void verify_all(void)
{
	for (int s = 0; s < NSLOTS; s++)
		verify_slot(s, true);
	for (int i = 0; i < NFDS; i++) {
		struct stat st;
		if (fds[i].fd < 0)
			continue;
		if (fstat(fds[i].fd, &st) < 0)
			fail(fds[i].ino, "fstat: %s", strerror(errno));
		check_stat(fds[i].ino, &st, "open descriptor");
		check_bytes(fds[i].ino, fds[i].fd, 0, inodes[fds[i].ino].size, "open descriptor");
	}
	verify_dirs();
}

/* --- operations --- */

static int pick_slot(bool used)
{
	int start = (int)below(NSLOTS);

	for (int i = 0; i < NSLOTS; i++) {
		int s = (start + i) % NSLOTS;
		if ((slots[s] >= 0) == used)
			return s;
	}
	return -1;
}

static int pick_fd(void)
{
	int start = (int)below(NFDS);

	for (int i = 0; i < NFDS; i++)
		if (fds[(start + i) % NFDS].fd >= 0)
			return (start + i) % NFDS;
	return -1;
}

static void op_create(void)
{
	int s = pick_slot(false), ino;
	char path[4200];
	int fd;

	if (s < 0 || (ino = new_inode()) < 0)
		return;
	slot_path(s, path, sizeof(path));
	note(ino, "create %s", path + strlen(root) + 1);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		fail(ino, "create %s: %s", path, strerror(errno));
	inodes[ino].nlink = 1;
	slots[s] = ino;
	for (int i = 0; i < NFDS; i++) {
		if (fds[i].fd < 0) {
			fds[i].fd = fd;
			fds[i].ino = ino;
			fds[i].append = false;
			return;
		}
	}
	close(fd);
}

static void op_open(void)
{
	int s = pick_slot(true), i;
	char path[4200];

	for (i = 0; i < NFDS && fds[i].fd >= 0; i++)
		;
	if (s < 0 || i == NFDS)
		return;
	int flags = O_RDWR;
	switch (below(6)) {
	case 0:
		flags |= O_TRUNC;
		break;
	case 1:
		flags |= O_APPEND;
		break;
	}
	slot_path(s, path, sizeof(path));
	note(slots[s], "open %s%s%s (size %zu)", path + strlen(root) + 1,
	     flags & O_TRUNC ? " O_TRUNC" : "", flags & O_APPEND ? " O_APPEND" : "",
	     inodes[slots[s]].size);
	fds[i].fd = open(path, flags);
	if (fds[i].fd < 0)
		fail(slots[s], "open %s: %s", path, strerror(errno));
	fds[i].ino = slots[s];
	fds[i].append = flags & O_APPEND;
	if (flags & O_TRUNC)
		model_resize(&inodes[slots[s]], 0);
}

static void op_close(void)
{
	int i = pick_fd();

	if (i < 0)
		return;
	note(fds[i].ino, "close");
	if (close(fds[i].fd) < 0)
		fail(fds[i].ino, "close: %s", strerror(errno));
	fds[i].fd = -1;
	maybe_free(fds[i].ino);
}

static size_t pick_offset(const struct inode *in)
{
	switch (below(6)) {
	case 0:
		return in->size; /* append */
	case 1:
		return below(in->size + 1); /* inside */
	case 2:
		return in->size + below(3 * BLOCK); /* past EOF: hole */
	case 3: {				    /* at a block edge */
		size_t b = below(in->size / BLOCK + 2) * BLOCK;
		size_t d = below(64);
		return below(2) && b >= d ? b - d : b + d;
	}
	default:
		return below(max_size);
	}
}

static size_t pick_length(void)
{
	switch (below(4)) {
	case 0:
		return 1 + below(16);
	case 1:
		return 1 + below(4096);
	case 2:
		return 1 + below(BLOCK);
	default:
		return 1 + below(3 * BLOCK);
	}
}

static void op_write(void)
{
	static unsigned char buf[3 * BLOCK + 1];
	int i = pick_fd();
	struct inode *in;
	size_t off, len;
	ssize_t n;

	if (i < 0)
		return;
	in = &inodes[fds[i].ino];
	off = pick_offset(in);
	len = pick_length();
	if (off >= max_size)
		off = below(max_size);
	if (off + len > max_size)
		len = max_size - off;
	if (len == 0)
		return;
	for (size_t j = 0; j < len; j += 8) {
		uint64_t r = rnd();
		memcpy(buf + j, &r, len - j < 8 ? len - j : 8);
	}
	if (fds[i].append) {
		/* O_APPEND: the write lands at the end, whatever the offset. */
		off = in->size;
		if (off + len > max_size)
			return;
		note(fds[i].ino, "append %zu bytes (size %zu)", len, in->size);
		n = write(fds[i].fd, buf, len);
	} else {
		note(fds[i].ino, "pwrite %zu bytes at %zu (size %zu)", len, off, in->size);
		n = pwrite(fds[i].fd, buf, len, (off_t)off);
	}
	if (n < 0)
		fail(fds[i].ino, "pwrite(%zu, %zu): %s", len, off, strerror(errno));
	if ((size_t)n != len)
		fail(fds[i].ino, "pwrite(%zu, %zu) wrote %zd", len, off, n);
	if (off + len > in->size)
		model_resize(in, off + len);
	memcpy(in->data + off, buf, len);
}

static size_t pick_size(const struct inode *in)
{
	switch (below(5)) {
	case 0:
		return 0;
	case 1:
		return below(in->size + 1);
	case 2:
		return in->size + below(2 * BLOCK);
	case 3: {
		size_t b = below(in->size / BLOCK + 2) * BLOCK;
		return below(2) && b ? b - 1 : b + below(2);
	}
	default:
		return below(max_size);
	}
}

static void op_truncate(void)
{
	bool by_path = below(2);
	int s = -1, i = -1, ino;
	size_t size;
	char path[4200];

	if (by_path) {
		if ((s = pick_slot(true)) < 0)
			return;
		ino = slots[s];
	} else {
		if ((i = pick_fd()) < 0)
			return;
		ino = fds[i].ino;
	}
	size = pick_size(&inodes[ino]);
	if (size > max_size)
		size = max_size;
	if (by_path) {
		slot_path(s, path, sizeof(path));
		note(ino, "truncate %s to %zu (size %zu)", path + strlen(root) + 1, size,
		     inodes[ino].size);
		if (truncate(path, (off_t)size) < 0)
			fail(ino, "truncate %s %zu: %s", path, size, strerror(errno));
	} else {
		note(ino, "ftruncate to %zu (size %zu)", size, inodes[ino].size);
		if (ftruncate(fds[i].fd, (off_t)size) < 0)
			fail(ino, "ftruncate %zu: %s", size, strerror(errno));
	}
	model_resize(&inodes[ino], size);
}

static void op_rename(void)
{
	int a = pick_slot(true), b = (int)below(NSLOTS);
	char pa[4200], pb[4200];
	int x, y;

	if (a < 0 || a == b)
		return;
	x = slots[a];
	y = slots[b];
	slot_path(a, pa, sizeof(pa));
	slot_path(b, pb, sizeof(pb));
	note(x, "rename %s -> %s (#%u)", pa + strlen(root) + 1, pb + strlen(root) + 1,
	     y >= 0 ? inodes[y].id : 0);
	if (y >= 0)
		note(y, "replaced by rename %s -> %s (#%u)", pa + strlen(root) + 1,
		     pb + strlen(root) + 1, inodes[x].id);
	if (rename(pa, pb) < 0)
		fail(x, "rename %s %s: %s", pa, pb, strerror(errno));
	if (y == x)
		return; /* two links of one inode: POSIX says do nothing */
	slots[b] = x;
	slots[a] = -1;
	if (y >= 0) {
		inodes[y].nlink--;
		maybe_free(y);
	}
}

static void op_link(void)
{
	int a = pick_slot(true), b = pick_slot(false);
	char pa[4200], pb[4200];

	if (a < 0 || b < 0)
		return;
	slot_path(a, pa, sizeof(pa));
	slot_path(b, pb, sizeof(pb));
	note(slots[a], "link %s %s", pa + strlen(root) + 1, pb + strlen(root) + 1);
	if (link(pa, pb) < 0)
		fail(slots[a], "link %s %s: %s", pa, pb, strerror(errno));
	slots[b] = slots[a];
	inodes[slots[a]].nlink++;
}

static void op_unlink(void)
{
	int s = pick_slot(true), ino;
	char path[4200];

	if (s < 0)
		return;
	ino = slots[s];
	slot_path(s, path, sizeof(path));
	note(ino, "unlink %s (nlink %u)", path + strlen(root) + 1, inodes[ino].nlink);
	if (unlink(path) < 0)
		fail(ino, "unlink %s: %s", path, strerror(errno));
	slots[s] = -1;
	inodes[ino].nlink--;
	maybe_free(ino);
}

static void op_fsync(void)
{
	int i = pick_fd();

	if (i < 0)
		return;
	note(fds[i].ino, "fsync");
	if ((below(2) ? fsync(fds[i].fd) : fdatasync(fds[i].fd)) < 0)
		fail(fds[i].ino, "fsync: %s", strerror(errno));
}

static void op_read_fd(void)
{
	int i = pick_fd();
	struct stat st;
	struct inode *in;

	if (i < 0)
		return;
	in = &inodes[fds[i].ino];
	if (fstat(fds[i].fd, &st) < 0)
		fail(fds[i].ino, "fstat: %s", strerror(errno));
	check_stat(fds[i].ino, &st, "fstat of an open descriptor");
	check_bytes(fds[i].ino, fds[i].fd, below(in->size + 1), below(2 * BLOCK),
		    "read through an open descriptor");
}

static void op_verify_slot(void)
{
	verify_slot((int)below(NSLOTS), below(4) == 0);
}

static const struct {
	void (*fn)(void);
	unsigned weight;
} ops[] = {
    {op_create, 6},   {op_open, 6},	{op_close, 5},	      {op_write, 30},
    {op_truncate, 8}, {op_rename, 8},	{op_link, 5},	      {op_unlink, 6},
    {op_fsync, 4},    {op_read_fd, 10}, {op_verify_slot, 12},
};

static void write_manifest(const char *dir, const char *path)
{
	FILE *m = fopen(path, "w");

	if (!m)
		fail(-1, "%s: %s", path, strerror(errno));
	for (int s = 0; s < NSLOTS; s++) {
		char p[4200];
		struct inode *in;
		if (slots[s] < 0)
			continue;
		in = &inodes[slots[s]];
		slot_path(s, p, sizeof(p));
		manifest_line(m, p + strlen(dir) + 1, in->data, in->size, in->nlink);
	}
	if (fclose(m))
		fail(-1, "%s: %s", path, strerror(errno));
}

static void setup_dirs(void)
{
	char path[4200];

	if (mkdir(root, 0755) < 0)
		fail(-1, "mkdir %s: %s", root, strerror(errno));
	for (int d = 0; d < NDIRS; d++) {
		snprintf(path, sizeof(path), "%s/d%d", root, d);
		if (mkdir(path, 0755) < 0)
			fail(-1, "mkdir %s: %s", path, strerror(errno));
	}
}

int main(int argc, char **argv)
{
	unsigned total = 0;
	uint64_t nops;

	if (argc == 4 && !strcmp(argv[1], "--check"))
		return manifest_check(argv[2], argv[3]);
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: fs-stress DIR SEED OPS [MAX_FILE_SIZE [MANIFEST]]\n"
				"       fs-stress --check DIR MANIFEST\n");
		return 2;
	}
	seed = strtoull(argv[2], NULL, 0);
	nops = strtoull(argv[3], NULL, 0);
	if (argc >= 5)
		max_size = strtoull(argv[4], NULL, 0);
	if (max_size < 4096)
		max_size = 4096;
	rng = seed;
	snprintf(root, sizeof(root), "%s/stress.%" PRIu64, argv[1], seed);
	for (int s = 0; s < NSLOTS; s++)
		slots[s] = -1;
	for (int i = 0; i < NFDS; i++)
		fds[i].fd = -1;
	setup_dirs();
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		total += ops[i].weight;
	for (opno = 1; opno <= nops; opno++) {
		unsigned r = (unsigned)below(total);
		size_t k = 0;
		while (r >= ops[k].weight)
			r -= ops[k++].weight;
		ops[k].fn();
		if (opno % 1000 == 0)
			verify_all();
	}
	opno = nops;
	verify_all();
	if (argc == 6)
		write_manifest(argv[1], argv[5]);
	printf("fs-stress: %" PRIu64 " operations (seed %" PRIu64 ") verified\n", nops, seed);
	return 0;
}
