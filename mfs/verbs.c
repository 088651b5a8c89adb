/* The control verb table (see verbs.h): one row per verb. */
#include <string.h>

#include "execute.h"
#include "parse.h"
#include "verbs.h"

#define ATTR_PREFIX "user.mfs."

/* clang-format off */
const struct mfs_verb mfs_verbs[] = {
	{
		.name = "mount",
		.parse = mfs_parse_mount,
		.exec = mfs_execute_mount,
		.usage = "setfattr -n user.mfs.mount -v "
			 "name=N,store=DIR,mountpoint=DIR[,create][,ro][,option=value...]\n",
	},
	{
		.name = "unmount",
		.parse = mfs_parse_unmount,
		.exec = mfs_execute_unmount,
		.usage = "setfattr -n user.mfs.unmount -v NAME[,force]\n",
	},
	{
		.name = "config",
		.parse = mfs_parse_config,
		.exec = mfs_execute_config,
		.usage = "setfattr -n user.mfs.config -v name=N,key=value[,key=value...]\n",
	},
	{
		.name = "forget",
		.parse = mfs_parse_forget,
		.exec = mfs_execute_forget,
		.usage = "setfattr -n user.mfs.forget -v NAME\n",
	},
	{
		.name = "sync",
		.parse = mfs_parse_sync,
		.exec = mfs_execute_sync,
		.usage = "setfattr -n user.mfs.sync -v NAME\n",
	},
	{
		.name = "subscribe",
		.parse = mfs_parse_subscribe,
		.exec = mfs_execute_subscribe,
		.usage = "setfattr -n user.mfs.subscribe -v "
			 "name=N,sub=S[,from=POS|since=TIME][,path=P][,glob=G][,ops=A+B]"
			 "[,types=T+U][,exclude=P][,exclude_pid=PID]\n",
	},
	{
		.name = "unsubscribe",
		.parse = mfs_parse_unsubscribe,
		.exec = mfs_execute_unsubscribe,
		.usage = "setfattr -n user.mfs.unsubscribe -v name=N,sub=S\n",
	},
};
/* clang-format on */
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
