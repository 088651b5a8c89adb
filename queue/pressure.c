/* SPDX-License-Identifier: MIT */
/*
 * The process-wide cache budget and memory-pressure detection. Pressure is
 * "some avg10" of /proc/pressure/memory above 10 %, or MemAvailable below
 * 1/16 of MemTotal; checked at most every 250 ms.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Atomic uint64_t budget = 64u << 20;
static _Atomic int64_t used;
static _Atomic int mode;
static _Atomic uint64_t checked_us;
static _Atomic int last;

void mfsq_memory_budget(uint64_t bytes)
{
	atomic_store(&budget, bytes);
}

uint64_t mfsq_budget_bytes(void)
{
	return atomic_load(&budget);
}

void mfsq_budget_add(int64_t delta)
{
	atomic_fetch_add(&used, delta);
}

uint64_t mfsq_budget_used(void)
{
	int64_t u = atomic_load(&used);

	return u > 0 ? (uint64_t)u : 0;
}

/* Free cache chunks kept by all queues (msgcache.c: spare_limit). */
static _Atomic int64_t spares;

void mfsq_spare_add(int64_t delta)
{
	atomic_fetch_add(&spares, delta);
}

uint64_t mfsq_spare_used(void)
{
	int64_t u = atomic_load(&spares);

	return u > 0 ? (uint64_t)u : 0;
}

void mfsq_pressure_mode(enum mfsq_pressure_mode m)
{
	atomic_store(&mode, (int)m);
	atomic_store(&checked_us, 0);
}

static int psi_pressure(void)
{
	FILE *f = fopen("/proc/pressure/memory", "r");
	double avg10 = 0;
	int p = 0;

	if (!f)
		return 0;
	if (fscanf(f, "some avg10=%lf", &avg10) == 1)
		p = avg10 > 10.0;
	fclose(f);
	return p;
}

static int meminfo_pressure(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long total = 0, avail = 0, v;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu", &v) == 1)
			total = v;
		else if (sscanf(line, "MemAvailable: %llu", &v) == 1)
			avail = v;
	}
	fclose(f);
	return total && avail && avail < total / 16;
}

int mfsq_pressure_now(void)
{
	uint64_t now;
	int p;

	switch (atomic_load(&mode)) {
	case MFSQ_PRESSURE_ON:
		return 1;
	case MFSQ_PRESSURE_OFF:
		return 0;
	default:
		break;
	}
	now = mfsq_now_us();
	if (now < atomic_load(&checked_us) + 250000)
		return atomic_load(&last);
	p = psi_pressure() || meminfo_pressure();
	atomic_store(&last, p);
	atomic_store(&checked_us, now);
	return p;
}
