/* Whether a session's requests stay with one worker (see sticky.h). */
#include "sticky.h"

bool mfs_sticky_note(struct mfs_sticky *st, bool overlapped, bool queued)
{
	return mfs_sticky_note_from(st, overlapped, queued, false);
}

bool mfs_sticky_note_from(struct mfs_sticky *st, bool overlapped, bool queued, bool same_client)
{
	bool forgets = st->bg != 0;

	st->bg = (uint8_t)(st->bg << 1);
	st->seen = (uint8_t)(st->seen << 1 | (overlapped || (queued && !(same_client && forgets))));
	bool concurrent = __builtin_popcount(st->seen) >= MFS_STICKY_SWITCH;
	if (concurrent == st->concurrent)
		return false;
	st->concurrent = concurrent;
	return true;
}

bool mfs_sticky_background(struct mfs_sticky *st)
{
	st->seen = (uint8_t)(st->seen & ~1u);
	st->bg |= 1u;
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
