/*
 * The feed's hub and its waker (feed_fs_private.h): the open handles'
 * buffers filled from the stores, the reads that wait, the interrupts that
 * end them, and the one thread that answers them when a commit wakes it.
 */
#include "feed_fs_private.h"

struct mfs_feed_hub mfs_feed_hub = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.closed = PTHREAD_COND_INITIALIZER,
	.next_ino = MFS_FEED_DYN_INO,
	.once = PTHREAD_ONCE_INIT,
	.efd = -1,
	.intr_lock = PTHREAD_MUTEX_INITIALIZER,
};

void mfs_feed_kick(void)
{
	uint64_t one = 1;
	if (mfs_feed_hub.efd >= 0 && write(mfs_feed_hub.efd, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		mfs_warn("feed: cannot wake the waker: %s", strerror(errno));
}

/* The commit callback of every DBFS whose feed is read: must not block. */
void mfs_feed_on_commit(void *arg, uint64_t last_seq)
{
	(void)arg;
	(void)last_seq;
	mfs_feed_kick();
}

/* libfuse calls this with the request's own lock held (and at once, from
 * fuse_req_interrupt_func, when the interrupt came first): it only notes
 * the request for the waker, which answers it. */
void mfs_feed_on_interrupt(fuse_req_t req, void *data)
{
	(void)data;
	pthread_mutex_lock(&mfs_feed_hub.intr_lock);
	if (mfs_feed_hub.nintr == mfs_feed_hub.intr_cap) {
		size_t cap = mfs_feed_hub.intr_cap ? 2 * mfs_feed_hub.intr_cap : 16;
		fuse_req_t *p = realloc(mfs_feed_hub.intr, cap * sizeof(*p));
		if (p) {
			mfs_feed_hub.intr = p;
			mfs_feed_hub.intr_cap = cap;
		}
	}
	if (mfs_feed_hub.nintr < mfs_feed_hub.intr_cap)
		mfs_feed_hub.intr[mfs_feed_hub.nintr++] = req;
	pthread_mutex_unlock(&mfs_feed_hub.intr_lock);
	mfs_feed_kick();
}

/* No interrupt callback runs or will run for req, and the waker's list
 * forgets it: before req is answered (its memory is then reused). */
static void forget_interrupt(fuse_req_t req)
{
	fuse_req_interrupt_func(req, NULL, NULL); /* waits for a callback running */
	pthread_mutex_lock(&mfs_feed_hub.intr_lock);
	for (size_t i = 0; i < mfs_feed_hub.nintr;)
		if (mfs_feed_hub.intr[i] == req)
			mfs_feed_hub.intr[i] = mfs_feed_hub.intr[--mfs_feed_hub.nintr];
		else
			i++;
	pthread_mutex_unlock(&mfs_feed_hub.intr_lock);
}

static bool interrupted(fuse_req_t req)
{
	bool found = false;
	pthread_mutex_lock(&mfs_feed_hub.intr_lock);
	for (size_t i = 0; i < mfs_feed_hub.nintr && !found; i++)
		found = mfs_feed_hub.intr[i] == req;
	pthread_mutex_unlock(&mfs_feed_hub.intr_lock);
	return found;
}

size_t mfs_feed_avail(const struct handle *h)
{
	return h->out.len - h->out_off;
}

/* Read what the store has (never waiting) into h->out, filtered and
 * formatted, until `want` bytes are there (a read's size: one request
 * carries as many events as it can) or the store has no more. h->lock
 * held. */
void mfs_feed_fill(struct handle *h, size_t want)
{
	struct dbfs_event ev[BATCH];

	if (want > HIGH_WATER)
		want = HIGH_WATER;
	if (!h->r || h->error || mfs_feed_avail(h) >= want)
		return;
	/* what was taken goes first: else a reader that takes a read's size
	 * while a fill overshoots it never empties the buffer, which would
	 * grow by all it ever read (the overshoot moved is under a batch) */
	if (h->out_off) {
		size_t left = h->out.len - h->out_off;
		memmove(h->out.p, h->out.p + h->out_off, left);
		h->out.len = left;
		h->out_off = 0;
		if (left)
			h->out.p[left] = '\0';
	}
	for (int round = 0; round < 256 && mfs_feed_avail(h) < want; round++) {
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
		if (!mfs_feed_avail(h) && h->sub[0] && h->acked >= h->delivered &&
		    h->read_max > h->acked) {
			if (!dbfs_feed_ack(h->r, h->read_max))
				h->acked = h->read_max;
		}
	}
}

/* Take up to size bytes of h->out into a private copy (the reply must not
 * point into a handle that a release may free). h->lock held. */
char *mfs_feed_take(struct handle *h, size_t size, size_t *n)
{
	size_t k = mfs_feed_avail(h) < size ? mfs_feed_avail(h) : size;
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

/* Pop the waits of h that can be answered now into *list. h->lock held. */
void mfs_feed_answer_waits(struct handle *h, struct answer **list)
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
		} else if (mfs_feed_avail(h)) {
			a->data = mfs_feed_take(h, w->size, &a->n);
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

void mfs_feed_send_answers(struct answer *a)
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
		if (read(mfs_feed_hub.efd, &v, sizeof(v)) < 0 && errno != EINTR &&
		    errno != EAGAIN) {
			mfs_warn("feed: waker stops: %s", strerror(errno));
			return NULL;
		}
		struct answer *answers = NULL;
		struct fuse_pollhandle *phs[64];
		size_t nph = 0;
		bool again = false;
		pthread_mutex_lock(&mfs_feed_hub.lock);
		for (struct handle *h = mfs_feed_hub.list; h; h = h->next) {
			pthread_mutex_lock(&h->lock);
			if (h->waits || h->ph) {
				mfs_feed_fill(h, h->waits ? h->waits->size : 1);
				mfs_feed_answer_waits(h, &answers);
				if (h->ph && (mfs_feed_avail(h) || h->closed || h->error)) {
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
		pthread_mutex_unlock(&mfs_feed_hub.lock);
		/* interrupts of requests no handle waits for any more are stale */
		mfs_feed_send_answers(answers);
		for (size_t i = 0; i < nph; i++) {
			fuse_lowlevel_notify_poll(phs[i]);
			fuse_pollhandle_destroy(phs[i]);
		}
		if (again)
			mfs_feed_kick();
	}
	return NULL;
}

void mfs_feed_start_waker(void)
{
	pthread_t t;
	pthread_attr_t a;

	mfs_feed_hub.efd = eventfd(0, EFD_CLOEXEC);
	if (mfs_feed_hub.efd < 0) {
		mfs_err("feed: eventfd: %s", strerror(errno));
		return;
	}
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, waker, NULL)) {
		mfs_err("feed: cannot start the waker thread");
		close(mfs_feed_hub.efd);
		mfs_feed_hub.efd = -1;
	}
	pthread_attr_destroy(&a);
}
