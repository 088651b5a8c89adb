/*
 * mfs logging: stderr in the foreground, syslog(3) once daemonized.
 *
 * Every function here may be called from any thread at any time; a line is
 * written with one write(2) (or one syslog call) so lines never interleave.
 */
#ifndef MFS_LOG_H
#define MFS_LOG_H

#include <stddef.h>

enum mfs_log_level {
	MFS_LOG_ERR = 3,
	MFS_LOG_WARN = 4,
	MFS_LOG_INFO = 6,
	MFS_LOG_DEBUG = 7,
};

/* Send further lines to syslog (ident "mfs") instead of stderr. */
void mfs_log_to_syslog(void);

/* Lines above `level` are dropped (default MFS_LOG_INFO). */
void mfs_log_set_level(enum mfs_log_level level);

/* Log one line (no trailing newline needed). The whole line is escaped
 * with mfs_log_escape: user-supplied names, paths and values cannot forge
 * lines or send terminal controls. */
void mfs_log(enum mfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Copy `s` into out (cap bytes, always terminated), writing a newline as
 * \n, a tab as \t, a backslash as \\ and any other control byte as \xHH.
 * Bytes of 0x80 and above (UTF-8) pass unchanged. */
void mfs_log_escape(char *out, size_t cap, const char *s);

#define mfs_err(...) mfs_log(MFS_LOG_ERR, __VA_ARGS__)
#define mfs_warn(...) mfs_log(MFS_LOG_WARN, __VA_ARGS__)
#define mfs_info(...) mfs_log(MFS_LOG_INFO, __VA_ARGS__)
#define mfs_debug(...) mfs_log(MFS_LOG_DEBUG, __VA_ARGS__)

#endif
