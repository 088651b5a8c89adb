/*
 * Mount mechanics: FUSE sessions, unmounting, stale mounts, connection abort.
 * Every function here may block (it runs fusermount3, waits for the kernel)
 * and must run on the control thread (fuse_session_mount is not
 * thread-safe) — never on a loop worker.
 */
#ifndef MFS_MOUNT_H
#define MFS_MOUNT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fuse_lowlevel_ops;
struct fuse_custom_io;
struct fuse_session;

/*
 * Create a session for `ops`/`userdata` with the mount options `fuse_opts`
 * (comma-separated, libfuse syntax) and mount it at `mnt`; with `io`, the
 * session talks to the kernel through those hooks (fuse_session_custom_io).
 * A non-zero `read_ahead` (bytes) sets the mount's readahead window, as far
 * as the process may (root); it should match the ops' INIT max_readahead.
 * (`mnt` must then name the mount itself, not a /proc/self/fd link: pass 0
 * and call mfs_mount_set_read_ahead with the mount's device instead.)
 * Errors: -EINVAL (bad options), -EIO (the mount failed; reason in err),
 * -errno of fuse_session_custom_io.
 */
int mfs_mount_session(const struct fuse_lowlevel_ops *ops, const struct fuse_custom_io *io,
		      void *userdata, const char *mnt, const char *fuse_opts, unsigned read_ahead,
		      struct fuse_session **out, char *err, size_t errlen);

/* Set the readahead window (bytes) of the mount with device `dev`, as far as
 * the process may (root); logged at debug level when it cannot. */
void mfs_mount_set_read_ahead(dev_t dev, unsigned bytes);

/*
 * Unmount `mnt`: lazily (MNT_DETACH) when `lazy`, else failing with -EBUSY
 * while it is in use. Root uses umount2(2), others fusermount3.
 * Errors: -EBUSY, -EINVAL (not a mount point), -EPERM, -EIO.
 */
int mfs_unmount_path(const char *mnt, bool lazy);

/*
 * The mount at exactly `mnt` from /proc/self/mountinfo: its device (the
 * FUSE connection id is its minor number) and file system type.
 * Returns 0, -ENOENT when nothing is mounted there, -ENOMEM, or -errno of
 * opening mountinfo.
 */
int mfs_mount_lookup(const char *mnt, dev_t *dev, char *fstype, size_t fstypelen);

/*
 * Abort FUSE connection `conn` through /sys/fs/fuse/connections/N/abort
 * (mounting fusectl there first if needed, root only). After it, every
 * request of the connection fails and its reads give ENODEV.
 * Errors: -ENOENT (no such connection / no fusectl), -errno of the write.
 */
int mfs_conn_abort(unsigned conn);

/*
 * If `mnt` is a dead FUSE mount ("transport endpoint is not connected"),
 * lazily unmount it. Returns 1 when it cleaned one, 0 when nothing was
 * stale, -errno when the unmount failed.
 */
int mfs_clean_stale(const char *mnt);

/* Does errno `e` from a file operation on a FUSE mount say that its server
 * is gone? ENOTCONN, or ECONNABORTED or ECANCELED while the kernel is still
 * tearing down the io_uring queues of a server that died (a live DBFS never
 * answers either). */
static inline bool mfs_errno_dead_mount(int e)
{
	return e == ENOTCONN || e == ECONNABORTED || e == ECANCELED;
}

/*
 * What is mounted at `path` (a held name, mfs_held_name_path): nothing
 * (MFS_MP_NONE: not the root of a mount), a dead FUSE mount whose server
 * is gone (MFS_MP_DEAD), or a live mount (MFS_MP_LIVE). A dead mount's
 * cached attributes would make stat(2) succeed, so the mount root comes
 * from statx without a FUSE request and liveness from statfs(2), which
 * the kernel always sends to the server. Returns one of those, or -errno.
 */
enum { MFS_MP_NONE, MFS_MP_DEAD, MFS_MP_LIVE };
int mfs_mount_probe(const char *path);

/*
 * Lazily unmount every dead DBFS mount (fuse.dbfs) stacked at the held name
 * `h`, top first (crashes before this fix could leave several), then
 * re-open h->fd on what is left. Returns the number removed (0: none),
 * -EBUSY when a dead mount of another kind is there (left alone), or
 * -errno of an unmount that failed.
 */
struct mfs_held;
int mfs_clean_stale_held(struct mfs_held *h);

/*
 * Lazily unmount every dead FUSE mount whose source is `source` (the
 * fsname, e.g. "dbfs:/srv/docs.db"), wherever it is now: a crashed mfs's
 * mount stays where it was even when its directory was renamed since.
 * Each is held and proven by its mount ID before it is unmounted, so a
 * path swapped meanwhile is skipped. Returns the number removed.
 */
int mfs_clean_stale_source(const char *source);

/*
 * Unmount the mount with mount ID `mnt_id` at name `name` of the held
 * directory `dirfd` (what the mount was made on), never what a path
 * resolves to now: a mount point cannot be renamed or removed while
 * something is mounted on it, so that name in that directory still leads
 * to our mount, and its mount ID proves it. Lazily (MNT_DETACH) when
 * `lazy`. Errors: -ENOENT (our mount is no longer there: nothing was
 * unmounted), -EBUSY, -EPERM, -EIO, -errno of umount2.
 */
int mfs_unmount_held(int dirfd, const char *name, uint64_t mnt_id, bool lazy);

/* The mount ID (statx STATX_MNT_ID) and device of the mount on name `name`
 * of held directory `dirfd`, without a FUSE request. Returns 0 or -errno. */
int mfs_mount_id_at(int dirfd, const char *name, uint64_t *mnt_id, dev_t *dev);

/* Escape `s` for a libfuse option value (`,` and `\`) into out. */
void mfs_fuse_opt_escape(char *out, size_t outlen, const char *s);

#endif
