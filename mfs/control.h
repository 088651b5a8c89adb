/*
 * The control thread: the one thread that mounts, unmounts, reconfigures
 * and forgets DBFSs, and stops the manager. FUSE workers hand it commands
 * (mfs_control_submit) and return at once; it answers each command's request
 * when the work is done, so a worker never waits on another mount.
 *
 * The control loop runs on the thread that calls mfs_control_run (main).
 */
#ifndef MFS_CONTROL_H
#define MFS_CONTROL_H

#include "manager.h"
#include "verbs.h"

/* Set up the command queue for `mgr`. Call once, before any other function. */
void mfs_control_init(struct mfs_manager *mgr);

/*
 * Queue a command (allocated with malloc; the control thread frees it).
 * If the manager is stopping, answers its request at once with ESHUTDOWN.
 * Any thread; never blocks.
 */
void mfs_control_submit(struct mfs_cmd *cmd);

/* Ask the control loop to stop everything. Any thread (also a signal
 * thread); never blocks. */
void mfs_control_stop(void);

/*
 * Load the registry (manager mode): every DBFS known, and a background
 * re-mount of each that was mounted (state "mounting" until done).
 * Control thread, before mfs_control_run.
 */
int mfs_control_load(void);

/*
 * Mount one DBFS right now (single-DBFS mode and tests): `d` is added to the
 * manager's list. Returns 0 or -errno with a reason in err. Control thread.
 */
int mfs_control_mount_now(struct mfs_dbfs *d, bool create, char *err, size_t errlen);

/*
 * Serve commands until stopped (mfs_control_stop, the manager mount going
 * away, or in single mode the DBFS going away); then unmount every DBFS
 * (lazily with an abort as last resort when files are held open) and the
 * manager mount. Returns 0.
 */
int mfs_control_run(void);

/* The loop's on_end callbacks (arg: struct mfs_dbfs * / struct mfs_manager *). */
void mfs_control_dbfs_ended(void *arg);
void mfs_control_manager_ended(void *arg);

#endif
