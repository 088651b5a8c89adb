/* Mount-option style value parser (see kv.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

bool mfs_utf8_printable(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		size_t n;
		unsigned cp;

		if (c < 0x20 || c == 0x7f)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + n >= len)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		/* overlong forms, surrogates, beyond U+10FFFF, C1 controls */
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff || (cp >= 0x80 && cp < 0xa0))
			return false;
		i += n + 1;
	}
	return true;
}

static bool key_ok(const char *k)
{
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

void mfs_kv_free(struct mfs_kvlist *l)
{
	free(l->items);
	free(l->buf);
	l->items = NULL;
	l->buf = NULL;
	l->n = 0;
}

int mfs_kv_parse(const char *s, size_t len, unsigned flags, struct mfs_kvlist *out, char *err,
		 size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!mfs_utf8_printable(s, len)) {
		snprintf(err, errlen, "value holds control characters or is not valid UTF-8");
		return -EINVAL;
	}
	size_t cap = 1;
	for (size_t i = 0; i < len; i++)
		cap += s[i] == ',';
	out->buf = malloc(len + 1);
	out->items = calloc(cap, sizeof(*out->items));
	if (!out->buf || !out->items) {
		mfs_kv_free(out);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}

	/* Unescape into buf, item by item; an item ends at an unescaped comma
	 * and its key at the first unescaped '='. */
	char *w = out->buf;
	size_t i = 0;
	for (;;) {
		char *key = w, *value = NULL;
		size_t start = i;
		while (i < len && s[i] != ',') {
			if (s[i] == '\\') {
				if (++i == len) {
					snprintf(err, errlen, "lone backslash at the end");
					goto inval;
				}
				*w++ = s[i++];
				continue;
			}
			if (s[i] == '=' && !value) {
				*w++ = '\0';
				value = w;
				i++;
				continue;
			}
			*w++ = s[i++];
		}
		*w++ = '\0';
		if (i == start) {
			snprintf(err, errlen, "empty option in '%.*s'", (int)(len > 80 ? 80 : len), s);
			goto inval;
		}
		if (!*key) {
			snprintf(err, errlen, "option '%.40s' has no key", value ? value : "");
			goto inval;
		}
		if (value && !key_ok(key)) {
			snprintf(err, errlen, "malformed key '%.40s'", key);
			goto inval;
		}
		if (flags & MFS_KV_UNIQUE) {
			for (size_t k = 0; k < out->n; k++) {
				if (!strcmp(out->items[k].key, key)) {
					snprintf(err, errlen, "duplicate key '%.40s'", key);
					goto inval;
				}
			}
		}
		out->items[out->n].key = key;
		out->items[out->n].value = value;
		out->n++;
		if (i == len)
			break;
		i++; /* the comma */
		if (i == len) {
			snprintf(err, errlen, "empty option at the end");
			goto inval;
		}
	}
	return 0;
inval:
	mfs_kv_free(out);
	return -EINVAL;
}

bool mfs_kv_escape(char *buf, size_t cap, size_t *pos, const char *s)
{
	size_t p = *pos;

	for (; *s; s++) {
		if (*s == ',' || *s == '\\' || *s == '=') {
			if (p + 1 >= cap)
				goto full;
			buf[p++] = '\\';
		}
		if (p + 1 >= cap)
			goto full;
		buf[p++] = *s;
	}
	buf[p] = '\0';
	*pos = p;
	return true;
full:
	buf[p < cap ? p : cap - 1] = '\0';
	*pos = p;
	return false;
}
