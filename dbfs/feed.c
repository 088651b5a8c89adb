/*
 * The change feed of a DBFS (dbfs/feed.h): the outbox and its readers.
 *
 * Outbox. Operations note their event (dbfs_feed_note, ops.c) while they
 * run in a group-commit batch; the batch's leader enqueues the batch's
 * events into the libmfsq queue "feed" in the same LMDB transaction, just
 * before it commits (dbfs_feed_batch_end, commit.c): the events commit or
 * vanish with the changes. The queue has one shard and one enqueuer, so
 * its sequence numbers are the feed's: dense, 1, 2, 3 ..., kept in the
 * store (an aborted transaction takes its numbers back with it). Paths are
 * resolved when the operation runs, from the ilink table (format.h): they
 * are the paths at the time of the change even when a later operation of
 * the same batch renames a parent.
 *
 * Retention. The table "feed" keeps one row per DBFS_FEED_BLOCK events
 * (the running byte count before the block and the block's first commit
 * time) and the running totals ('M'). dbfs_tick computes the retention
 * floor from the limits (events, bytes, age) and writes it to the queue
 * (mfsq_retain_floor), which then drops whole subshards below it whatever
 * the subscribers hold, and keeps the rest for replays even with no
 * subscriber. A reader meeting a message below the floor skips it and
 * reports the gap.
 *
 * Readers wrap libmfsq subscribers. Every queue call that may write runs
 * under the map lock held shared (the map must not grow under it) and,
 * when the queue's own transaction found the map full (ENOSPC), grows the
 * map and runs again. Acknowledgements are written in dbfs_write
 * transactions (mfsq_ack with the caller's transaction), so that they go
 * through the group commit like every other change.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <time.h>

#include "dbfs/feed.h"
#include "dbfs/internal.h"
#include "queue/mfsq.h"

#define FEED_SHARD    0
#define FEED_ENQUEUER 1
#define PATH_BUF      (64u << 10) /* longest path an event carries */
#define READ_MAX      64	  /* messages one read dequeues */
#define PATH_CACHE    512	  /* longest directory path the leader keeps */
#define REC_OVERHEAD                                                                               \
	64 /* store bytes per record beyond its payload (key,                                      \
	      header, node): for the space estimate */

struct pend {
	struct dbfs_event ev;
	size_t poff, noff, xoff; /* strings in the arena */
};

struct dbfs_feed_reader {
	struct dbfs *fs;
	mfsq_sub *s;
	char name[DBFS_FEED_SUB_MAX + 1]; /* "" : ephemeral */
	uint64_t next;			  /* the next seq this reader expects */
	uint64_t min_ns;		  /* DBFS_FEED_TIME: skip events before it (0: none) */
	uint64_t delivered;		  /* the last seq handed out (0: none) */
	uint64_t acked;			  /* next seq not acknowledged (durable) */
	uint64_t gaps, lost;		  /* since open, not yet written to its row */
	struct mfsq_msg msg[READ_MAX];
	size_t nmsg, imsg; /* dequeued, not yet handed out: [imsg, nmsg) */
	struct dbfs_feed_reader *next_r;
};

struct dbfs_feed {
	mfsq_queue *q;
	/* the batch (leader only) */
	MDB_txn *txn;
	struct dbfs_caller who;
	struct pend *pend;
	size_t npend, cappend;
	char *arena;
	size_t alen, acap;
	unsigned char *rec;
	size_t rcap;
	struct mfsq_msg_in *msgs;
	uint64_t *seqs;
	size_t capmsgs;
	char path[PATH_BUF];
	/* The path of the directory the last event named a child of (most
	 * events of a burst are in one directory): it saves walking the name
	 * rows up to the root, for its children's names and for the walk up
	 * from any inode below it. Valid in the transaction that computed it and,
	 * once that one committed, in the very next (pc_next: nobody, in any
	 * process, committed in between); dropped at once when any
	 * directory's name row changes (dbfs_feed_paths_changed) and when a
	 * batch aborted. Leader only. */
	uint64_t pc_dir; /* 0: none */
	size_t pc_len;
	uint64_t cur_id, pc_next; /* this batch's txn id; the id the cache is valid in */
	char pc_path[PATH_CACHE];
	/* Likewise the path of the inode the last event named (a file's
	 * create, then its writes and setattrs in commits of their own: tar
	 * -x), and the directory of that path; dropped also when that inode's
	 * own name rows change. */
	uint64_t pf_ino, pf_dir; /* 0: none */
	size_t pf_len;
	char pf_path[PATH_CACHE];
	struct dbfs_feed_meta meta, txmeta; /* committed / in the batch */
	size_t tx_n;
	uint64_t tx_id; /* the batch's mdb_txn_id, for mfsq_txn_committed */
	/* published */
	_Atomic uint64_t last_seq, floor;
	_Atomic uint64_t enqueued, trimmed, gaps, subs_expired;
	uint64_t ticked_seq;	   /* next_seq when the queue's maintenance last ran */
	uint64_t saved_seq;	   /* next_seq of the last 'M' written (tick, close) */
	struct dbfs_feed_meta pub; /* f->meta as of the last commit, under lock */
	/* waiters, callback, open readers, limits */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t gen;
	void (*cb)(void *arg, uint64_t last_seq);
	void *cb_arg;
	struct dbfs_feed_reader *readers;
	struct dbfs_feed_limits lim;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

/* ---- queue calls from outside a write: under the map lock, growing it ---- */

#define QCALL DBFS_QCALL /* internal.h */

/* A libmfsq result as a public errno. */
static int q_errno(int rc)
{
	return rc ? dbfs_errno(dbfs_queue_err(rc > 0 ? rc : EIO)) : 0;
}

/* The same for a queue call that wrote in its own transaction: a failed
 * write of the store fails the store, as a failed commit does (health.c). */
static int q_write_errno(struct dbfs *fs, int rc)
{
	dbfs_health_check(fs, rc, "a write of the change feed");
	return q_errno(rc);
}

/* ---- the feed table ---- */

static MDB_val key_meta = {1, (void *)"M"};
static MDB_val key_floor = {1, (void *)"F"};

static void block_key(unsigned char k[9], uint64_t seq, MDB_val *key)
{
	k[0] = 'I';
	dbfs_put_be64(k + 1, seq);
	key->mv_size = 9;
	key->mv_data = k;
}

static uint64_t block_of(uint64_t seq)
{
	return seq ? (seq - 1) / DBFS_FEED_BLOCK * DBFS_FEED_BLOCK + 1 : 1;
}

static int read_meta(struct dbfs *fs, MDB_txn *txn, struct dbfs_feed_meta *m, uint64_t *floor)
{
	MDB_val v;
	int rc = dbfs_get(txn, fs->db_feed, &key_meta, &v);
	memset(m, 0, sizeof(*m));
	m->next_seq = 1;
	if (rc == 0 && v.mv_size == sizeof(*m))
		memcpy(m, v.mv_data, sizeof(*m));
	else if (rc == 0)
		return -EIO;
	else if (rc != MDB_NOTFOUND)
		return rc;
	*floor = 1;
	rc = dbfs_get(txn, fs->db_feed, &key_floor, &v);
	if (rc == 0 && v.mv_size == 8)
		memcpy(floor, v.mv_data, 8);
	else if (rc == 0)
		return -EIO;
	else if (rc != MDB_NOTFOUND)
		return rc;
	return 0;
}

/* The totals as of the last commit, and the floor. */
static void pub_meta(struct dbfs_feed *f, struct dbfs_feed_meta *m, uint64_t *floor)
{
	pthread_mutex_lock(&f->lock);
	*m = f->pub;
	pthread_mutex_unlock(&f->lock);
	*floor = atomic_load(&f->floor);
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
	MDB_cursor *c;
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
	if ((rc = mdb_cursor_open(txn, fs->db_inode, &c)))
		return rc;
	for (int depth = 0; ino != DBFS_ROOT_INO; depth++) {
		unsigned char kb[8];
		MDB_val k = {8, kb}, v;
		dbfs_put_be64(kb, ino);
		/* the inode's own record (8-byte key), then its name rows */
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (!rc && k.mv_size == 8 && dbfs_get_be64(k.mv_data) == ino)
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		if (rc == MDB_NOTFOUND ||
		    (!rc && (k.mv_size <= 16 || dbfs_get_be64(k.mv_data) != ino))) {
			rc = 0;
			at = PATH_BUF; /* no name: unlinked (or damaged) */
			break;
		}
		if (rc)
			break;
		size_t nl = k.mv_size - 16;
		if (depth > 4096 || nl + 1 > at) {
			at = PATH_BUF;
			break;
		}
		at -= nl;
		memcpy(p + at, (char *)k.mv_data + 16, nl);
		p[--at] = '/';
		ino = dbfs_get_be64((unsigned char *)k.mv_data + 8);
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
	mdb_cursor_close(c);
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

int dbfs_feed_batch_end(struct dbfs *fs, MDB_txn *txn)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	f = fs->feed;
	if (!f || !f->npend || txn != f->txn)
		return 0;
	size_t n = f->npend, total = 0;
	uint64_t t = now_ns();
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
		f->capmsgs = n;
	}
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = dbfs_ev_encode(&f->pend[i].ev, f->rec + at);
		f->msgs[i] = (struct mfsq_msg_in){
		    .data = f->rec + at, .len = len, .enqueuer = FEED_ENQUEUER};
		at += len;
	}
	rc = mfsq_enqueue_batch(f->q, txn, f->msgs, n, f->seqs);
	if (rc == ENOSPC)
		return MDB_MAP_FULL; /* LMDB marked the transaction: grow, run again */
	if (rc)
		return dbfs_queue_err(rc);
	/* block rows and the running totals, in the same transaction */
	struct dbfs_feed_meta m = f->meta;
	for (size_t i = 0; i < n; i++) {
		uint64_t seq = f->seqs[i];
		if (seq % DBFS_FEED_BLOCK == 1) {
			unsigned char kb[9];
			MDB_val k, v;
			struct dbfs_feed_block b = {m.bytes, t};
			block_key(kb, seq, &k);
			v.mv_size = sizeof(b);
			v.mv_data = &b;
			if ((rc = dbfs_put(txn, fs->db_feed, &k, &v, 0)))
				return rc;
		}
		m.bytes += f->msgs[i].len;
	}
	m.next_seq = f->seqs[n - 1] + 1;
	m.last_ns = t;
	/* the totals are written by dbfs_tick and close, not per batch (a
	 * page of another table per commit); an open after a crash counts
	 * what came after them from the queue itself (recount_tail) */
	f->txmeta = m;
	f->tx_n = n;
	f->tx_id = mdb_txn_id(txn);
	return 0;
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
	f->txn = NULL;
	mfsq_txn_committed(f->q, f->tx_id); /* the next batch need not read the shard back */
	atomic_store(&f->last_seq, f->meta.next_seq - 1);
	atomic_fetch_add(&f->enqueued, f->tx_n);
	f->tx_n = 0;
	f->npend = 0;
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

/* ---- open, close, upgrade ---- */

static void feed_config(struct mfsq_config *cfg)
{
	mfsq_config_default(cfg);
	cfg->nshards = 1;
	cfg->subshard_msgs = 32768;
	cfg->subshard_bytes = 32u << 20;
	cfg->retain_max = 80; /* 2.6 M events at the hard limit: above any floor */
	cfg->max_payload = DBFS_EV_REC_FIXED + 2 * PATH_BUF + DBFS_XATTR_NAME_MAX;
}

unsigned dbfs_feed_dbs_needed(void)
{
	struct mfsq_config cfg;
	feed_config(&cfg);
	return mfsq_dbs_needed(&cfg);
}

static int limits_ok(const struct dbfs_feed_limits *l)
{
	return (l->max_events || l->max_bytes || l->max_age_sec) &&
	       l->max_events <= DBFS_FEED_EVENTS_MAX && l->max_bytes <= DBFS_FEED_BYTES_MAX;
}

/*
 * The totals ('M') are written now and then: add what the queue holds
 * beyond them (after a crash, at most the last second's events), reading
 * the messages themselves: the next seq, the bytes, the newest time.
 */
static int recount_tail(struct dbfs *fs, struct dbfs_feed *f)
{
	mfsq_sub *s;
	int rc;
	QCALL(fs, rc, mfsq_subscribe(f->q, NULL, 0, NULL, NULL, &s));
	if (rc)
		return q_errno(rc);
	uint64_t end = mfsq_sub_position(s, FEED_SHARD);
	if (end > f->meta.next_seq) {
		QCALL(fs, rc, mfsq_seek_seq(s, FEED_SHARD, f->meta.next_seq));
		if (rc == ENOENT) /* dropped meanwhile: from what is left */
			QCALL(fs, rc, mfsq_seek_time(s, 0));
		struct mfsq_msg m[READ_MAX];
		size_t n;
		while (!rc) {
			QCALL(fs, rc, mfsq_dequeue(s, m, READ_MAX, &n, 0));
			if (rc == MFSQ_LAGGED) {
				rc = 0;
				continue;
			}
			for (size_t i = 0; !rc && i < n; i++) {
				struct dbfs_event ev;
				if (m[i].seq < f->meta.next_seq)
					continue;
				f->meta.bytes += m[i].len;
				if (!dbfs_ev_decode(m[i].data, m[i].len, &ev) &&
				    ev.time_ns > f->meta.last_ns)
					f->meta.last_ns = ev.time_ns;
			}
		}
		if (rc == EAGAIN)
			rc = 0;
		f->meta.next_seq = end;
	}
	mfsq_unsubscribe(s);
	return q_errno(rc);
}

/* Write the totals (a batch operation: f->meta is the leader's). */
static int meta_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	(void)arg;
	MDB_val v = {sizeof(fs->feed->meta), &fs->feed->meta};
	return dbfs_put(txn, fs->db_feed, &key_meta, &v, 0);
}

static int save_meta(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	uint64_t next = atomic_load(&f->last_seq) + 1;
	if (next == f->saved_seq)
		return 0;
	int rc = dbfs_write(fs, meta_fn, NULL);
	if (!rc)
		f->saved_seq = next;
	return rc;
}

/* 'X' in the feed table: ilink is stale (the store was open with
 * feed=off, when dir.c does not keep it). */
static MDB_val key_stale = {1, (void *)"X"};

static int stale_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	MDB_val v = {0, NULL};
	if (arg) /* mark */
		return dbfs_put(txn, fs->db_feed, &key_stale, &v, 0);
	int rc = dbfs_del(txn, fs->db_feed, &key_stale, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Delete every name row (keys longer than an inode's) of the inode table. */
static int empty_ilink_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	(void)arg;
	dbfs_feed_paths_changed(fs, 0);
	int rc = mdb_cursor_open(txn, fs->db_inode, &c);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size > 8 && (rc = dbfs_cursor_del(c)))
			break;
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Is ilink marked stale? */
static int ilink_stale(struct dbfs *fs, bool *stale)
{
	MDB_txn *txn;
	MDB_val v;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return rc;
	rc = dbfs_get(txn, fs->db_feed, &key_stale, &v);
	dbfs_read_end(fs, txn);
	*stale = rc == 0;
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int dbfs_feed_start(struct dbfs *fs, char *err, size_t errlen)
{
	struct dbfs_feed *f;
	struct mfsq_config cfg;
	bool stale = false;
	int rc;

	/* read-only: no feed (its queue keeps files of its own it would write) */
	if (!fs->db_feed || fs->opt.read_only)
		return 0;
	if ((rc = ilink_stale(fs, &stale))) {
		snprintf(err, errlen, "cannot read the change feed's table");
		return dbfs_errno(rc);
	}
	if (!fs->opt.feed) {
		/* ilink is not kept without the feed: say so in the store */
		if (!stale && (rc = dbfs_errno(dbfs_write(fs, stale_fn, (void *)1)))) {
			snprintf(err, errlen, "cannot write the change feed's table: %s",
				 strerror(-rc));
			return rc;
		}
		return 0;
	}
	if (stale) {
		/* the store was used with feed=off: its names again, from dirent */
		rc = dbfs_write(fs, empty_ilink_fn, NULL);
		if (!rc)
			rc = dbfs_feed_upgrade(fs);
		if (!rc)
			rc = dbfs_write(fs, stale_fn, NULL);
		if ((rc = dbfs_errno(rc))) {
			snprintf(err, errlen, "cannot rebuild the change feed's names: %s",
				 strerror(-rc));
			return rc;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->lim = (struct dbfs_feed_limits){fs->opt.feed_max_events, fs->opt.feed_max_bytes,
					   fs->opt.feed_max_age, fs->opt.feed_sub_idle};
	if (!limits_ok(&f->lim)) {
		free(f);
		snprintf(err, errlen,
			 "feed_events, feed_bytes and feed_age cannot all be 0 "
			 "(the feed would be unbounded)");
		return -EINVAL;
	}
	feed_config(&cfg);
	for (int tries = 0;; tries++) {
		uint64_t seen = fs->map_size;
		/* every enqueue is in a batch's transaction: no enqueue log
		 * (its 1 MiB ring would be most of an idle DBFS's memory) */
		rc = mfsq_open(fs->env, DBFS_FEED_QUEUE, &cfg,
			       MFSQ_NO_LOG | (fs->opt.read_only ? 0 : MFSQ_CREATE), &f->q);
		if (rc != ENOSPC || tries >= 3 || dbfs_grow_map(fs, seen))
			break;
	}
	if (rc == ENOENT && fs->opt.read_only) {
		free(f);
		return 0; /* a read-only store without a feed yet: none */
	}
	if (rc) {
		free(f);
		snprintf(err, errlen, "cannot open the change feed: %s", mfsq_strerror(rc));
		return q_errno(rc);
	}
	MDB_txn *txn;
	uint64_t floor = 1;
	rc = dbfs_read_begin(fs, &txn);
	if (!rc) {
		rc = read_meta(fs, txn, &f->meta, &floor);
		dbfs_read_end(fs, txn);
	}
	if (rc) {
		mfsq_close(f->q);
		free(f);
		snprintf(err, errlen, "cannot read the change feed's records");
		return dbfs_errno(rc);
	}
	fs->feed = f;
	if ((rc = recount_tail(fs, f))) {
		fs->feed = NULL;
		mfsq_close(f->q);
		free(f);
		snprintf(err, errlen, "cannot read the change feed's newest events: %s",
			 strerror(-rc));
		return rc;
	}
	fs->feed = NULL;
	f->pub = f->meta;
	f->saved_seq = 0; /* the first tick writes it */
	atomic_store(&f->last_seq, f->meta.next_seq - 1);
	atomic_store(&f->floor, floor);
	f->ticked_seq = 0; /* the first tick runs the queue's maintenance */
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &ca);
	pthread_condattr_destroy(&ca);
	fs->feed = f;
	return 0;
}

void dbfs_feed_stop(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return;
	while (f->readers) /* the owner should have closed them */
		dbfs_feed_close(f->readers);
	if (!fs->opt.read_only)
		save_meta(fs); /* a failure: the next open counts from the queue */
	mfsq_close(f->q);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f->pend);
	free(f->arena);
	free(f->rec);
	free(f->msgs);
	free(f->seqs);
	free(f);
	fs->feed = NULL;
}

/* Format 2 -> 3: an ilink row for every dirent row, a piece per commit. */
struct upgrade_ctx {
	unsigned char last[8 + DBFS_NAME_MAX];
	size_t last_len; /* 0: from the start */
	int done;
};

static int upgrade_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct upgrade_ctx *c = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	dbfs_feed_paths_changed(fs, 0);
	int rc = mdb_cursor_open(txn, fs->db_dirent, &cur);
	if (rc)
		return rc;
	k.mv_size = c->last_len;
	k.mv_data = c->last;
	rc = c->last_len ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)
			 : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	if (!rc && c->last_len && k.mv_size == c->last_len &&
	    !memcmp(k.mv_data, c->last, k.mv_size))
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	int n = 0;
	for (; !rc && n < 20000; n++, rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct dbfs_dirent_val dv;
		if (k.mv_size <= 8 || k.mv_size > 8 + DBFS_NAME_MAX || v.mv_size != sizeof(dv))
			continue; /* damaged: dbfs-fsck's business */
		memcpy(&dv, v.mv_data, sizeof(dv));
		unsigned char kb[16 + DBFS_NAME_MAX];
		MDB_val ik, iv = {0, NULL};
		dbfs_ilink_key(kb, dv.ino, dbfs_get_be64(k.mv_data), (char *)k.mv_data + 8,
			       k.mv_size - 8, &ik);
		memcpy(c->last, k.mv_data, k.mv_size);
		c->last_len = k.mv_size;
		if ((rc = dbfs_put(txn, fs->db_inode, &ik, &iv, 0)))
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND) {
		c->done = 1;
		rc = 0;
	}
	return rc;
}

int dbfs_feed_upgrade(struct dbfs *fs)
{
	struct upgrade_ctx *c = calloc(1, sizeof(*c));
	int rc = 0;
	if (!c)
		return -ENOMEM;
	while (!rc && !c->done)
		rc = dbfs_write(fs, upgrade_fn, c);
	free(c);
	return rc;
}

/* ---- small public pieces ---- */

void dbfs_feed_uuid(struct dbfs *fs, uint8_t uuid[16])
{
	memcpy(uuid, fs->uuid, 16);
}

bool dbfs_feed_enabled(struct dbfs *fs)
{
	return fs->feed != NULL;
}

uint64_t dbfs_feed_last_seq(struct dbfs *fs)
{
	return fs->feed ? atomic_load(&fs->feed->last_seq) : 0;
}

void dbfs_feed_set_notify(struct dbfs *fs, void (*cb)(void *arg, uint64_t last_seq), void *arg)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->cb = cb;
	f->cb_arg = arg;
	pthread_mutex_unlock(&f->lock);
}

int dbfs_feed_set_limits(struct dbfs *fs, const struct dbfs_feed_limits *l)
{
	struct dbfs_feed *f = fs->feed;
	if (!f)
		return -EOPNOTSUPP;
	if (!limits_ok(l))
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	f->lim = *l;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void dbfs_feed_get_limits(struct dbfs *fs, struct dbfs_feed_limits *l)
{
	struct dbfs_feed *f = fs->feed;
	if (!f) {
		*l = (struct dbfs_feed_limits){fs->opt.feed_max_events, fs->opt.feed_max_bytes,
					       fs->opt.feed_max_age, fs->opt.feed_sub_idle};
		return;
	}
	pthread_mutex_lock(&f->lock);
	*l = f->lim;
	pthread_mutex_unlock(&f->lock);
}

/* ---- subscriptions' rows ---- */

static int sub_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > DBFS_FEED_SUB_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static void sub_key(unsigned char *kb, const char *name, MDB_val *k)
{
	size_t n = strlen(name);
	kb[0] = 'S';
	memcpy(kb + 1, name, n);
	k->mv_size = n + 1;
	k->mv_data = kb;
}

/* Read a row: rec and (spec, up to DBFS_FEED_SPEC_MAX + 1 with NUL) */
static int sub_row_get(struct dbfs *fs, MDB_txn *txn, const char *name, struct dbfs_feed_subrec *r,
		       char *spec)
{
	unsigned char kb[1 + DBFS_FEED_SUB_MAX];
	MDB_val k, v;
	sub_key(kb, name, &k);
	int rc = dbfs_get(txn, fs->db_feed, &k, &v);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return rc;
	if (v.mv_size < sizeof(*r))
		return -EIO;
	memcpy(r, v.mv_data, sizeof(*r));
	if (r->spec_len > DBFS_FEED_SPEC_MAX || sizeof(*r) + r->spec_len != v.mv_size)
		return -EIO;
	if (spec) {
		memcpy(spec, (char *)v.mv_data + sizeof(*r), r->spec_len);
		spec[r->spec_len] = 0;
	}
	return 0;
}

static int sub_row_put(struct dbfs *fs, MDB_txn *txn, const char *name,
		       const struct dbfs_feed_subrec *r, const char *spec)
{
	unsigned char kb[1 + DBFS_FEED_SUB_MAX];
	unsigned char buf[sizeof(*r) + DBFS_FEED_SPEC_MAX];
	MDB_val k, v = {sizeof(*r) + r->spec_len, buf};
	sub_key(kb, name, &k);
	memcpy(buf, r, sizeof(*r));
	memcpy(buf + sizeof(*r), spec, r->spec_len);
	return dbfs_put(txn, fs->db_feed, &k, &v, 0);
}

/* Rewrite a row: `spec` NULL keeps the stored one. */
struct row_ctx {
	const char *name;
	struct dbfs_feed_subrec rec;
	const char *spec;
	bool create;	   /* refuse an existing row (-EEXIST) */
	bool del;	   /* delete the row */
	bool update;	   /* add gaps/lost, set acked/active from rec */
	mfsq_sub *ack_sub; /* with update: acknowledge up to rec.acked - 1 in the queue */
	bool ack_name;	   /* with update: the same through the stored record only */
	bool set_acked;	   /* with update: rec.acked replaces the row's (a replay) */
};

static int row_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct row_ctx *c = arg;
	struct dbfs_feed_subrec old;
	char spec[DBFS_FEED_SPEC_MAX + 1];
	int rc = sub_row_get(fs, txn, c->name, &old, spec);
	if (c->create) {
		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc;
		return sub_row_put(fs, txn, c->name, &c->rec, c->spec ? c->spec : "");
	}
	if (rc)
		return rc;
	if (c->del) {
		/* the row and the queue's subscriber in one transaction: an
		 * answered error leaves the subscription whole */
		unsigned char kb[1 + DBFS_FEED_SUB_MAX];
		MDB_val k;
		sub_key(kb, c->name, &k);
		if ((rc = dbfs_del(txn, fs->db_feed, &k, NULL)))
			return rc;
		rc = mfsq_subscriber_delete(fs->feed->q, txn, c->name);
		if (rc == ENOENT) /* a row without its queue record */
			return 0;
		if (rc == EBUSY)
			return -EBUSY;
		if (rc == ENOSPC)
			return MDB_MAP_FULL;
		return dbfs_queue_err(rc);
	}
	if (c->ack_sub) {
		struct mfsq_msg m = {.shard = FEED_SHARD, .seq = c->rec.acked - 1};
		rc = mfsq_ack(c->ack_sub, txn, &m);
		if (rc == ENOSPC)
			return MDB_MAP_FULL;
		if (rc)
			return dbfs_queue_err(rc);
	}
	if (c->ack_name) {
		rc = mfsq_subscriber_ack(fs->feed->q, txn, c->name, FEED_SHARD, c->rec.acked);
		if (rc == ENOSPC)
			return MDB_MAP_FULL;
		if (rc == ENOENT) /* a row without its queue record: make it so */
			rc = 0;
		if (rc)
			return dbfs_queue_err(rc);
	}
	old.gaps += c->rec.gaps;
	old.lost += c->rec.lost;
	if (c->rec.acked > old.acked || (c->set_acked && c->rec.acked))
		old.acked = c->rec.acked;
	old.active_ns = c->rec.active_ns;
	return sub_row_put(fs, txn, c->name, &old, spec);
}

/* ---- positions ---- */

static int check_start(struct dbfs *fs, const struct dbfs_feed_start *st)
{
	if (!st)
		return 0;
	if (st->uuid && memcmp(st->uuid, fs->uuid, 16))
		return -ESTALE;
	switch (st->from) {
	case DBFS_FEED_NOW:
	case DBFS_FEED_OLDEST:
	case DBFS_FEED_TIME:
		return 0;
	case DBFS_FEED_SEQ:
		if (st->seq == 0)
			return -EINVAL;
		return st->seq > dbfs_feed_last_seq(fs) + 1 ? -ERANGE : 0;
	}
	return -EINVAL;
}

/* Move `s` to `st`; *next gets the reader's expected seq, *min_ns the
 * time filter. */
static int seek_to(struct dbfs *fs, mfsq_sub *s, const struct dbfs_feed_start *st, uint64_t *next,
		   uint64_t *min_ns, bool durable)
{
	int rc = 0;
	*min_ns = 0;
	switch (st->from) {
	case DBFS_FEED_NOW:
		/* a new ephemeral subscriber starts at the end by itself */
		if (durable)
			QCALL(fs, rc, mfsq_seek_seq(s, FEED_SHARD, dbfs_feed_last_seq(fs) + 1));
		break;
	case DBFS_FEED_OLDEST: {
		uint64_t fl = atomic_load(&fs->feed->floor);
		QCALL(fs, rc, mfsq_seek_seq(s, FEED_SHARD, fl));
		if (rc == ENOENT) /* the queue kept less: its oldest */
			QCALL(fs, rc, mfsq_seek_time(s, 0));
		break;
	}
	case DBFS_FEED_SEQ:
		QCALL(fs, rc, mfsq_seek_seq(s, FEED_SHARD, st->seq));
		if (rc == ENOENT)
			QCALL(fs, rc, mfsq_seek_time(s, 0)); /* the gap record tells */
		if (!rc) {
			*next = st->seq;
			return 0;
		}
		break;
	case DBFS_FEED_TIME:
		/* the queue's times are its own commit's, a little after ours */
		QCALL(fs, rc,
		      mfsq_seek_time(s, st->time_ns / 1000 > 1000000 ? st->time_ns / 1000 - 1000000
								     : 0));
		*min_ns = st->time_ns;
		break;
	}
	if (rc)
		return q_errno(rc);
	*next = mfsq_sub_position(s, FEED_SHARD);
	return 0;
}

/* ---- subscriptions ---- */

static bool sub_open_here(struct dbfs_feed *f, const char *name)
{
	bool open = false;
	pthread_mutex_lock(&f->lock);
	for (struct dbfs_feed_reader *r = f->readers; r; r = r->next_r)
		if (!strcmp(r->name, name))
			open = true;
	pthread_mutex_unlock(&f->lock);
	return open;
}

int dbfs_feed_sub_create(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
			 const char *spec)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	if (!f)
		return -EOPNOTSUPP;
	if (!sub_name_ok(sub) || (spec && strlen(spec) > DBFS_FEED_SPEC_MAX))
		return -EINVAL;
	if (fs->opt.read_only)
		return -EROFS;
	if ((rc = check_start(fs, start)))
		return rc;
	struct dbfs_feed_sub_info info;
	rc = dbfs_feed_sub_get(fs, sub, &info);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	/* The queue's subscriber first (a leftover of a create that died
	 * before its row is taken over), positioned, then the row. */
	mfsq_sub *s;
	QCALL(fs, rc, mfsq_subscribe(f->q, sub, MFSQ_SUB_DURABLE, NULL, NULL, &s));
	if (rc)
		return rc == EBUSY ? -EBUSY : q_write_errno(fs, rc);
	uint64_t next, min_ns;
	struct dbfs_feed_start now = {.from = DBFS_FEED_NOW};
	rc = seek_to(fs, s, start ? start : &now, &next, &min_ns, true);
	mfsq_unsubscribe(s);
	if (rc)
		return rc;
	uint64_t t = now_ns();
	struct row_ctx c = {.name = sub, .spec = spec, .create = true};
	c.rec = (struct dbfs_feed_subrec){.created_ns = t,
					  .active_ns = t,
					  .acked = next,
					  .spec_len = spec ? (uint32_t)strlen(spec) : 0};
	return dbfs_errno(dbfs_write(fs, row_fn, &c));
}

static int sub_delete(struct dbfs *fs, const char *sub)
{
	struct dbfs_feed *f = fs->feed;
	int rc;
	if (sub_open_here(f, sub))
		return -EBUSY;
	struct row_ctx c = {.name = sub, .del = true};
	rc = dbfs_errno(dbfs_write(fs, row_fn, &c));
	if (rc != -ENOENT)
		return rc;
	/* no row: a queue subscriber may be left by a create that died
	 * before its row was written (dbfs_feed_sub_create) */
	int qrc;
	QCALL(fs, qrc, mfsq_subscriber_delete(f->q, NULL, sub));
	if (qrc == EBUSY)
		return -EBUSY;
	if (qrc && qrc != ENOENT)
		return q_write_errno(fs, qrc);
	return rc;
}

int dbfs_feed_sub_delete(struct dbfs *fs, const char *sub)
{
	if (!fs->feed)
		return -EOPNOTSUPP;
	if (!sub_name_ok(sub))
		return -EINVAL;
	if (fs->opt.read_only)
		return -EROFS;
	return sub_delete(fs, sub);
}

static void fill_info(struct dbfs *fs, const char *name, const struct dbfs_feed_subrec *r,
		      const char *spec, struct dbfs_feed_sub_info *info)
{
	struct dbfs_feed *f = fs->feed;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", name);
	snprintf(info->spec, sizeof(info->spec), "%s", spec);
	info->gaps = r->gaps;
	info->lost = r->lost;
	info->created_ns = r->created_ns;
	info->active_ns = r->active_ns;
	uint64_t pos = r->acked, fl = atomic_load(&f->floor);
	bool open = false;
	pthread_mutex_lock(&f->lock);
	for (struct dbfs_feed_reader *rd = f->readers; rd; rd = rd->next_r)
		if (!strcmp(rd->name, name)) {
			open = true;
			info->gaps += rd->gaps;
			info->lost += rd->lost;
			if (rd->acked > pos)
				pos = rd->acked;
		}
	pthread_mutex_unlock(&f->lock);
	info->open = open;
	/* behind retention (moved up by the queue, or below the floor): lost,
	 * not told yet (the reader's gap record will) */
	uint64_t acked = 0;
	if (!open && mfsq_subscriber_get(f->q, name, &acked, NULL, NULL) == 0 && acked > pos) {
		info->lost += acked - pos;
		pos = acked;
	}
	if (pos < fl) {
		info->lost += fl - pos;
		pos = fl;
	}
	info->next_seq = pos;
	uint64_t last = atomic_load(&f->last_seq);
	info->lag = last + 1 > pos ? last + 1 - pos : 0;
}

static int sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info,
		   uint64_t *row_acked)
{
	struct dbfs_feed_subrec r;
	char spec[DBFS_FEED_SPEC_MAX + 1];
	MDB_txn *txn;
	if (!fs->feed)
		return -EOPNOTSUPP;
	if (!sub_name_ok(sub))
		return -EINVAL;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return dbfs_errno(rc);
	rc = sub_row_get(fs, txn, sub, &r, spec);
	dbfs_read_end(fs, txn);
	if (rc)
		return dbfs_errno(rc);
	fill_info(fs, sub, &r, spec, info);
	if (row_acked)
		*row_acked = r.acked;
	return 0;
}

int dbfs_feed_sub_get(struct dbfs *fs, const char *sub, struct dbfs_feed_sub_info *info)
{
	return sub_get(fs, sub, info, NULL);
}

/* Names of every row (a copy: the callback runs with no transaction). */
static int sub_names(struct dbfs *fs, char (**names)[DBFS_FEED_SUB_MAX + 1], size_t *count)
{
	MDB_txn *txn;
	MDB_cursor *c;
	size_t n = 0, cap = 0;
	char(*v)[DBFS_FEED_SUB_MAX + 1] = NULL;
	int rc = dbfs_read_begin(fs, &txn);
	*names = NULL;
	*count = 0;
	if (rc)
		return rc;
	rc = mdb_cursor_open(txn, fs->db_feed, &c);
	if (!rc) {
		MDB_val k = {1, (void *)"S"}, val;
		for (rc = mdb_cursor_get(c, &k, &val, MDB_SET_RANGE); !rc;
		     rc = mdb_cursor_get(c, &k, &val, MDB_NEXT)) {
			if (((char *)k.mv_data)[0] != 'S' || k.mv_size < 2 ||
			    k.mv_size > 1 + DBFS_FEED_SUB_MAX)
				break;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				void *nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					rc = ENOMEM;
					break;
				}
				v = nv;
			}
			memcpy(v[n], (char *)k.mv_data + 1, k.mv_size - 1);
			v[n][k.mv_size - 1] = 0;
			n++;
		}
		mdb_cursor_close(c);
	}
	dbfs_read_end(fs, txn);
	if (rc && rc != MDB_NOTFOUND) {
		free(v);
		return rc;
	}
	*names = v;
	*count = n;
	return 0;
}

int dbfs_feed_sub_list(struct dbfs *fs, int (*cb)(void *arg, const struct dbfs_feed_sub_info *info),
		       void *arg)
{
	char(*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
	if (!fs->feed)
		return -EOPNOTSUPP;
	int rc = sub_names(fs, &names, &n);
	if (rc)
		return dbfs_errno(rc);
	struct dbfs_feed_sub_info *info = malloc(sizeof(*info));
	if (!info) {
		free(names);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		int g = dbfs_feed_sub_get(fs, names[i], info);
		if (g == -ENOENT)
			continue; /* deleted meanwhile */
		rc = g ? g : cb(arg, info);
	}
	free(info);
	free(names);
	return rc;
}

/* ---- readers ---- */

int dbfs_feed_open(struct dbfs *fs, const char *sub, const struct dbfs_feed_start *start,
		   struct dbfs_feed_reader **out)
{
	struct dbfs_feed *f = fs->feed;
	struct dbfs_feed_reader *r;
	int rc;
	*out = NULL;
	if (!f)
		return -EOPNOTSUPP;
	if (sub && !sub_name_ok(sub))
		return -EINVAL;
	if ((rc = check_start(fs, start)))
		return rc;
	if (sub && fs->opt.read_only)
		return -EROFS;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fs = fs;
	if (sub) {
		struct dbfs_feed_sub_info info;
		uint64_t row_acked;
		if ((rc = sub_get(fs, sub, &info, &row_acked)))
			goto fail;
		if (info.open) {
			rc = -EBUSY;
			goto fail;
		}
		snprintf(r->name, sizeof(r->name), "%s", sub);
		QCALL(fs, rc, mfsq_subscribe(f->q, sub, MFSQ_SUB_DURABLE, NULL, NULL, &r->s));
		if (rc) {
			rc = rc == EBUSY ? -EBUSY : q_write_errno(fs, rc);
			goto fail;
		}
		/* from the last ack this feed wrote: if the queue moved the
		 * subscriber past it (retention), the jump is the gap record */
		r->next = r->acked = row_acked;
		if (start && (rc = seek_to(fs, r->s, start, &r->next, &r->min_ns, true)))
			goto fail_sub;
		struct row_ctx c = {.name = sub, .update = true, .set_acked = start != NULL};
		c.rec.active_ns = now_ns();
		if (start)
			c.rec.acked = r->acked = r->next;
		if ((rc = dbfs_errno(dbfs_write(fs, row_fn, &c))))
			goto fail_sub;
	} else {
		QCALL(fs, rc, mfsq_subscribe(f->q, NULL, 0, NULL, NULL, &r->s));
		if (rc) {
			rc = q_errno(rc);
			goto fail;
		}
		struct dbfs_feed_start now = {.from = DBFS_FEED_NOW};
		if ((rc = seek_to(fs, r->s, start ? start : &now, &r->next, &r->min_ns, false)))
			goto fail_sub;
	}
	pthread_mutex_lock(&f->lock);
	r->next_r = f->readers;
	f->readers = r;
	pthread_mutex_unlock(&f->lock);
	*out = r;
	return 0;
fail_sub:
	mfsq_unsubscribe(r->s);
fail:
	free(r);
	return rc;
}

/* Hand out what was dequeued: gap records, events. Returns the count. */
static size_t hand_out(struct dbfs_feed_reader *r, struct dbfs_event *ev, size_t max, int *err)
{
	struct dbfs_feed *f = r->fs->feed;
	size_t k = 0;
	uint64_t fl = atomic_load(&f->floor);
	while (r->imsg < r->nmsg && k < max) {
		const struct mfsq_msg *m = &r->msg[r->imsg];
		if (m->seq < fl || m->seq < r->next) {
			r->imsg++; /* below retention (a gap follows), or seen already */
			continue;
		}
		if (m->seq > r->next) {
			ev[k] = (struct dbfs_event){
			    .seq = r->next, .op = DBFS_EV_GAP, .gap_next = m->seq, .path = ""};
			ev[k].time_ns = now_ns();
			r->gaps++;
			r->lost += m->seq - r->next;
			atomic_fetch_add(&f->gaps, 1);
			r->next = m->seq;
			k++;
			continue;
		}
		ev[k].seq = m->seq;
		int rc = dbfs_ev_decode(m->data, m->len, &ev[k]);
		if (rc) {
			if (!k)
				*err = rc;
			break; /* stay before it */
		}
		r->imsg++;
		r->next = m->seq + 1;
		if (r->min_ns && ev[k].time_ns < r->min_ns)
			continue;
		r->min_ns = 0;
		r->delivered = m->seq;
		k++;
	}
	return k;
}

static void wait_commit(struct dbfs_feed *f, uint64_t gen, const struct timespec *until)
{
	pthread_mutex_lock(&f->lock);
	while (f->gen == gen) {
		if (!until) {
			pthread_cond_wait(&f->cond, &f->lock);
		} else if (pthread_cond_timedwait(&f->cond, &f->lock, until)) {
			break;
		}
	}
	pthread_mutex_unlock(&f->lock);
}

int dbfs_feed_read(struct dbfs_feed_reader *r, struct dbfs_event *ev, size_t max, size_t *n,
		   int timeout_ms)
{
	struct dbfs_feed *f = r->fs->feed;
	struct timespec until;
	int err = 0;
	*n = 0;
	if (!max)
		return -EINVAL;
	if (timeout_ms > 0) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
	}
	for (;;) {
		*n = hand_out(r, ev, max, &err);
		if (*n || err)
			return err;
		pthread_mutex_lock(&f->lock);
		uint64_t gen = f->gen;
		pthread_mutex_unlock(&f->lock);
		size_t got = 0;
		int rc;
		r->imsg = r->nmsg = 0;
		QCALL(r->fs, rc, mfsq_dequeue(r->s, r->msg, READ_MAX, &got, 0));
		if (rc == 0) {
			r->nmsg = got;
			/* an ephemeral reader holds no retention behind what it read */
			if (!r->name[0])
				mfsq_ack(r->s, NULL, NULL);
			continue;
		}
		if (rc == MFSQ_LAGGED)
			continue; /* it moved on: the seq jump makes the gap record */
		if (rc != EAGAIN)
			return rc == EBADMSG ? -EBADMSG : q_errno(rc);
		if (timeout_ms == 0)
			return -EAGAIN;
		if (timeout_ms > 0) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > until.tv_sec ||
			    (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
				return -ETIMEDOUT;
		}
		/* the queue is polled again at least every second: a commit of
		 * another process (a shared store) wakes nobody here */
		struct timespec cap;
		clock_gettime(CLOCK_MONOTONIC, &cap);
		cap.tv_sec += 1;
		if (timeout_ms > 0 && (until.tv_sec < cap.tv_sec ||
				       (until.tv_sec == cap.tv_sec && until.tv_nsec < cap.tv_nsec)))
			cap = until;
		wait_commit(f, gen, &cap);
	}
}

bool dbfs_feed_ready(struct dbfs_feed_reader *r)
{
	if (r->imsg < r->nmsg)
		return true;
	return dbfs_feed_last_seq(r->fs) >= r->next;
}

int dbfs_feed_ack(struct dbfs_feed_reader *r, uint64_t seq)
{
	if (!r->name[0])
		return 0;
	if (seq == 0 || seq + 1 <= r->acked)
		return 0;
	if (seq > r->delivered)
		return -ERANGE;
	struct row_ctx c = {.name = r->name, .update = true, .ack_sub = r->s};
	c.rec.active_ns = now_ns();
	c.rec.acked = seq + 1;
	c.rec.gaps = r->gaps;
	c.rec.lost = r->lost;
	int rc = dbfs_errno(dbfs_write(r->fs, row_fn, &c));
	if (!rc) {
		r->acked = seq + 1;
		r->gaps = r->lost = 0;
	}
	return rc;
}

int dbfs_feed_sub_ack(struct dbfs *fs, const char *sub, uint64_t seq)
{
	if (!fs->feed)
		return -EOPNOTSUPP;
	if (!sub_name_ok(sub))
		return -EINVAL;
	if (fs->opt.read_only)
		return -EROFS;
	if (seq > dbfs_feed_last_seq(fs))
		return -ERANGE;
	if (seq == 0)
		return 0;
	struct row_ctx c = {.name = sub, .update = true, .ack_name = true};
	c.rec.active_ns = now_ns();
	c.rec.acked = seq + 1;
	return dbfs_errno(dbfs_write(fs, row_fn, &c));
}

uint64_t dbfs_feed_reader_next(const struct dbfs_feed_reader *r)
{
	return r->next;
}

void dbfs_feed_close(struct dbfs_feed_reader *r)
{
	if (!r)
		return;
	struct dbfs_feed *f = r->fs->feed;
	pthread_mutex_lock(&f->lock);
	for (struct dbfs_feed_reader **p = &f->readers; *p; p = &(*p)->next_r)
		if (*p == r) {
			*p = r->next_r;
			break;
		}
	pthread_mutex_unlock(&f->lock);
	if (r->name[0] && !r->fs->opt.read_only) {
		struct row_ctx c = {.name = r->name, .update = true};
		c.rec.active_ns = now_ns();
		c.rec.gaps = r->gaps;
		c.rec.lost = r->lost;
		dbfs_write(r->fs, row_fn, &c); /* counts only: a failure loses them */
	}
	int rc;
	QCALL(r->fs, rc, (mfsq_unsubscribe(r->s), 0));
	(void)rc;
	free(r);
}

/* ---- stats ---- */

int dbfs_feed_stats(struct dbfs *fs, struct dbfs_feed_stats *st)
{
	struct dbfs_feed *f = fs->feed;
	memset(st, 0, sizeof(*st));
	memcpy(st->uuid, fs->uuid, 16);
	if (!f)
		return -EOPNOTSUPP;
	st->enabled = true;
	MDB_txn *txn;
	struct dbfs_feed_meta m;
	uint64_t floor;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return dbfs_errno(rc);
	pub_meta(f, &m, &floor);
	if (!rc) {
		unsigned char kb[9];
		MDB_val k, v;
		block_key(kb, block_of(floor), &k);
		st->next_seq = m.next_seq;
		st->first_seq = floor < m.next_seq ? floor : m.next_seq;
		st->events = m.next_seq - st->first_seq;
		int g = dbfs_get(txn, fs->db_feed, &k, &v);
		if (g == 0 && v.mv_size == sizeof(struct dbfs_feed_block)) {
			struct dbfs_feed_block b;
			memcpy(&b, v.mv_data, sizeof(b));
			/* the block's bytes before the floor are counted: they
			 * stay until their subshard goes */
			st->bytes = m.bytes > b.bytes_before ? m.bytes - b.bytes_before : 0;
			st->oldest_ns = st->events ? b.first_ns : 0;
		} else {
			st->bytes = st->events ? m.bytes : 0;
		}
		st->bytes += st->events * REC_OVERHEAD;
	}
	dbfs_read_end(fs, txn);
	if (rc)
		return dbfs_errno(rc);
	st->enqueued = atomic_load(&f->enqueued);
	st->trimmed = atomic_load(&f->trimmed);
	st->gaps = atomic_load(&f->gaps);
	st->subs_expired = atomic_load(&f->subs_expired);
	char(*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
	if (sub_names(fs, &names, &n) == 0) {
		st->subs = n;
		free(names);
	}
	dbfs_feed_get_limits(fs, &st->limits);
	return 0;
}

/* ---- retention and expiry (dbfs_tick) ---- */

struct trim_ctx {
	uint64_t floor;
};

static int trim_fn(struct dbfs *fs, MDB_txn *txn, void *arg)
{
	struct trim_ctx *c = arg;
	MDB_val v = {8, &c->floor};
	int rc = dbfs_put(txn, fs->db_feed, &key_floor, &v, 0);
	if (rc)
		return rc;
	rc = mfsq_retain_floor(fs->feed->q, txn, FEED_SHARD, c->floor);
	if (rc == ENOSPC)
		return MDB_MAP_FULL;
	if (rc)
		return dbfs_queue_err(rc);
	/* block rows before the floor's block */
	MDB_cursor *cur;
	if ((rc = mdb_cursor_open(txn, fs->db_feed, &cur)))
		return rc;
	unsigned char kb[9];
	MDB_val k;
	block_key(kb, 0, &k);
	uint64_t keep = block_of(c->floor);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 9 || ((char *)k.mv_data)[0] != 'I' ||
		    dbfs_get_be64((unsigned char *)k.mv_data + 1) >= keep)
			break;
		if ((rc = dbfs_cursor_del(cur)))
			break;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The floor the limits ask for now. */
static int floor_wanted(struct dbfs *fs, const struct dbfs_feed_limits *l, uint64_t *want)
{
	MDB_txn *txn;
	struct dbfs_feed_meta m;
	uint64_t floor;
	int rc = dbfs_read_begin(fs, &txn);
	if (rc)
		return rc;
	pub_meta(fs->feed, &m, &floor);
	*want = floor;
	/* the store's file system is full: the feed gives back all but its
	 * newest block (readers behind get a gap), before the file system's
	 * users meet ENOSPC */
	if (fs->space_low && m.next_seq > 1 && block_of(m.next_seq - 1) > *want)
		*want = block_of(m.next_seq - 1);
	if (!rc && l->max_events && m.next_seq > l->max_events + 1 &&
	    m.next_seq - l->max_events > *want)
		*want = m.next_seq - l->max_events;
	if (!rc && (l->max_bytes || l->max_age_sec) && m.next_seq > *want) {
		uint64_t cutoff = l->max_age_sec ? now_ns() - l->max_age_sec * 1000000000ull : 0;
		MDB_cursor *cur;
		rc = mdb_cursor_open(txn, fs->db_feed, &cur);
		if (!rc) {
			unsigned char kb[9];
			MDB_val k, v;
			block_key(kb, block_of(*want), &k);
			/* walk blocks from the floor's: drop a block while the bytes
			 * from it on exceed the bound, or its successor began
			 * before the age cutoff (all of it is older) */
			int g = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
			while (!g && k.mv_size == 9 && ((char *)k.mv_data)[0] == 'I' &&
			       v.mv_size == sizeof(struct dbfs_feed_block)) {
				struct dbfs_feed_block b, nb;
				uint64_t first = dbfs_get_be64((unsigned char *)k.mv_data + 1);
				memcpy(&b, v.mv_data, sizeof(b));
				bool over = l->max_bytes && m.bytes > b.bytes_before &&
					    m.bytes - b.bytes_before > l->max_bytes;
				g = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
				bool have_next = !g && k.mv_size == 9 &&
						 ((char *)k.mv_data)[0] == 'I' &&
						 v.mv_size == sizeof(nb);
				uint64_t next_first =
				    have_next ? dbfs_get_be64((unsigned char *)k.mv_data + 1)
					      : m.next_seq;
				uint64_t next_ns = m.last_ns;
				if (have_next) {
					memcpy(&nb, v.mv_data, sizeof(nb));
					next_ns = nb.first_ns;
				}
				bool old =
				    cutoff && next_ns < cutoff && (have_next || m.last_ns < cutoff);
				if (!over && !old)
					break;
				if (next_first > *want)
					*want = next_first;
				(void)first;
				if (!have_next)
					break;
			}
			mdb_cursor_close(cur);
		}
	}
	dbfs_read_end(fs, txn);
	return rc;
}

static void expire_subs(struct dbfs *fs, uint64_t idle_sec)
{
	char(*names)[DBFS_FEED_SUB_MAX + 1];
	size_t n;
	if (!idle_sec || sub_names(fs, &names, &n))
		return;
	uint64_t now = now_ns();
	for (size_t i = 0; i < n; i++) {
		struct dbfs_feed_sub_info info;
		if (dbfs_feed_sub_get(fs, names[i], &info) || info.open)
			continue;
		if (now > info.active_ns && now - info.active_ns >= idle_sec * 1000000000ull &&
		    sub_delete(fs, names[i]) == 0)
			atomic_fetch_add(&fs->feed->subs_expired, 1);
	}
	free(names);
}

int dbfs_feed_tick(struct dbfs *fs)
{
	struct dbfs_feed *f = fs->feed;
	struct dbfs_feed_limits l;
	uint64_t want;
	int rc;
	/* nothing to trim on a store that went read-only after an I/O error */
	if (!f || fs->opt.read_only || atomic_load(&fs->io_failed))
		return 0;
	dbfs_feed_get_limits(fs, &l);
	rc = floor_wanted(fs, &l, &want);
	uint64_t fl = atomic_load(&f->floor);
	if (!rc && want > fl) {
		struct trim_ctx c = {want};
		rc = dbfs_write(fs, trim_fn, &c);
		if (!rc) {
			atomic_store(&f->floor, want);
			atomic_fetch_add(&f->trimmed, want - fl);
		}
	}
	uint64_t last = atomic_load(&f->last_seq);
	if (!rc && (want > fl || last != f->ticked_seq)) {
		int qrc;
		QCALL(fs, qrc, mfsq_tick(f->q));
		if (!qrc)
			f->ticked_seq = last;
		else
			rc = dbfs_queue_err(qrc);
	}
	expire_subs(fs, l.sub_idle_sec);
	int mrc = save_meta(fs);
	return rc ? rc : mrc;
}
