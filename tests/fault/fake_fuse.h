/*
 * A stand-in for libfuse's request and reply calls (linked with
 * -Wl,--wrap=fuse_reply_*...), so that the tests drive dbfs_fuse_ops()
 * handlers directly, as the kernel's requests would, without a mount. A
 * handler's one reply is recorded in `fake_reply`.
 */
#ifndef MFS_TESTS_FAULT_FAKE_FUSE_H
#define MFS_TESTS_FAULT_FAKE_FUSE_H

#include <fuse_lowlevel.h>
#include <stdint.h>

struct fake_reply {
	int n;		 /* replies to the request: must end as 1 */
	int err;	 /* errno replied, 0 for a success reply */
	uint64_t ino;	 /* fuse_reply_entry's inode */
	uint64_t hash;	 /* of a buffer, iov, readlink or write count replied */
	size_t len;	 /* its length */
	char buf[65536]; /* the bytes of a buffer reply (readdir), first 64 KiB */
};

extern struct fake_reply fake_reply;
extern struct fuse_ctx fake_ctx;
/* The request to pass to handlers: its userdata is `fs`. */
fuse_req_t fake_req(void *fs);

uint64_t fake_hash(uint64_t h, const void *p, size_t n);
#define FAKE_HASH0 1469598103934665603ull

#endif
