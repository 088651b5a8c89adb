/*
 * The manager's list of DBFSs (see manager.h): finding, linking, unlinking,
 * pinning one's store for a reader, saving one to the registry, and the
 * names of the states. Calls nothing
 * else of the control path.
 */
#include <string.h>

#include "log.h"
#include "manager.h"
#include "registry.h"

const char *mfs_state_name(enum mfs_state st)
{
	/* clang-format off */
	static const char *const names[] = {
		[MFS_UNMOUNTED] = "unmounted", [MFS_MOUNTING] = "mounting",
		[MFS_MOUNTED] = "mounted",     [MFS_UNMOUNTING] = "unmounting",
		[MFS_FAILED] = "failed",
	};
	/* clang-format on */
	return names[st];
}

struct mfs_dbfs *mfs_find(struct mfs_manager *mgr, const char *name)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (!strcmp(d->conf.name, name))
			return d;
	return NULL;
}

struct mfs_dbfs *mfs_find_id(struct mfs_manager *mgr, uint32_t id)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (d->id == id)
			return d;
	return NULL;
}

void mfs_dbfs_link(struct mfs_manager *mgr, struct mfs_dbfs *d)
{
	struct mfs_dbfs **pp = &mgr->list;

	while (*pp && strcmp((*pp)->conf.name, d->conf.name) < 0)
		pp = &(*pp)->next;
	d->next = *pp;
	*pp = d;
}

void mfs_dbfs_unlink(struct mfs_manager *mgr, struct mfs_dbfs *d)
{
	for (struct mfs_dbfs **pp = &mgr->list; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			return;
		}
	}
}

void mfs_dbfs_pin(struct mfs_dbfs *d)
{
	d->readers++;
}

void mfs_dbfs_unpin(struct mfs_manager *mgr, struct mfs_dbfs *d)
{
	if (--d->readers == 0)
		pthread_cond_broadcast(&mgr->cond);
}

void mfs_dbfs_wait_unpinned(struct mfs_manager *mgr, struct mfs_dbfs *d)
{
	while (d->readers)
		pthread_cond_wait(&mgr->cond, &mgr->lock);
}

void mfs_dbfs_save(struct mfs_manager *mgr, struct mfs_dbfs *d)
{
	if (!mgr->reg)
		return;
	int rc = mfs_registry_put(mgr->reg, &d->conf, d->id);
	if (rc)
		mfs_err("%s: cannot update the registry: %s", d->conf.name, strerror(-rc));
}
