/*
 * POSIX ACLs. With FUSE_CAP_POSIX_ACL the kernel enforces ACLs from the
 * system.posix_acl_* xattrs, and the file system must keep the mode in step
 * with the access ACL and apply a directory's default ACL to new nodes.
 *
 * xattr encoding (little-endian, as the kernel passes it):
 *   +-------------+-----------------------------------------+
 *   | version u32 | entries: tag u16 | perm u16 | id u32 ... |
 *   +-------------+-----------------------------------------+
 */
#include <errno.h>
#include <string.h>

#include "dbfs/internal.h"

#define ACL_VERSION   2u
#define TAG_USER_OBJ  0x01
#define TAG_USER      0x02
#define TAG_GROUP_OBJ 0x04
#define TAG_GROUP     0x08
#define TAG_MASK      0x10
#define TAG_OTHER     0x20
#define ACL_MAX_ENTRIES 1024

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

static size_t acl_count(size_t len)
{
	return len < 4 ? 0 : (len - 4) / sizeof(struct acl_entry);
}

int dbfs_acl_valid(const void *val, size_t len)
{
	uint32_t ver;
	if (len < 4 || (len - 4) % sizeof(struct acl_entry))
		return -EINVAL;
	memcpy(&ver, val, 4);
	if (ver != ACL_VERSION)
		return -EINVAL;
	size_t n = acl_count(len);
	if (n > ACL_MAX_ENTRIES)
		return -EINVAL;
	int seen_uo = 0, seen_go = 0, seen_o = 0, seen_m = 0, named = 0;
	for (size_t i = 0; i < n; i++) {
		struct acl_entry e;
		memcpy(&e, (const char *)val + 4 + i * sizeof(e), sizeof(e));
		if (e.perm & ~7u)
			return -EINVAL;
		switch (e.tag) {
		case TAG_USER_OBJ: seen_uo++; break;
		case TAG_GROUP_OBJ: seen_go++; break;
		case TAG_OTHER: seen_o++; break;
		case TAG_MASK: seen_m++; break;
		case TAG_USER: case TAG_GROUP: named++; break;
		default: return -EINVAL;
		}
	}
	if (n == 0)
		return 0; /* an empty ACL removes it */
	if (seen_uo != 1 || seen_go != 1 || seen_o != 1 || seen_m > 1 || (named && !seen_m))
		return -EINVAL;
	return 0;
}

void dbfs_acl_to_mode(const void *val, size_t len, uint32_t *mode)
{
	uint32_t uo = (*mode >> 6) & 7, go = (*mode >> 3) & 7, o = *mode & 7, m = 8;
	for (size_t i = 0; i < acl_count(len); i++) {
		struct acl_entry e;
		memcpy(&e, (const char *)val + 4 + i * sizeof(e), sizeof(e));
		if (e.tag == TAG_USER_OBJ)
			uo = e.perm;
		else if (e.tag == TAG_GROUP_OBJ)
			go = e.perm;
		else if (e.tag == TAG_OTHER)
			o = e.perm;
		else if (e.tag == TAG_MASK)
			m = e.perm;
	}
	if (m != 8)
		go = m;
	*mode = (*mode & ~0777u) | (uo << 6) | (go << 3) | o;
}

/* Set the owner, group-or-mask and other entries of an ACL from mode bits
 * (in place); with `and`, intersect instead of replace. */
static void acl_apply_mode(void *val, size_t len, uint32_t mode, int and)
{
	size_t n = acl_count(len);
	int has_mask = 0;
	for (size_t i = 0; i < n; i++) {
		struct acl_entry e;
		memcpy(&e, (char *)val + 4 + i * sizeof(e), sizeof(e));
		has_mask |= e.tag == TAG_MASK;
	}
	for (size_t i = 0; i < n; i++) {
		struct acl_entry e;
		memcpy(&e, (char *)val + 4 + i * sizeof(e), sizeof(e));
		uint32_t bits = 8;
		if (e.tag == TAG_USER_OBJ)
			bits = (mode >> 6) & 7;
		else if (e.tag == TAG_OTHER)
			bits = mode & 7;
		else if (e.tag == TAG_MASK || (e.tag == TAG_GROUP_OBJ && !has_mask))
			bits = (mode >> 3) & 7;
		if (bits == 8)
			continue;
		e.perm = (uint16_t)(and ? (e.perm & bits) : bits);
		memcpy((char *)val + 4 + i * sizeof(e), &e, sizeof(e));
	}
}

int dbfs_acl_chmod(struct dbfs *fs, MDB_txn *txn, uint64_t ino, uint32_t mode)
{
	MDB_val v;
	int rc = dbfs_xattr_get(fs, txn, ino, DBFS_ACL_ACCESS, &v);
	if (rc == -ENODATA)
		return 0;
	if (rc)
		return rc;
	unsigned char buf[4 + ACL_MAX_ENTRIES * sizeof(struct acl_entry)];
	if (v.mv_size > sizeof(buf) || dbfs_acl_valid(v.mv_data, v.mv_size))
		return 0;
	size_t len = v.mv_size;
	memcpy(buf, v.mv_data, len);
	acl_apply_mode(buf, len, mode, 0);
	return dbfs_xattr_set(fs, txn, ino, DBFS_ACL_ACCESS, buf, len, 0);
}

int dbfs_acl_inherit_mode(struct dbfs *fs, MDB_txn *txn, uint64_t parent, uint32_t *mode,
			  uint32_t umask, int *has_default)
{
	MDB_val v;
	*has_default = 0;
	int rc = dbfs_xattr_get(fs, txn, parent, DBFS_ACL_DEFAULT, &v);
	if (rc == -ENODATA || (rc == 0 && (v.mv_size <= 4 || dbfs_acl_valid(v.mv_data,
									      v.mv_size)))) {
		*mode &= ~(umask & 0777);
		return 0;
	}
	if (rc)
		return rc;
	*has_default = 1;
	/* The new mode is the create mode intersected with the default ACL's
	 * owner / mask-or-group / other permissions. */
	uint32_t acl_mode = *mode;
	dbfs_acl_to_mode(v.mv_data, v.mv_size, &acl_mode);
	*mode = (*mode & ~0777u) | (*mode & acl_mode & 0777u);
	return 0;
}

int dbfs_acl_inherit(struct dbfs *fs, MDB_txn *txn, uint64_t parent, uint64_t ino,
		     uint32_t mode)
{
	MDB_val v;
	int rc = dbfs_xattr_get(fs, txn, parent, DBFS_ACL_DEFAULT, &v);
	if (rc == -ENODATA)
		return 0;
	if (rc)
		return rc;
	unsigned char buf[4 + ACL_MAX_ENTRIES * sizeof(struct acl_entry)];
	if (v.mv_size <= 4 || v.mv_size > sizeof(buf) || dbfs_acl_valid(v.mv_data, v.mv_size))
		return 0;
	size_t len = v.mv_size;
	memcpy(buf, v.mv_data, len);
	if (S_ISDIR(mode)) {
		rc = dbfs_xattr_set(fs, txn, ino, DBFS_ACL_DEFAULT, buf, len, 0);
		if (rc)
			return rc;
	}
	/* Access ACL = default ACL with owner/mask/other limited by the mode
	 * (already computed by dbfs_acl_inherit_mode). */
	acl_apply_mode(buf, len, mode, 1);
	if (acl_count(len) > 3)
		rc = dbfs_xattr_set(fs, txn, ino, DBFS_ACL_ACCESS, buf, len, 0);
	return rc;
}
