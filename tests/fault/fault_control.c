/*
 * Fault injection along the manager's control steps that need a mount:
 * mount (of a new DBFS, with create of a missing store, of a registered
 * one), unmount (idle, busy without force, busy with force), config (of a
 * mounted DBFS, of an unmounted one), forget, subscribe and unsubscribe,
 * with real FUSE mounts (as root).
 *
 * The manager runs in this process as mfs runs it (main.c): its worker
 * loop serves the DBFS mounts while this thread plays the control thread
 * and calls each verb's executor. Only this thread's calls count and fail
 * (inject.h, fault_owner_only): the Nth LMDB call (the registry's and the
 * store's), allocation (of mfs and libdbfs) or write under the run's
 * directory (the store and the registry). For each step, kind and N = 1,
 * 2, ... until a run makes fewer than N calls:
 *   - the step returns what it returns without a fault (0; EBUSY for the
 *     busy unmount) or a negative errno a user recognises;
 *   - the DBFS's state says what is so: mounted (and serving) if and only
 *     if the manager says mounted, and nothing is mounted after a failed
 *     mount; a failed mount with create leaves no store directory, and the
 *     mount point stays empty;
 *   - the registry holds the records after the step when it succeeded and
 *     those before it when it failed, and the manager's records in memory
 *     are the registry's: a change the registry cannot record fails and is
 *     undone (execute.h), so a restart brings back exactly what ran;
 *   - a failed step says why (a reason besides the errno, but for ENOMEM);
 *   - a subscription is there if and only if subscribe answered 0 (and
 *     unsubscribe did not);
 *   - the store, once unmounted, passes dbfs-fsck;
 *   - the process has as many descriptors after the run as before it, and
 *     nothing leaks (the sanitizer build's leak check, at exit).
 *
 * Usage: test_fault_control FSCK [--full]
 *   --full: persistent faults too.
 * FAULT_STEP=NAME runs only that step (its name as printed), FAULT_VERBOSE=1
 * lets the manager log.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/dbfs.h"
#include "dbfs/feed.h"
#include "dbfs_unmount.h"
#include "inbox.h"
#include "harness.h"
#include "inject.h"
#include "log.h"
#include "loop.h"
#include "manager.h"
#include "parse.h"
#include "registry.h"
#include "startup.h"
#include "verbs.h"

extern char **environ;

static const char *fsck_path;
static char base[256], tmpl[300], run_dir[300], store[400], mp[400], state[400];
static struct mfs_manager mgr;
static int failures;
static long points, points_kind[FAULT_KINDS], registry_refused, refused, io_errors;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

static int fsck(const char *d)
{
	return fault_fsck(fsck_path, d);
}

static void rm_rf(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	char p[700];
	if (!dd) {
		unlink(d);
		return;
	}
	while ((e = readdir(dd))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
		if (unlink(p) && (errno == EISDIR || errno == EPERM))
			rm_rf(p);
	}
	closedir(dd);
	rmdir(d);
}

static void copy_store(const char *from, const char *to)
{
	DIR *dd = opendir(from);
	struct dirent *e;
	char a[700], b[700];
	if (!dd || mkdir(to, 0755))
		fault_die("copy_store");
	while ((e = readdir(dd))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
		int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || out < 0 || fstat(in, &st))
			fault_die(a);
		for (off_t off = 0; off < st.st_size;) {
			ssize_t n =
			    copy_file_range(in, &off, out, NULL, (size_t)(st.st_size - off), 0);
			if (n <= 0)
				fault_die("copy_file_range");
		}
		close(in);
		close(out);
	}
	closedir(dd);
}

static int nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		fault_die("/proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static bool mounted_at(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], a[4096];
	bool found = false;
	if (!f)
		fault_die("mountinfo");
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", a) == 1 && !strcmp(a, path))
			found = true;
	fclose(f);
	return found;
}

static bool dir_empty(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	bool empty = true;
	if (!dd)
		return false;
	while ((e = readdir(dd)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	closedir(dd);
	return empty;
}

/* ---- the manager ---- */

struct text {
	char s[8192];
	size_t n;
};

static int add(void *arg, const struct mfs_conf *c, uint32_t id)
{
	struct text *t = arg;
	(void)id; /* the manager numbers DBFSs on across runs */
	t->n += (size_t)snprintf(t->s + t->n, sizeof(t->s) - t->n, "%s %s %s %d %s\n", c->name,
				 c->store, c->mountpoint, c->want_mounted, c->opts);
	return 0;
}

static void records(struct text *t)
{
	memset(t, 0, sizeof(*t));
	if (mfs_registry_load(mgr.reg, add, t))
		snprintf(t->s, sizeof(t->s), "(cannot load)\n");
}

/* The manager's records, as records() gives the registry's: what a restart
 * would bring back must be what runs. */
static void in_memory(struct text *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_lock(&mgr.lock);
	for (struct mfs_dbfs *d = mgr.list; d; d = d->next)
		add(t, &d->conf, d->id);
	pthread_mutex_unlock(&mgr.lock);
}

/* The manager's view of DBFS "a": -1 unknown, else its state. */
static int state_of_a(void)
{
	pthread_mutex_lock(&mgr.lock);
	struct mfs_dbfs *d = mfs_find(&mgr, "a");
	int st = d ? (int)d->state : -1;
	pthread_mutex_unlock(&mgr.lock);
	return st;
}

/* Has mounted "a" met an I/O error on a write of its store? */
static bool io_error_of_a(void)
{
	char why[160];
	pthread_mutex_lock(&mgr.lock);
	struct mfs_dbfs *d = mfs_find(&mgr, "a");
	bool bad = d && d->state == MFS_MOUNTED && d->fs && dbfs_health(d->fs, why, sizeof(why));
	pthread_mutex_unlock(&mgr.lock);
	return bad;
}

/* Has mounted "a" the subscription s1? -1: not mounted. */
static int sub_of_a(void)
{
	struct dbfs_feed_sub_info info;
	pthread_mutex_lock(&mgr.lock);
	struct mfs_dbfs *d = mfs_find(&mgr, "a");
	int has = -1;
	if (d && d->state == MFS_MOUNTED && d->fs) {
		int rc = dbfs_feed_sub_get(d->fs, "s1", &info);
		has = rc == 0 ? 1 : rc == -ENOENT ? 0 : -2;
	}
	pthread_mutex_unlock(&mgr.lock);
	return has;
}

/* Subscription s1 in the store as it opens again after the DBFS is
 * unmounted (from what reached its files; read-write: a read-only store
 * has no feed): 1 there, 0 not. */
static int sub_in_store(void)
{
	struct dbfs_options opt;
	struct dbfs *fs;
	struct dbfs_feed_sub_info info;
	char err[256];
	dbfs_options_init(&opt);
	int rc = dbfs_open(store, &opt, &fs, err, sizeof(err));
	if (rc)
		fault_die("reopen the store to read its subscription");
	rc = dbfs_feed_sub_get(fs, "s1", &info);
	dbfs_close(fs);
	if (rc && rc != -ENOENT)
		fault_die("read the subscription of the reopened store");
	return rc == 0;
}

/* Run the jobs a step queued for the control loop (the re-mount of an
 * unmount the registry could not record), as the loop would (control.c). */
static void run_jobs(void)
{
	struct mfs_inbox_item it;
	/* a job comes out before a deadline not passed; none queued: the tick */
	uint64_t soon = mfs_now_ns() + 20000000u;
	for (mfs_inbox_next(soon, &it); it.kind != MFS_INBOX_TICK && it.kind != MFS_INBOX_STOP;
	     mfs_inbox_next(soon, &it)) {
		if (it.kind == MFS_INBOX_REMOUNT)
			mfs_startup_remount(&mgr, it.id);
		else if (it.kind == MFS_INBOX_ENDED)
			mfs_dbfs_gone(&mgr, it.id);
		else if (it.kind == MFS_INBOX_CMD)
			fault_die("a command in the inbox");
	}
}

/* Run verb `attr` with `value` as root; *err gets the reason. */
static int command(const char *attr, const char *value, char *err, size_t errlen)
{
	static struct mfs_cmd cmd;
	memset(&cmd, 0, sizeof(cmd));
	err[0] = 0;
	cmd.verb = mfs_verb_find(attr);
	if (!cmd.verb)
		fault_die(attr);
	cmd.who.uid = 0;
	cmd.who.gid = 0;
	cmd.who.pid = getpid();
	cmd.who.ppid = getppid();
	int rc = cmd.verb->parse(value, strlen(value), &cmd, err, errlen);
	if (rc)
		return rc;
	return cmd.verb->exec(&mgr, &cmd, err, errlen);
}

static void must(const char *attr, const char *value)
{
	char err[512];
	int rc = command(attr, value, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s %s: %s (%s)\n", attr, value, strerror(-rc), err);
		exit(2);
	}
}

static void start_manager(void)
{
	char err[512];
	pthread_mutex_init(&mgr.lock, NULL);
	mgr.uid = 0;
	mgr.started_at = (uint64_t)time(NULL);
	mgr.dev = (dev_t)-1; /* no manager mount: no path is inside it */
	snprintf(mgr.mountpoint, sizeof(mgr.mountpoint), "%s/no-manager-mount", base);
	mfs_inbox_init(&mgr);
	if (mfs_loop_create(2, &mgr.loop))
		fault_die("mfs_loop_create");
	(void)err;
}

static void open_registry(void)
{
	char err[512];
	snprintf(mgr.state_dir, sizeof(mgr.state_dir), "%s", state);
	if (mfs_registry_open(state, &mgr.reg, err, sizeof(err))) {
		fprintf(stderr, "registry: %s\n", err);
		exit(2);
	}
}

/* ---- the steps ---- */

enum step {
	MOUNT_NEW,
	MOUNT_CREATE,
	MOUNT_AGAIN,
	UNMOUNT,
	UNMOUNT_BUSY,  /* a file open on it, without force: EBUSY */
	UNMOUNT_FORCE, /* a file open on it, with force */
	CONFIG,
	CONFIG_UNMOUNTED, /* a setting that cannot change while mounted */
	FORGET,
	SUBSCRIBE,
	UNSUBSCRIBE,
	NSTEPS
};
static const char *const step_name[NSTEPS] = {
    "mount",  "mount create",     "mount again", "unmount",   "unmount busy", "unmount force",
    "config", "config unmounted", "forget",      "subscribe", "unsubscribe"};
static const char *const step_attr[NSTEPS] = {
    "user.mfs.mount",  "user.mfs.mount",     "user.mfs.mount",      "user.mfs.unmount",
    "user.mfs.unmount", "user.mfs.unmount",  "user.mfs.config",     "user.mfs.config",
    "user.mfs.forget", "user.mfs.subscribe", "user.mfs.unsubscribe"};
/* what each step answers without a fault */
static const int step_rc[NSTEPS] = {[UNMOUNT_BUSY] = -EBUSY};

struct outcome {
	int rc;
	char err[512];
	int state;       /* of "a", after */
	bool mounted;    /* something at mp */
	int sub;         /* subscription s1 of "a": 1 there, 0 not, -1 not mounted; after
			  * a failed store (unreadable): as the store reopens */
	bool io_error;   /* "a" met an I/O error on its store (read_only=io-error) */
	struct text reg; /* the registry after */
	struct text mem; /* the manager's records after */
};

/* Set up for step s, run it (kind < 0: no fault), record, and tear down:
 * afterwards nothing is mounted and "a" is forgotten. Returns the calls
 * of the armed kind. */
static long run(enum step s, int kind, long n, bool persist, struct outcome *o, struct text *before)
{
	char value[1200], err[512];
	long calls = 0;
	int busy = -1;
	memset(o, 0, sizeof(*o));
	rm_rf(run_dir);
	if (mkdir(run_dir, 0755) || mkdir(mp, 0755))
		fault_die("mkdir");
	if (s != MOUNT_CREATE)
		copy_store(tmpl, store);
	open_registry();
	if (s != MOUNT_NEW && s != MOUNT_CREATE) {
		snprintf(value, sizeof(value), "name=a,store=%s,mountpoint=%s", store, mp);
		must("user.mfs.mount", value);
		if (s == MOUNT_AGAIN || s == FORGET || s == CONFIG_UNMOUNTED)
			must("user.mfs.unmount", "a");
		if (s == UNSUBSCRIBE)
			must("user.mfs.subscribe", "name=a,sub=s1");
		if (s == UNMOUNT_BUSY || s == UNMOUNT_FORCE) {
			char f[500];
			snprintf(f, sizeof(f), "%s/f", mp);
			if ((busy = open(f, O_RDONLY)) < 0)
				fault_die("open on the mount");
		}
	}
	records(before);
	switch (s) {
	case MOUNT_NEW:
		snprintf(value, sizeof(value), "name=a,store=%s,mountpoint=%s", store, mp);
		break;
	case MOUNT_CREATE:
		snprintf(value, sizeof(value), "name=a,store=%s,mountpoint=%s,create", store, mp);
		break;
	case MOUNT_AGAIN:
		snprintf(value, sizeof(value), "name=a");
		break;
	case UNMOUNT:
	case UNMOUNT_BUSY:
	case FORGET:
		snprintf(value, sizeof(value), "a");
		break;
	case UNMOUNT_FORCE:
		snprintf(value, sizeof(value), "a,force");
		break;
	case CONFIG:
		snprintf(value, sizeof(value), "name=a,quota_bytes=1G,quota_inodes=5000");
		break;
	case CONFIG_UNMOUNTED:
		snprintf(value, sizeof(value), "name=a,attr_timeout=5,quota_bytes=1G");
		break;
	case SUBSCRIBE:
	case UNSUBSCRIBE:
		snprintf(value, sizeof(value), "name=a,sub=s1");
		break;
	default:
		break;
	}
	if (kind >= 0)
		fault_arm(kind, n, persist, run_dir);
	o->rc = command(step_attr[s], value, o->err, sizeof(o->err));
	if (kind >= 0)
		calls = fault_disarm();
	if (busy >= 0)
		close(busy);
	run_jobs();
	o->state = state_of_a();
	o->mounted = mounted_at(mp);
	o->sub = sub_of_a();
	o->io_error = io_error_of_a();
	records(&o->reg);
	in_memory(&o->mem);
	if (o->state == MFS_MOUNTED) {
		struct stat st;
		char f[500];
		snprintf(f, sizeof(f), "%s/f", mp);
		if (s == MOUNT_CREATE ? stat(mp, &st) || st.st_ino != 1 : stat(f, &st)) {
			/* a failed write of the store: that DBFS fails (mfs.8) */
			if (o->io_error && errno == EIO)
				io_errors++;
			else
				FAIL("%s: %s fault at %ld: mounted but not serving: %s (it answered "
				     "%d: %s)",
				     step_name[s], kind >= 0 ? fault_kind_name[kind] : "no", n,
				     strerror(errno), o->rc, o->err);
		}
	}
	/* tear down, no faults */
	if (o->state == MFS_MOUNTED && command("user.mfs.unmount", "a", err, sizeof(err)))
		FAIL("%s: unmount after the step: %s", step_name[s], err);
	if (state_of_a() >= 0 && command("user.mfs.forget", "a", err, sizeof(err)))
		FAIL("%s: forget after the step: %s", step_name[s], err);
	if (mounted_at(mp))
		FAIL("%s: still mounted after the teardown", step_name[s]);
	if (o->sub == -2) {
		if (!o->io_error)
			FAIL("%s: %s fault at %ld: the subscription is unreadable, the store not "
			     "failed",
			     step_name[s], kind >= 0 ? fault_kind_name[kind] : "no", n);
		o->sub = sub_in_store();
	}
	mfs_registry_close(mgr.reg);
	mgr.reg = NULL;
	return calls;
}

static bool plausible(int rc)
{
	return rc == -EIO || rc == -ENOMEM || rc == -ENOSPC || rc == -EAGAIN || rc == -EBUSY;
}

static void check(enum step s, const char *what, const struct outcome *o,
		  const struct outcome *after, const struct text *before)
{
	if (o->rc > 0 || (o->rc && o->rc != step_rc[s] && !plausible(o->rc)))
		FAIL("%s: %s: %d (%s) %s", step_name[s], what, o->rc,
		     o->rc < 0 ? strerror(-o->rc) : "not a negative errno", o->err);
	if (o->mounted != (o->state == MFS_MOUNTED))
		FAIL("%s: %s: state %d but %s mounted", step_name[s], what, o->state,
		     o->mounted ? "something" : "nothing");
	if (o->rc && (s == MOUNT_NEW || s == MOUNT_CREATE) && (o->mounted || o->state >= 0))
		FAIL("%s: %s: a failed mount left the DBFS %s", step_name[s], what,
		     o->mounted ? "mounted" : "registered in memory");
	if (s == SUBSCRIBE && o->sub != (o->rc ? 0 : 1))
		FAIL("%s: %s: answered %d, subscription %s", step_name[s], what, o->rc,
		     o->sub > 0 ? "there" : "not there");
	if (s == UNSUBSCRIBE && o->sub != (o->rc ? 1 : 0))
		FAIL("%s: %s: answered %d, subscription %s", step_name[s], what, o->rc,
		     o->sub > 0 ? "there" : "not there");
	if (o->rc && s == MOUNT_CREATE && access(store, F_OK) == 0)
		FAIL("%s: %s: a failed mount with create left %s", step_name[s], what, store);
	if (!o->mounted && !dir_empty(mp))
		FAIL("%s: %s: the mount point is not empty", step_name[s], what);
	bool is_before = !strcmp(o->reg.s, before->s), is_after = !strcmp(o->reg.s, after->reg.s);
	if (!is_before && !is_after)
		FAIL("%s: %s: the registry holds neither before nor after:\n%s", step_name[s],
		     what, o->reg.s);
	if (o->rc && !is_before)
		FAIL("%s: %s: failed (%s) but the registry changed:\n%s", step_name[s], what,
		     o->err, o->reg.s);
	if (!o->rc && !is_after)
		FAIL("%s: %s: succeeded but the registry does not hold it (a restart loses "
		     "it):\n%s",
		     step_name[s], what, o->reg.s);
	if (strcmp(o->mem.s, o->reg.s))
		FAIL("%s: %s: the manager runs\n%sbut the registry holds\n%s", step_name[s], what,
		     o->mem.s, o->reg.s);
	if (o->rc && o->rc != -ENOMEM && !o->err[0]) /* ENOMEM: strerror says it all */
		FAIL("%s: %s: refused (%s) without a reason", step_name[s], what,
		     strerror(-o->rc));
	if (o->rc && strstr(o->err, "registry"))
		registry_refused++;
	if (o->rc)
		refused++;
	if (s != MOUNT_CREATE || !o->rc) {
		if (fsck(store))
			FAIL("%s: %s: the store fails dbfs-fsck", step_name[s], what);
	}
}

int main(int argc, char **argv)
{
	bool full = false;
	if (argc < 2) {
		fprintf(stderr, "usage: %s FSCK [--full]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--full"))
			full = true;
		else {
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (getuid() != 0 || access("/dev/fuse", R_OK | W_OK)) {
		printf("SKIP: needs root and /dev/fuse\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	fsck_path = argv[1];
	if (!getenv("FAULT_VERBOSE"))
		mfs_log_set_level(MFS_LOG_ERR);
	/* on a disk, as stores belong (in memory LMDB writes through its map) */
	const char *tmp = access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
	snprintf(base, sizeof(base), "%s/mfs-fault-ctl-XXXXXX", tmp);
	if (!mkdtemp(base))
		fault_die("mkdtemp");
	snprintf(tmpl, sizeof(tmpl), "%s/template", base);
	snprintf(run_dir, sizeof(run_dir), "%s/run", base);
	snprintf(store, sizeof(store), "%s/store", run_dir);
	snprintf(mp, sizeof(mp), "%s/mp", run_dir);
	snprintf(state, sizeof(state), "%s/state", run_dir);

	/* the template store holds /f */
	struct dbfs *fs;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	if (mkdir(tmpl, 0755) || dbfs_open(tmpl, &o, &fs, err, sizeof(err)))
		fault_die("template");
	dbfs_close(fs);
	start_manager();
	{ /* /f, through a mount */
		char v[1200];
		rm_rf(run_dir);
		if (mkdir(run_dir, 0755) || mkdir(mp, 0755))
			fault_die("mkdir");
		copy_store(tmpl, store);
		open_registry();
		snprintf(v, sizeof(v), "name=a,store=%s,mountpoint=%s", store, mp);
		must("user.mfs.mount", v);
		snprintf(v, sizeof(v), "%s/f", mp);
		int fd = open(v, O_CREAT | O_WRONLY, 0644);
		if (fd < 0 || write(fd, "data\n", 5) != 5 || close(fd))
			fault_die("template /f");
		must("user.mfs.unmount", "a");
		must("user.mfs.forget", "a");
		mfs_registry_close(mgr.reg);
		rm_rf(tmpl);
		copy_store(store, tmpl);
	}
	fault_owner_only(true);

	const char *only = getenv("FAULT_STEP");
	for (int s = 0; s < NSTEPS; s++) {
		if (only && strcmp(only, step_name[s]))
			continue;
		struct outcome after, got;
		struct text before;
		int fds0 = nfds();
		run(s, -1, 0, false, &after, &before);
		if (after.rc != step_rc[s])
			FAIL("%s answers %d without a fault: %s", step_name[s], after.rc,
			     after.err);
		if (nfds() != fds0)
			FAIL("%s: %d descriptors before, %d after, without a fault", step_name[s],
			     fds0, nfds());
		for (int kind = 0; kind < FAULT_KINDS; kind++) {
			for (int p = 0; p < (full ? 2 : 1); p++) {
				long n = 1, calls;
				do {
					char what[80];
					snprintf(what, sizeof(what), "%s fault at %ld%s",
						 fault_kind_name[kind], n, p ? " and after" : "");
					fds0 = nfds();
					calls = run(s, kind, n, p, &got, &before);
					if (calls >= n) {
						check(s, what, &got, &after, &before);
						points++;
						points_kind[kind]++;
					}
					if (nfds() != fds0)
						FAIL("%s: %s: %d descriptors before, %d after",
						     step_name[s], what, fds0, nfds());
				} while (calls >= n && (n += fault_stride()));
				printf("%-13s %-5s %s N = 1..%ld%s\n", step_name[s],
				       fault_kind_name[kind], p ? "from N on" : "once     ", calls,
				       fault_stride_note());
			}
		}
	}
	mfs_inbox_close();
	mfs_loop_destroy(mgr.loop);
	rm_rf(base);
	printf("%ld fault points on the control steps with mounts (lmdb %ld, alloc %ld, write "
	       "%ld)%s; %ld refused, %ld of them as the registry could not record the change; %ld "
	       "left the DBFS failed after a store write failed; %d failures\n",
	       points, points_kind[FAULT_LMDB], points_kind[FAULT_ALLOC], points_kind[FAULT_WRITE],
	       fault_stride_note(), refused, registry_refused, io_errors, failures);
	return failures ? 1 : 0;
}
