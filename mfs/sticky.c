/* Whether a session's requests stay with one worker (see sticky.h). */
#include "sticky.h"

bool mfs_sticky_note(struct mfs_sticky *st, bool overlapped, bool queued)
{
	if (overlapped || queued) {
		st->calm = 0;
		if (st->concurrent)
			return false;
		st->concurrent = true;
		return true;
	}
	if (!st->concurrent || ++st->calm < MFS_STICKY_CALM)
		return false;
	st->concurrent = false;
	st->calm = 0;
	return true;
}
