/* registry.c: record encoding, the LMDB registry, the state directory lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"
#include "suites.h"

START_TEST(codec)
{
	struct mfs_conf c = {.owner = 1000, .want_mounted = true}, d;
	char buf[16384];
	uint32_t id = 0;
	strcpy(c.name, "a");
	strcpy(c.store, "/s");
	strcpy(c.mountpoint, "/m");
	strcpy(c.opts, "iops=5,durability=full");
	int n = mfs_registry_encode(&c, 42, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(mfs_registry_decode(buf, (size_t)n, &d, &id), 0);
	ck_assert_uint_eq(id, 42);
	ck_assert_uint_eq(d.owner, 1000);
	ck_assert(d.want_mounted);
	ck_assert_str_eq(d.store, "/s");
	ck_assert_str_eq(d.mountpoint, "/m");
	ck_assert_str_eq(d.opts, "iops=5,durability=full");
	ck_assert_int_eq(mfs_registry_decode("v2\nid=1\n", 8, &d, &id), -EINVAL);
	ck_assert_int_eq(mfs_registry_decode("v1\nid=1\nowner=0\n", 16, &d, &id), -EINVAL);
	ck_assert_int_eq(mfs_registry_encode(&c, 1, buf, 10), -ENAMETOOLONG);
}
END_TEST

static int count_cb(void *arg, const struct mfs_conf *c, uint32_t id)
{
	int *n = arg;
	ck_assert_str_eq(c->name, *n == 0 ? "a" : "b");
	(*n)++;
	return 0;
}

START_TEST(store)
{
	char dir[] = "/tmp/mfs-unit-registry.XXXXXX", state[64], err[256];
	struct mfs_registry *r, *r2;
	struct mfs_conf c = {0};
	int n = 0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(state, sizeof(state), "%s/state", dir);
	ck_assert_int_eq(mfs_registry_open(state, &r, err, sizeof(err)), 0);
	ck_assert_int_eq(mfs_registry_open(state, &r2, err, sizeof(err)), -EBUSY);
	strcpy(c.store, "/s");
	strcpy(c.mountpoint, "/m");
	strcpy(c.name, "b");
	ck_assert_int_eq(mfs_registry_put(r, &c, 2), 0);
	strcpy(c.name, "a");
	ck_assert_int_eq(mfs_registry_put(r, &c, 1), 0);
	ck_assert_int_eq(mfs_registry_put(r, &c, 1), 0); /* replace */
	ck_assert_int_eq(mfs_registry_load(r, count_cb, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(mfs_registry_del(r, "b"), 0);
	ck_assert_int_eq(mfs_registry_del(r, "b"), -ENOENT);
	mfs_registry_close(r);
	/* persists across a reopen */
	ck_assert_int_eq(mfs_registry_open(state, &r, err, sizeof(err)), 0);
	n = 0;
	ck_assert_int_eq(mfs_registry_load(r, count_cb, &n), 0);
	ck_assert_int_eq(n, 1);
	mfs_registry_close(r);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *mfs_registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("records");
	tcase_add_test(tc, codec);
	tcase_add_test(tc, store);
	suite_add_tcase(s, tc);
	return s;
}
