/*
 * The calling thread's scheduling: its class (SCHED_IDLE or normal), the
 * CPUs it may run on, and the CPU time it has used. The loop's threads
 * (pool.c's workers, the io_uring threads of uring.c) change these only
 * here. Every function acts on the calling thread only; none takes a lock.
 */
#ifndef MFS_THREAD_SCHED_H
#define MFS_THREAD_SCHED_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Put the calling thread at SCHED_IDLE (`idle`) or back at SCHED_OTHER,
 * with one system call, and only when `*idle_now` (what the caller keeps
 * of the thread's class) says it is not there yet; `*idle_now` follows a
 * change that worked. Returns 0, or -errno of sched_setscheduler (-EPERM:
 * the way back from SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE 20), and
 * then the class and `*idle_now` are unchanged.
 */
int mfs_sched_set_idle(bool *idle_now, bool idle);

/* CPU time the calling thread has used (ns, CLOCK_THREAD_CPUTIME_ID). */
uint64_t mfs_sched_cpu_ns(void);

/* Let the calling thread run on `cpu` only; on a CPU that is offline the
 * request is refused and the thread runs anywhere, as before. */
void mfs_sched_pin(unsigned cpu);

/* Let the calling thread run on any CPU of `cpus`. Returns 0 or -errno of
 * sched_setaffinity (-EINVAL: none of them is online). */
int mfs_sched_allow(const cpu_set_t *cpus);

#endif
