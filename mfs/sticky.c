/* Whether a session's requests stay with one worker (see sticky.h). */
#include "sticky.h"

bool mfs_sticky_note(struct mfs_sticky *st, bool overlapped, bool queued)
{
	st->seen = (uint8_t)(st->seen << 1 | (overlapped || queued));
	bool concurrent = __builtin_popcount(st->seen) >= MFS_STICKY_SWITCH;
	if (concurrent == st->concurrent)
		return false;
	st->concurrent = concurrent;
	return true;
}

bool mfs_sticky_background(struct mfs_sticky *st)
{
	st->seen = (uint8_t)(st->seen & ~1u);
	bool concurrent = __builtin_popcount(st->seen) >= MFS_STICKY_SWITCH;
	if (concurrent == st->concurrent)
		return false;
	st->concurrent = concurrent;
	return true;
}

void mfs_sticky_force(struct mfs_sticky *st)
{
	st->seen = 0xff;
	st->concurrent = true;
}
