/*
 * The feed's nodes in the manager mount: who may read a feed, the dynamic
 * inodes (events@SPEC, subscription files), their lookups and attributes,
 * and the listing of a subscriptions directory.
 */
#include "feed_fs_private.h"

bool mfs_feed_may(struct mfs_manager *mgr, const struct mfs_dbfs *d, const struct mfs_caller *who)
{
	if (who->uid == 0 || who->uid == mgr->uid || who->uid == d->conf.owner)
		return true;
	struct mfs_kvlist l;
	char err[64];
	bool all = false;
	if (d->conf.opts[0] &&
	    !mfs_kv_parse(d->conf.opts, strlen(d->conf.opts), 0, &l, err, sizeof(err))) {
		for (size_t i = 0; i < l.n; i++)
			if (!strcmp(l.items[i].key, "feed_access") && l.items[i].value)
				all = !strcmp(l.items[i].value, "all");
		mfs_kv_free(&l);
	}
	return all;
}

/* A subscription file's name: SUB or SUB.json, SUB of [A-Za-z0-9._-]. */
int mfs_feed_sub_name(const char *name, char *sub, bool *json)
{
	size_t n = strlen(name);
	*json = n > 5 && !strcmp(name + n - 5, ".json");
	if (*json)
		n -= 5;
	if (!n || n > DBFS_FEED_SUB_MAX)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -ENOENT;
	}
	memcpy(sub, name, n);
	sub[n] = '\0';
	return 0;
}

/* The mounted DBFS id as `who` may read it: its dbfs in *fs. mgr->lock
 * held. -ENOENT, -EACCES, -ENODEV (not mounted), -EOPNOTSUPP (feed=off). */
int mfs_feed_of(struct mfs_manager *mgr, uint32_t id, const struct mfs_caller *who,
		   struct dbfs **fs)
{
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (!d)
		return -ENOENT;
	if (!mfs_feed_may(mgr, d, who))
		return -EACCES;
	if (d->state != MFS_MOUNTED || !d->fs)
		return -ENODEV;
	if (!dbfs_feed_enabled(d->fs))
		return -EOPNOTSUPP;
	*fs = d->fs;
	return 0;
}

static void stat_file(struct mfs_manager *mgr, const struct mfs_dbfs *d, bool sub,
		      struct stat *st)
{
	st->st_mode = S_IFREG | (sub ? 0600 : 0400);
	st->st_nlink = 1;
	st->st_uid = d->conf.owner;
	st->st_gid = getegid();
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)mgr->started_at;
}

int mfs_feed_stat_dyn(struct mfs_manager *mgr, fuse_ino_t ino, struct stat *st)
{
	int rc = -ENOENT;
	uint32_t id = 0;
	enum mfs_feed_kind kind = MFS_FEED_EVENTS_AT;

	pthread_mutex_lock(&mfs_feed_hub.lock);
	for (struct dyn *x = mfs_feed_hub.dyns; x; x = x->next)
		if (x->ino == ino) {
			id = x->id;
			kind = x->kind;
			rc = 0;
		}
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (d)
		stat_file(mgr, d, kind == MFS_FEED_SUB, st);
	pthread_mutex_unlock(&mgr->lock);
	return d ? 0 : -ENOENT;
}

static fuse_ino_t dyn_get(uint32_t id, enum mfs_feed_kind kind, const char *name)
{
	fuse_ino_t ino = 0;
	pthread_mutex_lock(&mfs_feed_hub.lock);
	for (struct dyn *x = mfs_feed_hub.dyns; x && !ino; x = x->next)
		if (x->id == id && x->kind == kind && !strcmp(x->name, name)) {
			x->nlookup++;
			ino = x->ino;
		}
	if (!ino) {
		struct dyn *x = calloc(1, sizeof(*x));
		if (x) {
			x->ino = ino = mfs_feed_hub.next_ino++;
			x->id = id;
			x->kind = kind;
			snprintf(x->name, sizeof(x->name), "%s", name);
			x->nlookup = 1;
			x->next = mfs_feed_hub.dyns;
			mfs_feed_hub.dyns = x;
		}
	}
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	return ino;
}

void mfs_feed_forget(fuse_ino_t ino, uint64_t n)
{
	pthread_mutex_lock(&mfs_feed_hub.lock);
	for (struct dyn **pp = &mfs_feed_hub.dyns; *pp; pp = &(*pp)->next)
		if ((*pp)->ino == ino) {
			struct dyn *x = *pp;
			x->nlookup = x->nlookup > n ? x->nlookup - n : 0;
			if (!x->nlookup) {
				*pp = x->next;
				free(x);
			}
			break;
		}
	pthread_mutex_unlock(&mfs_feed_hub.lock);
}

bool mfs_feed_dyn_find(fuse_ino_t ino, uint32_t *id, enum mfs_feed_kind *kind, char *name)
{
	bool found = false;
	pthread_mutex_lock(&mfs_feed_hub.lock);
	for (struct dyn *x = mfs_feed_hub.dyns; x && !found; x = x->next)
		if (x->ino == ino) {
			*id = x->id;
			*kind = x->kind;
			strcpy(name, x->name);
			found = true;
		}
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	return found;
}

/* Refuse a feed request with a reason for user.mfs.error. */
void mfs_feed_refuse(fuse_req_t req, const char *what, int rc, const char *reason)
{
	struct mfs_caller who;
	mfs_caller_from_req(req, &who);
	mfs_answer_refused(&who, what, rc, reason);
	fuse_reply_err(req, -rc);
}

bool mfs_feed_lookup(fuse_req_t req, uint32_t id, bool in_subs, const char *name)
{
	struct mfs_manager *mgr = mgr_of(req);
	char err[256] = "";
	fuse_ino_t ino = 0;
	enum mfs_feed_kind kind;

	if (!in_subs) {
		bool json;
		struct mfs_feed_pos pos;
		struct mfs_feed_filter f;
		if (strncmp(name, "events", 6) || !strchr(name, '@'))
			return false;
		int rc =
		    mfs_feed_name_parse(name, realtime_ns(), &json, &pos, &f, err, sizeof(err));
		if (rc == -ENOENT)
			return false;
		if (rc) {
			mfs_feed_refuse(req, name, rc, err);
			return true;
		}
		kind = MFS_FEED_EVENTS_AT;
	} else {
		char sub[DBFS_FEED_SUB_MAX + 1];
		bool json;
		if (mfs_feed_sub_name(name, sub, &json)) {
			fuse_reply_err(req, ENOENT);
			return true;
		}
		/* only a subscription that exists */
		struct mfs_caller who;
		struct dbfs *fs = NULL;
		struct dbfs_feed_sub_info info;
		mfs_caller_from_req(req, &who);
		pthread_mutex_lock(&mfs_feed_hub.lock); /* keeps fs (mfs_feed_detach) */
		pthread_mutex_lock(&mgr->lock);
		int rc = mfs_feed_of(mgr, id, &who, &fs);
		pthread_mutex_unlock(&mgr->lock);
		if (!rc)
			rc = dbfs_feed_sub_get(fs, sub, &info);
		pthread_mutex_unlock(&mfs_feed_hub.lock);
		if (rc) {
			fuse_reply_err(req, -rc);
			return true;
		}
		kind = MFS_FEED_SUB;
	}
	ino = dyn_get(id, kind, name);
	if (!ino) {
		fuse_reply_err(req, ENOMEM);
		return true;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	if (mfs_feed_stat_dyn(mgr, ino, &e.attr)) {
		mfs_feed_forget(ino, 1);
		fuse_reply_err(req, ENOENT);
		return true;
	}
	e.ino = ino;
	fuse_reply_entry(req, &e);
	return true;
}

struct list_ctx {
	void (*add)(void *arg, const char *name);
	void *arg;
};

static int list_one(void *a, const struct dbfs_feed_sub_info *info)
{
	struct list_ctx *c = a;
	char json[DBFS_FEED_SUB_MAX + 8];
	c->add(c->arg, info->name);
	snprintf(json, sizeof(json), "%s.json", info->name);
	c->add(c->arg, json);
	return 0;
}

int mfs_feed_list_subs(struct mfs_manager *mgr, uint32_t id,
		       void (*add)(void *arg, const char *name), void *arg)
{
	struct dbfs *fs;
	struct mfs_caller root = {0};
	struct list_ctx c = {add, arg};

	pthread_mutex_lock(&mfs_feed_hub.lock);
	pthread_mutex_lock(&mgr->lock);
	int rc = mfs_feed_of(mgr, id, &root, &fs);
	pthread_mutex_unlock(&mgr->lock);
	if (!rc)
		rc = dbfs_feed_sub_list(fs, list_one, &c);
	pthread_mutex_unlock(&mfs_feed_hub.lock);
	return rc == -EOPNOTSUPP || rc == -ENODEV ? 0 : rc;
}
