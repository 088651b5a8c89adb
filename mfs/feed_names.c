/* The words of a feed line: names of operations, file types, setattr bits
 * and event flags, both ways (see feed_line.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "feed_line_private.h"

/* The names of the formats, by enum dbfs_ev_op (the same as
 * dbfs_ev_op_name; the unit test holds them equal). */
static const char *const op_names[] = {
	[DBFS_EV_CREATE] = "create",     [DBFS_EV_MKDIR] = "mkdir",
	[DBFS_EV_MKNOD] = "mknod",       [DBFS_EV_SYMLINK] = "symlink",
	[DBFS_EV_LINK] = "link",         [DBFS_EV_UNLINK] = "unlink",
	[DBFS_EV_RMDIR] = "rmdir",       [DBFS_EV_RENAME] = "rename",
	[DBFS_EV_WRITE] = "write",       [DBFS_EV_TRUNCATE] = "truncate",
	[DBFS_EV_FALLOCATE] = "fallocate", [DBFS_EV_PUNCH] = "punch",
	[DBFS_EV_SETATTR] = "setattr",   [DBFS_EV_SETXATTR] = "setxattr",
	[DBFS_EV_REMOVEXATTR] = "removexattr", [DBFS_EV_EXPIRE] = "expire",
	[DBFS_EV_SETTLED] = "settled",
	[DBFS_EV_GAP] = "gap",
};

const char *mfs_feed_op_name(unsigned op)
{
	return op < sizeof(op_names) / sizeof(op_names[0]) ? op_names[op] : NULL;
}

unsigned mfs_feed_op_of(const char *name, size_t len)
{
	for (unsigned op = DBFS_EV_CREATE; op <= DBFS_EV_GAP; op++) {
		const char *n = mfs_feed_op_name(op);
		if (n && strlen(n) == len && !memcmp(n, name, len))
			return op;
	}
	return 0;
}

bool mfs_feed_op_has_new(unsigned op)
{
	return op == DBFS_EV_RENAME || op == DBFS_EV_LINK;
}

static const struct {
	uint32_t fmt;
	const char *name;
} types[] = {
	{S_IFREG, "file"}, {S_IFDIR, "dir"},     {S_IFLNK, "symlink"}, {S_IFIFO, "fifo"},
	{S_IFSOCK, "socket"}, {S_IFCHR, "char"}, {S_IFBLK, "block"},   {0, "unknown"},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

const char *mfs_feed_type_name(uint32_t mode)
{
	for (size_t i = 0; i < NTYPES; i++)
		if ((mode & S_IFMT) == types[i].fmt)
			return types[i].name;
	return "unknown";
}

int mfs_feed_type_of(const char *name, size_t len, uint32_t *mode)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (strlen(types[i].name) == len && !memcmp(types[i].name, name, len)) {
			*mode = types[i].fmt;
			return 0;
		}
	return -1;
}

/* FUSE_SET_ATTR_* bits (fuse_lowlevel.h), by the names the lines use. */
static const struct {
	uint32_t bit;
	const char *name;
} attrs[] = {
	{1u << 0, "mode"},  {1u << 1, "uid"},       {1u << 2, "gid"},       {1u << 3, "size"},
	{1u << 4, "atime"}, {1u << 5, "mtime"},     {1u << 7, "atime_now"}, {1u << 8, "mtime_now"},
	{1u << 10, "ctime"}, {1u << 11, "kill_suidgid"},
};
#define NATTRS (sizeof(attrs) / sizeof(attrs[0]))

/* dbfs_event.flags by name. */
static const struct {
	uint32_t bit;
	const char *name;
} evflags[] = {{DBFS_EVF_EXCHANGE, "exchange"}, {DBFS_EVF_REPLACED, "replaced"}};

uint32_t mfs_feed_flag_of(const char *s, size_t len)
{
	for (size_t i = 0; i < 2; i++)
		if (strlen(evflags[i].name) == len && !memcmp(evflags[i].name, s, len))
			return evflags[i].bit;
	return 0;
}

void mfs_feed_flag_names(uint32_t mask, void (*put)(const char *s, size_t n, void *arg), void *arg)
{
	for (size_t i = 0; i < 2; i++)
		if (mask & evflags[i].bit)
			put(evflags[i].name, strlen(evflags[i].name), arg);
}

/* Does the operation carry a range (off, len)? */
bool mfs_feed_op_has_range(unsigned op)
{
	return op == DBFS_EV_WRITE || op == DBFS_EV_FALLOCATE || op == DBFS_EV_PUNCH ||
	       op == DBFS_EV_SETTLED;
}

/* The bit of an attribute name, also "0xHEX" for bits without a name; 0
 * when it is none. */
uint32_t mfs_feed_attr_of(const char *s, size_t len)
{
	for (size_t i = 0; i < NATTRS; i++)
		if (strlen(attrs[i].name) == len && !memcmp(attrs[i].name, s, len))
			return attrs[i].bit;
	if (len < 3 || len > 10 || s[0] != '0' || s[1] != 'x')
		return 0;
	uint32_t v = 0;
	for (size_t i = 2; i < len; i++) {
		char c = s[i];
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
						    : 16;
		if (d == 16)
			return 0;
		v = v << 4 | d;
	}
	for (size_t i = 0; i < NATTRS; i++)
		if (v & attrs[i].bit)
			return 0; /* named bits go by their name */
	return v;
}

/* The names of mask, each passed to put (with its length). */
void mfs_feed_attr_names(uint32_t mask, void (*put)(const char *s, size_t n, void *arg), void *arg)
{
	char hex[16];
	for (size_t i = 0; i < NATTRS; i++)
		if (mask & attrs[i].bit)
			put(attrs[i].name, strlen(attrs[i].name), arg);
	uint32_t rest = mask;
	for (size_t i = 0; i < NATTRS; i++)
		rest &= ~attrs[i].bit;
	if (rest) {
		int n = snprintf(hex, sizeof(hex), "0x%x", rest);
		put(hex, (size_t)n, arg);
	}
}
