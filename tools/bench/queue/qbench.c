/* SPDX-License-Identifier: MIT */
/*
 * qbench — one benchmark run, one result line. Driven by tools/bench/queue/run.
 *
 *   qbench raw   DIR E S SIZE BATCH DUR N   raw LMDB: puts in batches, readers scan
 *   qbench queue DIR E S SIZE BATCH DUR N   libmfsq: E enqueuer threads, S durable
 *                                           subscribers (dequeue up to 256, ack each)
 *   qbench redis PORT E S SIZE BATCH N      Redis Streams: XADD pipelined by BATCH,
 *                                           XREADGROUP COUNT 256 + XACK, one group
 *                                           per subscriber
 *   qbench delay DIR PENDING PROBES SPAN_S  delayed delivery: PENDING far-future
 *                                           messages, then PROBES due over SPAN_S
 *   qbench floor DIR                        the medium's cheapest durable write
 *                                           (4 KiB overwrite + fdatasync)
 *
 * E enqueuers each send N/E messages; every subscriber receives all N.
 * DUR: 1 = a synced commit per batch, 0 = relaxed (MDB_NOSYNC, a background
 * mdb_env_sync every second, like Redis appendfsync everysec).
 * Output: "msgs/s=... p50_us=... p99_us=..." (end-to-end, enqueue to dequeue).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "mfsq.h"

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void fail(const char *what, int rc)
{
	fprintf(stderr, "qbench: %s: %s\n", what, mfsq_strerror(rc));
	exit(1);
}

/* ---- latency samples ---- */

struct lat {
	uint64_t *v;
	size_t n, cap;
};

static void lat_add(struct lat *l, uint64_t us)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 65536;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			fail("oom", ENOMEM);
	}
	l->v[l->n++] = us;
}

static int u64cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(uint64_t msgs, uint64_t t_us, struct lat *all, int nl)
{
	struct lat m = {0};

	for (int i = 0; i < nl; i++)
		for (size_t j = 0; j < all[i].n; j++)
			lat_add(&m, all[i].v[j]);
	qsort(m.v, m.n, sizeof(*m.v), u64cmp);
	printf("msgs/s=%.0f p50_us=%" PRIu64 " p99_us=%" PRIu64 "\n",
	       (double)msgs * 1e6 / (double)(t_us ? t_us : 1), m.n ? m.v[m.n / 2] : 0,
	       m.n ? m.v[m.n * 99 / 100] : 0);
	free(m.v);
}

/* ---- common: an environment ---- */

/*
 * Durable environments sync every commit. The queue's is opened with
 * MDB_NOMETASYNC: its group commit then syncs once per commit and still
 * returns only after the commit is durable (queue/groupcommit.c). Raw LMDB keeps
 * LMDB's default (two syncs): with one writer and nothing committing after
 * it, a commit is durable on return only that way.
 */
static MDB_env *env_open(const char *dir, int durable, unsigned maxdbs, unsigned extra)
{
	MDB_env *env;
	int rc;

	if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, maxdbs)) ||
	    (rc = mdb_env_set_mapsize(env, (size_t)16 << 30)) ||
	    (rc = mdb_env_set_maxreaders(env, 512)) ||
	    (rc = mdb_env_open(env, dir, MDB_NOTLS | extra | (durable ? 0 : MDB_NOSYNC), 0644)))
		fail("env", rc);
	return env;
}

static atomic_int stop_sync;

static void *syncer(void *arg)
{
	while (!atomic_load(&stop_sync)) {
		for (int i = 0; i < 100 && !atomic_load(&stop_sync); i++)
			usleep(10000);
		mdb_env_sync(arg, 1);
	}
	return NULL;
}

struct job {
	int id, e, s, batch, size;
	uint64_t n; /* messages per enqueuer / expected per subscriber */
	MDB_env *env;
	mfsq_queue *q;
	MDB_dbi dbi;
	struct lat lat;
	atomic_uint_fast64_t *written;
	int port;
};

/* ---- raw LMDB ---- */

static void *raw_writer(void *arg)
{
	struct job *j = arg;
	unsigned char *buf = calloc(1, (size_t)j->size);
	uint64_t seq = 0;

	while (seq < j->n) {
		MDB_txn *txn;
		int rc = mdb_txn_begin(j->env, NULL, 0, &txn);

		for (int b = 0; !rc && b < j->batch && seq < j->n; b++, seq++) {
			unsigned char k[8];
			MDB_val key = {8, k}, val = {(size_t)j->size, buf};
			uint64_t t = now_us();

			for (int i = 0; i < 8; i++)
				k[i] = (unsigned char)(seq >> (56 - 8 * i));
			memcpy(buf, &t, 8);
			rc = mdb_put(txn, j->dbi, &key, &val, MDB_APPEND);
		}
		if (rc || (rc = mdb_txn_commit(txn)))
			fail("raw put", rc);
		atomic_store(j->written, seq);
	}
	free(buf);
	return NULL;
}

static void *raw_reader(void *arg)
{
	struct job *j = arg;
	unsigned char *copy = malloc((size_t)j->size);
	uint64_t next = 0;

	while (next < j->n) {
		MDB_txn *txn;
		MDB_cursor *c;
		MDB_val key, val;
		unsigned char k[8];
		int rc, got = 0;

		if (atomic_load(j->written) <= next) {
			usleep(20);
			continue;
		}
		if ((rc = mdb_txn_begin(j->env, NULL, MDB_RDONLY, &txn)) ||
		    (rc = mdb_cursor_open(txn, j->dbi, &c)))
			fail("raw read", rc);
		for (int i = 0; i < 8; i++)
			k[i] = (unsigned char)(next >> (56 - 8 * i));
		key.mv_size = 8;
		key.mv_data = k;
		for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_KEY); !rc && got < 256;
		     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT), got++) {
			uint64_t t;

			memcpy(copy, val.mv_data, val.mv_size); /* like a dequeue */
			memcpy(&t, copy, 8);
			lat_add(&j->lat, now_us() - t);
			next++;
		}
		mdb_cursor_close(c);
		mdb_txn_abort(txn);
	}
	free(copy);
	return NULL;
}

static int run_raw(int argc, char **argv)
{
	const char *dir = argv[0];
	int e = atoi(argv[1]), s = atoi(argv[2]), size = atoi(argv[3]), batch = atoi(argv[4]);
	int dur = atoi(argv[5]);
	uint64_t n = strtoull(argv[6], NULL, 10), t0;
	MDB_env *env = env_open(dir, dur, 8, 0);
	atomic_uint_fast64_t written = 0;
	struct job w = {0}, *r = calloc((size_t)s, sizeof(*r));
	pthread_t tw, *tr = calloc((size_t)s, sizeof(*tr)), ts;
	struct lat *lats = calloc((size_t)s, sizeof(*lats));
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc;

	(void)argc;
	(void)e; /* one writer: LMDB has one */
	if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) ||
	    (rc = mdb_dbi_open(txn, "raw", MDB_CREATE, &dbi)) || (rc = mdb_txn_commit(txn)))
		fail("raw open", rc);
	w = (struct job){
	    .batch = batch, .size = size, .n = n, .env = env, .dbi = dbi, .written = &written};
	if (!dur)
		pthread_create(&ts, NULL, syncer, env);
	t0 = now_us();
	for (int i = 0; i < s; i++) {
		r[i] = w;
		pthread_create(&tr[i], NULL, raw_reader, &r[i]);
	}
	pthread_create(&tw, NULL, raw_writer, &w);
	pthread_join(tw, NULL);
	for (int i = 0; i < s; i++) {
		pthread_join(tr[i], NULL);
		lats[i] = r[i].lat;
	}
	report(n, now_us() - t0, lats, s);
	atomic_store(&stop_sync, 1);
	if (!dur)
		pthread_join(ts, NULL);
	mdb_env_close(env);
	return 0;
}

/* ---- libmfsq ---- */

static void *q_enqueuer(void *arg)
{
	struct job *j = arg;
	struct mfsq_msg_in *in = calloc((size_t)j->batch, sizeof(*in));
	unsigned char *buf = calloc((size_t)j->batch, (size_t)j->size);
	uint64_t sent = 0;

	while (sent < j->n) {
		int b = 0, rc;
		uint64_t t = now_us();

		for (; b < j->batch && sent + (uint64_t)b < j->n; b++) {
			memcpy(buf + (size_t)b * (size_t)j->size, &t, 8);
			in[b] = (struct mfsq_msg_in){.data = buf + (size_t)b * (size_t)j->size,
						     .len = (size_t)j->size,
						     .enqueuer = (uint64_t)j->id};
		}
		if ((rc = mfsq_enqueue_batch(j->q, NULL, in, (size_t)b, NULL)))
			fail("enqueue", rc);
		sent += (uint64_t)b;
	}
	free(in);
	free(buf);
	return NULL;
}

static void *q_subscriber(void *arg)
{
	struct job *j = arg;
	struct mfsq_msg out[256];
	char name[32];
	mfsq_sub *s;
	uint64_t got = 0;
	int rc;

	snprintf(name, sizeof(name), "bench%d", j->id);
	if ((rc = mfsq_subscribe(j->q, name, MFSQ_SUB_DURABLE, NULL, NULL, &s)))
		fail("subscribe", rc);
	while (got < j->n) {
		size_t n;

		/* a loaded machine may stall the enqueuers for seconds: give up
		 * only after two minutes without a message */
		for (int tries = 0;
		     (rc = mfsq_dequeue(s, out, 256, &n, 5000)) == ETIMEDOUT && tries < 24; tries++)
			;
		if (rc)
			fail("dequeue", rc);
		uint64_t now = now_us();

		for (size_t i = 0; i < n; i++) {
			uint64_t t;

			memcpy(&t, out[i].data, 8);
			lat_add(&j->lat, now - t);
		}
		got += n;
		if ((rc = mfsq_ack(s, NULL, NULL)))
			fail("ack", rc);
	}
	mfsq_unsubscribe(s);
	return NULL;
}

/* QBENCH_TRACE=1: the cache's sizing every 50 ms, to stderr */
static void *tracer(void *arg)
{
	mfsq_queue *q = arg;
	uint64_t t0 = now_us();

	while (!atomic_load(&stop_sync)) {
		struct mfsq_stats st;

		usleep(50000);
		mfsq_stats(q, &st);
		fprintf(stderr,
			"%6.3f s target %" PRIu64 " cached %" PRIu64 " enq %.0f/s deq %.0f/s"
			" hits %" PRIu64 " misses %" PRIu64 " evictions %" PRIu64 "\n",
			(double)(now_us() - t0) / 1e6, st.cache_target_bytes, st.cache_bytes,
			st.enqueue_rate, st.dequeue_rate, st.cache_hits, st.cache_misses,
			st.cache_evictions);
	}
	return NULL;
}

static int run_queue(int argc, char **argv)
{
	const char *dir = argv[0];
	int e = atoi(argv[1]), s = atoi(argv[2]), size = atoi(argv[3]), batch = atoi(argv[4]);
	int dur = atoi(argv[5]);
	uint64_t n = strtoull(argv[6], NULL, 10), t0;
	struct mfsq_config c;
	MDB_env *env;
	mfsq_queue *q;
	struct job *je = calloc((size_t)e, sizeof(*je)), *js = calloc((size_t)s, sizeof(*js));
	pthread_t *te = calloc((size_t)e, sizeof(*te)), *tsb = calloc((size_t)s, sizeof(*tsb)), ts,
		  tt;
	struct lat *lats = calloc((size_t)s, sizeof(*lats));
	int rc;

	(void)argc;
	mfsq_config_default(&c);
	c.nshards = 16;
	c.retain_max = 256;
	env = env_open(dir, dur, mfsq_dbs_needed(&c) + 8, dur ? MDB_NOMETASYNC : 0);
	if ((rc = mfsq_open(env, "bench", &c, MFSQ_CREATE, &q)))
		fail("open", rc);
	mfsq_memory_budget(256u << 20);
	/* create the subscribers first: they must see every message */
	for (int i = 0; i < s; i++) {
		mfsq_sub *sb;
		char name[32];

		snprintf(name, sizeof(name), "bench%d", i);
		if ((rc = mfsq_subscribe(q, name, MFSQ_SUB_DURABLE, NULL, NULL, &sb)))
			fail("subscribe", rc);
		mfsq_unsubscribe(sb);
	}
	if (!dur)
		pthread_create(&ts, NULL, syncer, env);
	if (getenv("QBENCH_TRACE"))
		pthread_create(&tt, NULL, tracer, q);
	t0 = now_us();
	for (int i = 0; i < s; i++) {
		js[i] = (struct job){.id = i, .n = n / (uint64_t)e * (uint64_t)e, .q = q};
		pthread_create(&tsb[i], NULL, q_subscriber, &js[i]);
	}
	for (int i = 0; i < e; i++) {
		je[i] = (struct job){
		    .id = i, .batch = batch, .size = size, .n = n / (uint64_t)e, .q = q};
		pthread_create(&te[i], NULL, q_enqueuer, &je[i]);
	}
	for (int i = 0; i < e; i++)
		pthread_join(te[i], NULL);
	for (int i = 0; i < s; i++) {
		pthread_join(tsb[i], NULL);
		lats[i] = js[i].lat;
	}
	report(n / (uint64_t)e * (uint64_t)e, now_us() - t0, lats, s);
	if (getenv("QBENCH_STATS")) {
		struct mfsq_stats st;

		mfsq_stats(q, &st);
		fprintf(stderr,
			"batches %" PRIu64 " commits %" PRIu64 " hits %" PRIu64 " misses %" PRIu64
			" restores %" PRIu64 " dequeued %" PRIu64 " evictions %" PRIu64
			" target %" PRIu64 " store_only %" PRIu64 " meta_syncs %" PRIu64
			" map_trims %" PRIu64 "\n",
			st.batches, st.commit_groups, st.cache_hits, st.cache_misses,
			st.cache_restores, st.dequeued, st.cache_evictions, st.cache_target_bytes,
			st.store_only_enqueues, st.meta_syncs, st.map_trims);
	}
	atomic_store(&stop_sync, 1);
	if (!dur)
		pthread_join(ts, NULL);
	if (getenv("QBENCH_TRACE"))
		pthread_join(tt, NULL);
	mfsq_close(q);
	mdb_env_close(env);
	return 0;
}

/* ---- Redis Streams (a minimal RESP client) ---- */

struct conn {
	int fd;
	char *buf;
	size_t len, pos, cap;
};

static void conn_open(struct conn *c, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1;

	memset(c, 0, sizeof(*c));
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)))
		fail("connect", errno);
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->cap = 1 << 20;
	c->buf = malloc(c->cap);
}

static void send_all(struct conn *c, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(c->fd, p, n);

		if (w <= 0)
			fail("write", errno);
		p += w;
		n -= (size_t)w;
	}
}

static int fill(struct conn *c)
{
	ssize_t r;

	if (c->pos > 0 && c->pos == c->len)
		c->pos = c->len = 0;
	if (c->len == c->cap) {
		if (c->pos) {
			memmove(c->buf, c->buf + c->pos, c->len - c->pos);
			c->len -= c->pos;
			c->pos = 0;
		} else {
			c->cap *= 2;
			c->buf = realloc(c->buf, c->cap);
		}
	}
	r = read(c->fd, c->buf + c->len, c->cap - c->len);
	if (r <= 0)
		fail("read", errno);
	c->len += (size_t)r;
	return 0;
}

/* A line ending in CRLF, returned NUL-terminated (in the buffer). */
static char *line(struct conn *c)
{
	for (;;) {
		char *p = memchr(c->buf + c->pos, '\n', c->len - c->pos);

		if (p) {
			char *s = c->buf + c->pos;

			*(p - 1) = 0;
			c->pos = (size_t)(p - c->buf) + 1;
			return s;
		}
		fill(c);
	}
}

/* Bulk string body of length n (plus CRLF) into out (may be NULL). */
static void bulk(struct conn *c, long n, char *out, size_t outlen)
{
	while (c->len - c->pos < (size_t)n + 2)
		fill(c);
	if (out) {
		size_t k = (size_t)n < outlen ? (size_t)n : outlen - 1;

		memcpy(out, c->buf + c->pos, k);
		out[k] = 0;
	}
	c->pos += (size_t)n + 2;
}

/* Skip one reply of any kind. */
static void skip_reply(struct conn *c)
{
	char *l = line(c), t = l[0];
	long n = atol(l + 1);

	if (t == '-') {
		fprintf(stderr, "redis: %s\n", l);
		exit(1);
	}
	if (t == '$' && n >= 0)
		bulk(c, n, NULL, 0);
	if (t == '*')
		for (long i = 0; i < n; i++)
			skip_reply(c);
}

static void cmd_append(char **out, size_t *len, size_t *cap, int argc, const char **argv,
		       const size_t *alen)
{
	size_t need = 32;

	for (int i = 0; i < argc; i++)
		need += alen[i] + 32;
	if (*len + need > *cap) {
		*cap = (*len + need) * 2;
		*out = realloc(*out, *cap);
	}
	*len += (size_t)sprintf(*out + *len, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		*len += (size_t)sprintf(*out + *len, "$%zu\r\n", alen[i]);
		memcpy(*out + *len, argv[i], alen[i]);
		*len += alen[i];
		memcpy(*out + *len, "\r\n", 2);
		*len += 2;
	}
}

static void *r_producer(void *arg)
{
	struct job *j = arg;
	struct conn c;
	char *payload = calloc(1, (size_t)j->size), *out = NULL;
	size_t cap = 0;
	uint64_t sent = 0;

	conn_open(&c, j->port);
	while (sent < j->n) {
		size_t len = 0;
		int b = 0;
		uint64_t t = now_us();

		memcpy(payload, &t, 8);
		for (; b < j->batch && sent + (uint64_t)b < j->n; b++) {
			const char *av[] = {"XADD", "bench", "*", "d", payload};
			size_t al[] = {4, 5, 1, 1, (size_t)j->size};

			cmd_append(&out, &len, &cap, 5, av, al);
		}
		send_all(&c, out, len);
		for (int i = 0; i < b; i++)
			skip_reply(&c);
		sent += (uint64_t)b;
	}
	close(c.fd);
	free(payload);
	free(out);
	return NULL;
}

static void *r_consumer(void *arg)
{
	struct job *j = arg;
	struct conn c;
	char group[32], *out = NULL, (*ids)[48] = malloc(256 * sizeof(*ids));
	char *pay = malloc((size_t)j->size + 1);
	size_t cap = 0;
	uint64_t got = 0;

	snprintf(group, sizeof(group), "g%d", j->id);
	conn_open(&c, j->port);
	while (got < j->n) {
		const char *av[] = {"XREADGROUP", "GROUP", group,     "c",     "COUNT", "256",
				    "BLOCK",	  "1000",  "STREAMS", "bench", ">"};
		size_t al[11], len = 0;
		char *l;
		long nstreams, nmsg = 0;

		for (int i = 0; i < 11; i++)
			al[i] = strlen(av[i]);
		cmd_append(&out, &len, &cap, 11, av, al);
		send_all(&c, out, len);
		l = line(&c);
		if (l[0] != '*')
			fail("xreadgroup reply", EPROTO);
		nstreams = atol(l + 1);
		if (nstreams <= 0)
			continue;
		/* *1 -> [ name, [ [id, [field, value]] ... ] ] */
		line(&c);		   /* *2 */
		skip_reply(&c);		   /* stream name */
		nmsg = atol(line(&c) + 1); /* *N */
		uint64_t now = now_us();

		for (long m = 0; m < nmsg; m++) {
			long fl;

			line(&c); /* *2 */
			bulk(&c, atol(line(&c) + 1), ids[m], sizeof(ids[m]));
			fl = atol(line(&c) + 1);
			for (long f = 0; f < fl; f++) {
				long bl = atol(line(&c) + 1);

				bulk(&c, bl, f == 1 ? pay : NULL, (size_t)j->size + 1);
			}
			uint64_t t;

			memcpy(&t, pay, 8);
			lat_add(&j->lat, now - t);
		}
		got += (uint64_t)nmsg;
		/* XACK bench group id... */
		{
			const char **xv = malloc((size_t)(nmsg + 3) * sizeof(*xv));
			size_t *xl = malloc((size_t)(nmsg + 3) * sizeof(*xl));

			xv[0] = "XACK";
			xv[1] = "bench";
			xv[2] = group;
			for (long m = 0; m < nmsg; m++)
				xv[3 + m] = ids[m];
			for (long m = 0; m < nmsg + 3; m++)
				xl[m] = strlen(xv[m]);
			len = 0;
			cmd_append(&out, &len, &cap, (int)nmsg + 3, xv, xl);
			send_all(&c, out, len);
			skip_reply(&c);
			free(xv);
			free(xl);
		}
	}
	close(c.fd);
	free(out);
	free(ids);
	free(pay);
	return NULL;
}

static int run_redis(int argc, char **argv)
{
	int port = atoi(argv[0]), e = atoi(argv[1]), s = atoi(argv[2]), size = atoi(argv[3]);
	int batch = atoi(argv[4]);
	uint64_t n = strtoull(argv[5], NULL, 10), t0;
	struct job *je = calloc((size_t)e, sizeof(*je)), *js = calloc((size_t)s, sizeof(*js));
	pthread_t *te = calloc((size_t)e, sizeof(*te)), *tsb = calloc((size_t)s, sizeof(*tsb));
	struct lat *lats = calloc((size_t)s, sizeof(*lats));
	struct conn c;
	char *out = NULL;
	size_t cap = 0, len = 0;

	(void)argc;
	conn_open(&c, port);
	{
		const char *av[] = {"DEL", "bench"};
		size_t al[] = {3, 5};

		cmd_append(&out, &len, &cap, 2, av, al);
	}
	for (int i = 0; i < s; i++) {
		char g[32];
		const char *av[] = {"XGROUP", "CREATE", "bench", g, "$", "MKSTREAM"};
		size_t al[6];

		snprintf(g, sizeof(g), "g%d", i);
		for (int k = 0; k < 6; k++)
			al[k] = strlen(av[k]);
		cmd_append(&out, &len, &cap, 6, av, al);
	}
	send_all(&c, out, len);
	for (int i = 0; i < s + 1; i++)
		skip_reply(&c);
	t0 = now_us();
	for (int i = 0; i < s; i++) {
		js[i] = (struct job){
		    .id = i, .n = n / (uint64_t)e * (uint64_t)e, .size = size, .port = port};
		pthread_create(&tsb[i], NULL, r_consumer, &js[i]);
	}
	for (int i = 0; i < e; i++) {
		je[i] = (struct job){
		    .id = i, .batch = batch, .size = size, .n = n / (uint64_t)e, .port = port};
		pthread_create(&te[i], NULL, r_producer, &je[i]);
	}
	for (int i = 0; i < e; i++)
		pthread_join(te[i], NULL);
	for (int i = 0; i < s; i++) {
		pthread_join(tsb[i], NULL);
		lats[i] = js[i].lat;
	}
	report(n / (uint64_t)e * (uint64_t)e, now_us() - t0, lats, s);
	close(c.fd);
	return 0;
}

/* ---- the medium's cheapest durable write ---- */

/*
 * COUNT overwrites of one 4 KiB block of a file that is already allocated
 * and on disk, each followed by fdatasync (no metadata to journal): no
 * message can be durable sooner, so a caller that waits for each of its
 * messages to be durable can send at most 1 / p50 of them per second.
 */
static int run_floor(int argc, char **argv)
{
	enum { COUNT = 2000, BLOCKS = 256 };
	static char blk[4096];
	char path[4096];
	struct lat l = {0};
	uint64_t t;
	int fd;

	(void)argc;
	snprintf(path, sizeof(path), "%s/floor", argv[0]);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		fail(path, errno);
	memset(blk, 'f', sizeof(blk));
	for (int i = 0; i < BLOCKS; i++)
		if (pwrite(fd, blk, sizeof(blk), (off_t)i * 4096) != (ssize_t)sizeof(blk))
			fail("floor: write", errno);
	if (fsync(fd))
		fail("floor: fsync", errno);
	for (int i = 0; i < COUNT; i++) {
		t = now_us();
		if (pwrite(fd, blk, sizeof(blk), (off_t)(i % BLOCKS) * 4096) !=
			(ssize_t)sizeof(blk) ||
		    fdatasync(fd))
			fail("floor: durable write", errno);
		lat_add(&l, now_us() - t);
	}
	close(fd);
	unlink(path);
	qsort(l.v, l.n, sizeof(*l.v), u64cmp);
	printf("durable_write_p50_us=%" PRIu64 " p99_us=%" PRIu64 " lone_caller_max_msgs_s=%" PRIu64
	       "\n",
	       l.v[l.n / 2], l.v[l.n * 99 / 100], l.v[l.n / 2] ? 1000000u / l.v[l.n / 2] : 0);
	free(l.v);
	return 0;
}

/* ---- delayed delivery at scale ---- */

static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[256];
	long kb = -1;
	size_t fl = strlen(field);

	while (f && fgets(l, sizeof(l), f))
		if (!strncmp(l, field, fl) && l[fl] == ':')
			kb = atol(l + fl + 1);
	if (f)
		fclose(f);
	return kb;
}

static int run_delay(int argc, char **argv)
{
	const char *dir = argv[0];
	uint64_t pending = strtoull(argv[1], NULL, 10), probes = strtoull(argv[2], NULL, 10);
	double span = atof(argv[3]);
	struct mfsq_config c;
	struct mfsq_msg_in in[1000];
	uint64_t tags[1000], t0, got = 0;
	struct lat lat = {0};
	struct mfsq_stats st;
	MDB_env *env;
	mfsq_queue *q;
	mfsq_sub *s;
	pthread_t ts;
	int rc;

	(void)argc;
	mfsq_config_default(&c);
	c.nshards = 4;
	env = env_open(dir, 0, mfsq_dbs_needed(&c) + 8, 0);
	if ((rc = mfsq_open(env, "delay", &c, MFSQ_CREATE, &q)))
		fail("open", rc);
	if (!getenv("QBENCH_NOSYNC"))
		pthread_create(&ts, NULL, syncer, env);
	if ((rc = mfsq_subscribe(q, NULL, 0, NULL, NULL, &s)))
		fail("subscribe", rc);
	/* far-future messages: due in 1..30 days, in enqueue order (a TTL-like
	 * workload; random due times cost LMDB random inserts instead) */
	t0 = now_us();
	for (uint64_t i = 0; i < pending;) {
		size_t b = 0;

		for (; b < 1000 && i < pending; b++, i++) {
			tags[b] = i;
			in[b] = (struct mfsq_msg_in){
			    .data = &tags[b],
			    .len = 8,
			    .enqueuer = i % 64,
			    .deliver_us = t0 + 86400ull * 1000000u +
					  (uint64_t)((double)i / (double)pending * 29.0 * 86400e6)};
		}
		if ((rc = mfsq_enqueue_batch(q, NULL, in, b, NULL)))
			fail("enqueue", rc);
	}
	fprintf(stderr,
		"delay: %" PRIu64 " pending enqueued in %.1f s, VmRSS %ld kB RssAnon %ld kB"
		" RssFile %ld kB RssShmem %ld kB\n",
		pending, (double)(now_us() - t0) / 1e6, status_kb("VmRSS"), status_kb("RssAnon"),
		status_kb("RssFile"), status_kb("RssShmem"));
	/* probes: due over span seconds from 1 s on (enqueueing them all takes
	 * less than that; this thread then only dequeues) */
	t0 = now_us() + 1000000;
	for (uint64_t i = 0; i < probes;) {
		size_t b = 0;

		for (; b < 1000 && i < probes; b++, i++) {
			tags[b] = i;
			in[b] = (struct mfsq_msg_in){
			    .data = &tags[b],
			    .len = 8,
			    .enqueuer = i % 64,
			    .deliver_us = t0 + (uint64_t)((double)i / (double)probes * span * 1e6)};
		}
		if ((rc = mfsq_enqueue_batch(q, NULL, in, b, NULL)))
			fail("enqueue", rc);
	}
	if (now_us() >= t0)
		fprintf(stderr, "delay: probes enqueued too slowly, lateness overstated\n");
	while (got < probes) {
		struct mfsq_msg out[256];
		size_t n;

		/* a loaded machine may stall the enqueuers for seconds: give up
		 * only after two minutes without a message */
		for (int tries = 0;
		     (rc = mfsq_dequeue(s, out, 256, &n, 5000)) == ETIMEDOUT && tries < 24; tries++)
			;
		if (rc)
			fail("dequeue", rc);
		uint64_t now = now_us();

		for (size_t i = 0; i < n; i++)
			lat_add(&lat, now - out[i].deliver_us);
		got += n;
	}
	qsort(lat.v, lat.n, sizeof(*lat.v), u64cmp);
	mfsq_stats(q, &st);
	printf("pending=%" PRIu64 " VmRSS_kB=%ld VmHWM_kB=%ld RssAnon_kB=%ld RssFile_kB=%ld"
	       " lateness_p50_us=%" PRIu64 " p99_us=%" PRIu64 " max_us=%" PRIu64
	       " still_pending=%" PRIu64 "\n",
	       pending, status_kb("VmRSS"), status_kb("VmHWM"), status_kb("RssAnon"),
	       status_kb("RssFile"), lat.v[lat.n / 2], lat.v[lat.n * 99 / 100], lat.v[lat.n - 1],
	       st.delayed_pending);
	mfsq_unsubscribe(s);
	atomic_store(&stop_sync, 1);
	if (!getenv("QBENCH_NOSYNC"))
		pthread_join(ts, NULL);
	mfsq_close(q);
	mdb_env_close(env);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 9 && !strcmp(argv[1], "raw"))
		return run_raw(argc - 2, argv + 2);
	if (argc == 9 && !strcmp(argv[1], "queue"))
		return run_queue(argc - 2, argv + 2);
	if (argc == 8 && !strcmp(argv[1], "redis"))
		return run_redis(argc - 2, argv + 2);
	if (argc == 6 && !strcmp(argv[1], "delay"))
		return run_delay(argc - 2, argv + 2);
	if (argc == 3 && !strcmp(argv[1], "floor"))
		return run_floor(argc - 2, argv + 2);
	fprintf(stderr, "usage: see the comment at the top of qbench.c\n");
	return 2;
}
