/*
 * What the feed's files in the manager mount share (feed_fs.h is their
 * face). They call one way, top row to bottom:
 *
 *   feed_fs.c     open, read, write (acks), poll, release, detach
 *   feed_nodes.c  permissions, dynamic inodes, lookups, subscription lists
 *   feed_wake.c   the hub, handle buffers, waiting reads, the waker
 *
 * Locks: mfs_feed_hub.lock, then one handle's lock; mgr->lock inside the
 * hub lock (never the other way round); intr_lock alone.
 */
#ifndef MFS_FEED_FS_PRIVATE_H
#define MFS_FEED_FS_PRIVATE_H

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
	struct handle *prev, *next; /* mfs_feed_hub.list, under its lock */
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

/* What answering a waiting read will send. */
struct answer {
	fuse_req_t req;
	int err;      /* when no data */
	char *data;
	size_t n;
	struct answer *next;
};

/* The hub: every open feed handle and dynamic inode of the process. */
struct mfs_feed_hub {
	pthread_mutex_t lock;
	pthread_cond_t closed; /* a reader closed (broadcast after release) */
	struct handle *list;
	struct dyn *dyns;
	fuse_ino_t next_ino;
	pthread_once_t once;
	int efd;
	/* interrupted requests, for the waker: their own lock, taken alone */
	pthread_mutex_t intr_lock;
	fuse_req_t *intr;
	size_t nintr, intr_cap;
};
extern struct mfs_feed_hub mfs_feed_hub;

static inline uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline struct mfs_manager *mgr_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ---- feed_wake.c ---- */

/* Wake the waker (it answers waits and polls). Any thread, no lock. */
void mfs_feed_kick(void);
/* The commit callback of every DBFS whose feed is read: never blocks. */
void mfs_feed_on_commit(void *arg, uint64_t last_seq);
/* libfuse's interrupt callback of a waiting read: notes it for the waker. */
void mfs_feed_on_interrupt(fuse_req_t req, void *data);
/* Start the waker (once: pthread_once on mfs_feed_hub.once); on failure
 * mfs_feed_hub.efd stays -1. */
void mfs_feed_start_waker(void);
/* Bytes buffered in h not yet read. h->lock held. */
size_t mfs_feed_avail(const struct handle *h);
/* Read what the store has (never waiting) into h->out until `want` bytes
 * are there or the store has no more. h->lock held. */
void mfs_feed_fill(struct handle *h, size_t want);
/* Take up to size bytes of h->out into a private copy (NULL: no memory). */
char *mfs_feed_take(struct handle *h, size_t size, size_t *n);
/* Pop the waits of h that can be answered now into *list. h->lock held. */
void mfs_feed_answer_waits(struct handle *h, struct answer **list);
/* Send and free the answers (no lock held). */
void mfs_feed_send_answers(struct answer *a);

/* ---- feed_nodes.c ---- */

/* A subscription file's name, SUB or SUB.json: 0 or -ENOENT. */
int mfs_feed_sub_name(const char *name, char *sub, bool *json);
/* The mounted DBFS id as `who` may read it: its dbfs in *fs. mgr->lock
 * held. -ENOENT, -EACCES, -ENODEV (not mounted), -EOPNOTSUPP (feed=off). */
int mfs_feed_of(struct mfs_manager *mgr, uint32_t id, const struct mfs_caller *who,
		struct dbfs **fs);
/* The node a dynamic inode stands for (name: NAME_MAX + 1 bytes); false:
 * none (forgotten). Takes mfs_feed_hub.lock. */
bool mfs_feed_dyn_find(fuse_ino_t ino, uint32_t *id, enum mfs_feed_kind *kind, char *name);
/* Refuse a feed request with a reason for user.mfs.error. Replies. */
void mfs_feed_refuse(fuse_req_t req, const char *what, int rc, const char *reason);

#endif
