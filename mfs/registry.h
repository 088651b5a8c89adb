/*
 * The registry: every DBFS this manager manages, with its configuration and
 * desired state, in a small LMDB environment of its own in the state
 * directory (STATE/registry.mdb, MDB_NOSUBDIR), opened once per process.
 * The state directory is locked (flock on STATE/lock) so two mfs processes
 * never share one.
 *
 * Called from the control thread only (startup, mount, unmount, config,
 * forget); every write is one committed, synced transaction.
 */
#ifndef MFS_REGISTRY_H
#define MFS_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "manager.h"

struct mfs_registry;

/*
 * Create the state directory if missing (mode 0700), lock it and open the
 * registry. Errors: -EBUSY (another mfs holds the state directory),
 * -EACCES, -ENOENT (parent missing), -EINVAL (not a registry), -ENOMEM.
 */
int mfs_registry_open(const char *state_dir, struct mfs_registry **out, char *err,
		      size_t errlen);

void mfs_registry_close(struct mfs_registry *r);

/* Insert or replace the record of c->name. Errors: -ENOSPC, -EIO. */
int mfs_registry_put(struct mfs_registry *r, const struct mfs_conf *c, uint32_t id);

/*
 * mfs_registry_put for a command: a change it cannot record is not made
 * (execute.h), so on failure err says so, for the user. r NULL (single-DBFS
 * mode, no registry): 0. Errors: those of mfs_registry_put, -ENOMEM.
 */
int mfs_registry_record(struct mfs_registry *r, const struct mfs_conf *c, uint32_t id, char *err,
			size_t errlen);

/* Drop the record of `name`. Errors: -ENOENT, -EIO. */
int mfs_registry_del(struct mfs_registry *r, const char *name);

/*
 * Call cb for every record in name order; stops at and returns the first
 * non-zero return of cb. Malformed records are logged and skipped.
 */
int mfs_registry_load(struct mfs_registry *r,
		      int (*cb)(void *arg, const struct mfs_conf *c, uint32_t id), void *arg);

/* Encode / decode one record (exposed for the unit tests). decode returns
 * -EINVAL for a malformed record. */
int mfs_registry_encode(const struct mfs_conf *c, uint32_t id, char *buf, size_t cap);
int mfs_registry_decode(const char *buf, size_t len, struct mfs_conf *c, uint32_t *id);

#endif
