/* Directories: mkdir, rmdir, link counts, readdir (types, inode numbers,
 * stable offsets under concurrent change), `.` and `..` after renames. */
#include "check.h"

#include <dirent.h>
#include <sys/syscall.h>

static void test_mkdir_rmdir(void)
{
	CHECK(mkdir("d", 0751) == 0);
	struct stat st = stat_of("d");
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0751);
	CHECK_EQ(st.st_nlink, 2);
	CHECK_EQ(st.st_uid, geteuid());
	nlink_t parent = stat_of(".").st_nlink;
	CHECK(mkdir("d/sub", 0755) == 0);
	CHECK_EQ(stat_of("d").st_nlink, 3);
	CHECK(mkdir("d/sub2", 0755) == 0);
	CHECK_EQ(stat_of("d").st_nlink, 4);
	/* Files do not count in a directory's link count. */
	write_file("d/file", "x", 1, 0644);
	CHECK_EQ(stat_of("d").st_nlink, 4);
	CHECK_ERR(mkdir("d", 0755), EEXIST);
	CHECK_ERR(mkdir("d/file", 0755), EEXIST);
	CHECK_ERR2(rmdir("d"), ENOTEMPTY, EEXIST);
	CHECK_ERR2(rmdir("d/sub/."), EINVAL, EBUSY);
	CHECK_ERR(rmdir("d/file"), ENOTDIR);
	CHECK_ERR(unlink("d/sub"), EISDIR);
	CHECK(rmdir("d/sub") == 0);
	CHECK_EQ(stat_of("d").st_nlink, 3);
	CHECK_ERR(stat("d/sub", &st), ENOENT);
	CHECK(rmdir("d/sub2") == 0);
	CHECK(unlink("d/file") == 0);
	CHECK_EQ(stat_of("d").st_nlink, 2);
	CHECK_EQ(stat_of(".").st_nlink, parent);
	CHECK(rmdir("d") == 0);
	CHECK_EQ(stat_of(".").st_nlink, parent - 1);
	CHECK_ERR(rmdir("d"), ENOENT);
	/* An open, removed directory: readdir ends, creating in it fails. */
	CHECK(mkdir("gone", 0755) == 0);
	int fd = open("gone", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	CHECK(rmdir("gone") == 0);
	CHECK_ERR(openat(fd, "x", O_CREAT | O_WRONLY, 0644), ENOENT);
	struct stat fst;
	CHECK(fstat(fd, &fst) == 0);
	CHECK_EQ(fst.st_nlink, 0);
	CHECK(close(fd) == 0);
	OK("mkdir, rmdir, directory link counts");
}

/* readdir of a directory with one file, one dir, one symlink, one fifo:
 * names, d_type and d_ino must match lstat. */
static void test_readdir_types(void)
{
	CHECK(mkdir("rt", 0755) == 0);
	write_file("rt/file", "", 0, 0644);
	CHECK(mkdir("rt/dir", 0755) == 0);
	CHECK(symlink("file", "rt/link") == 0);
	CHECK(mkfifo("rt/fifo", 0644) == 0);
	static const struct {
		const char *name;
		unsigned char type;
	} want[] = { { ".", DT_DIR },	  { "..", DT_DIR },   { "file", DT_REG },
		     { "dir", DT_DIR },	  { "link", DT_LNK }, { "fifo", DT_FIFO } };
	int seen[6] = { 0 };
	DIR *d = opendir("rt");
	CHECK(d != NULL);
	struct dirent *e;
	while ((errno = 0, e = readdir(d)) != NULL) {
		int i;
		for (i = 0; i < 6; i++)
			if (strcmp(e->d_name, want[i].name) == 0)
				break;
		if (i == 6)
			fail("readdir: unexpected entry '%s'", e->d_name);
		seen[i]++;
		if (e->d_type != want[i].type)
			fail("readdir: '%s' has d_type %d, expected %d", e->d_name, e->d_type,
			     want[i].type);
		char path[300];
		snprintf(path, sizeof path, "rt/%s", e->d_name);
		if (e->d_ino != stat_of(path).st_ino)
			fail("readdir: '%s' has d_ino %llu but lstat says st_ino %llu", e->d_name,
			     (unsigned long long)e->d_ino,
			     (unsigned long long)stat_of(path).st_ino);
	}
	int rd_err = errno;
	CHECK_EQ(rd_err, 0);
	CHECK(closedir(d) == 0);
	for (int i = 0; i < 6; i++)
		if (seen[i] != 1)
			fail("readdir: '%s' seen %d times", want[i].name, seen[i]);
	OK("readdir names, d_type, d_ino");
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

enum { KEEP = 2000, TMP = 1000 };

/* Read a directory in small getdents64 chunks while entries are created and
 * removed between the chunks: every untouched entry must come back exactly
 * once, no entry more than once. Then telldir/seekdir across changes. */
static void test_readdir_concurrent(void)
{
	char name[64];
	CHECK(mkdir("rc", 0755) == 0);
	CHECK(chdir("rc") == 0);
	for (int i = 0; i < KEEP; i++) {
		snprintf(name, sizeof name, "keep-%d", i);
		write_file(name, "", 0, 0644);
		if (i < TMP) {
			snprintf(name, sizeof name, "tmp-%d", i);
			write_file(name, "", 0, 0644);
		}
	}
	int keep[KEEP] = { 0 }, tmp[TMP] = { 0 }, added[TMP] = { 0 };
	int dots = 0, next_new = 0, next_del = 0;
	int fd = open(".", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	char buf[1024];
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
		CHECK(n >= 0);
		if (n == 0)
			break;
		for (long off = 0; off < n;) {
			struct linux_dirent64 *e = (void *)(buf + off);
			int k;
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				dots++;
			else if (sscanf(e->d_name, "keep-%d", &k) == 1 && k >= 0 && k < KEEP)
				keep[k]++;
			else if (sscanf(e->d_name, "tmp-%d", &k) == 1 && k >= 0 && k < TMP)
				tmp[k]++;
			else if (sscanf(e->d_name, "new-%d", &k) == 1 && k >= 0 && k < TMP)
				added[k]++;
			else
				fail("readdir: unexpected entry '%s'", e->d_name);
			off += e->d_reclen;
		}
		/* Change the directory between chunks. */
		for (int j = 0; j < 7 && next_new < TMP; j++) {
			snprintf(name, sizeof name, "new-%d", next_new++);
			write_file(name, "", 0, 0644);
		}
		for (int j = 0; j < 7 && next_del < TMP; j++) {
			snprintf(name, sizeof name, "tmp-%d", next_del++);
			CHECK(unlink(name) == 0);
		}
	}
	CHECK(close(fd) == 0);
	CHECK_EQ(dots, 2);
	for (int i = 0; i < KEEP; i++)
		if (keep[i] != 1)
			fail("readdir under concurrent change: untouched keep-%d seen %d times", i,
			     keep[i]);
	for (int i = 0; i < TMP; i++) {
		if (tmp[i] > 1)
			fail("readdir: removed tmp-%d seen %d times", i, tmp[i]);
		if (added[i] > 1)
			fail("readdir: added new-%d seen %d times", i, added[i]);
	}
	OK("readdir with concurrent add/remove");

	/* telldir/seekdir: a saved position still leads to the same entry after
	 * other entries were added and removed. */
	DIR *d = opendir(".");
	CHECK(d != NULL);
	struct dirent *e;
	for (int i = 0; i < 500; i++)
		CHECK((e = readdir(d)) != NULL);
	long pos = telldir(d);
	CHECK(pos != -1);
	CHECK((e = readdir(d)) != NULL);
	char saved[256];
	snprintf(saved, sizeof saved, "%s", e->d_name);
	char after[256];
	CHECK((e = readdir(d)) != NULL);
	snprintf(after, sizeof after, "%s", e->d_name);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof name, "late-%d", i);
		write_file(name, "", 0, 0644);
		snprintf(name, sizeof name, "new-%d", i);
		if (strcmp(name, saved) != 0 && strcmp(name, after) != 0)
			CHECK(unlink(name) == 0);
	}
	seekdir(d, pos);
	CHECK((e = readdir(d)) != NULL);
	if (strcmp(e->d_name, saved) != 0)
		fail("seekdir: entry after telldir position was '%s', now '%s'", saved,
		     e->d_name);
	CHECK((e = readdir(d)) != NULL);
	if (strcmp(e->d_name, after) != 0)
		fail("seekdir: second entry after position was '%s', now '%s'", after,
		     e->d_name);
	/* rewinddir starts over and sees the current set. */
	rewinddir(d);
	int late = 0;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "late-", 5) == 0)
			late++;
	}
	CHECK_EQ(late, 300);
	CHECK(closedir(d) == 0);
	CHECK(chdir("..") == 0);
	OK("telldir/seekdir stable across changes");
}

static ino_t ino_of(const char *path)
{
	return stat_of(path).st_ino;
}

/* d_ino of ".." as readdir reports it. */
static ino_t dotdot_dino(const char *dir)
{
	DIR *d = opendir(dir);
	CHECK(d != NULL);
	struct dirent *e;
	ino_t ino = 0;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, "..") == 0)
			ino = e->d_ino;
	CHECK(closedir(d) == 0);
	if (ino == 0)
		fail("readdir(%s) has no '..'", dir);
	return ino;
}

static void test_dot_dotdot(void)
{
	CHECK(mkdir("a", 0755) == 0);
	CHECK(mkdir("a/b", 0755) == 0);
	CHECK(mkdir("a/b/c", 0755) == 0);
	CHECK(mkdir("x", 0755) == 0);
	CHECK_EQ(ino_of("a/b/c/.."), ino_of("a/b"));
	CHECK_EQ(ino_of("a/b/."), ino_of("a/b"));
	CHECK_EQ(dotdot_dino("a/b"), ino_of("a"));
	ino_t b = ino_of("a/b"), c = ino_of("a/b/c");
	CHECK(rename("a/b", "x/b") == 0);
	CHECK_EQ(ino_of("x/b"), b);
	CHECK_EQ(ino_of("x/b/c"), c);
	CHECK_EQ(ino_of("x/b/.."), ino_of("x"));
	CHECK_EQ(ino_of("x/b/c/.."), b);
	CHECK_EQ(ino_of("x/b/c/../.."), ino_of("x"));
	CHECK_EQ(ino_of("x/b/."), b);
	CHECK_EQ(dotdot_dino("x/b"), ino_of("x"));
	CHECK_EQ(dotdot_dino("x/b/c"), b);
	CHECK_EQ(stat_of("a").st_nlink, 2);
	CHECK_EQ(stat_of("x").st_nlink, 3);
	/* Rename within the same parent, then into a sibling's child. */
	CHECK(rename("x/b", "x/bb") == 0);
	CHECK_EQ(ino_of("x/bb/.."), ino_of("x"));
	CHECK(rename("x/bb/c", "a/c") == 0);
	CHECK_EQ(ino_of("a/c/.."), ino_of("a"));
	CHECK_EQ(dotdot_dino("a/c"), ino_of("a"));
	CHECK_EQ(stat_of("a").st_nlink, 3);
	CHECK_EQ(stat_of("x/bb").st_nlink, 2);
	/* Moving the current directory of a process keeps it working. */
	CHECK(chdir("a/c") == 0);
	CHECK(rename("../../a/c", "../../x/c") == 0);
	CHECK_EQ(ino_of(".."), ino_of("../../x"));
	char cwd[4096];
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	size_t l = strlen(cwd);
	CHECK(l >= 4 && strcmp(cwd + l - 4, "/x/c") == 0);
	CHECK(chdir("../..") == 0);
	OK(". and .. after renames");
}

/* Names are byte strings: every byte but NUL and '/' is allowed and comes
 * back unchanged; deep nesting works; fsync of a directory succeeds. */
static void test_names_depth(void)
{
	char name[256];
	int n = 0;
	for (int c = 1; c < 256; c++)
		if (c != '/')
			name[n++] = (char)c;
	name[n] = 0; /* 254 bytes */
	write_file(name, "odd", 3, 0644);
	DIR *d = opendir(".");
	CHECK(d != NULL);
	struct dirent *e;
	int seen = 0;
	while ((e = readdir(d)) != NULL)
		if (memcmp(e->d_name, name, (size_t)n + 1) == 0)
			seen++;
	CHECK(closedir(d) == 0);
	CHECK_EQ(seen, 1);
	CHECK(unlink(name) == 0);
	/* Names differing only in case or by a trailing byte are distinct. */
	write_file("Case", "1", 1, 0644);
	write_file("case", "2", 1, 0644);
	write_file("case.", "3", 1, 0644);
	CHECK(stat_of("Case").st_ino != stat_of("case").st_ino);
	CHECK(stat_of("case.").st_ino != stat_of("case").st_ino);
	CHECK(unlink("Case") == 0 && unlink("case") == 0 && unlink("case.") == 0);

	for (int i = 0; i < 100; i++) {
		CHECK(mkdir("deep", 0755) == 0);
		CHECK(chdir("deep") == 0);
	}
	write_file("bottom", "b", 1, 0644);
	for (int i = 0; i < 100; i++)
		CHECK(chdir("..") == 0);
	char path[700] = "";
	for (int i = 0; i < 100; i++)
		strcat(path, "deep/");
	strcat(path, "bottom");
	CHECK(S_ISREG(stat_of(path).st_mode));

	int fd = open(".", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	CHECK(fsync(fd) == 0);
	CHECK(fdatasync(fd) == 0);
	CHECK(syncfs(fd) == 0);
	CHECK(close(fd) == 0);
	OK("byte-string names, deep nesting, directory fsync");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_mkdir_rmdir();
	test_readdir_types();
	test_readdir_concurrent();
	test_dot_dotdot();
	test_names_depth();
	return 0;
}
