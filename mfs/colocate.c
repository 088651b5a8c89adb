/* A worker next to its client: see colocate.h. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colocate.h"
#include "thread_sched.h"

void mfs_colocate_init(struct mfs_colocate *c)
{
	memset(c, 0, sizeof(*c));
	c->cpu = -1;
	c->have_cpus = sched_getaffinity(0, sizeof(c->cpus), &c->cpus) == 0 &&
		       CPU_COUNT(&c->cpus) > 1;
}

/* /proc/PID/stat: "pid (comm) state ..." with the CPU in field 39; comm may
 * hold spaces and parentheses, so fields are counted after the last ')'. */
int mfs_colocate_cpu_of(pid_t pid)
{
	char path[40], buf[1024];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* field 3 (state) follows ") "; the CPU is field 39: 36 fields on */
	for (int field = 2; field < 39; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -1;
	}
	char *end;
	long cpu = strtol(p + 1, &end, 10);
	return end == p + 1 || cpu < 0 || cpu >= CPU_SETSIZE ? -1 : (int)cpu;
}

bool mfs_colocate_note(struct mfs_colocate *c, pid_t pid, uint64_t now_ns)
{
	if (!c->have_cpus || pid <= 0)
		return false;
	uint64_t since = now_ns - c->checked_ns;
	if (since < MFS_COLOCATE_NEW_NS || (pid == c->pid && since < MFS_COLOCATE_NS))
		return false;
	c->pid = pid;
	c->checked_ns = now_ns;
	int cpu = mfs_colocate_cpu_of(pid);
	if (cpu < 0 || !CPU_ISSET(cpu, &c->cpus) || (c->pinned && cpu == c->cpu))
		return false;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (mfs_sched_allow(&one) != 0)
		return false;
	c->pinned = true;
	c->cpu = cpu;
	__atomic_add_fetch(&c->moves, 1, __ATOMIC_RELAXED);
	return true;
}

void mfs_colocate_release(struct mfs_colocate *c)
{
	if (!c->pinned)
		return;
	c->pinned = false;
	c->cpu = -1;
	c->pid = 0;
	mfs_sched_allow(&c->cpus);
}

uint64_t mfs_colocate_moves(const struct mfs_colocate *c)
{
	return __atomic_load_n(&c->moves, __ATOMIC_RELAXED);
}
