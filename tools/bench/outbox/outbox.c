/*
 * tools/bench/outbox: the change feed's cost on metadata operations, feed
 * on against feed off, through libdbfs's group commit (no FUSE: the
 * outbox's own cost, not hidden behind the kernel round trip).
 *
 * One process, one thread, a store in a fresh directory: per round N
 * creates, N chmods (setattr), N renames and N unlinks, each its own
 * dbfs_write (one commit each). Prints CPU time (user+sys) per operation
 * for each round; run it under `valgrind --tool=callgrind` for
 * instruction counts (tools/bench/outbox/run does both, alternating
 * feed=on and feed=off).
 *
 *   outbox DIR feed=on|feed=off [N [THREADS]]
 *
 * With THREADS > 1 each thread runs the rounds on names of its own at
 * once: the group commit batches their operations (fewer commits, the
 * feed's per-commit part shared).
 *
 * OUTBOX_XATTR=expire adds a round after the creates: each file gets
 * user.dbfs.expire "@<an hour from now>" (a row of the expiry index and a
 * delayed message); OUTBOX_XATTR=plain the same round with an ordinary
 * attribute of the same length (user.dbfs.expirf): the difference is the
 * expiry index's cost, its setting and its cancelling by the unlink.
 */
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"

static const struct dbfs_cred cred = {0, 0, 022};

struct op {
	int kind;
	const char *a, *b;
	uint64_t ino;
};

static int op_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct op *o = arg;
	struct dbfs_inode in;
	uint64_t ino;
	switch (o->kind) {
	case 0:
		return dbfs_op_mknod(fs, txn, &cred, DBFS_ROOT_INO, o->a, S_IFREG | 0644, 0, NULL,
				     &ino, &in);
	case 1: {
		struct stat st = {.st_mode = 0600};
		if (dbfs_op_lookup(fs, txn, DBFS_ROOT_INO, o->a, &ino, &in))
			return -ENOENT;
		return dbfs_op_setattr(fs, txn, ino, &st, DBFS_SET_MODE, &in);
	}
	case 2:
		return dbfs_op_rename(fs, txn, DBFS_ROOT_INO, o->a, DBFS_ROOT_INO, o->b, 0);
	case 3:
		return dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, o->b, 0);
	default: {
		const char *x = getenv("OUTBOX_XATTR");
		char v[24];
		snprintf(v, sizeof(v), "@%ld", (long)time(NULL) + 3600);
		if (dbfs_op_lookup(fs, txn, DBFS_ROOT_INO, o->a, &ino, &in))
			return -ENOENT;
		return dbfs_op_setxattr(fs, txn, ino,
					strcmp(x, "expire") ? "user.dbfs.expirf" : "user.dbfs.expire",
					v, strlen(v), 0);
	}
	}
}

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct worker {
	struct dbfs *fs;
	int id, n, kind;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	char a[48], b[48];
	/* the expiry's setxattr wants the owner (root made the files) */
	dbfs_tls_caller = (struct dbfs_caller){w->kind == 4 ? 0 : 1000, 1000, 4242};
	dbfs_tls_caller_set = 1;
	for (int i = 0; i < w->n; i++) {
		snprintf(a, sizeof(a), "file-%d-%d", w->id, i);
		snprintf(b, sizeof(b), "renamed-%d-%d", w->id, i);
		struct op op = {w->kind, a, b, 0};
		if (dbfs_write(w->fs, op_fn, &op)) {
			fprintf(stderr, "op %d %d failed\n", w->kind, i);
			exit(1);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: outbox DIR feed=on|feed=off [N]\n");
		return 2;
	}
	int n = argc > 3 ? atoi(argv[3]) : 2000;
	struct dbfs_options o;
	char err[256];
	struct dbfs *fs;
	dbfs_options_init(&o);
	o.create = true;
	if (dbfs_option_parse(&o, "feed", strchr(argv[2], '=') + 1, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (dbfs_open(argv[1], &o, &fs, err, sizeof(err))) {
		fprintf(stderr, "dbfs_open: %s\n", err);
		return 1;
	}
	int nt = argc > 4 ? atoi(argv[4]) : 1;
	if (nt < 1 || nt > 64)
		nt = 1;
	pthread_t th[64];
	struct worker w[64];
	double t0 = cpu();
	static const int plain[] = {0, 1, 2, 3}, xattr[] = {0, 4, 1, 2, 3};
	const int *rounds = getenv("OUTBOX_XATTR") ? xattr : plain;
	int nrounds = getenv("OUTBOX_XATTR") ? 5 : 4;
	for (int r = 0; r < nrounds; r++) { /* each round by every thread at once */
		for (int i = 0; i < nt; i++) {
			w[i] = (struct worker){fs, i, n / nt, rounds[r]};
			pthread_create(&th[i], NULL, work, &w[i]);
		}
		for (int i = 0; i < nt; i++)
			pthread_join(th[i], NULL);
	}
	n = n / nt * nt;
	double t = cpu() - t0;
	struct dbfs_counters c;
	dbfs_counters(fs, &c);
	printf("%s threads=%d ops=%d commits=%llu cpu_us_per_op=%.2f events=%llu\n", argv[2], nt,
	       nrounds * n, (unsigned long long)c.commits, t * 1e6 / (nrounds * n),
	       (unsigned long long)dbfs_feed_last_seq(fs));
	dbfs_close(fs);
	return 0;
}
