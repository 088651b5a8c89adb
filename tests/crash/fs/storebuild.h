/*
 * Build small DBFS stores by writing the LMDB tables directly, as
 * dbfs/format.h lays them out: a correct store with sb_* calls, then raw
 * edits (sb_put/sb_del/sb_get) to break it in one precise way.
 */
#ifndef MFS_TEST_STOREBUILD_H
#define MFS_TEST_STOREBUILD_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#include "dbfs/format.h"

struct sb {
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi super, inode, dirent, dircook, data, xattr, orphan;
};

/* Create an empty store (root only) in existing directory `dir`, and keep a
 * write transaction open on it. Aborts the test process on any error. */
void sb_create(struct sb *s, const char *dir);
/* Open an existing store with a write transaction. */
void sb_open(struct sb *s, const char *dir);
/* Commit and close. */
void sb_close(struct sb *s);

uint64_t sb_mkdir(struct sb *s, uint64_t parent, const char *name);
/* A regular file of `size` bytes; blocks written for every block below
 * size whose index is not in the hole bitmap `holes` (bit b: block b). */
uint64_t sb_mkfile(struct sb *s, uint64_t parent, const char *name, uint64_t size, uint32_t holes);
uint64_t sb_symlink(struct sb *s, uint64_t parent, const char *name, const char *target);
/* Add a name for an existing inode (a hard link; for a directory, breaks
 * the store). */
void sb_link(struct sb *s, uint64_t parent, const char *name, uint64_t ino);
/* Remove a name (and its dircook twin) and fix counts, as unlink would. */
void sb_unlink(struct sb *s, uint64_t parent, const char *name);
void sb_setxattr(struct sb *s, uint64_t ino, const char *name, const char *value);

/* Raw records. */
int sb_get_inode(struct sb *s, uint64_t ino, struct dbfs_inode *rec);
void sb_put_inode(struct sb *s, uint64_t ino, const struct dbfs_inode *rec);
void sb_put(struct sb *s, MDB_dbi dbi, const void *k, size_t klen, const void *v, size_t vlen);
int sb_del(struct sb *s, MDB_dbi dbi, const void *k, size_t klen);
int sb_get(struct sb *s, MDB_dbi dbi, const void *k, size_t klen, MDB_val *v);
/* Key builders: return the key length. */
size_t sb_key_ino(unsigned char *k, uint64_t ino);
size_t sb_key_name(unsigned char *k, uint64_t ino, const char *name);
size_t sb_key2(unsigned char *k, uint64_t a, uint64_t b);
/* Look up a name; 0 when absent. */
uint64_t sb_lookup(struct sb *s, uint64_t parent, const char *name, struct dbfs_dirent_val *val);
void sb_get_usage(struct sb *s, struct dbfs_usage_rec *u);
void sb_put_usage(struct sb *s, const struct dbfs_usage_rec *u);
void sb_get_super(struct sb *s, struct dbfs_super *sup);
void sb_put_super(struct sb *s, const struct dbfs_super *sup);

#endif
