/*
 * Fuzz target "control": the control protocol's parsers, as a hostile
 * caller reaches them with setfattr on the manager root.
 *
 * Input: an attribute name, a NUL, then the value (no NUL: the whole input
 * is the value). The name goes to mfs_verb_find(); the value goes to every
 * verb's parser (mfs_verbs[]) and to mfs_kv_parse() with and without
 * MFS_KV_UNIQUE.
 *
 * Beyond "no crash, no sanitizer report", it checks:
 *   - a refused value gives a negative errno of the documented set and a
 *     NUL-terminated reason; a refused mfs_kv_parse leaves the list empty;
 *   - a parsed list has non-empty keys, [a-z0-9_] keys where there is a
 *     value, no duplicate with MFS_KV_UNIQUE, and escaping its items back
 *     (mfs_kv_escape) gives text that parses to the same items;
 *   - an accepted command has a valid name, absolute paths (or none) and
 *     canonical options that mfs_conf_parse() accepts, as the control
 *     thread will parse them again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "known.h"
#include "mfs/conf.h"
#include "mfs/kv.h"
#include "mfs/verbs.h"

static void check_err(int rc, const char *err, size_t errlen, const char *what)
{
	if (rc != -EINVAL && rc != -E2BIG && rc != -ENAMETOOLONG && rc != -ENOMEM)
		fz_fail("%s returned %d", what, rc);
	if (!memchr(err, '\0', errlen))
		fz_fail("%s: reason not NUL-terminated", what);
	if (!err[0])
		fz_fail("%s refused without a reason", what);
}

static void check_list(const char *s, size_t len, unsigned flags)
{
	struct mfs_kvlist l, again;
	char err[256];
	int rc;

	memset(err, 0, sizeof(err));
	rc = mfs_kv_parse(s, len, flags, &l, err, sizeof(err));
	if (rc) {
		check_err(rc, err, sizeof(err), "mfs_kv_parse");
		if (l.n || l.items || l.buf)
			fz_fail("mfs_kv_parse refused but left items");
		return;
	}
	if (!l.n)
		fz_fail("mfs_kv_parse accepted %zu bytes with no item", len);
	/* Escaping doubles a byte at most; one separator per item. */
	size_t cap = 2 * len + l.n + 2, pos = 0;
	char *text = malloc(cap);
	if (!text)
		abort();
	text[0] = '\0';
	for (size_t i = 0; i < l.n; i++) {
		const struct mfs_kv *kv = &l.items[i];
		if (!kv->key[0])
			fz_fail("empty key accepted");
		if (kv->value)
			for (const char *k = kv->key; *k; k++)
				if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
					fz_fail("malformed key '%s' accepted", kv->key);
		if (flags & MFS_KV_UNIQUE)
			for (size_t j = 0; j < i; j++)
				if (!strcmp(l.items[j].key, kv->key))
					fz_fail("duplicate key '%s' accepted", kv->key);
		if (i)
			text[pos++] = ',';
		if (!mfs_kv_escape(text, cap, &pos, kv->key))
			fz_fail("escape of a key did not fit");
		if (kv->value) {
			text[pos++] = '=';
			if (!mfs_kv_escape(text, cap, &pos, kv->value))
				fz_fail("escape of a value did not fit");
		}
	}
	rc = mfs_kv_parse(text, pos, flags, &again, err, sizeof(err));
	if (rc)
		fz_fail("escaped items do not parse again: %s: '%s'", err, text);
	if (again.n != l.n)
		fz_fail("escaped items parse to %zu items, not %zu", again.n, l.n);
	for (size_t i = 0; i < l.n; i++) {
		const struct mfs_kv *a = &l.items[i], *b = &again.items[i];
		if (strcmp(a->key, b->key) || !a->value != !b->value ||
		    (a->value && strcmp(a->value, b->value)))
			fz_fail("item %zu changed through escaping: '%s'", i, text);
	}
	mfs_kv_free(&again);
	mfs_kv_free(&l);
	free(text);
}

static void check_verb(const struct mfs_verb *vb, const char *s, size_t len)
{
	struct mfs_cmd *cmd = calloc(1, sizeof(*cmd));
	char err[256];
	int rc;

	if (!cmd)
		abort();
	memset(err, 0, sizeof(err));
	rc = vb->parse(s, len, cmd, err, sizeof(err));
	if (rc) {
		check_err(rc, err, sizeof(err), vb->name);
		free(cmd);
		return;
	}
	if (!memchr(cmd->name, '\0', sizeof(cmd->name)) ||
	    !mfs_name_valid(cmd->name, strlen(cmd->name), err, sizeof(err)))
		fz_fail("%s accepted an invalid name", vb->name);
	if (!memchr(cmd->store, '\0', sizeof(cmd->store)) ||
	    !memchr(cmd->mountpoint, '\0', sizeof(cmd->mountpoint)))
		fz_fail("%s: path not NUL-terminated", vb->name);
	if ((cmd->store[0] && cmd->store[0] != '/') ||
	    (cmd->mountpoint[0] && cmd->mountpoint[0] != '/'))
		fz_fail("%s accepted a relative path", vb->name);
	if (!memchr(cmd->opts, '\0', sizeof(cmd->opts)))
		fz_fail("%s: options not NUL-terminated", vb->name);
	struct dbfs_options o;
	struct mfs_limits lim;
	if (mfs_conf_parse(cmd->opts, &o, &lim, err, sizeof(err)))
		fz_fail("%s accepted options the control thread refuses: %s: '%s'", vb->name, err,
			cmd->opts);
	free(cmd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, '\0', size);
	const char *value = (const char *)data;
	size_t len = size;

	if (nul) {
		mfs_verb_find((const char *)data); /* NUL-terminated by `nul` */
		value = nul + 1;
		len = size - (size_t)(value - (const char *)data);
	}
	/* An exact-size copy: ASan sees any read past the value's end. */
	char *v = malloc(len ? len : 1);
	if (!v)
		abort();
	memcpy(v, value, len);
	check_list(v, len, 0);
	check_list(v, len, MFS_KV_UNIQUE);
	for (size_t i = 0; i < mfs_nverbs; i++)
		check_verb(&mfs_verbs[i], v, len);
	free(v);
	return 0;
}
