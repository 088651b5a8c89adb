/*
 * Fuzz target "conf": the mount option parser, mfs_conf_parse() into libdbfs
 * options (dbfs_option_parse) and governor limits, as the control thread
 * runs it on the canonical options of a registered DBFS and as mfs runs it
 * on a registry record at start.
 *
 * Input: the options text (up to the first NUL, as the registry holds a C
 * string).
 *
 * Checks beyond "no crash":
 *   - accepted options are in their documented ranges (durability one of
 *     three, 8 <= max_readers <= 65536, map_size 0 or >= 1 MiB, timeouts in
 *     [0, 1e9] and not NaN, max_concurrent <= 1024, iops <= 1e8);
 *   - mfs_conf_parse() accepts the text exactly when mfs_kv_parse() does and
 *     mfs_conf_check() accepts every item (what the verbs check is what the
 *     control thread applies);
 *   - rebuilding the text item by item with mfs_conf_set() (as the verbs
 *     do) gives text that parses to the same options and limits.
 *   - a SIZE or number an option accepts starts with a digit (strtoull
 *     skips spaces and takes a sign: " -1" was 2^64-1).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "known.h"
#include "mfs/conf.h"
#include "mfs/kv.h"
#include "mfs/manager.h"

static bool numeric_key(const char *k)
{
	static const char *const keys[] = {"max_readers", "map_size", "quota_bytes",
					   "quota_inodes", "mem", "max_concurrent",
					   "iops", "bandwidth", "attr_timeout",
					   "entry_timeout"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(k, keys[i]))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t len = nul ? (size_t)(nul - data) : size;
	char *opts = malloc(len + 1);
	char err[256];
	struct dbfs_options o, o2;
	struct mfs_limits lim, lim2;
	struct mfs_kvlist l;
	int rc, rc_kv;
	bool all_ok = true;

	if (!opts)
		abort();
	memcpy(opts, data, len);
	opts[len] = '\0';

	/* The number parsers alone, on the whole text. */
	uint64_t n;
	if (!mfs_parse_size(opts, &n) && !isdigit((unsigned char)opts[0]))
		fz_fail("mfs_parse_size accepted '%s'", opts);
	if (!mfs_parse_uint(opts, UINT64_MAX, &n) && !isdigit((unsigned char)opts[0]))
		fz_fail("mfs_parse_uint accepted '%s'", opts);

	memset(err, 0, sizeof(err));
	rc = mfs_conf_parse(opts, &o, &lim, err, sizeof(err));
	if (rc && (rc != -EINVAL && rc != -ENOMEM))
		fz_fail("mfs_conf_parse returned %d", rc);
	if (rc && (!memchr(err, '\0', sizeof(err)) || !err[0]))
		fz_fail("mfs_conf_parse refused without a reason");
	if (!rc) {
		if (o.durability != DBFS_DURABLE_FULL && o.durability != DBFS_DURABLE_NORMAL)
			fz_fail("durability %d", (int)o.durability);
		if (o.max_readers < 8 || o.max_readers > 65536)
			fz_fail("max_readers %u", o.max_readers);
		if (o.initial_map_size && o.initial_map_size < (1u << 20))
			fz_fail("map_size %llu", (unsigned long long)o.initial_map_size);
		if (!(o.attr_timeout >= 0 && o.attr_timeout <= 1e9) ||
		    !(o.entry_timeout >= 0 && o.entry_timeout <= 1e9))
			fz_fail("timeouts %g %g", o.attr_timeout, o.entry_timeout);
		if (lim.max_concurrent > 1024 || lim.iops > 100000000)
			fz_fail("limits %u %llu", lim.max_concurrent, (unsigned long long)lim.iops);
	}

	/* What the verbs check item by item must agree with the whole parse. */
	rc_kv = len ? mfs_kv_parse(opts, len, 0, &l, err, sizeof(err)) : 0;
	if (!len)
		memset(&l, 0, sizeof(l));
	char *canon = calloc(1, MFS_OPTS_MAX);
	bool canon_fits = true;
	if (!canon)
		abort();
	for (size_t i = 0; !rc_kv && i < l.n; i++) {
		const char *k = l.items[i].key, *v = l.items[i].value;
		if (mfs_conf_check(k, v, err, sizeof(err))) {
			all_ok = false;
			continue;
		}
		mfs_conf_live(k);
		if (numeric_key(k) && v && !isdigit((unsigned char)v[0]))
			fz_fail("option %s accepted value '%s'", k, v);
		if (canon_fits && mfs_conf_set(canon, MFS_OPTS_MAX, k, v))
			canon_fits = false;
	}
	if (!rc_kv && all_ok && rc)
		fz_fail("every item checks but mfs_conf_parse refuses: %s", err);
	if (!rc && (rc_kv || !all_ok))
		fz_fail("mfs_conf_parse accepts what the item checks refuse");
	if (!rc && canon_fits) {
		if (mfs_conf_parse(canon, &o2, &lim2, err, sizeof(err)))
			fz_fail("canonical text refused: %s: '%s'", err, canon);
		if (memcmp(&o, &o2, sizeof(o)) || memcmp(&lim, &lim2, sizeof(lim)))
			fz_fail("canonical text '%s' parses to other options", canon);
	}
	if (!rc_kv)
		mfs_kv_free(&l);
	free(canon);
	free(opts);
	return 0;
}
