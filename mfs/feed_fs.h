/*
 * The change feed in the manager mount (manager_fs.c hands these requests
 * here): NAME/events, NAME/events.json, NAME/events@POS[,filter...],
 * NAME/events.json@..., NAME/subscriptions/ and NAME/subscriptions/SUB[.json].
 * Formats and semantics: mfs(8) "CHANGE FEED"; lines: feed_line.h;
 * positions and filters: feed_spec.h.
 *
 * A read that finds no event does not hold a worker thread: its fuse_req
 * is kept on the open file's handle and answered later by the feed's one
 * waker thread, which the DBFS's commit callback (dbfs_feed_set_notify)
 * wakes through an eventfd. The same thread answers an interrupted read
 * with EINTR (^C on cat) and sends the poll notifications
 * (fuse_lowlevel_notify_poll). O_NONBLOCK reads get EAGAIN.
 *
 * Locks: the feed's hub lock, then one handle's lock; mgr->lock is taken
 * inside the hub lock (never the other way round). Nothing here waits on a
 * FUSE request of any session.
 */
#ifndef MFS_FEED_FS_H
#define MFS_FEED_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <fuse_lowlevel.h>

#include "caller.h"
#include "manager.h"

/* Dynamic inodes (events@..., subscription files) start here. */
#define MFS_FEED_DYN_INO (1ull << 48)

/* The kinds of feed node. */
enum mfs_feed_kind {
	MFS_FEED_EVENTS,      /* events / events.json (follow from now) */
	MFS_FEED_EVENTS_JSON,
	MFS_FEED_SUBS_DIR,    /* subscriptions/ */
	MFS_FEED_EVENTS_AT,   /* dynamic: events[.json]@SPEC */
	MFS_FEED_SUB,         /* dynamic: subscriptions/SUB[.json] */
};

/* May `who` read the feed of d and manage its subscriptions: root, who
 * started mfs, d's owner, or anyone with d's option feed_access=all.
 * mgr->lock held. */
bool mfs_feed_may(struct mfs_manager *mgr, const struct mfs_dbfs *d, const struct mfs_caller *who);

/* Lookup of `name` in a DBFS folder (id) or its subscriptions dir: replies
 * (entry or error) when it is a feed name and returns true; false when it
 * is not one (nothing replied). */
bool mfs_feed_lookup(fuse_req_t req, uint32_t id, bool in_subs, const char *name);

/* Attributes of a dynamic inode: 0 or -ENOENT. */
int mfs_feed_stat_dyn(struct mfs_manager *mgr, fuse_ino_t ino, struct stat *st);

/* Forget n lookups of a dynamic inode. */
void mfs_feed_forget(fuse_ino_t ino, uint64_t n);

/* Open a feed file: a static one (kind, id) or a dynamic inode (ino).
 * Replies. */
void mfs_feed_open(fuse_req_t req, fuse_ino_t ino, uint32_t id, enum mfs_feed_kind kind,
		   struct fuse_file_info *fi);

/* read, write (acks), poll, release of a feed handle. Each replies. */
void mfs_feed_read(fuse_req_t req, size_t size, struct fuse_file_info *fi);
void mfs_feed_write(fuse_req_t req, const char *buf, size_t size, struct fuse_file_info *fi);
void mfs_feed_poll(fuse_req_t req, struct fuse_file_info *fi, struct fuse_pollhandle *ph);
void mfs_feed_release(fuse_req_t req, struct fuse_file_info *fi);

/* The listing of NAME/subscriptions/ (names, each with ".json" twin), each
 * passed to add. 0 or -errno (-ENOENT: no such mounted DBFS). */
int mfs_feed_list_subs(struct mfs_manager *mgr, uint32_t id,
		       void (*add)(void *arg, const char *name), void *arg);

/* The DBFS d is going (mfs_dbfs_finish, before dbfs_close): close every
 * reader of its store; their pending reads get end of file, polls wake.
 * Control thread, mgr->lock not held. */
void mfs_feed_detach(struct dbfs *fs);

/* The readers of fs's feed open in this manager mount, and the bytes
 * their buffers hold (events formatted, not yet read): into *readers and
 * *bytes. Any thread; takes the feed's locks, so never with mgr->lock
 * held. */
void mfs_feed_held(struct dbfs *fs, unsigned *readers, uint64_t *bytes);

#endif
