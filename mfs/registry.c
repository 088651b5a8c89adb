/*
 * Registry on LMDB (see registry.h).
 *
 * One named database "dbfs":
 *
 *   key   +----------------------+
 *         | name (1..64 bytes)   |   no NUL; memcmp order = name order
 *         +----------------------+
 *   value +-------------------------------------------------------------+
 *         | "v1\n" then lines "key=value\n": id, owner, want (0|1),     |
 *         | store, mountpoint, opts. Values hold no newline (control     |
 *         | characters are refused at validation).                       |
 *         +-------------------------------------------------------------+
 *
 * Text keeps the record readable with mdb_dump and lets fields be added
 * without a format migration (unknown lines are ignored).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <lmdb.h>

#include "log.h"
#include "lmdb_env.h"
#include "registry.h"

struct mfs_registry {
	MDB_env *env;
	MDB_dbi dbi;
	int lockfd;
	char path[PATH_MAX + 32]; /* registry.mdb */
};

static int lmdb_errno(int rc)
{
	return mfs_lmdb_errno(rc);
}

/* Open r->path as r->env and its database; an LMDB code. */
static int open_env(struct mfs_registry *r)
{
	return mfs_lmdb_env_open(r->path, MDB_NOSUBDIR | MDB_NOTLS, 4, 64u << 20, "dbfs", &r->env,
				 &r->dbi);
}

/*
 * A transaction on the registry. After a failed write of a meta page LMDB
 * refuses every later transaction of the environment (MDB_PANIC) until it
 * is opened again: the write that failed was answered already, so open it
 * again here, once, rather than refuse every later command of this mfs.
 * What is on disk is the last commit that succeeded.
 */
static int begin(struct mfs_registry *r, unsigned flags, MDB_txn **txn)
{
	int rc = r->env ? mdb_txn_begin(r->env, NULL, flags, txn) : MDB_PANIC;
	if (rc != MDB_PANIC)
		return rc;
	if (r->env)
		mdb_env_close(r->env);
	r->env = NULL;
	rc = open_env(r);
	if (rc) {
		mfs_warn("registry %s: cannot open it again: %s", r->path, mdb_strerror(rc));
		return rc;
	}
	mfs_warn("registry %s: opened again after a failed write", r->path);
	return mdb_txn_begin(r->env, NULL, flags, txn);
}

int mfs_registry_open(const char *dir, struct mfs_registry **out, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	struct mfs_registry *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->lockfd = -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot create state directory %s: %s", dir, strerror(errno));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/lock", dir);
	r->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (r->lockfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	if (flock(r->lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(err, errlen, "state directory %s is in use by another mfs", dir);
		goto fail;
	}
	snprintf(r->path, sizeof(r->path), "%s/registry.mdb", dir);
	rc = open_env(r);
	if (rc) {
		snprintf(err, errlen, "registry %s: %s", r->path, mdb_strerror(rc));
		rc = lmdb_errno(rc);
		goto fail;
	}
	*out = r;
	return 0;
fail:
	if (r->lockfd >= 0)
		close(r->lockfd);
	free(r);
	return rc;
}

void mfs_registry_close(struct mfs_registry *r)
{
	if (!r)
		return;
	if (r->env)
		mdb_env_close(r->env);
	close(r->lockfd);
	free(r);
}

int mfs_registry_encode(const struct mfs_conf *c, uint32_t id, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "v1\nid=%u\nowner=%u\nwant=%d\nstore=%s\nmountpoint=%s\nopts=%s\n",
			 id, (unsigned)c->owner, c->want_mounted ? 1 : 0, c->store, c->mountpoint,
			 c->opts);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int mfs_registry_decode(const char *buf, size_t len, struct mfs_conf *c, uint32_t *id)
{
	char line[PATH_MAX + 64];
	size_t i = 0;
	unsigned seen = 0;

	memset(c, 0, sizeof(*c));
	if (len < 3 || memcmp(buf, "v1\n", 3))
		return -EINVAL;
	i = 3;
	while (i < len) {
		const char *nl = memchr(buf + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (buf + i)) : len - i;
		if (n >= sizeof(line))
			return -EINVAL;
		memcpy(line, buf + i, n);
		line[n] = '\0';
		i += n + 1;
		char *eq = strchr(line, '=');
		if (!eq)
			return -EINVAL;
		*eq++ = '\0';
		if (!strcmp(line, "id")) {
			*id = (uint32_t)strtoul(eq, NULL, 10);
			seen |= 1;
		} else if (!strcmp(line, "owner")) {
			c->owner = (uid_t)strtoul(eq, NULL, 10);
			seen |= 2;
		} else if (!strcmp(line, "want")) {
			c->want_mounted = eq[0] == '1';
		} else if (!strcmp(line, "store")) {
			snprintf(c->store, sizeof(c->store), "%s", eq);
			seen |= 4;
		} else if (!strcmp(line, "mountpoint")) {
			snprintf(c->mountpoint, sizeof(c->mountpoint), "%s", eq);
			seen |= 8;
		} else if (!strcmp(line, "opts")) {
			snprintf(c->opts, sizeof(c->opts), "%s", eq);
		}
	}
	return seen == 15 ? 0 : -EINVAL;
}

int mfs_registry_put(struct mfs_registry *r, const struct mfs_conf *c, uint32_t id)
{
	char buf[2 * PATH_MAX + MFS_OPTS_MAX + 128];
	int n = mfs_registry_encode(c, id, buf, sizeof(buf));
	MDB_txn *txn;

	if (n < 0)
		return n;
	int rc = begin(r, 0, &txn);
	if (rc)
		return lmdb_errno(rc);
	MDB_val k = {strlen(c->name), (void *)c->name}, v = {(size_t)n, buf};
	rc = mdb_put(txn, r->dbi, &k, &v, 0);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_errno(rc);
	}
	return lmdb_errno(mdb_txn_commit(txn));
}

int mfs_registry_record(struct mfs_registry *r, const struct mfs_conf *c, uint32_t id, char *err,
			size_t errlen)
{
	int rc = r ? mfs_registry_put(r, c, id) : 0;

	if (rc) {
		snprintf(err, errlen, "cannot record %.64s in the registry %.200s (%s): not done",
			 c->name, r->path, strerror(-rc));
		mfs_err("%s: cannot update the registry: %s", c->name, strerror(-rc));
	}
	return rc;
}

int mfs_registry_del(struct mfs_registry *r, const char *name)
{
	MDB_txn *txn;
	int rc = begin(r, 0, &txn);

	if (rc)
		return lmdb_errno(rc);
	MDB_val k = {strlen(name), (void *)name};
	rc = mdb_del(txn, r->dbi, &k, NULL);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_errno(rc);
	}
	return lmdb_errno(mdb_txn_commit(txn));
}

int mfs_registry_load(struct mfs_registry *r,
		      int (*cb)(void *arg, const struct mfs_conf *c, uint32_t id), void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = begin(r, MDB_RDONLY, &txn);

	if (rc)
		return lmdb_errno(rc);
	rc = mdb_cursor_open(txn, r->dbi, &cur);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_errno(rc);
	}
	struct mfs_conf *c = malloc(sizeof(*c));
	int ret = c ? 0 : -ENOMEM;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && !ret;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		uint32_t id = 0;
		if (k.mv_size > MFS_NAME_MAX || mfs_registry_decode(v.mv_data, v.mv_size, c, &id)) {
			mfs_warn("registry: skipping a malformed record");
			continue;
		}
		memcpy(c->name, k.mv_data, k.mv_size);
		c->name[k.mv_size] = '\0';
		ret = cb(arg, c, id);
	}
	/* a failed step is not the end of the registry: never forget the rest */
	if (!ret && rc != MDB_NOTFOUND)
		ret = lmdb_errno(rc);
	free(c);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return ret;
}
