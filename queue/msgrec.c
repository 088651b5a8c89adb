/* SPDX-License-Identifier: MIT */
/*
 * The one decoder of message records (format.h): the values of a
 * subshard, of a delay shard and, after their reason bytes, of the
 * exception queue are a struct mfsq_disk_msg and the payload; and the
 * subshard index rows, whose value is the subshard's 8-byte id. Every
 * reader of those values goes through here, so a damaged value is refused
 * (EBADMSG) before any length is worked out from it. Calls no other file
 * of the library.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

int mfsq_msg_decode(const MDB_val *val, size_t skip, struct mfsq_disk_msg *h,
		    const unsigned char **data, size_t *len)
{
	/* A short value would make the payload length wrap (~2^64). */
	if (val->mv_size < skip || val->mv_size - skip < sizeof(*h))
		return EBADMSG;
	memcpy(h, (const unsigned char *)val->mv_data + skip, sizeof(*h));
	/* No enqueue writes these (enqueue.c refuses prio > 9, put.c sets
	 * only MFSQ_MSG_DELAYED): the header itself is damaged. */
	if (h->prio > MFSQ_PRIO_MAX || (h->flags & ~MFSQ_MSG_DELAYED))
		return EBADMSG;
	if (data)
		*data = (const unsigned char *)val->mv_data + skip + sizeof(*h);
	if (len)
		*len = val->mv_size - skip - sizeof(*h);
	return 0;
}

int mfsq_index_id(const MDB_val *val, uint64_t *id)
{
	if (val->mv_size != sizeof(*id))
		return EBADMSG;
	memcpy(id, val->mv_data, sizeof(*id));
	return 0;
}
