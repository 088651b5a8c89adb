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

void mfs_log(enum mfs_log_level level, const char *fmt, ...)
{
	static const char *const names[8] = {
		[MFS_LOG_ERR] = "error", [MFS_LOG_WARN] = "warning",
		[MFS_LOG_INFO] = "info", [MFS_LOG_DEBUG] = "debug",
	};
	char line[1024];
	va_list ap;

	if ((int)level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_syslog) {
		syslog((int)level, "%s", line);
		return;
	}
	char out[1100];
	int n = snprintf(out, sizeof(out), "mfs[%d]: %s: %s\n", (int)getpid(),
			 names[level & 7] ? names[level & 7] : "log", line);
	if (n > (int)sizeof(out))
		n = sizeof(out);
	if (write(STDERR_FILENO, out, (size_t)n) < 0)
		return;
}
