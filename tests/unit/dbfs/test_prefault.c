/*
 * A store in memory (MDB_WRITEMAP) that grows past PREFAULT_FROM (64 MiB)
 * has the reserve allocated past its last page prefaulted into the map in
 * one call (dbfs/space.c), so that LMDB's first store into each new page
 * is not a page fault. Checked through /proc/self/pagemap: after each
 * 1 MiB written, every page of the map from the last one LMDB uses to the
 * end of the reserve is present (from the first extension of the reserve
 * past 64 MiB on: below, small stores skip it). Fails when the prefault is refused
 * (madvise needs a page-aligned start; the reserve's end was not one, and
 * three calls in four failed with EINVAL).
 */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/statvfs.h>

#include "dbfs/internal.h"

#define PIECE	  (1u << 20)
#define FROM	  (64ull << 20) /* PREFAULT_FROM */
#define TOTAL	  (160ull << 20)

static const struct dbfs_cred cred = {1000, 1000, 022};
static unsigned char buf[PIECE];

struct wr {
	uint64_t ino;
	uint64_t off;
};

static int write_fn(struct dbfs *f, MDB_txn *t, void *arg)
{
	struct wr *w = arg;
	return dbfs_op_write(f, t, w->ino, w->off, buf, PIECE, 0);
}

static int mknod_fn(struct dbfs *f, MDB_txn *t, void *arg)
{
	struct dbfs_inode in;
	return dbfs_op_mknod(f, t, &cred, DBFS_ROOT_INO, "big", S_IFREG | 0644, 0, NULL, arg, &in);
}

/* Pages of [from, to) of this process's address space that are not
 * present (/proc/self/pagemap: bit 63 of each page's entry). */
static uint64_t absent_pages(uintptr_t from, uintptr_t to)
{
	long ps = sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	uint64_t absent = 0;
	for (uintptr_t a = from / ps * ps; a < to; a += ps) {
		uint64_t e;
		ck_assert_int_eq(pread(fd, &e, sizeof(e), (off_t)(a / ps * sizeof(e))), sizeof(e));
		absent += !(e >> 63);
	}
	close(fd);
	return absent;
}

START_TEST(test_reserve_prefaulted)
{
	char dir[] = "/dev/shm/dbfs-prefault-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct dbfs *fs;
	struct dbfs_options o;
	char err[256];
	dbfs_options_init(&o);
	o.create = true;
	ck_assert_msg(dbfs_open(dir, &o, &fs, err, sizeof(err)) == 0, "dbfs_open: %s", err);
	ck_assert_msg(fs->writemap, "a store in /dev/shm without MDB_WRITEMAP");
	memset(buf, 0xa5, sizeof(buf));
	struct wr w = {0};
	ck_assert_int_eq(dbfs_write_sized(fs, mknod_fn, &w.ino, 0), 0);
	unsigned checked = 0, reserves = 0;
	uint64_t last_end = 0, start = 0; /* prefaulted from `start` on */
	for (; w.off < TOTAL; w.off += PIECE) {
		ck_assert_int_eq(dbfs_write_sized(fs, write_fn, &w, PIECE), 0);
		MDB_envinfo info;
		MDB_stat st;
		mdb_env_info(fs->env, &info);
		mdb_env_stat(fs->env, &st);
		uint64_t used = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
		if (fs->alloc_end <= FROM) {
			last_end = fs->alloc_end;
			continue;
		}
		if (!start) /* the first extension past FROM was prefaulted */
			start = last_end;
		reserves += fs->alloc_end != last_end;
		last_end = fs->alloc_end;
		uint64_t from = used > start ? used : start;
		if (from >= fs->alloc_end)
			continue;
		uint64_t absent = absent_pages((uintptr_t)fs->map_addr + from,
					       (uintptr_t)fs->map_addr + fs->alloc_end);
		ck_assert_msg(absent == 0,
			      "%lu of the reserve's pages not present (used %lu, reserve to %lu)",
			      (unsigned long)absent, (unsigned long)used,
			      (unsigned long)fs->alloc_end);
		checked++;
	}
	/* the reserve was extended (and prefaulted) several times */
	ck_assert_uint_ge(reserves, 4);
	ck_assert_uint_ge(checked, 40);
	dbfs_close(fs);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	struct statvfs sv;
	if (statvfs("/dev/shm", &sv) || (uint64_t)sv.f_bavail * sv.f_frsize < 3 * TOTAL) {
		printf("SKIP: /dev/shm has less than %llu MiB free\n",
		       (unsigned long long)(3 * TOTAL >> 20));
		return 77;
	}
	Suite *s = suite_create("dbfs-prefault");
	TCase *tc = tcase_create("prefault");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_reserve_prefaulted);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
