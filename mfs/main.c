/*
 * mfs — the manager daemon.
 *
 *   mfs [-f] [-d] [-o state=DIR,allow_other,threads=N,...] [SOURCE] MOUNTPOINT
 *       serve the manager mount at MOUNTPOINT and every DBFS it manages
 *       (SOURCE is ignored: it is what mount(8) and fstab pass).
 *   mfs [-f] --dbfs STORE [-o create,durability=...,threads=N] MOUNTPOINT
 *       serve exactly one DBFS, no manager mount.
 *
 * Set-up order (unwound in reverse): daemonize, signals, registry, loop,
 * manager mount, then the control loop on this thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fuse_lowlevel.h>

#include "conf.h"
#include "control.h"
#include "inbox.h"
#include "kv.h"
#include "log.h"
#include "loop.h"
#include "manager.h"
#include "manager_fs.h"
#include "mount.h"
#include "registry.h"
#include "startup.h"
#include "account.h"
#include "http_metrics.h"
#include "uring.h"

#define DEFAULT_THREADS 8

enum { URING_AUTO, URING_OFF, URING_ON };

struct cli {
	bool foreground;
	bool debug;
	bool allow_other;
	bool unfair;
	bool latency;
	int uring; /* URING_* */
	uint64_t mem;
	struct mfs_user_limits user_limits;
	unsigned threads;
	unsigned yield_share; /* 0: default */
	struct mfs_account_conf acct;
	struct sockaddr_storage metrics_addr; /* -o metrics_listen=; family 0: none */
	const char *dbfs_store;
	const char *mountpoint;
	char state_dir[PATH_MAX];
	char dbfs_opts[MFS_OPTS_MAX]; /* --dbfs: options for the store */
	bool create;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mfs [-f] [-d] [-o state=DIR,allow_other,threads=N] [SOURCE] MOUNTPOINT\n"
		"       mfs [-f] --dbfs STORE [-o create,durability=MODE,...] MOUNTPOINT\n"
		"       mfs --help | --version\n"
		"\n"
		"The first form serves the manager mount point MOUNTPOINT: control it with\n"
		"setfattr/getfattr on its root or with mfsctl(8). The second serves one DBFS.\n"
		"\n"
		"  -f            stay in the foreground (log to stderr)\n"
		"  -d            debug logging\n"
		"  -o state=DIR  state directory (registry), default /var/lib/mfs for root,\n"
		"                else $XDG_STATE_HOME/mfs or ~/.local/state/mfs\n"
		"  -o threads=N  worker threads shared by every mount (default %d)\n"
		"  -o allow_other  let other users read status and manage their own DBFSs\n"
		"  -o governor=off  no fair share of workers, no CPU yielding (for comparisons)\n"
		"  -o governor=latency  also an express thread for quiet DBFSs (see\n"
		"                GOVERNOR in mfs(8))\n"
		"  -o yield_share=PERCENT  CPU share of a busy DBFS while it yields to\n"
		"                quiet ones (1..100, default 10; 100: no limit)\n"
		"  -o mem=SIZE   kernel cache memory for all DBFSs, shared equally\n"
		"  -o usage_fine=DURATION, usage_coarse=DURATION  usage history kept at\n"
		"                1 s resolution (default 1h) and 1 min (default 7d)\n"
		"  -o metrics_listen=ADDR:PORT  serve the metrics file over HTTP (Prometheus)\n"
		"  -o user_max_dbfs=N, user_max_bytes=SIZE, user_max_inodes=N  limits of\n"
		"                each user other than root and the daemon's user: DBFSs,\n"
		"                and the sums of their quota_bytes and quota_inodes\n"
		"  -o uring=auto|on|off  serve DBFS requests over per-CPU io_uring queues\n"
		"                when the kernel offers them (auto, the default); on: as\n"
		"                root, also turn the fuse module's enable_uring on\n"
		"See mfs(8).\n",
		DEFAULT_THREADS);
}

/* Options mount(8) and mount.fuse3 may pass that mean nothing to mfs. */
static bool generic_mount_option(const char *k)
{
	static const char *const names[] = {
		"rw",	 "dev",	  "nodev",  "suid",	"nosuid",  "exec",    "noexec",
		"atime", "noatime", "relatime", "strictatime", "nodiratime", "diratime",
		"async", "sync",	  "auto",	"noauto",	"user",	   "nouser",  "users",
		"defaults", "_netdev", "nofail", "lazytime", "default_permissions",
	};
	if (!strncmp(k, "x-", 2) || !strncmp(k, "comment", 7))
		return true;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(k, names[i]))
			return true;
	return false;
}

static int parse_o(struct cli *c, const char *s)
{
	struct mfs_kvlist l;
	char err[256];
	int rc;

	if (!*s)
		return 0;
	rc = mfs_kv_parse(s, strlen(s), 0, &l, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "mfs: -o %s: %s\n", s, err);
		return -1;
	}
	for (size_t i = 0; i < l.n && !rc; i++) {
		const char *k = l.items[i].key, *v = l.items[i].value;
		uint64_t n = 0;
		if (!strcmp(k, "threads")) {
			if (mfs_parse_uint(v, 1024, &n) || n < 1) {
				fprintf(stderr, "mfs: threads must be 1..1024\n");
				rc = -1;
			}
			c->threads = (unsigned)n;
		} else if (!strcmp(k, "usage_fine") || !strcmp(k, "usage_coarse")) {
			bool fine = !strcmp(k, "usage_fine");
			uint64_t lo = fine ? 60 : 3600, hi = fine ? 86400 : 366 * 86400ull;
			if (!v || mfs_account_parse_duration(v, &n) || n < lo || n > hi) {
				fprintf(stderr, "mfs: %s must be a duration of %llus to %llus (e.g. 1h, 7d)\n",
					k, (unsigned long long)lo, (unsigned long long)hi);
				rc = -1;
			} else {
				*(fine ? &c->acct.fine_sec : &c->acct.coarse_sec) = n;
			}
		} else if (!strcmp(k, "metrics_listen") && !c->dbfs_store) {
			socklen_t len;
			if (!v || mfs_http_parse(v, &c->metrics_addr, &len, err, sizeof(err))) {
				fprintf(stderr, "mfs: %s\n", v ? err : "metrics_listen needs ADDR:PORT");
				rc = -1;
			}
		} else if (!strcmp(k, "yield_share")) {
			if (mfs_parse_uint(v, 100, &n) || n < 1) {
				fprintf(stderr, "mfs: yield_share must be 1..100\n");
				rc = -1;
			}
			c->yield_share = (unsigned)n;
		} else if (!strcmp(k, "state") && !c->dbfs_store) {
			if (!v || v[0] != '/' || strlen(v) >= sizeof(c->state_dir)) {
				fprintf(stderr, "mfs: state= needs an absolute path\n");
				rc = -1;
			} else {
				strcpy(c->state_dir, v);
			}
		} else if (!strcmp(k, "governor")) {
			if (!v || (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "latency"))) {
				fprintf(stderr, "mfs: governor=on|off|latency\n");
				rc = -1;
			}
			c->unfair = v && !strcmp(v, "off");
			c->latency = v && !strcmp(v, "latency");
		} else if (!strcmp(k, "uring")) {
			if (!v || (strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "off"))) {
				fprintf(stderr, "mfs: uring=auto|on|off\n");
				rc = -1;
			}
			c->uring = !v || !strcmp(v, "auto") ? URING_AUTO
				   : !strcmp(v, "on")        ? URING_ON
							     : URING_OFF;
		} else if (!strcmp(k, "allow_other")) {
			c->allow_other = true;
		} else if (!strcmp(k, "debug")) {
			c->debug = true;
		} else if (!strncmp(k, "user_max_", 9) && !c->dbfs_store) {
			uint64_t *slot = !strcmp(k, "user_max_dbfs")	? &c->user_limits.dbfs
					 : !strcmp(k, "user_max_bytes")	? &c->user_limits.bytes
					 : !strcmp(k, "user_max_inodes") ? &c->user_limits.inodes
									 : NULL;
			int bad = !slot || !v ||
				  (slot == &c->user_limits.bytes ? mfs_parse_size(v, slot)
								 : mfs_parse_uint(v, UINT32_MAX, slot));
			if (bad || !*slot) {
				fprintf(stderr, "mfs: %s needs a positive %s\n", k,
					slot == &c->user_limits.bytes ? "size" : "number");
				rc = -1;
			}
		} else if (!strcmp(k, "mem") && !c->dbfs_store) {
			uint64_t sz = 0;
			if (!v || mfs_parse_size(v, &sz)) {
				fprintf(stderr, "mfs: bad mem= size\n");
				rc = -1;
			}
			c->mem = sz;
		} else if (generic_mount_option(k) ||
			   (!strcmp(k, "ro") && !c->dbfs_store)) {
			continue;
		} else if (c->dbfs_store) {
			if (!strcmp(k, "create")) {
				c->create = true;
				continue;
			}
			rc = mfs_conf_check(k, v, err, sizeof(err));
			if (rc) {
				fprintf(stderr, "mfs: %s\n", err);
				rc = -1;
			} else if (mfs_conf_set(c->dbfs_opts, sizeof(c->dbfs_opts), k, v)) {
				fprintf(stderr, "mfs: options too long\n");
				rc = -1;
			}
		} else {
			fprintf(stderr, "mfs: unknown option '%s'\n", k);
			rc = -1;
		}
	}
	mfs_kv_free(&l);
	return rc;
}

/* Parse argv. Returns -1 on error, 1 when done (help/version), 0 to run. */
static int parse_args(struct cli *c, int argc, char **argv)
{
	const char *pos[2] = {NULL, NULL};
	int npos = 0;
	/* -o of the single form is parsed once the form is known */
	const char *opts[64];
	int nopts = 0;

	c->threads = DEFAULT_THREADS;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("mfs %s\n", MFS_VERSION);
			return 1;
		} else if (!strcmp(a, "-f")) {
			c->foreground = true;
		} else if (!strcmp(a, "-d")) {
			c->debug = true;
			c->foreground = true;
		} else if (!strcmp(a, "--dbfs") && i + 1 < argc) {
			c->dbfs_store = argv[++i];
		} else if (!strncmp(a, "--dbfs=", 7)) {
			c->dbfs_store = a + 7;
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			if (nopts == 64)
				return -1;
			opts[nopts++] = argv[++i];
		} else if (!strncmp(a, "-o", 2) && a[2]) {
			if (nopts == 64)
				return -1;
			opts[nopts++] = a + 2;
		} else if (a[0] != '-' && npos < 2) {
			pos[npos++] = a;
		} else {
			fprintf(stderr, "mfs: unexpected argument '%s'\n", a);
			return -1;
		}
	}
	for (int i = 0; i < nopts; i++)
		if (parse_o(c, opts[i]))
			return -1;
	if (npos == 0) {
		fprintf(stderr, "mfs: missing MOUNTPOINT\n");
		return -1;
	}
	if (npos == 2 && c->dbfs_store) {
		fprintf(stderr, "mfs: --dbfs takes one MOUNTPOINT\n");
		return -1;
	}
	c->mountpoint = pos[npos - 1];
	if (!c->dbfs_store && !c->state_dir[0]) {
		const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
		if (geteuid() == 0)
			snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/mfs");
		else if (xdg && xdg[0] == '/')
			snprintf(c->state_dir, sizeof(c->state_dir), "%s/mfs", xdg);
		else if (home && home[0] == '/')
			snprintf(c->state_dir, sizeof(c->state_dir), "%s/.local/state/mfs", home);
		else {
			fprintf(stderr, "mfs: give -o state=DIR\n");
			return -1;
		}
	}
	return 0;
}

/* Daemonizing: the parent waits until the child reports that it serves its
 * mounts (one status byte), so `mfs /mnt/mfs && ls /mnt/mfs` works. */
static int ready_fd = -1;

static int daemon_start(void)
{
	int p[2];

	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		unsigned char st = 1;
		close(p[1]);
		if (read(p[0], &st, 1) != 1)
			st = 1;
		_exit(st);
	}
	close(p[0]);
	ready_fd = p[1];
	setsid();
	return 0;
}

static void daemon_ready(int status)
{
	if (ready_fd < 0)
		return;
	if (status == 0) {
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		if (chdir("/") < 0)
			status = 1;
	}
	unsigned char st = (unsigned char)status;
	if (write(ready_fd, &st, 1) != 1)
		mfs_warn("cannot report readiness");
	close(ready_fd);
	ready_fd = -1;
}

static sigset_t stop_signals;

/* libfuse's handlers know one session; this thread reaches all of them
 * through the control thread. */
static void *signal_main(void *arg)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&stop_signals, &si);
		if (sig < 0)
			continue;
		/* who sent it: a stop nobody asked for can be traced to its sender */
		if (si.si_code == SI_USER || si.si_code == SI_QUEUE)
			mfs_info("signal %d (%s) from pid %d, uid %u: stopping", sig, strsignal(sig),
				 (int)si.si_pid, (unsigned)si.si_uid);
		else
			mfs_info("signal %d (%s): stopping", sig, strsignal(sig));
		mfs_inbox_stop();
	}
	return NULL;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* FUSE over io_uring (uring.h): the rings exist unless turned off; each
 * DBFS uses them when its FUSE_INIT says the kernel offers them. */
static void start_uring(struct mfs_manager *mgr, int mode)
{
	static const char param[] = "/sys/module/fuse/parameters/enable_uring";

	if (mode == URING_OFF)
		return;
	if (mode == URING_ON && !mfs_uring_kernel_enabled()) {
		int fd = open(param, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "Y", 1) != 1)
			mfs_warn("uring=on: cannot turn on %s: %s", param, strerror(errno));
		else
			mfs_info("uring=on: turned on %s", param);
		if (fd >= 0)
			close(fd);
	}
	int rc = mfs_uring_create(mgr->loop, mfs_loop_io(dbfs_fuse_io()), &mgr->uring);
	if (rc) {
		mgr->uring = NULL;
		if (mode == URING_ON)
			mfs_warn("uring=on: no io_uring queues (%s): DBFSs use /dev/fuse",
				 strerror(-rc));
		else
			mfs_debug("no io_uring queues (%s)", strerror(-rc));
		return;
	}
	mfs_debug("io_uring queues ready; the kernel %s them", mfs_uring_kernel_enabled()
								 ? "offers"
								 : "does not offer (enable_uring=N)");
}

static int serve_single(struct mfs_manager *mgr, const struct cli *c)
{
	struct mfs_dbfs *d = calloc(1, sizeof(*d));
	char err[512] = "";

	if (!d)
		return 1;
	snprintf(d->conf.name, sizeof(d->conf.name), "dbfs");
	snprintf(d->conf.store, sizeof(d->conf.store), "%s", c->dbfs_store);
	snprintf(d->conf.mountpoint, sizeof(d->conf.mountpoint), "%s", mgr->mountpoint);
	snprintf(d->conf.opts, sizeof(d->conf.opts), "%s", c->dbfs_opts);
	d->conf.owner = getuid();
	d->id = 1;
	/* create makes a missing store directory, as the manager's mount does
	 * (its parent must exist) */
	int rc = 0;
	if (c->create && mkdir(c->dbfs_store, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, sizeof(err), "cannot create store %s: %s", c->dbfs_store,
			 strerror(errno));
	}
	if (!rc)
		rc = mfs_startup_mount_now(mgr, d, c->create, err, sizeof(err));
	if (rc) {
		if (err[0])
			mfs_err("%s", err);
		else
			mfs_err("%s: %s", c->dbfs_store, strerror(-rc));
		free(d);
		return 1;
	}
	return 0;
}

static int serve_manager(struct mfs_manager *mgr, const struct cli *c)
{
	char err[512] = "";
	char opts[256];
	int rc;

	rc = mfs_registry_open(mgr->state_dir, &mgr->reg, err, sizeof(err));
	if (rc) {
		mfs_err("%s", err);
		return 1;
	}
	mfs_clean_stale(mgr->mountpoint);
	snprintf(opts, sizeof(opts), "fsname=mfs,subtype=mfs,nodev,nosuid%s",
		 c->allow_other ? ",allow_other" : "");
	rc = mfs_mount_session(mfs_manager_fs_ops(), NULL, mgr, mgr->mountpoint, opts, 0, &mgr->se, err,
			       sizeof(err));
	if (rc) {
		mfs_err("%s", err);
		return 1;
	}
	if (mfs_mount_lookup(mgr->mountpoint, &mgr->dev, NULL, 0))
		mfs_warn("manager mount not found in mountinfo");
	rc = mfs_loop_add(mgr->loop, mgr->se, "manager", mfs_inbox_manager_ended, mgr, &mgr->sess);
	if (rc) {
		mfs_err("cannot serve the manager mount: %s", strerror(-rc));
		mfs_unmount_path(mgr->mountpoint, true);
		fuse_session_destroy(mgr->se);
		mgr->se = NULL;
		return 1;
	}
	struct mfs_account_conf ac = c->acct;
	if (!ac.fine_sec)
		ac.fine_sec = MFS_USAGE_FINE_DEFAULT;
	if (!ac.coarse_sec)
		ac.coarse_sec = MFS_USAGE_COARSE_DEFAULT;
	if (mfs_account_start(mgr, &ac, &mgr->acct, err, sizeof(err)))
		mfs_warn("no accounting: %s", err);
	rc = mfs_startup_load(mgr);
	if (rc)
		mfs_err("registry: %s", strerror(-rc));
	mfs_info("manager mounted at %s (state %s, %u workers)", mgr->mountpoint,
		 mgr->state_dir, mfs_loop_workers(mgr->loop));
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c;
	static struct mfs_manager mgr;
	pthread_t sig_thread;
	int rc;

	memset(&c, 0, sizeof(c));
	rc = parse_args(&c, argc, argv);
	if (rc) {
		if (rc < 0)
			usage(stderr);
		return rc < 0 ? 2 : 0;
	}
	if (c.debug)
		mfs_log_set_level(MFS_LOG_DEBUG);
	if (!realpath(c.mountpoint, mgr.mountpoint)) {
		/* a stale mount still resolves by name */
		if (!mfs_errno_dead_mount(errno) || strlen(c.mountpoint) >= sizeof(mgr.mountpoint)) {
			fprintf(stderr, "mfs: %s: %s\n", c.mountpoint, strerror(errno));
			return 1;
		}
		snprintf(mgr.mountpoint, sizeof(mgr.mountpoint), "%s", c.mountpoint);
	}
	if (!c.foreground) {
		if (daemon_start() < 0) {
			fprintf(stderr, "mfs: cannot daemonize: %s\n", strerror(errno));
			return 1;
		}
		mfs_log_to_syslog();
	}
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGHUP);
	sigaddset(&stop_signals, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL); /* inherited by every thread */

	pthread_mutex_init(&mgr.lock, NULL);
	mgr.uid = getuid();
	mgr.allow_other = c.allow_other;
	mgr.mem = c.mem;
	mgr.user_limits = c.user_limits;
	mgr.started_at = (uint64_t)time(NULL);
	mgr.single = c.dbfs_store != NULL;
	snprintf(mgr.state_dir, sizeof(mgr.state_dir), "%s", c.state_dir);
	mfs_inbox_init(&mgr);

	rc = mfs_loop_create(c.threads, &mgr.loop);
	if (rc) {
		mfs_err("cannot start %u workers: %s", c.threads, strerror(-rc));
		daemon_ready(1);
		return 1;
	}
	/* before anything is mounted: a port that cannot be had stops mfs */
	struct mfs_http *http = NULL;
	if (c.metrics_addr.ss_family) {
		char err[256];
		if (mfs_http_start(&mgr, &c.metrics_addr, &http, err, sizeof(err))) {
			mfs_err("%s", err);
			mfs_loop_destroy(mgr.loop);
			daemon_ready(1);
			return 1;
		}
	}
	mfs_loop_set_fair(mgr.loop, !c.unfair);
	if (c.yield_share)
		mfs_loop_set_yield_share(mgr.loop, c.yield_share);
	if (mfs_loop_set_latency(mgr.loop, c.latency))
		mfs_warn("governor=latency: cannot start the express thread");
	/* In latency mode light DBFSs are served by the express thread; a ring
	 * would serve them behind busy ones, in arrival order. */
	start_uring(&mgr, c.latency && c.uring == URING_AUTO ? URING_OFF : c.uring);
	rc = mgr.single ? serve_single(&mgr, &c) : serve_manager(&mgr, &c);
	if (rc) {
		mfs_http_stop(http);
		mfs_uring_destroy(mgr.uring);
		mfs_loop_destroy(mgr.loop);
		mfs_registry_close(mgr.reg);
		daemon_ready(1);
		return 1;
	}
	if (pthread_create(&sig_thread, NULL, signal_main, NULL))
		mfs_warn("no signal thread: stop mfs by unmounting it");
	daemon_ready(0);

	mfs_control_run(&mgr);
	mfs_http_stop(http);
	mfs_account_stop(mgr.acct);
	mgr.acct = NULL;

	mfs_uring_destroy(mgr.uring);
	mfs_loop_destroy(mgr.loop);
	mfs_registry_close(mgr.reg);
	mfs_info("stopped");
	return 0;
}
