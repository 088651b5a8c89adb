/*
 * The power-loss recovery of a store (dbfs/durable.c explains the design):
 * before LMDB opens data.mdb after a reboot, the meta page that
 * dbfs.durable recorded (format.h) is written over both of data.mdb's meta
 * pages. Shared by libdbfs (dbfs_open) and dbfs-fsck (which links nothing
 * else of libdbfs): it reads and writes only what format.h lays out.
 */
#ifndef DBFS_RECOVER_H
#define DBFS_RECOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dbfs/format.h"

/*
 * Run the recovery of the store in `dir` if it needs one: its dbfs.durable
 * record is of another boot and data.mdb's meta pages are not the
 * recorded durable point. The durable point is the newest valid record,
 * unless it is a listed one (format.h) whose pages are not all on the
 * disk with their hashes: then the other record, and the listed one is
 * blanked (flushed) first, so that the next record goes to its slot.
 * The imaged points that follow that record in dbfs.images (its chain,
 * format.h) are then replayed: their pages written over data.mdb, the
 * newest one's meta over LMDB's.
 * *restored is 1 when the meta pages were rewritten (and flushed). With
 * read_only, a store that needs either write is refused (-EROFS). The
 * caller holds the store's lock (dbfs.lock) and has no LMDB environment
 * open on it.
 * Returns 0, or a negative errno with a reason in err: -EINVAL (no record
 * names an LMDB meta page whose pages are on the disk), -EROFS, or the
 * errno of open/pwrite/fdatasync.
 */
int dbfs_durable_recover(const char *dir, bool read_only, int *restored, char *err,
			 size_t errlen);

/* The newest valid record of dbfs.durable open at fd (version 2's
 * layout, or else version 1's), its head only: 1, or 0 if none. */
int dbfs_drec_read(int fd, struct dbfs_drec *out);
/* The hash a listed record keeps for page pgno of psize bytes. */
uint64_t dbfs_drec_page_hash(uint64_t pgno, const void *page, size_t psize);
/* Is m (a meta page's bytes after its 16-byte header) an LMDB 0.9 meta
 * of transaction txnid? */
bool dbfs_lmdb_meta_ok(const unsigned char *m, uint64_t txnid);
/* The kernel's boot_id (or dbfs_boot_id_override), NUL padded. */
void dbfs_boot_id(char out[40]);
/* Tests: the boot_id to use instead of the kernel's (a simulated reboot). */
extern const char *dbfs_boot_id_override;
/* Tests only (tests/crash/fs/powerloss.c shows that it notices): break
 * one part of the design. NO_PIN ends each durable point's read
 * transaction at once; NO_RECOVER makes dbfs_durable_recover do nothing;
 * SHORT_LIST leaves the last page out of each listed or imaged record;
 * FLUSH_AFTER_PUSH fails the next flush of data.mdb that follows a pushed
 * record with EIO (once: the fault is then cleared). Not a fault but a
 * mix: MIXED makes every other point one of two flushes, as a point too
 * big to list does; GAIN_E2BIG makes every walk of the free lists fail as
 * one too long to compare does (E2BIG). */
enum {
	DBFS_FAULT_NO_PIN = 1,
	DBFS_FAULT_NO_RECOVER = 2,
	DBFS_FAULT_SHORT_LIST = 3,
	DBFS_FAULT_FLUSH_AFTER_PUSH = 4,
	DBFS_FAULT_MIXED = 5,
	DBFS_FAULT_IMAGES_EIO = 6,
	DBFS_FAULT_GAIN_E2BIG = 7,
};
extern int dbfs_durable_fault;
/* Tests: recoveries that fell back from a listed record to the other;
 * imaged points replayed. */
extern unsigned long dbfs_recover_fallbacks, dbfs_recover_replayed;

#endif
