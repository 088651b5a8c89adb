/*
 * Fuzz target "queue": libmfsq decoding what it reads from LMDB (queue/
 * format.h: the config, shard state, subshard index, subscriber and rule
 * records of Q/m; messages in subshards Q/s/..., the delay shards Q/d/...,
 * the exception queue Q/x), and the rule parser. Every input is also given,
 * raw, to the one decoder of message records (queue/msgrec.c).
 *
 * LLVMFuzzerInitialize builds a seed queue "q" (2 shards, 4 messages a
 * subshard so there are several, payloads of 1..3000 bytes, tags and
 * priorities, a message delayed by an hour and one by 20 ms, one that
 * expires at once, durable subscribers "s" with a rule and "t" without, part
 * acknowledged) in an environment that syncs (so no enqueue or ack log
 * files: those are not covered), and keeps a compacted copy of its data.mdb.
 *
 * Input: byte 0 selects the mode.
 *   mode 3 (byte 0 % 4 == 3): the rest is a rule text for mfsq_rule_check()
 *     and for an ephemeral subscriber's rule on the undamaged seed queue.
 *   else: record operations (fz_mutate_records in fuzz.h) on every database
 *     of the environment but LMDB's own main database, then mfsq_open(),
 *     dequeue (bounded) and ack by "s", "t" and an ephemeral subscriber from
 *     the start, seek, the exception queue, mfsq_tick(), mfsq_close().
 * Mutations go through the LMDB API: the B-trees stay valid (LMDB has no
 * page checksums and trusts its pages; see fuzz_store.c), only the records
 * the queue decodes are hostile. The target proves that no record value,
 * length, missing or extra record, or renamed key makes the queue crash,
 * trip a sanitizer, or loop without end; not that it reports the damage.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"
#include "format.h"
#include "internal.h"
#include "mfsq.h"

#define MAX_DBS 64

static char work_dir[4200];
static uint8_t *seed;
static size_t seed_len;
static struct mfsq_config cfg;

static void must(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "fuzz_queue: seed: %s: %d %s\n", what, rc, mfsq_strerror(rc));
		abort();
	}
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int env_open(const char *dir, unsigned flags, MDB_env **env)
{
	int rc = mdb_env_create(env);

	if (rc)
		return rc;
	mdb_env_set_maxdbs(*env, mfsq_dbs_needed(&cfg) + MAX_DBS);
	mdb_env_set_mapsize(*env, 64 << 20);
	rc = mdb_env_open(*env, dir, MDB_NOTLS | flags, 0600);
	if (rc)
		mdb_env_close(*env);
	return rc;
}

static void seed_queue(void)
{
	static char payload[3000];
	char dir[4300], why[256];
	MDB_env *env;
	mfsq_queue *q;
	mfsq_sub *s;
	struct mfsq_msg out[4];
	size_t n;

	snprintf(dir, sizeof(dir), "%s/seed", fz_scratch());
	snprintf(work_dir, sizeof(work_dir), "%s/work", fz_scratch());
	must(mkdir(dir, 0700), "mkdir");
	must(mkdir(work_dir, 0700), "mkdir");
	mfsq_config_default(&cfg);
	cfg.nshards = 2;
	cfg.subshard_msgs = 4;
	cfg.retain_max = 16;
	cfg.bucket_us = 2000;
	must(env_open(dir, 0, &env), "env");
	must(mfsq_open(env, "q", &cfg, MFSQ_CREATE, &q), "mfsq_open");
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (char)i;
	for (unsigned i = 0; i < 14; i++) {
		struct mfsq_msg_in m = {
			.data = payload,
			.len = 1 + (i * 397) % (sizeof(payload) - 1),
			.enqueuer = i % 3,
			.prio = (uint8_t)(i % 10),
			.tag = i % 4,
		};
		must(mfsq_enqueue(q, NULL, &m, NULL), "enqueue");
	}
	uint64_t t = now_us();
	struct mfsq_msg_in later[] = {
		{.data = "later", .len = 5, .enqueuer = 1, .deliver_us = t + 3600000000u, .tag = 7},
		{.data = "soon", .len = 4, .enqueuer = 2, .deliver_us = t + 20000, .prio = 1},
		{.data = "expired", .len = 7, .enqueuer = 0, .expire_us = t + 1},
	};
	for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++)
		must(mfsq_enqueue(q, NULL, &later[i], NULL), "enqueue delayed");
	must(mfsq_subscribe_rule(q, "s", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START,
				 "prio <= 5 || tag in (1, 2)", why, sizeof(why), &s),
	     why);
	must(mfsq_dequeue(s, out, 3, &n, 0), "dequeue");
	must(mfsq_ack(s, NULL, &out[n - 1]), "ack");
	mfsq_unsubscribe(s);
	must(mfsq_subscribe(q, "t", MFSQ_SUB_DURABLE | MFSQ_SUB_FROM_START, NULL, NULL, &s),
	     "subscribe");
	mfsq_unsubscribe(s);
	mfsq_close(q);

	char path[4300];
	snprintf(path, sizeof(path), "%s/compact", fz_scratch());
	must(mkdir(path, 0700), "mkdir");
	must(mdb_env_copy2(env, path, MDB_CP_COMPACT), "compact");
	mdb_env_close(env);
	snprintf(path, sizeof(path), "%s/compact/data.mdb", fz_scratch());
	must(fz_read_file(path, &seed, &seed_len), "read seed");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	seed_queue();
	return 0;
}

/* The damaged store's configuration record is of this format but out of
 * the ranges of a new queue's: mfsq_open() must refuse it (EBADMSG). */
static bool config_bad;

/* Reads the damaged meta database: sets config_bad. */
static void check_records(MDB_txn *txn, MDB_dbi db, const char *name)
{
	MDB_cursor *c;
	MDB_val k, v;

	if (strcmp(name, "q/m") || mdb_cursor_open(txn, db, &c))
		return;
	for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); !r;
	     r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size == 1 && ((char *)k.mv_data)[0] == 'C' &&
		    v.mv_size == sizeof(struct mfsq_disk_config)) {
			struct mfsq_disk_config dc;
			memcpy(&dc, v.mv_data, sizeof(dc));
			config_bad = dc.version == MFSQ_FORMAT_VERSION &&
				     !(dc.nshards >= 1 && dc.nshards <= 1024 &&
				       dc.subshard_msgs >= 1 && dc.subshard_bytes >= 1 &&
				       dc.retain_max >= 2 && dc.max_payload >= 1 &&
				       dc.bucket_us >= 1);
		}
	}
	mdb_cursor_close(c);
}

static int damage(struct fz_in *in)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_dbi main_db, dbs[MAX_DBS];
	unsigned n = 0;
	MDB_val k, v;
	int rc;

	if (env_open(work_dir, MDB_NOSYNC | MDB_NOLOCK, &env))
		return -1;
	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc) {
		mdb_env_close(env);
		return -1;
	}
	/* The main database's keys name the others. */
	char names[MAX_DBS][64];
	rc = mdb_dbi_open(txn, NULL, 0, &main_db);
	if (!rc)
		rc = mdb_cursor_open(txn, main_db, &c);
	if (!rc) {
		for (int r = mdb_cursor_get(c, &k, &v, MDB_FIRST); !r && n < MAX_DBS;
		     r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
			if (k.mv_size >= sizeof(names[0]))
				continue;
			memcpy(names[n], k.mv_data, k.mv_size);
			names[n++][k.mv_size] = '\0';
		}
		mdb_cursor_close(c);
	}
	for (unsigned i = 0; !rc && i < n; i++)
		rc = mdb_dbi_open(txn, names[i], 0, &dbs[i]);
	if (!rc && n && fz_mutate_records(txn, dbs, n, in, 64) < 0)
		rc = -1;
	for (unsigned i = 0; !rc && i < n; i++)
		check_records(txn, dbs[i], names[i]);
	if (rc)
		mdb_txn_abort(txn);
	else
		rc = mdb_txn_commit(txn);
	mdb_env_close(env);
	return rc ? -1 : 0;
}

static uint64_t sink;

static void drain(mfsq_sub *s)
{
	struct mfsq_msg out[8];
	size_t n;

	for (int round = 0; round < 6; round++) {
		int rc = mfsq_dequeue(s, out, 8, &n, 0);
		if (rc == MFSQ_LAGGED)
			continue;
		if (rc)
			break;
		if (n == 0 || n > 8)
			fz_fail("mfsq_dequeue delivered %zu of at most 8", n);
		for (size_t i = 0; i < n; i++)
			if (out[i].len) /* ASan: the payload must be readable */
				sink += ((const uint8_t *)out[i].data)[0] +
					((const uint8_t *)out[i].data)[out[i].len - 1];
		mfsq_ack(s, NULL, &out[n - 1]);
	}
}

static void use_queue(mfsq_queue *q)
{
	mfsq_sub *s;
	struct mfsq_msg m;
	char buf[256], why[256];
	uint64_t cursor = 0;
	int reason;

	/* Enqueues onto the damaged shard state: a stream and a delayed one. */
	struct mfsq_msg_in in[] = {
		{.data = "fz", .len = 2, .enqueuer = 5, .tag = 1},
		{.data = "fzd", .len = 3, .enqueuer = 6, .deliver_us = now_us() + 1000},
	};
	mfsq_enqueue_batch(q, NULL, in, 2, NULL);
	if (!mfsq_subscribe(q, "s", MFSQ_SUB_DURABLE, NULL, NULL, &s)) {
		mfsq_sub_rule(s);
		drain(s);
		mfsq_seek_time(s, 0);
		drain(s);
		mfsq_unsubscribe(s);
	}
	if (!mfsq_subscribe_rule(q, "t", MFSQ_SUB_DURABLE, NULL, why, sizeof(why), &s)) {
		mfsq_seek_seq(s, 1, 1);
		drain(s);
		mfsq_unsubscribe(s);
	}
	if (!mfsq_subscribe(q, NULL, MFSQ_SUB_FROM_START, NULL, NULL, &s)) {
		drain(s);
		mfsq_unsubscribe(s);
	}
	for (int i = 0; i < 16; i++) {
		if (mfsq_exception_next(q, &cursor, &m, &reason, buf, sizeof(buf)))
			break;
		if (m.len && m.data) /* ASan: data lies in buf, up to buflen */
			sink += ((const uint8_t *)m.data)[(m.len < sizeof(buf) ? m.len : sizeof(buf)) - 1];
	}
	mfsq_tick(q);
	struct mfsq_stats st;
	mfsq_stats(q, &st);
}

static void rule_mode(const uint8_t *data, size_t size)
{
	char *rule = malloc(size + 1), why[256];
	MDB_env *env;
	mfsq_queue *q;
	mfsq_sub *s;

	if (!rule)
		abort();
	memcpy(rule, data, size);
	rule[size] = '\0';
	memset(why, 0, sizeof(why));
	int rc = mfsq_rule_check(rule, why, sizeof(why));
	if (rc && !memchr(why, '\0', sizeof(why)))
		fz_fail("mfsq_rule_check: reason not NUL-terminated");
	if (!rc && !env_open(work_dir, 0, &env)) {
		if (!mfsq_open(env, "q", NULL, 0, &q)) {
			rc = mfsq_subscribe_rule(q, NULL, MFSQ_SUB_FROM_START, rule, why,
						 sizeof(why), &s);
			if (rc)
				fz_fail("a rule mfsq_rule_check accepts is refused: %s", why);
			drain(s);
			mfsq_unsubscribe(s);
			mfsq_close(q);
		}
		mdb_env_close(env);
	}
	free(rule);
}

/* The one decoder of message records, on the raw input (cheap, every
 * run): it takes exactly the values that hold a header with a priority and
 * flags an enqueue writes, and its payload ends where the value does. An
 * exact-size copy: ASan sees any read past the value. */
static void decode_raw(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	struct mfsq_disk_msg h;
	const unsigned char *p;
	size_t len;

	if (!copy)
		abort();
	memcpy(copy, data, size);
	for (size_t skip = 0; skip <= 8; skip += 8) {
		MDB_val v = {size, copy};
		int rc = mfsq_msg_decode(&v, skip, &h, &p, &len);
		bool fits = size >= skip + sizeof(h);
		bool sane = fits && copy[skip + offsetof(struct mfsq_disk_msg, prio)] <= MFSQ_PRIO_MAX &&
			    !(copy[skip + offsetof(struct mfsq_disk_msg, flags)] & ~MFSQ_MSG_DELAYED);

		if (rc && rc != EBADMSG)
			fz_fail("mfsq_msg_decode returned %d", rc);
		if (!rc != sane)
			fz_fail("mfsq_msg_decode %s a %zu-byte value", rc ? "refused" : "took", size);
		if (!rc && (p != copy + skip + sizeof(h) || p + len != copy + size))
			fz_fail("mfsq_msg_decode: payload %zu bytes at %td", len, p - copy);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = {.p = data, .n = size};
	char path[4300];
	MDB_env *env;
	mfsq_queue *q;
	unsigned mode = fz_u8(&in);

	if (!seed)
		seed_queue();
	decode_raw(data, size);
	snprintf(path, sizeof(path), "%s/data.mdb", work_dir);
	if (fz_write_file(path, seed, seed_len))
		abort();
	snprintf(path, sizeof(path), "%s/lock.mdb", work_dir);
	unlink(path);
	if (mode % 4 == 3) {
		rule_mode(in.p, in.n);
		return 0;
	}
	config_bad = false;
	if (in.n && damage(&in))
		return 0;
	if (env_open(work_dir, 0, &env))
		return 0;
	int rc = mfsq_open(env, "q", NULL, 0, &q);
	if (config_bad && rc != EBADMSG)
		fz_fail("mfsq_open of a stored configuration out of range: %d", rc);
	if (!rc) {
		use_queue(q);
		mfsq_close(q);
	}
	mdb_env_close(env);
	return 0;
}
