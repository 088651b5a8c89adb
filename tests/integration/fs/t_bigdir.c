/* A large directory: create N entries, list them (each exactly once), look
 * some up, then remove them all. Usage: t_bigdir MOUNT OUTSIDE N */
#include "check.h"

#include <dirent.h>

static int cmp_ino(const void *a, const void *b)
{
	ino_t x = *(const ino_t *)a, y = *(const ino_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	long n = argc > 3 ? atol(argv[3]) : 20000;
	CHECK(n > 0);
	CHECK(mkdir("big", 0755) == 0);
	CHECK(chdir("big") == 0);
	char name[64];
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "entry-with-a-longish-name-%08ld", i);
		int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			fail("creating entry %ld of %ld: %s", i, n, strerror(errno));
		CHECK(close(fd) == 0);
	}
	printf("created %ld entries\n", n);

	unsigned char *seen = calloc((size_t)n, 1);
	ino_t *inos = calloc((size_t)n, sizeof *inos);
	CHECK(seen && inos);
	DIR *d = opendir(".");
	CHECK(d != NULL);
	struct dirent *e;
	long count = 0;
	while ((errno = 0, e = readdir(d)) != NULL) {
		long k;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (sscanf(e->d_name, "entry-with-a-longish-name-%ld", &k) != 1 || k < 0 ||
		    k >= n)
			fail("unexpected entry '%s'", e->d_name);
		if (seen[k]++)
			fail("entry %ld listed twice", k);
		inos[count] = e->d_ino;
		count++;
	}
	int rd_err = errno;
	CHECK_EQ(rd_err, 0);
	CHECK(closedir(d) == 0);
	CHECK_EQ(count, n);
	OK("readdir lists every entry once");
	qsort(inos, (size_t)n, sizeof *inos, cmp_ino);
	for (long i = 1; i < n; i++)
		if (inos[i] == inos[i - 1])
			fail("two entries share inode number %llu", (unsigned long long)inos[i]);
	free(inos);
	OK("inode numbers are unique");

	struct stat st;
	for (long i = 0; i < n; i += 7) {
		snprintf(name, sizeof name, "entry-with-a-longish-name-%08ld", i);
		CHECK(stat(name, &st) == 0);
		snprintf(name, sizeof name, "entry-with-a-longish-name-%08ldx", i);
		CHECK_ERR(stat(name, &st), ENOENT);
	}
	OK("lookups of present and absent names");

	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "entry-with-a-longish-name-%08ld", i);
		if (unlink(name) != 0)
			fail("unlink of entry %ld: %s", i, strerror(errno));
	}
	d = opendir(".");
	CHECK(d != NULL);
	count = 0;
	while ((e = readdir(d)) != NULL)
		count++;
	CHECK(closedir(d) == 0);
	CHECK_EQ(count, 2);
	CHECK(chdir("..") == 0);
	CHECK(rmdir("big") == 0);
	free(seen);
	OK("removed every entry");
	return 0;
}
