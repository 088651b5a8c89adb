/* Parsers of the control verbs' values (see parse.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "kv.h"
#include "parse.h"

static int copy_path(const char *key, const char *v, char *out, size_t cap, char *err,
		     size_t errlen)
{
	if (!v || !*v) {
		snprintf(err, errlen, "%s needs a value", key);
		return -EINVAL;
	}
	if (v[0] != '/') {
		snprintf(err, errlen, "%s must be an absolute path: '%.80s'", key, v);
		return -EINVAL;
	}
	if (strlen(v) >= cap) {
		snprintf(err, errlen, "%s is too long", key);
		return -ENAMETOOLONG;
	}
	strcpy(out, v);
	return 0;
}

static int take_name(const char *v, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	if (!v) {
		snprintf(err, errlen, "name needs a value");
		return -EINVAL;
	}
	if (!mfs_name_valid(v, strlen(v), err, errlen))
		return -EINVAL;
	strcpy(cmd->name, v);
	return 0;
}

static int bare_flag(const char *key, const char *v, bool *out, char *err, size_t errlen)
{
	if (!v || !strcmp(v, "1") || !strcmp(v, "yes")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "0") || !strcmp(v, "no")) {
		*out = false;
		return 0;
	}
	snprintf(err, errlen, "bad value '%.40s' for %s", v, key);
	return -EINVAL;
}

static int parse_list(const char *value, size_t len, struct mfs_kvlist *l, char *err, size_t errlen)
{
	if (len > MFS_VALUE_MAX) {
		snprintf(err, errlen, "value longer than %d bytes", MFS_VALUE_MAX);
		return -E2BIG;
	}
	return mfs_kv_parse(value, len, MFS_KV_UNIQUE, l, err, errlen);
}

/* One key of a value: the i-th `k` with its value `v` (NULL when bare). */
typedef int key_fn(size_t i, const char *k, const char *v, struct mfs_cmd *cmd, char *err,
		   size_t errlen);

/* Split the value into keys and hand each to `one`, stopping at the first
 * refusal. */
static int each_key(const char *value, size_t len, struct mfs_cmd *cmd, key_fn *one, char *err,
		    size_t errlen)
{
	struct mfs_kvlist l;
	int rc = parse_list(value, len, &l, err, errlen);

	if (rc)
		return rc;
	for (size_t i = 0; i < l.n && !rc; i++)
		rc = one(i, l.items[i].key, l.items[i].value, cmd, err, errlen);
	mfs_kv_free(&l);
	return rc;
}

/* A DBFS option (conf.h) into cmd->opts. */
static int take_option(const char *k, const char *v, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	int rc = mfs_conf_check(k, v, err, errlen);

	if (rc == -ENOENT)
		rc = -EINVAL;
	if (!rc && (rc = mfs_conf_set(cmd->opts, sizeof(cmd->opts), k, v))) {
		snprintf(err, errlen, "%s", rc == -ENOMEM ? "out of memory" : "options too long");
		rc = rc == -ENOMEM ? -ENOMEM : -EINVAL;
	}
	return rc;
}

static int mount_key(size_t i, const char *k, const char *v, struct mfs_cmd *cmd, char *err,
		     size_t errlen)
{
	(void)i;
	if (!strcmp(k, "name"))
		return take_name(v, cmd, err, errlen);
	if (!strcmp(k, "store"))
		return copy_path(k, v, cmd->store, sizeof(cmd->store), err, errlen);
	if (!strcmp(k, "mountpoint"))
		return copy_path(k, v, cmd->mountpoint, sizeof(cmd->mountpoint), err, errlen);
	if (!strcmp(k, "create"))
		return bare_flag(k, v, &cmd->create, err, errlen);
	return take_option(k, v, cmd, err, errlen);
}

int mfs_parse_mount(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	int rc = each_key(value, len, cmd, mount_key, err, errlen);

	if (!rc && !cmd->name[0]) {
		snprintf(err, errlen, "missing key 'name'");
		rc = -EINVAL;
	}
	return rc;
}

/* The first key may be the bare DBFS name. */
static int unmount_key(size_t i, const char *k, const char *v, struct mfs_cmd *cmd, char *err,
		       size_t errlen)
{
	if (i == 0 && !v)
		return take_name(k, cmd, err, errlen);
	if (!strcmp(k, "name"))
		return cmd->name[0] ? (snprintf(err, errlen, "name given twice"), -EINVAL)
				    : take_name(v, cmd, err, errlen);
	if (!strcmp(k, "force"))
		return bare_flag(k, v, &cmd->force, err, errlen);
	return (snprintf(err, errlen, "unknown key '%.64s'", k), -EINVAL);
}

int mfs_parse_unmount(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	int rc = each_key(value, len, cmd, unmount_key, err, errlen);

	if (!rc && !cmd->name[0])
		rc = (snprintf(err, errlen, "missing the DBFS name"), -EINVAL);
	return rc;
}

static int config_key(size_t i, const char *k, const char *v, struct mfs_cmd *cmd, char *err,
		      size_t errlen)
{
	(void)i;
	if (!strcmp(k, "create") || !strcmp(k, "ro"))
		return (snprintf(err, errlen, "'%s' can only be given at mount", k), -EINVAL);
	return strcmp(k, "name") ? take_option(k, v, cmd, err, errlen)
				 : take_name(v, cmd, err, errlen);
}

int mfs_parse_config(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	int rc = each_key(value, len, cmd, config_key, err, errlen);

	if (!rc && !cmd->name[0])
		rc = (snprintf(err, errlen, "missing key 'name'"), -EINVAL);
	if (!rc && !cmd->opts[0])
		rc = (snprintf(err, errlen, "nothing to change"), -EINVAL);
	return rc;
}

/* Exactly one bare name: checked on the whole list, before the name. */
static int one_name(const char *verb, const char *value, size_t len, struct mfs_cmd *cmd, char *err,
		    size_t errlen)
{
	struct mfs_kvlist l;
	int rc = parse_list(value, len, &l, err, errlen);

	if (rc)
		return rc;
	if (l.n != 1 || l.items[0].value)
		rc = (snprintf(err, errlen, "%s takes exactly one DBFS name", verb), -EINVAL);
	else
		rc = take_name(l.items[0].key, cmd, err, errlen);
	mfs_kv_free(&l);
	return rc;
}

int mfs_parse_forget(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	return one_name("forget", value, len, cmd, err, errlen);
}

int mfs_parse_sync(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen)
{
	return one_name("sync", value, len, cmd, err, errlen);
}
