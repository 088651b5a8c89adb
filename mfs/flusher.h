/*
 * The flushers: the threads that wait for the disk, so that the control
 * thread never does. Each mounted DBFS's housekeeping (dbfs_tick: the reap,
 * the cache trim and the commit_interval durable point, whose device
 * flushes take milliseconds to seconds) and the durable points that the
 * sync verb asks for run here, not on the control thread: a mount, an
 * unmount or a `config` of one DBFS never waits for another DBFS's flush.
 *
 * Bounded: MFS_FLUSHERS threads whatever the number of DBFSs, and at most
 * one job per DBFS (a tick asked for while one is queued is the same tick;
 * sync commands queue on the job). A DBFS is served by one flusher at a
 * time; a sync asked for while its DBFS is flushing waits for the next
 * point, which covers everything acknowledged before the command.
 *
 * Lifetime: the control thread posts jobs for MOUNTED DBFSs only, and calls
 * mfs_flusher_forget before it tears a DBFS down, so a flusher never sees a
 * closed store or session.
 */
#ifndef MFS_FLUSHER_H
#define MFS_FLUSHER_H

#include "dbfs/dbfs.h"
#include "verbs.h"

#define MFS_FLUSHERS 2

/* Start the flusher threads. Without them (no thread could start) every job
 * runs at once on the caller's thread, as before the flushers. Returns 0
 * or -errno (the flushers are then inline). Control thread, once. */
int mfs_flusher_start(void);

/* Ask for fs's housekeeping (dbfs_tick) soon. Control thread; never blocks
 * on the disk (inline without flushers). A lost job (no memory) is the next
 * second's. */
void mfs_flusher_tick(struct dbfs *fs);

/* Make everything fs acknowledged before this call durable (dbfs_sync),
 * then answer `cmd` (mfs_answer_cmd with dbfs_sync's result) and free it.
 * Control thread; never blocks on the disk (inline without flushers). */
void mfs_flusher_sync(struct dbfs *fs, struct mfs_cmd *cmd);

/* Wait until fs has no job queued or running (its queued syncs answered).
 * The caller posts none for fs meanwhile: call it once fs is no longer
 * MOUNTED, before its session or store go. Control thread. */
void mfs_flusher_forget(struct dbfs *fs);

/* Finish every queued job and stop the threads. Control thread, at the
 * end, once nothing posts any more. */
void mfs_flusher_stop(void);

#endif
