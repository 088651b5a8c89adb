/* The control verb table and its parsers (see verbs.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "kv.h"
#include "verbs.h"

#define ATTR_PREFIX "user.mfs."

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

static int parse_list(const char *value, size_t len, struct mfs_kvlist *l, char *err,
		      size_t errlen)
{
	if (len > MFS_VALUE_MAX) {
		snprintf(err, errlen, "value longer than %d bytes", MFS_VALUE_MAX);
		return -E2BIG;
	}
	return mfs_kv_parse(value, len, MFS_KV_UNIQUE, l, err, errlen);
}

/* mount: name=N,store=DIR,mountpoint=DIR[,create][,opts...] */
static int parse_mount(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
		       size_t errlen)
{
	struct mfs_kvlist l;
	int rc = parse_list(value, len, &l, err, errlen);
	size_t pos = 0;

	if (rc)
		return rc;
	for (size_t i = 0; i < l.n && !rc; i++) {
		const char *k = l.items[i].key, *v = l.items[i].value;
		if (!strcmp(k, "name")) {
			rc = take_name(v, cmd, err, errlen);
		} else if (!strcmp(k, "store")) {
			rc = copy_path(k, v, cmd->store, sizeof(cmd->store), err, errlen);
		} else if (!strcmp(k, "mountpoint")) {
			rc = copy_path(k, v, cmd->mountpoint, sizeof(cmd->mountpoint), err, errlen);
		} else if (!strcmp(k, "create")) {
			rc = bare_flag(k, v, &cmd->create, err, errlen);
		} else {
			rc = mfs_conf_check(k, v, err, errlen);
			if (rc == -ENOENT)
				rc = -EINVAL;
			if (!rc && mfs_conf_set(cmd->opts, sizeof(cmd->opts), k, v)) {
				snprintf(err, errlen, "options too long");
				rc = -EINVAL;
			}
			pos++;
		}
	}
	if (!rc && !cmd->name[0]) {
		snprintf(err, errlen, "missing key 'name'");
		rc = -EINVAL;
	}
	mfs_kv_free(&l);
	return rc;
}

/* unmount: N[,force] */
static int parse_unmount(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			 size_t errlen)
{
	struct mfs_kvlist l;
	int rc = parse_list(value, len, &l, err, errlen);

	if (rc)
		return rc;
	for (size_t i = 0; i < l.n && !rc; i++) {
		const char *k = l.items[i].key, *v = l.items[i].value;
		if (i == 0 && !v)
			rc = take_name(k, cmd, err, errlen);
		else if (!strcmp(k, "name"))
			rc = cmd->name[0] ? (snprintf(err, errlen, "name given twice"), -EINVAL)
					  : take_name(v, cmd, err, errlen);
		else if (!strcmp(k, "force"))
			rc = bare_flag(k, v, &cmd->force, err, errlen);
		else
			rc = (snprintf(err, errlen, "unknown key '%.64s'", k), -EINVAL);
	}
	if (!rc && !cmd->name[0])
		rc = (snprintf(err, errlen, "missing the DBFS name"), -EINVAL);
	mfs_kv_free(&l);
	return rc;
}

/* config: name=N,key=value,... */
static int parse_config(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			size_t errlen)
{
	struct mfs_kvlist l;
	int rc = parse_list(value, len, &l, err, errlen);

	if (rc)
		return rc;
	for (size_t i = 0; i < l.n && !rc; i++) {
		const char *k = l.items[i].key, *v = l.items[i].value;
		if (!strcmp(k, "name")) {
			rc = take_name(v, cmd, err, errlen);
		} else if (!strcmp(k, "create") || !strcmp(k, "ro")) {
			rc = (snprintf(err, errlen, "'%s' can only be given at mount", k), -EINVAL);
		} else {
			rc = mfs_conf_check(k, v, err, errlen);
			if (rc == -ENOENT)
				rc = -EINVAL;
			if (!rc && mfs_conf_set(cmd->opts, sizeof(cmd->opts), k, v))
				rc = (snprintf(err, errlen, "options too long"), -EINVAL);
		}
	}
	if (!rc && !cmd->name[0])
		rc = (snprintf(err, errlen, "missing key 'name'"), -EINVAL);
	if (!rc && !cmd->opts[0])
		rc = (snprintf(err, errlen, "nothing to change"), -EINVAL);
	mfs_kv_free(&l);
	return rc;
}

/* forget: N */
static int parse_forget(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			size_t errlen)
{
	struct mfs_kvlist l;
	int rc = parse_list(value, len, &l, err, errlen);

	if (rc)
		return rc;
	if (l.n != 1 || l.items[0].value)
		rc = (snprintf(err, errlen, "forget takes exactly one DBFS name"), -EINVAL);
	else
		rc = take_name(l.items[0].key, cmd, err, errlen);
	mfs_kv_free(&l);
	return rc;
}

const struct mfs_verb mfs_verbs[] = {
	{
		.name = "mount",
		.kind = MFS_CMD_MOUNT,
		.parse = parse_mount,
		.usage = "setfattr -n user.mfs.mount -v "
			 "name=N,store=DIR,mountpoint=DIR[,create][,ro][,option=value...]\n",
	},
	{
		.name = "unmount",
		.kind = MFS_CMD_UNMOUNT,
		.parse = parse_unmount,
		.usage = "setfattr -n user.mfs.unmount -v NAME[,force]\n",
	},
	{
		.name = "config",
		.kind = MFS_CMD_CONFIG,
		.parse = parse_config,
		.usage = "setfattr -n user.mfs.config -v name=N,key=value[,key=value...]\n",
	},
	{
		.name = "forget",
		.kind = MFS_CMD_FORGET,
		.parse = parse_forget,
		.usage = "setfattr -n user.mfs.forget -v NAME\n",
	},
};
const size_t mfs_nverbs = sizeof(mfs_verbs) / sizeof(mfs_verbs[0]);

const struct mfs_verb *mfs_verb_find(const char *attr)
{
	if (strncmp(attr, ATTR_PREFIX, strlen(ATTR_PREFIX)))
		return NULL;
	attr += strlen(ATTR_PREFIX);
	for (size_t i = 0; i < mfs_nverbs; i++)
		if (!strcmp(mfs_verbs[i].name, attr))
			return &mfs_verbs[i];
	return NULL;
}
