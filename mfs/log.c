/* mfs logging (see log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"

static int log_syslog;
static int log_level = MFS_LOG_INFO;

void mfs_log_to_syslog(void)
{
	openlog("mfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = 1;
}

void mfs_log_set_level(enum mfs_log_level level)
{
	log_level = level;
}

void mfs_log_escape(char *out, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t p = 0;

	for (; *s && p + 5 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\n' || c == '\t' || c == '\\') {
			out[p++] = '\\';
			out[p++] = c == '\n' ? 'n' : c == '\t' ? 't' : '\\';
		} else if (c < 0x20 || c == 0x7f) {
			out[p++] = '\\';
			out[p++] = 'x';
			out[p++] = hex[c >> 4];
			out[p++] = hex[c & 15];
		} else {
			out[p++] = (char)c;
		}
	}
	out[p] = '\0';
}

void mfs_log(enum mfs_log_level level, const char *fmt, ...)
{
	static const char *const names[8] = {
		[MFS_LOG_ERR] = "error", [MFS_LOG_WARN] = "warning",
		[MFS_LOG_INFO] = "info", [MFS_LOG_DEBUG] = "debug",
	};
	char raw[1024], line[4 * sizeof(raw)];
	va_list ap;

	if ((int)level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	mfs_log_escape(line, sizeof(line), raw);
	if (log_syslog) {
		syslog((int)level, "%s", line);
		return;
	}
	char out[sizeof(line) + 64];
	int n = snprintf(out, sizeof(out), "mfs[%d]: %s: %s\n", (int)getpid(),
			 names[level & 7] ? names[level & 7] : "log", line);
	if (n > (int)sizeof(out))
		n = sizeof(out);
	if (write(STDERR_FILENO, out, (size_t)n) < 0)
		return;
}
