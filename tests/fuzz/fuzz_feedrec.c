/*
 * Fuzz target "feedrec": the change feed's binary record decoder
 * (dbfs_ev_decode, dbfs/feed.h), which every reader runs on what the queue
 * hands it.
 *
 * Input: one record, any bytes.
 *
 * Checks beyond "no crash":
 *   - an accepted record's strings lie inside the input, their lengths add
 *     up to the input's length less the fixed part, and no string holds a
 *     NUL; a path is empty or starts with '/';
 *   - encoding the decoded event gives back exactly the input (the format
 *     has one encoding per event: a decoder accepting two would make
 *     positions ambiguous);
 *   - the op is one that is stored (never DBFS_EV_GAP) and has a name.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "dbfs/feed.h"

static void inside(const uint8_t *data, size_t size, const char *p, size_t n, const char *what)
{
	if (!n)
		return;
	if ((const uint8_t *)p < data || (const uint8_t *)p + n > data + size)
		fz_fail("%s outside the input", what);
	if (memchr(p, 0, n))
		fz_fail("%s holds a NUL", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dbfs_event ev = {.seq = 7};
	if (dbfs_ev_decode(data, size, &ev))
		return 0;
	if (ev.seq != 7)
		fz_fail("decode changed seq");
	if (!dbfs_ev_op_name(ev.op) || ev.op == DBFS_EV_GAP)
		fz_fail("accepted op %u", ev.op);
	inside(data, size, ev.path, ev.path_len, "path");
	inside(data, size, ev.new_path, ev.new_path_len, "new_path");
	inside(data, size, ev.xattr, ev.xattr_len, "xattr");
	if (ev.path_len && ev.path[0] != '/')
		fz_fail("path not from the root");
	if (DBFS_EV_REC_FIXED + ev.path_len + ev.new_path_len + ev.xattr_len != size)
		fz_fail("lengths do not add up");
	uint8_t *back = malloc(size);
	if (!back)
		return 0;
	size_t n = dbfs_ev_encode(&ev, back);
	if (n != size || memcmp(back, data, size))
		fz_fail("encode(decode(x)) != x");
	free(back);
	return 0;
}
