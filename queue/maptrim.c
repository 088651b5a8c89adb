/* SPDX-License-Identifier: MIT */
/*
 * The environment's map, kept from growing the process's resident memory.
 *
 * LMDB reads the store through a shared mapping, and every page it touches
 * stays mapped; on each fault the kernel also maps the neighbouring pages it
 * has cached. So the resident set of a process grows with the store (about
 * 55 bytes per pending delayed message) although the engine keeps nothing
 * per message in memory. Every MAP_CHECK_EVERY own commits, the engine reads
 * the process's file-backed resident memory (/proc/self/statm) and, above
 * the map budget, drops the map's page-table entries (MADV_DONTNEED). The
 * mapping is shared: the pages stay in the page cache with their data, and
 * the next access maps them again.
 *
 * Not more often than every MAP_TRIM_GAP_US per queue: each commit reads
 * pages that the previous ones wrote, and each such fault maps 16
 * neighbours too, so a stream of 4 KiB messages (a commit each) crossed
 * the 16 MiB budget every 155 commits; dropping the map 256 times a second
 * and faulting it back cost 45% of its throughput (40k against 72k msg/s
 * with no budget; 61-62k with the gap). With 10 million pending delayed
 * messages the resident set stays where it was (VmRSS 20 MB, peak 21).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define MAP_CHECK_EVERY 64
#define MAP_TRIM_GAP_US 50000

static _Atomic uint64_t map_budget = 16u << 20;

void mfsq_map_budget(uint64_t bytes)
{
	atomic_store(&map_budget, bytes);
}

/* File-backed resident bytes of this process (statm "shared"), 0 if unknown. */
static uint64_t shared_resident(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size, res, shared = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu %lu", &size, &res, &shared) != 3)
		shared = 0;
	fclose(f);
	return (uint64_t)shared * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * Where LMDB mapped the environment: LMDB does not say (me_mapaddr is only
 * set with MDB_FIXEDMAP), but every page starts with its own page number,
 * so a pointer into any page gives the start of the map.
 */
static char *map_start(MDB_env *env, size_t *size)
{
	MDB_envinfo ei;
	MDB_stat st;
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	char *base = NULL;

	if (mdb_env_info(env, &ei) || mdb_env_stat(env, &st) ||
	    mdb_txn_begin(env, NULL, MDB_RDONLY, &t))
		return NULL;
	if (!mdb_cursor_open(t, 1 /* the main database */, &c)) {
		if (!mdb_cursor_get(c, &k, &v, MDB_FIRST)) {
			uintptr_t page = (uintptr_t)k.mv_data & ~(uintptr_t)(st.ms_psize - 1);
			uint64_t pgno;

			memcpy(&pgno, (const void *)page, sizeof(pgno));
			if (pgno <= ei.me_last_pgno)
				base = (char *)(page - pgno * st.ms_psize);
		}
		mdb_cursor_close(c);
	}
	mdb_txn_abort(t);
	*size = ei.me_mapsize;
	return base;
}

void mfsq_map_check(mfsq_queue *q)
{
	uint64_t budget = atomic_load(&map_budget);
	uint64_t now;
	size_t size;
	char *base;

	if (!budget || atomic_fetch_add(&q->map_commits, 1) % MAP_CHECK_EVERY)
		return;
	now = mfsq_mono_us();
	if (now - atomic_load(&q->map_trimmed_us) < MAP_TRIM_GAP_US)
		return;
	if (shared_resident() <= budget || !(base = map_start(q->env, &size)))
		return;
	atomic_store(&q->map_trimmed_us, now);
	if (madvise(base, size, MADV_DONTNEED) == 0)
		atomic_fetch_add(&q->c.map_trims, 1);
}
