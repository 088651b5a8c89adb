/* SPDX-License-Identifier: MIT */
/*
 * Maintenance, run on callers' threads: promotion of due delayed messages
 * and retention (mfsq_tick(), and before every read of mfsq_dequeue(), with
 * its failures counted and retried), cache sizing and prefetch.
 */
#include "internal.h"

int mfsq_tick(mfsq_queue *q)
{
	int rc = mfsq_delay_promote(q);

	if (!rc)
		rc = mfsq_retention(q);
	return rc;
}

/*
 * Promotion and retention. A failure (ENOSPC, MDB_DBS_FULL, ...) must not
 * stop subscribers from reading what is there: it is counted, kept for
 * mfsq_stats(), and retried 100 ms later.
 */
void mfsq_housekeeping(mfsq_queue *q, uint64_t now, MDB_txn **spare)
{
	if (now >= atomic_load(&q->maint_retry_us)) {
		int rc = 0;

		if (mfsq_delay_next_due(q) <= now)
			rc = mfsq_delay_promote(q);
		if (!rc &&
		    (atomic_load(&q->retention_due) || now >= atomic_load(&q->next_retention_us))) {
			atomic_store(&q->next_retention_us, now + 100000);
			mfsq_enqlog_reap(q); /* logs of processes that died */
			rc = mfsq_retention(q);
		}
		if (rc) {
			atomic_fetch_add(&q->c.maint_errors, 1);
			atomic_store(&q->last_maint_error, rc);
			atomic_store(&q->maint_retry_us, now + 100000);
		}
	}
	mfsq_cache_sizing(q, now);
	mfsq_cache_prefetch(q, now, spare);
}
