/* The flushers (see flusher.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "flusher.h"
#include "log.h"

/* A sync command waiting for its DBFS's point. */
struct cmdq {
	struct mfs_cmd *cmd;
	struct cmdq *next;
};

/* What one DBFS waits for: its job, while queued or running. */
struct fjob {
	struct dbfs *fs;
	bool tick;		       /* a dbfs_tick is asked for */
	bool running;		       /* a flusher works on it (what it took is no longer here) */
	struct cmdq *cmds, **cmds_end; /* sync commands not taken yet, in order */
	struct fjob *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a job has something to take, or stop */
	pthread_cond_t done; /* a job ran to its end */
	struct fjob *jobs;   /* lock: in posting order */
	bool stop;	     /* lock */
	unsigned nthreads;
	pthread_t threads[MFS_FLUSHERS];
} fl = {.lock = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER};

static void do_tick(struct dbfs *fs)
{
	int rc = dbfs_tick(fs);
	char why[200];
	if (rc == -EIO && dbfs_health(fs, why, sizeof(why)))
		mfs_warn("%s: read-only from now on: %s", dbfs_dir(fs), why);
	else if (rc)
		mfs_warn("%s: housekeeping: %s", dbfs_dir(fs), strerror(-rc));
}

static void answer_sync(struct mfs_cmd *cmd, int rc)
{
	char err[160] = "";
	if (rc)
		snprintf(err, sizeof(err), "the durable point failed: %.100s", strerror(-rc));
	mfs_answer_cmd(cmd, rc, err);
	free(cmd);
}

/* lock held */
static struct fjob *job_of(struct dbfs *fs, bool make)
{
	struct fjob **p = &fl.jobs;
	for (; *p; p = &(*p)->next)
		if ((*p)->fs == fs)
			return *p;
	if (!make || !(*p = calloc(1, sizeof(**p))))
		return NULL;
	(*p)->fs = fs;
	(*p)->cmds_end = &(*p)->cmds;
	return *p;
}

/* lock held: the first job with work that nobody runs */
static struct fjob *takeable(void)
{
	for (struct fjob *j = fl.jobs; j; j = j->next)
		if (!j->running && (j->tick || j->cmds))
			return j;
	return NULL;
}

static void *flusher_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&fl.lock);
	for (;;) {
		struct fjob *j = takeable();
		if (!j) {
			if (fl.stop)
				break;
			pthread_cond_wait(&fl.work, &fl.lock);
			continue;
		}
		bool tick = j->tick;
		struct cmdq *cmds = j->cmds;
		j->tick = false;
		j->cmds = NULL;
		j->cmds_end = &j->cmds;
		j->running = true;
		pthread_mutex_unlock(&fl.lock);

		if (tick)
			do_tick(j->fs);
		if (cmds) {
			/* after the tick: its reap is in the point too */
			int rc = dbfs_sync(j->fs);
			while (cmds) {
				struct cmdq *c = cmds;
				cmds = c->next;
				answer_sync(c->cmd, rc);
				free(c);
			}
		}

		pthread_mutex_lock(&fl.lock);
		j->running = false;
		if (!j->tick && !j->cmds) {
			struct fjob **p = &fl.jobs;
			while (*p != j)
				p = &(*p)->next;
			*p = j->next;
			free(j);
		} else {
			pthread_cond_signal(&fl.work);
		}
		pthread_cond_broadcast(&fl.done);
	}
	pthread_mutex_unlock(&fl.lock);
	return NULL;
}

int mfs_flusher_start(void)
{
	int rc = 0;
	pthread_mutex_lock(&fl.lock);
	fl.stop = false;
	pthread_mutex_unlock(&fl.lock);
	while (fl.nthreads < MFS_FLUSHERS) {
		rc = -pthread_create(&fl.threads[fl.nthreads], NULL, flusher_main, NULL);
		if (rc)
			break;
		fl.nthreads++;
	}
	if (rc)
		mfs_warn("%u of %u flusher threads: %s%s", fl.nthreads, MFS_FLUSHERS, strerror(-rc),
			 fl.nthreads ? "" : "; the control thread flushes (and waits) itself");
	return rc;
}

void mfs_flusher_tick(struct dbfs *fs)
{
	if (!fl.nthreads) {
		do_tick(fs);
		return;
	}
	pthread_mutex_lock(&fl.lock);
	struct fjob *j = job_of(fs, true);
	if (j && !j->tick) {
		j->tick = true;
		pthread_cond_signal(&fl.work);
	}
	pthread_mutex_unlock(&fl.lock);
}

void mfs_flusher_sync(struct dbfs *fs, struct mfs_cmd *cmd)
{
	struct cmdq *c = fl.nthreads ? malloc(sizeof(*c)) : NULL;
	if (!c) {
		answer_sync(cmd, dbfs_sync(fs)); /* inline, or no memory to queue */
		return;
	}
	c->cmd = cmd;
	c->next = NULL;
	pthread_mutex_lock(&fl.lock);
	struct fjob *j = job_of(fs, true);
	if (j) {
		*j->cmds_end = c;
		j->cmds_end = &c->next;
		pthread_cond_signal(&fl.work);
	}
	pthread_mutex_unlock(&fl.lock);
	if (!j) {
		free(c);
		answer_sync(cmd, dbfs_sync(fs));
	}
}

void mfs_flusher_forget(struct dbfs *fs)
{
	pthread_mutex_lock(&fl.lock);
	while (job_of(fs, false))
		pthread_cond_wait(&fl.done, &fl.lock);
	pthread_mutex_unlock(&fl.lock);
}

void mfs_flusher_stop(void)
{
	pthread_mutex_lock(&fl.lock);
	fl.stop = true;
	pthread_cond_broadcast(&fl.work);
	pthread_mutex_unlock(&fl.lock);
	while (fl.nthreads)
		pthread_join(fl.threads[--fl.nthreads], NULL);
}
