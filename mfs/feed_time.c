/* The TIME of a feed line: RFC 3339 UTC with nanoseconds, both ways. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

void mfs_feed_time_format(uint64_t ns, char out[MFS_FEED_TIME_MAX])
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(out, MFS_FEED_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%09uZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(ns % 1000000000u));
}

static int digits(const char *s, size_t n, unsigned *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (unsigned)(s[i] - '0');
	}
	return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's
 * days_from_civil). */
static int64_t days_of(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

int mfs_feed_time_parse(const char *s, size_t len, uint64_t *ns)
{
	unsigned y, mo, d, h = 0, mi = 0, sec = 0, frac = 0;
	static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (len < 10 || s[4] != '-' || s[7] != '-' || digits(s, 4, &y) || digits(s + 5, 2, &mo) ||
	    digits(s + 8, 2, &d))
		return -EINVAL;
	if (len > 10) {
		if (len < 20 || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
		    digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) || digits(s + 17, 2, &sec))
			return -EINVAL;
		size_t i = 19;
		if (s[i] == '.') {
			size_t k = ++i;
			while (i < len && i - k < 9 && s[i] >= '0' && s[i] <= '9')
				i++;
			if (i == k || digits(s + k, i - k, &frac))
				return -EINVAL;
			for (size_t z = i - k; z < 9; z++)
				frac *= 10;
		}
		if (i + 1 != len || s[i] != 'Z')
			return -EINVAL;
	}
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 59 || y > 2554)
		return -EINVAL;
	uint64_t t = (uint64_t)days_of(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	if (t > UINT64_MAX / 1000000000u - 1)
		return -EINVAL;
	*ns = t * 1000000000u + frac;
	return 0;
}
