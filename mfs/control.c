/*
 * The control thread (see control.h): the command queue, the loop that runs
 * it, re-mount at startup and the orderly stop. The commands themselves are
 * in commands.c, mounting and unmounting one DBFS in lifecycle.c.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fuse_lowlevel.h>

#include "conf.h"
#include "control.h"
#include "control_private.h"
#include "kv.h"
#include "log.h"
#include "loop.h"
#include "mount.h"
#include "path.h"
#include "registry.h"

enum job_kind {
	JOB_CMD,     /* a user's command */
	JOB_ENDED,   /* a DBFS's connection went away without us */
	JOB_REMOUNT, /* mount a registered DBFS at startup */
};

struct mfs_job {
	enum job_kind kind;
	struct mfs_cmd *cmd;
	uint32_t id;
	struct mfs_job *next;
};

struct mfs_ctl mfs_ctl;

const char *mfs_state_name(enum mfs_state st)
{
	static const char *const names[] = {
		[MFS_UNMOUNTED] = "unmounted", [MFS_MOUNTING] = "mounting",
		[MFS_MOUNTED] = "mounted",     [MFS_UNMOUNTING] = "unmounting",
		[MFS_FAILED] = "failed",
	};
	return names[st];
}

struct mfs_dbfs *mfs_find(struct mfs_manager *mgr, const char *name)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (!strcmp(d->conf.name, name))
			return d;
	return NULL;
}

struct mfs_dbfs *mfs_find_id(struct mfs_manager *mgr, uint32_t id)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (d->id == id)
			return d;
	return NULL;
}

/* lock held: add d to the list, which stays in name order */
void mfs_dbfs_link(struct mfs_dbfs *d)
{
	struct mfs_dbfs **pp = &mfs_ctl.mgr->list;

	while (*pp && strcmp((*pp)->conf.name, d->conf.name) < 0)
		pp = &(*pp)->next;
	d->next = *pp;
	*pp = d;
}

/* lock held */
void mfs_dbfs_unlink(struct mfs_dbfs *d)
{
	for (struct mfs_dbfs **pp = &mfs_ctl.mgr->list; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			return;
		}
	}
}

/* lock held */
static void enqueue(struct mfs_job *j)
{
	j->next = NULL;
	if (mfs_ctl.tail)
		mfs_ctl.tail->next = j;
	else
		mfs_ctl.head = j;
	mfs_ctl.tail = j;
	pthread_cond_signal(&mfs_ctl.wake);
}

void mfs_control_init(struct mfs_manager *mgr)
{
	pthread_condattr_t a;

	mfs_ctl.mgr = mgr;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&mfs_ctl.wake, &a);
	pthread_cond_init(&mgr->cond, &a);
	pthread_condattr_destroy(&a);
}

void mfs_cmd_answer(struct mfs_cmd *cmd, int rc, const char *reason)
{
	if (rc) {
		mfs_error_record(&cmd->who, -rc, reason);
		mfs_warn("refused %s from uid %u: %s: %s",
			 cmd->kind == MFS_CMD_MOUNT     ? "mount"
			 : cmd->kind == MFS_CMD_UNMOUNT ? "unmount"
			 : cmd->kind == MFS_CMD_CONFIG  ? "config"
							: "forget",
			 (unsigned)cmd->who.uid, strerror(-rc), reason);
	}
	if (cmd->req)
		fuse_reply_err(cmd->req, -rc);
}

void mfs_control_submit(struct mfs_cmd *cmd)
{
	struct mfs_job *j = calloc(1, sizeof(*j));

	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	if (mfs_ctl.stopping || mfs_ctl.stop || !j) {
		pthread_mutex_unlock(&mfs_ctl.mgr->lock);
		mfs_cmd_answer(cmd, j ? -ESHUTDOWN : -ENOMEM, j ? "mfs is stopping" : "out of memory");
		free(cmd);
		free(j);
		return;
	}
	j->kind = JOB_CMD;
	j->cmd = cmd;
	enqueue(j);
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
}

void mfs_control_stop(void)
{
	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	mfs_ctl.stop = true;
	pthread_cond_signal(&mfs_ctl.wake);
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
}

void mfs_control_dbfs_ended(void *arg)
{
	struct mfs_dbfs *d = arg;
	struct mfs_job *j = calloc(1, sizeof(*j));

	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	d->session_ended = true;
	pthread_cond_broadcast(&mfs_ctl.mgr->cond);
	if (d->state == MFS_MOUNTED && j) {
		j->kind = JOB_ENDED;
		j->id = d->id;
		enqueue(j);
		j = NULL;
	}
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
	free(j);
}

void mfs_control_manager_ended(void *arg)
{
	struct mfs_manager *mgr = arg;

	pthread_mutex_lock(&mgr->lock);
	mgr->manager_ended = true;
	mfs_ctl.stop = true;
	pthread_cond_broadcast(&mgr->cond);
	pthread_cond_signal(&mfs_ctl.wake);
	pthread_mutex_unlock(&mgr->lock);
}

int mfs_control_mount_now(struct mfs_dbfs *d, bool create, char *err, size_t errlen)
{
	pthread_mutex_lock(&mfs_ctl.mgr->lock);
	d->state = MFS_MOUNTING;
	mfs_dbfs_link(d);
	pthread_mutex_unlock(&mfs_ctl.mgr->lock);
	int rc = mfs_dbfs_mount(d, create, err, errlen);
	if (rc) {
		pthread_mutex_lock(&mfs_ctl.mgr->lock);
		mfs_dbfs_unlink(d);
		pthread_mutex_unlock(&mfs_ctl.mgr->lock);
	}
	return rc;
}


static void run_ended(uint32_t id)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	bool go = d && d->state == MFS_MOUNTED && d->session_ended;
	if (go)
		d->state = MFS_UNMOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (!go)
		return;
	mfs_dbfs_finish(d, "unmounted outside mfs");
	if (mgr->single) {
		mfs_control_stop();
		return;
	}
	d->conf.want_mounted = false;
	mfs_dbfs_save(d);
}

static void run_remount(uint32_t id)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	char err[512] = "";

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	bool go = d && d->state == MFS_MOUNTING;
	pthread_mutex_unlock(&mgr->lock);
	if (!go)
		return;
	struct stat st;
	int rc = 0;
	if (stat(d->conf.mountpoint, &st) < 0 && mfs_errno_dead_mount(errno))
		rc = mfs_clean_stale(d->conf.mountpoint) < 0 ? -EBUSY : 0;
	if (rc)
		snprintf(err, sizeof(err), "stale mount at %.120s cannot be removed",
			 d->conf.mountpoint);
	else
		rc = mfs_dbfs_mount(d, false, err, sizeof(err));
	if (rc) {
		mfs_err("%s: re-mount failed: %s", d->conf.name, err);
		pthread_mutex_lock(&mgr->lock);
		d->state = MFS_FAILED;
		snprintf(d->reason, sizeof(d->reason), "%.255s", err);
		pthread_mutex_unlock(&mgr->lock);
	}
}

static int load_one(void *arg, const struct mfs_conf *c, uint32_t id)
{
	struct mfs_manager *mgr = arg;
	struct mfs_dbfs *d = calloc(1, sizeof(*d));
	struct mfs_job *j = calloc(1, sizeof(*j));

	if (!d || !j) {
		free(d);
		free(j);
		return -ENOMEM;
	}
	d->conf = *c;
	d->id = id;
	pthread_mutex_lock(&mgr->lock);
	if (id >= mgr->next_id)
		mgr->next_id = id + 1;
	d->state = c->want_mounted ? MFS_MOUNTING : MFS_UNMOUNTED;
	mfs_dbfs_link(d);
	if (c->want_mounted) {
		j->kind = JOB_REMOUNT;
		j->id = id;
		enqueue(j);
		j = NULL;
	}
	pthread_mutex_unlock(&mgr->lock);
	free(j);
	return 0;
}

int mfs_control_load(void)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;

	/* ids must stay unique across restarts: registry ids are kept */
	if (mgr->next_id == 0)
		mgr->next_id = 1;
	return mfs_registry_load(mgr->reg, load_one, mgr);
}

static void stop_all(void)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;

	pthread_mutex_lock(&mgr->lock);
	mfs_ctl.stopping = true;
	struct mfs_job *jobs = mfs_ctl.head;
	mfs_ctl.head = mfs_ctl.tail = NULL;
	pthread_mutex_unlock(&mgr->lock);
	while (jobs) {
		struct mfs_job *j = jobs;
		jobs = j->next;
		if (j->kind == JOB_CMD) {
			mfs_cmd_answer(j->cmd, -ESHUTDOWN, "mfs is stopping");
			free(j->cmd);
		}
		free(j);
	}
	mfs_info("stopping: unmounting every DBFS");
	for (;;) {
		pthread_mutex_lock(&mgr->lock);
		struct mfs_dbfs *d = mgr->list;
		while (d && d->state != MFS_MOUNTED)
			d = d->next;
		if (d)
			d->state = MFS_UNMOUNTING;
		pthread_mutex_unlock(&mgr->lock);
		if (!d)
			break;
		mfs_dbfs_unmount(d, true, "mfs stopped");
	}
	if (mgr->se) {
		if (!mgr->manager_ended) {
			int rc = mfs_unmount_path(mgr->mountpoint, true);
			if (rc)
				mfs_warn("unmount %s: %s", mgr->mountpoint, strerror(-rc));
		}
		dev_t dev = mgr->dev;
		mfs_session_stop("manager", &mgr->manager_ended, minor(dev) | (major(dev) << 20),
			    mgr->sess);
		mfs_loop_remove(mgr->sess);
		mfs_session_close(mgr->se);
		mgr->se = NULL;
		mgr->sess = NULL;
	}
	/* free the list */
	pthread_mutex_lock(&mgr->lock);
	while (mgr->list) {
		struct mfs_dbfs *d = mgr->list;
		mgr->list = d->next;
		free(d);
	}
	pthread_mutex_unlock(&mgr->lock);
}

void mfs_cache_rebalance(void)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	uint64_t n = 0;

	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs)
			n++;
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (d->state != MFS_MOUNTED || !d->fs)
			continue;
		uint64_t lim = d->cache_mem;
		if (mgr->mem) {
			uint64_t share = mgr->mem / n;
			if (!lim || share < lim)
				lim = share ? share : 1;
		}
		if (lim != d->cache_limit) {
			d->cache_limit = lim;
			dbfs_set_cache_limit(d->fs, lim);
		}
	}
}

void mfs_cache_over(void *arg)
{
	(void)arg;
	/* No lock: a request thread must not wait for the control thread. A
	 * lost wake-up costs a second (the tick trims too). */
	mfs_ctl.trim_due = true;
	pthread_cond_signal(&mfs_ctl.wake);
}

/*
 * libdbfs's housekeeping (dbfs_tick, or only dbfs_cache_trim): about once a
 * second for every mounted DBFS, from this thread, never inside a request.
 * Only this thread closes a store, so the pointers stay valid outside the
 * lock.
 */
static void tick_all(bool trim_only)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	size_t n = 0, cap = 0;
	struct dbfs **fs = NULL;

	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
		cap++;
	fs = cap ? calloc(cap, sizeof(*fs)) : NULL;
	for (struct mfs_dbfs *d = mgr->list; d && fs; d = d->next)
		if (d->state == MFS_MOUNTED && d->fs)
			fs[n++] = d->fs;
	pthread_mutex_unlock(&mgr->lock);
	for (size_t i = 0; i < n; i++) {
		int rc = trim_only ? dbfs_cache_trim(fs[i]) : dbfs_tick(fs[i]);
		if (rc)
			mfs_warn("%s: housekeeping: %s", dbfs_dir(fs[i]), strerror(-rc));
	}
	free(fs);
}

int mfs_control_run(void)
{
	struct mfs_manager *mgr = mfs_ctl.mgr;
	uint64_t next_tick = mfs_now_ns() + 1000000000u;

	for (;;) {
		pthread_mutex_lock(&mgr->lock);
		while (!mfs_ctl.head && !mfs_ctl.stop && !mfs_ctl.trim_due) {
			uint64_t now = mfs_now_ns();
			if (now >= next_tick)
				break;
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t wait = next_tick - now;
			ts.tv_sec += (time_t)(wait / 1000000000u);
			ts.tv_nsec += (long)(wait % 1000000000u);
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&mfs_ctl.wake, &mgr->lock, &ts);
		}
		if (mfs_ctl.stop) {
			pthread_mutex_unlock(&mgr->lock);
			break;
		}
		if (mfs_ctl.trim_due) {
			mfs_ctl.trim_due = false;
			pthread_mutex_unlock(&mgr->lock);
			tick_all(true);
			continue;
		}
		if (mfs_now_ns() >= next_tick) {
			pthread_mutex_unlock(&mgr->lock);
			tick_all(false);
			next_tick = mfs_now_ns() + 1000000000u;
			continue;
		}
		struct mfs_job *j = mfs_ctl.head;
		mfs_ctl.head = j->next;
		if (!mfs_ctl.head)
			mfs_ctl.tail = NULL;
		pthread_mutex_unlock(&mgr->lock);
		switch (j->kind) {
		case JOB_CMD:
			mfs_cmd_run(j->cmd);
			free(j->cmd);
			break;
		case JOB_ENDED:
			run_ended(j->id);
			break;
		case JOB_REMOUNT:
			run_remount(j->id);
			break;
		}
		free(j);
	}
	stop_all();
	return 0;
}
