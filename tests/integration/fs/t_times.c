/* Timestamps: utimensat (UTIME_NOW, UTIME_OMIT, nanoseconds), atime/mtime/
 * ctime updates as POSIX says, times set over data not yet written back. */
#include "check.h"

#include <dirent.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>

static struct timespec now(void)
{
	struct timespec ts;
	CHECK(clock_gettime(CLOCK_REALTIME, &ts) == 0);
	return ts;
}

/* a <= b for timespecs. */
static int ts_le(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec);
}

/* t must lie in [lo - 1 s, hi + 1 s]: the kernel's clock for file times is a
 * coarse clock that may lag CLOCK_REALTIME by a tick. */
static void check_recent(const char *what, struct timespec t, struct timespec lo,
			 struct timespec hi)
{
	lo.tv_sec -= 1;
	hi.tv_sec += 1;
	if (!ts_le(lo, t) || !ts_le(t, hi))
		fail("%s is %lld.%09ld, expected between %lld.%09ld and %lld.%09ld", what,
		     (long long)t.tv_sec, t.tv_nsec, (long long)lo.tv_sec, lo.tv_nsec,
		     (long long)hi.tv_sec, hi.tv_nsec);
}

static void set_times(const char *path, time_t a, time_t m)
{
	struct timespec ts[2] = { { a, 0 }, { m, 0 } };
	CHECK(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) == 0);
}

static void test_utimensat(void)
{
	write_file("t", "x", 1, 0644);
	struct timespec ts[2] = { { 1000000000, 123456789 }, { 1500000000, 987654321 } };
	CHECK(utimensat(AT_FDCWD, "t", ts, 0) == 0);
	struct stat st = stat_of("t");
	CHECK_EQ(st.st_atim.tv_sec, 1000000000);
	CHECK_EQ(st.st_atim.tv_nsec, 123456789);
	CHECK_EQ(st.st_mtim.tv_sec, 1500000000);
	CHECK_EQ(st.st_mtim.tv_nsec, 987654321);
	/* Before 1970 and after 2038. */
	struct timespec far[2] = { { -86400, 5 }, { 4102444800ll, 1 } };
	CHECK(utimensat(AT_FDCWD, "t", far, 0) == 0);
	st = stat_of("t");
	CHECK_EQ(st.st_atim.tv_sec, -86400);
	CHECK_EQ(st.st_atim.tv_nsec, 5);
	CHECK_EQ(st.st_mtim.tv_sec, 4102444800ll);
	/* UTIME_OMIT leaves that time alone. */
	struct timespec om[2] = { { 0, UTIME_OMIT }, { 1600000000, 0 } };
	CHECK(utimensat(AT_FDCWD, "t", om, 0) == 0);
	st = stat_of("t");
	CHECK_EQ(st.st_atim.tv_sec, -86400);
	CHECK_EQ(st.st_mtim.tv_sec, 1600000000);
	struct timespec om2[2] = { { 1700000000, 0 }, { 0, UTIME_OMIT } };
	CHECK(utimensat(AT_FDCWD, "t", om2, 0) == 0);
	st = stat_of("t");
	CHECK_EQ(st.st_atim.tv_sec, 1700000000);
	CHECK_EQ(st.st_mtim.tv_sec, 1600000000);
	/* UTIME_NOW sets the current time; ctime follows any change. */
	struct timespec lo = now();
	struct timespec nw[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
	CHECK(utimensat(AT_FDCWD, "t", nw, 0) == 0);
	struct timespec hi = now();
	st = stat_of("t");
	CHECK_EQ(st.st_atim.tv_sec, 1700000000);
	check_recent("mtime after UTIME_NOW", st.st_mtim, lo, hi);
	check_recent("ctime after UTIME_NOW", st.st_ctim, lo, hi);
	CHECK(utimensat(AT_FDCWD, "t", NULL, 0) == 0);
	hi = now();
	st = stat_of("t");
	check_recent("atime after utimensat(NULL)", st.st_atim, lo, hi);
	check_recent("mtime after utimensat(NULL)", st.st_mtim, lo, hi);
	/* futimens, and AT_SYMLINK_NOFOLLOW on a symlink changes the link only. */
	int fd = open("t", O_RDONLY);
	struct timespec f[2] = { { 1111111111, 0 }, { 1222222222, 0 } };
	CHECK(futimens(fd, f) == 0);
	CHECK(close(fd) == 0);
	CHECK_EQ(stat_of("t").st_mtim.tv_sec, 1222222222);
	CHECK(symlink("t", "tl") == 0);
	set_times("tl", 1333333333, 1344444444);
	CHECK_EQ(stat_of("tl").st_mtim.tv_sec, 1344444444);
	CHECK_EQ(stat_of("t").st_mtim.tv_sec, 1222222222);
	OK("utimensat: explicit, UTIME_NOW, UTIME_OMIT, nanoseconds");
}

static int mounted_noatime(void)
{
	struct statvfs sv;
	CHECK(statvfs(".", &sv) == 0);
	return (sv.f_flag & ST_NOATIME) != 0;
}

static void test_time_updates(void)
{
	const time_t old = 1000000000;
	CHECK(mkdir("tu", 0755) == 0);
	write_file("tu/f", "0123456789", 10, 0644);
	struct timespec lo, hi;
	struct stat st;

	/* write: mtime and ctime of the file. */
	set_times("tu/f", old, old);
	CHECK_EQ(stat_of("tu/f").st_ctim.tv_sec >= old, 1);
	int fd = open("tu/f", O_WRONLY);
	CHECK(fd >= 0);
	lo = now();
	CHECK_EQ(write(fd, "ab", 2), 2);
	CHECK(fsync(fd) == 0);
	hi = now();
	st = stat_of("tu/f");
	check_recent("mtime after write", st.st_mtim, lo, hi);
	check_recent("ctime after write", st.st_ctim, lo, hi);
	CHECK_EQ(st.st_atim.tv_sec, old);
	/* truncate. */
	set_times("tu/f", old, old);
	lo = now();
	CHECK(ftruncate(fd, 4) == 0);
	hi = now();
	st = stat_of("tu/f");
	check_recent("mtime after ftruncate", st.st_mtim, lo, hi);
	check_recent("ctime after ftruncate", st.st_ctim, lo, hi);
	CHECK(close(fd) == 0);
	/* O_TRUNC open of a non-empty file. */
	set_times("tu/f", old, old);
	lo = now();
	fd = open("tu/f", O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	hi = now();
	CHECK(close(fd) == 0);
	check_recent("mtime after O_TRUNC", stat_of("tu/f").st_mtim, lo, hi);
	/* POSIX: O_TRUNC marks mtime and ctime even when the file is already
	 * empty (the size does not change). */
	set_times("tu/f", old, old);
	lo = now();
	fd = open("tu/f", O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	hi = now();
	CHECK(close(fd) == 0);
	st = stat_of("tu/f");
	check_recent("mtime after O_TRUNC of an empty file", st.st_mtim, lo, hi);
	check_recent("ctime after O_TRUNC of an empty file", st.st_ctim, lo, hi);

	/* chmod changes ctime only. */
	write_file("tu/f", "0123456789", 10, 0644);
	set_times("tu/f", old, old);
	lo = now();
	CHECK(chmod("tu/f", 0600) == 0);
	hi = now();
	st = stat_of("tu/f");
	check_recent("ctime after chmod", st.st_ctim, lo, hi);
	CHECK_EQ(st.st_mtim.tv_sec, old);
	CHECK_EQ(st.st_atim.tv_sec, old);

	/* link, rename: ctime of the inode. */
	set_times("tu/f", old, old);
	lo = now();
	CHECK(link("tu/f", "tu/g") == 0);
	hi = now();
	check_recent("ctime after link", stat_of("tu/f").st_ctim, lo, hi);
	CHECK_EQ(stat_of("tu/f").st_mtim.tv_sec, old);

	/* Directory: create, unlink, rename inside update its mtime and ctime. */
	set_times("tu", old, old);
	lo = now();
	write_file("tu/new", "", 0, 0644);
	hi = now();
	st = stat_of("tu");
	check_recent("dir mtime after create", st.st_mtim, lo, hi);
	check_recent("dir ctime after create", st.st_ctim, lo, hi);
	set_times("tu", old, old);
	lo = now();
	CHECK(unlink("tu/g") == 0);
	hi = now();
	check_recent("dir mtime after unlink", stat_of("tu").st_mtim, lo, hi);
	check_recent("file ctime after unlink of a link", stat_of("tu/f").st_ctim, lo, hi);
	set_times("tu", old, old);
	lo = now();
	CHECK(rename("tu/new", "tu/new2") == 0);
	hi = now();
	check_recent("dir mtime after rename", stat_of("tu").st_mtim, lo, hi);
	set_times("tu", old, old);
	lo = now();
	CHECK(mkdir("tu/sub", 0755) == 0);
	hi = now();
	check_recent("dir mtime after mkdir", stat_of("tu").st_mtim, lo, hi);
	set_times("tu", old, old);
	lo = now();
	CHECK(rmdir("tu/sub") == 0);
	hi = now();
	check_recent("dir mtime after rmdir", stat_of("tu").st_mtim, lo, hi);
	/* Listing a directory does not change its mtime. */
	set_times("tu", old, old);
	DIR *d = opendir("tu");
	CHECK(d != NULL);
	while (readdir(d) != NULL)
		;
	CHECK(closedir(d) == 0);
	CHECK_EQ(stat_of("tu").st_mtim.tv_sec, old);
	CHECK_EQ(stat_of("tu").st_mtim.tv_nsec, 0);

	/* A new file's times are all "now". */
	lo = now();
	write_file("tu/born", "", 0, 0644);
	hi = now();
	st = stat_of("tu/born");
	check_recent("atime of a new file", st.st_atim, lo, hi);
	check_recent("mtime of a new file", st.st_mtim, lo, hi);
	check_recent("ctime of a new file", st.st_ctim, lo, hi);

	/* atime on read (relatime updates an atime older than a day). The read
	 * must reach the file system, so drop the cached pages first. */
	if (mounted_noatime()) {
		printf("skip - atime: mounted noatime\n");
	} else {
		write_file("tu/r", "readme", 6, 0644);
		fd = open("tu/r", O_RDONLY);
		CHECK(fd >= 0);
		drop_cache(fd);
		set_times("tu/r", old, old);
		lo = now();
		char buf[8];
		CHECK_EQ(read(fd, buf, sizeof buf), 6);
		hi = now();
		CHECK(close(fd) == 0);
		st = stat_of("tu/r");
		check_recent("atime after read (relatime, atime older than a day)", st.st_atim,
			     lo, hi);
		CHECK_EQ(st.st_mtim.tv_sec, old);
		/* Listing a directory marks its atime too (POSIX readdir);
		 * relatime: the atime is not newer than the mtime here. */
		CHECK(mkdir("tu/ls", 0755) == 0);
		write_file("tu/ls/e", "", 0, 0644);
		set_times("tu/ls", old, old);
		lo = now();
		d = opendir("tu/ls");
		CHECK(d != NULL);
		while (readdir(d) != NULL)
			;
		CHECK(closedir(d) == 0);
		hi = now();
		st = stat_of("tu/ls");
		check_recent("directory atime after listing it", st.st_atim, lo, hi);
		CHECK_EQ(st.st_mtim.tv_sec, old);
		/* And reading a symbolic link marks the link's (POSIX
		 * readlink). Its first reading: the kernel caches the target. */
		CHECK(symlink("target", "tu/sl") == 0);
		set_times("tu/sl", old, old);
		lo = now();
		char target[16];
		CHECK_EQ(readlink("tu/sl", target, sizeof target), 6);
		hi = now();
		CHECK(lstat("tu/sl", &st) == 0);
		check_recent("symlink atime after readlink", st.st_atim, lo, hi);
		CHECK_EQ(st.st_mtim.tv_sec, old);
	}
	OK("atime, mtime, ctime updates");
}

/* Wait (bounded) until the kernel's coarse clock has passed path's ctime, so
 * that any later change of ctime is visible as a strictly larger value. */
static struct timespec settle(const char *path)
{
	struct timespec c = stat_of(path).st_ctim, t;
	for (int i = 0; i < 2000; i++) {
		CHECK(clock_gettime(CLOCK_REALTIME_COARSE, &t) == 0);
		if (!ts_le(t, c))
			return c;
		usleep(1000);
	}
	fail("the clock did not pass the ctime of %s within 2 s", path);
}

static void ctime_advanced(const char *what, const char *path, struct timespec before)
{
	struct timespec c = stat_of(path).st_ctim;
	if (ts_le(c, before))
		fail("ctime of %s did not change on %s (still %lld.%09ld)", path, what,
		     (long long)c.tv_sec, c.tv_nsec);
}

static void ctime_same(const char *what, const char *path, struct timespec before)
{
	struct timespec c = stat_of(path).st_ctim;
	if (c.tv_sec != before.tv_sec || c.tv_nsec != before.tv_nsec)
		fail("ctime of %s changed on %s", path, what);
}

static void test_ctime_strict(void)
{
	struct timespec c;
	CHECK(mkdir("ct", 0755) == 0);
	write_file("ct/f", "0123456789", 10, 0644);
	int fd = open("ct/f", O_RDWR);
	CHECK(fd >= 0);
	c = settle("ct/f");
	CHECK_EQ(pwrite(fd, "x", 1, 0), 1);
	CHECK(fsync(fd) == 0);
	ctime_advanced("write", "ct/f", c);
	c = settle("ct/f");
	CHECK(ftruncate(fd, 5) == 0);
	ctime_advanced("ftruncate", "ct/f", c);
	c = settle("ct/f");
	CHECK(fchmod(fd, 0600) == 0);
	ctime_advanced("chmod", "ct/f", c);
	c = settle("ct/f");
	CHECK(fsetxattr(fd, "user.c", "1", 1, 0) == 0);
	ctime_advanced("setxattr", "ct/f", c);
	c = settle("ct/f");
	CHECK(link("ct/f", "ct/g") == 0);
	ctime_advanced("link", "ct/f", c);
	c = settle("ct/f");
	CHECK(unlink("ct/g") == 0);
	ctime_advanced("unlink of another link", "ct/f", c);
	c = settle("ct/f");
	CHECK(rename("ct/f", "ct/h") == 0);
	ctime_advanced("rename", "ct/h", c);
	struct timespec d = settle("ct");
	write_file("ct/new", "", 0, 0644);
	ctime_advanced("create in it", "ct", d);
	/* Reading, stat and a failed operation change nothing. */
	c = settle("ct/h");
	char buf[4];
	CHECK(pread(fd, buf, 4, 0) >= 0);
	CHECK_ERR(link("ct/h", "ct/new"), EEXIST);
	ctime_same("read and a refused link", "ct/h", c);
	CHECK(close(fd) == 0);
	OK("ctime strictly advances on write, truncate, chmod, setxattr, link, unlink, rename");
}

/* Make the kernel forget cached inodes and attributes (root only). */
static int forget_caches(void)
{
	/* this file system only (see t_forget.c) */
	int dir = open(".", O_RDONLY | O_DIRECTORY);
	if (dir >= 0) {
		syncfs(dir);
		close(dir);
	}
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return 0;
	int ok = write(fd, "2", 1) == 1;
	close(fd);
	return ok;
}

/* tar and cp -p write data and then set the times, often before the data has
 * been written back: the times set last must stick, including after the
 * kernel forgets its cached attributes. */
static void test_times_after_dirty_data(void)
{
	uint8_t *buf = malloc(300000);
	CHECK(buf);
	fill_pattern(buf, 300000, 17, 0);
	int fd = open("dirty", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	pwrite_all(fd, buf, 300000, 0);
	struct timespec ts[2] = { { 1234567890, 111 }, { 1300000000, 222 } };
	CHECK(futimens(fd, ts) == 0);
	CHECK(close(fd) == 0);
	struct stat st = stat_of("dirty");
	CHECK_EQ(st.st_mtim.tv_sec, 1300000000);
	CHECK_EQ(st.st_mtim.tv_nsec, 222);
	CHECK_EQ(st.st_size, 300000);
	if (!forget_caches()) {
		printf("skip - cannot drop the kernel's caches\n");
		free(buf);
		return;
	}
	st = stat_of("dirty");
	if (st.st_mtim.tv_sec != 1300000000 || st.st_mtim.tv_nsec != 222)
		fail("mtime set after writing is %lld.%09ld once the kernel forgot the inode, "
		     "expected 1300000000.000000222 (the write-back of the data changed it)",
		     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	CHECK_EQ(st.st_atim.tv_sec, 1234567890);
	CHECK_EQ(st.st_size, 300000);
	free(buf);
	OK("times set after writing stick once the data is written back");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_utimensat();
	test_time_updates();
	test_ctime_strict();
	test_times_after_dirty_data();
	return 0;
}
