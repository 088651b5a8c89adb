/*
 * LD_PRELOAD shim for t_shared_model.sh's teeth: a shared store's notifier
 * that tells its kernel nothing. The three notifications it sends
 * (fuse_lowlevel_notify_inval_entry, _inval_inode, _delete) return 0
 * without reaching the kernel, so the other processes' changes stay
 * cached as before them: the model test must see a stale read or name.
 */
#include <fuse_lowlevel.h>

int fuse_lowlevel_notify_inval_entry(struct fuse_session *se, fuse_ino_t parent, const char *name,
				     size_t namelen)
{
	(void)se, (void)parent, (void)name, (void)namelen;
	return 0;
}

int fuse_lowlevel_notify_inval_inode(struct fuse_session *se, fuse_ino_t ino, off_t off, off_t len)
{
	(void)se, (void)ino, (void)off, (void)len;
	return 0;
}

int fuse_lowlevel_notify_delete(struct fuse_session *se, fuse_ino_t parent, fuse_ino_t child,
				const char *name, size_t namelen)
{
	(void)se, (void)parent, (void)child, (void)name, (void)namelen;
	return 0;
}
