/* Extended attributes: set/get/list/remove, XATTR_CREATE/XATTR_REPLACE, the
 * user./trusted./security. namespaces, 64 KiB values, ERANGE, ENODATA, E2BIG,
 * permission checks for another uid. */
#include "check.h"

#include <sys/xattr.h>

/* listxattr of path must hold exactly the names in want (any order). */
static void list_is(const char *path, const char *const *want, int n)
{
	char buf[8192];
	ssize_t len = llistxattr(path, NULL, 0);
	CHECK(len >= 0);
	CHECK(len <= (ssize_t)sizeof buf);
	ssize_t got = llistxattr(path, buf, sizeof buf);
	CHECK_EQ(got, len);
	int found = 0;
	for (ssize_t off = 0; off < got; off += (ssize_t)strlen(buf + off) + 1) {
		int i;
		for (i = 0; i < n; i++)
			if (strcmp(buf + off, want[i]) == 0)
				break;
		if (i == n)
			fail("listxattr(%s) has unexpected name '%s'", path, buf + off);
		found++;
	}
	if (found != n)
		fail("listxattr(%s) has %d names, expected %d", path, found, n);
}

static void test_basic(void)
{
	write_file("f", "", 0, 0644);
	char buf[256];
	CHECK_ERR(getxattr("f", "user.a", buf, sizeof buf), ENODATA);
	CHECK(setxattr("f", "user.a", "value-a", 7, 0) == 0);
	CHECK_EQ(getxattr("f", "user.a", NULL, 0), 7);
	CHECK_EQ(getxattr("f", "user.a", buf, sizeof buf), 7);
	CHECK(memcmp(buf, "value-a", 7) == 0);
	CHECK_ERR(getxattr("f", "user.a", buf, 6), ERANGE);
	CHECK_ERR(getxattr("f", "user.b", buf, sizeof buf), ENODATA);
	/* XATTR_CREATE / XATTR_REPLACE. */
	CHECK_ERR(setxattr("f", "user.a", "x", 1, XATTR_CREATE), EEXIST);
	CHECK_ERR(setxattr("f", "user.b", "x", 1, XATTR_REPLACE), ENODATA);
	CHECK(setxattr("f", "user.b", "bee", 3, XATTR_CREATE) == 0);
	CHECK(setxattr("f", "user.a", "A", 1, XATTR_REPLACE) == 0);
	CHECK_EQ(getxattr("f", "user.a", buf, sizeof buf), 1);
	CHECK_EQ(buf[0], 'A');
	/* Empty and binary values. */
	CHECK(setxattr("f", "user.empty", "", 0, 0) == 0);
	CHECK_EQ(getxattr("f", "user.empty", buf, sizeof buf), 0);
	static const char bin[] = { 0, 1, 2, 0, (char)0xff, 0 };
	CHECK(setxattr("f", "user.bin", bin, sizeof bin, 0) == 0);
	CHECK_EQ(getxattr("f", "user.bin", buf, sizeof buf), sizeof bin);
	CHECK(memcmp(buf, bin, sizeof bin) == 0);
	/* Other namespaces (root). */
	if (is_root()) {
		CHECK(setxattr("f", "trusted.t", "tv", 2, 0) == 0);
		CHECK(setxattr("f", "security.s", "sv", 2, 0) == 0);
		CHECK_EQ(getxattr("f", "trusted.t", buf, sizeof buf), 2);
		CHECK(memcmp(buf, "tv", 2) == 0);
		CHECK_EQ(getxattr("f", "security.s", buf, sizeof buf), 2);
		CHECK(memcmp(buf, "sv", 2) == 0);
		static const char *const want[] = { "user.a", "user.b", "user.empty", "user.bin",
						    "trusted.t", "security.s" };
		list_is("f", want, 6);
	} else {
		static const char *const want[] = { "user.a", "user.b", "user.empty",
						    "user.bin" };
		list_is("f", want, 4);
	}
	/* listxattr ERANGE. */
	CHECK_ERR(listxattr("f", buf, 5), ERANGE);
	/* Invalid namespace and names. */
	CHECK_ERR2(setxattr("f", "bogus.x", "v", 1, 0), EOPNOTSUPP, ENOTSUP);
	CHECK_ERR(setxattr("f", "", "v", 1, 0), ERANGE);
	char longname[300];
	memset(longname, 'n', sizeof longname);
	memcpy(longname, "user.", 5);
	longname[sizeof longname - 1] = 0;
	CHECK_ERR(setxattr("f", longname, "v", 1, 0), ERANGE);
	/* removexattr. */
	CHECK(removexattr("f", "user.b") == 0);
	CHECK_ERR(getxattr("f", "user.b", buf, sizeof buf), ENODATA);
	CHECK_ERR(removexattr("f", "user.b"), ENODATA);
	CHECK(removexattr("f", "user.empty") == 0);
	CHECK(removexattr("f", "user.bin") == 0);
	if (is_root()) {
		CHECK(removexattr("f", "trusted.t") == 0);
		CHECK(removexattr("f", "security.s") == 0);
	}
	static const char *const left[] = { "user.a" };
	list_is("f", left, 1);
	/* Through a descriptor. */
	int fd = open("f", O_RDONLY);
	CHECK(fd >= 0);
	CHECK(fsetxattr(fd, "user.fd", "viafd", 5, 0) == 0);
	CHECK_EQ(fgetxattr(fd, "user.fd", buf, sizeof buf), 5);
	CHECK(memcmp(buf, "viafd", 5) == 0);
	CHECK(fremovexattr(fd, "user.fd") == 0);
	CHECK(close(fd) == 0);
	OK("set/get/list/remove, CREATE/REPLACE, ERANGE, ENODATA");
}

static void test_sizes(void)
{
	const size_t max = 65536;
	char *v = malloc(max + 1), *back = malloc(max + 1);
	CHECK(v && back);
	fill_pattern((uint8_t *)v, max + 1, 77, 0);
	write_file("big", "", 0, 0644);
	CHECK(setxattr("big", "user.big", v, max, 0) == 0);
	CHECK_EQ(getxattr("big", "user.big", NULL, 0), max);
	memset(back, 0, max);
	CHECK_EQ(getxattr("big", "user.big", back, max), max);
	CHECK(memcmp(back, v, max) == 0);
	CHECK_ERR(getxattr("big", "user.big", back, max - 1), ERANGE);
	CHECK_ERR(setxattr("big", "user.toobig", v, max + 1, 0), E2BIG);
	/* Shrink it, then grow it again. */
	CHECK(setxattr("big", "user.big", "s", 1, XATTR_REPLACE) == 0);
	CHECK_EQ(getxattr("big", "user.big", back, max), 1);
	CHECK(setxattr("big", "user.big", v + 1, max - 1, XATTR_REPLACE) == 0);
	CHECK_EQ(getxattr("big", "user.big", back, max), max - 1);
	CHECK(memcmp(back, v + 1, max - 1) == 0);
	/* Many attributes on one file. */
	char name[64];
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof name, "user.many.%03d", i);
		CHECK(setxattr("big", name, name, strlen(name), XATTR_CREATE) == 0);
	}
	char *list = malloc(65536);
	CHECK(list);
	ssize_t len = listxattr("big", list, 65536);
	CHECK(len > 0);
	int count = 0;
	for (ssize_t off = 0; off < len; off += (ssize_t)strlen(list + off) + 1)
		count++;
	CHECK_EQ(count, 201);
	for (int i = 0; i < 200; i += 17) {
		snprintf(name, sizeof name, "user.many.%03d", i);
		CHECK_EQ(getxattr("big", name, back, max), strlen(name));
		CHECK(memcmp(back, name, strlen(name)) == 0);
	}
	/* Attributes go away with the inode, not with a name. */
	CHECK(link("big", "big2") == 0);
	CHECK(unlink("big") == 0);
	CHECK_EQ(getxattr("big2", "user.big", back, max), max - 1);
	CHECK(unlink("big2") == 0);
	write_file("big", "", 0, 0644);
	CHECK_ERR(getxattr("big", "user.big", back, max), ENODATA);
	CHECK_EQ(listxattr("big", list, 65536), 0);
	free(list);
	free(v);
	free(back);
	OK("64 KiB values, E2BIG, 200 attributes");
}

static void test_kinds(void)
{
	char buf[64];
	CHECK(mkdir("dir", 0755) == 0);
	CHECK(setxattr("dir", "user.d", "dv", 2, 0) == 0);
	CHECK_EQ(getxattr("dir", "user.d", buf, sizeof buf), 2);
	CHECK(symlink("dir", "sym") == 0);
	/* Following the link reaches the directory's attributes. */
	CHECK_EQ(getxattr("sym", "user.d", buf, sizeof buf), 2);
	CHECK_ERR(lgetxattr("sym", "user.d", buf, sizeof buf), ENODATA);
	/* user.* is not allowed on symlinks (VFS rule). */
	CHECK_ERR(lsetxattr("sym", "user.x", "v", 1, 0), EPERM);
	if (is_root()) {
		CHECK(lsetxattr("sym", "trusted.l", "lv", 2, 0) == 0);
		CHECK_EQ(lgetxattr("sym", "trusted.l", buf, sizeof buf), 2);
		CHECK_ERR(getxattr("sym", "trusted.l", buf, sizeof buf), ENODATA);
	}
	/* Renames keep attributes. */
	CHECK(rename("dir", "dir2") == 0);
	CHECK_EQ(getxattr("dir2", "user.d", buf, sizeof buf), 2);
	OK("xattrs on directories and symlinks");
}

static void nobody_xattrs(void *arg)
{
	(void)arg;
	char buf[64];
	/* Reading user.* needs read permission, writing needs write permission. */
	CHECK_EQ(getxattr("pubro", "user.a", buf, sizeof buf), 1);
	CHECK_ERR(setxattr("pubro", "user.b", "v", 1, 0), EACCES);
	CHECK_ERR(removexattr("pubro", "user.a"), EACCES);
	CHECK_ERR(getxattr("private", "user.a", buf, sizeof buf), EACCES);
	CHECK(setxattr("pubrw", "user.b", "v", 1, 0) == 0);
	/* trusted.* is invisible and unwritable without CAP_SYS_ADMIN. */
	CHECK_ERR(getxattr("pubro", "trusted.t", buf, sizeof buf), ENODATA);
	CHECK_ERR(setxattr("pubrw", "trusted.t", "v", 1, 0), EPERM);
}

static void test_other_uid(void)
{
	if (!is_root()) {
		printf("skip - xattr permissions need root\n");
		return;
	}
	write_file("pubro", "", 0, 0644);
	write_file("pubrw", "", 0, 0666);
	write_file("private", "", 0, 0600);
	CHECK(setxattr("pubro", "user.a", "a", 1, 0) == 0);
	CHECK(setxattr("private", "user.a", "a", 1, 0) == 0);
	CHECK(setxattr("pubro", "trusted.t", "t", 1, 0) == 0);
	as_user(NOBODY, NOBODY, nobody_xattrs, NULL);
	char buf[8];
	CHECK_EQ(getxattr("pubrw", "user.b", buf, sizeof buf), 1);
	OK("xattr permissions for another uid");
}

int main(int argc, char **argv)
{
	enter(argc, argv);
	test_basic();
	test_sizes();
	test_kinds();
	test_other_uid();
	return 0;
}
