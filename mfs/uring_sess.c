/* The references of a ring session (struct mfs_uring_sess): who still
 * holds it, and finding it by libfuse's fd. Calls no other uring file. */
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

#include "uring_private.h"

/* u->lock held: drop a reference; free `us` at the last one. */
void mfs_uring_sess_put(struct mfs_uring_sess *us)
{
	if (--us->refs)
		return;
	struct mfs_uring *u = us->u;
	for (struct mfs_uring_sess **pp = &u->sessions; *pp; pp = &(*pp)->next)
		if (*pp == us) {
			*pp = us->next;
			break;
		}
	for (unsigned i = 0; i < u->nq * DEPTH; i++) {
		struct uent *e = &us->ents[i];
		if (e->base)
			munmap(e->base, HEADROOM + MFS_URING_PAYLOAD);
	}
	if (us->ring_fd >= 0)
		close(us->ring_fd);
	free(us->ents);
	free(us->pending_next);
	free(us);
}

struct mfs_uring_sess *mfs_uring_sess_by_fd(struct mfs_uring *u, int fd)
{
	for (struct mfs_uring_sess *us = u->sessions; us; us = us->next)
		if (us->fd == fd && !us->dead)
			return us;
	return NULL;
}
