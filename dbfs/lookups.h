/*
 * Kernel lookup counts per inode.
 *
 * The kernel holds a reference for every entry we return from lookup,
 * create, mknod, mkdir, symlink, link and readdirplus, and gives them back
 * in forget. An inode whose last link is removed lives on while the kernel
 * still holds references (an open file, a cwd); it is destroyed when the
 * count drops to zero. The table is in memory only: after a restart the
 * kernel holds nothing, and the orphan table reclaims what was left.
 */
#ifndef DBFS_LOOKUPS_H
#define DBFS_LOOKUPS_H

#include <pthread.h>
#include <stdint.h>

struct dbfs_lookup;

struct dbfs_lookups {
	pthread_mutex_t lock;
	struct dbfs_lookup **slots;
	uint64_t nslots;   /* power of two */
	uint64_t count;
	/* Spare entries for when malloc fails: the entry of a create, mkdir or
	 * link is counted after its commit, when refusing would tell the
	 * kernel that an operation which happened did not. */
	struct dbfs_lookup *spare;
	unsigned nspare;
};

int dbfs_lookups_init(struct dbfs_lookups *t);
void dbfs_lookups_destroy(struct dbfs_lookups *t);
/* Add n references to ino. Returns 0, or -ENOMEM when malloc failed and
 * the spare entries (refilled as memory allows) are used up. */
int dbfs_lookups_ref(struct dbfs_lookups *t, uint64_t ino, uint64_t n);
/* Drop n references; returns the count left (0: the kernel forgot it). */
uint64_t dbfs_lookups_unref(struct dbfs_lookups *t, uint64_t ino, uint64_t n);
/* Current count (0 if unknown). */
uint64_t dbfs_lookups_count(struct dbfs_lookups *t, uint64_t ino);

#endif
