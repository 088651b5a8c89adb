/*
 * Fault injection in a group commit of several writers (dbfs/commit.c).
 *
 * Seven writer threads queue their operations while a leader holds the
 * writer (a blocking operation of an eighth thread); once all seven are
 * queued, the fault is armed (inject.h: the Nth LMDB call, allocation of
 * libdbfs or write to the store, from then on) and the leader let go, so
 * that the seven run as one batch in one transaction, led by one of them.
 * Only one thread makes calls at a time (the others wait on the group
 * commit's condition), so the Nth call is the same in every run. For each
 * kind and N = 1, 2, ... until a run makes fewer than N calls:
 *   - every writer gets 0, its own refusal (the second create of one name:
 *     EEXIST) or a plausible errno: a failed batch is run again one
 *     operation at a time, so one failure never takes another's change
 *     along or leaks into its commit;
 *   - the store, closed, passes dbfs-fsck; reopened, each operation's
 *     change is there if and only if it was answered 0;
 *   - nothing leaks (the sanitizer build's leak check, at exit).
 *
 * Usage: test_fault_batch FSCK [--full]   (--full: persistent faults too)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "harness.h"
#include "inject.h"

extern char **environ;

static const char *fsck_path;
static char base[256], tmpl[300], work[300];
static struct dbfs *fs;
static int failures;
static long points, points_kind[FAULT_KINDS], batched;
static uint64_t f_ino; /* the template's /f */

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
	char p[600];
	if (!dd)
		return;
	while ((e = readdir(dd))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
			unlink(p);
		}
	}
	closedir(dd);
	rmdir(d);
}

static void copy_store(const char *from, const char *to)
{
	DIR *dd = opendir(from);
	struct dirent *e;
	char a[600], b[600];
	rm_rf(to);
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

static void must_open(const char *d, bool create)
{
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = create;
	o.initial_map_size = 4 << 20;
	int rc = dbfs_open(d, &o, &fs, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "open %s: %s\n", d, err);
		exit(2);
	}
}

/* ---- the operations of the batch ---- */

static const struct dbfs_cred root = {0, 0, 022};
static char data[100000];

enum { OP_MKDIR, OP_CREATE, OP_CREATE_AGAIN, OP_WRITE, OP_XATTR, OP_SYMLINK, OP_UNLINK, NOPS };
static const char *const op_name[NOPS] = {"mkdir", "create", "create again", "write",
					  "setxattr", "symlink", "unlink"};

static int op_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	uint64_t ino;
	struct dbfs_inode in;
	switch ((int)(intptr_t)arg) {
	case OP_MKDIR:
		return dbfs_op_mknod(f, txn, &root, DBFS_ROOT_INO, "d0", S_IFDIR | 0755, 0, NULL,
				     &ino, &in);
	case OP_CREATE:
	case OP_CREATE_AGAIN:
		return dbfs_op_mknod(f, txn, &root, DBFS_ROOT_INO, "f1", S_IFREG | 0644, 0, NULL,
				     &ino, &in);
	case OP_WRITE:
		return dbfs_op_write(f, txn, f_ino, 0, data, sizeof(data), 0);
	case OP_XATTR:
		return dbfs_op_setxattr(f, txn, f_ino, "user.k", "value", 5, 0);
	case OP_SYMLINK:
		return dbfs_op_mknod(f, txn, &root, DBFS_ROOT_INO, "s", S_IFLNK | 0777, 0,
				     "target", &ino, &in);
	case OP_UNLINK:
		return dbfs_op_unlink(f, txn, DBFS_ROOT_INO, "gone", 0);
	}
	return -EINVAL;
}

/* The leader's operation: it holds the writer until `go`. */
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool in_leader, go;

static int hold_fn(struct dbfs *f, MDB_txn *txn, void *arg)
{
	(void)f;
	(void)txn;
	(void)arg;
	pthread_mutex_lock(&lk);
	in_leader = true;
	pthread_cond_broadcast(&cv);
	while (!go)
		pthread_cond_wait(&cv, &lk);
	pthread_mutex_unlock(&lk);
	return -EEXIST; /* a refusal: changes nothing, commits nothing */
}

static int rcs[NOPS];

static void *writer(void *arg)
{
	int i = (int)(intptr_t)arg;
	rcs[i] = dbfs_errno(
	    dbfs_write_sized(fs, op_fn, arg, i == OP_WRITE ? sizeof(data) : 0));
	return NULL;
}

static void *holder(void *arg)
{
	(void)arg;
	dbfs_write(fs, hold_fn, NULL);
	return NULL;
}

/* Operations waiting in the group commit's queue (a struct dbfs_wop begins
 * with its next pointer, commit.c). */
static size_t queued(void)
{
	size_t n = 0;
	pthread_mutex_lock(&fs->wq_lock);
	for (struct dbfs_wop **p = &fs->wq_head; *p; p = (struct dbfs_wop **)*p)
		n++;
	pthread_mutex_unlock(&fs->wq_lock);
	return n;
}

/* One batch; kind < 0: no fault. Returns the calls of the armed kind. */
static long run(int kind, long n, bool persist)
{
	pthread_t h, w[NOPS];
	long calls = 0;
	copy_store(tmpl, work);
	must_open(work, false);
	uint64_t batched0 = fs->cnt.batched_ops;
	go = in_leader = false;
	if (pthread_create(&h, NULL, holder, NULL))
		fault_die("pthread_create");
	pthread_mutex_lock(&lk);
	while (!in_leader)
		pthread_cond_wait(&cv, &lk);
	pthread_mutex_unlock(&lk);
	for (int i = 0; i < NOPS; i++)
		if (pthread_create(&w[i], NULL, writer, (void *)(intptr_t)i))
			fault_die("pthread_create");
	/* every writer queued behind the leader (a bounded wait: 60 s) */
	for (int t = 0; queued() < NOPS; t++) {
		if (t > 60000)
			fault_die("the writers did not queue");
		usleep(1000);
	}
	if (kind >= 0)
		fault_arm(kind, n, persist, work);
	pthread_mutex_lock(&lk);
	go = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&lk);
	pthread_join(h, NULL);
	for (int i = 0; i < NOPS; i++)
		pthread_join(w[i], NULL);
	if (kind >= 0)
		calls = fault_disarm();
	batched += (long)(fs->cnt.batched_ops - batched0);
	if (kind < 0 && fs->cnt.batched_ops - batched0 < NOPS)
		FAIL("no batch: %llu operations were batched",
		     (unsigned long long)(fs->cnt.batched_ops - batched0));
	dbfs_close(fs);
	fs = NULL;
	return calls;
}

static bool plausible(int e)
{
	return e == -EIO || e == -ENOMEM || e == -ENOSPC || e == -EAGAIN;
}

/* Is each change there if and only if its operation said 0? */
static void check(const char *what)
{
	MDB_txn *t;
	uint64_t ino;
	struct dbfs_inode in;
	if (fsck(work)) {
		FAIL("%s: the store fails dbfs-fsck", what);
		return;
	}
	must_open(work, false);
	if (dbfs_read_begin(fs, &t))
		fault_die("read_begin");
	bool has[NOPS];
	has[OP_MKDIR] = dbfs_op_lookup(fs, t, DBFS_ROOT_INO, "d0", &ino, &in) == 0;
	has[OP_CREATE] = dbfs_op_lookup(fs, t, DBFS_ROOT_INO, "f1", &ino, &in) == 0;
	has[OP_CREATE_AGAIN] = has[OP_CREATE];
	has[OP_SYMLINK] = dbfs_op_lookup(fs, t, DBFS_ROOT_INO, "s", &ino, &in) == 0;
	has[OP_UNLINK] = dbfs_op_lookup(fs, t, DBFS_ROOT_INO, "gone", &ino, &in) != 0;
	MDB_val v;
	has[OP_XATTR] = dbfs_xattr_get(fs, t, f_ino, "user.k", &v) == 0 && v.mv_size == 5 &&
			!memcmp(v.mv_data, "value", 5);
	has[OP_WRITE] = false;
	if (dbfs_inode_get(fs, t, f_ino, &in) == 0 && in.size == sizeof(data)) {
		static char got[sizeof(data)];
		size_t n = 0;
		has[OP_WRITE] = dbfs_data_read(fs, t, f_ino, &in, 0, sizeof(data), got, &n) == 0 &&
				n == sizeof(data) && !memcmp(got, data, sizeof(data));
		if (!has[OP_WRITE])
			FAIL("%s: /f has the new size but not the new bytes", what);
	} else if (in.size != 0) {
		FAIL("%s: /f is %llu bytes, neither before nor after", what,
		     (unsigned long long)in.size);
	}
	dbfs_read_end(fs, t);
	dbfs_close(fs);
	fs = NULL;

	/* The two creates of /f1 queue in either order: the later one gets
	 * EEXIST only after the earlier one's commit; alone after a failed
	 * batch it may succeed; both never. */
	int c1 = rcs[OP_CREATE], c2 = rcs[OP_CREATE_AGAIN];
	if ((c1 == 0 && c2 == 0) || (c1 == -EEXIST && c2 != 0) || (c2 == -EEXIST && c1 != 0))
		FAIL("%s: the creates of /f1 answered %d and %d", what, c1, c2);
	if (has[OP_CREATE] != (c1 == 0 || c2 == 0))
		FAIL("%s: /f1 %s, its creates answered %d and %d", what,
		     has[OP_CREATE] ? "is there" : "is not", c1, c2);
	for (int i = 0; i < NOPS; i++) {
		int rc = rcs[i];
		bool create = i == OP_CREATE || i == OP_CREATE_AGAIN;
		if (rc && !plausible(rc) && !(create && rc == -EEXIST))
			FAIL("%s: %s answered %s", what, op_name[i], strerror(-rc));
		if (!create && has[i] != (rc == 0))
			FAIL("%s: %s answered %d but its change is %s", what, op_name[i], rc,
			     has[i] ? "there" : "not there");
	}
}

int main(int argc, char **argv)
{
	bool full = argc > 2 && strcmp(argv[2], "--full") == 0;
	if (argc < 2) {
		fprintf(stderr, "usage: %s FSCK [--full]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	fsck_path = argv[1];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 13 + i / 4093);
	/* on a disk, as stores belong: LMDB writes its pages with pwrite there
	 * (in memory the store is written through its map, MDB_WRITEMAP) */
	const char *tmp = access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
	snprintf(base, sizeof(base), "%s/mfs-fault-batch-XXXXXX", tmp);
	if (!mkdtemp(base))
		fault_die("mkdtemp");
	snprintf(tmpl, sizeof(tmpl), "%s/template", base);
	snprintf(work, sizeof(work), "%s/work", base);
	if (mkdir(tmpl, 0755))
		fault_die("mkdir");
	/* the template: an empty /f and a /gone to unlink */
	must_open(tmpl, true);
	struct dbfs_inode in;
	MDB_txn *txn;
	uint64_t gone;
	if (mdb_txn_begin(fs->env, NULL, 0, &txn) ||
	    dbfs_op_mknod(fs, txn, &root, DBFS_ROOT_INO, "f", S_IFREG | 0644, 0, NULL, &f_ino,
			  &in) ||
	    dbfs_op_mknod(fs, txn, &root, DBFS_ROOT_INO, "gone", S_IFREG | 0644, 0, NULL, &gone,
			  &in) ||
	    mdb_txn_commit(txn))
		fault_die("template");
	dbfs_close(fs);
	fs = NULL;

	run(-1, 0, false);
	check("no fault");
	for (int kind = 0; kind < FAULT_KINDS; kind++) {
		for (int p = 0; p < (full ? 2 : 1); p++) {
			long n = 1, calls;
			do {
				char what[80];
				snprintf(what, sizeof(what), "%s fault at %ld%s", fault_kind_name[kind],
					 n, p ? " and after" : "");
				calls = run(kind, n, p);
				if (calls >= n) {
					check(what);
					points++;
					points_kind[kind]++;
				}
			} while (calls >= n && (n += fault_stride()));
			printf("batch of %d  %-5s %s N = 1..%ld%s\n", NOPS, fault_kind_name[kind],
			       p ? "from N on" : "once     ", calls, fault_stride_note());
		}
	}
	rm_rf(work);
	rm_rf(tmpl);
	rmdir(base);
	printf("%ld fault points in one group commit of %d writers (lmdb %ld, alloc %ld, write "
	       "%ld)%s, %ld operations batched; %d failures\n",
	       points, NOPS, points_kind[FAULT_LMDB], points_kind[FAULT_ALLOC],
	       points_kind[FAULT_WRITE], fault_stride_note(), batched, failures);
	return failures ? 1 : 0;
}
