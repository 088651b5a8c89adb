/* The change feed in the manager mount (see feed_fs.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "answer.h"
#include "buf.h"
#include "feed_fs.h"
#include "feed_line.h"
#include "feed_spec.h"
#include "kv.h"
#include "log.h"
#include "loop.h"

#define BATCH 64
/* Bytes of lines one handle buffers before it stops reading the store. */
#define HIGH_WATER (256u << 10)

/* ---- dynamic inodes: events@SPEC and subscription files ---- */

struct dyn {
	fuse_ino_t ino;
	uint32_t id;
	enum mfs_feed_kind kind;
	char name[NAME_MAX + 1];
	uint64_t nlookup;
	struct dyn *next;
};

/* A read waiting for events. */
struct wait {
	fuse_req_t req;
	size_t size;
	struct wait *next;
};

struct handle {
	pthread_mutex_t lock;
	struct handle *prev, *next; /* hub.list; hub.lock */
	struct dbfs *fs;
	struct dbfs_feed_reader *r; /* NULL: write-only (acks) or detached */
	char sub[DBFS_FEED_SUB_MAX + 1]; /* "" ephemeral */
	bool json;
	bool closed;                /* its DBFS went: end of file */
	int error;                  /* a read error to hand to the next read */
	struct mfs_feed_filter filter;
	bool held;                  /* holds filter.settle_ms on fs (ephemeral) */
	struct mfs_buf out;         /* lines not yet read */
	size_t out_off;
	uint64_t buf_max;           /* highest seq that went into out */
	uint64_t delivered;         /* highest seq with bytes handed to a read */
	uint64_t acked;             /* highest seq acknowledged */
	uint64_t read_max;          /* highest seq read from the store */
	struct wait *waits, **waits_tail;
	struct fuse_pollhandle *ph;
};

static struct {
	pthread_mutex_t lock;
	struct handle *list;
	struct dyn *dyns;
	fuse_ino_t next_ino;
	pthread_once_t once;
	int efd;
	/* interrupted requests, for the waker: their own lock, taken alone */
	pthread_mutex_t intr_lock;
	fuse_req_t *intr;
	size_t nintr, intr_cap;
} hub = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.next_ino = MFS_FEED_DYN_INO,
	.once = PTHREAD_ONCE_INIT,
	.efd = -1,
	.intr_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void kick(void)
{
	uint64_t one = 1;
	if (hub.efd >= 0 && write(hub.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		mfs_warn("feed: cannot wake the waker: %s", strerror(errno));
}

/* The commit callback of every DBFS whose feed is read: must not block. */
static void on_commit(void *arg, uint64_t last_seq)
{
	(void)arg;
	(void)last_seq;
	kick();
}

/* libfuse calls this with the request's own lock held (and at once, from
 * fuse_req_interrupt_func, when the interrupt came first): it only notes
 * the request for the waker, which answers it. */
static void on_interrupt(fuse_req_t req, void *data)
{
	(void)data;
	pthread_mutex_lock(&hub.intr_lock);
	if (hub.nintr == hub.intr_cap) {
		size_t cap = hub.intr_cap ? 2 * hub.intr_cap : 16;
		fuse_req_t *p = realloc(hub.intr, cap * sizeof(*p));
		if (p) {
			hub.intr = p;
			hub.intr_cap = cap;
		}
	}
	if (hub.nintr < hub.intr_cap)
		hub.intr[hub.nintr++] = req;
	pthread_mutex_unlock(&hub.intr_lock);
	kick();
}

/* No interrupt callback runs or will run for req, and the waker's list
 * forgets it: before req is answered (its memory is then reused). */
static void forget_interrupt(fuse_req_t req)
{
	fuse_req_interrupt_func(req, NULL, NULL); /* waits for a callback running */
	pthread_mutex_lock(&hub.intr_lock);
	for (size_t i = 0; i < hub.nintr;)
		if (hub.intr[i] == req)
			hub.intr[i] = hub.intr[--hub.nintr];
		else
			i++;
	pthread_mutex_unlock(&hub.intr_lock);
}

static bool interrupted(fuse_req_t req)
{
	bool found = false;
	pthread_mutex_lock(&hub.intr_lock);
	for (size_t i = 0; i < hub.nintr && !found; i++)
		found = hub.intr[i] == req;
	pthread_mutex_unlock(&hub.intr_lock);
	return found;
}

/* ---- reading into a handle's buffer ---- */

static size_t avail(const struct handle *h)
{
	return h->out.len - h->out_off;
}

/* Read what the store has (never waiting) into h->out, filtered and
 * formatted, until `want` bytes are there (a read's size: one request
 * carries as many events as it can) or the store has no more. h->lock
 * held. */
static void fill(struct handle *h, size_t want)
{
	struct dbfs_event ev[BATCH];

	if (want > HIGH_WATER)
		want = HIGH_WATER;
	if (!h->r || h->error || avail(h) >= want)
		return;
	if (h->out_off == h->out.len) {
		h->out_off = 0;
		h->out.len = 0;
	}
	for (int round = 0; round < 256 && avail(h) < want; round++) {
		size_t n = 0;
		int rc = dbfs_feed_read(h->r, ev, BATCH, &n, 0);
		if (rc == -EAGAIN || rc == -ETIMEDOUT)
			break;
		if (rc) {
			h->error = rc;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			uint64_t last = ev[i].op == DBFS_EV_GAP ? ev[i].gap_next - 1 : ev[i].seq;
			if (last > h->read_max)
				h->read_max = last;
			if (!mfs_feed_filter_match(&h->filter, &ev[i]))
				continue;
			(h->json ? mfs_feed_line_json : mfs_feed_line_text)(&ev[i], &h->out);
			h->buf_max = h->read_max;
		}
		if (h->out.oom) {
			h->error = -ENOMEM;
			break;
		}
		/* Events that only the filter saw are acknowledged for a durable
		 * reader once everything it was handed is acknowledged: they
		 * would only come back to be filtered again. */
		if (!avail(h) && h->sub[0] && h->acked >= h->delivered && h->read_max > h->acked) {
			if (!dbfs_feed_ack(h->r, h->read_max))
				h->acked = h->read_max;
		}
	}
}

/* Take up to size bytes of h->out into a private copy (the reply must not
 * point into a handle that a release may free). h->lock held. */
static char *take(struct handle *h, size_t size, size_t *n)
{
	size_t k = avail(h) < size ? avail(h) : size;
	char *p = malloc(k ? k : 1);
	if (!p) {
		*n = 0;
		return NULL;
	}
	memcpy(p, h->out.p + h->out_off, k);
	h->out_off += k;
	h->delivered = h->buf_max;
	*n = k;
	return p;
}

/* What answering a waiting read will send. */
struct answer {
	fuse_req_t req;
	int err;      /* when no data */
	char *data;
	size_t n;
	struct answer *next;
};

/* Pop the waits of h that can be answered now into *list. h->lock held. */
static void answer_waits(struct handle *h, struct answer **list)
{
	struct wait **pp = &h->waits;
	while (*pp) {
		struct wait *w = *pp;
		struct answer *a = calloc(1, sizeof(*a));
		if (!a)
			return; /* stays waiting: answered at the next wake */
		a->req = w->req;
		if (interrupted(w->req)) {
			a->err = EINTR;
		} else if (avail(h)) {
			a->data = take(h, w->size, &a->n);
			if (!a->data)
				a->err = ENOMEM;
		} else if (h->error) {
			a->err = -h->error;
			h->error = 0;
		} else if (h->closed) {
			a->err = 0; /* end of file */
		} else {
			free(a);
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		free(w);
		a->next = *list;
		*list = a;
	}
	h->waits_tail = pp;
}

static void send_answers(struct answer *a)
{
	while (a) {
		struct answer *next = a->next;
		forget_interrupt(a->req);
		if (a->data)
			fuse_reply_buf(a->req, a->data, a->n);
		else if (a->err)
			fuse_reply_err(a->req, a->err);
		else
			fuse_reply_buf(a->req, NULL, 0);
		free(a->data);
		free(a);
		a = next;
	}
}

/* The waker: one thread for every feed of the process. */
static void *waker(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t v;
		if (read(hub.efd, &v, sizeof(v)) < 0 && errno != EINTR && errno != EAGAIN) {
			mfs_warn("feed: waker stops: %s", strerror(errno));
			return NULL;
		}
		struct answer *answers = NULL;
		struct fuse_pollhandle *phs[64];
		size_t nph = 0;
		bool again = false;
		pthread_mutex_lock(&hub.lock);
		for (struct handle *h = hub.list; h; h = h->next) {
			pthread_mutex_lock(&h->lock);
			if (h->waits || h->ph) {
				fill(h, h->waits ? h->waits->size : 1);
				answer_waits(h, &answers);
				if (h->ph && (avail(h) || h->closed || h->error)) {
					if (nph < 64) {
						phs[nph++] = h->ph;
						h->ph = NULL;
					} else {
						again = true;
					}
				}
				/* filtered rounds may have left more to read */
				if (h->waits && h->r && !h->error && !h->closed &&
				    dbfs_feed_ready(h->r))
					again = true;
			}
			pthread_mutex_unlock(&h->lock);
		}
		pthread_mutex_unlock(&hub.lock);
		/* interrupts of requests no handle waits for any more are stale */
		send_answers(answers);
		for (size_t i = 0; i < nph; i++) {
			fuse_lowlevel_notify_poll(phs[i]);
			fuse_pollhandle_destroy(phs[i]);
		}
		if (again)
			kick();
	}
	return NULL;
}

static void start_waker(void)
{
	pthread_t t;
	pthread_attr_t a;

	hub.efd = eventfd(0, EFD_CLOEXEC);
	if (hub.efd < 0) {
		mfs_err("feed: eventfd: %s", strerror(errno));
		return;
	}
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, waker, NULL)) {
		mfs_err("feed: cannot start the waker thread");
		close(hub.efd);
		hub.efd = -1;
	}
	pthread_attr_destroy(&a);
}

/* ---- permissions and nodes ---- */

bool mfs_feed_may(struct mfs_manager *mgr, const struct mfs_dbfs *d, const struct mfs_caller *who)
{
	if (who->uid == 0 || who->uid == mgr->uid || who->uid == d->conf.owner)
		return true;
	struct mfs_kvlist l;
	char err[64];
	bool all = false;
	if (d->conf.opts[0] &&
	    !mfs_kv_parse(d->conf.opts, strlen(d->conf.opts), 0, &l, err, sizeof(err))) {
		for (size_t i = 0; i < l.n; i++)
			if (!strcmp(l.items[i].key, "feed_access") && l.items[i].value)
				all = !strcmp(l.items[i].value, "all");
		mfs_kv_free(&l);
	}
	return all;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct mfs_manager *mgr_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* A subscription file's name: SUB or SUB.json, SUB of [A-Za-z0-9._-]. */
static int sub_name(const char *name, char *sub, bool *json)
{
	size_t n = strlen(name);
	*json = n > 5 && !strcmp(name + n - 5, ".json");
	if (*json)
		n -= 5;
	if (!n || n > DBFS_FEED_SUB_MAX)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -ENOENT;
	}
	memcpy(sub, name, n);
	sub[n] = '\0';
	return 0;
}

/* The mounted DBFS id as `who` may read it: its dbfs in *fs. mgr->lock
 * held. -ENOENT, -EACCES, -ENODEV (not mounted), -EOPNOTSUPP (feed=off). */
static int feed_of(struct mfs_manager *mgr, uint32_t id, const struct mfs_caller *who,
		   struct dbfs **fs)
{
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (!d)
		return -ENOENT;
	if (!mfs_feed_may(mgr, d, who))
		return -EACCES;
	if (d->state != MFS_MOUNTED || !d->fs)
		return -ENODEV;
	if (!dbfs_feed_enabled(d->fs))
		return -EOPNOTSUPP;
	*fs = d->fs;
	return 0;
}

static void stat_file(struct mfs_manager *mgr, const struct mfs_dbfs *d, bool sub,
		      struct stat *st)
{
	st->st_mode = S_IFREG | (sub ? 0600 : 0400);
	st->st_nlink = 1;
	st->st_uid = d->conf.owner;
	st->st_gid = getegid();
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)mgr->started_at;
}

int mfs_feed_stat_dyn(struct mfs_manager *mgr, fuse_ino_t ino, struct stat *st)
{
	int rc = -ENOENT;
	uint32_t id = 0;
	enum mfs_feed_kind kind = MFS_FEED_EVENTS_AT;

	pthread_mutex_lock(&hub.lock);
	for (struct dyn *x = hub.dyns; x; x = x->next)
		if (x->ino == ino) {
			id = x->id;
			kind = x->kind;
			rc = 0;
		}
	pthread_mutex_unlock(&hub.lock);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (d)
		stat_file(mgr, d, kind == MFS_FEED_SUB, st);
	pthread_mutex_unlock(&mgr->lock);
	return d ? 0 : -ENOENT;
}

static fuse_ino_t dyn_get(uint32_t id, enum mfs_feed_kind kind, const char *name)
{
	fuse_ino_t ino = 0;
	pthread_mutex_lock(&hub.lock);
	for (struct dyn *x = hub.dyns; x && !ino; x = x->next)
		if (x->id == id && x->kind == kind && !strcmp(x->name, name)) {
			x->nlookup++;
			ino = x->ino;
		}
	if (!ino) {
		struct dyn *x = calloc(1, sizeof(*x));
		if (x) {
			x->ino = ino = hub.next_ino++;
			x->id = id;
			x->kind = kind;
			snprintf(x->name, sizeof(x->name), "%s", name);
			x->nlookup = 1;
			x->next = hub.dyns;
			hub.dyns = x;
		}
	}
	pthread_mutex_unlock(&hub.lock);
	return ino;
}

void mfs_feed_forget(fuse_ino_t ino, uint64_t n)
{
	pthread_mutex_lock(&hub.lock);
	for (struct dyn **pp = &hub.dyns; *pp; pp = &(*pp)->next)
		if ((*pp)->ino == ino) {
			struct dyn *x = *pp;
			x->nlookup = x->nlookup > n ? x->nlookup - n : 0;
			if (!x->nlookup) {
				*pp = x->next;
				free(x);
			}
			break;
		}
	pthread_mutex_unlock(&hub.lock);
}

static bool dyn_find(fuse_ino_t ino, uint32_t *id, enum mfs_feed_kind *kind, char *name)
{
	bool found = false;
	pthread_mutex_lock(&hub.lock);
	for (struct dyn *x = hub.dyns; x && !found; x = x->next)
		if (x->ino == ino) {
			*id = x->id;
			*kind = x->kind;
			strcpy(name, x->name);
			found = true;
		}
	pthread_mutex_unlock(&hub.lock);
	return found;
}

/* Refuse a feed request with a reason for user.mfs.error. */
static void refuse(fuse_req_t req, const char *what, int rc, const char *reason)
{
	struct mfs_caller who;
	mfs_caller_from_req(req, &who);
	mfs_answer_refused(&who, what, rc, reason);
	fuse_reply_err(req, -rc);
}

bool mfs_feed_lookup(fuse_req_t req, uint32_t id, bool in_subs, const char *name)
{
	struct mfs_manager *mgr = mgr_of(req);
	char err[256] = "";
	fuse_ino_t ino = 0;
	enum mfs_feed_kind kind;

	if (!in_subs) {
		bool json;
		struct mfs_feed_pos pos;
		struct mfs_feed_filter f;
		if (strncmp(name, "events", 6) || !strchr(name, '@'))
			return false;
		int rc = mfs_feed_name_parse(name, realtime_ns(), &json, &pos, &f, err, sizeof(err));
		if (rc == -ENOENT)
			return false;
		if (rc) {
			refuse(req, name, rc, err);
			return true;
		}
		kind = MFS_FEED_EVENTS_AT;
	} else {
		char sub[DBFS_FEED_SUB_MAX + 1];
		bool json;
		if (sub_name(name, sub, &json)) {
			fuse_reply_err(req, ENOENT);
			return true;
		}
		/* only a subscription that exists */
		struct mfs_caller who;
		struct dbfs *fs = NULL;
		struct dbfs_feed_sub_info info;
		mfs_caller_from_req(req, &who);
		pthread_mutex_lock(&hub.lock); /* keeps fs (mfs_feed_detach) */
		pthread_mutex_lock(&mgr->lock);
		int rc = feed_of(mgr, id, &who, &fs);
		pthread_mutex_unlock(&mgr->lock);
		if (!rc)
			rc = dbfs_feed_sub_get(fs, sub, &info);
		pthread_mutex_unlock(&hub.lock);
		if (rc) {
			fuse_reply_err(req, -rc);
			return true;
		}
		kind = MFS_FEED_SUB;
	}
	ino = dyn_get(id, kind, name);
	if (!ino) {
		fuse_reply_err(req, ENOMEM);
		return true;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	if (mfs_feed_stat_dyn(mgr, ino, &e.attr)) {
		mfs_feed_forget(ino, 1);
		fuse_reply_err(req, ENOENT);
		return true;
	}
	e.ino = ino;
	fuse_reply_entry(req, &e);
	return true;
}

struct list_ctx {
	void (*add)(void *arg, const char *name);
	void *arg;
};

static int list_one(void *a, const struct dbfs_feed_sub_info *info)
{
	struct list_ctx *c = a;
	char json[DBFS_FEED_SUB_MAX + 8];
	c->add(c->arg, info->name);
	snprintf(json, sizeof(json), "%s.json", info->name);
	c->add(c->arg, json);
	return 0;
}

int mfs_feed_list_subs(struct mfs_manager *mgr, uint32_t id,
		       void (*add)(void *arg, const char *name), void *arg)
{
	struct dbfs *fs;
	struct mfs_caller root = {0};
	struct list_ctx c = {add, arg};

	pthread_mutex_lock(&hub.lock);
	pthread_mutex_lock(&mgr->lock);
	int rc = feed_of(mgr, id, &root, &fs);
	pthread_mutex_unlock(&mgr->lock);
	if (!rc)
		rc = dbfs_feed_sub_list(fs, list_one, &c);
	pthread_mutex_unlock(&hub.lock);
	return rc == -EOPNOTSUPP || rc == -ENODEV ? 0 : rc;
}

/* ---- open, read, write, poll, release ---- */

void mfs_feed_open(fuse_req_t req, fuse_ino_t ino, uint32_t id, enum mfs_feed_kind kind,
		   struct fuse_file_info *fi)
{
	struct mfs_manager *mgr = mgr_of(req);
	struct mfs_caller who;
	struct mfs_feed_pos pos = {0};
	char name[NAME_MAX + 1] = "events", err[256] = "";
	struct handle *h;
	struct dbfs *fs = NULL;
	int rc = 0;
	int acc = fi->flags & O_ACCMODE;

	mfs_caller_from_req(req, &who);
	if (ino >= MFS_FEED_DYN_INO && !dyn_find(ino, &id, &kind, name)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->waits_tail = &h->waits;
	if (kind == MFS_FEED_SUB) {
		rc = sub_name(name, h->sub, &h->json);
	} else {
		h->json = kind == MFS_FEED_EVENTS_JSON;
		if (kind == MFS_FEED_EVENTS_AT)
			rc = mfs_feed_name_parse(name, realtime_ns(), &h->json, &pos, &h->filter, err,
						 sizeof(err));
		if (!rc && acc != O_RDONLY)
			rc = -EACCES;
	}
	mfs_feed_pos_fix(&pos);
	pthread_once(&hub.once, start_waker);
	if (!rc && hub.efd < 0)
		rc = -ENOMEM;
	pthread_mutex_lock(&hub.lock);
	if (!rc) {
		pthread_mutex_lock(&mgr->lock);
		rc = feed_of(mgr, id, &who, &fs);
		pthread_mutex_unlock(&mgr->lock);
	}
	if (!rc && h->sub[0]) {
		struct dbfs_feed_sub_info info;
		rc = dbfs_feed_sub_get(fs, h->sub, &info);
		if (!rc)
			rc = mfs_feed_filter_parse(info.spec, &h->filter, err, sizeof(err));
		if (!rc)
			h->acked = info.next_seq ? info.next_seq - 1 : 0;
	}
	h->fs = fs;
	if (!rc && acc != O_WRONLY) {
		dbfs_feed_set_notify(fs, on_commit, NULL);
		rc = dbfs_feed_open(fs, h->sub[0] ? h->sub : NULL,
				    pos.start.from == DBFS_FEED_NOW || h->sub[0] ? NULL : &pos.start,
				    &h->r);
		if (rc == -ESTALE)
			snprintf(err, sizeof(err),
				 "the position names another store (or this one before it "
				 "was re-created): its UUID is not this feed's");
		else if (rc == -EBUSY)
			snprintf(err, sizeof(err), "subscription %s is open in another reader",
				 h->sub);
		else if (rc == -ERANGE)
			snprintf(err, sizeof(err), "sequence number beyond the end of the feed");
	}
	/* an ephemeral reader's settle period is wanted while it is open (a
	 * durable one's always: feed_settle.c) */
	if (!rc && !h->sub[0] && h->filter.settle_ms && h->r) {
		rc = dbfs_settle_hold(fs, h->filter.settle_ms);
		h->held = !rc;
		if (rc == -ENOSPC)
			snprintf(err, sizeof(err), "this DBFS has %u distinct settle periods already",
				 DBFS_SETTLE_MAX);
		if (rc) {
			dbfs_feed_close(h->r);
			h->r = NULL;
		}
	}
	if (!rc) {
		h->next = hub.list;
		if (hub.list)
			hub.list->prev = h;
		hub.list = h;
	}
	pthread_mutex_unlock(&hub.lock);
	if (rc) {
		mfs_buf_free(&h->out);
		pthread_mutex_destroy(&h->lock);
		free(h);
		if (err[0])
			refuse(req, name, rc, err);
		else
			fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 1;
	fi->nonseekable = 1;
	fuse_reply_open(req, fi);
}

void mfs_feed_read(fuse_req_t req, size_t size, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	char *data = NULL;
	size_t n = 0;
	int err = 0;

	pthread_mutex_lock(&h->lock);
	if (!h->r && !h->closed) {
		err = EBADF; /* write-only */
		goto answer;
	}
	fill(h, size);
	if (avail(h)) {
		data = take(h, size, &n);
		if (!data)
			err = ENOMEM;
	} else if (h->error) {
		err = -h->error;
		h->error = 0;
	} else if (h->closed) {
		/* end of file */
	} else if (fi->flags & O_NONBLOCK) {
		err = EAGAIN;
	} else {
		struct wait *w = calloc(1, sizeof(*w));
		if (!w) {
			err = ENOMEM;
			goto answer;
		}
		w->req = req;
		w->size = size;
		*h->waits_tail = w;
		h->waits_tail = &w->next;
		fuse_req_interrupt_func(req, on_interrupt, NULL);
		pthread_mutex_unlock(&h->lock);
		return; /* answered by the waker */
	}
answer:
	pthread_mutex_unlock(&h->lock);
	if (data)
		fuse_reply_buf(req, data, n);
	else if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, NULL, 0);
	free(data);
}

/* The highest decimal number in buf (lines or words of digits). */
static int ack_value(const char *buf, size_t size, uint64_t *seq)
{
	uint64_t best = 0, v = 0;
	bool any = false, in = false;
	for (size_t i = 0; i <= size; i++) {
		char c = i < size ? buf[i] : '\n';
		if (c >= '0' && c <= '9') {
			if (v > (UINT64_MAX - 9) / 10)
				return -EINVAL;
			v = v * 10 + (uint64_t)(c - '0');
			in = true;
		} else if (c == '\n' || c == ' ' || c == '\t') {
			if (in && v > best)
				best = v;
			any |= in;
			in = false;
			v = 0;
		} else {
			return -EINVAL;
		}
	}
	if (!any)
		return -EINVAL;
	*seq = best;
	return 0;
}

void mfs_feed_write(fuse_req_t req, const char *buf, size_t size, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	uint64_t seq;
	int rc = h->sub[0] ? ack_value(buf, size, &seq) : -EBADF;

	if (!rc && h->r) {
		pthread_mutex_lock(&h->lock);
		rc = dbfs_feed_ack(h->r, seq);
		if (!rc && seq > h->acked)
			h->acked = seq;
		pthread_mutex_unlock(&h->lock);
	} else if (!rc) {
		/* write-only: through the open reader of the subscription (it
		 * then knows, for the acks of what its filters drop), else on the
		 * stored position */
		rc = -ENODEV;
		pthread_mutex_lock(&hub.lock);
		struct handle *o = hub.list;
		while (o && !(o->fs == h->fs && o->r && !strcmp(o->sub, h->sub)))
			o = o->next;
		if (o) {
			pthread_mutex_lock(&o->lock);
			rc = dbfs_feed_ack(o->r, seq);
			if (!rc && seq > o->acked)
				o->acked = seq;
			pthread_mutex_unlock(&o->lock);
		} else if (!h->closed && h->fs) {
			rc = dbfs_feed_sub_ack(h->fs, h->sub, seq);
		}
		pthread_mutex_unlock(&hub.lock);
	}
	if (rc == -ERANGE) {
		refuse(req, h->sub, rc,
		       "ack beyond the events the subscription was given (or the feed's end)");
		return;
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_write(req, size);
}

void mfs_feed_poll(fuse_req_t req, struct fuse_file_info *fi, struct fuse_pollhandle *ph)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	unsigned revents = 0;
	struct fuse_pollhandle *old = NULL;

	pthread_mutex_lock(&h->lock);
	if (h->r)
		fill(h, 1);
	if (avail(h) || h->error || h->closed)
		revents = POLLIN | POLLRDNORM;
	if (h->sub[0])
		revents |= POLLOUT | POLLWRNORM;
	if (ph) {
		old = h->ph;
		h->ph = ph;
	}
	pthread_mutex_unlock(&h->lock);
	if (old)
		fuse_pollhandle_destroy(old);
	fuse_reply_poll(req, revents);
}

void mfs_feed_release(fuse_req_t req, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct answer *answers = NULL;

	pthread_mutex_lock(&hub.lock);
	if (h->prev)
		h->prev->next = h->next;
	else if (hub.list == h)
		hub.list = h->next;
	if (h->next)
		h->next->prev = h->prev;
	if (h->held && h->fs) /* under hub.lock: mfs_feed_detach cannot take fs away */
		dbfs_settle_release(h->fs, h->filter.settle_ms);
	h->held = false;
	pthread_mutex_unlock(&hub.lock);
	pthread_mutex_lock(&h->lock);
	h->closed = true;
	h->error = 0;
	h->out_off = h->out.len;
	answer_waits(h, &answers); /* none should wait: end of file */
	pthread_mutex_unlock(&h->lock);
	send_answers(answers);
	if (h->ph)
		fuse_pollhandle_destroy(h->ph);
	dbfs_feed_close(h->r);
	mfs_buf_free(&h->out);
	pthread_mutex_destroy(&h->lock);
	free(h);
	fuse_reply_err(req, 0);
}

void mfs_feed_detach(struct dbfs *fs)
{
	bool any = false;

	dbfs_feed_set_notify(fs, NULL, NULL);
	pthread_mutex_lock(&hub.lock);
	for (struct handle *h = hub.list; h; h = h->next) {
		if (h->fs != fs)
			continue;
		pthread_mutex_lock(&h->lock);
		dbfs_feed_close(h->r);
		h->r = NULL;
		h->fs = NULL;
		h->held = false; /* the store goes, its holds with it */
		h->closed = true;
		any = true;
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&hub.lock);
	if (any)
		kick();
}
