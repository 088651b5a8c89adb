/*
 * Fault injection without product hooks, SQLite style: the test binaries of
 * this folder are linked with -Wl,--wrap= for every LMDB call libdbfs makes
 * and for its allocations (malloc, calloc, realloc, realpath), and they
 * define the write calls of the store themselves (write, pwrite, writev,
 * msync, fsync, fdatasync, ftruncate, fallocate), so that a call from
 * liblmdb.so reaches them before libc (or ASan's interceptors, which they
 * call in turn through dlsym(RTLD_NEXT)).
 *
 * Armed with a kind and N, the Nth call of that kind fails (and with
 * `persist` every later one too), as the real call could: an LMDB call
 * returns EIO (ENOMEM for those that allocate), an allocation returns NULL,
 * a write to a file under the armed directory returns -1 with EIO.
 * Only libdbfs's own allocations are counted (LMDB's, inside liblmdb.so,
 * fail as LMDB calls: its ENOMEM is one of the codes injected there).
 * Not thread-safe: one thread makes the counted calls at a time (the
 * others wait for it, fault_batch.c, or are not counted, fault_owner_only).
 */
#ifndef MFS_TESTS_FAULT_INJECT_H
#define MFS_TESTS_FAULT_INJECT_H

#include <stdbool.h>

enum fault_kind { FAULT_LMDB, FAULT_ALLOC, FAULT_WRITE, FAULT_KINDS };

extern const char *const fault_kind_name[FAULT_KINDS];

/* Count calls of `kind` from now; fail the nth (1-based), and with persist
 * every one after it. Writes count only when the file is under `dir`. */
void fault_arm(enum fault_kind kind, long n, bool persist, const char *dir);
/* Stop; returns how many calls of the armed kind were made. */
long fault_disarm(void);
/* Stop counting (true) and go on (false), for the test's own calls. */
void fault_pause(bool pause);
/* Did the armed fault fire (so far)? */
bool fault_fired(void);
/* From now on only the calls of the thread that arms count and fail (a
 * test that runs the manager's control steps while its FUSE workers serve
 * the mounts, fault_control.c); the others pass through. */
void fault_owner_only(bool on);

/* The clock libdbfs sees (clock_gettime REALTIME, time) is fixed, so that
 * two runs of one operation leave equal trees. */

#endif
