/* Growing text buffer (see buf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

bool mfs_buf_reserve(struct mfs_buf *b, size_t more)
{
	if (b->oom)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void mfs_buf_printf(struct mfs_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !mfs_buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void mfs_buf_escaped(struct mfs_buf *b, const char *s)
{
	if (!mfs_buf_reserve(b, 2 * strlen(s)))
		return;
	for (; *s; s++) {
		if (*s == ',' || *s == '\\' || *s == '=')
			b->p[b->len++] = '\\';
		b->p[b->len++] = *s;
	}
	b->p[b->len] = '\0';
}

void mfs_buf_free(struct mfs_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void mfs_buf_putc(struct mfs_buf *b, char c)
{
	if (!mfs_buf_reserve(b, 1))
		return;
	b->p[b->len++] = c;
	b->p[b->len] = '\0';
}

void mfs_buf_put(struct mfs_buf *b, const char *s, size_t n)
{
	if (!n || !mfs_buf_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}
