/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "helpers.h"

static void env_open(struct tenv *t)
{
	ck_assert_int_eq(mdb_env_create(&t->env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(t->env, 4 * mfsq_dbs_needed(NULL) + 64), 0);
	ck_assert_int_eq(mdb_env_set_mapsize(t->env, t->mapsize), 0);
	ck_assert_int_eq(mdb_env_set_maxreaders(t->env, 256), 0);
	ck_assert_int_eq(mdb_env_open(t->env, t->dir, MDB_NOTLS | t->envflags, 0644), 0);
}

void tenv_open(struct tenv *t, size_t mapsize)
{
	tenv_open_flags(t, mapsize, MDB_NOSYNC);
}

void tenv_open_flags(struct tenv *t, size_t mapsize, unsigned envflags)
{
	const char *base = getenv("TMPDIR");

	t->envflags = envflags;
	snprintf(t->dir, sizeof(t->dir), "%s/mfsq-test-XXXXXX", base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	t->mapsize = mapsize ? mapsize : (size_t)256 << 20;
	env_open(t);
}

void tenv_reopen(struct tenv *t)
{
	tenv_close(t);
	env_open(t);
}

void tenv_close(struct tenv *t)
{
	if (t->env)
		mdb_env_close(t->env);
	t->env = NULL;
}

void tenv_destroy(struct tenv *t)
{
	char p[300];
	glob_t g;

	tenv_close(t);
	snprintf(p, sizeof(p), "%s/data.mdb", t->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lock.mdb", t->dir);
	unlink(p);
	/* the queues' ack and enqueue logs (queue/acklog.c, queue/enqlog.c) */
	snprintf(p, sizeof(p), "%s/mfsq-*", t->dir);
	if (!glob(p, 0, NULL, &g)) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	rmdir(t->dir);
}

void small_cfg(struct mfsq_config *c, uint32_t nshards, uint32_t subshard_msgs)
{
	mfsq_config_default(c);
	c->nshards = nshards;
	c->subshard_msgs = subshard_msgs;
	c->retain_max = 16;
	c->bucket_us = 2000;
}

int put_msg(mfsq_queue *q, MDB_txn *txn, uint64_t enqueuer, uint64_t n, uint64_t *seq)
{
	char buf[64];
	struct mfsq_msg_in m = {.enqueuer = enqueuer};

	m.len = (size_t)snprintf(buf, sizeof(buf), "%" PRIu64 ":%" PRIu64, enqueuer, n);
	m.data = buf;
	return mfsq_enqueue(q, txn, &m, seq);
}

int parse_msg(const struct mfsq_msg *m, uint64_t *enqueuer, uint64_t *n)
{
	char buf[64];

	if (m->len >= sizeof(buf))
		return -1;
	memcpy(buf, m->data, m->len);
	buf[m->len] = 0;
	return sscanf(buf, "%" SCNu64 ":%" SCNu64, enqueuer, n) == 2 ? 0 : -1;
}

void get_one(mfsq_sub *s, struct mfsq_msg *m)
{
	size_t n = 0;
	int rc = mfsq_dequeue(s, m, 1, &n, 10000);

	ck_assert_msg(rc == 0, "dequeue: %s", mfsq_strerror(rc));
	ck_assert_uint_eq(n, 1);
}

void wait_child(pid_t pid, int sig)
{
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	if (sig)
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sig, "child status %d", st);
	else
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}
