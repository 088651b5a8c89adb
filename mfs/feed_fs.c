/* The change feed in the manager mount (see feed_fs.h): opening a feed
 * file, reading, acknowledging, polling and closing it, and a store's
 * going. The hub, buffers and waker: feed_wake.c; nodes: feed_nodes.c. */
#include "feed_fs_private.h"

/*
 * A durable subscription has one reader at a time. The kernel sends a
 * reader's release after its close() has returned, so a reader that opens
 * the subscription at once after another closed it (`head -1 sub; cat
 * sub`) can find it still open here: it waits this long for a release
 * (over FUSE over io_uring, the release may come on another CPU's queue,
 * after the open), and only then gets EBUSY.
 */
#define SUB_BUSY_WAIT_NS 1000000000ull

/* mfs_feed_hub.lock held: wait until some reader closes, or 10 ms (a
 * reader of another process sharing the store signals nothing here). */
static void wait_for_a_close(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 10000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&mfs_feed_hub.closed, &mfs_feed_hub.lock, &ts);
}

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
	if (ino >= MFS_FEED_DYN_INO && !mfs_feed_dyn_find(ino, &id, &kind, name)) {
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
		rc = mfs_feed_sub_name(name, h->sub, &h->json);
	} else {
		h->json = kind == MFS_FEED_EVENTS_JSON;
		if (kind == MFS_FEED_EVENTS_AT)
			rc = mfs_feed_name_parse(name, realtime_ns(), &h->json, &pos, &h->filter,
						 err, sizeof(err));
		if (!rc && acc != O_RDONLY)
			rc = -EACCES;
	}
	mfs_feed_pos_fix(&pos);
	pthread_once(&mfs_feed_hub.once, mfs_feed_start_waker);
	if (!rc && mfs_feed_hub.efd < 0)
		rc = -ENOMEM;
	pthread_mutex_lock(&mfs_feed_hub.lock);
	if (!rc) {
		pthread_mutex_lock(&mgr->lock);
		rc = mfs_feed_of(mgr, id, &who, &fs);
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
		dbfs_feed_set_notify(fs, mfs_feed_on_commit, NULL);
		rc = dbfs_feed_open(
		    fs, h->sub[0] ? h->sub : NULL,
		    pos.start.from == DBFS_FEED_NOW || h->sub[0] ? NULL : &pos.start, &h->r);
		uint64_t give_up = mfs_now_ns() + SUB_BUSY_WAIT_NS;
		while (rc == -EBUSY && h->sub[0] && mfs_now_ns() < give_up) {
			struct dbfs *still = NULL;
			wait_for_a_close();
			/* the lock was let go: the DBFS may be gone (mfs_feed_detach) */
			pthread_mutex_lock(&mgr->lock);
			int gone = mfs_feed_of(mgr, id, &who, &still);
			pthread_mutex_unlock(&mgr->lock);
			if (gone || still != fs) {
				rc = gone ? gone : -EBUSY;
				break;
			}
			rc = dbfs_feed_open(fs, h->sub, NULL, &h->r);
		}
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
			snprintf(err, sizeof(err),
				 "this DBFS has %u distinct settle periods already",
				 DBFS_SETTLE_MAX);
		if (rc) {
			dbfs_feed_close(h->r);
			h->r = NULL;
		}
	}
	if (!rc) {
		h->next = mfs_feed_hub.list;
		if (mfs_feed_hub.list)
			mfs_feed_hub.list->prev = h;
		mfs_feed_hub.list = h;
	}
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	if (rc) {
		mfs_buf_free(&h->out);
		pthread_mutex_destroy(&h->lock);
		free(h);
		if (err[0])
			mfs_feed_refuse(req, name, rc, err);
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
	mfs_feed_fill(h, size);
	if (mfs_feed_avail(h)) {
		data = mfs_feed_take(h, size, &n);
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
		fuse_req_interrupt_func(req, mfs_feed_on_interrupt, NULL);
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
		pthread_mutex_lock(&mfs_feed_hub.lock);
		struct handle *o = mfs_feed_hub.list;
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
		pthread_mutex_unlock(&mfs_feed_hub.lock);
	}
	if (rc == -ERANGE) {
		mfs_feed_refuse(req, h->sub, rc,
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
		mfs_feed_fill(h, 1);
	if (mfs_feed_avail(h) || h->error || h->closed)
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

	pthread_mutex_lock(&mfs_feed_hub.lock);
	if (h->prev)
		h->prev->next = h->next;
	else if (mfs_feed_hub.list == h)
		mfs_feed_hub.list = h->next;
	if (h->next)
		h->next->prev = h->prev;
	if (h->held && h->fs) /* under mfs_feed_hub.lock: mfs_feed_detach cannot take fs away */
		dbfs_settle_release(h->fs, h->filter.settle_ms);
	h->held = false;
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	pthread_mutex_lock(&h->lock);
	h->closed = true;
	h->error = 0;
	h->out_off = h->out.len;
	mfs_feed_answer_waits(h, &answers); /* none should wait: end of file */
	pthread_mutex_unlock(&h->lock);
	mfs_feed_send_answers(answers);
	if (h->ph)
		fuse_pollhandle_destroy(h->ph);
	dbfs_feed_close(h->r);
	pthread_cond_broadcast(&mfs_feed_hub.closed); /* an open may wait for it */
	mfs_buf_free(&h->out);
	pthread_mutex_destroy(&h->lock);
	free(h);
	fuse_reply_err(req, 0);
}

void mfs_feed_held(struct dbfs *fs, unsigned *readers, uint64_t *bytes)
{
	*readers = 0;
	*bytes = 0;
	pthread_mutex_lock(&mfs_feed_hub.lock);
	for (struct handle *h = mfs_feed_hub.list; h; h = h->next) {
		if (h->fs != fs)
			continue;
		pthread_mutex_lock(&h->lock);
		(*readers)++;
		*bytes += h->out.cap;
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&mfs_feed_hub.lock);
}

void mfs_feed_detach(struct dbfs *fs)
{
	bool any = false;

	dbfs_feed_set_notify(fs, NULL, NULL);
	pthread_mutex_lock(&mfs_feed_hub.lock);
	for (struct handle *h = mfs_feed_hub.list; h; h = h->next) {
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
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	if (any)
		mfs_feed_kick();
}
