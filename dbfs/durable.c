/*
 * What is durable when: the default durability mode (`normal`) and the
 * fsync path. Points are imaged (one flush, below) where they can be;
 * listed ones (one flush) where imaged ones are off (tests); else two.
 *
 * LMDB runs with MDB_NOSYNC: a commit writes its pages and its meta page
 * into the page cache and flushes nothing, so a process crash loses nothing
 * (the kernel still holds every write) and an operation pays no device
 * flush. A power loss is another matter: the kernel writes dirty pages back
 * in any order, so what the disk holds is any mix of old and new pages.
 * Two LMDB habits make that mix unopenable (lmdb.h: "a system crash can
 * corrupt the database"): it rewrites its two meta pages in turn, so the
 * meta page on the disk may name a tree whose pages never got there; and it
 * reuses the pages that older trees freed, so even the tree of a meta page
 * that was once flushed may have been overwritten since.
 *
 * A *durable point* fixes both, the way libmdbx's SAFE_NOSYNC and an
 * ext4 journal commit do (data first, then a small record that names it):
 *
 *   1. pin:   between two write transactions (the group commit's leader
 *             role, taken for a moment), open a read transaction on the
 *             newest snapshot T and copy T's meta page (page T & 1);
 *   2. flush: mdb_env_sync(force): every page of T is on the disk;
 *   3. name:  write T's meta copy into dbfs.durable (format.h), the slot
 *             the previous record does not use, and flush that file
 *             (two device flushes in all);
 *   4. move:  T is durable; end the read transaction of the previous
 *             durable point.
 *
 * The LMDB rule it relies on: pages that a live read transaction can see
 * are never reused (a page freed by transaction k goes to the free list
 * under k, and only entries older than the oldest reader are reused). The
 * pin of the newest durable point T is open until the next point's record
 * is on the disk, so no write after T can land on a page of T's tree,
 * whatever the write-back order: T's tree is whole on the disk at every
 * moment. After a reboot (the record's boot_id is not the kernel's),
 * dbfs_durable_recover writes the recorded meta over both meta pages of
 * data.mdb before LMDB reads them: the store opens at T, and whatever
 * reached the disk after T sits in pages T's tree does not use. A torn
 * record fails its sum and the other slot, the previous point, rules; its
 * pin was still held while the new record was written. Within one boot
 * (a process crash, kill -9), the page cache holds everything and LMDB's
 * newest meta is used as it is: nothing acknowledged is lost.
 *
 * A *listed* point costs one device flush instead of two (ext4 and XFS,
 * where a file's fdatasync flushes the device's write cache for the whole
 * device, and so makes durable whatever was written to the device before
 * it began, of any file):
 *
 *   1. pin:   as above, T';
 *   2. list:  the pages T''s tree gained since the durable point T, from
 *             LMDB's free lists alone (gained.c), each with a hash; more
 *             than DBFS_DREC_LIST_MAX, free lists too long to compare
 *             (then the next points do not try: 0, 1, 2, 4, ... up
 *             to DBFS_LIST_PAUSE while they fail in a row), or no
 *             pin of T: a point as above;
 *   3. push:  write the record (T''s meta and the list) into the slot the
 *             previous record does not use, and sync_file_range it to the
 *             device (written, not flushed: nothing durable yet);
 *   4. flush: mdb_env_sync(force): data.mdb's pages and the pushed record
 *             are on the disk together;
 *   5. move:  end T's pin.
 *
 * A power loss between 3 and 4 may leave the record on the disk without
 * some of its pages: recovery checks every listed page's hash, and when
 * one differs it falls back to the other slot, T, whose tree was pinned
 * until 5 (and blanks the listed record, so that the next record goes to
 * its slot, not over T's). The list must hold every page of T' that is not
 * T's (a missing one may be stale on the disk) and nothing that is not
 * T''s: a page written after T and freed before T' is kept by neither pin,
 * so once reused it would fail the check forever, and after 5 nothing
 * would be left to fall back to. Pages T' shares with T were on the disk
 * at T's point and unchanged since (pinned).
 *
 * An *imaged* point costs one flush of a small sequential write, and no
 * flush of data.mdb at all (the way a journal with data=journal, ZFS's
 * ZIL or SQLite's WAL make a commit durable: the log first, the home
 * location later):
 *
 *   1. pin:   as above, T';
 *   2. image: the pages T''s tree gained since the previous point T (as
 *             listed above), their images read from the map, appended to
 *             dbfs.images as one record with T''s meta (format.h), and
 *             that file flushed (images.c);
 *   3. move:  end T's pin.
 *
 * The records since the last record of dbfs.durable (a *checkpoint*: a
 * point of either kind above, after which data.mdb's pages are on the
 * disk) form a chain, each record based on the point before it. After a
 * reboot, recovery writes every whole record of the chain over data.mdb,
 * in order, and the newest one's meta over LMDB's (recover.c). That gives
 * T'_k whatever the kernel wrote back meanwhile: a page of T'_k's tree
 * was either gained since the checkpoint, then the newest record that
 * gained it holds its image (a page gained twice was freed in between,
 * and the later record's image is written last), or it is a page of the
 * checkpoint's tree that no commit freed since, which no write touched
 * since the checkpoint's flush put it on the disk. The pin moves at every
 * imaged point, so pages freed before it are reused at once: a burst of
 * commits rewrites the same pages in the page cache instead of writing
 * every copy-on-write version to new ones, and the kernel writes back
 * only the newest (held.c asks for a point when the freed pages pile up;
 * imaged, such a point costs a few hundred KiB written in sequence). A
 * record is written only whole: one that a power loss tore fails its sum
 * and ends the chain, and the point before it, whose pin was held until
 * the torn one's flush ended, is restored instead. A checkpoint comes
 * when the chain passes its limit (images.c), when a point gained more
 * pages than a record holds or free lists too long to compare, and at
 * close, so that a store closed cleanly is data.mdb and dbfs.durable
 * alone (its checkpoint: a point of two flushes, never a listed one: the
 * list would leave out the pages the chain's records hold). dbfs.images
 * belongs with the store until then: a copy of data.mdb and dbfs.durable
 * without it, taken after a power loss, returns to the checkpoint, whose
 * pages may have been reused since.
 *
 * When points happen: fsync, fdatasync, O_SYNC/O_DSYNC writes (the kernel
 * sends FUSE_FSYNC) and dbfs_sync make one and wait for it; concurrent
 * callers share it (whoever finds its commit already durable returns at
 * once; the others wait for the one flush in progress, then one flushes
 * for all of them). dbfs_tick makes one when the oldest change that is not
 * durable is commit_interval old (less the tick's period), and close makes
 * a last one. A point's cost is the flush of what changed since the last
 * one (and the walk of the free-list records written or consumed since,
 * for the list), not of the store: its price does not grow with the
 * store's size. The price of the pin: space freed after a point is reused
 * after the next one; when that space passes a limit, the point comes
 * sooner (held.c), so the file holds at most about two limits of churn
 * more.
 *
 * durability=full keeps LMDB's synced commits (every commit durable, two
 * flushes per commit) and marks the record DBFS_DREC_TRUST_LMDB. So does a
 * store in memory (tmpfs): nothing of it survives a power loss anyway, so
 * it makes no points (no pin, no flush) and fsync returns at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "dbfs/internal.h"
#include "dbfs/recover.h"

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t (*dbfs_durable_clock)(void) = mono_ns;
bool dbfs_durable_test_on_disk;
int dbfs_durable_test_listed = -1;
int dbfs_durable_test_imaged = -1;

/* Write record dur_seq + 1 naming txnid (meta: its meta page; n pages
 * listed in dur_buf already) into its slot. push: write it to the device
 * and wait (sync_file_range: no flush of the device's cache; the flush of
 * data.mdb that follows makes it durable, see the comment at the top),
 * with data.mdb's dirty pages started meanwhile, so that the two writes
 * cost one round trip to the device, not two; otherwise flush it. */
static int write_record(struct dbfs *fs, uint64_t txnid, const unsigned char *meta,
			unsigned flags, uint64_t n, bool push)
{
	struct dbfs_drec r;
	memset(&r, 0, sizeof(r));
	memcpy(r.magic, DBFS_DREC_MAGIC, 8);
	r.version = DBFS_DREC_VERSION;
	r.flags = flags;
	r.seq = fs->dur_seq + 1;
	r.txnid = txnid;
	r.psize = fs->dur_psize;
	dbfs_boot_id(r.boot);
	if (meta)
		memcpy(r.meta, meta, DBFS_DREC_META);
	unsigned char *b = fs->dur_buf;
	memcpy(b + DBFS_DREC_HEAD, &n, sizeof(n));
	r.sum = dbfs_drec_list_sum(&r, b + DBFS_DREC_HEAD + 8, n);
	memset(b, 0, DBFS_DREC_HEAD);
	memcpy(b, &r, sizeof(r));
	size_t len = DBFS_DREC_HEAD + 8 + (size_t)n * sizeof(struct dbfs_drec_page);
	off_t off = (off_t)(r.seq & 1) * DBFS_DREC_SLOT2;
	errno = 0;
	if (pwrite(fs->dur_fd, b, len, off) != (ssize_t)len)
		return errno ? errno : EIO;
	if (push) {
		int fd;
		mdb_env_get_fd(fs->env, &fd);
		/* Both only start writes (an error here comes back below or
		 * from the flush). */
		sync_file_range(fs->dur_fd, off, (off_t)len, SYNC_FILE_RANGE_WRITE);
		if (!fs->writemap)
			sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	}
	if (push ? sync_file_range(fs->dur_fd, off, (off_t)len,
				   SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					   SYNC_FILE_RANGE_WAIT_AFTER) < 0
		 : fdatasync(fs->dur_fd) < 0)
		return errno;
	fs->dur_seq = r.seq;
	return 0;
}

/* Find the pages that the snapshot of meta (pinned by the caller) gained
 * since the durable point dur_txn: into fs->dur_gained.out. E2BIG: more
 * than a record holds, or free lists too long to compare. */
static int gain(struct dbfs *fs, const unsigned char *meta)
{
	struct dbfs_gained *g = &fs->dur_gained;
	fs->dur_gain_tries++;
	if (dbfs_durable_fault == DBFS_FAULT_GAIN_E2BIG)
		return E2BIG; /* a test: free lists too long, every time */
	pthread_rwlock_rdlock(&fs->map_lock); /* gained.c reads the map */
	int rc = dbfs_gained_pages(g, fs->map_addr, fs->map_size, fs->dur_txn, fs->dur_meta, meta,
				   fs->dur_psize);
	pthread_rwlock_unlock(&fs->map_lock);
	dbfs_gained_trim(g); /* keeps out (the list) and small arrays */
	if (!rc && dbfs_durable_fault == DBFS_FAULT_SHORT_LIST && g->out.n)
		g->out.n--; /* a test: a page the record should name and does not */
	return rc;
}

/* List in dur_buf the pages gain() found, with their hashes: *n of them.
 * The pages are read through the page cache (pread: what write-back will
 * put on the disk), which no write changes while the snapshot is pinned. */
static int list_pages(struct dbfs *fs, uint64_t *n)
{
	struct dbfs_gained *g = &fs->dur_gained;
	int fd;
	mdb_env_get_fd(fs->env, &fd);
	struct dbfs_drec_page *list = (void *)(fs->dur_buf + DBFS_DREC_HEAD + 8);
	unsigned char *page = fs->dur_buf + DBFS_DREC_SLOT2;
	size_t ps = fs->dur_psize;
	for (size_t i = 0; i < g->out.n; i++) {
		uint64_t pgno = g->out.v[i];
		errno = 0;
		if (pread(fd, page, ps, (off_t)(pgno * ps)) != (ssize_t)ps)
			return errno ? errno : EIO;
		list[i].pgno = pgno;
		list[i].hash = dbfs_drec_page_hash(pgno, page, ps);
	}
	*n = g->out.n;
	return 0;
}

/* Lay dbfs.durable out as version 2 wants it (format.h): every byte
 * written, so that a record's write changes no metadata. Only right
 * after a full flush of data.mdb, which a store without a valid record is
 * trusted to have had. With listed points at every open: a pushed record
 * is durable after data.mdb's flush only if its write allocated nothing,
 * and a copy of the store may share its blocks (a reflink: the next write
 * of a shared block allocates one) or hold them unwritten (fallocate). */
static int lay_out(struct dbfs *fs)
{
	struct stat st;
	if (fstat(fs->dur_fd, &st) < 0)
		return errno;
	if (st.st_size == DBFS_DREC_FILE_SIZE && fs->dur_seq && !fs->dur_listed) {
		struct dbfs_drec r;
		/* version 2 already (a version-1 record would be at 0) */
		if (pread(fs->dur_fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r) && r.version != 1)
			return 0;
	}
	memset(fs->dur_buf, 0, DBFS_DREC_SLOT2);
	for (off_t off = 0; off < DBFS_DREC_FILE_SIZE; off += DBFS_DREC_SLOT2)
		if (pwrite(fs->dur_fd, fs->dur_buf, DBFS_DREC_SLOT2, off) != DBFS_DREC_SLOT2)
			return errno ? errno : EIO;
	if (ftruncate(fs->dur_fd, DBFS_DREC_FILE_SIZE) < 0 || fsync(fs->dur_fd) < 0)
		return errno;
	int rc = 0, dfd = open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0)
			rc = errno;
		close(dfd);
	}
	return rc;
}

/* Wait until no write transaction runs, and keep others from starting one
 * (the group commit's leader role, commit.c). */
static void writers_pause(struct dbfs *fs)
{
	pthread_mutex_lock(&fs->wq_lock);
	while (fs->wq_leader)
		pthread_cond_wait(&fs->wq_cond, &fs->wq_lock);
	fs->wq_leader = 1;
	pthread_mutex_unlock(&fs->wq_lock);
}

static void writers_resume(struct dbfs *fs)
{
	pthread_mutex_lock(&fs->wq_lock);
	fs->wq_leader = 0;
	pthread_cond_broadcast(&fs->wq_cond);
	pthread_mutex_unlock(&fs->wq_lock);
}

/* Step 1 of a point: pin the newest snapshot and copy its meta page. The
 * caller holds the writer (leader role or paused writers). LMDB reads its
 * meta pages through the map, which moves when it grows: the map lock. */
static int pin_newest(struct dbfs *fs, MDB_txn **pin, uint64_t *txnid, unsigned char *meta)
{
	int rc = MDB_BAD_TXN;
	pthread_rwlock_rdlock(&fs->map_lock);
	if (fs->dur_spare) {
		*pin = fs->dur_spare;
		fs->dur_spare = NULL;
		if ((rc = mdb_txn_renew(*pin)))
			mdb_txn_abort(*pin);
	}
	if (rc)
		rc = mdb_txn_begin(fs->env, NULL, MDB_RDONLY, pin);
	pthread_rwlock_unlock(&fs->map_lock);
	if (rc)
		return rc;
	*txnid = mdb_txn_id(*pin);
	int fd;
	mdb_env_get_fd(fs->env, &fd);
	if (pread(fd, meta, DBFS_DREC_META, (off_t)(*txnid & 1) * fs->dur_psize + 16) !=
		    DBFS_DREC_META ||
	    !dbfs_lmdb_meta_ok(meta, *txnid)) {
		/* Not LMDB 0.9's meta layout: never record what we cannot
		 * restore. */
		mdb_txn_abort(*pin);
		return MDB_INCOMPATIBLE;
	}
	return 0;
}

/* A pin no longer needed is kept, reset, for the next point: beginning a
 * read transaction callocs an array of maxdbs entries (the feed's queue
 * needs many), 43,000 instructions a point in callgrind; renewing a reset
 * one does not. Its reader slot stays taken, as the pin's was. */
static void pin_let_go(struct dbfs *fs, MDB_txn *t)
{
	if (!t)
		return;
	if (fs->dur_spare) {
		mdb_txn_abort(t);
		return;
	}
	mdb_txn_reset(t);
	fs->dur_spare = t;
}

/* Flush data.mdb (with MDB_WRITEMAP this msyncs the map: it must not
 * move meanwhile). */
static int flush_data(struct dbfs *fs)
{
	pthread_rwlock_rdlock(&fs->map_lock);
	int rc = mdb_env_sync(fs->env, 1);
	pthread_rwlock_unlock(&fs->map_lock);
	return rc;
}

/* A durable point; fs->dur_lock held. `leader`: the caller already holds
 * the writer (commit.c on a full disk). `checkpoint`: not an imaged one,
 * and made even when nothing committed since an imaged point (close: a
 * store closed cleanly needs no dbfs.images). */
static int point_locked(struct dbfs *fs, bool leader, bool checkpoint)
{
	MDB_txn *pin;
	uint64_t txnid, bytes0;
	unsigned char meta[DBFS_DREC_META];
	if (!leader)
		writers_pause(fs);
	int rc = pin_newest(fs, &pin, &txnid, meta);
	if (!rc)
		dbfs_held_pinned(fs); /* every commit up to txnid is counted */
	int64_t t0 = dbfs_durable_clock();
	pthread_mutex_lock(&fs->dur_stat_lock);
	bytes0 = fs->dur_bytes;
	/* A batch that changed nothing commits no transaction, but told
	 * dbfs_durable_committed the id it would have had. */
	if (!rc && fs->last_txn > txnid)
		fs->last_txn = txnid;
	if (!rc && txnid == fs->dur_txn) {
		fs->dur_since_ns = 0;
		fs->dur_bytes = 0;
	}
	pthread_mutex_unlock(&fs->dur_stat_lock);
	if (!leader)
		writers_resume(fs);
	if (rc)
		return rc;
	if (txnid == fs->dur_txn && !(checkpoint && fs->img_lseq)) {
		pin_let_go(fs, pin); /* nothing committed since the last point */
		dbfs_held_moved(fs);
		return 0;
	}
	/* Imaged (one flush of dbfs.images): the gained pages' images, and no
	 * flush of data.mdb. Else a checkpoint: listed (one flush) the record
	 * first, pushed to the device, then data.mdb's flush carries both;
	 * otherwise data.mdb, then the record, each flushed. A checkpoint
	 * after imaged points is never listed: its list would name the pages
	 * gained since the last imaged point, and the points before it may
	 * have left theirs in dbfs.images only. */
	uint64_t n = 0, seq0 = fs->dur_seq;
	bool listed = false, imaged = false;
	bool may_image = fs->dur_imaged && !checkpoint && txnid != fs->dur_txn;
	bool may_list = fs->dur_listed && !fs->img_lseq;
	if (!(may_image || may_list) || !fs->dur_pin)
		(void)0;
	else if (fs->dur_list_pause)
		fs->dur_list_pause--;
	else if (dbfs_durable_fault == DBFS_FAULT_MIXED && (fs->cnt.flushes & 1))
		(void)0; /* a test: a checkpoint between one-flush points */
	else if ((rc = gain(fs, meta)) == E2BIG) {
		/* Too big, or a free list too long to walk. After one burst
		 * (a large write, a large file removed) the point after this
		 * checkpoint gains little and is one flush again, so it tries
		 * at once; while walks keep failing (LMDB rewrites a long
		 * free-list record at every commit), each try costs its walk
		 * for nothing, so the points between tries double, up to
		 * DBFS_LIST_PAUSE. A pause of 32 after every failure made
		 * 35-39 points of a 5 s fio fsync=1 round checkpoints on a
		 * 1.5 GB store after an rm of 64 MiB (2 now), each flushing
		 * data.mdb. */
		fs->dur_list_pause = fs->dur_list_backoff;
		fs->dur_list_backoff = fs->dur_list_backoff ? 2 * fs->dur_list_backoff : 1;
		if (fs->dur_list_backoff > DBFS_LIST_PAUSE)
			fs->dur_list_backoff = DBFS_LIST_PAUSE;
		rc = 0;
	} else if (!rc) {
		fs->dur_list_backoff = 0;
		struct dbfs_gained *g = &fs->dur_gained;
		if (may_image) {
			rc = dbfs_images_append(fs, txnid, meta, g->out.v, g->out.n);
			imaged = !rc;
			if (rc == EFBIG || rc == ENOSPC || rc == EDQUOT)
				rc = 0; /* the log is full: a checkpoint */
		}
		if (!rc && !imaged && may_list) {
			rc = list_pages(fs, &n);
			listed = !rc;
		}
	}
	if (!rc && listed)
		rc = write_record(fs, txnid, meta, DBFS_DREC_LISTED, n, true);
	if (!rc && listed && dbfs_durable_fault == DBFS_FAULT_FLUSH_AFTER_PUSH) {
		dbfs_durable_fault = 0; /* a test: the device failed the flush */
		rc = EIO;
	}
	if (!rc && !imaged)
		rc = flush_data(fs);
	if (!rc && !imaged && !listed)
		rc = write_record(fs, txnid, meta, 0, 0, false);
	if (rc) {
		/* A pushed record whose flush failed may be on the disk without
		 * its pages: the next record goes to its slot again, never over
		 * the previous one, which recovery may still need. */
		if (listed && fs->dur_seq == seq0 + 1)
			fs->dur_seq = seq0;
		mdb_txn_abort(pin);
		return rc;
	}
	fs->cnt.flushes++;
	if (listed)
		fs->cnt.flushes_listed++;
	if (imaged)
		fs->cnt.flushes_imaged++;
	else
		dbfs_images_reset(fs); /* record dur_seq starts a new chain */
	memcpy(fs->dur_meta, meta, DBFS_DREC_META);
	/* Only now may the pages that T' does not use and T did be reused:
	 * until the flush, T was the point a recovery falls back to. */
	pin_let_go(fs, fs->dur_pin);
	fs->dur_pin = pin;
	if (dbfs_durable_fault == DBFS_FAULT_NO_PIN) {
		mdb_txn_abort(pin);
		fs->dur_pin = NULL;
	}
	fs->dur_txn = txnid;
	dbfs_held_moved(fs); /* what was freed up to txnid is reused from now on */
	pthread_mutex_lock(&fs->dur_stat_lock);
	fs->dur_bytes -= bytes0;
	/* A commit after the pin is not durable: it came after t0. */
	fs->dur_since_ns = fs->last_txn > txnid ? t0 : 0;
	pthread_mutex_unlock(&fs->dur_stat_lock);
	return 0;
}

int dbfs_durable_start(struct dbfs *fs, char *err, size_t errlen)
{
	char path[4200];
	struct dbfs_drec r;
	snprintf(path, sizeof(path), "%s/" DBFS_DREC_FILE, fs->dir);
	fs->dur_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fs->dur_fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
		return -e;
	}
	fs->dur_seq = dbfs_drec_read(fs->dur_fd, &r) ? r.seq : 0;
	MDB_stat st;
	mdb_env_stat(fs->env, &st); /* no other thread yet: no map lock */
	fs->dur_psize = st.ms_psize;
	struct statfs sf;
	fs->dur_listed = !fs->dur_trust &&
			 (dbfs_durable_test_listed > 0 ||
			  (dbfs_durable_test_listed < 0 && fstatfs(fs->dur_fd, &sf) == 0 &&
			   (sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC)));
	fs->dur_imaged = false; /* until dbfs_durable_opened */
	dbfs_images_close(fs); /* the record written below starts a new chain */
	fs->dur_gained.out.v = malloc(DBFS_DREC_LIST_MAX * sizeof(uint64_t));
	fs->dur_gained.out.cap = DBFS_DREC_LIST_MAX;
	/* a record, and a page being hashed */
	fs->dur_buf = malloc(DBFS_DREC_SLOT2 + (1u << 16));
	int rc = fs->dur_gained.out.v && fs->dur_buf ? 0 : ENOMEM;
	/* Whatever the record said, the store as opened becomes the durable
	 * point now: its pages are flushed before the record names it (a new
	 * or rewritten file's first record: after its directory entry and
	 * its zeros are on the disk). */
	if (!rc)
		rc = mdb_env_sync(fs->env, 1);
	if (!rc)
		rc = lay_out(fs);
	if (!rc) {
		MDB_txn *pin;
		uint64_t txnid;
		unsigned char meta[DBFS_DREC_META];
		rc = pin_newest(fs, &pin, &txnid, meta);
		if (!rc && fs->dur_trust) {
			mdb_txn_abort(pin);
			rc = write_record(fs, txnid, meta, DBFS_DREC_TRUST_LMDB, 0, false);
		} else if (!rc) {
			rc = write_record(fs, txnid, meta, 0, 0, false);
			if (rc)
				mdb_txn_abort(pin);
			else
				fs->dur_pin = pin;
		}
		if (!rc) {
			fs->dur_txn = fs->last_txn = txnid;
			memcpy(fs->dur_meta, meta, DBFS_DREC_META);
			dbfs_held_start(fs, txnid);
		}
	}
	if (rc) {
		snprintf(err, errlen, "cannot make the store durable: %s", mdb_strerror(rc));
		dbfs_durable_drop(fs);
		return dbfs_errno(rc);
	}
	return 0;
}

void dbfs_durable_opened(struct dbfs *fs)
{
	pthread_mutex_lock(&fs->dur_lock);
	fs->dur_imaged = !fs->dur_trust && fs->dur_fd >= 0 && dbfs_durable_test_imaged != 0 &&
			 fs->sb_version >= 7;
	pthread_mutex_unlock(&fs->dur_lock);
}

void dbfs_durable_drop(struct dbfs *fs)
{
	if (fs->dur_fd >= 0)
		close(fs->dur_fd);
	fs->dur_fd = -1;
	dbfs_images_close(fs);
	dbfs_gained_free(&fs->dur_gained);
	free(fs->dur_buf);
	fs->dur_buf = NULL;
	/* held.c's cursor is memory only (a read-only transaction's cursor
	 * is not linked into it, and closing it reads no map page); its
	 * read transaction stays with the environment that is kept */
	if (fs->held_cur)
		mdb_cursor_close(fs->held_cur);
	fs->held_cur = NULL;
}

void dbfs_durable_committed(struct dbfs *fs, uint64_t txnid, size_t bytes)
{
	if (fs->dur_trust) {
		fs->dur_txn = fs->last_txn = txnid;
		return;
	}
	if (txnid <= fs->dur_txn)
		return; /* the batch changed nothing */
	pthread_mutex_lock(&fs->dur_stat_lock);
	fs->last_txn = txnid;
	if (!fs->dur_since_ns)
		fs->dur_since_ns = dbfs_durable_clock();
	fs->dur_bytes += bytes;
	pthread_mutex_unlock(&fs->dur_stat_lock);
}

int dbfs_durable_point(struct dbfs *fs)
{
	if (fs->opt.read_only || fs->dur_fd < 0)
		return 0;
	if (atomic_load(&fs->map_lost))
		return EIO; /* its maps faulted (guard.c): nothing to make durable */
	if (fs->dur_trust)
		return 0; /* every commit was flushed before it was acknowledged */
	/* The newest commit, also one made outside the group commit (LMDB
	 * reads it from the map: under the map lock, see pin_newest). */
	MDB_envinfo info;
	pthread_rwlock_rdlock(&fs->map_lock);
	mdb_env_info(fs->env, &info);
	pthread_rwlock_unlock(&fs->map_lock);
	uint64_t want = fs->last_txn > info.me_last_txnid ? fs->last_txn : info.me_last_txnid;
	if (fs->dur_txn >= want)
		return 0;
	pthread_mutex_lock(&fs->dur_lock);
	int rc = fs->dur_txn >= want ? 0 : point_locked(fs, false, false);
	pthread_mutex_unlock(&fs->dur_lock);
	/* A failed flush, whoever asked (fsync, the sync verb, the tick,
	 * close): pages may be gone, the store turns read-only (health.c). */
	dbfs_health_check(fs, rc, "flush");
	return rc;
}

int dbfs_durable_point_leader(struct dbfs *fs)
{
	if (fs->opt.read_only || fs->dur_fd < 0 || fs->dur_trust ||
	    fs->dur_txn >= fs->last_txn)
		return 0;
	/* trylock: a flush in progress pauses writers, and we are the writer. */
	if (pthread_mutex_trylock(&fs->dur_lock))
		return 0;
	int rc = point_locked(fs, true, false);
	pthread_mutex_unlock(&fs->dur_lock);
	return rc;
}

int dbfs_durable_tick(struct dbfs *fs)
{
	if (fs->dur_fd < 0 || fs->dur_trust)
		return 0;
	if (dbfs_held_due(fs))
		return dbfs_durable_point(fs); /* asked for by space (held.c) */
	int64_t since, interval = (int64_t)fs->commit_interval_ms * 1000000;
	pthread_mutex_lock(&fs->dur_stat_lock);
	since = fs->dur_since_ns;
	pthread_mutex_unlock(&fs->dur_stat_lock);
	/* dbfs_tick runs about once a second: flush a second early, so that
	 * no change waits longer than commit_interval (plus the flush). */
	if (!since || dbfs_durable_clock() - since < interval - DBFS_TICK_NS)
		return 0;
	return dbfs_durable_point(fs);
}

void dbfs_durable_stop(struct dbfs *fs)
{
	if (fs->dur_fd < 0)
		return;
	if (!fs->opt.read_only && !atomic_load(&fs->map_lost) && !fs->dur_trust) {
		/* a checkpoint: a store closed cleanly is data.mdb and its
		 * record, without dbfs.images */
		pthread_mutex_lock(&fs->dur_lock);
		int rc = point_locked(fs, false, true);
		pthread_mutex_unlock(&fs->dur_lock);
		dbfs_health_check(fs, rc, "flush");
	}
	if (fs->dur_pin)
		mdb_txn_abort(fs->dur_pin);
	fs->dur_pin = NULL;
	if (fs->dur_spare)
		mdb_txn_abort(fs->dur_spare);
	fs->dur_spare = NULL;
	dbfs_held_stop(fs);
	dbfs_durable_drop(fs);
}

void dbfs_set_commit_interval(struct dbfs *fs, double secs)
{
	if (secs > 0)
		fs->commit_interval_ms = (uint64_t)(secs * 1000.0 + 0.5);
}

void dbfs_durable_state(struct dbfs *fs, uint64_t *age_ms, uint64_t *bytes)
{
	pthread_mutex_lock(&fs->dur_stat_lock);
	int64_t since = fs->dur_since_ns;
	*bytes = fs->dur_bytes;
	pthread_mutex_unlock(&fs->dur_stat_lock);
	int64_t now = dbfs_durable_clock();
	*age_ms = since && now > since ? (uint64_t)(now - since) / 1000000 : 0;
}
