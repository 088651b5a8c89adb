/* path.c and as_caller.c: resolving user paths once into held descriptors,
 * as the caller, while keeping out of one device. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "as_caller.h"
#include "path.h"
#include "suites.h"

static char dir[64];

static void mk(const char *rel, mode_t mode)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	ck_assert_int_eq(mkdir(p, mode), 0);
	ck_assert_int_eq(chmod(p, mode), 0);
}

static void ln(const char *target, const char *rel)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	ck_assert_int_eq(symlink(target, p), 0);
}

static void setup(void)
{
	char t[128];
	strcpy(dir, "/tmp/mfs-unit-path.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	mk("a", 0755);
	mk("a/b", 0755);
	snprintf(t, sizeof(t), "%s/a/b", dir);
	ln(t, "abs");
	ln("b/../b", "a/rel");
	ln("loop", "loop");
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The held fd is the object at `want` (same inode). */
static void assert_holds(const struct mfs_held *h, const char *want)
{
	struct stat a, b;
	ck_assert_int_eq(fstat(h->fd, &a), 0);
	ck_assert_int_eq(stat(want, &b), 0);
	ck_assert_uint_eq(a.st_ino, b.st_ino);
	ck_assert_uint_eq(a.st_dev, b.st_dev);
}

START_TEST(resolves)
{
	char in[256], want[256];
	struct mfs_held h = MFS_HELD_INIT;
	snprintf(want, sizeof(want), "%s/a/b", dir);
	snprintf(in, sizeof(in), "%s/abs", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), 0);
	ck_assert_str_eq(h.path, want);
	ck_assert_str_eq(h.name, "b");
	assert_holds(&h, want);
	mfs_held_release(&h);
	snprintf(in, sizeof(in), "%s//a/./rel/", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), 0);
	ck_assert_str_eq(h.path, want);
	mfs_held_release(&h);
	/* ending in "..": the parent, held with its own parent */
	snprintf(in, sizeof(in), "%s/a/b/..", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), 0);
	snprintf(want, sizeof(want), "%s/a", dir);
	ck_assert_str_eq(h.path, want);
	ck_assert_str_eq(h.name, "a");
	ck_assert_int_ge(h.dirfd, 0);
	assert_holds(&h, want);
	mfs_held_release(&h);
	ck_assert_int_eq(mfs_path_hold("/", (dev_t)-1, NULL, &h), 0);
	ck_assert_str_eq(h.path, "/");
	ck_assert_int_eq(h.dirfd, -1);
	mfs_held_release(&h);
	/* a missing last component: its parent is held, with the name */
	snprintf(in, sizeof(in), "%s/a/b/../../abs/new", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ENOENT);
	snprintf(want, sizeof(want), "%s/a/b/new", dir);
	ck_assert_str_eq(h.path, want);
	ck_assert_str_eq(h.name, "new");
	ck_assert_int_eq(h.fd, -1);
	ck_assert_int_ge(h.dirfd, 0);
	mfs_held_release(&h);
	/* a missing middle component: nothing held */
	snprintf(in, sizeof(in), "%s/no/new", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ENOENT);
	ck_assert_int_eq(h.dirfd, -1);
	ck_assert_int_eq(h.fd, -1);
}
END_TEST

START_TEST(refuses)
{
	char in[256];
	struct stat st;
	struct mfs_held h = MFS_HELD_INIT;
	snprintf(in, sizeof(in), "%s/loop", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ELOOP);
	ck_assert_int_eq(mfs_path_hold("rel", (dev_t)-1, NULL, &h), -EINVAL);
	/* never looks inside the avoided device */
	ck_assert_int_eq(stat(dir, &st), 0);
	snprintf(in, sizeof(in), "%s/a", dir);
	ck_assert_int_eq(mfs_path_hold(in, st.st_dev, NULL, &h), -EXDEV);
	ck_assert_int_eq(mfs_path_hold(dir, st.st_dev, NULL, &h), -EXDEV);
	ck_assert_int_eq(h.fd, -1);
	ck_assert_int_eq(h.dirfd, -1);
	snprintf(in, sizeof(in), "%s/abs/x", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ENOENT);
	/* a file in the middle, or with a trailing slash */
	char f[128];
	snprintf(f, sizeof(f), "%s/a/file", dir);
	FILE *fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(in, sizeof(in), "%s/a/file/x", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ENOTDIR);
	snprintf(in, sizeof(in), "%s/a/file/", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ENOTDIR);
}
END_TEST

/* What was resolved is what is held, whatever happens to the names after. */
START_TEST(held_survives_swap)
{
	char in[256], a[128], a2[128], other[128], want[128];
	struct mfs_held h = MFS_HELD_INIT;
	struct stat before, after;
	mk("other", 0755);
	snprintf(in, sizeof(in), "%s/a/b", dir);
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), 0);
	ck_assert_int_eq(fstat(h.fd, &before), 0);
	/* rename the parent away and put a symlink to another directory there */
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(a2, sizeof(a2), "%s/a2", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	ck_assert_int_eq(rename(a, a2), 0);
	ck_assert_int_eq(symlink(other, a), 0);
	ck_assert_int_eq(fstat(h.fd, &after), 0);
	ck_assert_uint_eq(before.st_ino, after.st_ino);
	/* the held name still leads to the same directory */
	char np[128];
	mfs_held_name_path(&h, np, sizeof(np));
	ck_assert_int_eq(stat(np, &after), 0);
	ck_assert_uint_eq(before.st_ino, after.st_ino);
	snprintf(want, sizeof(want), "%s/a2/b", dir);
	ck_assert_int_eq(stat(want, &after), 0);
	ck_assert_uint_eq(before.st_ino, after.st_ino);
	mfs_held_release(&h);
	/* and resolving again follows the new symlink */
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), -ENOENT);
	mfs_held_release(&h);
}
END_TEST

/* As the caller, the kernel checks search permission on every directory. */
START_TEST(as_caller_search)
{
	if (geteuid() != 0)
		return; /* only root can take another identity */
	struct mfs_caller nobody = {.uid = 65534, .gid = 65534};
	struct mfs_as as;
	struct mfs_held h = MFS_HELD_INIT;
	char in[256];
	mk("closed", 0700);
	mk("closed/inner", 0777);
	snprintf(in, sizeof(in), "%s/closed/inner", dir);
	ck_assert_int_eq(mfs_as_begin(&nobody, &as), 0);
	int rc = mfs_path_hold(in, (dev_t)-1, &as, &h);
	int acc_root = 1;
	mfs_as_end(&as);
	ck_assert_int_eq(rc, -EACCES);
	/* root (the daemon) may */
	ck_assert_int_eq(mfs_path_hold(in, (dev_t)-1, NULL, &h), 0);
	/* write access checked by the kernel for the caller, on the held fd */
	ck_assert_int_eq(mfs_as_begin(&nobody, &as), 0);
	int w_inner = mfs_as_access(&as, h.fd, W_OK);
	int w_parent = mfs_as_access(&as, h.dirfd, W_OK);
	mfs_as_end(&as);
	ck_assert_int_eq(w_inner, 0);
	ck_assert_int_eq(w_parent, -EACCES);
	/* back to root: the fs capabilities are back too */
	char f[128];
	snprintf(f, sizeof(f), "%s/closed/root-file", dir);
	FILE *fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	ck_assert_int_eq(chmod(f, 0), 0);
	acc_root = access(f, R_OK);
	ck_assert_int_eq(acc_root, 0);
	mfs_held_release(&h);
	/* a file created as the caller belongs to the caller */
	mk("open", 0777);
	snprintf(f, sizeof(f), "%s/open/made", dir);
	ck_assert_int_eq(mfs_as_begin(&nobody, &as), 0);
	rc = mkdir(f, 0700) ? -errno : 0;
	mfs_as_end(&as);
	ck_assert_int_eq(rc, 0);
	struct stat st;
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_uint_eq(st.st_uid, 65534);
}
END_TEST

Suite *mfs_path_suite(void)
{
	Suite *s = suite_create("path");
	TCase *tc = tcase_create("hold");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, resolves);
	tcase_add_test(tc, refuses);
	tcase_add_test(tc, held_survives_swap);
	tcase_add_test(tc, as_caller_search);
	suite_add_tcase(s, tc);
	return s;
}
