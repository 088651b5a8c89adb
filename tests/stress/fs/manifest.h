/*
 * Manifests: what a stress program left in a directory, one line per file
 * ("path size nlink fnv1a64"), so that a later run (say, after a remount)
 * can check the files without the program's in-memory model.
 */
#ifndef MFS_TEST_MANIFEST_H
#define MFS_TEST_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FNV_INIT 0xcbf29ce484222325ull

uint64_t fnv(const unsigned char *p, size_t n, uint64_t h);
/* One line: `rel` (relative to the directory) holds data[0..size). */
void manifest_line(FILE *m, const char *rel, const unsigned char *data, size_t size,
		   unsigned nlink);
/* Check every file of manifest `path` under `dir`; prints each difference.
 * Returns 0 when all match, 1 otherwise. */
int manifest_check(const char *dir, const char *path);

#endif
