/* Several processes at once: creating, writing and renaming in one directory,
 * pwrite into disjoint ranges of one file, and the atomic-replace pattern
 * (write a temporary file, rename it over the target) against readers that
 * must never miss the target or see a partial file. */
#include "check.h"

#include <dirent.h>

#define PROCS 4
#define FILES 300
#define CHUNK 65536

static pid_t spawn(void (*fn)(int), int arg)
{
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid, const char *what)
{
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("%s: a child failed (status 0x%x)", what, status);
}

static void creator(int id)
{
	char tmp[64], name[64], buf[256];
	for (int i = 0; i < FILES; i++) {
		snprintf(tmp, sizeof tmp, "cd/.tmp-%d-%d", id, i);
		snprintf(name, sizeof name, "cd/p%d-f%d", id, i);
		int len = snprintf(buf, sizeof buf, "process %d file %d\n", id, i);
		write_file(tmp, buf, (size_t)len, 0644);
		CHECK(rename(tmp, name) == 0);
		if (i % 3 == 0) {
			snprintf(tmp, sizeof tmp, "cd/p%d-l%d", id, i);
			CHECK(link(name, tmp) == 0);
		}
		if (i % 5 == 0) {
			snprintf(tmp, sizeof tmp, "cd/p%d-d%d", id, i);
			CHECK(mkdir(tmp, 0755) == 0);
		}
	}
}

static void test_same_dir(void)
{
	CHECK(mkdir("cd", 0755) == 0);
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++)
		pids[p] = spawn(creator, p);
	for (int p = 0; p < PROCS; p++)
		reap(pids[p], "concurrent creators");
	char name[64], want[256];
	int files = 0, links = 0, dirs = 0;
	DIR *d = opendir("cd");
	CHECK(d != NULL);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int p, i;
		if (sscanf(e->d_name, "p%d-f%d", &p, &i) == 2)
			files++;
		else if (sscanf(e->d_name, "p%d-l%d", &p, &i) == 2)
			links++;
		else if (sscanf(e->d_name, "p%d-d%d", &p, &i) == 2)
			dirs++;
		else if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			fail("unexpected entry cd/%s", e->d_name);
	}
	CHECK(closedir(d) == 0);
	CHECK_EQ(files, PROCS * FILES);
	CHECK_EQ(links, PROCS * FILES / 3);
	CHECK_EQ(dirs, PROCS * FILES / 5);
	CHECK_EQ(stat_of("cd").st_nlink, 2 + PROCS * FILES / 5);
	for (int p = 0; p < PROCS; p++)
		for (int i = 0; i < FILES; i++) {
			snprintf(name, sizeof name, "cd/p%d-f%d", p, i);
			int len = snprintf(want, sizeof want, "process %d file %d\n", p, i);
			size_t got;
			char *s = read_file(name, &got);
			if (got != (size_t)len || memcmp(s, want, got) != 0)
				fail("%s holds '%s'", name, s);
			free(s);
			CHECK_EQ(stat_of(name).st_nlink, i % 3 == 0 ? 2 : 1);
		}
	OK("concurrent create, rename, link, mkdir in one directory");
}

static void region_writer(int id)
{
	int fd = open("shared", O_WRONLY);
	CHECK(fd >= 0);
	uint8_t buf[CHUNK];
	/* Interleaved chunks: process id owns chunks id, id+PROCS, ... */
	for (int c = id; c < 64; c += PROCS) {
		fill_pattern(buf, CHUNK, 31, (uint64_t)c * CHUNK);
		pwrite_all(fd, buf, CHUNK, (off_t)c * CHUNK);
	}
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
}

static void test_one_file(void)
{
	write_file("shared", "", 0, 0644);
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++)
		pids[p] = spawn(region_writer, p);
	for (int p = 0; p < PROCS; p++)
		reap(pids[p], "concurrent pwrite");
	uint8_t *buf = malloc(64 * CHUNK);
	CHECK(buf);
	int fd = open("shared", O_RDONLY);
	CHECK(fd >= 0);
	drop_cache(fd);
	CHECK_EQ(pread_all(fd, buf, 64 * CHUNK, 0), 64 * CHUNK);
	long long bad = pattern_mismatch(buf, 64 * CHUNK, 31, 0);
	if (bad >= 0)
		fail("shared: byte %lld wrong after concurrent pwrites", bad);
	CHECK(close(fd) == 0);
	free(buf);
	OK("concurrent pwrite to disjoint ranges of one file");
}

enum { VERSIONS = 1000, VSIZE = 10000 };

static void replacer(int unused)
{
	(void)unused;
	uint8_t buf[VSIZE];
	for (int v = 1; v <= VERSIONS; v++) {
		memset(buf, (uint8_t)v, VSIZE);
		memcpy(buf, &v, sizeof v);
		write_file("target.tmp", buf, VSIZE, 0644);
		CHECK(rename("target.tmp", "target") == 0);
	}
	write_file("replacer.done", "", 0, 0644);
}

static void test_atomic_replace(void)
{
	uint8_t buf[VSIZE + 1];
	int v0 = 0;
	memset(buf, 0, VSIZE);
	memcpy(buf, &v0, sizeof v0);
	write_file("target", buf, VSIZE, 0644);
	pid_t pid = spawn(replacer, 0);
	int reads = 0, last = 0;
	for (;;) {
		int done = access("replacer.done", F_OK) == 0;
		int fd = open("target", O_RDONLY);
		if (fd < 0)
			fail("open(target) failed with errno %d (%s) during rename-over (after "
			     "%d reads)",
			     errno, strerror(errno), reads);
		size_t n = pread_all(fd, buf, VSIZE + 1, 0);
		CHECK(close(fd) == 0);
		int v;
		memcpy(&v, buf, sizeof v);
		if (n != VSIZE)
			fail("target had %zu bytes (version %d), expected %d", n, v, VSIZE);
		for (size_t i = sizeof v; i < VSIZE; i++)
			if (buf[i] != (uint8_t)v)
				fail("target version %d is mixed at byte %zu", v, i);
		if (v < last)
			fail("target went back from version %d to %d", last, v);
		last = v;
		reads++;
		if (done)
			break;
	}
	reap(pid, "atomic replace");
	CHECK_EQ(last, VERSIONS);
	printf("%d reads during %d rename-overs\n", reads, VERSIONS);
	OK("rename over a file is atomic for readers");
}

enum { STABLE = 1500, CHURN_ROUNDS = 20 };

/* Creates and removes entries as fast as it can until told to stop. */
static void churner(int unused)
{
	(void)unused;
	char name[64];
	for (long i = 0; access("rd/.stop", F_OK) != 0; i++) {
		snprintf(name, sizeof name, "rd/churn-%ld", i);
		write_file(name, "", 0, 0644);
		if (i >= 50) {
			snprintf(name, sizeof name, "rd/churn-%ld", i - 50);
			CHECK(unlink(name) == 0);
		}
	}
}

/* readdir passes by one process while another adds and removes entries in
 * the same directory: every stable entry is listed exactly once per pass. */
static void test_readdir_vs_churn(void)
{
	CHECK(mkdir("rd", 0755) == 0);
	char name[64];
	for (int i = 0; i < STABLE; i++) {
		snprintf(name, sizeof name, "rd/stable-%d", i);
		write_file(name, "", 0, 0644);
	}
	pid_t pid = spawn(churner, 0);
	static unsigned char seen[STABLE];
	for (int round = 0; round < CHURN_ROUNDS; round++) {
		memset(seen, 0, sizeof seen);
		DIR *d = opendir("rd");
		CHECK(d != NULL);
		struct dirent *e;
		while ((errno = 0, e = readdir(d)) != NULL) {
			int k;
			if (sscanf(e->d_name, "stable-%d", &k) == 1 && k >= 0 && k < STABLE)
				if (seen[k]++)
					fail("round %d: stable-%d listed twice", round, k);
		}
		int err = errno;
		CHECK_EQ(err, 0);
		CHECK(closedir(d) == 0);
		for (int k = 0; k < STABLE; k++)
			if (seen[k] != 1)
				fail("round %d: stable-%d listed %d times while another process "
				     "changed the directory",
				     round, k, seen[k]);
	}
	write_file("rd/.stop", "", 0, 0644);
	reap(pid, "churner");
	OK("readdir while another process adds and removes entries");
}

enum { BIG_MIB = 24 };

/* Writes a BIG_MIB file in 1 MiB pieces (fsync every 4 MiB). */
static void big_writer(int id)
{
	char name[32];
	snprintf(name, sizeof name, "grow%d", id);
	uint8_t *buf = malloc(1 << 20);
	CHECK(buf);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	for (int m = 0; m < BIG_MIB; m++) {
		fill_pattern(buf, 1 << 20, 60 + (uint32_t)id, (uint64_t)m << 20);
		pwrite_all(fd, buf, 1 << 20, (off_t)m << 20);
		if (m % 4 == 3)
			CHECK(fsync(fd) == 0);
	}
	CHECK(close(fd) == 0);
	free(buf);
}

/* Re-reads a fixed file (bypassing the page cache) until told to stop. */
static void steady_reader(int unused)
{
	(void)unused;
	uint8_t *buf = malloc(1 << 20);
	CHECK(buf);
	while (access("grow.stop", F_OK) != 0) {
		int fd = open("steady", O_RDONLY);
		CHECK(fd >= 0);
		CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
		CHECK_EQ(pread_all(fd, buf, 1 << 20, 0), 1 << 20);
		if (pattern_mismatch(buf, 1 << 20, 59, 0) >= 0)
			fail("steady file changed while other files grew the store");
		CHECK(close(fd) == 0);
	}
	free(buf);
}

/* Several writers grow the store well past its first size while a reader
 * keeps reading: nothing is lost or mixed up while the map grows. */
static void test_growth(void)
{
	uint8_t *buf = malloc(1 << 20);
	CHECK(buf);
	fill_pattern(buf, 1 << 20, 59, 0);
	write_file("steady", buf, 1 << 20, 0644);
	pid_t reader = spawn(steady_reader, 0);
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++)
		pids[p] = spawn(big_writer, p);
	for (int p = 0; p < PROCS; p++)
		reap(pids[p], "growing writers");
	write_file("grow.stop", "", 0, 0644);
	reap(reader, "steady reader");
	for (int p = 0; p < PROCS; p++) {
		char name[32];
		snprintf(name, sizeof name, "grow%d", p);
		int fd = open(name, O_RDONLY);
		CHECK(fd >= 0);
		drop_cache(fd);
		for (int m = 0; m < BIG_MIB; m++) {
			CHECK_EQ(pread_all(fd, buf, 1 << 20, (off_t)m << 20), 1 << 20);
			long long bad = pattern_mismatch(buf, 1 << 20, 60 + (uint32_t)p,
							 (uint64_t)m << 20);
			if (bad >= 0)
				fail("%s: byte %lld wrong", name, ((long long)m << 20) + bad);
		}
		CHECK(close(fd) == 0);
		CHECK(unlink(name) == 0);
	}
	free(buf);
	OK("concurrent writers growing the store, with a reader");
}

enum { APPENDS = 1000, LINE = 32 };

static void appender(int id)
{
	int fd = open("log", O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	char line[LINE + 1];
	for (int i = 0; i < APPENDS; i++) {
		snprintf(line, sizeof line, "writer %d line %06d ..........\n", id, i);
		CHECK_EQ(strlen(line), LINE);
		CHECK_EQ(write(fd, line, LINE), LINE);
	}
	CHECK(close(fd) == 0);
}

/* Appends from several processes interleave whole: no line lost or torn. */
static void test_appenders(void)
{
	write_file("log", "", 0, 0644);
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++)
		pids[p] = spawn(appender, p);
	for (int p = 0; p < PROCS; p++)
		reap(pids[p], "appenders");
	size_t len;
	char *s = read_file("log", &len);
	CHECK_EQ(len, (size_t)PROCS * APPENDS * LINE);
	int next[PROCS] = { 0 };
	for (size_t off = 0; off < len; off += LINE) {
		int id, i;
		if (sscanf(s + off, "writer %d line %d", &id, &i) != 2 || id < 0 || id >= PROCS ||
		    s[off + LINE - 1] != '\n')
			fail("log: torn line at offset %zu", off);
		if (i != next[id])
			fail("log: writer %d line %d where %d was expected", id, i, next[id]);
		next[id]++;
	}
	free(s);
	OK("concurrent O_APPEND writers");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_same_dir();
	test_one_file();
	test_atomic_replace();
	test_readdir_vs_churn();
	test_growth();
	test_appenders();
	return 0;
}
