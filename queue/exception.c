/* SPDX-License-Identifier: MIT */
/* The exception queue: expired messages with the reason (layout in format.h). */
#include <errno.h>
#include <string.h>

#include "internal.h"

#define EXC_HDR 8  /* reason u8 + pad[7] */
#define EXC_KEY 13 /* origin u8, shard u32, seq u64 */

int mfsq_exception_put(mfsq_queue *q, MDB_txn *txn, char origin, uint32_t s, uint64_t seq,
		       int reason, const struct mfsq_disk_msg *h, const void *data, size_t len)
{
	unsigned char k[EXC_KEY];
	MDB_val key = {sizeof(k), k}, val = {EXC_HDR + sizeof(*h) + len, NULL};
	int rc;

	k[0] = (unsigned char)origin;
	mfsq_be32_put(k + 1, s);
	mfsq_be64_put(k + 5, seq);
	rc = mdb_put(txn, q->exc, &key, &val, MDB_NOOVERWRITE | MDB_RESERVE);
	if (rc == MDB_KEYEXIST)
		return 0; /* another subscriber recorded it first */
	if (rc)
		return rc;
	memset(val.mv_data, 0, EXC_HDR);
	*(unsigned char *)val.mv_data = (unsigned char)reason;
	memcpy((char *)val.mv_data + EXC_HDR, h, sizeof(*h));
	if (len)
		memcpy((char *)val.mv_data + EXC_HDR + sizeof(*h), data, len);
	return 0;
}

/* The cursor is the exception's position: 0 before the first, else the
 * ordinal + 1 of the last one read (exceptions are never deleted here). */
int mfsq_exception_next(mfsq_queue *q, uint64_t *cursor, struct mfsq_msg *m, int *reason, void *buf,
			size_t buflen)
{
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val key, val;
	struct mfsq_disk_msg h;
	const unsigned char *data;
	size_t len;
	uint64_t i = 0;
	int rc;

	rc = mdb_txn_begin(q->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return mfsq_lmdb_err(rc);
	rc = mdb_cursor_open(txn, q->exc, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return mfsq_lmdb_err(rc);
	}
	for (rc = mdb_cursor_get(c, &key, &val, MDB_FIRST); !rc && i < *cursor;
	     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT))
		i++;
	if (!rc) {
		rc = mfsq_msg_decode(&val, EXC_HDR, &h, &data, &len);
		if (!rc && key.mv_size != EXC_KEY)
			rc = EBADMSG; /* the shard and seq are read from the key */
		(*cursor)++;	      /* past a damaged one too: the next call reads on */
	}
	if (!rc) {
		const unsigned char *k = key.mv_data;

		mfsq_msg_from_disk(m, mfsq_be32_get(k + 1), k[0] == 's' ? mfsq_be64_get(k + 5) : 0,
				   &h, len);
		if (buf)
			memcpy(buf, data, m->len < buflen ? m->len : buflen);
		m->data = buf;
		*reason = *(unsigned char *)val.mv_data;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return mfsq_lmdb_err(rc); /* MDB_NOTFOUND: no more, ENOENT */
}
