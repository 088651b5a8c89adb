/* SPDX-License-Identifier: MIT */
/*
 * LMDB's handle rules, kept: the named database handles of subshards, and
 * the queue's write transactions, which decide who may open a handle when.
 *
 * The rules:
 * - mdb_dbi_open() must not run in two transactions of one process at once,
 *   and a handle opened in a transaction is private to it until it commits
 *   (LMDB hands out the next free slot to each). So every open happens
 *   under one process-wide mutex held until that transaction ends: either
 *   a short read transaction of its own (mfsq_dbi_get) or one of the queue's
 *   own write transactions (mfsq_wtx).
 * - A transaction only sees handles that existed when it began: a reader
 *   checks with mdb_dbi_flags() and restarts when a handle is newer.
 * - mdb_drop(txn, dbi, 1) closes the handle at once: drops also hold
 *   q->droplock exclusively so no reader of this process is using it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

pthread_mutex_t mfsq_dbi_global = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void mfsq_subshard_name(const mfsq_queue *q, uint32_t s, uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/s/%u/%016llx", q->name, s, (unsigned long long)id);
}

static int slot_find(const struct mfsq_shard_rt *sh, uint64_t id)
{
	unsigned lo = 0, hi = sh->ndbis;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (sh->dbis[mid].first < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < sh->ndbis && sh->dbis[lo].first == id) ? (int)lo : -(int)lo - 1;
}

static int lookup(mfsq_queue *q, uint32_t s, uint64_t id, MDB_dbi *dbi)
{
	struct mfsq_shard_rt *sh = &q->shards[s];
	int i;

	pthread_mutex_lock(&q->dbi_lock);
	i = slot_find(sh, id);
	if (i >= 0)
		*dbi = sh->dbis[i].dbi;
	pthread_mutex_unlock(&q->dbi_lock);
	return i >= 0;
}

void mfsq_subshard_remember(mfsq_queue *q, uint32_t s, uint64_t id, MDB_dbi dbi)
{
	struct mfsq_shard_rt *sh = &q->shards[s];
	int i;

	pthread_mutex_lock(&q->dbi_lock);
	i = slot_find(sh, id);
	if (i < 0) {
		unsigned at = (unsigned)(-i - 1);

		if (sh->ndbis == sh->capdbis) {
			unsigned nc = sh->capdbis ? sh->capdbis * 2 : 8;
			struct mfsq_dbi_slot *n = realloc(sh->dbis, nc * sizeof(*n));

			if (!n)
				goto out; /* not remembered: resolved again next time */
			sh->dbis = n;
			sh->capdbis = nc;
		}
		memmove(&sh->dbis[at + 1], &sh->dbis[at], (sh->ndbis - at) * sizeof(*sh->dbis));
		sh->dbis[at].first = id;
		sh->dbis[at].dbi = dbi;
		sh->ndbis++;
	}
out:
	pthread_mutex_unlock(&q->dbi_lock);
}

void mfsq_subshard_forget(mfsq_queue *q, uint32_t s, uint64_t id)
{
	struct mfsq_shard_rt *sh = &q->shards[s];
	int i;

	pthread_mutex_lock(&q->dbi_lock);
	i = slot_find(sh, id);
	if (i >= 0) {
		memmove(&sh->dbis[i], &sh->dbis[i + 1],
			(sh->ndbis - (unsigned)i - 1) * sizeof(*sh->dbis));
		sh->ndbis--;
	}
	pthread_mutex_unlock(&q->dbi_lock);
}

/* Registrations of handles by mfsq_dbi_get(): a maintenance transaction that
 * began before one of them must not open databases (its slot table is stale). */
static _Atomic uint64_t registrations;

/* Handle of an existing subshard, shared by the whole process. */
int mfsq_dbi_get(mfsq_queue *q, uint32_t s, uint64_t id, MDB_dbi *dbi)
{
	char nm[MFSQ_NAME_MAX + 48];
	MDB_txn *txn;
	int rc;

	if (lookup(q, s, id, dbi))
		return 0;
	mfsq_subshard_name(q, s, id, nm, sizeof(nm));
	pthread_mutex_lock(&mfsq_dbi_global);
	rc = mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn);
	if (!rc) {
		rc = mdb_dbi_open(txn, nm, 0, dbi);
		if (!rc)
			rc = mdb_txn_commit(txn); /* a read-only commit keeps the handle */
		else
			mdb_txn_abort(txn);
		if (!rc)
			atomic_fetch_add(&registrations, 1);
	}
	pthread_mutex_unlock(&mfsq_dbi_global);
	if (!rc)
		mfsq_subshard_remember(q, s, id, *dbi);
	return rc;
}

/*
 * Handle of subshard (s, id) usable in reader transaction @txn, without
 * opening anything (readers hold q->droplock and must not wait for the
 * handle mutex). MFSQ_RETRY: resolve it with mfsq_dbi_get() after ending @txn
 * and releasing the lock, then restart.
 */
int mfsq_dbi_for(mfsq_queue *q, MDB_txn *txn, uint32_t s, uint64_t id, MDB_dbi *dbi)
{
	unsigned fl;

	if (!lookup(q, s, id, dbi))
		return MFSQ_RETRY;
	return mdb_dbi_flags(txn, *dbi, &fl) ? MFSQ_RETRY : 0;
}

/*
 * Begin a write transaction: the caller's (@caller), an own one, or an own
 * maintenance one (@maint) that may create and drop databases. A
 * maintenance transaction holds the handle mutex from its start to its end,
 * taken after the LMDB write lock (a caller's transaction may need the
 * mutex while holding that lock), and restarts if a handle was registered
 * in between.
 */
int mfsq_wtx_begin(mfsq_queue *q, MDB_txn *caller, int maint, struct mfsq_wtx *w)
{
	int rc;

	memset(w, 0, sizeof(*w));
	if (caller) {
		w->txn = caller;
		return 0;
	}
	w->own = 1;
	w->maint = maint;
	for (;;) {
		uint64_t c0 = atomic_load(&registrations);

		rc = mdb_txn_begin(q->env, NULL, 0, &w->txn);
		if (rc || !maint)
			return rc;
		pthread_mutex_lock(&mfsq_dbi_global);
		if (atomic_load(&registrations) == c0)
			break;
		pthread_mutex_unlock(&mfsq_dbi_global);
		mdb_txn_abort(w->txn);
	}
	w->glocked = 1;
	return 0;
}

/*
 * Handle of subshard (s, id) in write transaction @w. Only a maintenance
 * transaction opens (or, with @create, creates) databases; the others use
 * shared handles and get MFSQ_RETRY (own) or EAGAIN (caller's) when the handle
 * is newer than the transaction.
 */
int mfsq_wtx_subshard(mfsq_queue *q, struct mfsq_wtx *w, uint32_t s, uint64_t id, int create,
		      MDB_dbi *dbi)
{
	char nm[MFSQ_NAME_MAX + 48];
	unsigned fl;
	int rc;

	if (w->has_last && w->last_s == s && w->last_id == id) {
		*dbi = w->last_dbi; /* no mutex, no lookup per message of a batch */
		return 0;
	}
	if (!w->maint) {
		rc = mfsq_dbi_get(q, s, id, dbi);
		if (rc)
			return rc;
		if (mdb_dbi_flags(w->txn, *dbi, &fl))
			return w->own ? MFSQ_RETRY : EAGAIN;
		w->has_last = 1;
		w->last_s = s;
		w->last_id = id;
		w->last_dbi = *dbi;
		return 0;
	}
	if (lookup(q, s, id, dbi) && !mdb_dbi_flags(w->txn, *dbi, &fl))
		return 0;
	mfsq_subshard_name(q, s, id, nm, sizeof(nm));
	rc = mdb_dbi_open(w->txn, nm, create ? MDB_CREATE : 0, dbi);
	if (rc)
		return rc;
	if (w->npend == w->cappend) {
		unsigned nc = w->cappend ? w->cappend * 2 : 4;
		void *n = realloc(w->pend, nc * sizeof(*w->pend));

		if (!n)
			return ENOMEM;
		w->pend = n;
		w->cappend = nc;
	}
	w->pend[w->npend].s = s;
	w->pend[w->npend].id = id;
	w->pend[w->npend].dbi = *dbi;
	w->npend++;
	return 0;
}

/* A handle this transaction opened and then closed (mdb_drop): not to be
 * remembered at commit, its slot may be given to another database. */
void mfsq_wtx_forget(struct mfsq_wtx *w, uint32_t s, uint64_t id)
{
	if (w->has_last && w->last_s == s && w->last_id == id)
		w->has_last = 0;
	for (unsigned i = 0; i < w->npend; i++)
		if (w->pend[i].s == s && w->pend[i].id == id)
			w->pend[i] = w->pend[--w->npend];
}

/* Commit (rc == 0) or abort an own transaction; returns the final code. */
int mfsq_wtx_end(mfsq_queue *q, struct mfsq_wtx *w, int rc)
{
	if (w->own) {
		if (!rc)
			rc = mdb_txn_commit(w->txn);
		else
			mdb_txn_abort(w->txn);
		if (!rc)
			for (unsigned i = 0; i < w->npend; i++)
				mfsq_subshard_remember(q, w->pend[i].s, w->pend[i].id,
						       w->pend[i].dbi);
		if (!rc)
			mfsq_map_check(q);
	}
	if (w->glocked)
		pthread_mutex_unlock(&mfsq_dbi_global);
	free(w->pend);
	w->pend = NULL;
	w->glocked = 0;
	return rc;
}

/* Handles of this shard's subshards with ids below @id (dropped, maybe by
 * another process), or 0 when there are none. */
unsigned mfsq_dbi_count_below(mfsq_queue *q, uint32_t s, uint64_t id)
{
	struct mfsq_shard_rt *sh = &q->shards[s];
	unsigned n = 0;

	pthread_mutex_lock(&q->dbi_lock);
	while (n < sh->ndbis && sh->dbis[n].first < id)
		n++;
	pthread_mutex_unlock(&q->dbi_lock);
	return n;
}

/*
 * Close them, so that subshards dropped by another process do not use up
 * handle slots here. The caller holds the handle mutex (a maintenance
 * transaction) and q->droplock exclusively: nobody here uses them.
 */
void mfsq_dbi_close_below(mfsq_queue *q, uint32_t s, uint64_t id)
{
	struct mfsq_shard_rt *sh = &q->shards[s];
	unsigned n = 0;

	pthread_mutex_lock(&q->dbi_lock);
	while (n < sh->ndbis && sh->dbis[n].first < id) {
		mdb_dbi_close(q->env, sh->dbis[n].dbi);
		n++;
	}
	memmove(&sh->dbis[0], &sh->dbis[n], (sh->ndbis - n) * sizeof(*sh->dbis));
	sh->ndbis -= n;
	pthread_mutex_unlock(&q->dbi_lock);
}
