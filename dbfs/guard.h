/*
 * The map guard (guard.c): a SIGBUS in a store's map becomes EIO on that
 * DBFS instead of the death of the process.
 *
 * LMDB maps data.mdb and lock.mdb. A store belongs to its user, who may
 * truncate either file while it is mounted; a page past the new end of the
 * file then faults with SIGBUS on the next access, in whatever thread
 * touches it. A guard is a recovery point (sigsetjmp) around code that
 * reads a store's maps: every FUSE request (fuse_guard.c), the group commit's
 * leader (commit.c), and the entry points other threads call (dbfs_tick,
 * dbfs_usage, dbfs_close). The SIGBUS handler checks that the faulting
 * address lies in a map of the guarded store (from /proc/self/maps, by
 * inode) and jumps back to the innermost guard; any other SIGBUS keeps its
 * old action (the process dies, as before).
 *
 * After a fault the store is lost for good (fs->map_lost): every request
 * of that DBFS gets EIO without touching the maps, its health says why
 * (health.c: read_only=io-error), writes get EROFS, and dbfs_close skips
 * what would read the maps. What the thread held inside the guard is given
 * back by dbfs_guard_recovered: its read transactions and their map locks
 * (readtxn.c tracks them), the leader's write transaction, the durable
 * point lock. Writers queued behind the lost store are answered EIO. A
 * transaction LMDB had half made when the fault came (inside
 * mdb_txn_begin) is leaked: LMDB returns no handle to it.
 *
 * Use:
 *	struct dbfs_guard g;
 *	dbfs_guard_push(&g, fs);
 *	if (sigsetjmp(g.jb, 0)) {
 *		dbfs_guard_recovered(&g);   (popped; the store is lost)
 *		... answer EIO ...
 *		return;
 *	}
 *	... code reading fs's maps ...
 *	dbfs_guard_pop(&g);
 * Locals changed between sigsetjmp and the fault must be volatile. Guards
 * nest (innermost wins) and are per thread. No guard may be pushed while
 * the thread holds fs->dur_lock (recovery releases it if the thread holds it).
 */
#ifndef DBFS_GUARD_H
#define DBFS_GUARD_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>

struct dbfs;
typedef struct MDB_txn MDB_txn;
typedef struct MDB_env MDB_env;

struct dbfs_guard {
	sigjmp_buf jb;
	struct dbfs *fs;
	struct dbfs_guard *prev;
	unsigned held;       /* read transactions the thread held at push */
	volatile uintptr_t addr; /* the faulting address, once it fired */
	volatile int which;  /* 0 data.mdb, 1 lock.mdb */
};

void dbfs_guard_push(struct dbfs_guard *g, struct dbfs *fs);
void dbfs_guard_pop(struct dbfs_guard *g);
/* After sigsetjmp returned non-zero: give back what the thread took inside
 * g, mark g's store lost (with the reason for dbfs_health), wake its queued
 * writers, and pop g. */
void dbfs_guard_recovered(struct dbfs_guard *g);

/* Install the SIGBUS handler (once per process; dbfs_open does). */
void dbfs_guard_install(void);
/* Note where fs's data.mdb and lock.mdb are mapped (after the env opened
 * and after every remap; map.c). */
void dbfs_guard_maps(struct dbfs *fs);

/* readtxn.c: the thread took fs's map lock for a read transaction; the
 * transaction being made is txn (NULL while LMDB makes it); it gave back
 * the lock and txn (NULL: the newest entry, whose begin failed). */
void dbfs_guard_read_taken(struct dbfs *fs, MDB_txn *txn);
void dbfs_guard_read_txn(MDB_txn *txn);
void dbfs_guard_read_given(MDB_txn *txn);

/* dbfs_close after a fault on the way: the environment stays open for the
 * process's life (closing it again could fault again), on a list, so that
 * it is held, not lost. */
void dbfs_guard_keep(MDB_env *env);

/* commit.c, the leader after a fault: abort the write transaction it had
 * open (fs->wtxn) and give back its map lock. */
void dbfs_guard_end_write(struct dbfs *fs);

#endif
