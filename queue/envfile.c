/* SPDX-License-Identifier: MIT */
/*
 * Where the queue's own files go (the ack and enqueue logs of relaxed
 * environments): next to the environment's data file. Calls no other file
 * of the library.
 */
#include <errno.h>
#include <stdio.h>

#include "internal.h"

int mfsq_env_file(mfsq_queue *q, const char *suffix, char *buf, size_t len)
{
	const char *path = NULL;
	unsigned fl = 0;

	if (mdb_env_get_path(q->env, &path) || !path)
		return EINVAL;
	mdb_env_get_flags(q->env, &fl);
	int n = snprintf(buf, len, "%s%smfsq-%s%s", path, (fl & MDB_NOSUBDIR) ? "-" : "/", q->name,
			 suffix);
	return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}
