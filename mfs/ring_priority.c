/*
 * The priority of a ring thread: SCHED_IDLE while it waits, and the
 * starvation guard (see ring_priority.h).
 *
 * A ring thread runs at SCHED_IDLE, so that the callers its commits wake
 * stay on this CPU. A commit wakes its caller while this thread still runs,
 * and the scheduler then moves the caller to an idle CPU: on a virtual
 * machine that is a halted vCPU to wake (an exit to the hypervisor) at
 * every request, and the caller's next request then comes from that CPU's
 * queue, whose commit moves it back. A CPU that runs only SCHED_IDLE
 * threads counts as idle when a woken thread is placed: the caller stays
 * here and preempts this thread at once. The other way round, a request
 * that wakes this thread does not preempt its caller, which is about to
 * sleep waiting for the answer. (4 KiB O_DIRECT reads on an idle 2-vCPU
 * machine: about 40k requests/s at normal priority, 80k switching to
 * SCHED_IDLE for each commit, 100k staying there.)
 *
 * When other work keeps the CPU busy, an idle thread waits long for its
 * turn: a commit that took over STARVED_NS (the caller it woke, and then
 * whatever else ran here, went first), or wake-ups that waited for a CPU
 * (mfs_ring_priority_woke), put the thread at normal priority for
 * NO_YIELD_NS, and so does roaming (a thread that left its CPU should
 * look busy, so a reader it wakes stays on its own), and so does a heavy
 * DBFS yielding to a light one (mfs_loop_contended). Only for a process
 * that may leave SCHED_IDLE again (root, or RLIMIT_NICE 20): without
 * CAP_SYS_NICE the way back is refused.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "log.h"
#include "loop.h"
#include "ring_priority.h"
#include "thread_sched.h"

#define STARVED_NS  500000ull
#define NO_YIELD_NS 1000000000ull
/* Wake-ups starve when they wait for a CPU over STARVED_WAKE_NS each, on
 * average, looked at every CHECK_NS. */
#define STARVED_WAKE_NS 100000ull
#define CHECK_NS	2000000ull

void mfs_ring_priority_init(struct mfs_ring_priority *p, unsigned qid)
{
	struct rlimit rl;

	/* as created: normally at SCHED_OTHER (uring.c, start_queues) */
	*p = (struct mfs_ring_priority){.qid = qid, .idle = sched_getscheduler(0) == SCHED_IDLE};
	p->sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (geteuid() != 0 && (getrlimit(RLIMIT_NICE, &rl) != 0 || rl.rlim_cur < 20))
		p->no_yield_until = UINT64_MAX; /* see above */
}

static void set_idle(struct mfs_ring_priority *p, bool idle)
{
	bool was = p->idle;
	int rc = mfs_sched_set_idle(&p->idle, idle);

	if (rc == 0 && was != idle) {
		p->chk_at = 0; /* a new look from now on */
	} else if (rc && !idle) {
		mfs_err("uring: queue %u: cannot leave SCHED_IDLE: %s", p->qid, strerror(-rc));
		p->no_yield_until = UINT64_MAX;
	}
}

/* It waited too long for a CPU at `now_ns`: normal priority for a while. */
static void starve(struct mfs_ring_priority *p, uint64_t now_ns)
{
	p->no_yield_until = now_ns + NO_YIELD_NS;
	__atomic_store_n(&p->starved, p->starved + 1, __ATOMIC_RELAXED);
	set_idle(p, false);
}

/* How long this thread was runnable without running, in all (ns): the
 * second field of its schedstat; 0 when unknown. */
static uint64_t run_delay(const struct mfs_ring_priority *p)
{
	char b[96];
	ssize_t n = p->sched_fd < 0 ? -1 : pread(p->sched_fd, b, sizeof(b) - 1, 0);
	unsigned long long run, delay;

	if (n <= 0)
		return 0;
	b[n] = 0;
	return sscanf(b, "%llu %llu", &run, &delay) == 2 ? delay : 0;
}

/* A commit's time does not show that a request waited to be taken: the
 * run delay of the thread's wake-ups does. */
void mfs_ring_priority_woke(struct mfs_ring_priority *p)
{
	p->chk_wakes++;
	uint64_t now = mfs_now_ns();
	if (!p->idle || now < p->chk_at + CHECK_NS)
		return;
	uint64_t d = run_delay(p);
	bool starved =
	    p->chk_at && d >= p->chk_delay && d - p->chk_delay > STARVED_WAKE_NS * p->chk_wakes;
	p->chk_at = now;
	p->chk_delay = d;
	p->chk_wakes = 0;
	if (starved)
		starve(p, now);
}

void mfs_ring_priority_choose(struct mfs_ring_priority *p, bool busy, uint64_t now_ns)
{
	set_idle(p, !busy && now_ns >= p->no_yield_until);
	if (p->idle)
		__atomic_store_n(&p->idle_waits, p->idle_waits + 1, __ATOMIC_RELAXED);
}

bool mfs_ring_priority_idle(const struct mfs_ring_priority *p)
{
	return p->idle;
}

void mfs_ring_priority_submitted(struct mfs_ring_priority *p, uint64_t t0_ns, uint64_t t1_ns)
{
	if (t1_ns - t0_ns > STARVED_NS)
		starve(p, t1_ns);
}

uint64_t mfs_ring_priority_idle_waits(const struct mfs_ring_priority *p)
{
	return __atomic_load_n(&p->idle_waits, __ATOMIC_RELAXED);
}

uint64_t mfs_ring_priority_starved(const struct mfs_ring_priority *p)
{
	return __atomic_load_n(&p->starved, __ATOMIC_RELAXED);
}

void mfs_ring_priority_fini(struct mfs_ring_priority *p)
{
	set_idle(p, false);
	if (p->sched_fd >= 0)
		close(p->sched_fd);
	p->sched_fd = -1;
}
