/* The change feed's binary record (layout drawn in dbfs/feed.h) and the
 * operation names. Pure functions: no store, no lock. */
#include <errno.h>
#include <string.h>

#include "dbfs/feed.h"

static const char *const op_names[] = {
    [DBFS_EV_CREATE] = "create",
    [DBFS_EV_MKDIR] = "mkdir",
    [DBFS_EV_MKNOD] = "mknod",
    [DBFS_EV_SYMLINK] = "symlink",
    [DBFS_EV_LINK] = "link",
    [DBFS_EV_UNLINK] = "unlink",
    [DBFS_EV_RMDIR] = "rmdir",
    [DBFS_EV_RENAME] = "rename",
    [DBFS_EV_WRITE] = "write",
    [DBFS_EV_TRUNCATE] = "truncate",
    [DBFS_EV_FALLOCATE] = "fallocate",
    [DBFS_EV_PUNCH] = "punch",
    [DBFS_EV_SETATTR] = "setattr",
    [DBFS_EV_SETXATTR] = "setxattr",
    [DBFS_EV_REMOVEXATTR] = "removexattr",
    [DBFS_EV_EXPIRE] = "expire",
    [DBFS_EV_SETTLED] = "settled",
    [DBFS_EV_GAP] = "gap",
};

const char *dbfs_ev_op_name(unsigned op)
{
	return op >= 1 && op <= DBFS_EV_OP_MAX ? op_names[op] : NULL;
}

unsigned dbfs_ev_op_parse(const char *name, size_t len)
{
	for (unsigned op = 1; op <= DBFS_EV_OP_MAX; op++)
		if (strlen(op_names[op]) == len && !memcmp(op_names[op], name, len))
			return op;
	return 0;
}

size_t dbfs_ev_rec_size(const struct dbfs_event *ev)
{
	return DBFS_EV_REC_FIXED + ev->path_len + ev->new_path_len + ev->xattr_len;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
	return p + 8;
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
	return p + 4;
}

static const unsigned char *get64(const unsigned char *p, uint64_t *v)
{
	memcpy(v, p, 8);
	return p + 8;
}

static const unsigned char *get32(const unsigned char *p, uint32_t *v)
{
	memcpy(v, p, 4);
	return p + 4;
}

size_t dbfs_ev_encode(const struct dbfs_event *ev, void *buf)
{
	unsigned char *p = buf;
	p[0] = DBFS_EV_REC_VERSION;
	p[1] = (unsigned char)ev->op;
	p[2] = p[3] = 0;
	p = put32(p + 4, ev->flags);
	p = put64(p, ev->ino);
	p = put64(p, ev->parent);
	p = put64(p, ev->new_parent);
	p = put64(p, ev->time_ns);
	p = put64(p, ev->size);
	p = put64(p, ev->off);
	p = put64(p, ev->len);
	p = put32(p, ev->uid);
	p = put32(p, ev->gid);
	p = put32(p, ev->pid);
	p = put32(p, ev->mode);
	p = put32(p, ev->attr_mask);
	p = put32(p, ev->nlink);
	p = put32(p, (uint32_t)ev->path_len);
	p = put32(p, (uint32_t)ev->new_path_len);
	p = put32(p, (uint32_t)ev->xattr_len);
	p = put32(p, 0);
	if (ev->path_len)
		memcpy(p, ev->path, ev->path_len);
	p += ev->path_len;
	if (ev->new_path_len)
		memcpy(p, ev->new_path, ev->new_path_len);
	p += ev->new_path_len;
	if (ev->xattr_len)
		memcpy(p, ev->xattr, ev->xattr_len);
	p += ev->xattr_len;
	return (size_t)(p - (unsigned char *)buf);
}

/* A path as the feed writes them: empty, or '/' then components without
 * NUL and without empty ones ("/" alone is the root). */
static int path_ok(const unsigned char *s, size_t n)
{
	if (n == 0)
		return 1;
	if (s[0] != '/' || memchr(s, 0, n))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (s[i] == '/' && s[i - 1] == '/')
			return 0;
	return n == 1 || s[n - 1] != '/';
}

int dbfs_ev_decode(const void *buf, size_t len, struct dbfs_event *ev)
{
	const unsigned char *p = buf;
	uint32_t plen, nlen, xlen;
	uint64_t seq = ev->seq;

	if (!buf || len < DBFS_EV_REC_FIXED || p[0] != DBFS_EV_REC_VERSION || p[2] || p[3])
		return -EBADMSG;
	memset(ev, 0, sizeof(*ev));
	ev->seq = seq;
	ev->op = p[1];
	if (ev->op < DBFS_EV_CREATE || ev->op >= DBFS_EV_GAP)
		return -EBADMSG;
	p = get32(p + 4, &ev->flags);
	p = get64(p, &ev->ino);
	p = get64(p, &ev->parent);
	p = get64(p, &ev->new_parent);
	p = get64(p, &ev->time_ns);
	p = get64(p, &ev->size);
	p = get64(p, &ev->off);
	p = get64(p, &ev->len);
	p = get32(p, &ev->uid);
	p = get32(p, &ev->gid);
	p = get32(p, &ev->pid);
	p = get32(p, &ev->mode);
	p = get32(p, &ev->attr_mask);
	p = get32(p, &ev->nlink);
	p = get32(p, &plen);
	p = get32(p, &nlen);
	p = get32(p, &xlen);
	uint32_t pad;
	p = get32(p, &pad);
	if (pad) /* one encoding per event (fuzz_feedrec) */
		return -EBADMSG;
	/* 64-bit sum: three u32 cannot overflow it */
	if ((uint64_t)plen + nlen + xlen != len - DBFS_EV_REC_FIXED)
		return -EBADMSG;
	if (!path_ok(p, plen) || !path_ok(p + plen, nlen) || memchr(p + plen + nlen, 0, xlen))
		return -EBADMSG;
	ev->path = plen ? (const char *)p : "";
	ev->path_len = plen;
	ev->new_path = nlen ? (const char *)p + plen : NULL;
	ev->new_path_len = nlen;
	ev->xattr = xlen ? (const char *)p + plen + nlen : NULL;
	ev->xattr_len = xlen;
	return 0;
}
