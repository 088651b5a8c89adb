/* Manifests of stress runs (see manifest.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

uint64_t fnv(const unsigned char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

void manifest_line(FILE *m, const char *rel, const unsigned char *data, size_t size, unsigned nlink)
{
	fprintf(m, "%s %zu %u %016" PRIx64 "\n", rel, size, nlink, fnv(data, size, FNV_INIT));
}

int manifest_check(const char *dir, const char *path)
{
	static unsigned char buf[1 << 16];
	FILE *m = fopen(path, "r");
	char name[4096], p[8200];
	unsigned long long size, hash;
	unsigned nlink;
	int bad = 0, n = 0;

	if (!m) {
		fprintf(stderr, "stress: %s: %s\n", path, strerror(errno));
		return 1;
	}
	while (fscanf(m, "%4095s %llu %u %llx", name, &size, &nlink, &hash) == 4) {
		struct stat st;
		uint64_t h = FNV_INIT;
		ssize_t r;
		int fd;
		n++;
		snprintf(p, sizeof(p), "%s/%s", dir, name);
		if ((fd = open(p, O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "stress: %s: %s\n", p, strerror(errno));
			bad++;
			continue;
		}
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			h = fnv(buf, (size_t)r, h);
		if (r < 0 || (unsigned long long)st.st_size != size || st.st_nlink != nlink ||
		    h != hash) {
			fprintf(stderr,
				"stress: %s: size %lld nlink %lu hash %016" PRIx64
				" (read %s), expected %llu %u %016llx\n",
				p, (long long)st.st_size, (unsigned long)st.st_nlink, h,
				r < 0 ? strerror(errno) : "ok", size, nlink, hash);
			bad++;
		}
		close(fd);
	}
	fclose(m);
	printf("stress: %d files checked against %s, %d differ\n", n, path, bad);
	return bad ? 1 : 0;
}
