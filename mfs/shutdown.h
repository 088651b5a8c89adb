/*
 * The orderly stop of the manager: refuse what is still queued, unmount
 * every DBFS (lazily, with a connection abort as last resort when files are
 * held open), then the manager mount, and free the list.
 */
#ifndef MFS_SHUTDOWN_H
#define MFS_SHUTDOWN_H

#include "manager.h"

/* Stop everything. No errors (each failure is logged and the stop goes on).
 * Control thread, once, when its loop ends; mgr->lock not held. */
void mfs_shutdown(struct mfs_manager *mgr);

#endif
