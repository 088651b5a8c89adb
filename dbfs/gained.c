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
 * its check once they are reused.
 *
 * Only what differs is read. Both snapshots are pinned, so a page number
 * that both free-list trees reach is the same page in both, and so is the
 * subtree under it. From the two roots (in the snapshots' meta pages),
 * level by level, the page numbers both trees reach are dropped and the
 * rest expanded, down to the leaves that differ (a subtree that moved a
 * level, when a tree grew or shrank one, is met again among the leaves);
 * only their records are compared, by key: a record in both with the same
 * bytes changes neither side, one that differs goes through diff_record,
 * one only in T (consumed) goes to the candidates when its key is below
 * T, one only in T' to the pages subtracted. The cost follows the pages of
 * the free list written between T and T' (the paths to the records
 * written or consumed), not the store's size. The pages are read from the
 * map as LMDB 0.9 lays them out; a page that does not read so makes the
 * point give up listing. LMDB 0.9 writes the whole rest of a record back
 * at each commit that took a page from it, so on a store whose free list
 * is large a changed record may be, too: past DBFS_GAINED_BUDGET page
 * numbers compared, or DBFS_GAINED_STEPS pages of the free lists read, the
 * point gives up listing (E2BIG: two flushes).
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

/*
 * LMDB 0.9's page layout (mdb.c): a 16-byte header (mp_pgno u64, mp_pad
 * u16, mp_flags u16, mp_lower u16, mp_upper u16), then the u16 offsets of
 * its nodes up to mp_lower; a node is lo u16, hi u16, flags u16, ksize u16,
 * then the key; in a branch page lo | hi << 16 | flags << 32 is the child's
 * page number, in a leaf lo | hi << 16 is the value's size and the value
 * follows the key (F_BIGDATA: the number of the overflow pages holding it,
 * whose data begins after their 16-byte header).
 */
#define LMDB_P_BRANCH  0x01u
#define LMDB_P_LEAF    0x02u
#define LMDB_P_OVERFLOW 0x04u
#define LMDB_P_DIRTY   0x10u
#define LMDB_F_BIGDATA 0x01u
#define LMDB_PAGEHDR   16u
#define LMDB_NODEHDR   8u

/* The map of one snapshot: its pages are 2..last. */
struct snap {
	const unsigned char *base;
	size_t psize;
	uint64_t last;
};

/* Page pgno of s if it reads as a branch or leaf page of sane layout
 * (anything else: NULL, and the caller gives up listing); its kind and
 * number of nodes. */
static const unsigned char *page_at(const struct snap *s, uint64_t pgno, unsigned *kind,
				    unsigned *nodes)
{
	if (pgno < 2 || pgno > s->last)
		return NULL;
	const unsigned char *pg = s->base + pgno * s->psize;
	uint64_t no;
	uint16_t flags, lower, upper;
	memcpy(&no, pg, 8);
	memcpy(&flags, pg + 10, 2);
	memcpy(&lower, pg + 12, 2);
	memcpy(&upper, pg + 14, 2);
	flags &= (uint16_t)~LMDB_P_DIRTY;
	if (no != pgno || (flags != LMDB_P_BRANCH && flags != LMDB_P_LEAF) ||
	    lower < LMDB_PAGEHDR || lower > upper || upper > s->psize)
		return NULL;
	*kind = flags;
	*nodes = (lower - LMDB_PAGEHDR) / 2u;
	return pg;
}

/* Node i of page pg (NULL if it leaves the page); its key size. */
static const unsigned char *node_at(const struct snap *s, const unsigned char *pg, unsigned i,
				    uint16_t *ksize)
{
	uint16_t off;
	memcpy(&off, pg + LMDB_PAGEHDR + 2 * i, 2);
	if ((size_t)off + LMDB_NODEHDR > s->psize)
		return NULL;
	memcpy(ksize, pg + off + 6, 2);
	if ((size_t)off + LMDB_NODEHDR + *ksize > s->psize)
		return NULL;
	return pg + off;
}

static int add_rec(struct dbfs_recs *r, uint64_t key, const void *v, size_t size)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		struct dbfs_rec *p = realloc(r->v, cap * sizeof(*p));
		if (!p)
			return ENOMEM;
		r->v = p;
		r->cap = cap;
	}
	r->v[r->n++] = (struct dbfs_rec){key, v, size};
	return 0;
}

/* The records of leaf pg into r (as MDB_val would give them). */
static int leaf_records(const struct snap *s, const unsigned char *pg, unsigned nodes,
			struct dbfs_recs *r)
{
	for (unsigned i = 0; i < nodes; i++) {
		uint16_t ksize, lo, hi, flags;
		const unsigned char *node = node_at(s, pg, i, &ksize);
		if (!node || ksize != sizeof(uint64_t))
			return E2BIG;
		memcpy(&lo, node, 2);
		memcpy(&hi, node + 2, 2);
		memcpy(&flags, node + 4, 2);
		size_t size = lo | (size_t)hi << 16;
		uint64_t key;
		memcpy(&key, node + LMDB_NODEHDR, sizeof(key));
		const unsigned char *v = node + LMDB_NODEHDR + ksize;
		if (flags & LMDB_F_BIGDATA) {
			uint64_t ov;
			if ((size_t)(v - pg) + sizeof(ov) > s->psize)
				return E2BIG;
			memcpy(&ov, v, sizeof(ov));
			if (ov < 2 || ov > s->last ||
			    size > (s->last + 1 - ov) * s->psize - LMDB_PAGEHDR)
				return E2BIG;
			const unsigned char *op = s->base + ov * s->psize;
			uint64_t no;
			uint16_t of;
			memcpy(&no, op, 8);
			memcpy(&of, op + 10, 2);
			if (no != ov || !(of & LMDB_P_OVERFLOW))
				return E2BIG;
			v = op + LMDB_PAGEHDR;
		} else if (flags || (size_t)(v - pg) + size > s->psize) {
			return E2BIG; /* not a plain record of FREE_DBI */
		}
		if (add_rec(r, key, v, size))
			return ENOMEM;
	}
	return 0;
}

/* Drop from a and b (sorted, no repeats) the page numbers both hold: the
 * same page in two pinned snapshots, so the same subtree. */
static size_t drop_common(struct dbfs_ids *a, struct dbfs_ids *b)
{
	size_t i = 0, j = 0, ka = 0, kb = 0, common = 0;
	while (i < a->n || j < b->n) {
		if (j == b->n || (i < a->n && a->v[i] < b->v[j])) {
			a->v[ka++] = a->v[i++];
		} else if (i == a->n || b->v[j] < a->v[i]) {
			b->v[kb++] = b->v[j++];
		} else {
			i++;
			j++;
			common++;
		}
	}
	a->n = ka;
	b->n = kb;
	return common;
}

/* Replace the branch pages of front by their children; leaves go to
 * leaves. *pages counts the pages read. */
static int expand(const struct snap *s, struct dbfs_ids *front, struct dbfs_ids *next,
		  struct dbfs_ids *leaves, size_t *pages)
{
	next->n = 0;
	for (size_t i = 0; i < front->n; i++) {
		unsigned kind, nodes;
		const unsigned char *pg = page_at(s, front->v[i], &kind, &nodes);
		if (!pg || ++*pages > DBFS_GAINED_STEPS)
			return E2BIG;
		if (kind == LMDB_P_LEAF) {
			if (add_id(leaves, front->v[i]))
				return ENOMEM;
			continue;
		}
		if (grow(next, nodes))
			return ENOMEM;
		for (unsigned k = 0; k < nodes; k++) {
			uint16_t ksize, lo, hi, fl;
			const unsigned char *node = node_at(s, pg, k, &ksize);
			if (!node)
				return E2BIG;
			memcpy(&lo, node, 2);
			memcpy(&hi, node + 2, 2);
			memcpy(&fl, node + 4, 2);
			next->v[next->n++] = lo | (uint64_t)hi << 16 | (uint64_t)fl << 32;
		}
	}
	struct dbfs_ids t = *front;
	*front = *next;
	*next = t;
	return 0;
}

static int cmp_rec(const void *a, const void *b)
{
	uint64_t x = ((const struct dbfs_rec *)a)->key, y = ((const struct dbfs_rec *)b)->key;
	return x < y ? -1 : x > y;
}

/* The leaves of both free lists that the two snapshots do not share, and
 * their records into g->rec[0] (from) and g->rec[1] (to), each sorted. */
static int changed_records(struct dbfs_gained *g, const struct snap *s, const uint64_t root[2])
{
	size_t pages = 0;
	for (int i = 0; i < 2; i++) {
		g->front[i].n = g->leaves[i].n = g->rec[i].n = 0;
		if (root[i] != UINT64_MAX && add_id(&g->front[i], root[i]))
			return ENOMEM;
	}
	while (g->front[0].n || g->front[1].n) {
		sort_ids(&g->front[0]);
		sort_ids(&g->front[1]);
		g->skipped += drop_common(&g->front[0], &g->front[1]);
		for (int i = 0; i < 2; i++) {
			int rc = expand(&s[i], &g->front[i], &g->next, &g->leaves[i], &pages);
			if (rc)
				return rc;
		}
	}
	/* a subtree that moved a level (the tree grew or shrank a level) is
	 * met again at its leaves */
	sort_ids(&g->leaves[0]);
	sort_ids(&g->leaves[1]);
	g->skipped += drop_common(&g->leaves[0], &g->leaves[1]);
	for (int i = 0; i < 2; i++) {
		for (size_t k = 0; k < g->leaves[i].n; k++) {
			unsigned kind, nodes;
			const unsigned char *pg = page_at(&s[i], g->leaves[i].v[k], &kind, &nodes);
			int rc = pg ? leaf_records(&s[i], pg, nodes, &g->rec[i]) : E2BIG;
			if (rc)
				return rc;
		}
		if (g->rec[i].n > 1)
			qsort(g->rec[i].v, g->rec[i].n, sizeof(*g->rec[i].v), cmp_rec);
		g->stepped += g->leaves[i].n;
	}
	return 0;
}

/* The changed records, by key: the pages only the older names (keys
 * below T) to cand, those only the newer names to sub. */
static int merge_records(struct dbfs_gained *g, uint64_t from_txnid)
{
	int rc;
	const struct dbfs_recs *ra = &g->rec[0], *rb = &g->rec[1];
	size_t i = 0, j = 0;
	while (i < ra->n || j < rb->n) {
		uint64_t a = i < ra->n ? ra->v[i].key : UINT64_MAX;
		uint64_t b = j < rb->n ? rb->v[j].key : UINT64_MAX;
		MDB_val df = {0, NULL}, dt = {0, NULL};
		if (a <= b)
			df = (MDB_val){ra->v[i].size, (void *)ra->v[i].v};
		if (b <= a)
			dt = (MDB_val){rb->v[j].size, (void *)rb->v[j].v};
		size_t n;
		const void *ids;
		if (a == b) {
			/* F_T's records of T and later: pages no commit may take
			 * while T is pinned. */
			if ((df.mv_size != dt.mv_size || memcmp(df.mv_data, dt.mv_data, df.mv_size)) &&
			    (rc = diff_record(g, &df, &dt, a < from_txnid)))
				return rc;
		} else if (a < b && a < from_txnid) {
			ids = idl_of(&df, &n);
			if ((g->work += n) > DBFS_GAINED_BUDGET)
				return E2BIG;
			if ((rc = add_ids(&g->cand, ids, n)))
				return rc;
		} else if (b < a) {
			ids = idl_of(&dt, &n);
			if ((g->work += n) > DBFS_GAINED_BUDGET)
				return E2BIG;
			if ((rc = add_ids(&g->sub, ids, n)))
				return rc;
		}
		if (a <= b)
			i++;
		if (b <= a)
			j++;
	}
	return 0;
}

int dbfs_gained_pages(struct dbfs_gained *g, const void *map, uint64_t map_size,
		      uint64_t from_txnid, const unsigned char *from_meta,
		      const unsigned char *to_meta, size_t psize)
{
	int rc;
	g->cand.n = g->sub.n = g->out.n = 0;
	g->work = 0;
	uint64_t from_last, to_last, root[2];
	memcpy(&from_last, from_meta + DBFS_LMDB_META_LASTPG, 8);
	memcpy(&to_last, to_meta + DBFS_LMDB_META_LASTPG, 8);
	memcpy(&root[0], from_meta + DBFS_LMDB_META_FREE_ROOT, 8);
	memcpy(&root[1], to_meta + DBFS_LMDB_META_FREE_ROOT, 8);
	uint64_t map_pages = map_size / psize;
	if (!map || psize != (size_t)getpagesize() || from_last >= map_pages ||
	    to_last >= map_pages)
		return E2BIG; /* where the map is, not known */
	const struct snap s[2] = {{map, psize, from_last}, {map, psize, to_last}};
	if ((rc = changed_records(g, s, root)))
		return rc;
	if ((rc = merge_records(g, from_txnid)))
		return rc;
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

/* Work arrays over this many bytes are let go after a point: one large
 * point would otherwise keep its arrays (MiBs) for the store's lifetime. */
#define KEEP_BYTES (256u << 10)

static void trim_ids(struct dbfs_ids *a)
{
	if (a->cap * sizeof(*a->v) > KEEP_BYTES) {
		free(a->v);
		memset(a, 0, sizeof(*a));
	}
}

void dbfs_gained_trim(struct dbfs_gained *g)
{
	for (int i = 0; i < 2; i++) {
		trim_ids(&g->front[i]);
		trim_ids(&g->leaves[i]);
		if (g->rec[i].cap * sizeof(*g->rec[i].v) > KEEP_BYTES) {
			free(g->rec[i].v);
			memset(&g->rec[i], 0, sizeof(g->rec[i]));
		}
	}
	trim_ids(&g->next);
	trim_ids(&g->cand);
	trim_ids(&g->sub);
}

void dbfs_gained_free(struct dbfs_gained *g)
{
	for (int i = 0; i < 2; i++) {
		free(g->front[i].v);
		free(g->leaves[i].v);
		free(g->rec[i].v);
	}
	free(g->next.v);
	free(g->cand.v);
	free(g->sub.v);
	free(g->out.v);
	memset(g, 0, sizeof(*g));
}
