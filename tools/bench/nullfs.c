/*
 * nullfs: the ceiling of tools/bench/fs. A libfuse 3 low-level file system
 * that answers the requests the benchmark's workloads make with no store:
 * names and attributes in one hash table in memory, file contents not kept
 * at all (reads return zeros up to the file's size, writes only move the
 * size). It negotiates what DBFS negotiates (dbfs/fuse_ops.c, op_init: no
 * open or opendir requests, readdirplus, 1 MiB writes, 1 MiB readahead,
 * the same attribute and entry timeouts), so each DBFS figure divided by
 * the same figure here is the share of what FUSE itself allows on the
 * machine that DBFS reaches. What it does not do: links, xattrs, rename,
 * permissions (default_permissions does them in the kernel).
 *
 *     nullfs [-s] [-t THREADS] MOUNTPOINT      # foreground; fusermount3 -u to stop
 *
 * -s serves on the calling thread alone (fuse_session_loop); by default
 * libfuse's multi-threaded loop with one cloned /dev/fuse fd per thread
 * (clone_fd), up to THREADS (default 8, as mfs's pool) idle threads.
 */
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT 86400.0
#define MAX_IO	(1u << 20)

struct node {
	uint64_t parent;
	char *name; /* NULL once unlinked */
	mode_t mode;
	uint64_t size;
	uint32_t nlink;
	struct timespec mtime;
	uint64_t hnext; /* next inode in the same hash bucket, 0 ends */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *nodes; /* indexed by inode number; 1 is the root */
static uint64_t nnodes, cap;
static uint64_t *buckets;
static uint64_t nbuckets = 1u << 20;
static const char zeros[MAX_IO];

static uint64_t hash(uint64_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h & (nbuckets - 1);
}

/* lock held */
static uint64_t find(uint64_t parent, const char *name)
{
	for (uint64_t i = buckets[hash(parent, name)]; i; i = nodes[i].hnext)
		if (nodes[i].parent == parent && nodes[i].name && strcmp(nodes[i].name, name) == 0)
			return i;
	return 0;
}

/* lock held */
static void unhash(uint64_t ino)
{
	struct node *n = &nodes[ino];
	uint64_t *pp = &buckets[hash(n->parent, n->name)];
	while (*pp != ino)
		pp = &nodes[*pp].hnext;
	*pp = n->hnext;
	free(n->name);
	n->name = NULL;
}

/* lock held: a new inode, or 0 without memory. */
static uint64_t add(uint64_t parent, const char *name, mode_t mode)
{
	if (nnodes == cap) {
		uint64_t nc = cap ? cap * 2 : 4096;
		struct node *nn = realloc(nodes, nc * sizeof(*nn));
		if (!nn)
			return 0;
		nodes = nn;
		cap = nc;
	}
	uint64_t ino = nnodes++;
	struct node *n = &nodes[ino];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->name = strdup(name);
	n->mode = mode;
	n->nlink = S_ISDIR(mode) ? 2 : 1;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	uint64_t b = hash(parent, name);
	n->hnext = buckets[b];
	buckets[b] = ino;
	return ino;
}

/* lock held */
static void fill(uint64_t ino, struct stat *st)
{
	const struct node *n = &nodes[ino];
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = n->mode;
	st->st_nlink = n->nlink;
	st->st_size = (off_t)n->size;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_blksize = 4096;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_atim = st->st_mtim = st->st_ctim = n->mtime;
}

static void reply_entry(fuse_req_t req, uint64_t ino)
{
	struct fuse_entry_param e = {.ino = ino, .attr_timeout = TIMEOUT, .entry_timeout = TIMEOUT};
	fill(ino, &e.attr);
	pthread_mutex_unlock(&lock);
	fuse_reply_entry(req, &e);
}

static void op_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	static const unsigned caps[] = {
	    FUSE_CAP_READDIRPLUS,     FUSE_CAP_PARALLEL_DIROPS,	   FUSE_CAP_ASYNC_DIO,
	    FUSE_CAP_NO_OPEN_SUPPORT, FUSE_CAP_NO_OPENDIR_SUPPORT, FUSE_CAP_SPLICE_WRITE,
	};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (conn->capable & caps[i])
			conn->want |= caps[i];
	conn->want &= ~(FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_AUTO_INVAL_DATA);
	conn->max_write = MAX_IO;
	conn->max_readahead = MAX_IO;
	conn->time_gran = 1;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	pthread_mutex_lock(&lock);
	uint64_t ino = find(parent, name);
	if (!ino) {
		pthread_mutex_unlock(&lock);
		/* a negative entry, cached as DBFS's are */
		struct fuse_entry_param e = {.ino = 0, .entry_timeout = TIMEOUT};
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry(req, ino);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	(void)ino;
	(void)n;
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	(void)count;
	(void)f;
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	pthread_mutex_lock(&lock);
	if (ino >= nnodes) {
		pthread_mutex_unlock(&lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill(ino, &st);
	pthread_mutex_unlock(&lock);
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	pthread_mutex_lock(&lock);
	struct node *n = &nodes[ino];
	if (to_set & FUSE_SET_ATTR_MODE)
		n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_SIZE)
		n->size = (uint64_t)attr->st_size;
	if (to_set & FUSE_SET_ATTR_MTIME)
		n->mtime = attr->st_mtim;
	fill(ino, &st);
	pthread_mutex_unlock(&lock);
	fuse_reply_attr(req, &st, TIMEOUT);
}

/* A new name; its entry is the reply of MKNOD/MKDIR, or with fi of CREATE. */
static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		 struct fuse_file_info *fi)
{
	pthread_mutex_lock(&lock);
	if (find(parent, name)) {
		pthread_mutex_unlock(&lock);
		fuse_reply_err(req, EEXIST);
		return;
	}
	uint64_t ino = add(parent, name, mode);
	if (!ino) {
		pthread_mutex_unlock(&lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (S_ISDIR(mode))
		nodes[parent].nlink++;
	if (!fi) {
		reply_entry(req, ino);
		return;
	}
	struct fuse_entry_param e = {.ino = ino, .attr_timeout = TIMEOUT, .entry_timeout = TIMEOUT};
	fill(ino, &e.attr);
	pthread_mutex_unlock(&lock);
	fuse_reply_create(req, &e, fi);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)rdev;
	make(req, parent, name, mode, NULL);
}

/* One CREATE request, as DBFS answers it (dbfs/fuse_names.c, op_create):
 * without it the kernel sends MKNOD and then opens locally, a different
 * request pattern from DBFS's CREATE and later RELEASE. Write-only handles
 * get direct I/O there too. */
static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	fi->keep_cache = 1;
	fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
	make(req, parent, name, S_IFREG | (mode & 07777), fi);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int dir)
{
	pthread_mutex_lock(&lock);
	uint64_t ino = find(parent, name);
	int err = 0;
	if (!ino) {
		err = ENOENT;
	} else if (dir && !S_ISDIR(nodes[ino].mode)) {
		err = ENOTDIR;
	} else if (!dir && S_ISDIR(nodes[ino].mode)) {
		err = EISDIR;
	} else if (dir) {
		for (uint64_t i = 2; i < nnodes && !err; i++)
			if (nodes[i].name && nodes[i].parent == ino)
				err = ENOTEMPTY; /* rare: a linear scan is enough */
	}
	if (!err) {
		unhash(ino);
		nodes[ino].nlink = 0;
		if (dir)
			nodes[parent].nlink--;
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, err);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 1);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS); /* the kernel opens locally (NO_OPEN_SUPPORT) */
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	pthread_mutex_lock(&lock);
	uint64_t fsize = nodes[ino].size;
	pthread_mutex_unlock(&lock);
	size_t n = (uint64_t)off >= fsize	  ? 0
		   : fsize - (uint64_t)off < size ? fsize - (uint64_t)off
						  : size;
	fuse_reply_buf(req, zeros, n > MAX_IO ? MAX_IO : n);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)buf;
	(void)fi;
	pthread_mutex_lock(&lock);
	if ((uint64_t)off + size > nodes[ino].size)
		nodes[ino].size = (uint64_t)off + size;
	pthread_mutex_unlock(&lock);
	fuse_reply_write(req, size);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Plain readdir, for rm -rf of what the benchmark made: every live child
 * of ino, offsets are inode numbers (stable while it runs). */
/* A listing of `ino` from `off`, with attributes (READDIRPLUS, which
 * op_init asks for, as DBFS does) when `plus`. */
static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	char *buf = malloc(size);
	size_t used = 0;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&lock);
	for (uint64_t i = (uint64_t)off + 2; i < nnodes; i++) {
		if (!nodes[i].name || nodes[i].parent != ino)
			continue;
		struct fuse_entry_param e = {
		    .ino = i, .attr_timeout = TIMEOUT, .entry_timeout = TIMEOUT};
		fill(i, &e.attr);
		size_t l = plus ? fuse_add_direntry_plus(req, buf + used, size - used,
							 nodes[i].name, &e, (off_t)i - 1)
				: fuse_add_direntry(req, buf + used, size - used, nodes[i].name,
						    &e.attr, (off_t)i - 1);
		if (used + l > size)
			break;
		used += l;
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, 1);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv = {.f_bsize = 4096,
			     .f_frsize = 4096,
			     .f_blocks = 1u << 24,
			     .f_bfree = 1u << 24,
			     .f_bavail = 1u << 24,
			     .f_files = 1u << 24,
			     .f_ffree = 1u << 24,
			     .f_namemax = 255};
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .create = op_create,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .open = op_open,
    .opendir = op_open,
    .read = op_read,
    .write = op_write,
    .fsync = op_fsync,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .statfs = op_statfs,
};

int main(int argc, char **argv)
{
	int single = 0, threads = 8, c;
	while ((c = getopt(argc, argv, "st:")) != -1) {
		if (c == 's')
			single = 1;
		else if (c == 't')
			threads = atoi(optarg);
		else
			goto usage;
	}
	if (optind != argc - 1 || threads < 1)
		goto usage;
	buckets = calloc(nbuckets, sizeof(*buckets));
	if (!buckets)
		return 1;
	pthread_mutex_lock(&lock);
	add(0, "", 0);		     /* inode 0: unused */
	add(0, "/", S_IFDIR | 0755); /* inode 1: the root */
	pthread_mutex_unlock(&lock);

	char *fargv[] = {argv[0], "-o", "default_permissions,fsname=nullfs,subtype=nullfs", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	int rc = 1;
	if (fuse_set_signal_handlers(se) != 0)
		goto out;
	if (fuse_session_mount(se, argv[optind]) != 0)
		goto out_sig;
	if (single) {
		rc = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();
		if (!cfg)
			goto out_mount;
		fuse_loop_cfg_set_clone_fd(cfg, 1);
		fuse_loop_cfg_set_idle_threads(cfg, (unsigned)threads);
		fuse_loop_cfg_set_max_threads(cfg, (unsigned)threads);
		rc = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
out_mount:
	fuse_session_unmount(se);
out_sig:
	fuse_remove_signal_handlers(se);
out:
	fuse_session_destroy(se);
	return rc ? 1 : 0;
usage:
	fprintf(stderr, "usage: nullfs [-s] [-t THREADS] MOUNTPOINT\n");
	return 2;
}
