/*
 * What the feed_*.c files that write and read feed lines share (the formats
 * are described in feed_line.h). Not for other callers. Pure functions: any
 * thread, no locks, no I/O.
 */
#ifndef MFS_FEED_LINE_PRIVATE_H
#define MFS_FEED_LINE_PRIVATE_H

#include "feed_line.h"

/* ---- feed_names.c ---- */

/* Does the operation carry a range (off, len)? */
bool mfs_feed_op_has_range(unsigned op);

/* The bit of a setattr name, also "0xHEX" for bits without a name; 0 when
 * it is none. */
uint32_t mfs_feed_attr_of(const char *s, size_t len);

/* The bit of an event flag name ("exchange", "replaced"), or 0. */
uint32_t mfs_feed_flag_of(const char *s, size_t len);

/* Pass the name of each setattr bit / event flag of mask to put (with its
 * length), in table order; setattr bits without a name as one "0xHEX". */
void mfs_feed_attr_names(uint32_t mask, void (*put)(const char *s, size_t n, void *arg),
			 void *arg);
void mfs_feed_flag_names(uint32_t mask, void (*put)(const char *s, size_t n, void *arg),
			 void *arg);

/* ---- feed_utf8.c ---- */

/* Length of the valid UTF-8 sequence of a code point >= U+00A0 at s (n
 * bytes available), or 0. */
size_t mfs_feed_utf8_seq(const unsigned char *s, size_t n);

/* Is s valid UTF-8 (any code point but surrogates)? */
bool mfs_feed_utf8_valid(const unsigned char *s, size_t n);

/* ---- feed_json.c ---- */

/* The base64 alphabet of the "_b64" fields (RFC 4648). */
extern const char mfs_feed_b64[];

/* ---- feed_decode.c: for the decoders ---- */

/* The keys of both formats: what they set, and which ones a line had. */
enum {
	K_SEQ, K_TIME, K_TIME_NS, K_OP, K_INO, K_PATH, K_NEW_PATH, K_PARENT, K_NEW_PARENT,
	K_TYPE, K_MODE, K_SIZE, K_UID, K_GID, K_PID, K_ATTR, K_XATTR, K_NEXT,
	K_PATH_B64, K_NEW_PATH_B64, K_XATTR_B64, K_NLINK, K_OFF, K_LEN, K_FLAGS, K_SETTLE, K_N
};
extern const char *const mfs_feed_key_names[K_N];

/* The key of a name, or -1. */
int mfs_feed_key_of(const char *s, size_t n);

/* A numeric key's value into ev; -EINVAL when out of range. */
int mfs_feed_set_number(struct dbfs_event *ev, int k, uint64_t v);

/* Four octal digits into *perm: 0 or -EINVAL. */
int mfs_feed_mode_of(const char *s, size_t n, uint32_t *perm);

/* In a decoder with `err`, `errlen` and a label `bad`: the reason, then out. */
#define FAIL(...)                                                                                  \
	do {                                                                                       \
		snprintf(err, errlen, __VA_ARGS__);                                                \
		goto bad;                                                                          \
	} while (0)

#endif
