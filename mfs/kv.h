/*
 * Parser for mount-option style values: `key=value,key,key=value`.
 *
 * A backslash escapes the next byte (`\,` is a comma inside a value, `\\` a
 * backslash). Used for control xattr values and the command line's -o.
 */
#ifndef MFS_KV_H
#define MFS_KV_H

#include <stdbool.h>
#include <stddef.h>

struct mfs_kv {
	char *key;   /* never empty */
	char *value; /* NULL for a bare `key` */
};

struct mfs_kvlist {
	struct mfs_kv *items;
	size_t n;
	char *buf; /* owns every key and value */
};

/* Reject duplicate keys (control values); the command line allows them. */
#define MFS_KV_UNIQUE 1u

/*
 * Parse `len` bytes of `s` (need not be NUL-terminated) into `out`.
 * Refuses (-EINVAL, reason in err): NUL or other control bytes, bytes that are
 * not valid UTF-8, an empty item (`a,,b`), an empty key (`=v`), a trailing
 * lone backslash, a key that is not [a-z0-9_] (bare items may hold any
 * printable text, e.g. a DBFS name), and with MFS_KV_UNIQUE a key given
 * twice. -ENOMEM when out of memory. On error `out` is left empty.
 * Thread context: any; no locks taken.
 */
int mfs_kv_parse(const char *s, size_t len, unsigned flags, struct mfs_kvlist *out, char *err,
		 size_t errlen);

/* Free what mfs_kv_parse allocated; safe on an empty or zeroed list. */
void mfs_kv_free(struct mfs_kvlist *l);

/* True when `s` (length len) is valid UTF-8 without control characters. */
bool mfs_utf8_printable(const char *s, size_t len);

/* Append `s` to buf (capacity cap, used *pos) escaping `,` `\` and `=`.
 * Returns false when it did not fit (buf stays NUL-terminated). */
bool mfs_kv_escape(char *buf, size_t cap, size_t *pos, const char *s);

#endif
