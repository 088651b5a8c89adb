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
 *   outbox DIR feed=on|feed=off [N]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

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
	default:
		return dbfs_op_unlink(fs, txn, DBFS_ROOT_INO, o->b, 0);
	}
}

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
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
	/* as a FUSE request's header sets it (fuse_io.c) */
	dbfs_tls_caller = (struct dbfs_caller){1000, 1000, 4242};
	dbfs_tls_caller_set = 1;
	char a[32], b[32];
	double t0 = cpu();
	for (int kind = 0; kind < 4; kind++)
		for (int i = 0; i < n; i++) {
			snprintf(a, sizeof(a), "file-%d", i);
			snprintf(b, sizeof(b), "renamed-%d", i);
			struct op op = {kind, a, b, 0};
			int rc = dbfs_write(fs, op_fn, &op);
			if (rc) {
				fprintf(stderr, "op %d %d: %d\n", kind, i, rc);
				return 1;
			}
		}
	double t = cpu() - t0;
	printf("%s ops=%d cpu_us_per_op=%.2f events=%llu\n", argv[2], 4 * n, t * 1e6 / (4 * n),
	       (unsigned long long)dbfs_feed_last_seq(fs));
	dbfs_close(fs);
	return 0;
}
