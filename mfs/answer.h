/*
 * Answering a control command, and the memory of refusals that
 * `user.mfs.error` serves.
 *
 * A refusal is kept per (uid, parent pid of the caller): `setfattr` and the
 * `getfattr -n user.mfs.error` that follows it are two processes of one
 * shell (or one mfsctl), so they share a parent; a caller with no entry of
 * its own gets the latest reason of its uid. The memory holds the 128 latest
 * (uid, parent) pairs.
 */
#ifndef MFS_ANSWER_H
#define MFS_ANSWER_H

#include <stddef.h>

#include "caller.h"
#include "verbs.h"

/*
 * Answer a command's request with rc (0 or -errno; fuse_reply_err) when it
 * has one. A refusal (rc != 0) is first remembered for `cmd->who` with
 * `reason` and logged with the verb's name. Any thread; takes only the
 * refusal memory's own lock.
 */
void mfs_answer_cmd(struct mfs_cmd *cmd, int rc, const char *reason);

/*
 * Refuse a control request that never became a command (unknown attribute,
 * a value that does not parse): remember and log it for `who`, naming the
 * attribute `attr` as given. Does not reply (the FUSE handler does). A FUSE
 * worker, inside the request.
 */
void mfs_answer_refused(const struct mfs_caller *who, const char *attr, int rc, const char *reason);

/* Write "ENAME (N): reason\n" of `who`'s last refusal (or "0: no refused
 * command\n") into buf. Any thread. */
void mfs_answer_last_refusal(const struct mfs_caller *who, char *buf, size_t cap);

#endif
