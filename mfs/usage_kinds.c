/* Counts by kind: operation names, encoding, text (see usage_kinds.h). */
#include <errno.h>
#include <string.h>

#include "buf.h"
#include "usage_kinds.h"

/* FUSE opcodes by number (linux/fuse.h); NULL: not one we count by name. */
static const char *const op_names[MFS_OPCODES] = {
    [1] = "lookup",	  [2] = "forget",	  [3] = "getattr",	 [4] = "setattr",
    [5] = "readlink",	  [6] = "symlink",	  [8] = "mknod",	 [9] = "mkdir",
    [10] = "unlink",	  [11] = "rmdir",	  [12] = "rename",	 [13] = "link",
    [14] = "open",	  [15] = "read",	  [16] = "write",	 [17] = "statfs",
    [18] = "release",	  [20] = "fsync",	  [21] = "setxattr",	 [22] = "getxattr",
    [23] = "listxattr",	  [24] = "removexattr",	  [25] = "flush",	 [26] = "init",
    [27] = "opendir",	  [28] = "readdir",	  [29] = "releasedir",	 [30] = "fsyncdir",
    [31] = "getlk",	  [32] = "setlk",	  [33] = "setlkw",	 [34] = "access",
    [35] = "create",	  [36] = "interrupt",	  [37] = "bmap",	 [38] = "destroy",
    [39] = "ioctl",	  [40] = "poll",	  [41] = "notify_reply", [42] = "batch_forget",
    [43] = "fallocate",	  [44] = "readdirplus",	  [45] = "rename2",	 [46] = "lseek",
    [47] = "copy_file_range", [50] = "syncfs",	  [51] = "tmpfile",	 [52] = "statx",
};

#define ERR_BASE 0x100

const char *mfs_op_name(unsigned op)
{
	return op < MFS_OPCODES ? op_names[op] : NULL;
}

const char *mfs_errno_name(unsigned e)
{
	const char *n = e && e < DBFS_ERRNOS ? strerrorname_np((int)e) : NULL;
	return n ? n : "other";
}

static uint64_t sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void mfs_usage_kinds_sub(struct mfs_usage_kinds *d, const struct mfs_usage_kinds *a,
			 const struct mfs_usage_kinds *b)
{
	for (int i = 0; i < MFS_OPCODES; i++)
		d->ops[i] = sub(a->ops[i], b->ops[i]);
	for (int i = 0; i < DBFS_ERRNOS; i++)
		d->errs[i] = sub(a->errs[i], b->errs[i]);
}

void mfs_usage_kinds_add(struct mfs_usage_kinds *s, const struct mfs_usage_kinds *d)
{
	for (int i = 0; i < MFS_OPCODES; i++)
		s->ops[i] += d->ops[i];
	for (int i = 0; i < DBFS_ERRNOS; i++)
		s->errs[i] += d->errs[i];
}

static size_t entry(unsigned char *p, uint16_t code, uint64_t count)
{
	memcpy(p, &code, 2);
	memcpy(p + 2, &count, 8);
	return 10;
}

size_t mfs_usage_kinds_put(unsigned char *p, const struct mfs_usage_kinds *k)
{
	uint16_t n = 0;
	size_t len = 2;

	for (int i = 0; i < MFS_OPCODES; i++)
		if (k->ops[i]) {
			len += entry(p + len, (uint16_t)i, k->ops[i]);
			n++;
		}
	for (int i = 0; i < DBFS_ERRNOS; i++)
		if (k->errs[i]) {
			len += entry(p + len, (uint16_t)(ERR_BASE + i), k->errs[i]);
			n++;
		}
	memcpy(p, &n, 2);
	return len;
}

int mfs_usage_kinds_get(const unsigned char *p, size_t len, struct mfs_usage_kinds *k)
{
	uint16_t n, code;
	uint64_t count;

	memset(k, 0, sizeof(*k));
	if (len < 2)
		return -EINVAL;
	memcpy(&n, p, 2);
	if (len != 2 + (size_t)n * 10)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		memcpy(&code, p + 2 + 10 * i, 2);
		memcpy(&count, p + 4 + 10 * i, 8);
		if (code < MFS_OPCODES)
			k->ops[code] = count;
		else if (code >= ERR_BASE && code < ERR_BASE + DBFS_ERRNOS)
			k->errs[code - ERR_BASE] = count;
		else
			return -EINVAL;
	}
	return 0;
}

void mfs_usage_kinds_text(struct mfs_buf *b, const struct mfs_usage_kinds *k, int which)
{
	const uint64_t *v = which ? k->errs : k->ops;
	int n = which ? DBFS_ERRNOS : MFS_OPCODES, shown = 0;

	for (int i = 0; i < n; i++) {
		if (!v[i])
			continue;
		const char *name = which ? mfs_errno_name((unsigned)i) : mfs_op_name((unsigned)i);
		if (name)
			mfs_buf_printf(b, "%s%s:%llu", shown++ ? "," : "", name,
				       (unsigned long long)v[i]);
		else /* an opcode without a name: by number, so none is listed twice */
			mfs_buf_printf(b, "%sop%d:%llu", shown++ ? "," : "", i,
				       (unsigned long long)v[i]);
	}
	if (!shown)
		mfs_buf_putc(b, '-');
}
