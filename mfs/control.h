/*
 * The control loop: the one thread that mounts, unmounts, reconfigures and
 * forgets DBFSs, and stops the manager. It takes what it is asked from the
 * inbox (inbox.h), runs it (a command through its verb's row, verbs.h) and
 * answers it (answer.h), so a FUSE worker never waits on another mount; about
 * once a second it runs libdbfs's housekeeping for every mounted DBFS.
 *
 * The control path, top to bottom: a file calls only files on rows below
 * its own (checked by the test mfs-layering-control from the objects' symbols;
 * the loop reaches an executor through the command's verb row, not by
 * name):
 *   manager_fs.c                     the manager mount: hands commands in
 *   control.c       readable.c       this loop; the readable attributes' text
 *   startup.c       shutdown.c       registry load and re-mount; the stop
 *   verbs.c                          the verb table: parser and executor columns
 *   execute_mount.c execute_unmount.c execute_config.c execute_forget.c
 *   execute_sync.c  execute_subscribe.c  a durable point; feed subscriptions
 *   parse.c parse_feed.c validate.c  the values; checks against fs and state
 *   dbfs_mount.c    dbfs_unmount.c   one DBFS up / down
 *   flusher.c                        housekeeping and durable points, off this thread
 *   inbox.c                          the control thread's job queue
 *   feed_settle.c                    settled events' periods from the subscriptions
 *   feed_fs.c                        the manager mount's feed files
 *   feed_spec.c                      feed positions and filters
 *   feed_decode_json.c               feed lines read back: JSON
 *   feed_decode.c                    feed lines read back: text, and what both share
 *   feed_text.c     feed_json.c      the feed's two line formats
 *   feed_names.c feed_time.c feed_utf8.c  their words, times and UTF-8 rules
 *   answer.c cache_budget.c manager.c caller.c
 *                                    replies and user.mfs.error; cache
 *                                    shares; the DBFS list; who asks
 * Below them all: mount.c, path.c, as_caller.c (mount mechanics; paths
 * resolved once into held descriptors, as the caller), user_limits.c, the
 * loop, conf, kv, registry, log, buf.
 */
#ifndef MFS_CONTROL_H
#define MFS_CONTROL_H

#include "manager.h"

/*
 * Serve the inbox until a stop (mfs_inbox_stop, the manager mount going
 * away, or in single mode the DBFS going away); then stop everything
 * (shutdown.h). Returns 0. The control thread (main), after mfs_inbox_init.
 */
int mfs_control_run(struct mfs_manager *mgr);

#endif
