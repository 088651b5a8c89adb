/* SPDX-License-Identifier: MIT */
/*
 * Subscribers: durable (named, acknowledged positions in the store, one per
 * shard) and ephemeral (this process only). A subscriber reads at pos[]
 * and acknowledges up to acked[]; reopening resumes at acked[], so every
 * unacknowledged message is delivered again (at-least-once).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void sub_key(const mfsq_sub *s, unsigned char *k, MDB_val *key)
{
	size_t nl = strlen(s->name);

	k[0] = 'U';
	memcpy(k + 1, s->name, nl);
	key->mv_size = nl + 1;
	key->mv_data = k;
}

/* Write the durable record: acked[] raised to what the store already has
 * (retention may have moved a lagging subscriber forward). */
static int sub_store(mfsq_sub *s, MDB_txn *txn, int force)
{
	uint32_t n = s->q->cfg.nshards;
	unsigned char k[MFSQ_NAME_MAX + 1];
	size_t vl = sizeof(struct mfsq_disk_sub) + n * sizeof(uint64_t);
	unsigned char *buf = malloc(vl);
	struct mfsq_disk_sub ds = {.nshards = n};
	MDB_val key, val;
	int rc;

	if (!buf)
		return ENOMEM;
	sub_key(s, k, &key);
	rc = mdb_get(txn, s->q->meta, &key, &val);
	if (!rc && val.mv_size == vl) {
		const uint64_t *old = (const uint64_t *)((char *)val.mv_data + sizeof(ds));

		memcpy(&ds, val.mv_data, sizeof(ds));
		for (uint32_t i = 0; i < n; i++) {
			uint64_t o;

			memcpy(&o, &old[i], sizeof(o));
			if (!force && o > s->acked[i])
				s->acked[i] = o;
		}
	} else if (rc && rc != MDB_NOTFOUND) {
		free(buf);
		return rc;
	}
	memcpy(buf, &ds, sizeof(ds));
	memcpy(buf + sizeof(ds), s->acked, n * sizeof(uint64_t));
	val.mv_size = vl;
	val.mv_data = buf;
	rc = mdb_put(txn, s->q->meta, &key, &val, 0);
	free(buf);
	return rc;
}

static int sub_load(mfsq_sub *s, MDB_txn *txn, int *found)
{
	uint32_t n = s->q->cfg.nshards;
	unsigned char k[MFSQ_NAME_MAX + 1];
	struct mfsq_disk_sub ds;
	MDB_val key, val;
	int rc;

	sub_key(s, k, &key);
	rc = mdb_get(txn, s->q->meta, &key, &val);
	*found = !rc;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (val.mv_size != sizeof(ds) + n * sizeof(uint64_t))
		return EBADMSG;
	memcpy(&ds, val.mv_data, sizeof(ds));
	memcpy(s->acked, (char *)val.mv_data + sizeof(ds), n * sizeof(uint64_t));
	s->lagging = !!(ds.flags & MFSQ_SUB_F_LAGGING);
	return 0;
}

/* The rule of a durable subscriber: 'R' + name -> rule text (format.h). */
static void rule_key(const char *name, unsigned char *k, MDB_val *key)
{
	size_t nl = strlen(name);

	k[0] = 'R';
	memcpy(k + 1, name, nl);
	key->mv_size = nl + 1;
	key->mv_data = k;
}

/* Store @r as the subscriber's rule, or remove the stored one (r NULL). */
static int rule_store(mfsq_sub *s, MDB_txn *txn, const struct mfsq_rule *r)
{
	unsigned char k[MFSQ_NAME_MAX + 1];
	MDB_val key, val;
	int rc;

	rule_key(s->name, k, &key);
	if (!r) {
		rc = mdb_del(txn, s->q->meta, &key, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	val.mv_data = (void *)mfsq_rule_text(r);
	val.mv_size = strlen(mfsq_rule_text(r));
	return mdb_put(txn, s->q->meta, &key, &val, 0);
}

/* Compile the stored rule, if any, into s->rule. */
static int rule_load(mfsq_sub *s, MDB_txn *txn, char *why, size_t whylen)
{
	unsigned char k[MFSQ_NAME_MAX + 1];
	char text[MFSQ_RULE_MAX + 1];
	MDB_val key, val;
	int rc;

	rule_key(s->name, k, &key);
	rc = mdb_get(txn, s->q->meta, &key, &val);
	if (rc)
		return rc == MDB_NOTFOUND ? 0 : rc;
	if (val.mv_size > MFSQ_RULE_MAX)
		return EBADMSG;
	memcpy(text, val.mv_data, val.mv_size);
	text[val.mv_size] = 0;
	rc = mfsq_rule_compile(text, &s->rule, why, whylen);
	if (rc == EINVAL && why && whylen) {
		char tmp[256];

		snprintf(tmp, sizeof(tmp), "stored rule of '%s': %s", s->name, why);
		snprintf(why, whylen, "%s", tmp);
	}
	return rc;
}

static void sub_free(mfsq_sub *s)
{
	mfsq_rule_free(s->rule);
	if (s->rtxn)
		mdb_txn_abort(s->rtxn);
	free((void *)s->pos);
	free(s->bpos);
	free(s->acked);
	free(s->rate);
	free(s->peak_lag);
	free(s->buf);
	free(s);
}

static int start_positions(mfsq_sub *s, struct mfsq_wtx *w)
{
	for (uint32_t i = 0; i < s->q->cfg.nshards; i++) {
		struct mfsq_disk_shard st;
		int rc = mfsq_shard_read_w(s->q, w, i, &st, NULL);

		if (rc)
			return rc;
		s->acked[i] = (s->flags & MFSQ_SUB_FROM_START) ? st.head_first : st.next_seq;
	}
	return 0;
}

/*
 * @rule: NULL keeps a durable subscriber's stored rule (none for an
 * ephemeral one); a text replaces it ("true" removes it).
 */
static int subscribe(mfsq_queue *q, const char *name, unsigned flags, const char *rule,
		     mfsq_filter_fn *filter, void *arg, char *why, size_t whylen, mfsq_sub **out)
{
	uint32_t n = q->cfg.nshards;
	size_t nl = name ? strlen(name) : 0;
	struct mfsq_rule *given = NULL;
	uint64_t reaped = 0;
	struct mfsq_wtx w;
	mfsq_sub *s;
	int rc, found = 0;

	*out = NULL;
	if (why && whylen)
		why[0] = 0;
	if ((name && (nl == 0 || nl > MFSQ_NAME_MAX || !(flags & MFSQ_SUB_DURABLE))) ||
	    (!name && (flags & MFSQ_SUB_DURABLE)) ||
	    (flags & ~(MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START)))
		return EINVAL;
	if (rule) {
		rc = mfsq_rule_compile(rule, &given, why, whylen);
		if (rc)
			return rc;
		if (mfsq_rule_trivial(given)) {
			mfsq_rule_free(given);
			given = NULL;
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		mfsq_rule_free(given);
		return ENOMEM;
	}
	s->rule = given;
	s->slot = -1;
	s->q = q;
	s->flags = flags;
	s->filter = filter;
	s->arg = arg;
	if (name)
		memcpy(s->name, name, nl);
	s->pos = calloc(n, sizeof(*s->pos));
	s->bpos = calloc(n, sizeof(*s->bpos));
	s->acked = calloc(n, sizeof(*s->acked));
	s->rate = calloc(n, sizeof(*s->rate));
	s->peak_lag = calloc(n, sizeof(*s->peak_lag));
	if (!s->pos || !s->bpos || !s->acked || !s->rate || !s->peak_lag) {
		sub_free(s);
		return ENOMEM;
	}
	if (name) {
		pthread_mutex_lock(&q->lock);
		for (mfsq_sub *o = q->subs; o; o = o->next)
			if ((o->flags & MFSQ_SUB_DURABLE) && !strcmp(o->name, s->name))
				found = 1;
		pthread_mutex_unlock(&q->lock);
		if (found) {
			sub_free(s);
			return EBUSY;
		}
	}
	for (;;) {
		rc = mfsq_wtx_begin(q, NULL, 0, &w);
		if (!rc && name) /* positions a dead process left in the ack log first */
			rc = mfsq_acklog_reap(q, w.txn, &reaped);
		if (!rc && name)
			rc = sub_load(s, w.txn, &found);
		if (!rc && name)
			rc = rule ? rule_store(s, w.txn, s->rule)
				  : rule_load(s, w.txn, why, whylen);
		if (!rc && !found)
			rc = start_positions(s, &w);
		if (!rc && name && !found)
			rc = sub_store(s, w.txn, 1);
		rc = rc ? mfsq_wtx_end(q, &w, rc) : mfsq_wtx_end(q, &w, 0);
		mfsq_acklog_reaped(q, reaped, !rc);
		/* the tail's handle was newer than the transaction: it is
		 * registered now (mfsq_wtx_subshard), so once more */
		if (rc != MFSQ_RETRY)
			break;
		reaped = 0;
	}
	if (rc) {
		sub_free(s);
		return mfsq_lmdb_err(rc);
	}
	for (uint32_t i = 0; i < n; i++)
		s->pos[i] = s->acked[i];
	mfsq_acklog_claim(s);
	pthread_rwlock_wrlock(&q->cache_lock);
	for (uint32_t i = 0; i < n; i++)
		s->bpos[i] = mfsq_buffered_end(q, i); /* memory-only: from now on */
	pthread_mutex_lock(&q->lock);
	s->next = q->subs;
	q->subs = s;
	pthread_mutex_unlock(&q->lock);
	pthread_rwlock_unlock(&q->cache_lock);
	*out = s;
	return 0;
}

int mfsq_subscribe(mfsq_queue *q, const char *name, unsigned flags, mfsq_filter_fn *filter,
		   void *arg, mfsq_sub **out)
{
	return subscribe(q, name, flags, NULL, filter, arg, NULL, 0, out);
}

int mfsq_subscribe_rule(mfsq_queue *q, const char *name, unsigned flags, const char *rule,
			char *why, size_t whylen, mfsq_sub **out)
{
	return subscribe(q, name, flags, rule, NULL, NULL, why, whylen, out);
}

const char *mfsq_sub_rule(const mfsq_sub *s)
{
	return mfsq_rule_text(s->rule);
}

void mfsq_unsubscribe(mfsq_sub *s)
{
	mfsq_queue *q;

	if (!s)
		return;
	q = s->q;
	if (s->slot >= 0) /* positions only in the slot: into the store now */
		mfsq_acklog_release(s, !s->fold_due_us || !mfsq_sub_fold(s));
	pthread_rwlock_wrlock(&q->cache_lock); /* eviction reads subscribers */
	pthread_mutex_lock(&q->lock);
	for (mfsq_sub **pp = &q->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&q->lock);
	pthread_rwlock_unlock(&q->cache_lock);
	sub_free(s);
}

int mfsq_subscriber_delete(mfsq_queue *q, MDB_txn *txn, const char *name)
{
	unsigned char k[MFSQ_NAME_MAX + 1];
	size_t nl = name ? strlen(name) : 0;
	MDB_val key = {nl + 1, k};
	struct mfsq_wtx w;
	int rc, busy = 0;

	if (nl == 0 || nl > MFSQ_NAME_MAX)
		return EINVAL;
	pthread_mutex_lock(&q->lock);
	for (mfsq_sub *o = q->subs; o; o = o->next)
		if ((o->flags & MFSQ_SUB_DURABLE) && !strcmp(o->name, name))
			busy = 1;
	pthread_mutex_unlock(&q->lock);
	if (busy)
		return EBUSY;
	k[0] = 'U';
	memcpy(k + 1, name, nl);
	rc = mfsq_wtx_begin(q, txn, 0, &w);
	if (rc)
		return mfsq_lmdb_err(rc);
	rc = mdb_del(w.txn, q->meta, &key, NULL);
	if (!rc) {
		MDB_val rkey;

		rule_key(name, k, &rkey);
		rc = mdb_del(w.txn, q->meta, &rkey, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	rc = mfsq_wtx_end(q, &w, rc); /* MDB_NOTFOUND: no such subscriber, ENOENT */
	if (!rc)
		atomic_store(&q->retention_due, 1);
	return mfsq_lmdb_err(rc);
}

struct persist_arg {
	mfsq_sub *s;
	int force;
};

static int persist_op(mfsq_queue *q, struct mfsq_wtx *w, void *arg)
{
	struct persist_arg *a = arg;

	(void)q;
	return sub_store(a->s, w->txn, a->force);
}

/* Write acked[] in an own transaction (grouped with concurrent enqueues
 * and acks); the ack log slot then follows the store. */
static int commit_own(mfsq_sub *s, int force)
{
	struct persist_arg a = {s, force};
	int rc = mfsq_lmdb_err(mfsq_group_op(s->q, persist_op, &a));

	if (!rc && s->slot >= 0) {
		mfsq_acklog_write(s); /* e.g. a seek back: the slot must not stay ahead */
		s->fold_due_us = 0;
	}
	return rc;
}

int mfsq_sub_fold(mfsq_sub *s)
{
	int rc = commit_own(s, 0);

	if (!rc)
		atomic_fetch_add(&s->q->c.ack_folds, 1);
	if (rc) { /* the slot still has them: try again later */
		atomic_fetch_add(&s->q->c.maint_errors, 1);
		atomic_store(&s->q->last_maint_error, rc);
		s->fold_due_us = mfsq_mono_us() + MFSQ_ACK_FOLD_US;
	}
	return rc;
}

/* Persist acked[] of a durable subscriber in @txn or an own transaction;
 * in an MDB_NOSYNC environment an own one is deferred to the ack log
 * (acklog.c), which is as durable as such a commit. */
static int persist(mfsq_sub *s, MDB_txn *txn, int force)
{
	struct mfsq_wtx w;
	int rc;

	if (!(s->flags & MFSQ_SUB_DURABLE))
		return 0;
	if (!txn && !force && s->slot >= 0 && mfsq_acklog_relaxed(s->q)) {
		uint64_t now = mfsq_mono_us();

		mfsq_acklog_write(s);
		atomic_fetch_add(&s->q->c.acks_logged, 1);
		if (!s->fold_due_us)
			s->fold_due_us = now + MFSQ_ACK_FOLD_US;
		else if (now >= s->fold_due_us)
			mfsq_sub_fold(s); /* a failure is the fold's, not this ack's */
		return 0;
	}
	if (!txn)
		return commit_own(s, force);
	rc = mfsq_wtx_begin(s->q, txn, 0, &w);
	if (rc)
		return mfsq_lmdb_err(rc);
	rc = sub_store(s, w.txn, force);
	return mfsq_lmdb_err(mfsq_wtx_end(s->q, &w, rc));
}

int mfsq_ack(mfsq_sub *s, MDB_txn *txn, const struct mfsq_msg *m)
{
	uint32_t n = s->q->cfg.nshards;
	uint64_t *na = malloc(n * sizeof(*na)), *old = malloc(n * sizeof(*old)), delta = 0;
	int rc;

	if (!na || !old) {
		free(na);
		free(old);
		return ENOMEM;
	}
	memcpy(old, s->acked, n * sizeof(*old));
	memcpy(na, s->acked, n * sizeof(*na));
	if (m && (m->flags & MFSQ_MSG_BUFFERED)) {
		/* memory-only: nothing to remember */
		free(na);
		free(old);
		return m->shard < n && m->seq && m->seq < s->bpos[m->shard] ? 0 : EINVAL;
	}
	if (m) {
		if (m->shard >= n || m->seq >= s->pos[m->shard] || !m->seq) {
			free(na);
			free(old);
			return EINVAL;
		}
		if (m->seq + 1 > na[m->shard])
			na[m->shard] = m->seq + 1;
	} else {
		for (uint32_t i = 0; i < n; i++)
			if (s->pos[i] > na[i])
				na[i] = s->pos[i];
	}
	pthread_mutex_lock(&s->q->lock);
	memcpy(s->acked, na, n * sizeof(*na));
	pthread_mutex_unlock(&s->q->lock);
	rc = persist(s, txn, 0);
	if (rc) {
		pthread_mutex_lock(&s->q->lock);
		memcpy(s->acked, old, n * sizeof(*old));
		pthread_mutex_unlock(&s->q->lock);
	} else {
		for (uint32_t i = 0; i < n; i++)
			delta += na[i] - old[i];
		atomic_fetch_add(&s->q->c.acked, delta);
	}
	free(na);
	free(old);
	return rc;
}

static int set_position(mfsq_sub *s, uint32_t shard, uint64_t seq)
{
	s->pos[shard] = seq;
	pthread_mutex_lock(&s->q->lock);
	s->acked[shard] = seq;
	pthread_mutex_unlock(&s->q->lock);
	return 0;
}

int mfsq_seek_seq(mfsq_sub *s, uint32_t shard, uint64_t seq)
{
	struct mfsq_disk_shard st;
	int rc;

	if (shard >= s->q->cfg.nshards)
		return EINVAL;
	rc = mfsq_shard_read_rtxn(s->q, shard, &st);
	if (rc)
		return mfsq_lmdb_err(rc);
	if (seq > st.next_seq)
		return ERANGE;
	if (seq < st.head_first)
		return ENOENT;
	set_position(s, shard, seq);
	return persist(s, NULL, 1);
}

/* First seq of shard @sh whose delivery time is >= t (stream times are
 * nearly ordered: promotion may be late, so scan a subshard fully). */
static int find_time(mfsq_queue *q, MDB_txn *txn, uint32_t sh, uint64_t t, uint64_t *out,
		     uint64_t *rid)
{
	struct mfsq_disk_shard st;
	uint64_t at;
	int rc = mfsq_shard_read_r(q, txn, sh, &st, rid);

	if (rc)
		return rc;
	*out = st.next_seq;
	for (at = st.head_first; at < st.next_seq;) {
		uint64_t first, id, end;
		MDB_cursor *c;
		MDB_val key, val;
		MDB_dbi dbi;

		rc = mfsq_subshard_locate(q, txn, sh, at, &first, &id, &end);
		if (rc)
			return rc;
		rc = mfsq_dbi_for(q, txn, sh, id, &dbi);
		if (rc == MFSQ_RETRY) {
			*rid = id;
			return rc;
		}
		if (rc)
			return rc;
		rc = mdb_cursor_open(txn, dbi, &c);
		if (rc)
			return rc;
		for (rc = mdb_cursor_get(c, &key, &val, MDB_FIRST); !rc;
		     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
			struct mfsq_disk_msg h;

			rc = mfsq_msg_decode(&val, 0, &h, NULL, NULL);
			if (!rc && key.mv_size != 8)
				rc = EBADMSG;
			if (rc)
				break;
			if (h.dlv_us >= t) {
				*out = mfsq_be64_get(key.mv_data);
				mdb_cursor_close(c);
				return 0;
			}
		}
		mdb_cursor_close(c);
		if (rc != MDB_NOTFOUND)
			return rc;
		at = end;
	}
	return 0;
}

int mfsq_seek_time(mfsq_sub *s, uint64_t t_us)
{
	uint32_t n = s->q->cfg.nshards;
	uint64_t *to = malloc(n * sizeof(*to));
	MDB_txn *txn = NULL;
	int rc;

	if (!to)
		return ENOMEM;
	for (;;) {
		uint32_t i = 0;
		uint64_t rid = 0;
		MDB_dbi dbi;

		pthread_rwlock_rdlock(&s->q->droplock);
		rc = mdb_txn_begin(s->q->env, NULL, MDB_RDONLY, &txn);
		for (; !rc && i < n; i++)
			rc = find_time(s->q, txn, i, t_us, &to[i], &rid);
		if (txn)
			mdb_txn_abort(txn);
		txn = NULL;
		pthread_rwlock_unlock(&s->q->droplock);
		if (rc != MFSQ_RETRY)
			break;
		rc = mfsq_dbi_get(s->q, i - 1, rid, &dbi); /* outside the lock */
		if (rc)
			break;
	}
	for (uint32_t i = 0; !rc && i < n; i++)
		set_position(s, i, to[i]);
	free(to);
	return rc ? mfsq_lmdb_err(rc) : persist(s, NULL, 1);
}

int mfsq_sub_lagging(const mfsq_sub *s)
{
	return s->lagging;
}
