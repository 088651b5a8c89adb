/*
 * Pass 3, counts: every number an inode or the super table keeps about the
 * others. nlink (files: the entries naming it; directories: 2 + their
 * subdirectories), nentries, a directory's parent, alloc (see format.h,
 * Accounting), usage, next_ino, and orphan entries of linked inodes.
 */
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"

static bool check_inode(struct fsck *f, struct fsck_inode *in)
{
	struct dbfs_inode *r = &in->rec;
	bool dir = S_ISDIR(r->mode), fix = false;
	uint64_t ino = in->ino;

	/* An unreachable inode was reported by the tree pass. */
	if (in->reachable) {
		uint64_t nlink = dir ? 2 + in->subdirs : in->links;
		if (r->nlink != nlink) {
			fsck_problem(f, "inode %" PRIu64 ": nlink %u, expected %" PRIu64, ino,
				     r->nlink, nlink);
			r->nlink = (uint32_t)nlink;
			fix = true;
		}
		if (in->orphan && in->links) {
			fsck_problem(f, "inode %" PRIu64 ": in the orphan table but linked", ino);
			if (f->fixing) {
				unsigned char kb[8];
				dbfs_put_be64(kb, ino);
				fsck_del_key(f, f->dbi_orphan, kb, 8);
			}
		}
	}
	if (dir) {
		uint64_t parent = ino == DBFS_ROOT_INO ? DBFS_ROOT_INO : in->container;
		if (r->nentries != in->entries) {
			fsck_problem(f,
				     "directory %" PRIu64 ": nentries %" PRIu64 ", has %" PRIu64
				     " entries",
				     ino, r->nentries, in->entries);
			r->nentries = in->entries;
			fix = true;
		}
		if (parent && r->parent != parent) {
			fsck_problem(f,
				     "directory %" PRIu64 ": parent %" PRIu64
				     ", but its entry is in %" PRIu64,
				     ino, r->parent, parent);
			r->parent = parent;
			fix = true;
		}
		if (r->next_cookie < DBFS_COOKIE_FIRST || r->next_cookie <= in->max_cookie) {
			fsck_problem(f,
				     "directory %" PRIu64 ": next_cookie %" PRIu64
				     " not above its cookies (largest %" PRIu64 ")",
				     ino, r->next_cookie, in->max_cookie);
			r->next_cookie = in->max_cookie >= DBFS_COOKIE_FIRST ? in->max_cookie + 1
									     : DBFS_COOKIE_FIRST;
			fix = true;
		}
	}
	if (r->alloc != in->data_alloc) {
		fsck_problem(
		    f, "inode %" PRIu64 ": alloc %" PRIu64 ", its %" PRIu64 " blocks take %" PRIu64,
		    ino, r->alloc, in->blocks, in->data_alloc);
		r->alloc = in->data_alloc;
		fix = true;
	}
	if (fix && f->fixing)
		fsck_put_inode(f, in);
	return fix && f->fixing;
}

bool fsck_pass_counts(struct fsck *f)
{
	uint64_t bytes = 0, max_ino = 0;
	bool changed = false;

	for (size_t i = 0; i < f->ninodes; i++) {
		struct fsck_inode *in = &f->inodes[i];
		if (in->ino > max_ino)
			max_ino = in->ino;
		if (!in->bad)
			changed |= check_inode(f, in);
		bytes += in->rec.alloc;
	}
	if (f->sb.next_ino <= max_ino) {
		fsck_problem(f, "superblock: next_ino %" PRIu64 " is not above inode %" PRIu64,
			     f->sb.next_ino, max_ino);
		if (f->fixing) {
			MDB_val k = {2, "sb"}, v = {sizeof(f->sb), &f->sb};
			f->sb.next_ino = max_ino + 1;
			fsck_lmdb_check(mdb_put(f->txn, f->dbi_super, &k, &v, 0),
					"writing superblock");
			changed = true;
		}
	}
	if (!f->usage_ok || f->usage.bytes != bytes || f->usage.inodes != f->ninodes) {
		if (!f->usage_ok)
			fsck_problem(f, "usage record missing or malformed");
		else
			fsck_problem(f,
				     "usage: bytes %" PRIu64 " inodes %" PRIu64
				     ", expected %" PRIu64 " and %zu",
				     f->usage.bytes, f->usage.inodes, bytes, f->ninodes);
		if (f->fixing) {
			MDB_val k = {5, "usage"}, v = {sizeof(f->usage), &f->usage};
			f->usage.bytes = bytes;
			f->usage.inodes = f->ninodes;
			fsck_lmdb_check(mdb_put(f->txn, f->dbi_super, &k, &v, 0), "writing usage");
			changed = true;
		}
	}
	return changed;
}
