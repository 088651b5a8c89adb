/*
 * The Prometheus text exposition (format 0.0.4) of every DBFS: the
 * `metrics` file at the manager mount's root and, with
 * -o metrics_listen=ADDR:PORT, the same over HTTP (http_metrics.c).
 *
 * Names carry the mfs_ prefix and base units (seconds, bytes); counters
 * end in _total; labels are bounded: dbfs (the DBFS's name), op (a FUSE
 * operation, from a fixed table), errno (a fixed table) and, on
 * mfs_dbfs_info only, mountpoint, store and state. Counters count since
 * the DBFS was mounted (a remount starts them again: a counter reset, as
 * Prometheus expects of a restarted target).
 *
 * The request counters (requests, by operation, bytes, errors by errno,
 * the latency histogram, commits, flushes) are those of each DBFS's last
 * usage record, which flowed through the accountant's queue (account.h):
 * up to a second behind the requests, 0 in the first second of a mount,
 * always consistent with one another. Throttled, capped and in-flight
 * requests are read live; space, cache and the feed from the store.
 */
#ifndef MFS_METRICS_H
#define MFS_METRICS_H

#include "buf.h"
#include "manager.h"

/* The exposition text. Takes mgr->lock twice, briefly: to copy names and
 * the counters request paths update without locks (no DBFS request waits
 * for it), pinning each mounted DBFS (manager.h), and to unpin them; the
 * store work between (a read transaction and a stat per mounted DBFS) and
 * the rendering run without it.
 * On allocation failure b->oom is set. A manager request thread or the
 * HTTP thread. */
void mfs_metrics_text(struct mfs_manager *mgr, struct mfs_buf *b);

/* The content type of the exposition. */
#define MFS_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
