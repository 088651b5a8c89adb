/* The manager mount's FUSE operations (see manager_fs.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/limits.h>
#include <fuse_lowlevel.h>

#include "answer.h"
#include "feed_fs.h"
#include "buf.h"
#include "inbox.h"
#include "log.h"
#include "loop.h"
#include "manager_fs.h"
#include "metrics.h"
#include "readable.h"
#include "verbs.h"

#define ROOT_INO 1
/* Each DBFS folder owns 8 inodes: itself, its status, stats and config
 * files at 1..3, events, events.json, subscriptions/ at 4..6 and usage at
 * 7 (file_slot). */
#define DIR_STRIDE 8
#define DIR_INO(id) (16 + DIR_STRIDE * (fuse_ino_t)(id))
#define FEED_SLOT 4 /* events, events.json, subscriptions at 4, 5, 6 */
#define USAGE_SLOT 7

/* The slot of readable file f in its folder. */
static fuse_ino_t file_slot(int f)
{
	return f == MFS_FILE_USAGE ? USAGE_SLOT : 1 + (fuse_ino_t)f;
}

/* The feed's names in a DBFS folder, by slot - FEED_SLOT. */
static const char *const feed_names[] = {"events", "events.json", "subscriptions"};
#define NFEED_NAMES 3

/* Is ino a feed file (its handle is feed_fs.c's)? */
static bool feed_ino(fuse_ino_t ino)
{
	unsigned k = (unsigned)((ino - 16) % DIR_STRIDE);
	return ino >= MFS_FEED_DYN_INO ||
	       (ino >= 16 && k >= FEED_SLOT && k < FEED_SLOT + NFEED_NAMES);
}

static struct mfs_manager *mgr_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Files of the root, with the attribute whose text they hold: `cat` has no
 * 64 KiB limit, user.mfs.list has (the kernel's xattr size limit). Their
 * names start with '.', which no DBFS name may; "metrics" (Prometheus,
 * metrics.h, too large for an attribute) is a name no DBFS may take
 * (mfs_name_valid). */
static const struct {
	const char *name;
	const char *attr; /* NULL: metrics */
} root_files[] = {
	{".list", "user.mfs.list"},
	{".status", "user.mfs.status"},
	{"metrics", NULL},
};
#define NROOT_FILES (sizeof(root_files) / sizeof(root_files[0]))
#define ROOT_FILE_INO(i) (2 + (fuse_ino_t)(i))

/* What an inode is: the root, a DBFS folder, one of its files, a root file,
 * a feed node (feed_fs.h: events, events.json, subscriptions/, and the
 * dynamic inodes of events@... and subscription files). */
struct node {
	int kind; /* 0 root, 1 folder, 2 file, 3 root file, 4 feed file, 5 subscriptions
		     dir, 6 dynamic feed file */
	uint32_t id;
	enum mfs_file file;
	unsigned root_file;
	enum mfs_feed_kind feed;
};

static int decode(fuse_ino_t ino, struct node *n)
{
	if (ino == ROOT_INO) {
		n->kind = 0;
		return 0;
	}
	if (ino >= ROOT_FILE_INO(0) && ino < ROOT_FILE_INO(NROOT_FILES)) {
		n->kind = 3;
		n->root_file = (unsigned)(ino - ROOT_FILE_INO(0));
		return 0;
	}
	if (ino < 16)
		return -ENOENT;
	if (ino >= MFS_FEED_DYN_INO) {
		n->kind = 6;
		return 0;
	}
	n->id = (uint32_t)((ino - 16) / DIR_STRIDE);
	unsigned k = (unsigned)((ino - 16) % DIR_STRIDE);
	if (k == USAGE_SLOT) {
		n->kind = 2;
		n->file = MFS_FILE_USAGE;
		return 0;
	}
	if (k >= FEED_SLOT + NFEED_NAMES)
		return -ENOENT;
	if (k >= FEED_SLOT) {
		n->feed = (enum mfs_feed_kind)(k - FEED_SLOT); /* EVENTS, EVENTS_JSON, SUBS_DIR */
		n->kind = n->feed == MFS_FEED_SUBS_DIR ? 5 : 4;
		return 0;
	}
	n->kind = k ? 2 : 1;
	n->file = k ? (enum mfs_file)(k - 1) : MFS_FILE_STATUS;
	return 0;
}

/* Fill st for ino; -ENOENT when it no longer exists. */
static int stat_node(struct mfs_manager *mgr, fuse_ino_t ino, struct stat *st)
{
	struct node n;

	memset(st, 0, sizeof(*st));
	if (decode(ino, &n))
		return -ENOENT;
	if (n.kind == 6)
		return mfs_feed_stat_dyn(mgr, ino, st);
	st->st_ino = ino;
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)mgr->started_at;
	if (n.kind == 0 || n.kind == 3) {
		st->st_mode = n.kind == 0 ? S_IFDIR | 0755 : S_IFREG | 0444;
		st->st_nlink = n.kind == 0 ? 2 : 1;
		st->st_uid = mgr->uid;
		st->st_gid = getegid();
		return 0;
	}
	int rc = 0;
	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, n.id);
	if (!d) {
		rc = -ENOENT;
	} else {
		st->st_uid = d->conf.owner;
		st->st_gid = getegid();
		if (n.kind == 1) {
			st->st_mode = S_IFDIR | 0555;
			st->st_nlink = 2;
		} else if (n.kind == 5) {
			st->st_mode = S_IFDIR | 0500;
			st->st_nlink = 2;
		} else if (n.kind == 4) {
			st->st_mode = S_IFREG | 0400;
			st->st_nlink = 1;
		} else {
			st->st_mode = S_IFREG | 0444;
			st->st_nlink = 1;
		}
	}
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	int rc = stat_node(mgr_of(req), ino, &e.attr);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = ino;
	fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mfs_manager *mgr = mgr_of(req);
	struct node n = {0};
	fuse_ino_t ino = 0;

	if (decode(parent, &n) || (n.kind >= 2 && n.kind != 5)) {
		fuse_reply_err(req, n.kind >= 2 ? ENOTDIR : ENOENT);
		return;
	}
	if (n.kind == 5) {
		mfs_feed_lookup(req, n.id, true, name);
		return;
	}
	if (n.kind == 1 && mfs_feed_lookup(req, n.id, false, name))
		return;
	for (unsigned i = 0; n.kind == 0 && i < NROOT_FILES; i++)
		if (!strcmp(name, root_files[i].name))
			ino = ROOT_FILE_INO(i);
	if (n.kind == 0 && !ino) {
		pthread_mutex_lock(&mgr->lock);
		struct mfs_dbfs *d = mfs_find(mgr, name);
		if (d)
			ino = DIR_INO(d->id);
		pthread_mutex_unlock(&mgr->lock);
	} else {
		for (int f = 0; f < MFS_NFILES; f++)
			if (!strcmp(name, mfs_readable_files[f].name))
				ino = parent + file_slot(f);
		for (int f = 0; f < NFEED_NAMES; f++)
			if (!strcmp(name, feed_names[f]))
				ino = parent + FEED_SLOT + (fuse_ino_t)f;
	}
	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	reply_entry(req, ino);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = stat_node(mgr_of(req), ino, &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct stat st;

	/* `echo SEQ > subscriptions/SUB` opens with O_TRUNC: a size of 0 on a
	 * feed file changes nothing */
	if (ino >= MFS_FEED_DYN_INO && !(to_set & ~(FUSE_SET_ATTR_SIZE)) && attr->st_size == 0 &&
	    !stat_node(mgr_of(req), ino, &st)) {
		fuse_reply_attr(req, &st, 0);
		return;
	}
	fuse_reply_err(req, EROFS);
}

/* A directory listing snapshot, taken at opendir. */
struct listing {
	struct mfs_buf buf; /* entries added with fuse_add_direntry */
};

static void add_entry(fuse_req_t req, struct mfs_buf *b, const char *name, fuse_ino_t ino,
		      mode_t mode)
{
	struct stat st = {.st_ino = ino, .st_mode = mode};
	size_t need = fuse_add_direntry(req, NULL, 0, name, NULL, 0);

	if (!mfs_buf_reserve(b, need))
		return;
	b->len += fuse_add_direntry(req, b->p + b->len, need, name, &st, (off_t)(b->len + need));
}

/*
 * Reply with a copy of part of a handle's buffer. The kernel completes the
 * request inside our writev and may then send the release that frees the
 * handle to another worker, while this one is still returning from writev
 * (AddressSanitizer checks the iovecs after the call and would see freed
 * memory). A private copy keeps the reply independent of the handle.
 */
static void reply_copy(fuse_req_t req, const char *p, size_t n)
{
	char *copy = n ? malloc(n) : NULL;
	if (n && !copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n)
		memcpy(copy, p, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

/* Entries of subscriptions/: their inode numbers are only hints (the
 * kernel looks a name up before use). */
struct sub_ctx {
	fuse_req_t req;
	struct mfs_buf *buf;
	fuse_ino_t dir;
};

static void add_sub(void *arg, const char *name)
{
	struct sub_ctx *c = arg;
	add_entry(c->req, c->buf, name, c->dir, S_IFREG);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mfs_manager *mgr = mgr_of(req);
	struct listing *l = calloc(1, sizeof(*l));
	struct node n;

	if (!l || decode(ino, &n) || (n.kind >= 2 && n.kind != 5)) {
		free(l);
		fuse_reply_err(req, l ? ENOTDIR : ENOMEM);
		return;
	}
	add_entry(req, &l->buf, ".", ino, S_IFDIR);
	add_entry(req, &l->buf, "..", ROOT_INO, S_IFDIR);
	if (n.kind == 0) {
		for (unsigned i = 0; i < NROOT_FILES; i++)
			add_entry(req, &l->buf, root_files[i].name, ROOT_FILE_INO(i), S_IFREG);
		pthread_mutex_lock(&mgr->lock);
		for (struct mfs_dbfs *d = mgr->list; d; d = d->next)
			add_entry(req, &l->buf, d->conf.name, DIR_INO(d->id), S_IFDIR);
		pthread_mutex_unlock(&mgr->lock);
	} else if (n.kind == 5) {
		struct sub_ctx c = {req, &l->buf, ino};
		struct mfs_caller who;
		bool may;
		mfs_caller_from_req(req, &who);
		pthread_mutex_lock(&mgr->lock);
		struct mfs_dbfs *d = mfs_find_id(mgr, n.id);
		may = d && mfs_feed_may(mgr, d, &who);
		pthread_mutex_unlock(&mgr->lock);
		int rc = may ? mfs_feed_list_subs(mgr, n.id, add_sub, &c) : d ? -EACCES : -ENOENT;
		if (rc) {
			mfs_buf_free(&l->buf);
			free(l);
			fuse_reply_err(req, -rc);
			return;
		}
	} else {
		for (int f = 0; f < MFS_NFILES; f++)
			add_entry(req, &l->buf, mfs_readable_files[f].name, ino + file_slot(f),
				  S_IFREG);
		for (int f = 0; f < NFEED_NAMES; f++)
			add_entry(req, &l->buf, feed_names[f], ino + FEED_SLOT + (fuse_ino_t)f,
				  f == 2 ? S_IFDIR : S_IFREG);
	}
	if (l->buf.oom) {
		mfs_buf_free(&l->buf);
		free(l);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct listing *l = (struct listing *)(uintptr_t)fi->fh;

	if ((size_t)off >= l->buf.len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* entries are whole: cut at the last one that fits */
	size_t end = (size_t)off, len = l->buf.len;
	while (end < len) {
		const struct fuse_dirent {
			uint64_t ino, off;
			uint32_t namelen, type;
		} *de = (const void *)(l->buf.p + end);
		size_t rec = (24 + de->namelen + 7) & ~(size_t)7;
		if (end + rec - (size_t)off > size)
			break;
		end += rec;
	}
	reply_copy(req, l->buf.p + off, end - (size_t)off);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct listing *l = (struct listing *)(uintptr_t)fi->fh;

	mfs_buf_free(&l->buf);
	free(l);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node n;
	struct mfs_buf *b;

	if (decode(ino, &n) || n.kind < 2 || n.kind == 5) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (n.kind == 4 || n.kind == 6) {
		mfs_feed_open(req, ino, n.id, n.feed, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc;
	if (n.kind == 3) {
		struct mfs_caller who;
		mfs_caller_from_req(req, &who);
		if (root_files[n.root_file].attr) {
			rc = mfs_readable_attr(mgr_of(req), root_files[n.root_file].attr, &who, b);
		} else {
			mfs_metrics_text(mgr_of(req), b);
			rc = 0;
		}
	} else {
		rc = mfs_readable_file(mgr_of(req), n.id, n.file, b);
	}
	if (rc || b->oom) {
		mfs_buf_free(b);
		free(b);
		fuse_reply_err(req, rc ? -rc : ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)b;
	fi->direct_io = 1;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct mfs_buf *b = (struct mfs_buf *)(uintptr_t)fi->fh;

	if (feed_ino(ino)) {
		mfs_feed_read(req, size, fi);
		return;
	}
	if (off < 0 || (size_t)off >= b->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t n = b->len - (size_t)off;
	reply_copy(req, b->p + off, n < size ? n : size);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	if (feed_ino(ino))
		mfs_feed_write(req, buf, size, fi);
	else
		fuse_reply_err(req, EBADF);
}

static void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	if (feed_ino(ino)) {
		mfs_feed_poll(req, fi, ph);
		return;
	}
	if (ph) /* a snapshot is always readable: never notified */
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, POLLIN | POLLRDNORM);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	if (ino >= MFS_FEED_DYN_INO)
		mfs_feed_forget(ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		if (forgets[i].ino >= MFS_FEED_DYN_INO)
			mfs_feed_forget(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mfs_buf *b = (struct mfs_buf *)(uintptr_t)fi->fh;

	if (feed_ino(ino)) {
		mfs_feed_release(req, fi);
		return;
	}
	mfs_buf_free(b);
	free(b);
	fuse_reply_err(req, 0);
}

/* The command that setting attribute `name` to `value` asks for, and who asks
 * it: 0, or -errno with a reason in err. */
static int command_of(fuse_req_t req, const char *name, const char *value, size_t size,
		      struct mfs_cmd *cmd, char *err, size_t errlen)
{
	const struct mfs_verb *v = mfs_verb_find(name);

	mfs_caller_from_req(req, &cmd->who);
	if (!v) {
		snprintf(err, errlen, "'%.80s' is not a command attribute", name);
		return -EINVAL;
	}
	cmd->verb = v;
	return v->parse(value, size, cmd, err, errlen);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct mfs_cmd *cmd;
	char err[512] = "";
	int rc;

	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	cmd = calloc(1, sizeof(*cmd));
	rc = cmd ? command_of(req, name, value, size, cmd, err, sizeof(err)) : -ENOMEM;
	if (rc) {
		if (cmd)
			mfs_answer_refused(&cmd->who, name, rc, err);
		free(cmd);
		fuse_reply_err(req, -rc);
		return;
	}
	cmd->req = req;
	mfs_inbox_submit(cmd); /* answers req when done */
}

/*
 * getfattr asks for the size first, then for the value: both calls of one
 * process must see the same text, so the first call's rendering is kept
 * for the second, keyed by the caller (pid and uid) and the name. Long
 * enough for a loaded machine: when the kept text had gone, the value call
 * rendered anew, and a text that had grown meanwhile (a counter's digit,
 * rss_kib, a DBFS mounted) failed the call with ERANGE; seconds pass
 * between the two calls when the manager's threads wait for a busy CPU
 * (mfsctl then found no manager answering).
 */
#define SNAP_SLOTS 16
#define SNAP_NS 30000000000ull

static struct snap {
	pid_t pid;
	uid_t uid;
	char name[96];
	uint64_t at;
	struct mfs_buf text;
} snaps[SNAP_SLOTS];
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;

static void snap_put(pid_t pid, uid_t uid, const char *name, struct mfs_buf *text)
{
	pthread_mutex_lock(&snap_lock);
	struct snap *s = &snaps[0];
	for (int i = 0; i < SNAP_SLOTS; i++)
		if (snaps[i].at < s->at)
			s = &snaps[i];
	mfs_buf_free(&s->text);
	s->pid = pid;
	s->uid = uid;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->at = mfs_now_ns();
	s->text = *text;
	memset(text, 0, sizeof(*text));
	pthread_mutex_unlock(&snap_lock);
}

static bool snap_take(pid_t pid, uid_t uid, const char *name, struct mfs_buf *text)
{
	bool found = false;
	uint64_t now = mfs_now_ns();

	pthread_mutex_lock(&snap_lock);
	for (int i = 0; i < SNAP_SLOTS && !found; i++) {
		struct snap *s = &snaps[i];
		if (s->at && s->pid == pid && s->uid == uid && now - s->at < SNAP_NS &&
		    !strcmp(s->name, name)) {
			*text = s->text;
			memset(&s->text, 0, sizeof(s->text));
			s->at = 0;
			found = true;
		}
	}
	pthread_mutex_unlock(&snap_lock);
	return found;
}

/*
 * The kernel passes no attribute value over XATTR_SIZE_MAX (64 KiB). A list
 * of many DBFSs is cut at a line there, with a last line that says how many
 * more there are and where the whole list is; anything else gets E2BIG.
 */
static int fit_value(struct mfs_manager *mgr, const char *name, struct mfs_buf *text)
{
	if (text->len <= XATTR_SIZE_MAX)
		return 0;
	if (strcmp(name, "user.mfs.list"))
		return -E2BIG;
	char tail[PATH_MAX + 96];
	size_t cut = XATTR_SIZE_MAX - sizeof(tail);
	while (cut > 0 && text->p[cut - 1] != '\n')
		cut--;
	unsigned more = 0;
	for (size_t i = cut; i < text->len; i++)
		more += text->p[i] == '\n';
	int n = snprintf(tail, sizeof(tail), "... %u more DBFSs: the whole list is in %s/.list\n",
			 more, mgr->mountpoint);
	memcpy(text->p + cut, tail, (size_t)n + 1);
	text->len = cut + (size_t)n;
	return 0;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct mfs_caller who;
	struct mfs_buf text = {0};
	int rc = 0;

	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	mfs_caller_from_req(req, &who);
	if (!snap_take(who.pid, who.uid, name, &text))
		rc = mfs_readable_attr(mgr_of(req), name, &who, &text);
	if (!rc && text.oom)
		rc = -ENOMEM;
	if (!rc)
		rc = fit_value(mgr_of(req), name, &text);
	if (rc) {
		mfs_buf_free(&text);
		fuse_reply_err(req, -rc);
		return;
	}
	if (size == 0) {
		size_t len = text.len;
		snap_put(who.pid, who.uid, name, &text);
		fuse_reply_xattr(req, len);
	} else if (text.len > size) {
		fuse_reply_err(req, ERANGE);
	} else {
		fuse_reply_buf(req, text.p, text.len);
	}
	mfs_buf_free(&text);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct mfs_buf names = {0};

	if (ino == ROOT_INO)
		mfs_readable_names(mgr_of(req), &names);
	if (names.oom)
		fuse_reply_err(req, ENOMEM);
	else if (size == 0)
		fuse_reply_xattr(req, names.len);
	else if (names.len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names.p, names.len);
	mfs_buf_free(&names);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, ino == ROOT_INO ? EPERM : ENOTSUP);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.write = op_write,
	.poll = op_poll,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
};

const struct fuse_lowlevel_ops *mfs_manager_fs_ops(void)
{
	return &ops;
}
