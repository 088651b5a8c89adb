/* SPDX-License-Identifier: MIT */
/*
 * The consistency check of a queue's tables (mfsq_check()), for offline
 * checkers such as dbfs-fsck: reads only, in the caller's transaction, and
 * reports every problem it finds as one line of text.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct ck {
	MDB_txn *txn;
	const char *name;
	mfsq_check_report *report;
	void *arg;
	uint64_t problems;
};

__attribute__((format(printf, 2, 3))) static void bad(struct ck *c, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n = snprintf(line, sizeof(line), "queue %s: ", c->name);

	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	c->problems++;
	if (c->report)
		c->report(c->arg, line);
}

static int get(struct ck *c, MDB_dbi meta, const void *k, size_t kl, MDB_val *v)
{
	MDB_val key = {kl, (void *)k};
	return mdb_get(c->txn, meta, &key, v);
}

/* One subshard: every key an 8-byte seq in [first, end), in order, every
 * value a message header whose priority and flags an enqueue writes. */
static int check_subshard(struct ck *c, uint32_t s, uint64_t first, uint64_t end, uint64_t id,
			  uint64_t *last, uint64_t *count)
{
	char dbname[MFSQ_NAME_MAX + 40];
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_dbi dbi;
	int rc;

	snprintf(dbname, sizeof(dbname), "%s/s/%u/%016llx", c->name, s, (unsigned long long)id);
	rc = mdb_dbi_open(c->txn, dbname, 0, &dbi);
	if (rc == MDB_NOTFOUND) {
		bad(c, "shard %u: subshard %llu (first seq %llu) has no table %s", s,
		    (unsigned long long)id, (unsigned long long)first, dbname);
		return 0;
	}
	if (rc)
		return rc;
	rc = mdb_cursor_open(c->txn, dbi, &cur);
	if (rc)
		return rc;
	uint64_t prev = 0;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8) {
			bad(c, "shard %u: subshard %llu: a key of %zu bytes", s,
			    (unsigned long long)id, k.mv_size);
			continue;
		}
		uint64_t seq = mfsq_be64_get(k.mv_data);
		if (seq < first || seq >= end)
			bad(c, "shard %u: subshard %llu holds seq %llu outside [%llu, %llu)", s,
			    (unsigned long long)id, (unsigned long long)seq,
			    (unsigned long long)first, (unsigned long long)end);
		if (prev && seq != prev + 1)
			bad(c, "shard %u: seq %llu follows %llu in subshard %llu", s,
			    (unsigned long long)seq, (unsigned long long)prev,
			    (unsigned long long)id);
		prev = seq;
		struct mfsq_disk_msg m;
		if (v.mv_size < sizeof(m)) {
			bad(c, "shard %u: message %llu is %zu bytes, shorter than its header", s,
			    (unsigned long long)seq, v.mv_size);
			continue;
		}
		memcpy(&m, v.mv_data, sizeof(m));
		if (m.prio > MFSQ_PRIO_MAX || (m.flags & ~MFSQ_MSG_DELAYED))
			bad(c, "shard %u: message %llu has priority %u, flags 0x%x", s,
			    (unsigned long long)seq, m.prio, m.flags);
		*last = seq;
		(*count)++;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int check_shard(struct ck *c, MDB_dbi meta, uint32_t s, uint64_t *next_out)
{
	unsigned char k[13];
	struct mfsq_disk_shard st;
	MDB_val v;
	int rc;

	k[0] = 'S';
	mfsq_be32_put(k + 1, s);
	rc = get(c, meta, k, 5, &v);
	if (rc == MDB_NOTFOUND) {
		bad(c, "shard %u has no state record", s);
		return 0;
	}
	if (rc)
		return rc;
	if (v.mv_size != sizeof(st)) {
		bad(c, "shard %u: state record is %zu bytes, expected %zu", s, v.mv_size,
		    sizeof(st));
		return 0;
	}
	memcpy(&st, v.mv_data, sizeof(st));
	*next_out = st.next_seq;
	if (!st.next_seq)
		bad(c, "shard %u: next seq is 0", s);

	/* the index rows of this shard, in order */
	MDB_cursor *cur;
	MDB_val key;
	rc = mdb_cursor_open(c->txn, meta, &cur);
	if (rc)
		return rc;
	k[0] = 'B';
	mfsq_be32_put(k + 1, s);
	mfsq_be64_put(k + 5, 0);
	key.mv_size = 13;
	key.mv_data = k;
	uint64_t rows = 0, firsts[2] = {0, 0}, ids[2] = {0, 0}, last = 0, prev_id = 0;
	uint64_t head = 0, tail = 0, msgs = 0;
	int have = 0;
	for (rc = mdb_cursor_get(cur, &key, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
		const unsigned char *kk = key.mv_data;
		if (key.mv_size != 13 || kk[0] != 'B' || mfsq_be32_get(kk + 1) != s)
			break;
		uint64_t first = mfsq_be64_get(kk + 5), id;
		if (v.mv_size != 8) {
			bad(c, "shard %u: index row %llu has a value of %zu bytes", s,
			    (unsigned long long)first, v.mv_size);
			continue;
		}
		memcpy(&id, v.mv_data, 8);
		if (!rows)
			head = first;
		tail = first;
		if (id <= prev_id || (st.next_id && id >= st.next_id))
			bad(c, "shard %u: subshard id %llu out of order or beyond next id %llu", s,
			    (unsigned long long)id, (unsigned long long)st.next_id);
		prev_id = id;
		/* check the previous row now that its end is known */
		if (have) {
			rc = check_subshard(c, s, firsts[0], first, ids[0], &last, &msgs);
			if (rc)
				break;
		}
		firsts[0] = first;
		ids[0] = id;
		have = 1;
		rows++;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	uint64_t tail_msgs = msgs;

	if (have && (rc = check_subshard(c, s, firsts[0], UINT64_MAX, ids[0], &last, &msgs)))
		return rc;
	tail_msgs = msgs - tail_msgs;
	/* the record's per-message fields may stand for an earlier message
	 * of its tail (shardstate.c): the messages past it are in the tail */
	uint64_t next = st.next_seq;

	if (last >= st.next_seq) {
		if (!tail_msgs || last + 1 - st.next_seq > tail_msgs)
			bad(c, "shard %u: holds seq %llu but the next seq is %llu", s,
			    (unsigned long long)last, (unsigned long long)st.next_seq);
		next = last + 1;
	}
	*next_out = next;
	(void)firsts[1];
	(void)ids[1];
	if (rows != st.nlive)
		bad(c, "shard %u: %llu subshards in the index, the state says %llu", s,
		    (unsigned long long)rows, (unsigned long long)st.nlive);
	if (rows && head != st.head_first)
		bad(c, "shard %u: the oldest subshard starts at %llu, the state says %llu", s,
		    (unsigned long long)head, (unsigned long long)st.head_first);
	if (rows && tail != st.tail_first)
		bad(c, "shard %u: the newest subshard starts at %llu, the state says %llu", s,
		    (unsigned long long)tail, (unsigned long long)st.tail_first);
	if (rows && last && last + 1 != next)
		bad(c, "shard %u: the newest message is %llu, the next seq %llu", s,
		    (unsigned long long)last, (unsigned long long)next);
	return 0;
}

int mfsq_check(MDB_txn *txn, const char *name, mfsq_check_report *report, void *arg,
	       uint64_t *problems)
{
	char dbname[MFSQ_NAME_MAX + 8];
	struct ck c = {txn, name, report, arg, 0};
	struct mfsq_disk_config dc;
	MDB_dbi meta;
	MDB_val v;
	int rc;

	if (!txn || !name || !*name || strlen(name) > MFSQ_NAME_MAX || strchr(name, '/'))
		return EINVAL;
	snprintf(dbname, sizeof(dbname), "%s/m", name);
	rc = mdb_dbi_open(txn, dbname, 0, &meta);
	if (rc)
		return mfsq_lmdb_err(rc);
	rc = get(&c, meta, "C", 1, &v);
	if (rc == MDB_NOTFOUND) {
		bad(&c, "no configuration record");
		goto out;
	}
	if (rc)
		return mfsq_lmdb_err(rc);
	if (v.mv_size != sizeof(dc)) {
		bad(&c, "configuration record is %zu bytes, expected %zu", v.mv_size, sizeof(dc));
		goto out;
	}
	memcpy(&dc, v.mv_data, sizeof(dc));
	if (dc.version < MFSQ_FORMAT_OLDEST || dc.version > MFSQ_FORMAT_VERSION ||
	    dc.nshards < 1 || dc.nshards > 1024 ||
	    !dc.subshard_msgs || !dc.subshard_bytes || dc.retain_max < 2 || !dc.max_payload ||
	    !dc.bucket_us) {
		bad(&c, "configuration out of range (version %u, %u shards)", dc.version,
		    dc.nshards);
		goto out;
	}
	uint64_t *next = calloc(dc.nshards, sizeof(*next));
	if (!next)
		return ENOMEM;
	for (uint32_t s = 0; s < dc.nshards && !rc; s++)
		rc = check_shard(&c, meta, s, &next[s]);
	/* durable subscribers: record size, positions within the stream */
	MDB_cursor *cur;
	MDB_val key = {1, "U"};
	if (!rc)
		rc = mdb_cursor_open(txn, meta, &cur);
	if (!rc) {
		for (rc = mdb_cursor_get(cur, &key, &v, MDB_SET_RANGE); !rc;
		     rc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
			const char *kk = key.mv_data;
			if (kk[0] != 'U')
				break;
			int nl = (int)(key.mv_size - 1);
			if (v.mv_size != sizeof(struct mfsq_disk_sub) + dc.nshards * 8) {
				bad(&c, "subscriber %.*s: record of %zu bytes", nl, kk + 1,
				    v.mv_size);
				continue;
			}
			for (uint32_t s = 0; s < dc.nshards; s++) {
				uint64_t a;
				memcpy(&a, (char *)v.mv_data + sizeof(struct mfsq_disk_sub) + 8 * s,
				       8);
				if (next[s] && a > next[s])
					bad(&c,
					    "subscriber %.*s: shard %u position %llu is beyond "
					    "the next seq %llu",
					    nl, kk + 1, s, (unsigned long long)a,
					    (unsigned long long)next[s]);
			}
		}
		mdb_cursor_close(cur);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	free(next);
	if (rc)
		return mfsq_lmdb_err(rc);
out:
	if (problems)
		*problems = c.problems;
	return 0;
}
