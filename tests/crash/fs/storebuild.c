/* Build DBFS stores table by table (see storebuild.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storebuild.h"

static void ok(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "storebuild: %s: %s\n", what, mdb_strerror(rc));
		abort();
	}
}

size_t sb_key_ino(unsigned char *k, uint64_t ino)
{
	dbfs_put_be64(k, ino);
	return 8;
}

size_t sb_key_name(unsigned char *k, uint64_t ino, const char *name)
{
	size_t len = strlen(name);

	dbfs_put_be64(k, ino);
	memcpy(k + 8, name, len);
	return 8 + len;
}

size_t sb_key2(unsigned char *k, uint64_t a, uint64_t b)
{
	dbfs_put_be64(k, a);
	dbfs_put_be64(k + 8, b);
	return 16;
}

void sb_put(struct sb *s, MDB_dbi dbi, const void *k, size_t klen, const void *v, size_t vlen)
{
	MDB_val kk = {klen, (void *)k}, vv = {vlen, (void *)v};

	ok(mdb_put(s->txn, dbi, &kk, &vv, 0), "mdb_put");
}

int sb_del(struct sb *s, MDB_dbi dbi, const void *k, size_t klen)
{
	MDB_val kk = {klen, (void *)k};
	int rc = mdb_del(s->txn, dbi, &kk, NULL);

	if (rc != MDB_NOTFOUND)
		ok(rc, "mdb_del");
	return rc;
}

int sb_get(struct sb *s, MDB_dbi dbi, const void *k, size_t klen, MDB_val *v)
{
	MDB_val kk = {klen, (void *)k};
	int rc = mdb_get(s->txn, dbi, &kk, v);

	if (rc != MDB_NOTFOUND)
		ok(rc, "mdb_get");
	return rc;
}

int sb_get_inode(struct sb *s, uint64_t ino, struct dbfs_inode *rec)
{
	unsigned char k[8];
	MDB_val v;
	int rc = sb_get(s, s->inode, k, sb_key_ino(k, ino), &v);

	if (rc == 0)
		memcpy(rec, v.mv_data, sizeof(*rec));
	return rc;
}

void sb_put_inode(struct sb *s, uint64_t ino, const struct dbfs_inode *rec)
{
	unsigned char k[8];
	MDB_val v;
	char buf[sizeof(*rec) + DBFS_SYMLINK_MAX];
	size_t len = sizeof(*rec);

	if (sb_get(s, s->inode, k, sb_key_ino(k, ino), &v) == 0 && v.mv_size > len &&
	    v.mv_size <= sizeof(buf)) {
		memcpy(buf, v.mv_data, v.mv_size);
		len = v.mv_size;
	}
	memcpy(buf, rec, sizeof(*rec));
	sb_put(s, s->inode, k, 8, buf, len);
}

void sb_get_usage(struct sb *s, struct dbfs_usage_rec *u)
{
	MDB_val v;

	ok(sb_get(s, s->super, "usage", 5, &v), "usage");
	memcpy(u, v.mv_data, sizeof(*u));
}

void sb_put_usage(struct sb *s, const struct dbfs_usage_rec *u)
{
	sb_put(s, s->super, "usage", 5, u, sizeof(*u));
}

void sb_get_super(struct sb *s, struct dbfs_super *sup)
{
	MDB_val v;

	ok(sb_get(s, s->super, "sb", 2, &v), "sb");
	memcpy(sup, v.mv_data, sizeof(*sup));
}

void sb_put_super(struct sb *s, const struct dbfs_super *sup)
{
	sb_put(s, s->super, "sb", 2, sup, sizeof(*sup));
}

static void env_open(struct sb *s, const char *dir, unsigned dbflags)
{
	ok(mdb_env_create(&s->env), "env_create");
	mdb_env_set_maxdbs(s->env, 256);
	mdb_env_set_mapsize(s->env, 64u << 20);
	ok(mdb_env_open(s->env, dir, 0, 0644), "env_open");
	ok(mdb_txn_begin(s->env, NULL, 0, &s->txn), "txn_begin");
	ok(mdb_dbi_open(s->txn, DBFS_DB_SUPER, dbflags, &s->super), "super");
	ok(mdb_dbi_open(s->txn, DBFS_DB_INODE, dbflags, &s->inode), "inode");
	ok(mdb_dbi_open(s->txn, DBFS_DB_DIRENT, dbflags, &s->dirent), "dirent");
	ok(mdb_dbi_open(s->txn, DBFS_DB_DIRCOOK, dbflags, &s->dircook), "dircook");
	ok(mdb_dbi_open(s->txn, DBFS_DB_DATA, dbflags, &s->data), "data");
	ok(mdb_dbi_open(s->txn, DBFS_DB_XATTR, dbflags, &s->xattr), "xattr");
	ok(mdb_dbi_open(s->txn, DBFS_DB_ORPHAN, dbflags, &s->orphan), "orphan");
}

/* The name row of parent/name -> ino in the inode table (format.h). */
static size_t ilink_key(unsigned char *k, uint64_t ino, uint64_t parent, const char *name)
{
	size_t n = sb_key2(k, ino, parent), len = strlen(name);
	memcpy(k + n, name, len);
	return n + len;
}

void sb_open(struct sb *s, const char *dir)
{
	env_open(s, dir, 0);
}

void sb_close(struct sb *s)
{
	ok(mdb_txn_commit(s->txn), "commit");
	mdb_env_close(s->env);
	s->env = NULL;
}

static uint64_t new_inode(struct sb *s, uint32_t mode, uint64_t parent)
{
	struct dbfs_super sup;
	struct dbfs_inode rec = {0};
	struct dbfs_usage_rec u;
	uint64_t ino;

	sb_get_super(s, &sup);
	ino = sup.next_ino++;
	sb_put_super(s, &sup);
	rec.mode = mode;
	rec.nlink = S_ISDIR(mode) ? 2 : 0;
	rec.mtime_sec = rec.ctime_sec = rec.atime_sec = rec.btime_sec = 1700000000;
	if (S_ISDIR(mode)) {
		rec.next_cookie = DBFS_COOKIE_FIRST;
		rec.parent = parent;
	}
	sb_put_inode(s, ino, &rec);
	sb_get_usage(s, &u);
	u.inodes++;
	sb_put_usage(s, &u);
	return ino;
}

void sb_create(struct sb *s, const char *dir)
{
	struct dbfs_super sup = {.version = DBFS_FORMAT_VERSION,
				 .block_size = DBFS_BLOCK_SIZE,
				 .next_ino = DBFS_ROOT_INO,
				 .created_sec = 1700000000,
				 .byte_order = 0x0102030405060708ull};
	struct dbfs_usage_rec u = {0, 0};

	env_open(s, dir, MDB_CREATE);
	memcpy(sup.magic, DBFS_MAGIC, sizeof(DBFS_MAGIC));
	sb_put_super(s, &sup);
	sb_put_usage(s, &u);
	if (new_inode(s, S_IFDIR | 0755, DBFS_ROOT_INO) != DBFS_ROOT_INO)
		abort();
}

void sb_link(struct sb *s, uint64_t parent, const char *name, uint64_t ino)
{
	struct dbfs_inode dir, rec;
	struct dbfs_dirent_val dv = {.ino = ino};
	unsigned char k[8 + DBFS_NAME_MAX], cv[12 + DBFS_NAME_MAX];
	size_t klen = sb_key_name(k, parent, name), len = strlen(name);

	ok(sb_get_inode(s, parent, &dir), "parent");
	ok(sb_get_inode(s, ino, &rec), "inode");
	dv.cookie = dir.next_cookie++;
	dv.type = rec.mode & S_IFMT;
	dir.nentries++;
	if (S_ISDIR(rec.mode))
		dir.nlink++;
	else
		rec.nlink++;
	sb_put(s, s->dirent, k, klen, &dv, sizeof(dv));
	memcpy(cv, &dv.ino, 8);
	memcpy(cv + 8, &dv.type, 4);
	memcpy(cv + 12, name, len);
	sb_put(s, s->dircook, k, sb_key2(k, parent, dv.cookie), cv, 12 + len);
	/* the first name in the record, others as rows (format.h, names.c) */
	unsigned char ik[16 + DBFS_NAME_MAX];
	if (!rec.name_cookie && ino != parent) {
		rec.parent = parent;
		rec.name_cookie = dv.cookie;
	} else {
		sb_put(s, s->inode, ik, ilink_key(ik, ino, parent, name), "", 0);
	}
	if (ino != parent)
		sb_put_inode(s, ino, &rec);
	sb_put_inode(s, parent, &dir);
}

/* The record's first name went: the lowest row takes its place. */
static void first_name_gone(struct sb *s, uint64_t ino, struct dbfs_inode *rec)
{
	unsigned char k0[8];
	MDB_cursor *c;
	MDB_val k = {sb_key_ino(k0, ino), k0}, v;
	rec->name_cookie = 0;
	ok(mdb_cursor_open(s->txn, s->inode, &c), "cursor");
	int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (!rc && k.mv_size == 8)
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	if (!rc && k.mv_size > 16 && dbfs_get_be64(k.mv_data) == ino) {
		char name[DBFS_NAME_MAX + 1];
		struct dbfs_dirent_val dv;
		uint64_t dir = dbfs_get_be64((unsigned char *)k.mv_data + 8);
		memcpy(name, (char *)k.mv_data + 16, k.mv_size - 16);
		name[k.mv_size - 16] = '\0';
		ok(mdb_cursor_del(c, 0), "del");
		if (sb_lookup(s, dir, name, &dv)) {
			rec->parent = dir;
			rec->name_cookie = dv.cookie;
		}
	}
	mdb_cursor_close(c);
}

void sb_unlink(struct sb *s, uint64_t parent, const char *name)
{
	struct dbfs_inode dir, rec;
	struct dbfs_dirent_val dv;
	unsigned char k[8 + DBFS_NAME_MAX];

	if (!sb_lookup(s, parent, name, &dv))
		abort();
	ok(sb_get_inode(s, parent, &dir), "parent");
	ok(sb_get_inode(s, dv.ino, &rec), "inode");
	sb_del(s, s->dirent, k, sb_key_name(k, parent, name));
	sb_del(s, s->dircook, k, sb_key2(k, parent, dv.cookie));
	unsigned char ik[16 + DBFS_NAME_MAX];
	if (rec.name_cookie == dv.cookie && rec.parent == parent)
		first_name_gone(s, dv.ino, &rec);
	else
		sb_del(s, s->inode, ik, ilink_key(ik, dv.ino, parent, name));
	dir.nentries--;
	if (S_ISDIR(rec.mode))
		dir.nlink--;
	else
		rec.nlink--;
	sb_put_inode(s, dv.ino, &rec);
	sb_put_inode(s, parent, &dir);
}

uint64_t sb_lookup(struct sb *s, uint64_t parent, const char *name, struct dbfs_dirent_val *val)
{
	unsigned char k[8 + DBFS_NAME_MAX];
	struct dbfs_dirent_val dv;
	MDB_val v;

	if (sb_get(s, s->dirent, k, sb_key_name(k, parent, name), &v))
		return 0;
	/* LMDB does not align values: copy out. */
	memcpy(&dv, v.mv_data, sizeof(dv));
	if (val)
		*val = dv;
	return dv.ino;
}

uint64_t sb_mkdir(struct sb *s, uint64_t parent, const char *name)
{
	uint64_t ino = new_inode(s, S_IFDIR | 0755, parent);

	sb_link(s, parent, name, ino);
	return ino;
}

uint64_t sb_mkfile(struct sb *s, uint64_t parent, const char *name, uint64_t size, uint32_t holes)
{
	uint64_t ino = new_inode(s, S_IFREG | 0644, parent);
	static unsigned char buf[DBFS_BLOCK_SIZE];
	struct dbfs_inode rec;
	struct dbfs_usage_rec u;
	unsigned char k[16];

	sb_link(s, parent, name, ino);
	ok(sb_get_inode(s, ino, &rec), "inode");
	rec.size = size;
	for (uint64_t b = 0; b * DBFS_BLOCK_SIZE < size; b++) {
		uint64_t len = size - b * DBFS_BLOCK_SIZE;
		if (b < 32 && (holes >> b & 1))
			continue;
		if (len > DBFS_BLOCK_SIZE)
			len = DBFS_BLOCK_SIZE;
		memset(buf, (int)('a' + b % 26), len);
		sb_put(s, s->data, k, sb_key2(k, ino, b), buf, len);
		rec.alloc += (len + DBFS_ALLOC_UNIT - 1) / DBFS_ALLOC_UNIT * DBFS_ALLOC_UNIT;
	}
	sb_put_inode(s, ino, &rec);
	sb_get_usage(s, &u);
	u.bytes += rec.alloc;
	sb_put_usage(s, &u);
	return ino;
}

uint64_t sb_symlink(struct sb *s, uint64_t parent, const char *name, const char *target)
{
	uint64_t ino = new_inode(s, S_IFLNK | 0777, parent);
	char buf[sizeof(struct dbfs_inode) + DBFS_SYMLINK_MAX];
	struct dbfs_inode rec;
	unsigned char k[8];
	size_t len = strlen(target);

	ok(sb_get_inode(s, ino, &rec), "inode");
	rec.size = len;
	memcpy(buf, &rec, sizeof(rec));
	memcpy(buf + sizeof(rec), target, len);
	sb_put(s, s->inode, k, sb_key_ino(k, ino), buf, sizeof(rec) + len);
	sb_link(s, parent, name, ino);
	return ino;
}

void sb_setxattr(struct sb *s, uint64_t ino, const char *name, const char *value)
{
	unsigned char k[8 + DBFS_XATTR_NAME_MAX];

	sb_put(s, s->xattr, k, sb_key_name(k, ino, name), value, strlen(value));
}
