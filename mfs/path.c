/* Path resolution that keeps out of the manager mount (see path.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "path.h"

/* A dead FUSE mount answers ENOTCONN, or ECONNABORTED while the kernel
 * tears down the io_uring queues of its server: report both as ENOTCONN. */
static int dead_or(int rc)
{
	return rc == -ECONNABORTED ? -ENOTCONN : rc;
}

#define MAX_LINKS 40

int mfs_path_resolve(const char *path, dev_t avoid, char *out, size_t cap)
{
	char *rest = malloc(2 * PATH_MAX), *cur = malloc(PATH_MAX), *link = malloc(PATH_MAX);
	char *next = malloc(2 * PATH_MAX);
	int links = 0, rc = 0;
	struct stat st;

	if (!rest || !cur || !link || !next) {
		rc = -ENOMEM;
		goto out;
	}
	out[0] = '\0';
	if (path[0] != '/') {
		rc = -EINVAL;
		goto out;
	}
	if (strlen(path) >= PATH_MAX) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	strcpy(rest, path);
	strcpy(cur, "/");
	char *p = rest;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		bool last = !end || !end[strspn(end, "/")];
		char name[NAME_MAX + 1];
		if (n > NAME_MAX) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			char *slash = strrchr(cur, '/');
			if (slash == cur)
				cur[1] = '\0';
			else
				*slash = '\0';
			continue;
		}
		/* about to look inside cur: never on the avoided device */
		if (stat(cur, &st) < 0) {
			rc = -errno;
			goto out;
		}
		if (st.st_dev == avoid) {
			rc = -EXDEV;
			goto out;
		}
		size_t clen = strlen(cur);
		if (clen + 1 + n + 1 > PATH_MAX) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		if (clen > 1)
			cur[clen++] = '/';
		strcpy(cur + clen, name);
		if (lstat(cur, &st) < 0) {
			rc = dead_or(-errno);
			if ((rc == -ENOENT || rc == -ENOTCONN) && last)
				snprintf(out, cap, "%s", cur);
			goto out;
		}
		if (!S_ISLNK(st.st_mode)) {
			if (!last && !S_ISDIR(st.st_mode)) {
				rc = -ENOTDIR;
				goto out;
			}
			continue;
		}
		if (++links > MAX_LINKS) {
			rc = -ELOOP;
			goto out;
		}
		ssize_t ln = readlink(cur, link, PATH_MAX - 1);
		if (ln < 0) {
			rc = -errno;
			goto out;
		}
		link[ln] = '\0';
		/* drop the link's own name, continue with its target then the rest */
		cur[clen > 1 ? clen - 1 : 1] = '\0';
		if (link[0] == '/')
			strcpy(cur, "/");
		if (ln + 1 + strlen(p) + 1 > 2 * PATH_MAX) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		snprintf(next, 2 * PATH_MAX, "%s/%s", link, p);
		strcpy(rest, next);
		p = rest;
	}
	if (stat(cur, &st) < 0) {
		rc = dead_or(-errno);
		if (rc == -ENOTCONN)
			snprintf(out, cap, "%s", cur);
		goto out;
	}
	if (st.st_dev == avoid) {
		rc = -EXDEV;
		goto out;
	}
	if (strlen(cur) >= cap) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	strcpy(out, cur);
out:
	free(rest);
	free(cur);
	free(link);
	free(next);
	return rc;
}
