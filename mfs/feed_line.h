/*
 * One change-feed event as one line of text, in the two documented formats
 * (mfs(8) "CHANGE FEED"), and back.
 *
 * Text (what `cat NAME/events` shows), fields separated by one space:
 *
 *     SEQ TIME OP INODE PATH [NEWPATH] key=value ...\n
 *
 *   SEQ     decimal sequence number
 *   TIME    commit time, UTC, RFC 3339 with nanoseconds:
 *           2026-12-02T01:35:00.123456789Z
 *   OP      lower-case operation name (dbfs_ev_op_name), or "gap"
 *   INODE   decimal inode number
 *   PATH    the path at the time of the change, from the DBFS root ("/a/b");
 *           "-" when the inode had no name left (a write to an unlinked
 *           open file)
 *   NEWPATH only for rename (the new path) and link (the new name)
 *   keys    in this order: parent=, new_parent= (rename, link), type=
 *           (file dir symlink fifo socket char block unknown), mode= (4
 *           octal digits), size=, uid=, gid=, pid=, nlink=, off= and len=
 *           (write, fallocate, punch: the range; settled: the span the
 *           burst wrote), settle= (settled: the quiet period in ms), attr= (setattr: what
 *           changed, names joined by ','), xattr= (setxattr, removexattr:
 *           the attribute's name, escaped like a path), flags= (rename,
 *           link: "exchange", "replaced"; only when set). A gap line is
 *           `SEQ TIME gap 0 - next=N`: the events SEQ .. N-1 are lost to
 *           this reader, N is the first still available. Readers must
 *           ignore keys they do not know.
 *
 * Escaping of PATH, NEWPATH and xattr (as /proc/mounts does): a space, tab,
 * newline, backslash, any other byte below 0x21, 0x7f, and any byte that is
 * not part of a valid UTF-8 sequence of a printable code point (U+00A0 and
 * up) is written as a backslash and three octal digits (`\040` for a
 * space). Every other byte stands for itself, so a UTF-8 name stays
 * readable and any byte of a name survives.
 *
 * JSON (what `cat NAME/events.json` shows): one object per line, keys
 * "seq", "time", "time_ns", "op", "ino", "path", then as the text keys
 * ("new_path", "parent", "new_parent", "type", "mode" (a string of 4 octal
 * digits), "size", "uid", "gid", "pid", "nlink", "off", "len", "settle", "attr" (an
 * array of names), "xattr", "flags" (an array), "next"); a gap object has
 * only "seq", "time", "time_ns", "op" and "next". A name that is not valid UTF-8 is given twice: "path" holds it
 * with every invalid byte replaced by U+FFFD (for display) and "path_b64"
 * holds its exact bytes in base64 (RFC 4648, padded); readers take the
 * "_b64" field when there is one. Likewise "new_path_b64", "xattr_b64".
 *
 * Every function here is pure: any thread, no locks, no I/O.
 */
#ifndef MFS_FEED_LINE_H
#define MFS_FEED_LINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "dbfs/feed.h"

/* Longest TIME text plus its NUL ("2026-12-02T01:35:00.123456789Z"). */
#define MFS_FEED_TIME_MAX 64

/* Write ns (CLOCK_REALTIME) as RFC 3339 UTC with 9 fractional digits. */
void mfs_feed_time_format(uint64_t ns, char out[MFS_FEED_TIME_MAX]);

/*
 * Parse `s` (len bytes) as a time: RFC 3339 in UTC ("...Z") with 0 to 9
 * fractional digits, or a date alone (2026-12-02, midnight UTC), into
 * nanoseconds since the epoch. 0 or -EINVAL (not such a time, before 1970
 * or after 2554).
 */
int mfs_feed_time_parse(const char *s, size_t len, uint64_t *ns);

/* A decimal number (n bytes, no sign, no leading zeros) of at most max into
 * *v: 0 or -EINVAL. */
int mfs_feed_number(const char *s, size_t n, uint64_t max, uint64_t *v);

/* The operation of a lower-case name ("create", ..., "gap"), or 0. */
unsigned mfs_feed_op_of(const char *name, size_t len);

/* The name of an operation (dbfs_ev_op_name, and "gap"); NULL if unknown. */
const char *mfs_feed_op_name(unsigned op);

/* The file type word of an st_mode ("file", "dir", ...; "unknown" for 0). */
const char *mfs_feed_type_name(uint32_t mode);

/* The S_IFMT bits of a type word, or -1 when it is none. */
int mfs_feed_type_of(const char *name, size_t len, uint32_t *mode);

/* Append ev as one text line / one JSON line, '\n' included. Memory
 * shortage shows as out->oom. */
void mfs_feed_line_text(const struct dbfs_event *ev, struct mfs_buf *out);
void mfs_feed_line_json(const struct dbfs_event *ev, struct mfs_buf *out);

/* Append name escaped as in a text line. */
void mfs_feed_escape(const char *s, size_t len, struct mfs_buf *out);

/* A decoded line: the event, whose strings point into `buf`. */
struct mfs_feed_rec {
	struct dbfs_event ev;
	char *buf;
};

/*
 * Decode one line (len bytes, with or without its '\n') of either format
 * into rec; free it with mfs_feed_rec_free. 0, -EINVAL with a reason in err
 * (not such a line: a field missing or malformed, a bad escape, a number out
 * of range, a key twice, NEWPATH where the operation has none), -ENOMEM. On
 * error rec is left empty. Keys a reader does not know are skipped.
 */
int mfs_feed_parse_text(const char *line, size_t len, struct mfs_feed_rec *rec, char *err,
			size_t errlen);
int mfs_feed_parse_json(const char *line, size_t len, struct mfs_feed_rec *rec, char *err,
			size_t errlen);

/* Free what a parse allocated; safe on a zeroed or freed rec. */
void mfs_feed_rec_free(struct mfs_feed_rec *rec);

/* Does the operation carry NEWPATH and new_parent (rename, link)? */
bool mfs_feed_op_has_new(unsigned op);

#endif
