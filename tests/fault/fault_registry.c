/*
 * Fault injection along the manager's registry (mfs/registry.c), the one
 * control-path step that writes without a mount: for each kind of fault
 * (inject.h) and N = 1.. until a run no longer reaches the Nth call, each
 * step (open of a new and of an existing registry, put of a new and of an
 * existing record, del, load) must return an error or succeed, leak
 * nothing (sanitizer build), and leave the registry, reopened, with the
 * records before or after the step (after on success); a load that
 * succeeds must have seen every record.
 *
 * Usage: test_fault_registry [--strict]
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "inject.h"
#include "parse.h"
#include "registry.h"
#include "verbs.h"

static char dir[300], sdir[400];
static int failures;
static long points, known, known_parse;
static bool strict;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

static void rm_state(void)
{
	char p[600];
	const char *files[] = {"lock", "registry.mdb", "registry.mdb-lock"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", sdir, files[i]);
		unlink(p);
	}
	rmdir(sdir);
}

static struct mfs_conf conf(const char *name, const char *opts)
{
	struct mfs_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	snprintf(c.store, sizeof(c.store), "/srv/%s", name);
	snprintf(c.mountpoint, sizeof(c.mountpoint), "/mnt/%s", name);
	snprintf(c.opts, sizeof(c.opts), "%s", opts);
	c.owner = 1000;
	c.want_mounted = true;
	return c;
}

struct text {
	char s[4096];
	size_t n;
};

static int add(void *arg, const struct mfs_conf *c, uint32_t id)
{
	struct text *t = arg;
	t->n += (size_t)snprintf(t->s + t->n, sizeof(t->s) - t->n, "%s id %u %s %s %s\n", c->name,
				 id, c->store, c->mountpoint, c->opts);
	return 0;
}

/* The records, as text, of the registry reopened without faults. */
static void records(struct text *t)
{
	struct mfs_registry *r;
	char err[256];
	memset(t, 0, sizeof(*t));
	if (mfs_registry_open(sdir, &r, err, sizeof(err))) {
		snprintf(t->s, sizeof(t->s), "(cannot open: %s)\n", err);
		return;
	}
	if (mfs_registry_load(r, add, t))
		snprintf(t->s, sizeof(t->s), "(cannot load)\n");
	mfs_registry_close(r);
}

/* Three records, as a running manager leaves them. */
static void seed(void)
{
	struct mfs_registry *r;
	char err[256];
	rm_state();
	if (mfs_registry_open(sdir, &r, err, sizeof(err))) {
		fprintf(stderr, "seed: %s\n", err);
		exit(2);
	}
	const char *names[] = {"alpha", "beta", "gamma"};
	for (int i = 0; i < 3; i++) {
		struct mfs_conf c = conf(names[i], "quota_bytes=1M");
		if (mfs_registry_put(r, &c, (uint32_t)i + 2))
			exit(2);
	}
	mfs_registry_close(r);
}

enum step { OPEN_NEW, OPEN, PUT_NEW, PUT_REPLACE, DEL, LOAD, NSTEPS };
static const char *const step_name[NSTEPS] = {"open_new",    "open", "put_new",
					      "put_replace", "del",  "load"};

/* Run a step with the fault armed (kind < 0: none); *calls gets the count. */
static int run(enum step s, int kind, long n, long *calls, struct text *loaded)
{
	struct mfs_registry *r = NULL;
	char err[256];
	int rc;
	if (s == OPEN_NEW)
		rm_state();
	else
		seed();
	if (s == OPEN_NEW || s == OPEN) {
		if (kind >= 0)
			fault_arm(kind, n, false, sdir);
		rc = mfs_registry_open(sdir, &r, err, sizeof(err));
		*calls = kind >= 0 ? fault_disarm() : 0;
		mfs_registry_close(r);
		return rc;
	}
	if (mfs_registry_open(sdir, &r, err, sizeof(err)))
		exit(2);
	struct mfs_conf nc = conf("delta", "ro"), rc_ = conf("beta", "quota_inodes=7");
	memset(loaded, 0, sizeof(*loaded));
	if (kind >= 0)
		fault_arm(kind, n, false, sdir);
	switch (s) {
	case PUT_NEW:
		rc = mfs_registry_put(r, &nc, 9);
		break;
	case PUT_REPLACE:
		rc = mfs_registry_put(r, &rc_, 3);
		break;
	case DEL:
		rc = mfs_registry_del(r, "beta");
		break;
	default:
		rc = mfs_registry_load(r, add, loaded);
		break;
	}
	*calls = kind >= 0 ? fault_disarm() : 0;
	mfs_registry_close(r);
	return rc;
}

/* The control commands' parsers allocate (kv.c, conf.c): each allocation
 * may fail; the command is then refused with ENOMEM and a reason, and the
 * same command parses as without a fault once nothing fails. */
static void check_parsers(void)
{
	static const struct {
		const char *name, *value;
		int (*parse)(const char *, size_t, struct mfs_cmd *, char *, size_t);
	} cmds[] = {
	    {"parse mount", "name=a,store=/s/a,mountpoint=/m/a,create,quota_bytes=1G,mem=64M",
	     mfs_parse_mount},
	    {"parse unmount", "a,force", mfs_parse_unmount},
	    {"parse config", "name=a,quota_inodes=100,attr_timeout=2", mfs_parse_config},
	    {"parse forget", "a", mfs_parse_forget},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		long n;
		for (n = 1;; n++) {
			static struct mfs_cmd cmd;
			char err[256] = "";
			memset(&cmd, 0, sizeof(cmd));
			fault_arm(FAULT_ALLOC, n, false, NULL);
			int rc = cmds[i].parse(cmds[i].value, strlen(cmds[i].value), &cmd, err,
					       sizeof(err));
			long calls = fault_disarm();
			if (calls < n) {
				if (rc)
					FAIL("%s: %s without a fault", cmds[i].name, err);
				break;
			}
			points++;
			/* KNOWN BUG, reported (issue 15): parse.c's take_option
			 * turns any failure of mfs_conf_set (its -ENOMEM, and
			 * mfs_kv_parse's -ENOMEM that mfs_conf_set makes -EINVAL)
			 * into EINVAL "options too long". --strict fails on it. */
			if (rc == -EINVAL && !strcmp(err, "options too long") && !strict)
				known_parse++;
			else if (rc != -ENOMEM && rc != 0)
				FAIL("%s: allocation %ld failed: %d (%s)", cmds[i].name, n, rc,
				     err);
			if (rc == -ENOMEM && !err[0])
				FAIL("%s: allocation %ld failed: ENOMEM without a reason",
				     cmds[i].name, n);
		}
		printf("%-12s alloc N = 1..%ld\n", cmds[i].name, n - 1);
	}
	long n;
	for (n = 1;; n++) {
		struct dbfs_options o;
		struct mfs_limits lim;
		char err[256] = "";
		memset(&lim, 0, sizeof(lim));
		dbfs_options_init(&o);
		fault_arm(FAULT_ALLOC, n, false, NULL);
		int rc = mfs_conf_parse("quota_bytes=1G,quota_inodes=5,mem=1M,durability=full", &o,
					&lim, err, sizeof(err));
		long calls = fault_disarm();
		if (calls < n) {
			if (rc)
				FAIL("conf parse: %s without a fault", err);
			break;
		}
		points++;
		if (rc != -ENOMEM && rc != 0)
			FAIL("conf parse: allocation %ld failed: %d (%s)", n, rc, err);
	}
	printf("%-12s alloc N = 1..%ld\n", "conf parse", n - 1);
}

int main(int argc, char **argv)
{
	strict = argc > 1 && !strcmp(argv[1], "--strict");
	struct text before, after, got, loaded, loaded0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof(dir), "%s/mfs-fault-reg-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		return 2;
	snprintf(sdir, sizeof(sdir), "%s/state", dir);
	for (int s = 0; s < NSTEPS; s++) {
		long calls;
		if (s == OPEN_NEW) {
			rm_state();
			snprintf(before.s, sizeof(before.s), "(empty)\n");
		} else {
			seed();
			records(&before);
		}
		if (run(s, -1, 0, &calls, &loaded0))
			FAIL("%s fails without a fault", step_name[s]);
		records(&after);
		if (s == OPEN_NEW)
			snprintf(before.s, sizeof(before.s), "%s", after.s); /* empty registry */
		for (int kind = 0; kind < FAULT_KINDS; kind++) {
			long n;
			for (n = 1;; n++) {
				int rc = run(s, kind, n, &calls, &loaded);
				if (calls < n)
					break;
				points++;
				records(&got);
				bool is_before = !strcmp(got.s, before.s),
				     is_after = !strcmp(got.s, after.s);
				if (rc == 0 && !is_after)
					FAIL("%s: %s fault at %ld: success, records:\n%s",
					     step_name[s], fault_kind_name[kind], n, got.s);
				if (rc && !is_before && !is_after)
					FAIL("%s: %s fault at %ld: error %d, records:\n%s",
					     step_name[s], fault_kind_name[kind], n, rc, got.s);
				if (rc >= 0 && rc != 0)
					FAIL("%s: %s fault at %ld: not a negative errno: %d",
					     step_name[s], fault_kind_name[kind], n, rc);
				/* KNOWN BUG, reported (issue 15): mfs_registry_load ends
				 * its cursor loop on any error and returns 0, so a failed
				 * read at startup makes mfs forget the DBFSs after it.
				 * Counted, not failed, until mfs/registry.c is fixed;
				 * --strict fails on it. */
				if (s == LOAD && rc == 0 && strcmp(loaded.s, loaded0.s)) {
					if (strict)
						FAIL("load: %s fault at %ld: success but saw "
						     "only:\n%s",
						     fault_kind_name[kind], n, loaded.s);
					known++;
				}
			}
			printf("%-12s %-5s N = 1..%ld\n", step_name[s], fault_kind_name[kind],
			       n - 1);
		}
	}
	check_parsers();
	rm_state();
	rmdir(dir);
	printf("%ld fault points; known bugs: %ld (load reports success after a failed read), "
	       "%ld (ENOMEM refused as EINVAL 'options too long'); %d failures\n",
	       points, known, known_parse, failures);
	return failures ? 1 : 0;
}
