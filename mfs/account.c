/*
 * The accountant's thread (see account.h): its start and stop, and the
 * tick at each second of the wall clock that samples, enqueues, dequeues
 * and folds into the rates and the history (account_private.h lists the
 * files that do each). The records are cumulative samples; the
 * subscriber side turns consecutive ones into what each second added.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "account_private.h"
#include "log.h"

static struct mfs_account *_Atomic running;

struct mfs_account *mfs_account_running(void)
{
	return running;
}

int mfs_account_parse_duration(const char *s, uint64_t *sec)
{
	uint64_t v = 0, mul = 1;
	size_t n = strlen(s);

	if (n && strchr("smhd", s[n - 1])) {
		mul = s[n - 1] == 's' ? 1 : s[n - 1] == 'm' ? 60 : s[n - 1] == 'h' ? 3600 : 86400;
		n--;
	}
	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (1ull << 40))
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v * mul > (1ull << 40))
		return -EINVAL;
	*sec = v * mul;
	return 0;
}

static void tick(struct mfs_account *a, uint64_t t)
{
	MDB_txn *txn = NULL;

	if (a->ticks % GAUGE_EVERY == 0)
		mfs_account_gauges_ask(a);
	mfs_account_take_samples(a, t);
	mfs_account_enqueue(a);
	/* The queue's own transactions (dequeue maintenance) must not run
	 * inside ours: dequeue everything first, then write. */
	mfs_account_drain(a);
	if (mfs_usage_begin(a->st, &txn))
		txn = NULL;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nin; i++)
		mfs_account_apply(a, txn, &a->in[i]);
	mfs_account_forget_gone(a, txn);
	a->ticks++;
	pthread_mutex_unlock(&a->lock);
	mfs_account_govern(a);
	if (txn && t % 60 == 0) {
		int n = mfs_usage_trim(a->st, txn, t - a->conf.fine_sec, t - a->conf.coarse_sec);
		if (n < 0)
			mfs_warn("accounting: trimming the history: %s", strerror(-n));
	}
	if (txn) {
		int rc = mfs_usage_commit(txn);
		if (rc) {
			mfs_warn("accounting: history: %s", strerror(-rc));
			a->dropped_rows++;
		}
	}
}

/*
 * Ticks at each second of the wall clock (so rows of every DBFS share
 * their times). Woken early to stop.
 */
static void *account_main(void *arg)
{
	struct mfs_account *a = arg;

	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		struct timespec now, until;
		clock_gettime(CLOCK_REALTIME, &now);
		until.tv_sec = now.tv_sec + 1;
		until.tv_nsec = 0;
		while (!a->stop && pthread_cond_timedwait(&a->cond, &a->lock, &until) != ETIMEDOUT)
			;
		if (a->stop)
			break;
		pthread_mutex_unlock(&a->lock);
		tick(a, (uint64_t)until.tv_sec);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int mfs_account_start(struct mfs_manager *mgr, const struct mfs_account_conf *conf,
		      struct mfs_account **out, char *err, size_t errlen)
{
	struct mfs_account *a = calloc(1, sizeof(*a));
	char dir[PATH_MAX + 8];
	struct mfsq_config qc;
	int rc;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->mgr = mgr;
	a->conf = *conf;
	mfsq_config_default(&qc);
	qc.nshards = 4;
	qc.retain_max = 4;
	snprintf(dir, sizeof(dir), "%s/usage", mgr->state_dir);
	rc = mfs_usage_open(dir, mfsq_dbs_needed(&qc), &a->st, err, errlen);
	if (rc)
		goto fail;
	rc = mfsq_open(mfs_usage_env(a->st), "usage", &qc, MFSQ_CREATE, &a->q);
	if (!rc)
		rc = mfsq_subscribe(a->q, NULL, 0, NULL, NULL, &a->sub);
	if (rc) {
		snprintf(err, errlen, "usage queue in %s: %s", dir, mfsq_strerror(rc));
		rc = rc > 0 ? -rc : -EIO;
		goto fail_q;
	}
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = mfs_account_gauges_start(a);
	if (rc) {
		snprintf(err, errlen, "accounting's gauge thread: %s", strerror(-rc));
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
		goto fail_q;
	}
	rc = -pthread_create(&a->thread, NULL, account_main, a);
	if (rc) {
		snprintf(err, errlen, "accounting thread: %s", strerror(-rc));
		mfs_account_gauges_stop(a);
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
		goto fail_q;
	}
	/* a name in top, perf and tests/fault/t_slowstat.sh */
	pthread_setname_np(a->thread, "mfs-account");
	*out = a;
	running = a;
	return 0;
fail_q:
	if (a->sub)
		mfsq_unsubscribe(a->sub);
	mfsq_close(a->q);
	mfs_usage_close(a->st);
fail:
	free(a);
	return rc;
}

void mfs_account_stop(struct mfs_account *a)
{
	if (!a)
		return;
	running = NULL;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	mfs_account_gauges_stop(a);
	MDB_txn *txn = NULL;
	if (mfs_usage_begin(a->st, &txn))
		txn = NULL;
	for (uint32_t i = 0; i < a->ndbfs; i++) {
		if (a->dbfs[i])
			mfs_account_flush_minute(a, txn, a->dbfs[i]);
		free(a->dbfs[i]);
	}
	if (txn && mfs_usage_commit(txn))
		mfs_warn("accounting: history: last minute not saved");
	free(a->dbfs);
	free(a->out);
	free(a->wire);
	free(a->in);
	mfsq_unsubscribe(a->sub);
	mfsq_close(a->q);
	mfs_usage_close(a->st);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
