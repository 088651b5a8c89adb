/*
 * Settled events (dbfs/feed.h, DBFS_EV_SETTLED; issue 19): one event per
 * file and wanted quiet period P once the file has been left alone for P
 * after a burst of writes, carried by the queue "later" (expire_run.c).
 *
 * A burst is a row of the table "settle" (format.h): key (ino, P), value
 * the commit time of its last write and the span written. The write that
 * opens a burst (no row yet) writes the row and one delayed message
 * (ino, P) due at its commit time + P; later writes of the burst only
 * rewrite the row (a put in their own transaction: no message, nothing in
 * memory). When the message comes (dbfs_settle_fire, on the delivery
 * thread):
 *   - the last write is P old or more: the event, and the row goes;
 *   - it is younger: the message is sent again, due at last write + P
 *     (so a burst of length L costs about L/P + 1 messages, and the
 *     event never comes before the quiet period);
 *   - the period is no longer wanted, or the file has no link left: the
 *     row goes, no event.
 * Each row has exactly one message in flight, and a message is
 * acknowledged in the transaction that rewrites or deletes its row: once
 * per burst, across crashes and restarts (both are in the store).
 *
 * The periods wanted are a small set in memory (the durable ones also in
 * the row "P" of the table, read at open): every write event of a batch
 * looks its rows up only when the set is not empty.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"

struct held {
	uint32_t ms;
	unsigned holds;
};

struct dbfs_settle {
	pthread_mutex_t lock;
	uint32_t durable[DBFS_SETTLE_MAX];
	size_t ndurable;
	struct held held[DBFS_SETTLE_MAX];
	size_t nheld;
	_Atomic size_t nactive; /* distinct periods wanted: the writes' quick test */
};

struct row {
	uint64_t last_ns, lo, hi; /* hi 0: nothing but truncates so far */
};

static MDB_val key_periods = {1, (void *)"P"};

static void row_key(unsigned char kb[12], uint64_t ino, uint32_t ms, MDB_val *k)
{
	dbfs_put_be64(kb, ino);
	kb[8] = (unsigned char)(ms >> 24);
	kb[9] = (unsigned char)(ms >> 16);
	kb[10] = (unsigned char)(ms >> 8);
	kb[11] = (unsigned char)ms;
	k->mv_size = 12;
	k->mv_data = kb;
}

static bool has(const uint32_t *v, size_t n, uint32_t ms)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == ms)
			return true;
	return false;
}

/* The distinct periods wanted, into out[DBFS_SETTLE_MAX]; under s->lock. */
static size_t wanted(const struct dbfs_settle *s, uint32_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < s->ndurable; i++)
		out[n++] = s->durable[i];
	for (size_t i = 0; i < s->nheld; i++)
		if (s->held[i].holds && !has(out, n, s->held[i].ms) && n < DBFS_SETTLE_MAX)
			out[n++] = s->held[i].ms;
	return n;
}

static void recount(struct dbfs_settle *s)
{
	uint32_t w[DBFS_SETTLE_MAX];
	atomic_store(&s->nactive, wanted(s, w));
}

static bool period_ok(uint32_t ms)
{
	return ms >= 1 && ms <= DBFS_SETTLE_MS_MAX;
}

/* ---- open, close ---- */

int dbfs_settle_start(struct dbfs *fs, char *err, size_t errlen)
{
	MDB_txn *txn;
	MDB_val v;
	if (fs->opt.read_only || !fs->db_settle || !fs->feed)
		return 0;
	struct dbfs_settle *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	int rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = dbfs_get(txn, fs->db_settle, &key_periods, &v);
		if (rc == MDB_NOTFOUND)
			rc = 0;
		else if (!rc && (v.mv_size % 4 || v.mv_size / 4 > DBFS_SETTLE_MAX))
			rc = MDB_CORRUPTED;
		else if (!rc)
			for (size_t i = 0; i < v.mv_size / 4; i++) {
				const unsigned char *p = (const unsigned char *)v.mv_data + 4 * i;
				uint32_t ms = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
					      (uint32_t)p[2] << 8 | p[3];
				if (period_ok(ms) && !has(s->durable, s->ndurable, ms))
					s->durable[s->ndurable++] = ms;
			}
		dbfs_read_end(fs, txn);
	}
	if (rc) {
		snprintf(err, errlen, "cannot read the settle periods: %s", mdb_strerror(rc));
		pthread_mutex_destroy(&s->lock);
		free(s);
		return dbfs_errno(rc);
	}
	recount(s);
	fs->settle = s;
	return 0;
}

void dbfs_settle_stop(struct dbfs *fs)
{
	struct dbfs_settle *s = fs->settle;
	if (!s)
		return;
	fs->settle = NULL;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- the periods wanted ---- */

struct periods {
	unsigned char b[4 * DBFS_SETTLE_MAX];
	size_t n;
};

static int periods_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct periods *p = arg;
	MDB_val v = {4 * p->n, p->b};
	if (!p->n) {
		int rc = dbfs_del(txn, fs->db_settle, &key_periods, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	return dbfs_put(txn, fs->db_settle, &key_periods, &v, 0);
}

int dbfs_settle_set(struct dbfs *fs, const uint32_t *ms, size_t n)
{
	struct dbfs_settle *s = fs->settle;
	uint32_t d[DBFS_SETTLE_MAX], w[DBFS_SETTLE_MAX];
	size_t nd = 0;
	if (!s)
		return fs->opt.read_only ? -EROFS : -EOPNOTSUPP;
	for (size_t i = 0; i < n; i++) {
		if (!period_ok(ms[i]))
			return -EINVAL;
		if (has(d, nd, ms[i]))
			continue;
		if (nd == DBFS_SETTLE_MAX)
			return -ENOSPC;
		d[nd++] = ms[i];
	}
	pthread_mutex_lock(&s->lock);
	/* the union with the held periods must fit */
	size_t total = nd;
	for (size_t i = 0; i < s->nheld; i++)
		if (s->held[i].holds && !has(d, nd, s->held[i].ms))
			total++;
	if (total > DBFS_SETTLE_MAX) {
		pthread_mutex_unlock(&s->lock);
		return -ENOSPC;
	}
	struct periods p = {.n = nd};
	for (size_t i = 0; i < nd; i++) {
		p.b[4 * i] = (unsigned char)(d[i] >> 24);
		p.b[4 * i + 1] = (unsigned char)(d[i] >> 16);
		p.b[4 * i + 2] = (unsigned char)(d[i] >> 8);
		p.b[4 * i + 3] = (unsigned char)d[i];
	}
	/* in memory first: a burst opened meanwhile is not missed; the
	 * store's row follows (a failed write leaves memory ahead of it
	 * until the next set, which mfs makes at the next subscribe) */
	memcpy(s->durable, d, nd * sizeof(*d));
	s->ndurable = nd;
	atomic_store(&s->nactive, wanted(s, w));
	pthread_mutex_unlock(&s->lock);
	return dbfs_errno(dbfs_write(fs, periods_fn, &p));
}

int dbfs_settle_hold(struct dbfs *fs, uint32_t ms)
{
	struct dbfs_settle *s = fs->settle;
	uint32_t w[DBFS_SETTLE_MAX];
	if (!s)
		return -EOPNOTSUPP;
	if (!period_ok(ms))
		return -EINVAL;
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	size_t n = wanted(s, w), i;
	for (i = 0; i < s->nheld && s->held[i].ms != ms; i++)
		;
	if (i == s->nheld) { /* a free slot, or a new one */
		for (i = 0; i < s->nheld && s->held[i].holds; i++)
			;
		if (i == s->nheld && s->nheld < DBFS_SETTLE_MAX)
			s->nheld++;
		if (i < s->nheld)
			s->held[i] = (struct held){ms, 0};
	}
	if (i == s->nheld || (!has(w, n, ms) && n == DBFS_SETTLE_MAX))
		rc = -ENOSPC;
	else
		s->held[i].holds++;
	recount(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void dbfs_settle_release(struct dbfs *fs, uint32_t ms)
{
	struct dbfs_settle *s = fs->settle;
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nheld; i++)
		if (s->held[i].ms == ms && s->held[i].holds) {
			s->held[i].holds--;
			break;
		}
	recount(s);
	pthread_mutex_unlock(&s->lock);
}

static bool is_wanted(struct dbfs_settle *s, uint32_t ms)
{
	uint32_t w[DBFS_SETTLE_MAX];
	pthread_mutex_lock(&s->lock);
	size_t n = wanted(s, w);
	pthread_mutex_unlock(&s->lock);
	return has(w, n, ms);
}

/* ---- a write (the leader's batch) ---- */

/* Which events are writes (dbfs/feed.h says so to users). */
bool dbfs_settle_is_write(const struct dbfs_event *ev)
{
	switch (ev->op) {
	case DBFS_EV_WRITE:
	case DBFS_EV_TRUNCATE:
	case DBFS_EV_FALLOCATE:
	case DBFS_EV_PUNCH:
		return true;
	case DBFS_EV_CREATE:
	case DBFS_EV_MKNOD:
		return S_ISREG(ev->mode);
	case DBFS_EV_SETATTR:
		return (ev->attr_mask & DBFS_SET_SIZE) != 0;
	default:
		return false;
	}
}

static bool has_range(const struct dbfs_event *ev)
{
	return (ev->op == DBFS_EV_WRITE || ev->op == DBFS_EV_FALLOCATE ||
		ev->op == DBFS_EV_PUNCH) && ev->len;
}

int dbfs_settle_wrote(struct dbfs *fs, MDB_txn *txn, const struct dbfs_event *ev, uint64_t t_ns)
{
	struct dbfs_settle *s = fs->settle;
	uint32_t w[DBFS_SETTLE_MAX];
	if (!s || !fs->expire || !atomic_load(&s->nactive) || !dbfs_settle_is_write(ev))
		return 0;
	pthread_mutex_lock(&s->lock);
	size_t n = wanted(s, w);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		unsigned char kb[12];
		MDB_val k, v;
		struct row r = {t_ns, UINT64_MAX, 0};
		row_key(kb, ev->ino, w[i], &k);
		int rc = dbfs_get(txn, fs->db_settle, &k, &v);
		bool fresh = rc == MDB_NOTFOUND;
		if (rc && !fresh)
			return rc;
		if (!fresh && v.mv_size == sizeof(r)) {
			memcpy(&r, v.mv_data, sizeof(r));
			if (t_ns > r.last_ns)
				r.last_ns = t_ns;
		}
		if (has_range(ev)) {
			if (ev->off < r.lo)
				r.lo = ev->off;
			if (ev->off + ev->len > r.hi)
				r.hi = ev->off + ev->len;
		}
		v.mv_size = sizeof(r);
		v.mv_data = &r;
		if ((rc = dbfs_put(txn, fs->db_settle, &k, &v, 0)))
			return rc;
		/* a row already had its message: it will find the new time */
		if (fresh && (rc = dbfs_later_enqueue_at(fs, txn, DBFS_LATER_SETTLE, ev->ino, w[i],
							 t_ns / 1000u + (uint64_t)w[i] * 1000u)))
			return rc;
	}
	return 0;
}

/* ---- the message came (the delivery thread's batch) ---- */

int dbfs_settle_fire(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint32_t ms, bool *fired)
{
	struct dbfs_settle *s = fs->settle;
	unsigned char kb[12];
	MDB_val k, v;
	struct row r;
	struct dbfs_inode in;
	*fired = false;
	if (!s || !fs->db_settle)
		return 0;
	row_key(kb, ino, ms, &k);
	int rc = dbfs_get(txn, fs->db_settle, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0; /* cannot be (one message per row): nothing to do */
	if (rc)
		return rc;
	if (v.mv_size != sizeof(r))
		return dbfs_del(txn, fs->db_settle, &k, NULL);
	memcpy(&r, v.mv_data, sizeof(r));
	if (!is_wanted(s, ms))
		return dbfs_del(txn, fs->db_settle, &k, NULL);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	uint64_t end = r.last_ns + (uint64_t)ms * 1000000u;
	/* a write in this very batch (a request that joined it) is newer
	 * than the row: its batch end rewrites the row; wait a period more */
	if (dbfs_feed_batch_wrote(fs, ino) && end < now + (uint64_t)ms * 1000000u)
		end = now + (uint64_t)ms * 1000000u;
	if (end > now) /* not quiet yet: the rest of the period */
		return dbfs_later_enqueue_at(fs, txn, DBFS_LATER_SETTLE, ino, ms, end / 1000u + 1);
	rc = dbfs_inode_get(fs, txn, ino, &in);
	if (rc && rc != -ENOENT)
		return rc;
	if (!rc && in.nlink && S_ISREG(in.mode)) {
		struct dbfs_ev_note n = {.op = DBFS_EV_SETTLED, .ino = ino, .in = &in,
					 .off = r.hi ? r.lo : 0, .len = r.hi ? r.hi - r.lo : 0,
					 .attr_mask = ms};
		if ((rc = dbfs_feed_note(fs, txn, &n)))
			return rc;
		*fired = true;
	}
	return dbfs_del(txn, fs->db_settle, &k, NULL);
}

int dbfs_settle_pending(struct dbfs *fs, MDB_txn *txn, uint64_t *rows)
{
	MDB_stat st;
	*rows = 0;
	if (!fs->db_settle)
		return 0;
	int rc = mdb_stat(txn, fs->db_settle, &st);
	if (rc)
		return rc;
	MDB_val v;
	/* the periods' row is not a burst */
	*rows = st.ms_entries - (dbfs_get(txn, fs->db_settle, &key_periods, &v) == 0);
	return 0;
}
