/* A growing text buffer for rendering status text. Any thread. */
#ifndef MFS_BUF_H
#define MFS_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct mfs_buf {
	char *p;   /* NUL-terminated when len > 0 */
	size_t len;
	size_t cap;
	bool oom;  /* an append failed: the text is truncated */
};

/* Append formatted text (sets oom on allocation failure). */
void mfs_buf_printf(struct mfs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append `s` escaped for a `key=value,...` value. */
void mfs_buf_escaped(struct mfs_buf *b, const char *s);

/* Append one byte / n bytes of s (set oom on allocation failure). */
void mfs_buf_putc(struct mfs_buf *b, char c);
void mfs_buf_put(struct mfs_buf *b, const char *s, size_t n);

/* Make room for `more` bytes after len (plus a NUL). false on failure. */
bool mfs_buf_reserve(struct mfs_buf *b, size_t more);

void mfs_buf_free(struct mfs_buf *b);

#endif
