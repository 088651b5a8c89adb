/* Text of the readable attributes and status files (see readable.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "account.h"
#include "answer.h"
#include "loop.h"
#include "readable.h"
#include "stats_text.h"
#include "uring.h"
#include "verbs.h"

static void text_status(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b)
{
	(void)mgr;
	char why[160];
	mfs_buf_printf(b, "name=%s\nstate=%s\n", d->conf.name, mfs_state_name(d->state));
	if (d->state == MFS_MOUNTED && d->fs && dbfs_health(d->fs, why, sizeof(why)))
		mfs_buf_printf(b, "read_only=io-error\nio_error=%s\n", why);
	if (d->reason[0])
		mfs_buf_printf(b, "reason=%s\n", d->reason);
	mfs_buf_printf(b, "mountpoint=%s\nstore=%s\nowner=%u\n", d->conf.mountpoint, d->conf.store,
		       (unsigned)d->conf.owner);
	if (d->state == MFS_MOUNTED)
		mfs_buf_printf(b, "mounted_since=%llu\nconnection=%u\n",
			       (unsigned long long)d->mounted_at, d->conn);
}

static void text_config(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b)
{
	(void)mgr;
	mfs_buf_printf(b, "options=%s\nwant=%s\n", d->conf.opts,
		       d->conf.want_mounted ? "mounted" : "unmounted");
}

/* NAME/stats and user.mfs.stats.NAME: stats_text.h (it reads the store
 * without mgr->lock). */
static void text_stats(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b)
{
	mfs_stats_text(mgr, d, b);
}

/* NAME/usage: its history (usage_store.h's text), read without mgr->lock
 * (it needs only the name: the history is the accountant's store). */
static void text_usage(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b)
{
	char name[MFS_NAME_MAX + 1];

	snprintf(name, sizeof(name), "%s", d->conf.name);
	pthread_mutex_unlock(&mgr->lock);
	mfs_account_history(mfs_account_running(), name, b);
	pthread_mutex_lock(&mgr->lock);
}

/* A line of list: its text before and after the usage figures, taken
 * under mgr->lock (offsets into one buffer), and the store's usage, read
 * after it with the DBFS pinned (mfs_dbfs_pin), as metrics does. */
struct list_row {
	struct mfs_dbfs *pinned;
	struct dbfs *fs;
	size_t head, mid, end; /* [head, mid) before bytes=, [mid, end) after */
	struct dbfs_usage u;
};

/* mgr->lock held: the texts of d's line into t; d pinned when mounted. */
static void list_take(struct mfs_dbfs *d, struct mfs_buf *t, struct list_row *r)
{
	memset(r, 0, sizeof(*r));
	r->head = t->len;
	mfs_buf_printf(t, "name=");
	mfs_buf_escaped(t, d->conf.name);
	mfs_buf_printf(t, ",state=%s", mfs_state_name(d->state));
	if (d->state == MFS_MOUNTED && d->fs && dbfs_health(d->fs, NULL, 0))
		mfs_buf_printf(t, ",read_only=io-error");
	mfs_buf_printf(t, ",mountpoint=");
	mfs_buf_escaped(t, d->conf.mountpoint);
	mfs_buf_printf(t, ",store=");
	mfs_buf_escaped(t, d->conf.store);
	r->mid = t->len;
	if (d->reason[0] && d->state == MFS_FAILED) {
		mfs_buf_printf(t, ",reason=");
		mfs_buf_escaped(t, d->reason);
	}
	r->end = t->len;
	if (d->state == MFS_MOUNTED && d->fs) {
		mfs_dbfs_pin(d);
		r->pinned = d;
		r->fs = d->fs;
	}
}

/* user.mfs.list. Takes mgr->lock itself, twice, never across a store read:
 * a read transaction can wait while a store's map grows, and the control
 * thread and every other status reader wait for the lock. */
static void list_attr(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b)
{
	struct mfs_buf t = {0};
	struct list_row *v = NULL;
	size_t n = 0, cap = 0;

	(void)who;
	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		if (n == cap) {
			size_t c2 = cap ? 2 * cap : 16;
			struct list_row *p = realloc(v, c2 * sizeof(*p));
			if (!p) {
				b->oom = true;
				break;
			}
			v = p;
			cap = c2;
		}
		list_take(d, &t, &v[n++]);
	}
	pthread_mutex_unlock(&mgr->lock);
	for (size_t i = 0; i < n; i++)
		if (v[i].fs)
			dbfs_usage(v[i].fs, &v[i].u);
	pthread_mutex_lock(&mgr->lock);
	for (size_t i = 0; i < n; i++)
		if (v[i].pinned)
			mfs_dbfs_unpin(mgr, v[i].pinned);
	pthread_mutex_unlock(&mgr->lock);
	b->oom |= t.oom;
	for (size_t i = 0; i < n && !b->oom; i++) {
		mfs_buf_put(b, t.p + v[i].head, v[i].mid - v[i].head);
		mfs_buf_printf(b, ",bytes=%llu,inodes=%llu", (unsigned long long)v[i].u.bytes,
			       (unsigned long long)v[i].u.inodes);
		mfs_buf_put(b, t.p + v[i].mid, v[i].end - v[i].mid);
		mfs_buf_putc(b, '\n');
	}
	mfs_buf_free(&t);
	free(v);
}

static unsigned count_dir(const char *path)
{
	DIR *dir = opendir(path);
	unsigned n = 0;

	if (!dir)
		return 0;
	for (struct dirent *e; (e = readdir(dir));)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static void text_manager(struct mfs_manager *mgr, struct mfs_buf *b)
{
	unsigned total = 0, mounted = 0;
	long pages = 0;
	struct mfs_uring_counts rc;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%*d %ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		total++;
		mounted += d->state == MFS_MOUNTED;
	}
	mfs_uring_counts(mgr->uring, &rc);
	mfs_buf_printf(b,
		       "version=%s\npid=%d\nuptime=%llu\nmountpoint=%s\nstate_dir=%s\n"
		       "workers=%u\nthreads=%u\nrss_kib=%ld\nfds=%u\ndbfs=%u\nmounted=%u\n"
		       "uring_queues=%u\nuring_offered=%s\nuring_roams=%llu\n"
		       "uring_idle_waits=%llu\nuring_starved=%llu\n",
		       MFS_VERSION, (int)getpid(),
		       (unsigned long long)(time(NULL) - (time_t)mgr->started_at), mgr->mountpoint,
		       mgr->state_dir, mfs_loop_workers(mgr->loop), count_dir("/proc/self/task"),
		       pages * (sysconf(_SC_PAGESIZE) / 1024), count_dir("/proc/self/fd"), total,
		       mounted, mfs_uring_queues(mgr->uring),
		       mfs_uring_kernel_enabled() ? "yes" : "no",
		       (unsigned long long)rc.roams, (unsigned long long)rc.idle_waits,
		       (unsigned long long)rc.starved);
}

/* user.mfs.dbfs.N and N/status + N/config together */
static void text_dbfs(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b)
{
	text_status(mgr, d, b);
	text_config(mgr, d, b);
}

/* A manager-wide attribute's text; `who` asked. */
typedef void manager_text(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b);
/* A DBFS's text: readable.h's mfs_readable_file contract. */
typedef void dbfs_text(struct mfs_manager *mgr, struct mfs_dbfs *d, struct mfs_buf *b);

static void status_attr(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b)
{
	(void)who;
	text_manager(mgr, b);
}

static void error_attr(struct mfs_manager *mgr, const struct mfs_caller *who, struct mfs_buf *b)
{
	char text[400];

	(void)mgr;
	mfs_answer_last_refusal(who, text, sizeof(text));
	mfs_buf_printf(b, "%s", text);
}

#define ATTR_PREFIX "user.mfs."

/*
 * The readable attributes besides the verbs' usage: one row each, in the
 * order listxattr gives them. A row with `manager` is "user.mfs." name; a
 * row with `dbfs` is "user.mfs." name followed by a DBFS's name, one per
 * DBFS. `unlocked`: called without mgr->lock (it needs none, or takes it
 * itself).
 */
static const struct readable {
	const char *name;
	manager_text *manager;
	dbfs_text *dbfs;
	bool unlocked;
} readables[] = {
    /* clang-format off */
	{.name = "list", .manager = list_attr, .unlocked = true},
	{.name = "status", .manager = status_attr},
	{.name = "error", .manager = error_attr, .unlocked = true},
	{.name = "dbfs.", .dbfs = text_dbfs},
	{.name = "stats.", .dbfs = text_stats},
    /* clang-format on */
};
#define NREADABLES (sizeof(readables) / sizeof(readables[0]))

/* The row for `attr` (after the prefix), and in *arg what follows a DBFS
 * row's name; NULL when none. */
static const struct readable *readable_find(const char *attr, const char **arg)
{
	for (size_t i = 0; i < NREADABLES; i++) {
		const struct readable *r = &readables[i];
		size_t n = strlen(r->name);
		if (r->manager ? !strcmp(attr, r->name) : !strncmp(attr, r->name, n)) {
			*arg = attr + n;
			return r;
		}
	}
	return NULL;
}

int mfs_readable_attr(struct mfs_manager *mgr, const char *attr, const struct mfs_caller *who,
		      struct mfs_buf *out)
{
	const struct mfs_verb *v = mfs_verb_find(attr);
	const struct readable *r;
	const char *arg;
	int rc = 0;

	if (v) {
		mfs_buf_printf(out, "%s", v->usage);
		return 0;
	}
	if (strncmp(attr, ATTR_PREFIX, strlen(ATTR_PREFIX)))
		return -ENODATA;
	r = readable_find(attr + strlen(ATTR_PREFIX), &arg);
	if (!r)
		return -ENODATA;
	if (r->unlocked) {
		r->manager(mgr, who, out);
		return 0;
	}
	pthread_mutex_lock(&mgr->lock);
	if (r->manager) {
		r->manager(mgr, who, out);
	} else {
		struct mfs_dbfs *d = mfs_find(mgr, arg);
		if (d)
			r->dbfs(mgr, d, out);
		else
			rc = -ENODATA;
	}
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

const struct mfs_readable_file mfs_readable_files[MFS_NFILES] = {
    [MFS_FILE_STATUS] = {.name = "status", .text = text_status},
    [MFS_FILE_STATS] = {.name = "stats", .text = text_stats},
    [MFS_FILE_CONFIG] = {.name = "config", .text = text_config},
    [MFS_FILE_USAGE] = {.name = "usage", .text = text_usage},
};

int mfs_readable_file(struct mfs_manager *mgr, uint32_t id, enum mfs_file f, struct mfs_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (d)
		mfs_readable_files[f].text(mgr, d, out);
	else
		rc = -ENOENT;
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

void mfs_readable_names(struct mfs_manager *mgr, struct mfs_buf *out)
{
	for (size_t i = 0; i < mfs_nverbs; i++)
		mfs_buf_printf(out, ATTR_PREFIX "%s%c", mfs_verbs[i].name, '\0');
	for (size_t i = 0; i < NREADABLES; i++)
		if (readables[i].manager)
			mfs_buf_printf(out, ATTR_PREFIX "%s%c", readables[i].name, '\0');
	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d && out->len < 60000; d = d->next)
		for (size_t i = 0; i < NREADABLES; i++)
			if (readables[i].dbfs)
				mfs_buf_printf(out, ATTR_PREFIX "%s%s%c", readables[i].name,
					       d->conf.name, '\0');
	pthread_mutex_unlock(&mgr->lock);
}
