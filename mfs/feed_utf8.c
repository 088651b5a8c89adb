/* The UTF-8 rules both line formats share: which bytes stand for
 * themselves, and when a name needs its exact bytes carried aside. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

/* Length of the valid UTF-8 sequence of a code point >= U+00A0 at s (n
 * bytes available), or 0. */
size_t mfs_feed_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0], cp;
	size_t len;

	if (c < 0xc2)
		return 0;
	if (c < 0xe0) {
		len = 2;
		cp = c & 0x1f;
	} else if (c < 0xf0) {
		len = 3;
		cp = c & 0x0f;
	} else if (c < 0xf5) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
		return 0;
	return len;
}

/* Is s valid UTF-8 (any code point but surrogates)? */
bool mfs_feed_utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		size_t k = mfs_feed_utf8_seq(s + i, n - i);
		if (!k && n - i >= 2 && s[i] == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] < 0xa0)
			k = 2; /* U+0080..U+009F: valid, only not printable */
		if (!k)
			return false;
		i += k;
	}
	return true;
}
