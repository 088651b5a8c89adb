/* The calling thread's scheduling class, CPUs and CPU time (see thread_sched.h). */
#include <errno.h>
#include <time.h>

#include "thread_sched.h"

int mfs_sched_set_idle(bool *idle_now, bool idle)
{
	struct sched_param sp = {0};

	if (*idle_now == idle)
		return 0;
	if (sched_setscheduler(0, idle ? SCHED_IDLE : SCHED_OTHER, &sp) != 0)
		return -errno;
	*idle_now = idle;
	return 0;
}

uint64_t mfs_sched_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mfs_sched_pin(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

int mfs_sched_allow(const cpu_set_t *cpus)
{
	return sched_setaffinity(0, sizeof(*cpus), cpus) == 0 ? 0 : -errno;
}
