/*
 * fs-contend: concurrent writers to the same files, each in its own bytes.
 *
 *   fs-contend DIR SEED OPS [MAX_FILE_SIZE [MANIFEST]]
 *   fs-contend --check DIR MANIFEST
 *
 * NTHREADS threads share NFILES files in DIR/contend.SEED. A file is cut
 * into STRIPE-byte stripes dealt round-robin to the threads; a thread only
 * ever writes inside its own stripes (one pwrite never crosses a stripe), so
 * the final content is known although writes race: neighbours share pages
 * and 64 KiB blocks, which a file system that read-modify-writes blocks must
 * not lose. Each thread also reads back its own stripes while the others
 * write, and fsyncs now and then. At the end every byte and st_size are
 * checked; with MANIFEST the expected content is written there, for
 * --check after a remount. OPS is per thread.
 *
 * With MAX_FILE_SIZE at most SMALL_MAX, the threads work on many small
 * files instead (NSMALL_PER each, every file owned by one thread): small
 * values share LMDB leaf pages, so concurrent writes that one commit
 * groups together rewrite neighbours in the same page. Exit 0, 1 on a difference or
 * an error, 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

#define NTHREADS 4
#define NFILES	 2
#define STRIPE	 1000u /* not a divisor of a page: stripes share pages */

#define SMALL_MAX  4096u
#define NSMALL_PER 16
#define NSMALL	   (NTHREADS * NSMALL_PER)

static char root[4096];
static int small_fds[NSMALL];
static unsigned char *small_model[NSMALL];
static size_t small_size[NSMALL]; /* written by the owner thread only */
static size_t max_size = 1u << 20;
static uint64_t seed, nops;
static int fds[NFILES];
static unsigned char *model[NFILES];  /* each byte written by its owner only */
static _Atomic size_t extent[NFILES]; /* largest end written */
static atomic_int failed;

struct worker {
	int id;
	uint64_t rng;
	pthread_t tid;
};

static uint64_t rnd(struct worker *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fs-contend: FAIL (seed %" PRIu64 "): ", seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	atomic_store(&failed, 1);
}

static void grow_extent(int f, size_t end)
{
	size_t cur = atomic_load(&extent[f]);

	while (end > cur && !atomic_compare_exchange_weak(&extent[f], &cur, end))
		;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	size_t nstripes = max_size / STRIPE;
	unsigned char buf[STRIPE], back[STRIPE];

	for (uint64_t op = 0; op < nops && !atomic_load(&failed); op++) {
		int f = (int)(rnd(w) % NFILES);
		/* One of my stripes: index s with s % NTHREADS == id. */
		size_t s = (rnd(w) % (nstripes / NTHREADS)) * NTHREADS + (size_t)w->id;
		size_t a = rnd(w) % STRIPE, b = rnd(w) % STRIPE;
		size_t lo = a < b ? a : b, len = (a < b ? b - a : a - b) + 1;
		size_t off = s * STRIPE + lo;
		unsigned r = (unsigned)(rnd(w) % 16);

		if (r < 10) {
			for (size_t j = 0; j < len; j++)
				buf[j] = (unsigned char)rnd(w);
			ssize_t n = pwrite(fds[f], buf, len, (off_t)off);
			if (n != (ssize_t)len) {
				failf("thread %d: pwrite(%zu at %zu) = %zd: %s", w->id, len, off, n,
				      strerror(errno));
				break;
			}
			memcpy(model[f] + off, buf, len);
			grow_extent(f, off + len);
		} else if (r < 15) {
			/* Read back a part of my stripe that I wrote already. */
			size_t end = atomic_load(&extent[f]);
			if (off >= end)
				continue;
			if (off + len > end)
				len = end - off;
			ssize_t n = pread(fds[f], back, len, (off_t)off);
			if (n != (ssize_t)len) {
				failf("thread %d: pread(%zu at %zu) = %zd: %s", w->id, len, off, n,
				      strerror(errno));
				break;
			}
			if (memcmp(back, model[f] + off, len)) {
				size_t k = 0;
				while (back[k] == model[f][off + k])
					k++;
				failf("thread %d: file %d byte %zu is %#x, written %#x", w->id, f,
				      off + k, back[k], model[f][off + k]);
				break;
			}
		} else if (fdatasync(fds[f]) < 0) {
			failf("thread %d: fdatasync: %s", w->id, strerror(errno));
			break;
		}
	}
	return NULL;
}

/* Many small files, each written by its owner thread only. */
static void *work_small(void *arg)
{
	struct worker *w = arg;
	unsigned char buf[SMALL_MAX], back[SMALL_MAX];

	for (uint64_t op = 0; op < nops && !atomic_load(&failed); op++) {
		int f = (int)(rnd(w) % NSMALL_PER) * NTHREADS + w->id;
		size_t *size = &small_size[f];
		unsigned char *m = small_model[f];
		size_t off = rnd(w) % max_size, len = 1 + rnd(w) % 300;
		unsigned r = (unsigned)(rnd(w) % 20);

		if (off + len > max_size)
			len = max_size - off;
		if (r < 12) {
			for (size_t j = 0; j < len; j++)
				buf[j] = (unsigned char)rnd(w);
			if (pwrite(small_fds[f], buf, len, (off_t)off) != (ssize_t)len) {
				failf("thread %d: s%d: pwrite(%zu at %zu): %s", w->id, f, len, off,
				      strerror(errno));
				break;
			}
			if (off > *size)
				memset(m + *size, 0, off - *size);
			memcpy(m + off, buf, len);
			if (off + len > *size)
				*size = off + len;
		} else if (r < 15) {
			if (ftruncate(small_fds[f], (off_t)off) < 0) {
				failf("thread %d: s%d: ftruncate(%zu): %s", w->id, f, off,
				      strerror(errno));
				break;
			}
			if (off > *size)
				memset(m + *size, 0, off - *size);
			*size = off;
		} else if (r < 19) {
			ssize_t n = pread(small_fds[f], back, max_size, 0);
			if (n != (ssize_t)*size || memcmp(back, m, *size)) {
				size_t k = 0;
				while (n > 0 && k < (size_t)n && k < *size && back[k] == m[k])
					k++;
				failf(
				    "thread %d: s%d: read %zd bytes, size %zu, first difference at "
				    "byte %zu",
				    w->id, f, n, *size, k);
				break;
			}
		} else if (fdatasync(small_fds[f]) < 0) {
			failf("thread %d: s%d: fdatasync: %s", w->id, f, strerror(errno));
			break;
		}
	}
	return NULL;
}

static int verify_small(void)
{
	unsigned char back[SMALL_MAX + 1];

	for (int f = 0; f < NSMALL; f++) {
		ssize_t n = pread(small_fds[f], back, sizeof(back), 0);
		if (n != (ssize_t)small_size[f] || memcmp(back, small_model[f], small_size[f])) {
			failf("s%d: read %zd bytes, expected %zu (or the bytes differ)", f, n,
			      small_size[f]);
			return 1;
		}
	}
	return 0;
}

static int verify(void)
{
	static unsigned char buf[1 << 20];

	for (int f = 0; f < NFILES; f++) {
		struct stat st;
		size_t size = atomic_load(&extent[f]);
		if (fstat(fds[f], &st) < 0 || (size_t)st.st_size != size) {
			failf("file %d: st_size %lld, expected %zu", f, (long long)st.st_size,
			      size);
			return 1;
		}
		for (size_t off = 0; off < size; off += sizeof(buf)) {
			size_t len = size - off < sizeof(buf) ? size - off : sizeof(buf);
			if (pread(fds[f], buf, len, (off_t)off) != (ssize_t)len) {
				failf("file %d: short read at %zu", f, off);
				return 1;
			}
			if (memcmp(buf, model[f] + off, len)) {
				size_t k = 0;
				while (buf[k] == model[f][off + k])
					k++;
				failf("file %d: byte %zu (stripe %zu, thread %zu) is %#x, written "
				      "%#x",
				      f, off + k, (off + k) / STRIPE, (off + k) / STRIPE % NTHREADS,
				      buf[k], model[f][off + k]);
				return 1;
			}
		}
	}
	return 0;
}

static const char *manifest_path;

static int run_small(void)
{
	struct worker w[NTHREADS];
	char path[4200];

	for (int f = 0; f < NSMALL; f++) {
		snprintf(path, sizeof(path), "%s/s%d", root, f);
		small_fds[f] = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
		small_model[f] = calloc(1, max_size);
		if (small_fds[f] < 0 || !small_model[f]) {
			fprintf(stderr, "fs-contend: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	for (int t = 0; t < NTHREADS; t++) {
		w[t].id = t;
		w[t].rng = seed * 7919 + (uint64_t)t;
		if (pthread_create(&w[t].tid, NULL, work_small, &w[t])) {
			fprintf(stderr, "fs-contend: pthread_create failed\n");
			return 1;
		}
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(w[t].tid, NULL);
	if (atomic_load(&failed) || verify_small())
		return 1;
	if (manifest_path) {
		FILE *m = fopen(manifest_path, "w");
		if (!m)
			return 1;
		for (int f = 0; f < NSMALL; f++) {
			snprintf(path, sizeof(path), "contend.%" PRIu64 "/s%d", seed, f);
			manifest_line(m, path, small_model[f], small_size[f], 1);
		}
		if (fclose(m))
			return 1;
	}
	printf("fs-contend: %d threads x %" PRIu64 " operations on %d small files (seed %" PRIu64
	       ") verified\n",
	       NTHREADS, nops, NSMALL, seed);
	return 0;
}

int main(int argc, char **argv)
{
	struct worker w[NTHREADS];
	char path[4200];

	if (argc == 4 && !strcmp(argv[1], "--check"))
		return manifest_check(argv[2], argv[3]);
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: fs-contend DIR SEED OPS [MAX_FILE_SIZE [MANIFEST]]\n"
				"       fs-contend --check DIR MANIFEST\n");
		return 2;
	}
	seed = strtoull(argv[2], NULL, 0);
	nops = strtoull(argv[3], NULL, 0);
	if (argc >= 5)
		max_size = strtoull(argv[4], NULL, 0);
	if (argc == 6)
		manifest_path = argv[5];
	if (max_size < 16)
		max_size = 16;
	if (max_size > SMALL_MAX && max_size < NTHREADS * STRIPE)
		max_size = NTHREADS * STRIPE;
	snprintf(root, sizeof(root), "%s/contend.%" PRIu64, argv[1], seed);
	if (mkdir(root, 0755) < 0) {
		fprintf(stderr, "fs-contend: mkdir %s: %s\n", root, strerror(errno));
		return 1;
	}
	if (max_size <= SMALL_MAX)
		return run_small();
	for (int f = 0; f < NFILES; f++) {
		snprintf(path, sizeof(path), "%s/f%d", root, f);
		fds[f] = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
		model[f] = calloc(1, max_size);
		if (fds[f] < 0 || !model[f]) {
			fprintf(stderr, "fs-contend: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	for (int t = 0; t < NTHREADS; t++) {
		w[t].id = t;
		w[t].rng = seed * 7919 + (uint64_t)t;
		if (pthread_create(&w[t].tid, NULL, work, &w[t])) {
			fprintf(stderr, "fs-contend: pthread_create failed\n");
			return 1;
		}
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(w[t].tid, NULL);
	if (atomic_load(&failed) || verify())
		return 1;
	if (argc == 6) {
		FILE *m = fopen(argv[5], "w");
		if (!m)
			return 1;
		for (int f = 0; f < NFILES; f++) {
			snprintf(path, sizeof(path), "contend.%" PRIu64 "/f%d", seed, f);
			manifest_line(m, path, model[f], atomic_load(&extent[f]), 1);
		}
		if (fclose(m))
			return 1;
	}
	printf("fs-contend: %d threads x %" PRIu64 " operations (seed %" PRIu64 ") verified\n",
	       NTHREADS, nops, seed);
	return 0;
}
