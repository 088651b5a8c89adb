/*
 * Known bugs in product code that the fuzz targets step around until they
 * are fixed (tests/fuzz/README.md "Known bugs"). Each filter skips the
 * inputs that reach the bug, so that a run looks for other bugs instead of
 * finding this one again; MFS_FUZZ_KNOWN=1 turns the filters off (the
 * tests fuzz-known-* run the bug's input that way and are expected to fail).
 * When a bug is fixed: delete its filter, move its input from known/ to
 * regress/, drop its row from fuzz_known in meson.build.
 */
#ifndef MFS_FUZZ_KNOWN_H
#define MFS_FUZZ_KNOWN_H

#include <string.h>

#include "fuzz.h"
#include "mfs/kv.h"

/*
 * D1: dbfs/options.c dbfs_option_parse, key "rw": parse_bool() fails on a
 * bad value and leaves `b` unset, then `o->read_only = !b` loads it
 * (UBSan: load of a value that is not a valid _Bool). Skip inputs with an
 * item rw=VALUE whose value parse_bool refuses.
 */
static inline bool fz_known_d1(const char *s, size_t len)
{
	static const char *const ok[] = {"1", "yes", "true", "on", "0", "no", "false", "off"};
	struct mfs_kvlist l;
	char err[64];
	bool hit = false;

	if (fz_known() || mfs_kv_parse(s, len, 0, &l, err, sizeof(err)))
		return false;
	for (size_t i = 0; i < l.n && !hit; i++) {
		if (strcmp(l.items[i].key, "rw") || !l.items[i].value)
			continue;
		hit = true;
		for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++)
			if (!strcmp(l.items[i].value, ok[k]))
				hit = false;
	}
	mfs_kv_free(&l);
	return hit;
}

#endif
