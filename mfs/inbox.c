/* The control thread's inbox (see inbox.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "answer.h"
#include "inbox.h"
#include "loop.h"

struct mfs_job {
	struct mfs_inbox_item item; /* kind CMD, ENDED or REMOUNT */
	struct mfs_job *next;
};

static struct {
	struct mfs_manager *mgr;
	pthread_cond_t wake;	     /* a job was queued or a stop was asked */
	struct mfs_job *head, *tail; /* lock */
	bool stop;		     /* lock: a stop was asked */
	bool stopping;		     /* lock: the stop has begun: refuse commands */
	_Atomic bool trim_due;	     /* a DBFS's kernel cache passed its limit */
	_Atomic bool point_due;	     /* a DBFS asked for a durable point */
} inbox;

/* lock held */
static void enqueue(struct mfs_job *j)
{
	j->next = NULL;
	if (inbox.tail)
		inbox.tail->next = j;
	else
		inbox.head = j;
	inbox.tail = j;
	pthread_cond_signal(&inbox.wake);
}

/* lock held */
static int enqueue_id(enum mfs_inbox_kind kind, uint32_t id)
{
	struct mfs_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->item.kind = kind;
	j->item.id = id;
	enqueue(j);
	return 0;
}

void mfs_inbox_init(struct mfs_manager *mgr)
{
	pthread_condattr_t a;

	inbox.mgr = mgr;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&inbox.wake, &a);
	pthread_cond_init(&mgr->cond, &a);
	pthread_condattr_destroy(&a);
}

void mfs_inbox_submit(struct mfs_cmd *cmd)
{
	struct mfs_job *j = calloc(1, sizeof(*j));

	pthread_mutex_lock(&inbox.mgr->lock);
	if (inbox.stopping || inbox.stop || !j) {
		pthread_mutex_unlock(&inbox.mgr->lock);
		mfs_answer_cmd(cmd, j ? -ESHUTDOWN : -ENOMEM,
			       j ? "mfs is stopping" : "out of memory");
		free(cmd);
		free(j);
		return;
	}
	j->item.kind = MFS_INBOX_CMD;
	j->item.cmd = cmd;
	enqueue(j);
	pthread_mutex_unlock(&inbox.mgr->lock);
}

int mfs_inbox_remount(uint32_t id)
{
	return enqueue_id(MFS_INBOX_REMOUNT, id);
}

void mfs_inbox_stop(void)
{
	pthread_mutex_lock(&inbox.mgr->lock);
	inbox.stop = true;
	pthread_cond_signal(&inbox.wake);
	pthread_mutex_unlock(&inbox.mgr->lock);
}

void mfs_inbox_dbfs_ended(void *arg)
{
	struct mfs_dbfs *d = arg;

	pthread_mutex_lock(&inbox.mgr->lock);
	d->session_ended = true;
	pthread_cond_broadcast(&inbox.mgr->cond);
	if (d->state == MFS_MOUNTED)
		enqueue_id(MFS_INBOX_ENDED, d->id);
	pthread_mutex_unlock(&inbox.mgr->lock);
}

void mfs_inbox_manager_ended(void *arg)
{
	struct mfs_manager *mgr = arg;

	pthread_mutex_lock(&mgr->lock);
	mgr->manager_ended = true;
	inbox.stop = true;
	pthread_cond_broadcast(&mgr->cond);
	pthread_cond_signal(&inbox.wake);
	pthread_mutex_unlock(&mgr->lock);
}

void mfs_inbox_cache_over(void *arg)
{
	(void)arg;
	inbox.trim_due = true;
	pthread_cond_signal(&inbox.wake);
}

void mfs_inbox_point_due(void *arg)
{
	(void)arg;
	inbox.point_due = true;
	pthread_cond_signal(&inbox.wake);
}

/* lock held: wait for something to do until deadline_ns */
static void wait_until(uint64_t deadline_ns)
{
	while (!inbox.head && !inbox.stop && !inbox.trim_due && !inbox.point_due) {
		uint64_t now = mfs_now_ns();
		if (now >= deadline_ns)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t wait = deadline_ns - now;
		ts.tv_sec += (time_t)(wait / 1000000000u);
		ts.tv_nsec += (long)(wait % 1000000000u);
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&inbox.wake, &inbox.mgr->lock, &ts);
	}
}

void mfs_inbox_next(uint64_t deadline_ns, struct mfs_inbox_item *out)
{
	struct mfs_job *j = NULL;

	pthread_mutex_lock(&inbox.mgr->lock);
	wait_until(deadline_ns);
	if (inbox.stop) {
		out->kind = MFS_INBOX_STOP;
	} else if (inbox.trim_due) {
		inbox.trim_due = false;
		out->kind = MFS_INBOX_TRIM;
	} else if (inbox.point_due) {
		inbox.point_due = false;
		out->kind = MFS_INBOX_POINT;
	} else if (mfs_now_ns() >= deadline_ns) {
		out->kind = MFS_INBOX_TICK;
	} else {
		j = inbox.head;
		inbox.head = j->next;
		if (!inbox.head)
			inbox.tail = NULL;
		*out = j->item;
	}
	pthread_mutex_unlock(&inbox.mgr->lock);
	free(j);
}

void mfs_inbox_close(void)
{
	pthread_mutex_lock(&inbox.mgr->lock);
	inbox.stopping = true;
	struct mfs_job *jobs = inbox.head;
	inbox.head = inbox.tail = NULL;
	pthread_mutex_unlock(&inbox.mgr->lock);
	while (jobs) {
		struct mfs_job *j = jobs;
		jobs = j->next;
		if (j->item.kind == MFS_INBOX_CMD) {
			mfs_answer_cmd(j->item.cmd, -ESHUTDOWN, "mfs is stopping");
			free(j->item.cmd);
		}
		free(j);
	}
}
