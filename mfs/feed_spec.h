/*
 * What a feed reader asks for: where it starts and which events it wants
 * (server-side filters). Documented in mfs(8) "CHANGE FEED".
 *
 * A position (the `from=` of user.mfs.subscribe, the part after '@' in
 * NAME/events@POS):
 *   now              events committed after the open (the default)
 *   oldest           the oldest event still retained
 *   SEQ              from sequence number SEQ (decimal)
 *   UUID:SEQ         the same, refused with ESTALE unless UUID (32 hex
 *                    digits, dashes allowed) is this store's feed UUID
 *   TIME             the first event committed at or after TIME (RFC 3339
 *                    UTC as the lines print it, or a date)
 *   -N[smhd]         the same, N seconds/minutes/hours/days ago
 *
 * Filters, `key=value` items (an event must pass all that are given):
 *   path=PREFIX      path (or, for rename and link, the new path) is PREFIX
 *                    or below it
 *   glob=PATTERN     path (or new path) matches the shell pattern
 *                    (fnmatch(3), no flags: '*' also matches '/')
 *   ops=OP+OP...     only these operations (names as in the lines)
 *   types=T+T...     only inodes of these types (file dir symlink fifo
 *                    socket char block)
 *   exclude=PREFIX   not when path (and the new path, if any) is PREFIX or
 *                    below it: a follower logging into the DBFS it follows
 *   exclude_pid=PID  not the changes made by process PID (the follower's)
 *   settle=MS        also a "settled" event per file once it has been quiet
 *                    for MS ms (1 .. DBFS_SETTLE_MS_MAX) after writes
 *                    (dbfs/feed.h says what counts); without it no settled
 *                    event passes, with it only those of MS (ops=settled:
 *                    nothing else). The other filters apply to them too.
 * Gap records always pass. PREFIX and PATTERN are printable UTF-8 (the
 * control protocol's rule); in a file name (events@...) a '/' is written
 * %2F and a '%' %25 (every %XX is decoded).
 *
 * Pure functions: any thread, no locks.
 */
#ifndef MFS_FEED_SPEC_H
#define MFS_FEED_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dbfs/feed.h"

#define MFS_FEED_PATTERN_MAX 256

struct mfs_feed_filter {
	char path[MFS_FEED_PATTERN_MAX];    /* "" none */
	char glob[MFS_FEED_PATTERN_MAX];    /* "" none */
	char exclude[MFS_FEED_PATTERN_MAX]; /* "" none */
	uint32_t ops;                       /* bit 1 << op; 0: all */
	uint32_t types;                     /* bit 1 << (S_IFMT >> 12); 0: all */
	uint32_t exclude_pid;               /* 0: none */
	uint32_t settle_ms;                 /* settle=MS; 0: no settled events */
};

/* A position: `start` for dbfs_feed_open, with the UUID it names. */
struct mfs_feed_pos {
	struct dbfs_feed_start start;
	uint8_t uuid[16];
	bool has_uuid;
};

/* Point pos->start.uuid at pos->uuid when it has one (after a copy). */
void mfs_feed_pos_fix(struct mfs_feed_pos *pos);

/*
 * Parse a position (len bytes). now_ns is the present (CLOCK_REALTIME),
 * for "-N[smhd]". 0 or -EINVAL with a reason in err.
 */
int mfs_feed_pos_parse(const char *s, size_t len, uint64_t now_ns, struct mfs_feed_pos *pos,
		       char *err, size_t errlen);

/*
 * Take one filter item into f: 0, -ENOENT (not a filter key), -EINVAL
 * (a bad value; reason in err).
 */
int mfs_feed_filter_key(struct mfs_feed_filter *f, const char *key, const char *value, char *err,
			size_t errlen);

/*
 * Parse a whole filter text ("key=value,..." as mfs_kv_parse reads it;
 * "" none) into f. 0 or -EINVAL (reason in err), -ENOMEM.
 */
int mfs_feed_filter_parse(const char *text, struct mfs_feed_filter *f, char *err, size_t errlen);

/* Does ev pass f? */
bool mfs_feed_filter_match(const struct mfs_feed_filter *f, const struct dbfs_event *ev);

/*
 * The name of a feed file: "events", "events.json", either with "@SPEC"
 * (SPEC = POS[,filter...], %XX-decoded). Fills json, pos and f. 0,
 * -ENOENT (not such a name), -EINVAL (a bad SPEC; reason in err).
 */
int mfs_feed_name_parse(const char *name, uint64_t now_ns, bool *json, struct mfs_feed_pos *pos,
			struct mfs_feed_filter *f, char *err, size_t errlen);

/* Write a UUID as 32 lower-case hex digits (33 bytes with the NUL). */
void mfs_feed_uuid_text(const uint8_t uuid[16], char out[33]);

#endif
