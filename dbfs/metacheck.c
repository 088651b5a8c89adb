/*
 * The meta pages of data.mdb, checked before mdb_env_open (internal.h).
 * Calls no other file of the library.
 *
 * LMDB 0.9.24's file starts with two meta pages, page 0 and page 1, one
 * page size apart; each is a page header, then the meta record (host byte
 * order, x86-64 sizes: pgno_t and size_t are 8 bytes):
 *
 *   page header (16 bytes)
 *   +-----------+---------+-----------+-------------------+
 *   | pgno u64  | pad u16 | flags u16 | lower, upper u16  |   flags: P_META 0x08
 *   +-----------+---------+-----------+-------------------+
 *   meta, at byte 16 of the page
 *   +-----------+-------------+-------------+-------------+
 *   | magic u32 | version u32 | address u64 | mapsize u64 |   magic 0xBEEFC0DE, version 1
 *   +-----------+-------------+-------------+-------------+
 *   | dbs[0] (free DB, 48 bytes): pad u32 = the PAGE SIZE,  |
 *   |   flags u16, depth u16, branch, leaf, overflow,       |
 *   |   entries, root (u64 each)                             |
 *   +-------------------------------------------------------+
 *   | dbs[1] (main DB, 48 bytes, same layout)                 |
 *   +-----------------+-----------------+-------------------+
 *   | last_pg u64     | txnid u64       |
 *   +-----------------+-----------------+
 *
 * LMDB opens with the meta page of the higher txnid and takes its page
 * size and last page as they are. The page size is checked against the
 * file itself: page 1 must be a meta page numbered 1 at that offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbfs/internal.h"

#define META_MAGIC   0xBEEFC0DEu
#define META_VERSION 1u
#define P_META_FLAG  0x08u
/* LMDB 0.9 makes pages of the OS page size, at most 32 KiB; none is
 * smaller than the 512-byte sector. */
#define PSIZE_MIN 512u
#define PSIZE_MAX 32768u

struct meta_db {
	uint32_t pad; /* dbs[0]: the page size */
	uint16_t flags, depth;
	uint64_t branch, leaf, overflow, entries, root;
};

struct meta_page {
	uint64_t pgno;
	uint16_t pad, flags;
	uint16_t lower, upper;
	uint32_t magic, version;
	uint64_t address, mapsize;
	struct meta_db dbs[2];
	uint64_t last_pg, txnid;
};

_Static_assert(sizeof(struct meta_db) == 48, "LMDB 0.9 MDB_db layout");
_Static_assert(offsetof(struct meta_page, magic) == 16, "LMDB 0.9 page header");
_Static_assert(offsetof(struct meta_page, dbs) == 40, "LMDB 0.9 MDB_meta layout");
_Static_assert(offsetof(struct meta_page, last_pg) == 136, "LMDB 0.9 MDB_meta layout");
_Static_assert(sizeof(size_t) == 8, "pgno_t and size_t of 8 bytes");

static int read_meta(int fd, const char *path, unsigned i, uint64_t off, uint64_t fsize,
		     struct meta_page *m, char *err, size_t errlen)
{
	if (off > fsize || fsize - off < sizeof(*m)) {
		snprintf(err, errlen,
			 "store is damaged: %s is too short for meta page %u (%" PRIu64
			 " bytes, page at %" PRIu64 ")",
			 path, i, fsize, off);
		return -EINVAL;
	}
	ssize_t n = pread(fd, m, sizeof(*m), (off_t)off);
	if (n < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
		return -e;
	}
	if ((size_t)n != sizeof(*m)) {
		snprintf(err, errlen, "store is damaged: %s: short read of meta page %u", path, i);
		return -EINVAL;
	}
	if (!(m->flags & P_META_FLAG) || m->pgno != i) {
		snprintf(err, errlen,
			 "store is damaged: page %u of %s is not a meta page (number %" PRIu64
			 ", flags 0x%x)",
			 i, path, m->pgno, m->flags);
		return -EINVAL;
	}
	if (m->magic != META_MAGIC) {
		snprintf(err, errlen, "store is damaged: meta page %u of %s has magic 0x%08x",
			 i, path, m->magic);
		return -EINVAL;
	}
	if (m->version != META_VERSION) {
		snprintf(err, errlen,
			 "store is damaged: meta page %u of %s has format version %u, not %u", i,
			 path, m->version, META_VERSION);
		return -EINVAL;
	}
	uint32_t ps = m->dbs[0].pad;
	if (ps < PSIZE_MIN || ps > PSIZE_MAX || (ps & (ps - 1))) {
		snprintf(err, errlen, "store is damaged: meta page %u of %s has page size %u", i,
			 path, ps);
		return -EINVAL;
	}
	return 0;
}

int dbfs_meta_check(const char *dir, char *err, size_t errlen)
{
	char path[4200];
	struct meta_page m[2];
	struct stat sb;
	int rc;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			return 0; /* a new store */
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &sb) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot stat %s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	uint64_t fsize = (uint64_t)sb.st_size;
	if (fsize == 0) {
		close(fd);
		return 0; /* dbfs_open refuses it with its own reason */
	}
	rc = read_meta(fd, path, 0, 0, fsize, &m[0], err, errlen);
	/* page 1 is where page 0's page size says: its number proves it */
	if (!rc)
		rc = read_meta(fd, path, 1, m[0].dbs[0].pad, fsize, &m[1], err, errlen);
	close(fd);
	if (rc)
		return rc;
	uint32_t ps = m[0].dbs[0].pad;
	if (m[1].dbs[0].pad != ps) {
		snprintf(err, errlen,
			 "store is damaged: the meta pages of %s disagree on the page size (%u, %u)",
			 path, ps, m[1].dbs[0].pad);
		return -EINVAL;
	}
	const struct meta_page *cur = m[1].txnid > m[0].txnid ? &m[1] : &m[0];
	if (cur->last_pg >= fsize / ps) {
		snprintf(err, errlen,
			 "store is damaged: %s ends at page %" PRIu64 " but its meta page names page %" PRIu64,
			 path, fsize / ps - 1, cur->last_pg);
		return -EINVAL;
	}
	return 0;
}
