/*
 * LD_PRELOAD shim for t_shared_readers.sh: a process that dies in the
 * middle of a read. dbfs answers a read with fuse_reply_iov straight from
 * the LMDB map, inside its read transaction; when the data answered
 * starts with HOLD_MAGIC, this shim creates the file $HOLDREAD_READY and
 * never returns, so the worker keeps the transaction (and its LMDB reader
 * slot, pinning that snapshot) until the test kills the process.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOLD_MAGIC "MFS-HOLD-READ"

int fuse_reply_iov(fuse_req_t req, const struct iovec *iov, int count)
{
	static int (*real)(fuse_req_t, const struct iovec *, int);
	if (count > 0 && iov[0].iov_len >= strlen(HOLD_MAGIC) &&
	    !memcmp(iov[0].iov_base, HOLD_MAGIC, strlen(HOLD_MAGIC))) {
		const char *ready = getenv("HOLDREAD_READY");
		if (ready)
			close(open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
		for (;;)
			pause();
	}
	if (!real)
		real = (int (*)(fuse_req_t, const struct iovec *, int))dlsym(RTLD_NEXT,
									     "fuse_reply_iov");
	return real(req, iov, count);
}
