/* The retained usage history on LMDB (see usage_store.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmdb_env.h"
#include "manager.h"
#include "usage_store.h"

struct mfs_usage_store {
	MDB_env *env;
	MDB_dbi dbi;
};

static int usage_errno(int rc)
{
	return mfs_lmdb_errno(rc);
}

#define KEY_MAX (MFS_NAME_MAX + 2 + 8)
/* A version 2 row's bytes before its kinds. */
#define V2_FIXED offsetof(struct mfs_usage_row, kinds)
_Static_assert(offsetof(struct mfs_usage_row, flushes) == MFS_USAGE_ROW_V1_SIZE,
	       "version 1 rows are the fields up to feed_lag");

static size_t key_make(unsigned char *k, const char *name, unsigned res, uint64_t t)
{
	size_t n = strlen(name);

	memcpy(k, name, n);
	k[n] = 0;
	k[n + 1] = (unsigned char)res;
	for (int i = 0; i < 8; i++)
		k[n + 2 + i] = (unsigned char)(t >> (56 - 8 * i));
	return n + 10;
}

static uint64_t key_time(const unsigned char *k, size_t len)
{
	uint64_t t = 0;

	for (size_t i = len - 8; i < len; i++)
		t = t << 8 | k[i];
	return t;
}

int mfs_usage_open(const char *dir, unsigned extra_dbs, struct mfs_usage_store **out, char *err,
		   size_t errlen)
{
	struct mfs_usage_store *st = calloc(1, sizeof(*st));
	int rc;

	*out = NULL;
	if (!st)
		return -ENOMEM;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "usage history %s: %s", dir, strerror(errno));
		free(st);
		return rc;
	}
	rc = mfs_lmdb_env_open(dir, MDB_NOTLS | MDB_NOSYNC, 2 + extra_dbs, MFS_USAGE_MAP, "history",
			       &st->env, &st->dbi);
	if (rc) {
		snprintf(err, errlen, "usage history %s: %s", dir, mdb_strerror(rc));
		free(st);
		return usage_errno(rc);
	}
	*out = st;
	return 0;
}

void mfs_usage_close(struct mfs_usage_store *st)
{
	if (!st)
		return;
	mdb_env_sync(st->env, 1);
	mdb_env_close(st->env);
	free(st);
}

MDB_env *mfs_usage_env(struct mfs_usage_store *st)
{
	return st->env;
}

int mfs_usage_begin(struct mfs_usage_store *st, MDB_txn **txn)
{
	return usage_errno(mdb_txn_begin(st->env, NULL, 0, txn));
}

int mfs_usage_commit(MDB_txn *txn)
{
	return usage_errno(mdb_txn_commit(txn));
}

int mfs_usage_put(struct mfs_usage_store *st, MDB_txn *txn, const char *name, unsigned res,
		  const struct mfs_usage_row *row)
{
	unsigned char k[KEY_MAX];

	if (!name[0] || strlen(name) > MFS_NAME_MAX)
		return -EINVAL;
	MDB_val key = {key_make(k, name, res, row->t), k};
	unsigned char v[V2_FIXED + MFS_USAGE_KINDS_MAX];
	struct mfs_usage_row head = *row;
	head.version = MFS_USAGE_ROW_VERSION;
	memcpy(v, &head, V2_FIXED);
	MDB_val val = {V2_FIXED + mfs_usage_kinds_put(v + V2_FIXED, &row->kinds), v};
	return usage_errno(mdb_put(txn, st->dbi, &key, &val, 0));
}

/* A stored row into *row: version 1 (MFS_USAGE_ROW_V1_SIZE bytes, version
 * field 0) or 2. -EINVAL: neither. */
static int row_decode(const MDB_val *val, struct mfs_usage_row *row)
{
	memset(row, 0, sizeof(*row));
	if (val->mv_size < MFS_USAGE_ROW_V1_SIZE)
		return -EINVAL;
	memcpy(row, val->mv_data, MFS_USAGE_ROW_V1_SIZE);
	if (row->version == 0 && val->mv_size == MFS_USAGE_ROW_V1_SIZE) {
		row->version = 1;
		return 0;
	}
	if (row->version != 2 || val->mv_size < V2_FIXED)
		return -EINVAL;
	memcpy(row, val->mv_data, V2_FIXED);
	return mfs_usage_kinds_get((const unsigned char *)val->mv_data + V2_FIXED,
				   val->mv_size - V2_FIXED, &row->kinds);
}

/*
 * Skip-scan: for each DBFS name in the table, delete from its first row of
 * each resolution up to the cut. Jumping to the next name is one seek to
 * name + 01 (above every name+00... key, below any longer name sharing the
 * prefix, whose next byte is printable).
 */
int mfs_usage_trim(struct mfs_usage_store *st, MDB_txn *txn, uint64_t sec_before,
		   uint64_t min_before)
{
	MDB_cursor *c;
	unsigned char k[KEY_MAX];
	MDB_val key, val;
	int n = 0;
	int rc = mdb_cursor_open(txn, st->dbi, &c);

	if (rc)
		return usage_errno(rc);
	rc = mdb_cursor_get(c, &key, &val, MDB_FIRST);
	while (!rc) {
		size_t len = key.mv_size;
		if (len < 10 || len > KEY_MAX) { /* not ours: leave it, go on */
			rc = mdb_cursor_get(c, &key, &val, MDB_NEXT);
			continue;
		}
		const unsigned char *p = key.mv_data;
		unsigned res = p[len - 9];
		uint64_t cut = res == MFS_RES_SEC ? sec_before : min_before;
		if (key_time(p, len) < cut) {
			rc = mdb_cursor_del(c, 0);
			if (rc)
				break;
			n++;
			rc = mdb_cursor_get(c, &key, &val, MDB_GET_CURRENT);
			if (rc == EINVAL) /* deleted the last one */
				rc = MDB_NOTFOUND;
			continue;
		}
		/* rows of this name and resolution from here on are kept: jump to
		 * the next resolution (res + 1) or name (name + 01) */
		size_t nl = len - 10;
		memcpy(k, p, nl);
		if (res < MFS_RES_MIN) {
			k[nl] = 0;
			k[nl + 1] = (unsigned char)(res + 1);
			key.mv_size = nl + 2;
		} else {
			k[nl] = 1;
			key.mv_size = nl + 1;
		}
		key.mv_data = k;
		rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? n : usage_errno(rc);
}

int mfs_usage_each(struct mfs_usage_store *st, const char *name, unsigned res, uint64_t from,
		   uint64_t to, mfs_usage_fn *fn, void *arg)
{
	unsigned char k[KEY_MAX];
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val key, val;
	size_t nl = strlen(name);

	if (!nl || nl > MFS_NAME_MAX)
		return -EINVAL;
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return usage_errno(rc);
	rc = mdb_cursor_open(txn, st->dbi, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return usage_errno(rc);
	}
	key.mv_size = key_make(k, name, res, from);
	key.mv_data = k;
	int out = 0;
	for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		const unsigned char *p = key.mv_data;
		if (key.mv_size != nl + 10 || memcmp(p, k, nl + 2))
			break; /* another name or resolution */
		uint64_t t = key_time(p, key.mv_size);
		if (to && t >= to)
			break;
		struct mfs_usage_row row;
		if (row_decode(&val, &row))
			continue; /* damaged: skipped */
		out = fn(arg, &row);
		if (out)
			break;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (out)
		return out;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : usage_errno(rc);
}
