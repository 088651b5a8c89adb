/*
 * The pages a snapshot's tree gained since an older one, from LMDB's free
 * lists alone (a listed durable point names them, durable.c).
 *
 * Take `from` (transaction T, pinned: a read transaction has been open on
 * it since before any later commit) and `to` (T', newer). A page of T''s
 * tree that T's tree does not use was taken by a commit after T, and LMDB
 * takes pages from two places only: the free list's records older than
 * the oldest reader (with T pinned: keys < T; as T saw them, since records
 * are only added under the freeing commit's own, larger, id), and the end
 * of the file (pages T.last_pg+1 on). So
 *
 *   gained(T -> T') = (F_T[key < T] U (T.last_pg, T'.last_pg]) \ F_T'
 *
 * where F_X is the set of pages that X's free list names: a page taken
 * after T is in T''s tree unless T''s free list names it again (freed
 * again, or taken into memory and put back unused). Subtracting F_T' keeps
 * out the pages written after T and freed before T': they are no page of
 * T', so T''s pin does not keep them, and a record listing them would fail
 * its check once they are reused. A record that is in both free lists
 * with the same bytes changes neither side and is skipped (by its address
 * when it sits in the same page in both snapshots): the cost follows the
 * free-list records written or consumed between T and T', not the store's
 * size. (LMDB reuses the oldest records first and rewrites the ones it
 * took part of, so those are the low keys and the new ones.) A leaf page
 * both free lists share is skipped whole (shared_leaf_last): the walk
 * costs a step per changed record and per shared leaf, not per record.
 * LMDB 0.9 writes the whole rest of a record back at each commit that took
 * a page from it, so on a store whose free list is large a changed record
 * may be, too: past DBFS_GAINED_BUDGET page numbers compared, the point
 * gives up listing (E2BIG: two flushes, as LMDB's own commits pay the same
 * walk of that record anyway). Likewise past DBFS_GAINED_STEPS records
 * stepped over and leaves skipped: a free list of thousands of leaves (a
 * store filled fast, whose pinned windows left gigabytes free) would cost
 * more to walk than the flush it saves. (A walk of the two trees' branch
 * pages, skipping every subtree they share, would cost what changed
 * only; LMDB's API has no such walk.)
 *
 * FREE_DBI is database 0: key a txnid (size_t), value an MDB_IDL (the
 * count, then that many page numbers, size_t each).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbfs/internal.h"

/* The page numbers of a free-list record: *n of them from the returned
 * address, read with id_at (LMDB aligns a node's data to 2 bytes only). */
static const void *idl_of(const MDB_val *v, size_t *n)
{
	size_t room = v->mv_size / sizeof(size_t), cnt = 0;
	if (room)
		memcpy(&cnt, v->mv_data, sizeof(cnt));
	*n = room && cnt <= room - 1 ? cnt : room ? room - 1 : 0; /* never beyond the record */
	return (const char *)v->mv_data + sizeof(size_t);
}

/* The i-th page number of a list idl_of returned. */
static inline size_t id_at(const void *ids, size_t i)
{
	size_t id;
	memcpy(&id, (const char *)ids + i * sizeof(id), sizeof(id));
	return id;
}

static int grow(struct dbfs_ids *a, size_t more)
{
	if (a->n + more <= a->cap)
		return 0;
	size_t cap = a->cap ? a->cap : 1024;
	while (cap < a->n + more)
		cap *= 2;
	uint64_t *p = realloc(a->v, cap * sizeof(*p));
	if (!p)
		return ENOMEM;
	a->v = p;
	a->cap = cap;
	return 0;
}

/* Append n page numbers to a. */
static int add_ids(struct dbfs_ids *a, const void *ids, size_t n)
{
	if (grow(a, n))
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		a->v[a->n++] = id_at(ids, i);
	return 0;
}

/* Append one page number to a. */
static int add_id(struct dbfs_ids *a, size_t id)
{
	if (grow(a, 1))
		return ENOMEM;
	a->v[a->n++] = id;
	return 0;
}

static bool descending(const void *ids, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (id_at(ids, i) >= id_at(ids, i - 1))
			return false;
	return true;
}

/*
 * One key's record in both free lists, changed: the pages only the older
 * names go to cand (if the key is below T), those only the newer names to
 * sub. LMDB 0.9 writes back the whole rest of a record it took pages from
 * at every commit, so a record can hold most of the free pages of the
 * store while a point changed a few of them: a merge of the two sorted
 * lists (LMDB keeps them in descending order; anything else: both whole)
 * keeps cand and sub to what changed. A page in only one of the two is
 * in no other record of that snapshot, so the diff per key is the diff of
 * the whole free lists.
 */
static int diff_record(struct dbfs_gained *g, const MDB_val *old, const MDB_val *new, bool take_old)
{
	size_t na, nb;
	const void *a = idl_of(old, &na), *b = idl_of(new, &nb);
	if ((g->work += na + nb) > DBFS_GAINED_BUDGET)
		return E2BIG;
	if (!descending(a, na) || !descending(b, nb))
		return (take_old ? add_ids(&g->cand, a, na) : 0) ?: add_ids(&g->sub, b, nb);
	size_t i = 0, j = 0;
	while (i < na || j < nb) {
		size_t ai = i < na ? id_at(a, i) : 0, bj = j < nb ? id_at(b, j) : 0;
		if (j == nb || (i < na && ai > bj)) {
			if (take_old && add_id(&g->cand, ai))
				return ENOMEM;
			i++;
		} else if (i == na || bj > ai) {
			if (add_id(&g->sub, bj))
				return ENOMEM;
			j++;
		} else {
			i++;
			j++;
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sort a and drop repeats. */
static void sort_ids(struct dbfs_ids *a)
{
	if (a->n < 2)
		return;
	qsort(a->v, a->n, sizeof(*a->v), cmp_u64);
	size_t k = 1;
	for (size_t i = 1; i < a->n; i++)
		if (a->v[i] != a->v[k - 1])
			a->v[k++] = a->v[i];
	a->n = k;
}

static uint64_t key_of(const MDB_val *k)
{
	size_t id = 0;
	if (k->mv_size == sizeof(id))
		memcpy(&id, k->mv_data, sizeof(id));
	return id;
}

/*
 * LMDB 0.9's page layout (mdb.c): a 16-byte header (mp_pgno u64, mp_pad
 * u16, mp_flags u16, mp_lower u16, mp_upper u16), then the u16 offsets of
 * its nodes up to mp_lower; a node is lo u16, hi u16, flags u16, ksize u16,
 * the key, then the value (or, F_BIGDATA, the number of its overflow page).
 */
#define LMDB_P_LEAF    0x02u
#define LMDB_P_DIRTY   0x10u
#define LMDB_F_BIGDATA 0x01u

/* A record whose value lies at the same address in both snapshots sits in
 * a leaf page that both trees use, and a page that a pinned tree uses is
 * never written again: every record of that page is the same in both. The
 * largest key of that page, or 0 when the page does not read as the leaf
 * holding this record (then the caller steps record by record). */
static uint64_t shared_leaf_last(const void *v, uint64_t key, size_t psize)
{
	if (psize != (size_t)getpagesize())
		return 0; /* the map aligns only OS pages */
	const unsigned char *pg = (const unsigned char *)((uintptr_t)v & ~(uintptr_t)(psize - 1));
	uint16_t flags, lower, upper;
	memcpy(&flags, pg + 10, 2);
	memcpy(&lower, pg + 12, 2);
	memcpy(&upper, pg + 14, 2);
	if ((flags & ~LMDB_P_DIRTY) != LMDB_P_LEAF || lower < 16 || lower > upper || upper > psize)
		return 0;
	bool found = false;
	uint64_t prev = 0;
	for (unsigned i = 0; i < (lower - 16u) / 2; i++) {
		uint16_t off, nflags, ksize;
		memcpy(&off, pg + 16 + 2 * i, 2);
		if (off < upper || (size_t)off + 16 > psize)
			return 0;
		const unsigned char *node = pg + off;
		memcpy(&nflags, node + 4, 2);
		memcpy(&ksize, node + 6, 2);
		uint64_t k;
		memcpy(&k, node + 8, 8);
		if (ksize != 8 || (i && k <= prev))
			return 0;
		prev = k;
		found |=
		    k == key && !(nflags & LMDB_F_BIGDATA) && node + 16 == (const unsigned char *)v;
	}
	return found ? prev : 0;
}

int dbfs_gained_pages(struct dbfs_gained *g, MDB_txn *from, uint64_t from_txnid, uint64_t from_last,
		      MDB_txn *to, uint64_t to_last, size_t psize)
{
	int rc;
	g->cand.n = g->sub.n = g->out.n = 0;
	g->work = 0;
	size_t steps = 0;
	for (int i = 0; i < 2; i++) {
		MDB_txn *t = i ? to : from;
		rc = g->cur[i] ? mdb_cursor_renew(t, g->cur[i]) : mdb_cursor_open(t, 0, &g->cur[i]);
		if (rc)
			return rc;
	}
	MDB_val kf, df, kt, dt;
	int rf = mdb_cursor_get(g->cur[0], &kf, &df, MDB_FIRST);
	int rt = mdb_cursor_get(g->cur[1], &kt, &dt, MDB_FIRST);
	while (!rf || !rt) {
		uint64_t a = rf ? UINT64_MAX : key_of(&kf), b = rt ? UINT64_MAX : key_of(&kt);
		bool take_f = a <= b, take_t = b <= a;
		if (take_f && take_t &&
		    (df.mv_data == dt.mv_data ||
		     (df.mv_size == dt.mv_size && !memcmp(df.mv_data, dt.mv_data, df.mv_size))))
			take_f = take_t = false; /* the same record in both: skip */
		/* F_T's records of T and later: pages no commit may take while
		 * T is pinned. */
		size_t n;
		const void *ids;
		if (take_f && take_t) {
			if ((rc = diff_record(g, &df, &dt, a < from_txnid)))
				return rc;
		} else if (take_f && a < from_txnid) {
			ids = idl_of(&df, &n);
			if ((g->work += n) > DBFS_GAINED_BUDGET)
				return E2BIG;
			if ((rc = add_ids(&g->cand, ids, n)))
				return rc;
		} else if (take_t) {
			ids = idl_of(&dt, &n);
			if ((g->work += n) > DBFS_GAINED_BUDGET)
				return E2BIG;
			if ((rc = add_ids(&g->sub, ids, n)))
				return rc;
		}
		uint64_t last =
		    a == b && df.mv_data == dt.mv_data ? shared_leaf_last(df.mv_data, a, psize) : 0;
		if (last >= a && last < UINT64_MAX) {
			/* the rest of a leaf both trees share: skip it */
			size_t next = (size_t)last + 1;
			MDB_val k = {sizeof(next), &next};
			kf = kt = k;
			rf = mdb_cursor_get(g->cur[0], &kf, &df, MDB_SET_RANGE);
			rt = mdb_cursor_get(g->cur[1], &kt, &dt, MDB_SET_RANGE);
			g->skipped++;
			if (++steps > DBFS_GAINED_STEPS)
				return E2BIG;
			continue;
		}
		if (a <= b)
			rf = mdb_cursor_get(g->cur[0], &kf, &df, MDB_NEXT);
		if (b <= a)
			rt = mdb_cursor_get(g->cur[1], &kt, &dt, MDB_NEXT);
		g->stepped++;
		if (++steps > DBFS_GAINED_STEPS)
			return E2BIG;
	}
	if (rf != MDB_NOTFOUND)
		return rf;
	if (rt != MDB_NOTFOUND)
		return rt;
	sort_ids(&g->cand);
	sort_ids(&g->sub);
	/* cand (all <= T.last_pg) then the file's new end, less sub. */
	size_t j = 0;
	uint64_t next_new = from_last + 1;
	for (size_t i = 0;; i++) {
		uint64_t p;
		if (i < g->cand.n)
			p = g->cand.v[i];
		else if (next_new <= to_last)
			p = next_new++;
		else
			break;
		while (j < g->sub.n && g->sub.v[j] < p)
			j++;
		if (j < g->sub.n && g->sub.v[j] == p)
			continue;
		if (p > to_last || (g->out.n && p <= g->out.v[g->out.n - 1]))
			continue; /* no page of T' (or a repeat) */
		if (g->out.n == g->out.cap)
			return E2BIG;
		g->out.v[g->out.n++] = p;
	}
	return 0;
}

void dbfs_gained_free(struct dbfs_gained *g)
{
	for (int i = 0; i < 2; i++)
		if (g->cur[i])
			mdb_cursor_close(g->cur[i]);
	free(g->cand.v);
	free(g->sub.v);
	free(g->out.v);
	memset(g, 0, sizeof(*g));
}
