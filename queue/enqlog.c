/* SPDX-License-Identifier: MIT */
/*
 * The enqueue log: own-transaction enqueues of MDB_NOSYNC environments
 * return once their messages are in a shared mapping of a file, and group
 * commits move them into the store afterwards (groupcommit.c).
 *
 * Why: with batch-1 enqueues each caller waited for a commit, and on
 * 2 vCPUs the wake-ups of 16 waiting enqueuers cost more than the commits
 * (perf: a third of the samples in context switches, 2 messages per
 * commit). A commit of an MDB_NOSYNC environment survives a crash of the
 * process and nothing more; a store into a MAP_SHARED mapping survives the
 * same. So the call returns as soon as its records are in the log: the
 * caller that finds no group commit running leads one itself (alone, it
 * waits for its commit as before), the others return at once and the
 * running leader, or the log's flusher thread when it is done, commits
 * their records in its next turn.
 *
 * Records (format.h) go round a ring of MFSQ_LOG_BYTES, each numbered (lsn,
 * stored last) and checksummed. The store keeps, per log file, the number
 * and offset of the first record not yet in it ('L' in the meta database),
 * written in the same transaction as the records' messages: a record is
 * applied exactly once, whatever crashes. A process owns one of MFSQ_LOGS
 * files per queue by an OFD lock. A file nobody holds belongs to a process
 * that died: mfsq_open() and retention (every 100 ms) replay its records
 * from the stored position, in order, and stop at the first one whose
 * number or checksum is not the next (after a machine crash the file may
 * hold stale or partly written pages; what is lost there was at most the
 * last second, as for the store itself).
 *
 * Order per enqueuer holds: an enqueuer's records are committed in log
 * order before any later call of its can commit (a group turn takes the
 * log first, and an enqueue in the caller's transaction into a shard with
 * records still in the log returns EAGAIN: abort and retry, as documented
 * for handles).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define HDR sizeof(struct mfsq_log_rec)

static size_t rec_bytes(size_t len)
{
	return HDR + ((len + 7) & ~(size_t)7);
}

/* Checksum of a record: everything but lsn and sum themselves, and the
 * payload. Four independent lanes of 8-byte words: one lane's multiply
 * chain made it a tenth of a 4 KiB batch-1 run (perf). It detects torn
 * and stale pages, not attacks. */
static uint64_t rec_sum(const struct mfsq_log_rec *r, uint64_t lsn)
{
	const unsigned char *p = (const unsigned char *)r + offsetof(struct mfsq_log_rec, enqueuer);
	size_t n = HDR - offsetof(struct mfsq_log_rec, enqueuer) + r->len;
	const uint64_t k = 0xff51afd7ed558ccdull;
	uint64_t h[4] = {0x9e3779b97f4a7c15ull ^ lsn, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull,
			 0x27d4eb2f165667c5ull};
	uint64_t w, x = 0;

	for (; n >= 32; n -= 32, p += 32)
		for (int i = 0; i < 4; i++) {
			memcpy(&w, p + 8 * i, 8);
			h[i] = (h[i] ^ w) * k;
			h[i] ^= h[i] >> 31;
		}
	for (; n >= 8; n -= 8, p += 8) {
		memcpy(&w, p, 8);
		h[0] = (h[0] ^ w) * k;
		h[0] ^= h[0] >> 31;
	}
	w = 0;
	memcpy(&w, p, n);
	for (int i = 0; i < 4; i++)
		x = (x ^ h[i]) * 0xc4ceb9fe1a85ec53ull + (uint64_t)i;
	x = (x ^ w ^ n) * 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 32);
}

static void log_key(unsigned char k[5], unsigned i)
{
	k[0] = 'L';
	mfsq_be32_put(k + 1, i);
}

static int log_path(mfsq_queue *q, unsigned i, char *buf, size_t len)
{
	char suffix[16];

	snprintf(suffix, sizeof(suffix), ".log%u", i);
	return mfsq_env_file(q, suffix, buf, len);
}

static int file_lock(int fd, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET};

	return fcntl(fd, F_OFD_SETLK, &fl) ? errno : 0;
}

/* The stored position of log @i (none: the start). */
static int read_pos(mfsq_queue *q, MDB_txn *txn, unsigned i, struct mfsq_disk_log *pos)
{
	unsigned char k[5];
	MDB_val key = {sizeof(k), k}, val;
	int rc;

	log_key(k, i);
	rc = mdb_get(txn, q->meta, &key, &val);
	if (rc == MDB_NOTFOUND) {
		pos->next_lsn = 1;
		pos->off = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (val.mv_size != sizeof(*pos))
		return EBADMSG;
	memcpy(pos, val.mv_data, sizeof(*pos));
	return pos->off % 8 || pos->off >= MFSQ_LOG_BYTES ? EBADMSG : 0;
}

int mfsq_enqlog_mark(mfsq_queue *q, MDB_txn *txn, unsigned i, uint64_t next_lsn, uint64_t off)
{
	unsigned char k[5];
	struct mfsq_disk_log pos = {.next_lsn = next_lsn, .off = off};
	MDB_val key = {sizeof(k), k}, val = {sizeof(pos), &pos};

	log_key(k, i);
	return mdb_put(txn, q->meta, &key, &val, 0);
}

/*
 * Walk the records of ring @map from (@lsn, @off): each valid one goes to
 * m[] (data pointing into the ring) until @upto (0: until the first record
 * that is not the next, checksums checked). Returns the count; *lsn and
 * *off end after the last one.
 */
static size_t walk(unsigned char *map, uint64_t *lsn, uint64_t *off, uint64_t upto, int check,
		   struct mfsq_msg_in **m, size_t *cap)
{
	size_t n = 0;

	for (;;) {
		struct mfsq_log_rec *r;

		if (upto && *lsn >= upto)
			break;
		if (MFSQ_LOG_BYTES - *off < HDR)
			*off = 0; /* implicit wrap: no room for a header */
		r = (struct mfsq_log_rec *)(map + *off);
		if (atomic_load_explicit(&r->lsn, memory_order_acquire) != *lsn)
			break;
		if (r->len > MFSQ_LOG_BYTES - *off - HDR || (check && r->sum != rec_sum(r, *lsn)))
			break;
		if (r->wrap) {
			(*lsn)++;
			*off = 0;
			continue;
		}
		if (n == *cap) {
			size_t nc = *cap ? *cap * 2 : 256;
			struct mfsq_msg_in *nm = realloc(*m, nc * sizeof(*nm));

			if (!nm)
				break; /* the rest in a later turn */
			*m = nm;
			*cap = nc;
		}
		(*m)[n++] = (struct mfsq_msg_in){
		    .data = r + 1,
		    .len = r->len,
		    .enqueuer = r->enqueuer,
		    .deliver_us = r->deliver_us,
		    .expire_us = r->expire_us,
		    .prio = r->prio,
		    .tag = r->tag,
		};
		*off += rec_bytes(r->len);
		(*lsn)++;
	}
	return n;
}

/* Whether log @i has records the store does not: a read transaction. */
static int has_records(mfsq_queue *q, unsigned i, unsigned char *map, int *yes)
{
	struct mfsq_msg_in *m = NULL;
	struct mfsq_disk_log pos;
	size_t cap = 0;
	MDB_txn *txn;
	int rc = mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return rc;
	rc = read_pos(q, txn, i, &pos);
	mdb_txn_abort(txn);
	if (!rc) {
		uint64_t lsn = pos.next_lsn, off = pos.off;

		walk(map, &lsn, &off, pos.next_lsn + 1, 1, &m, &cap);
		*yes = lsn != pos.next_lsn;
	}
	free(m);
	return rc;
}

/* Move the records of a dead process's log @i into the store. */
static int replay(mfsq_queue *q, unsigned i, unsigned char *map)
{
	struct mfsq_msg_in *m = NULL;
	struct mfsq_loaded *ls;
	struct mfsq_put *puts = NULL;
	size_t cap = 0, n = 0, nputs = 0;
	struct mfsq_disk_log pos;
	struct mfsq_wtx w;
	int rc, yes = 0;

	rc = has_records(q, i, map, &yes);
	if (rc || !yes)
		return rc; /* the usual case: no write transaction */
	ls = calloc(q->cfg.nshards, sizeof(*ls));
	if (!ls)
		return ENOMEM;
	for (;;) {
		uint64_t lsn, off;

		rc = mfsq_wtx_begin(q, NULL, 0, &w);
		if (!rc)
			rc = read_pos(q, w.txn, i, &pos);
		if (!rc) {
			lsn = pos.next_lsn;
			off = pos.off;
			n = walk(map, &lsn, &off, 0, 1, &m, &cap);
			free(puts);
			puts = malloc((n ? n : 1) * sizeof(*puts));
			rc = puts ? mfsq_put_msgs(q, &w, m, n, NULL, puts, &nputs, ls) : ENOMEM;
		}
		if (!rc)
			rc = mfsq_put_states(q, &w, ls);
		if (!rc)
			rc = mfsq_enqlog_mark(q, w.txn, i, lsn, off);
		rc = mfsq_wtx_end(q, &w, rc);
		if (rc != MFSQ_RETRY)
			break;
		memset(ls, 0, q->cfg.nshards * sizeof(*ls));
	}
	if (!rc) {
		atomic_fetch_add(&q->c.log_replayed, n);
		mfsq_put_committed(q, &w, ls, NULL, 0);
	}
	free(puts);
	free(m);
	free(ls);
	return rc;
}

/* Lock, replay and (@keep) keep log file @i; its fd, or -1. */
static int take_file(mfsq_queue *q, unsigned i, int create, int keep, unsigned char **mapp)
{
	char path[4096];
	unsigned char *map;
	struct stat st;
	int fd;

	if (log_path(q, i, path, sizeof(path)))
		return -1;
	fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
	if (fd < 0)
		return -1;
	if (file_lock(fd, F_WRLCK) || fstat(fd, &st) ||
	    ((size_t)st.st_size < MFSQ_LOG_BYTES && (!create || ftruncate(fd, MFSQ_LOG_BYTES)))) {
		close(fd); /* held by a live process (or unusable) */
		return -1;
	}
	map = mmap(NULL, MFSQ_LOG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		close(fd);
		return -1;
	}
	if (replay(q, i, map) || !keep) {
		munmap(map, MFSQ_LOG_BYTES);
		close(fd); /* drops the lock */
		return -1;
	}
	/* A new owner starts from a clean ring: after a machine crash a torn
	 * record may stop the replay with valid older ones behind it, and a
	 * new record of the same size written over the torn one would make
	 * them look next (a replay after our own crash would take them). */
	memset(map, 0, MFSQ_LOG_BYTES);
	*mapp = map;
	return fd;
}

int mfsq_enqlog_relaxed(mfsq_queue *q)
{
	unsigned fl = 0;

	mdb_env_get_flags(q->env, &fl);
	return (fl & MDB_NOSYNC) && !(fl & MDB_RDONLY);
}

void mfsq_enqlog_open(mfsq_queue *q)
{
	mfsq_enqlog_reap(q);
	if (!mfsq_enqlog_relaxed(q))
		return;
	q->log_pending = calloc(q->cfg.nshards, sizeof(*q->log_pending));
	for (unsigned i = 0; q->log_pending && i < MFSQ_LOGS && q->logfd < 0; i++) {
		struct mfsq_disk_log pos;
		MDB_txn *txn;
		int rc;

		q->logfd = take_file(q, i, 1, 1, &q->logmap);
		if (q->logfd < 0)
			continue;
		rc = mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn);
		if (!rc) {
			rc = read_pos(q, txn, i, &pos);
			mdb_txn_abort(txn);
		}
		if (rc) {
			munmap(q->logmap, MFSQ_LOG_BYTES);
			close(q->logfd);
			q->logfd = -1;
			break;
		}
		q->logi = i;
		q->log_next_lsn = q->log_tail_lsn = q->log_taken_lsn = pos.next_lsn;
		q->log_head = q->log_tail = q->log_taken = pos.off;
	}
	if (q->logfd < 0) {
		free(q->log_pending);
		q->log_pending = NULL;
	}
}

void mfsq_enqlog_reap(mfsq_queue *q)
{
	unsigned fl = 0;

	mdb_env_get_flags(q->env, &fl);
	if (fl & MDB_RDONLY)
		return;
	for (unsigned i = 0; i < MFSQ_LOGS; i++) {
		unsigned char *map;

		if (q->logfd >= 0 && i == q->logi)
			continue;
		take_file(q, i, 0, 0, &map);
	}
}

void mfsq_enqlog_close(mfsq_queue *q)
{
	if (q->logfd >= 0) {
		munmap(q->logmap, MFSQ_LOG_BYTES);
		close(q->logfd);
	}
	q->logfd = -1;
	free(q->log_pending);
	q->log_pending = NULL;
	free(q->log_m);
	q->log_m = NULL;
	free(q->log_puts);
	q->log_puts = NULL;
}

int mfsq_enqlog_put_locked(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n)
{
	uint64_t head = q->log_head, used = q->log_used, bytes = 0;

	/* while a failed flush's records wait, new calls take the commit
	 * path: it retries them first, and returns the error */
	if (q->logfd < 0 || (q->log_err && q->log_tail_lsn != q->log_next_lsn) ||
	    !mfsq_enqlog_relaxed(q))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (m[i].flags)
			return -1;
		bytes += m[i].len;
	}
	if (bytes > MFSQ_LOG_BATCH)
		return -1;
	/* room for all of them first: a call is logged whole or not at all */
	for (size_t i = 0; i < n; i++) {
		uint64_t need = rec_bytes(m[i].len);

		if (MFSQ_LOG_BYTES - head < need) {
			used += MFSQ_LOG_BYTES - head;
			head = 0;
		}
		used += need;
		head += need;
		if (used + HDR >= MFSQ_LOG_BYTES)
			return -1;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t need = rec_bytes(m[i].len);
		struct mfsq_log_rec *r;

		if (MFSQ_LOG_BYTES - q->log_head < need) {
			if (MFSQ_LOG_BYTES - q->log_head >= HDR) {
				r = (struct mfsq_log_rec *)(q->logmap + q->log_head);
				memset(r, 0, HDR);
				r->wrap = 1;
				r->sum = rec_sum(r, q->log_next_lsn);
				atomic_store_explicit(&r->lsn, q->log_next_lsn,
						      memory_order_release);
				q->log_next_lsn++;
			}
			q->log_used += MFSQ_LOG_BYTES - q->log_head;
			q->log_head = 0;
		}
		r = (struct mfsq_log_rec *)(q->logmap + q->log_head);
		r->enqueuer = m[i].enqueuer;
		r->deliver_us = m[i].deliver_us;
		r->expire_us = m[i].expire_us;
		r->len = (uint32_t)m[i].len;
		r->tag = m[i].tag;
		r->prio = m[i].prio;
		r->wrap = 0;
		memset(r->pad, 0, sizeof(r->pad));
		if (m[i].len)
			memcpy(r + 1, m[i].data, m[i].len);
		r->sum = rec_sum(r, q->log_next_lsn);
		/* last: a killed process leaves the record whole or not there */
		atomic_store_explicit(&r->lsn, q->log_next_lsn, memory_order_release);
		q->log_next_lsn++;
		q->log_head += need;
		q->log_used += need;
		q->log_pending[mfsq_shard_of(q, m[i].enqueuer)]++;
	}
	atomic_fetch_add(&q->c.log_enqueued, n);
	atomic_fetch_add(&q->c.batches, 1);
	return 0;
}

int mfsq_enqlog_unput_locked(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n, uint64_t lsn,
			     uint64_t head, uint64_t used, uint64_t end_lsn)
{
	uint64_t off = head;

	if (q->log_next_lsn != end_lsn || q->log_taken_lsn > lsn || q->gleader)
		return -1; /* others' records follow, or a turn has them */
	for (uint64_t l = lsn; l < end_lsn; l++) {
		struct mfsq_log_rec *r;

		if (MFSQ_LOG_BYTES - off < HDR)
			off = 0;
		r = (struct mfsq_log_rec *)(q->logmap + off);
		off = r->wrap ? 0 : off + rec_bytes(r->len);
		atomic_store_explicit(&r->lsn, 0, memory_order_release); /* never replayed */
	}
	for (size_t i = 0; i < n; i++)
		q->log_pending[mfsq_shard_of(q, m[i].enqueuer)]--;
	q->log_next_lsn = lsn;
	q->log_head = head;
	q->log_used = used;
	atomic_fetch_sub(&q->c.log_enqueued, n);
	atomic_fetch_sub(&q->c.batches, 1);
	return 0;
}

int mfsq_enqlog_dirty(const mfsq_queue *q)
{
	return q->logfd >= 0 && q->log_taken_lsn != q->log_next_lsn;
}

size_t mfsq_enqlog_take_locked(mfsq_queue *q, const struct mfsq_msg_in **m, struct mfsq_put **puts,
			       uint64_t *end_lsn, uint64_t *end_off)
{
	uint64_t lsn = q->log_taken_lsn, off = q->log_taken;
	size_t n = walk(q->logmap, &lsn, &off, q->log_next_lsn, 0, &q->log_m, &q->log_mcap);

	if (n > q->log_putcap) {
		struct mfsq_put *np = realloc(q->log_puts, n * sizeof(*np));

		if (!np) { /* nothing this turn; the next one tries again */
			*end_lsn = q->log_taken_lsn;
			*end_off = q->log_taken;
			return 0;
		}
		q->log_puts = np;
		q->log_putcap = n;
	}
	*puts = q->log_puts;
	*m = q->log_m;
	*end_lsn = lsn;
	*end_off = off;
	q->log_taken_lsn = lsn;
	q->log_taken = off;
	return n;
}

void mfsq_enqlog_done_locked(mfsq_queue *q, const struct mfsq_msg_in *m, size_t n, uint64_t end_lsn,
			     uint64_t end_off, int rc)
{
	if (rc) {
		/* still in the log: the next turn takes them again */
		q->log_err = rc;
		q->log_taken_lsn = q->log_tail_lsn;
		q->log_taken = q->log_tail;
		return;
	}
	q->log_err = 0;
	for (size_t i = 0; i < n; i++)
		q->log_pending[mfsq_shard_of(q, m[i].enqueuer)]--;
	q->log_used -= (end_off + MFSQ_LOG_BYTES - q->log_tail) % MFSQ_LOG_BYTES;
	if (end_lsn == q->log_next_lsn)
		q->log_used = 0; /* wasted ends of the ring included */
	q->log_tail_lsn = end_lsn;
	q->log_tail = end_off;
	atomic_fetch_add(&q->c.log_flushes, 1);
}

int mfsq_enqlog_pending_locked(const mfsq_queue *q, uint32_t shard)
{
	return q->log_pending && q->log_pending[shard];
}
