/* See fake_fuse.h. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "fake_fuse.h"

struct fake_reply fake_reply;
struct fuse_ctx fake_ctx = {.uid = 0, .gid = 0, .pid = 1, .umask = 022};
static void *fake_fs;
static char fake_req_mem[64];

fuse_req_t fake_req(void *fs)
{
	fake_fs = fs;
	memset(&fake_reply, 0, offsetof(struct fake_reply, buf));
	return (fuse_req_t)fake_req_mem;
}

uint64_t fake_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static int ok(const void *p, size_t n)
{
	fake_reply.n++;
	fake_reply.err = 0;
	if (p) {
		fake_reply.hash = fake_hash(fake_reply.hash, p, n);
		size_t room = sizeof(fake_reply.buf) - fake_reply.len;
		memcpy(fake_reply.buf + fake_reply.len, p, n < room ? n : room);
		fake_reply.len += n;
	}
	return 0;
}

#define W(ret, name, params)                                                                       \
	ret __wrap_##name params;                                                                  \
	ret __wrap_##name params

W(void *, fuse_req_userdata, (fuse_req_t r))
{
	(void)r;
	return fake_fs;
}
W(const struct fuse_ctx *, fuse_req_ctx, (fuse_req_t r))
{
	(void)r;
	return &fake_ctx;
}
W(int, fuse_reply_err, (fuse_req_t r, int e))
{
	(void)r;
	fake_reply.n++;
	fake_reply.err = e;
	return 0;
}
W(void, fuse_reply_none, (fuse_req_t r))
{
	(void)r;
	fake_reply.n++;
}
W(int, fuse_reply_entry, (fuse_req_t r, const struct fuse_entry_param *e))
{
	(void)r;
	fake_reply.ino = e->ino;
	return ok(NULL, 0);
}
W(int, fuse_reply_attr, (fuse_req_t r, const struct stat *st, double t))
{
	(void)r;
	(void)t;
	uint64_t a[] = {st->st_mode, st->st_uid, st->st_gid, st->st_nlink, (uint64_t)st->st_size};
	return ok(a, sizeof(a));
}
W(int, fuse_reply_open, (fuse_req_t r, const struct fuse_file_info *fi))
{
	(void)r;
	(void)fi;
	return ok(NULL, 0);
}
W(int, fuse_reply_buf, (fuse_req_t r, const char *buf, size_t n))
{
	(void)r;
	return ok(buf, n);
}
W(int, fuse_reply_iov, (fuse_req_t r, const struct iovec *iov, int count))
{
	(void)r;
	for (int i = 0; i < count; i++)
		ok(iov[i].iov_base, iov[i].iov_len), fake_reply.n--;
	fake_reply.n++;
	return 0;
}
W(int, fuse_reply_readlink, (fuse_req_t r, const char *link))
{
	(void)r;
	return ok(link, strlen(link));
}
W(int, fuse_reply_statfs, (fuse_req_t r, const struct statvfs *s))
{
	(void)r;
	(void)s;
	return ok(NULL, 0);
}
W(int, fuse_reply_write, (fuse_req_t r, size_t n))
{
	(void)r;
	return ok(&n, sizeof(n));
}
W(int, fuse_reply_xattr, (fuse_req_t r, size_t n))
{
	(void)r;
	return ok(&n, sizeof(n));
}
W(int, fuse_lowlevel_notify_inval_inode,
  (struct fuse_session * se, fuse_ino_t ino, off_t off, off_t len))
{
	(void)se;
	(void)ino;
	(void)off;
	(void)len;
	return 0;
}
