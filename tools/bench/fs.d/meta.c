/* Metadata micro-benchmark used by tools/bench/fs.
 * Usage: meta DIR N
 * Creates DIR, then in DIR creates N empty files, stats them, unlinks them
 * (three separately timed phases, same names, same order), removes DIR, and
 * prints "create SECONDS\nstat SECONDS\nunlink SECONDS\n".
 * Any failed call is fatal (exit 1) with the file name and errno. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *name)
{
	fprintf(stderr, "meta: %s %s: %s\n", what, name, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: meta DIR N\n");
		return 2;
	}
	const char *dir = argv[1];
	long n = strtol(argv[2], NULL, 10);
	char name[64];
	struct stat st;
	double t0, t1, t2, t3;

	if (mkdir(dir, 0755) != 0)
		die("mkdir", dir);
	if (chdir(dir) != 0)
		die("chdir", dir);

	t0 = now();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%07ld", i);
		int fd = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			die("create", name);
		if (close(fd) != 0)
			die("close", name);
	}
	t1 = now();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%07ld", i);
		if (stat(name, &st) != 0)
			die("stat", name);
		if (st.st_size != 0) {
			errno = EINVAL;
			die("stat (size != 0)", name);
		}
	}
	t2 = now();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%07ld", i);
		if (unlink(name) != 0)
			die("unlink", name);
	}
	t3 = now();

	if (chdir("..") != 0)
		die("chdir", "..");
	if (rmdir(dir) != 0)
		die("rmdir", dir);
	printf("create %.6f\nstat %.6f\nunlink %.6f\n", t1 - t0, t2 - t1, t3 - t2);
	return 0;
}
