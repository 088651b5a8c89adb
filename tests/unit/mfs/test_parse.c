/* verbs.c, parse.c, answer.c: the verb table, the values' parsers and the
 * refusal memory, which need no mount and no control thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "log.h"
#include "parse.h"
#include "suites.h"
#include "verbs.h"

static char err[512];

/* Parse `value` with the verb of attribute `attr` into a fresh *cmd. */
static int run(const char *attr, const char *value, struct mfs_cmd **cmd)
{
	const struct mfs_verb *v = mfs_verb_find(attr);

	ck_assert_ptr_nonnull(v);
	*cmd = calloc(1, sizeof(**cmd));
	ck_assert_ptr_nonnull(*cmd);
	(*cmd)->verb = v;
	err[0] = '\0';
	return v->parse(value, strlen(value), *cmd, err, sizeof(err));
}

/* The reason of a refusal, freeing the command. */
static int refused(const char *attr, const char *value, const char *reason)
{
	struct mfs_cmd *cmd;
	int rc = run(attr, value, &cmd);

	free(cmd);
	ck_assert_msg(strstr(err, reason), "'%s' for %s=%s, wanted '%s'", err, attr, value, reason);
	return rc;
}

START_TEST(table)
{
	ck_assert_uint_eq(mfs_nverbs, 7);
	for (size_t i = 0; i < mfs_nverbs; i++) {
		const struct mfs_verb *v = &mfs_verbs[i];
		char attr[64];
		snprintf(attr, sizeof(attr), "user.mfs.%s", v->name);
		ck_assert_ptr_eq(mfs_verb_find(attr), v);
		ck_assert_ptr_nonnull(v->parse);
		ck_assert_ptr_nonnull(v->exec);
		ck_assert_ptr_nonnull(strstr(v->usage, attr));
	}
	ck_assert_ptr_null(mfs_verb_find("mount"));
	ck_assert_ptr_null(mfs_verb_find("user.mfs.list"));
	ck_assert_ptr_null(mfs_verb_find("user.mfs.mountx"));
	ck_assert_ptr_null(mfs_verb_find("trusted.mfs.mount"));
}
END_TEST

START_TEST(subscribe)
{
	struct mfs_cmd *cmd;

	ck_assert_int_eq(run("user.mfs.subscribe",
			     "name=a,sub=s1,from=42,path=/src/,ops=create+write,exclude_pid=7", &cmd),
			 0);
	ck_assert_str_eq(cmd->name, "a");
	ck_assert_str_eq(cmd->sub, "s1");
	ck_assert_int_eq(cmd->pos.start.from, DBFS_FEED_SEQ);
	ck_assert_uint_eq(cmd->pos.start.seq, 42);
	ck_assert_ptr_null(cmd->pos.start.uuid);
	ck_assert_str_eq(cmd->opts, "path=/src/,ops=create+write,exclude_pid=7");
	free(cmd);
	ck_assert_int_eq(run("user.mfs.subscribe",
			     "name=a,sub=x.y-z_1,from=00112233445566778899aabbccddeeff:5", &cmd),
			 0);
	ck_assert_ptr_eq(cmd->pos.start.uuid, cmd->pos.uuid);
	ck_assert_uint_eq(cmd->pos.uuid[15], 0xff);
	free(cmd);
	ck_assert_int_eq(run("user.mfs.subscribe", "name=a,sub=t,since=2026-01-01T00:00:00Z", &cmd),
			 0);
	ck_assert_int_eq(cmd->pos.start.from, DBFS_FEED_TIME);
	ck_assert_uint_eq(cmd->pos.start.time_ns, 1767225600000000000ull);
	free(cmd);
	ck_assert_int_eq(run("user.mfs.subscribe", "name=a,sub=t", &cmd), 0);
	ck_assert_int_eq(cmd->pos.start.from, DBFS_FEED_NOW);
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.subscribe", "sub=t", "missing key 'name'"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a", "missing key 'sub'"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=a/b", "sub must be"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=a.json", "sub must be"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,from=1,since=-1h", "not both"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,since=5", "since needs a time"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,from=x", "bad position"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,from=12:5", "bad store UUID"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,ops=create+eat", "unknown name"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,path=src", "starting with '/'"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,colour=red", "unknown key"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.subscribe", "name=a,sub=t,exclude_pid=0", "process id"),
			 -EINVAL);
	ck_assert_int_eq(run("user.mfs.unsubscribe", "name=a,sub=t", &cmd), 0);
	ck_assert_str_eq(cmd->sub, "t");
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.unsubscribe", "name=a,sub=t,from=1", "unknown key"),
			 -EINVAL);
}
END_TEST

START_TEST(mount)
{
	struct mfs_cmd *cmd;

	ck_assert_int_eq(run("user.mfs.mount", "name=a,store=/s,mountpoint=/m,create,iops=5", &cmd),
			 0);
	ck_assert_str_eq(cmd->verb->name, "mount");
	ck_assert_str_eq(cmd->name, "a");
	ck_assert_str_eq(cmd->store, "/s");
	ck_assert_str_eq(cmd->mountpoint, "/m");
	ck_assert(cmd->create);
	ck_assert_str_eq(cmd->opts, "iops=5");
	free(cmd);
	/* only a name: mount a registered DBFS again */
	ck_assert_int_eq(run("user.mfs.mount", "name=b,create=no", &cmd), 0);
	ck_assert(!cmd->create);
	ck_assert_str_eq(cmd->store, "");
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.mount", "store=/s", "missing key 'name'"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.mount", "name=a,store=s", "absolute path"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.mount", "name=a,store", "store needs a value"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.mount", "name=a,create=maybe", "bad value"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.mount", "name=a,name=b", ""), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.mount", "name=a,nosuchkey=1", ""), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.mount", "name=a/b", ""), -EINVAL);
}
END_TEST

START_TEST(too_long)
{
	size_t n = MFS_VALUE_MAX + 1;
	char *v = malloc(n + 1);

	ck_assert_ptr_nonnull(v);
	memset(v, 'a', n);
	v[n] = '\0';
	ck_assert_int_eq(refused("user.mfs.forget", v, "value longer than"), -E2BIG);
	free(v);
}
END_TEST

START_TEST(unmount)
{
	struct mfs_cmd *cmd;

	ck_assert_int_eq(run("user.mfs.unmount", "a,force", &cmd), 0);
	ck_assert_str_eq(cmd->name, "a");
	ck_assert(cmd->force);
	free(cmd);
	ck_assert_int_eq(run("user.mfs.unmount", "name=b", &cmd), 0);
	ck_assert_str_eq(cmd->name, "b");
	ck_assert(!cmd->force);
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.unmount", "a,name=b", "name given twice"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.unmount", "a,lazy", "unknown key 'lazy'"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.unmount", "force=1", "missing the DBFS name"), -EINVAL);
}
END_TEST

START_TEST(config)
{
	struct mfs_cmd *cmd;

	ck_assert_int_eq(run("user.mfs.config", "name=a,iops=7,max_concurrent=2", &cmd), 0);
	ck_assert_str_eq(cmd->name, "a");
	ck_assert_ptr_nonnull(strstr(cmd->opts, "iops=7"));
	ck_assert_ptr_nonnull(strstr(cmd->opts, "max_concurrent=2"));
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.config", "name=a,ro", "only be given at mount"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.config", "name=a,create", "only be given at mount"),
			 -EINVAL);
	ck_assert_int_eq(refused("user.mfs.config", "name=a", "nothing to change"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.config", "iops=7", "missing key 'name'"), -EINVAL);
}
END_TEST

START_TEST(forget)
{
	struct mfs_cmd *cmd;

	ck_assert_int_eq(run("user.mfs.forget", "a", &cmd), 0);
	ck_assert_str_eq(cmd->name, "a");
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.forget", "a,b", "exactly one DBFS name"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.forget", "name=a", "exactly one DBFS name"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.forget", "", "empty option"), -EINVAL);
}
END_TEST

START_TEST(sync)
{
	struct mfs_cmd *cmd;

	ck_assert_int_eq(run("user.mfs.sync", "a", &cmd), 0);
	ck_assert_str_eq(cmd->name, "a");
	free(cmd);
	ck_assert_int_eq(refused("user.mfs.sync", "a,b", "sync takes exactly one DBFS name"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.sync", "name=a", "exactly one DBFS name"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.sync", "", "empty option"), -EINVAL);
	ck_assert_int_eq(refused("user.mfs.sync", "../a", "name"), -EINVAL);
}
END_TEST

START_TEST(refusal_memory)
{
	struct mfs_caller shell1 = {.uid = 4242, .ppid = 100};
	struct mfs_caller shell2 = {.uid = 4242, .ppid = 200};
	struct mfs_caller other = {.uid = 4343, .ppid = 100};
	char text[400];

	mfs_log_set_level(MFS_LOG_ERR); /* the refusals' warnings are expected */
	mfs_answer_last_refusal(&other, text, sizeof(text));
	ck_assert_str_eq(text, "0: no refused command\n");
	mfs_answer_refused(&shell1, "user.mfs.mount", -EINVAL, "first");
	mfs_answer_refused(&shell2, "user.mfs.mount", -EBUSY, "second");
	mfs_answer_last_refusal(&shell1, text, sizeof(text));
	ck_assert_str_eq(text, "EINVAL (22): first\n");
	mfs_answer_last_refusal(&shell2, text, sizeof(text));
	ck_assert_str_eq(text, "EBUSY (16): second\n");
	/* a process of no shell of its own gets its uid's latest */
	struct mfs_caller lone = {.uid = 4242, .ppid = 300};
	mfs_answer_last_refusal(&lone, text, sizeof(text));
	ck_assert_str_eq(text, "EBUSY (16): second\n");
	mfs_answer_last_refusal(&other, text, sizeof(text));
	ck_assert_str_eq(text, "0: no refused command\n");

	/* a command without a request is answered without a reply */
	struct mfs_cmd cmd = {.verb = mfs_verb_find("user.mfs.forget"), .who = shell1};
	mfs_answer_cmd(&cmd, -ENOENT, "no DBFS named x");
	mfs_answer_last_refusal(&shell1, text, sizeof(text));
	ck_assert_str_eq(text, "ENOENT (2): no DBFS named x\n");
	mfs_answer_cmd(&cmd, 0, "");
	mfs_answer_last_refusal(&shell1, text, sizeof(text));
	ck_assert_str_eq(text, "ENOENT (2): no DBFS named x\n");
}
END_TEST

Suite *mfs_parse_suite(void)
{
	Suite *s = suite_create("parse");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, table);
	tcase_add_test(tc, mount);
	tcase_add_test(tc, too_long);
	tcase_add_test(tc, unmount);
	tcase_add_test(tc, config);
	tcase_add_test(tc, forget);
	tcase_add_test(tc, sync);
	tcase_add_test(tc, subscribe);
	tcase_add_test(tc, refusal_memory);
	suite_add_tcase(s, tc);
	return s;
}
