/*
 * Pass 2, tree: the root exists, every directory has exactly one name, and
 * every inode is reachable from the root. Unreachable inodes with no link
 * left (orphans: nlink 0) are deleted, as dbfs_open would; any other
 * unreachable inode is moved into /lost+found as "#<ino>".
 */
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fsck.h"

/* Keep one name per directory: the one its parent field agrees with, else
 * the first. Returns true when a dirent was dropped. */
static bool check_dir_names(struct fsck *f)
{
	bool changed = false;

	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		if (d->bad || d->gone)
			continue;
		struct fsck_inode *ch = fsck_inode_find(f, d->val.ino);
		if (!ch || ch->bad)
			continue;
		if (ch->ino == DBFS_ROOT_INO) {
			fsck_problem(f, "dirent %" PRIu64 "/'%s' names the root directory",
				     d->parent, fsck_name(d->key + 8, d->klen - 8, 0));
		} else if (S_ISDIR(ch->rec.mode) && ch->links > 1) {
			uint64_t keep = ch->container;
			for (size_t j = 0; j < f->ndirents; j++) {
				struct fsck_dirent *e = &f->dirents[j];
				if (!e->bad && !e->gone && e->val.ino == ch->ino &&
				    e->parent == ch->rec.parent)
					keep = e->parent;
			}
			if (d->parent == keep)
				continue;
			fsck_problem(f,
				     "directory %" PRIu64 " has %" PRIu64 " names; '%s' in %" PRIu64
				     " is extra",
				     ch->ino, ch->links, fsck_name(d->key + 8, d->klen - 8, 0),
				     d->parent);
		} else {
			continue;
		}
		if (f->fixing) {
			fsck_del_dirent(f, d);
			changed = true;
		}
	}
	return changed;
}

static bool is_orphan(const struct fsck_inode *in)
{
	return in->links == 0 && in->rec.nlink == 0;
}

static void report_unreachable(struct fsck *f, struct fsck_inode *in)
{
	const char *type = in->bad ? "inode" : fsck_type_name(in->rec.mode);

	if (is_orphan(in) && in->orphan && in->reclaim) {
		/* a state of a healthy store: the next mount goes on with it */
		fsck_note(f, "%s %" PRIu64 ": being freed in the background (%" PRIu64 " bytes left)",
			  type, in->ino, in->rec.alloc);
	} else if (is_orphan(in) && in->orphan) {
		if (f->allow_orphans)
			fsck_note(f, "%s %" PRIu64 ": orphan (nlink 0, in the orphan table)", type,
				  in->ino);
		else
			fsck_problem(f, "%s %" PRIu64 ": orphan (nlink 0) to reclaim", type,
				     in->ino);
	} else if (is_orphan(in)) {
		fsck_problem(f, "%s %" PRIu64 ": nlink 0 but not in the orphan table", type,
			     in->ino);
	} else if (in->links == 0) {
		fsck_problem(f, "%s %" PRIu64 ": unreachable, no entry names it (nlink %u)", type,
			     in->ino, in->rec.nlink);
	} else {
		fsck_problem(f,
			     "%s %" PRIu64 ": unreachable (named in directory %" PRIu64
			     ", which is not reachable from the root)",
			     type, in->ino, in->container);
	}
}

/* One round of reconnection; returns true when it changed the store. */
static bool reconnect(struct fsck *f)
{
	bool changed = false;

	for (size_t i = 0; i < f->ninodes; i++) {
		struct fsck_inode *in = &f->inodes[i];
		if (in->reachable || in->bad || in->links)
			continue;
		if (is_orphan(in) && (!S_ISDIR(in->rec.mode) || in->entries == 0)) {
			fsck_action(f, "inode %" PRIu64 " deleted", in->ino);
			fsck_delete_inode(f, in->ino);
			changed = true;
		} else if (fsck_attach_lost_found(f, in->ino)) {
			changed = true;
		}
	}
	if (changed)
		return true;
	/* Only cycles of directories are left: cut one. */
	for (size_t i = 0; i < f->ninodes; i++) {
		struct fsck_inode *in = &f->inodes[i];
		if (in->reachable || in->bad || !S_ISDIR(in->rec.mode) || !in->links)
			continue;
		for (size_t j = 0; j < f->ndirents; j++)
			if (!f->dirents[j].bad && f->dirents[j].val.ino == in->ino)
				fsck_del_dirent(f, &f->dirents[j]);
		fsck_attach_lost_found(f, in->ino);
		return true;
	}
	return false;
}

bool fsck_pass_tree(struct fsck *f)
{
	struct fsck_inode *root = fsck_inode_find(f, DBFS_ROOT_INO);
	bool changed = false;

	if (!root || root->bad || !S_ISDIR(root->rec.mode)) {
		fsck_unfixable(f, "root inode %llu %s", DBFS_ROOT_INO,
			       !root	   ? "does not exist"
			       : root->bad ? "is malformed"
					   : "is not a directory");
		return false;
	}
	if (check_dir_names(f)) {
		changed = true;
		fsck_load(f);
	}
	for (size_t i = 0; i < f->ninodes; i++)
		if (!f->inodes[i].reachable)
			report_unreachable(f, &f->inodes[i]);
	if (!f->fixing)
		return changed;
	/* Each round reconnects at least one inode, so this ends. */
	while (reconnect(f)) {
		changed = true;
		fsck_load(f);
	}
	return changed;
}
