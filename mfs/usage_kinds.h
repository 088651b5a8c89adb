/*
 * Counts by kind in a usage record (account.h) and a history row
 * (usage_store.h): requests by FUSE operation and errors by errno; the
 * operations' names; the compact encoding a history row stores them in;
 * their text in NAME/usage and stats.
 *
 * Encoding (host byte order, like the rest of a row: it never leaves the
 * host), only the kinds with a non-zero count:
 *
 *   +---------+--------------------------------+-----+
 *   | n (u16) | code (u16) | count (u64)       | ... |  n entries of 10 bytes
 *   +---------+--------------------------------+-----+
 *   code < 0x100: FUSE opcode (< MFS_OPCODES); 0x100 + e: errno slot e
 *   (< DBFS_ERRNOS, slot 0: every errno above the table).
 *
 * Pure functions: any thread.
 */
#ifndef MFS_USAGE_KINDS_H
#define MFS_USAGE_KINDS_H

#include <stddef.h>
#include <stdint.h>

#include "dbfs/dbfs.h"
#include "loop.h"

struct mfs_usage_kinds {
	uint64_t ops[MFS_OPCODES];  /* requests by FUSE opcode */
	uint64_t errs[DBFS_ERRNOS]; /* errors by errno (dbfs_errno_counts' slots) */
};

/* The largest encoding. */
#define MFS_USAGE_KINDS_MAX (2 + 10 * (MFS_OPCODES + DBFS_ERRNOS))

/* The name of FUSE opcode `op` ("lookup", ...), or NULL for one without a
 * name of ours (shown as "other"). */
const char *mfs_op_name(unsigned op);

/* The name of errno slot `e` ("ENOENT"), or "other" (slot 0, unnamed). */
const char *mfs_errno_name(unsigned e);

/* d = a - b, slot by slot (a counter that went back gives 0). */
void mfs_usage_kinds_sub(struct mfs_usage_kinds *d, const struct mfs_usage_kinds *a,
			 const struct mfs_usage_kinds *b);
/* s += d, slot by slot. */
void mfs_usage_kinds_add(struct mfs_usage_kinds *s, const struct mfs_usage_kinds *d);

/* Encode `k` into p (room for MFS_USAGE_KINDS_MAX bytes); returns its
 * length. */
size_t mfs_usage_kinds_put(unsigned char *p, const struct mfs_usage_kinds *k);

/* Decode `len` bytes at p into k (zeroed first). 0, or -EINVAL when the
 * bytes are not an encoding (short, a code out of range, bytes left over). */
int mfs_usage_kinds_get(const unsigned char *p, size_t len, struct mfs_usage_kinds *k);

/* Append "NAME:COUNT,..." of the non-zero ops (which 0) or errors (1) to
 * b, or "-" when there is none. An opcode without a name shows as opN,
 * errno slot 0 as "other". */
struct mfs_buf;
void mfs_usage_kinds_text(struct mfs_buf *b, const struct mfs_usage_kinds *k, int which);

#endif
