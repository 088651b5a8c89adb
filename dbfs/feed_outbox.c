/*
 * The change feed's outbox: the events of a group-commit batch, written in
 * the batch's own transaction (dbfs/feed.h).
 *
 * Operations note their event (dbfs_feed_note, ops_*.c) while they run in a
 * group-commit batch; the batch's leader enqueues the batch's events into
 * the libmfsq queue "feeds" in the same LMDB transaction, just before it
 * commits (dbfs_feed_batch_end, commit.c): the events commit or vanish with
 * the changes. The feed's sequence numbers are dense, 1, 2, 3 ..., kept
 * in the store (an aborted transaction takes its numbers back with it):
 * in the sharded queue they are allocated here, in the transaction, and
 * carried in each message's prefix, and each process enqueues into its
 * own shard (feed_shards.c). Paths are resolved when the
 * operation runs, from the inodes' first names (names.c): the paths at
 * the time of the change even when a later operation of the same batch
 * renames a parent. Everything here runs on the batch's leader only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbfs/feed.h"
#include "dbfs/feed_private.h"
#include "dbfs/internal.h"
#include "dbfs/shared.h"
#include "queue/mfsq.h"

#include <sys/fsuid.h>

/* ---- the caller (fuse_io.c sets the thread's request header) ---- */

__thread struct dbfs_caller dbfs_tls_caller;
__thread int dbfs_tls_caller_set;

void dbfs_caller_current(struct dbfs_caller *c)
{
	if (dbfs_tls_caller_set) {
		*c = dbfs_tls_caller;
		return;
	}
	c->uid = (uint32_t)setfsuid((uid_t)-1);
	c->gid = (uint32_t)setfsgid((gid_t)-1);
	c->pid = 0;
}

/* ---- paths ---- */

/*
 * The path of inode `ino` into f->path, built from the end: *start gets
 * where it begins, *len its length (0: the inode has no name left). A
 * damaged chain (no row for a directory, a loop, a path longer than
 * PATH_BUF) gives an empty path rather than failing the change.
 */
static int path_of(struct dbfs *fs, MDB_txn *txn, uint64_t ino, size_t *start, size_t *len,
		   uint64_t *dir0)
{
	char *p = fs->feed->path;
	size_t at = PATH_BUF;
	int rc = 0;

	*start = at;
	*len = 0;
	*dir0 = 0;
	if (ino == DBFS_ROOT_INO) {
		p[--at] = '/';
		*start = at;
		*len = 1;
		return 0;
	}
	for (int depth = 0; ino != DBFS_ROOT_INO; depth++) {
		struct dbfs_inode in;
		const char *name;
		size_t nl;
		uint64_t dir;
		/* the first name, from the inode's own record (names.c) */
		rc = dbfs_inode_get(fs, txn, ino, &in);
		if (!rc)
			rc = dbfs_first_name(fs, txn, &in, &dir, &name, &nl);
		if (rc == MDB_NOTFOUND || rc == -ENOENT || rc == -EIO) {
			rc = 0;
			at = PATH_BUF; /* no name: unlinked (or damaged) */
			break;
		}
		if (rc)
			break;
		if (depth > 4096 || nl + 1 > at) {
			at = PATH_BUF;
			break;
		}
		at -= nl;
		memcpy(p + at, name, nl);
		p[--at] = '/';
		ino = dir;
		if (!depth)
			*dir0 = ino;
		if (ino == fs->feed->pc_dir && ino != DBFS_ROOT_INO) {
			/* the cached directory's path (path_add) ends the walk */
			if (fs->feed->pc_len > at) {
				at = PATH_BUF;
				break;
			}
			at -= fs->feed->pc_len;
			memcpy(p + at, fs->feed->pc_path, fs->feed->pc_len);
			break;
		}
	}
	if (at == PATH_BUF)
		*dir0 = 0;
	*start = at;
	*len = PATH_BUF - at;
	return rc;
}

static int arena_add(struct dbfs_feed *f, const char *s, size_t n, size_t *off)
{
	if (f->alen + n > f->acap) {
		size_t cap = f->acap ? f->acap : 4096;
		while (cap < f->alen + n)
			cap *= 2;
		char *a = realloc(f->arena, cap);
		if (!a)
			return ENOMEM;
		f->arena = a;
		f->acap = cap;
	}
	*off = f->alen;
	if (n)
		memcpy(f->arena + f->alen, s, n);
	f->alen += n;
	return 0;
}

/* The path of dir/name (name NULL: of dir itself) into the arena. */
static int path_add(struct dbfs *fs, MDB_txn *txn, uint64_t dir, const char *name, size_t nl,
		    size_t *off, size_t *len, uint64_t *dir0)
{
	struct dbfs_feed *f = fs->feed;
	size_t at, pl;
	uint64_t d0;
	int rc;
	if (name && dir == f->pc_dir && dir != DBFS_ROOT_INO) {
		/* a child of the cached directory (dir0 is asked only for an
		 * inode's own path, never with a name) */
		size_t o;
		if ((rc = arena_add(f, f->pc_path, f->pc_len, off)) ||
		    (rc = arena_add(f, "/", 1, &o)) || (rc = arena_add(f, name, nl, &o)))
			return rc;
		*len = f->pc_len + 1 + nl;
		return 0;
	}
	rc = path_of(fs, txn, dir, &at, &pl, &d0);
	if (dir0)
		*dir0 = d0;
	if (rc)
		return rc;
	if (name && dir != DBFS_ROOT_INO && pl && pl <= PATH_CACHE) {
		memcpy(f->pc_path, f->path + at, pl);
		f->pc_len = pl;
		f->pc_dir = dir;
	}
	if (name) {
		if (pl == 1) /* the root: "/" + name */
			pl = 0;
		if (pl == 0 && dir != DBFS_ROOT_INO) {
			/* the directory has no name: no path */
			*off = f->alen;
			*len = 0;
			return 0;
		}
	}
	if ((rc = arena_add(f, f->path + at, pl, off)))
		return rc;
	*len = pl;
	if (name) {
		size_t o;
		if ((rc = arena_add(f, "/", 1, &o)) || (rc = arena_add(f, name, nl, &o)))
			return rc;
		*len += 1 + nl;
	}
	return 0;
}

/* The inode's path is the one just put at `off` (`len` bytes), its
 * directory `dir`: keep it for the inode's next events (see pf_ino). */
static void inode_path_keep(struct dbfs_feed *f, uint64_t ino, uint64_t dir, size_t off,
			    size_t len)
{
	if (!len || len > PATH_CACHE) {
		f->pf_ino = 0;
		return;
	}
	memcpy(f->pf_path, f->arena + off, len);
	f->pf_len = len;
	f->pf_dir = dir;
	f->pf_ino = ino;
}

/* ---- the outbox (leader only) ---- */

void dbfs_feed_batch_begin(struct dbfs *fs, MDB_txn *txn)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return;
	uint64_t id = mdb_txn_id(txn);
	if (f->txn || id != f->pc_next) /* the last batch aborted, or another committed */
		f->pc_dir = f->pf_ino = 0;
	f->cur_id = id;
	f->txn = txn;
	f->npend = 0;
	f->alen = 0;
	f->tx_n = 0;
	dbfs_caller_current(&f->who);
}

void dbfs_feed_batch_op(struct dbfs *fs, const struct dbfs_caller *who)
{
	if (fs->feed)
		fs->feed->who = *who;
}

const struct dbfs_caller *dbfs_feed_caller(struct dbfs *fs)
{
	return fs->feed ? &fs->feed->who : NULL;
}

int dbfs_feed_note(struct dbfs *fs, MDB_txn *txn, const struct dbfs_ev_note *n)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	if (!f || txn != f->txn)
		return 0;
	if (n->op == DBFS_EV_WRITE) {
		/* coalesce with this inode's last event of the batch if a write */
		for (size_t i = f->npend; i-- > 0;) {
			struct dbfs_event *e = &f->pend[i].ev;
			if (e->ino != n->ino)
				continue;
			if (e->op != DBFS_EV_WRITE)
				break;
			uint64_t end = e->off + e->len, nend = n->off + n->len;
			if (n->off < e->off)
				e->off = n->off;
			e->len = (nend > end ? nend : end) - e->off;
			e->size = n->in->size;
			e->mode = n->in->mode;
			e->nlink = n->in->nlink;
			e->uid = f->who.uid;
			e->gid = f->who.gid;
			e->pid = f->who.pid;
			return 0;
		}
	}
	if (f->npend == f->cappend) {
		size_t cap = f->cappend ? f->cappend * 2 : 64;
		struct pend *p = realloc(f->pend, cap * sizeof(*p));
		if (!p)
			return ENOMEM;
		f->pend = p;
		f->cappend = cap;
	}
	struct pend *p = &f->pend[f->npend];
	struct dbfs_event *e = &p->ev;
	memset(p, 0, sizeof(*p));
	e->op = n->op;
	e->flags = n->flags;
	e->ino = n->ino;
	e->parent = n->parent;
	e->new_parent = n->new_parent;
	e->uid = f->who.uid;
	e->gid = f->who.gid;
	e->pid = f->who.pid;
	e->mode = n->in ? n->in->mode : 0;
	e->size = n->in ? n->in->size : 0;
	e->nlink = n->in ? n->in->nlink : 0;
	e->off = n->off;
	e->len = n->len;
	e->attr_mask = n->attr_mask;
	if (n->parent) {
		rc = path_add(fs, txn, n->parent, n->name, n->name_len, &p->poff, &e->path_len,
			      NULL);
		/* a new inode's one name: its path until a name row of it or
		 * of a directory changes */
		if (!rc && (n->op == DBFS_EV_CREATE || n->op == DBFS_EV_MKDIR ||
			    n->op == DBFS_EV_MKNOD || n->op == DBFS_EV_SYMLINK))
			inode_path_keep(f, n->ino, n->parent, p->poff, e->path_len);
	} else if (n->ino == f->pf_ino) { /* the inode's own path, kept */
		e->parent = f->pf_dir;
		e->path_len = f->pf_len;
		rc = arena_add(f, f->pf_path, f->pf_len, &p->poff);
	} else { /* the inode's own path: its directory is its first name's */
		rc = path_add(fs, txn, n->ino, NULL, 0, &p->poff, &e->path_len, &e->parent);
		if (!rc)
			inode_path_keep(f, n->ino, e->parent, p->poff, e->path_len);
	}
	if (!rc && n->new_name)
		rc = path_add(fs, txn, n->new_parent, n->new_name, n->new_name_len, &p->noff,
			      &e->new_path_len, NULL);
	if (!rc && n->xattr) {
		e->xattr_len = strlen(n->xattr);
		rc = arena_add(f, n->xattr, e->xattr_len, &p->xoff);
	}
	if (rc)
		return rc;
	f->npend++;
	return 0;
}

void dbfs_feed_paths_changed(struct dbfs *fs, uint64_t ino)
{
	struct dbfs_feed *f = fs->feed;
	if (f && !ino)
		f->pc_dir = f->pf_ino = 0;
	else if (f && ino == f->pf_ino)
		f->pf_ino = 0;
}


bool dbfs_feed_batch_wrote(struct dbfs *fs, uint64_t ino)
{
	struct dbfs_feed *f = fs->feed;
	for (size_t i = 0; f && i < f->npend; i++)
		if (f->pend[i].ev.ino == ino && dbfs_settle_is_write(&f->pend[i].ev))
			return true;
	return false;
}

/*
 * A shared store (dbfs/shared.h): the running totals of the other
 * processes' batches are in the store, not in f->meta. In shared mode every
 * batch writes them ('M'), so the stored ones are current; they are older
 * than this process's only after an exclusive process's crash (its totals
 * are written by its ticks and close), which this process's open counted
 * from the queue: the newer of the two is taken. The feed's next seq is
 * theirs.
 */
static int shared_meta(struct dbfs *fs, MDB_txn *txn, struct dbfs_feed_meta *m)
{
	struct dbfs_feed_meta st;
	uint64_t floor;
	int rc = feed_read_meta(fs, txn, &st, &floor);
	if (rc)
		return rc;
	if (st.next_seq > m->next_seq) {
		if (st.last_ns < m->last_ns)
			st.last_ns = m->last_ns;
		*m = st;
	}
	return 0;
}

int dbfs_feed_batch_end(struct dbfs *fs, MDB_txn *txn)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	f = fs->feed;
	if (!f || !f->npend || txn != f->txn)
		return 0;
	size_t n = f->npend, total = 0;
	uint64_t t = feed_now_ns();
	if (t < f->meta.last_ns)
		t = f->meta.last_ns; /* never back within a store */
	for (size_t i = 0; i < n; i++) {
		struct pend *p = &f->pend[i];
		p->ev.time_ns = t;
		p->ev.path = f->arena + p->poff;
		p->ev.new_path = p->ev.new_path_len ? f->arena + p->noff : NULL;
		p->ev.xattr = p->ev.xattr_len ? f->arena + p->xoff : NULL;
		total += dbfs_ev_rec_size(&p->ev);
		/* a write opens or prolongs its bursts (settle.c) */
		if ((rc = dbfs_settle_wrote(fs, txn, &p->ev, t)))
			return rc;
	}
	total += n * FEED_PREFIX;
	if (total > f->rcap) {
		unsigned char *r = realloc(f->rec, total);
		if (!r)
			return ENOMEM;
		f->rec = r;
		f->rcap = total;
	}
	if (n > f->capmsgs) {
		struct mfsq_msg_in *m = realloc(f->msgs, n * sizeof(*m));
		if (!m)
			return ENOMEM;
		f->msgs = m;
		uint64_t *s = realloc(f->seqs, n * sizeof(*s));
		if (!s)
			return ENOMEM;
		f->seqs = s;
		s = realloc(f->qseqs, n * sizeof(*s));
		if (!s)
			return ENOMEM;
		f->qseqs = s;
		f->capmsgs = n;
	}
	/* the running totals and the batch's first seq: read in the
	 * transaction when shared (every process's batch writes 'M') */
	struct dbfs_feed_meta m = f->meta;
	if (fs->shared && (rc = shared_meta(fs, txn, &m)))
		return rc;
	uint64_t writer = fs->shared ? fs->shared->writer : FEED_ENQUEUER;
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		f->seqs[i] = m.next_seq + i;
		memcpy(f->rec + at, &f->seqs[i], 8);
		memcpy(f->rec + at + 8, &writer, 8);
		size_t len = FEED_PREFIX + dbfs_ev_encode(&f->pend[i].ev, f->rec + at + FEED_PREFIX);
		f->msgs[i] = (struct mfsq_msg_in){
		    .data = f->rec + at, .len = len, .enqueuer = f->enqueuer};
		at += len;
	}
	rc = mfsq_enqueue_batch(f->q, txn, f->msgs, n, f->qseqs);
	if (rc == ENOSPC)
		return MDB_MAP_FULL; /* LMDB marked the transaction: grow, run again */
	if (rc)
		return dbfs_queue_err(rc);
	f->tx_q_block = f->q_block;
	if (feed_block_of(f->seqs[0]) != f->q_block) {
		if ((rc = feed_shard_mark(fs, txn, f->shard, f->seqs[0], f->qseqs[0])))
			return rc;
		f->tx_q_block = feed_block_of(f->seqs[0]);
	}
	/* block rows and the running totals, in the same transaction */
	for (size_t i = 0; i < n; i++) {
		uint64_t seq = f->seqs[i];
		if (seq % DBFS_FEED_BLOCK == 1) {
			unsigned char kb[9];
			MDB_val k, v;
			struct dbfs_feed_block b = {m.bytes, t};
			feed_block_key(kb, seq, &k);
			v.mv_size = sizeof(b);
			v.mv_data = &b;
			if ((rc = dbfs_put(txn, fs->db_feed, &k, &v, 0)))
				return rc;
		}
		m.bytes += f->msgs[i].len;
	}
	m.next_seq = f->seqs[n - 1] + 1;
	m.last_ns = t;
	if (fs->shared) {
		MDB_val v = {sizeof(m), &m};
		if ((rc = dbfs_put(txn, fs->db_feed, &feed_key_meta, &v, 0)))
			return rc;
	}
	/* the totals are written by dbfs_tick and close, not per batch (a
	 * page of another table per commit); an open after a crash counts
	 * what came after them from the queue itself (feed_recount_sharded) */
	f->txmeta = m;
	f->tx_n = n;
	f->tx_id = mdb_txn_id(txn);
	return 0;
}

/* last_seq only grows: in a shared store the notifier may have seen a
 * later event of another process before the leader publishes its own. */
static bool raise_last(struct dbfs_feed *f, uint64_t seq)
{
	uint64_t cur = atomic_load(&f->last_seq);
	while (seq > cur)
		if (atomic_compare_exchange_weak(&f->last_seq, &cur, seq))
			return true;
	return false;
}

void dbfs_feed_seen(struct dbfs *fs, uint64_t seq)
{
	struct dbfs_feed *f = fs->feed;
	if (!f || !raise_last(f, seq))
		return;
	pthread_mutex_lock(&f->lock);
	f->gen++;
	pthread_cond_broadcast(&f->cond);
	void (*cb)(void *, uint64_t) = f->cb;
	void *arg = f->cb_arg;
	pthread_mutex_unlock(&f->lock);
	if (cb)
		cb(arg, seq);
}

void dbfs_feed_batch_committed(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	if (f)
		f->pc_next = f->cur_id + 1;
	if (!f || !f->npend || !f->tx_n) {
		if (f)
			f->txn = NULL;
		return;
	}
	f->meta = f->txmeta;
	f->q_block = f->tx_q_block;
	f->txn = NULL;
	mfsq_txn_committed(f->q, f->tx_id); /* the next batch need not read the shard back */
	raise_last(f, f->meta.next_seq - 1);
	atomic_fetch_add(&f->enqueued, f->tx_n);
	uint64_t data = 0; /* a shared store's closes wait for its last data event */
	for (size_t i = 0; fs->shared && i < f->npend; i++)
		if (dbfs_shared_close_waits(&f->pend[i].ev))
			data = f->seqs[i];
	f->tx_n = 0;
	f->npend = 0;
	dbfs_shared_committed(fs, data); /* the other processes' notifiers */
	pthread_mutex_lock(&f->lock);
	f->gen++;
	f->pub = f->meta;
	pthread_cond_broadcast(&f->cond);
	void (*cb)(void *, uint64_t) = f->cb;
	void *arg = f->cb_arg;
	pthread_mutex_unlock(&f->lock);
	if (cb)
		cb(arg, f->meta.next_seq - 1);
}
