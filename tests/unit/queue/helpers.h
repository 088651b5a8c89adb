/* SPDX-License-Identifier: MIT */
/* Test helpers: a temporary LMDB environment per test. */
#ifndef MFSQ_TEST_HELPERS_H
#define MFSQ_TEST_HELPERS_H

#include <check.h>
#include <lmdb.h>
#include <stdint.h>
#include <sys/types.h>

#include "mfsq.h"

struct tenv {
	char dir[256];
	MDB_env *env;
	size_t mapsize;
	unsigned envflags; /* mdb_env_open() flags besides MDB_NOTLS */
};

/* Create a fresh directory and open an environment in it. */
void tenv_open(struct tenv *t, size_t mapsize);
/* The same with other environment flags (tenv_open: MDB_NOSYNC). */
void tenv_open_flags(struct tenv *t, size_t mapsize, unsigned envflags);
/* Reopen the same environment (simulates a restart of the process). */
void tenv_reopen(struct tenv *t);
void tenv_close(struct tenv *t);
void tenv_destroy(struct tenv *t);

/* A small test configuration. */
void small_cfg(struct mfsq_config *c, uint32_t nshards, uint32_t subshard_msgs);

/* Enqueue one message whose payload is the text of (enqueuer, n). */
int put_msg(mfsq_queue *q, MDB_txn *txn, uint64_t enqueuer, uint64_t n, uint64_t *seq);
/* Parse the payload written by put_msg. */
int parse_msg(const struct mfsq_msg *m, uint64_t *enqueuer, uint64_t *n);
/* Dequeue exactly one message waiting up to 10 s; fails the test if none. */
void get_one(mfsq_sub *s, struct mfsq_msg *m);
/* Wait for child @pid; fails the test unless it exited 0 (@sig 0) or was
 * killed by signal @sig. */
void wait_child(pid_t pid, int sig);

Suite *suite_api(void);
Suite *suite_delay(void);
Suite *suite_cache(void);
Suite *suite_sizing(void);
Suite *suite_multi(void);
Suite *suite_rule(void);
Suite *suite_wake(void);
Suite *suite_acklog(void);
Suite *suite_enqlog(void);
Suite *suite_damage(void);

#endif
