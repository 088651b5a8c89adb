/*
 * What is durable when: the default durability mode (`normal`) and the
 * fsync path.
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
 *             the previous record does not use, and flush that file;
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
 * When points happen: fsync, fdatasync, O_SYNC/O_DSYNC writes (the kernel
 * sends FUSE_FSYNC) and dbfs_sync make one and wait for it; concurrent
 * callers share it (whoever finds its commit already durable returns at
 * once; the others wait for the one flush in progress, then one flushes
 * for all of them). dbfs_tick makes one when the oldest change that is not
 * durable is commit_interval old (less the tick's period), and close makes
 * a last one. A point's cost is two flushes of what changed since the last
 * one, not of the store: its price does not grow with the store's size.
 * The price of the pin: space freed after a point is reused after the next
 * one, so the file may hold up to commit_interval of churn more.
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

static int write_record(struct dbfs *fs, uint64_t txnid, const unsigned char *meta,
			unsigned flags)
{
	struct dbfs_drec r;
	unsigned char slot[DBFS_DREC_SLOT];
	memset(&r, 0, sizeof(r));
	memcpy(r.magic, DBFS_DREC_MAGIC, 8);
	r.version = 1;
	r.flags = flags;
	r.seq = ++fs->dur_seq;
	r.txnid = txnid;
	r.psize = fs->dur_psize;
	dbfs_boot_id(r.boot);
	if (meta)
		memcpy(r.meta, meta, DBFS_DREC_META);
	r.sum = dbfs_drec_sum(&r);
	memset(slot, 0, sizeof(slot));
	memcpy(slot, &r, sizeof(r));
	if (pwrite(fs->dur_fd, slot, sizeof(slot), (off_t)(r.seq & 1) * DBFS_DREC_SLOT) !=
	    (ssize_t)sizeof(slot))
		return errno ? errno : EIO;
	if (fdatasync(fs->dur_fd) < 0)
		return errno;
	return 0;
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
	pthread_rwlock_rdlock(&fs->map_lock);
	int rc = mdb_txn_begin(fs->env, NULL, MDB_RDONLY, pin);
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

/* A durable point; fs->dur_lock held. `leader`: the caller already holds
 * the writer (commit.c on a full disk). */
static int point_locked(struct dbfs *fs, bool leader)
{
	MDB_txn *pin;
	uint64_t txnid, bytes0;
	unsigned char meta[DBFS_DREC_META];
	if (!leader)
		writers_pause(fs);
	int rc = pin_newest(fs, &pin, &txnid, meta);
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
	if (txnid == fs->dur_txn) {
		mdb_txn_abort(pin); /* nothing committed since the last point */
		return 0;
	}
	/* With MDB_WRITEMAP this msyncs the map: it must not move meanwhile. */
	pthread_rwlock_rdlock(&fs->map_lock);
	rc = mdb_env_sync(fs->env, 1);
	pthread_rwlock_unlock(&fs->map_lock);
	if (!rc)
		rc = write_record(fs, txnid, meta, 0);
	if (rc) {
		mdb_txn_abort(pin);
		return rc;
	}
	fs->cnt.flushes++;
	if (fs->dur_pin)
		mdb_txn_abort(fs->dur_pin);
	fs->dur_pin = pin;
	if (dbfs_durable_fault == DBFS_FAULT_NO_PIN) {
		mdb_txn_abort(pin);
		fs->dur_pin = NULL;
	}
	fs->dur_txn = txnid;
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
	/* Whatever the record said, the store as opened becomes the durable
	 * point now: its pages are flushed before the record names it (a new
	 * file's first record: after its directory entry is on the disk). */
	int rc = mdb_env_sync(fs->env, 1);
	if (!rc && !fs->dur_seq) {
		if (fsync(fs->dur_fd) < 0)
			rc = errno;
		int dfd = open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			if (fsync(dfd) < 0 && !rc)
				rc = errno;
			close(dfd);
		}
	}
	if (!rc) {
		MDB_txn *pin;
		uint64_t txnid;
		unsigned char meta[DBFS_DREC_META];
		rc = pin_newest(fs, &pin, &txnid, meta);
		if (!rc && fs->dur_trust) {
			mdb_txn_abort(pin);
			rc = write_record(fs, txnid, meta, DBFS_DREC_TRUST_LMDB);
		} else if (!rc) {
			rc = write_record(fs, txnid, meta, 0);
			if (rc)
				mdb_txn_abort(pin);
			else
				fs->dur_pin = pin;
		}
		if (!rc)
			fs->dur_txn = fs->last_txn = txnid;
	}
	if (rc) {
		snprintf(err, errlen, "cannot make the store durable: %s", mdb_strerror(rc));
		close(fs->dur_fd);
		fs->dur_fd = -1;
		return dbfs_errno(rc);
	}
	return 0;
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
	int rc = fs->dur_txn >= want ? 0 : point_locked(fs, false);
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
	int rc = point_locked(fs, true);
	pthread_mutex_unlock(&fs->dur_lock);
	return rc;
}

int dbfs_durable_tick(struct dbfs *fs)
{
	if (fs->dur_fd < 0 || fs->dur_trust)
		return 0;
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
	if (!fs->opt.read_only)
		dbfs_durable_point(fs);
	if (fs->dur_pin)
		mdb_txn_abort(fs->dur_pin);
	fs->dur_pin = NULL;
	close(fs->dur_fd);
	fs->dur_fd = -1;
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
