/*
 * The manager's state: every DBFS it knows (registered or being mounted),
 * shared by the control thread (the only writer of lifecycle state), the
 * manager file system's handlers (readers) and the loop's end callbacks.
 * manager.c holds the list's few helpers declared at the end.
 *
 * Error convention of all of mfs/: a function that can fail returns 0 (or a
 * count, where it says so) on success and a negative errno value (-ENOENT,
 * -EBUSY, ...) on failure, never a positive errno and never an LMDB code:
 * those are mapped where they come in (dbfs_*, mfs_registry_*). Only the
 * FUSE boundary turns it positive (fuse_reply_err(req, -rc)). A reason for
 * the user, where a function takes `err`/`errlen`, is one line of text.
 *
 * Locking: mgr->lock protects the list and every field marked "lock". It is
 * never held across a mount, an unmount, dbfs_open/dbfs_close or any call that
 * may wait on a FUSE request.
 */
#ifndef MFS_MANAGER_H
#define MFS_MANAGER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dbfs/dbfs.h"
#include "governor.h"

struct fuse_session;

/* Per-user limits (user_limits.c). */
struct mfs_user_limits {
	uint64_t dbfs;   /* DBFSs a user may have; 0: no limit */
	uint64_t bytes;  /* the sum of their quota_bytes; 0: no limit */
	uint64_t inodes; /* the sum of their quota_inodes; 0: no limit */
};
struct mfs_loop;
struct mfs_session;
struct mfs_registry;
struct mfs_uring;
struct mfs_uring_sess;
struct mfs_account;

#define MFS_NAME_MAX 64
#define MFS_OPTS_MAX 4096

enum mfs_state {
	MFS_UNMOUNTED = 0,
	MFS_MOUNTING,
	MFS_MOUNTED,
	MFS_UNMOUNTING,
	MFS_FAILED,
};

/* A DBFS's configuration: what the registry stores. */
struct mfs_conf {
	char name[MFS_NAME_MAX + 1];
	char store[PATH_MAX];
	char mountpoint[PATH_MAX];
	uid_t owner;
	bool want_mounted;
	/* options other than name/store/mountpoint/create, canonical
	 * `key=value,...` text, re-parsed at each mount */
	char opts[MFS_OPTS_MAX];
};

struct mfs_dbfs {
	struct mfs_conf conf;
	uint32_t id;          /* stable: inode numbers in the manager fs */
	/* lock */
	enum mfs_state state;
	char reason[256];     /* why it failed or was unmounted */
	bool session_ended;   /* the loop called on_end */
	struct dbfs *fs;      /* MOUNTED or UNMOUNTING */
	struct mfs_session *sess;
	struct fuse_session *se;
	struct mfs_uring_sess *ring; /* its io_uring queues (uring.h), or NULL */
	unsigned conn;        /* kernel connection id (/sys/fs/fuse/connections) */
	dev_t dev;            /* st_dev of the mount */
	/* What the mount was made on and from (path.h), held while MOUNTED or
	 * UNMOUNTING so that unmounting acts on this mount and nothing else:
	 * the mount point's parent directory and its name there, the mount's
	 * ID (statx STATX_MNT_ID), and the store directory that dbfs_open was
	 * given as /proc/self/fd/N. Control thread only. */
	bool held;
	int mp_dirfd;
	char mp_name[NAME_MAX + 1];
	uint64_t mnt_id;
	int store_fd;
	struct mfs_limits limits;
	uint64_t cache_mem;    /* its own mem= (0: none) */
	uint64_t cache_limit;  /* as last applied: min(cache_mem, manager mem / mounted) */
	uint64_t quota_bytes;  /* as last applied (0: none) */
	uint64_t quota_inodes;
	double demand;        /* lock: workers it kept busy over 10 s (account_govern.c) */
	unsigned readers;     /* lock: status readers using fs outside the lock (pin) */
	uint64_t mounted_at;  /* CLOCK_REALTIME seconds */
	struct mfs_dbfs *next;
};

struct mfs_manager {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* session_ended, manager_ended changes */
	struct mfs_dbfs *list;   /* lock */
	uint32_t next_id;        /* lock */

	struct mfs_loop *loop;
	struct mfs_uring *uring;  /* per-CPU io_uring queues for DBFSs, or NULL */
	struct mfs_registry *reg; /* NULL in single-DBFS mode */
	char mountpoint[PATH_MAX];
	char state_dir[PATH_MAX];
	dev_t dev;               /* st_dev of the manager mount */
	uid_t uid;               /* who started mfs */
	bool allow_other;
	uint64_t mem;            /* -o mem=: kernel cache budget of all DBFSs, 0: none */
	struct mfs_user_limits user_limits; /* -o user_max_*= (user_limits.h) */
	uint64_t started_at;     /* CLOCK_REALTIME seconds */
	struct fuse_session *se; /* the manager session (NULL in single mode) */
	struct mfs_session *sess;
	bool manager_ended;      /* lock */
	bool single;             /* serve one DBFS, no manager mount */
	struct mfs_account *acct; /* the accountant (account.h), or NULL */
};

/* Find a DBFS by name. mgr->lock held. NULL when unknown. */
struct mfs_dbfs *mfs_find(struct mfs_manager *mgr, const char *name);

/* Find a DBFS by id. mgr->lock held. NULL when unknown. */
struct mfs_dbfs *mfs_find_id(struct mfs_manager *mgr, uint32_t id);

/* Text of a state ("mounted", ...). Pure: any thread. */
const char *mfs_state_name(enum mfs_state st);

/*
 * Keep a mounted DBFS's store open while a status reader (metrics, the
 * accountant's gauges) uses it without mgr->lock, so that no store work
 * (a read transaction, a stat of data.mdb) runs under the manager's lock.
 * mfs_dbfs_pin: mgr->lock held, d MOUNTED with fs set; d->fs stays valid
 * until the matching unpin. mfs_dbfs_unpin: mgr->lock held; wakes the
 * unmount waiting in mfs_dbfs_wait_unpinned. mfs_dbfs_wait_unpinned:
 * mgr->lock held (released while it waits), called by the unmount after
 * d is no longer MOUNTED and before it closes the store. A pinned reader
 * must not wait for the control thread or take mgr->lock meanwhile.
 */
void mfs_dbfs_pin(struct mfs_dbfs *d);
void mfs_dbfs_unpin(struct mfs_manager *mgr, struct mfs_dbfs *d);
void mfs_dbfs_wait_unpinned(struct mfs_manager *mgr, struct mfs_dbfs *d);

/* Add d to the manager's list, which stays in name order / remove it.
 * mgr->lock held. */
void mfs_dbfs_link(struct mfs_manager *mgr, struct mfs_dbfs *d);
void mfs_dbfs_unlink(struct mfs_manager *mgr, struct mfs_dbfs *d);

/* Write d's configuration to the registry (nothing in single-DBFS mode). A
 * failure is logged, not returned: the DBFS keeps running as it is, and the
 * registry says what it said before. Control thread, mgr->lock not held. */
void mfs_dbfs_save(struct mfs_manager *mgr, struct mfs_dbfs *d);

#endif
