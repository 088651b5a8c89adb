/* Per-operation phases for tools/bench/account/ops: one kind of request
 * per phase, so that a profiler dumping between phases counts each kind
 * apart.
 * Usage: ops DIR N
 * In DIR (made here): creates N empty files; stats them (with the mount's
 * attr_timeout=0 each stat is a GETATTR); unlinks them; then in one file of
 * 1 MiB (written first, outside the phases) writes N 4 KiB blocks and reads
 * N 4 KiB blocks, O_DIRECT (each one request). Before the first phase and
 * after each, prints the name of the phase just done ("setup" before the
 * first) on a line of its own and waits for a line on its standard input
 * (the driver dumps a profile meanwhile). It runs no command itself: a
 * child that execs while this process holds a file of the mount open
 * stalled in exec on kernel 6.18 (seen with system(), mfs and O_DIRECT).
 * Any failed call is fatal (exit 1) with the file name and errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLK 4096
#define BLKS 256

static void die(const char *what, const char *name)
{
	fprintf(stderr, "ops: %s %s: %s\n", what, name, strerror(errno));
	exit(1);
}

static void between(const char *phase)
{
	char line[16];

	printf("%s\n", phase);
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin)) {
		errno = EPIPE;
		die("between", phase);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: ops DIR N\n");
		return 2;
	}
	long n = strtol(argv[2], NULL, 10);
	char name[64];
	struct stat st;
	void *buf;

	if (mkdir(argv[1], 0755) != 0)
		die("mkdir", argv[1]);
	if (chdir(argv[1]) != 0)
		die("chdir", argv[1]);
	if (posix_memalign(&buf, BLK, BLK) != 0)
		die("posix_memalign", "");
	memset(buf, 'x', BLK);
	int fd = open("data", O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("create", "data");
	for (long i = 0; i < BLKS; i++)
		if (pwrite(fd, buf, BLK, i * BLK) != BLK)
			die("pwrite", "data");
	between("setup");

	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%07ld", i);
		int f = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (f < 0)
			die("create", name);
		if (close(f) != 0)
			die("close", name);
	}
	between("create");
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%07ld", i);
		if (stat(name, &st) != 0)
			die("stat", name);
	}
	between("stat");
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%07ld", i);
		if (unlink(name) != 0)
			die("unlink", name);
	}
	between("unlink");
	for (long i = 0; i < n; i++)
		if (pwrite(fd, buf, BLK, (i % BLKS) * BLK) != BLK)
			die("pwrite", "data");
	between("write");
	for (long i = 0; i < n; i++)
		if (pread(fd, buf, BLK, (i % BLKS) * BLK) != BLK)
			die("pread", "data");
	between("read");
	close(fd);
	return 0;
}
