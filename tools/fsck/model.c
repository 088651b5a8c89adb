/*
 * Load the store into memory: every inode record, every dirent, and per
 * inode the aggregates of its data blocks and of the dirents naming it.
 * Malformed dirents stay in the model (flagged bad) so the records pass can
 * report and drop them by their raw keys; malformed inode, data, xattr and
 * orphan keys are not loaded (the records pass walks those tables itself).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		fsck_fatal("out of memory");
	return p;
}

static void load_inodes(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	size_t cap = 0;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_inode, &c), "cursor on inode");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || dbfs_get_be64(k.mv_data) == 0)
			continue;
		if (f->ninodes == cap) {
			cap = cap ? cap * 2 : 1024;
			f->inodes = xrealloc(f->inodes, cap * sizeof(*f->inodes));
		}
		struct fsck_inode *in = &f->inodes[f->ninodes++];
		memset(in, 0, sizeof(*in));
		in->ino = dbfs_get_be64(k.mv_data);
		size_t fixed = fsck_inode_fixed(f, &v);
		if (v.mv_size < fixed) {
			in->bad = true;
			continue;
		}
		memcpy(&in->rec, v.mv_data, fixed); /* older formats: the rest 0 */
		uint32_t t = in->rec.mode & S_IFMT;
		if (t == S_IFLNK)
			in->bad = v.mv_size != fixed + in->rec.size || in->rec.size == 0 ||
				  in->rec.size > DBFS_SYMLINK_MAX;
		else
			in->bad =
			    v.mv_size != fixed || (t != S_IFREG && t != S_IFDIR && t != S_IFCHR &&
						   t != S_IFBLK && t != S_IFIFO && t != S_IFSOCK);
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading inode");
	mdb_cursor_close(c);
}

static bool name_ok(const unsigned char *name, size_t len)
{
	if (len == 0 || len > DBFS_NAME_MAX)
		return false;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return !memchr(name, '/', len) && !memchr(name, 0, len);
}

static void load_dirents(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	size_t cap = 0;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_dirent, &c), "cursor on dirent");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (f->ndirents == cap) {
			cap = cap ? cap * 2 : 1024;
			f->dirents = xrealloc(f->dirents, cap * sizeof(*f->dirents));
		}
		struct fsck_dirent *d = &f->dirents[f->ndirents++];
		memset(d, 0, sizeof(*d));
		d->klen = k.mv_size;
		d->key = xrealloc(NULL, k.mv_size);
		memcpy(d->key, k.mv_data, k.mv_size);
		if (k.mv_size < 9 || v.mv_size != sizeof(d->val) ||
		    !name_ok(d->key + 8, k.mv_size - 8)) {
			d->bad = true;
			if (k.mv_size >= 8)
				d->parent = dbfs_get_be64(d->key);
			continue;
		}
		d->parent = dbfs_get_be64(d->key);
		memcpy(&d->val, v.mv_data, sizeof(d->val));
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading dirent");
	mdb_cursor_close(c);
}

static void load_data(struct fsck *f)
{
	MDB_cursor *c;
	MDB_val k, v;
	struct fsck_inode *in = NULL;
	int rc;

	f->nblocks = 0;
	fsck_lmdb_check(mdb_cursor_open(f->txn, f->dbi_data, &c), "cursor on data");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		f->nblocks++;
		if (k.mv_size != 16)
			continue;
		uint64_t ino = dbfs_get_be64(k.mv_data);
		if (!in || in->ino != ino)
			in = fsck_inode_find(f, ino);
		if (!in)
			continue;
		in->blocks++;
		in->data_alloc += fsck_round_alloc(v.mv_size);
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading data");
	mdb_cursor_close(c);
}

static uint64_t count_and_mark(struct fsck *f, MDB_dbi dbi, bool orphans)
{
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t n = 0;
	int rc;

	fsck_lmdb_check(mdb_cursor_open(f->txn, dbi, &c), "cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		n++;
		if (orphans && k.mv_size == 8) {
			struct fsck_inode *in = fsck_inode_find(f, dbfs_get_be64(k.mv_data));
			if (in) {
				in->orphan = true;
				/* "R": its blocks are being freed in the background */
				in->reclaim = v.mv_size == 1 && *(char *)v.mv_data == 'R';
			}
		}
	}
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading table");
	mdb_cursor_close(c);
	return n;
}

/* Per-inode aggregates of the valid dirents naming it and of its entries. */
static void link_dirents(struct fsck *f)
{
	for (size_t i = 0; i < f->ndirents; i++) {
		struct fsck_dirent *d = &f->dirents[i];
		if (d->bad)
			continue;
		struct fsck_inode *p = fsck_inode_find(f, d->parent);
		struct fsck_inode *ch = fsck_inode_find(f, d->val.ino);
		if (!p || p->bad || !S_ISDIR(p->rec.mode) || !ch)
			continue;
		if (p->dcount == 0)
			p->dfirst = i;
		p->dcount = i - p->dfirst + 1;
		p->entries++;
		if (d->val.cookie > p->max_cookie)
			p->max_cookie = d->val.cookie;
		if (!ch->bad && S_ISDIR(ch->rec.mode))
			p->subdirs++;
		if (ch->links++ == 0)
			ch->container = d->parent;
	}
}

void fsck_mark_reachable(struct fsck *f)
{
	size_t *queue, head = 0, tail = 0;
	struct fsck_inode *root = fsck_inode_find(f, DBFS_ROOT_INO);

	for (size_t i = 0; i < f->ninodes; i++)
		f->inodes[i].reachable = false;
	if (!root || root->bad || !S_ISDIR(root->rec.mode))
		return;
	queue = xrealloc(NULL, f->ninodes * sizeof(*queue));
	root->reachable = true;
	queue[tail++] = (size_t)(root - f->inodes);
	while (head < tail) {
		struct fsck_inode *dir = &f->inodes[queue[head++]];
		for (size_t i = dir->dfirst; i < dir->dfirst + dir->dcount; i++) {
			struct fsck_dirent *d = &f->dirents[i];
			if (d->bad || d->gone || d->parent != dir->ino)
				continue;
			struct fsck_inode *ch = fsck_inode_find(f, d->val.ino);
			if (!ch || ch->reachable)
				continue;
			ch->reachable = true;
			if (!ch->bad && S_ISDIR(ch->rec.mode))
				queue[tail++] = (size_t)(ch - f->inodes);
		}
	}
	free(queue);
}

void fsck_load(struct fsck *f)
{
	MDB_val k = {.mv_size = 5, .mv_data = "usage"}, v;
	int rc;

	fsck_unload(f);
	rc = mdb_get(f->txn, f->dbi_super, &k, &v);
	if (rc != MDB_NOTFOUND)
		fsck_lmdb_check(rc, "reading the usage record");
	f->usage_ok = rc == 0 && v.mv_size == sizeof(f->usage);
	memset(&f->usage, 0, sizeof(f->usage));
	if (f->usage_ok)
		memcpy(&f->usage, v.mv_data, sizeof(f->usage));
	load_inodes(f);
	load_dirents(f);
	load_data(f);
	f->norphans = count_and_mark(f, f->dbi_orphan, true);
	f->ndircook = count_and_mark(f, f->dbi_dircook, false);
	f->nxattrs = count_and_mark(f, f->dbi_xattr, false);
	fsck_load_trim(f);
	link_dirents(f);
	fsck_mark_reachable(f);
}

void fsck_unload(struct fsck *f)
{
	for (size_t i = 0; i < f->ndirents; i++)
		free(f->dirents[i].key);
	free(f->dirents);
	free(f->inodes);
	f->dirents = NULL;
	f->inodes = NULL;
	f->ndirents = f->ninodes = 0;
}

struct fsck_inode *fsck_inode_find(struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->ninodes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->inodes[mid].ino == ino)
			return &f->inodes[mid];
		if (f->inodes[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* LMDB's default order: memcmp over the common length, then shorter first. */
static int key_cmp(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);
	if (r)
		return r;
	return alen < blen ? -1 : alen > blen;
}

struct fsck_dirent *fsck_dirent_find(struct fsck *f, uint64_t parent, const void *name, size_t len)
{
	unsigned char key[8 + DBFS_NAME_MAX];
	size_t lo = 0, hi = f->ndirents;

	if (len == 0 || len > DBFS_NAME_MAX)
		return NULL;
	dbfs_put_be64(key, parent);
	memcpy(key + 8, name, len);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct fsck_dirent *d = &f->dirents[mid];
		int r = key_cmp(d->key, d->klen, key, 8 + len);
		if (r == 0)
			return d->bad || d->gone ? NULL : d;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
