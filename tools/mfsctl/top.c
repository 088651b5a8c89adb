/*
 * mfsctl-top: the live view behind `mfsctl top` (mfsctl(8)). It reads what
 * any script could: the manager's .list and each DBFS's NAME/stats (the
 * accountant's rates), and draws one line per DBFS with ncurses (which
 * redraws only what changed: no flicker), refreshed every -d seconds;
 * q quits, s cycles the sort key. -b prints plain frames (-n of them).
 *
 * usage: mfsctl-top -m MANAGER [-s KEY] [-d SECONDS] [-b] [-n COUNT] [-p]
 */
#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct row {
	char name[65];
	char state[16];
	double ops, rd, wr, thr, feed; /* per second, last 1 s */
	double p50, p99;              /* us, last 10 s */
	double used, quota, inodes, quota_inodes, lag;
	double share, cache; /* the governor's: worker share (0: fair share only), cache limit */
};

/* Sort keys: the name -s takes, the field, descending (numbers) or not. */
static const struct key {
	const char *name;
	size_t off; /* in struct row; (size_t)-1: the name */
} keys[] = {
    {"ops", offsetof(struct row, ops)},	   {"read", offsetof(struct row, rd)},
    {"write", offsetof(struct row, wr)},   {"p50", offsetof(struct row, p50)},
    {"p99", offsetof(struct row, p99)},	   {"used", offsetof(struct row, used)},
    {"inodes", offsetof(struct row, inodes)}, {"throttled", offsetof(struct row, thr)},
    {"feed", offsetof(struct row, feed)},  {"lag", offsetof(struct row, lag)},
    {"name", (size_t)-1},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))
static unsigned sort_key;
static bool exact;

static void usage(FILE *f)
{
	fprintf(f, "usage: mfsctl-top -m MANAGER [-s KEY] [-d SECONDS] [-b] [-n COUNT] [-p]\n"
		   "keys: ops read write p50 p99 used inodes throttled feed lag name\n");
}

/* The first value of `key=` (a rate line holds 1s,10s,60s: the first). */
static double field(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == '=')
			return strtod(p + n + 1, NULL);
	return 0;
}

/* The second value (the 10 s rate) of `key=1s,10s,60s`. */
static double field10(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == '=') {
			const char *c = strchr(p + n + 1, ',');
			return c ? strtod(c + 1, NULL) : 0;
		}
	return 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - len < 4096) {
			char *p = realloc(buf, cap = cap ? 2 * cap : 8192);
			if (!p)
				break;
			buf = p;
		}
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		if (!got)
			break;
		len += got;
	}
	fclose(f);
	if (buf)
		buf[len] = 0;
	return buf;
}

/* The value of `key=` in one .list line (escapes undone), into out. */
static void list_value(const char *line, const char *key, char *out, size_t cap)
{
	size_t n = strlen(key), o = 0;
	const char *p = line;

	out[0] = 0;
	while (*p && *p != '\n') {
		if (!strncmp(p, key, n) && p[n] == '=') {
			for (p += n + 1; *p && *p != '\n' && *p != ',' && o + 1 < cap; p++) {
				if (*p == '\\' && p[1])
					p++;
				out[o++] = *p;
			}
			out[o] = 0;
			return;
		}
		while (*p && *p != '\n' && *p != ',')
			p += *p == '\\' && p[1] ? 2 : 1;
		if (*p == ',')
			p++;
	}
}

static int compare(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	const struct key *k = &keys[sort_key];

	if (k->off == (size_t)-1)
		return strcmp(x->name, y->name);
	double u = *(const double *)((const char *)x + k->off);
	double v = *(const double *)((const char *)y + k->off);
	return u < v ? 1 : u > v ? -1 : strcmp(x->name, y->name);
}

/* Read every DBFS; returns the count (rows in *out, realloc'd). */
static size_t sample(const char *mgr, struct row **out, size_t *cap)
{
	char path[4200];
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/.list", mgr);
	char *list = slurp(path);
	if (!list)
		return 0;
	for (char *line = list, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			next++;
		if (*line == '\n')
			continue;
		if (n == *cap) {
			struct row *p = realloc(*out, (*cap = *cap ? 2 * *cap : 16) * sizeof(*p));
			if (!p)
				break;
			*out = p;
		}
		struct row *r = &(*out)[n];
		memset(r, 0, sizeof(*r));
		list_value(line, "name", r->name, sizeof(r->name));
		list_value(line, "state", r->state, sizeof(r->state));
		if (!r->name[0])
			continue;
		n++;
		snprintf(path, sizeof(path), "%s/%s/stats", mgr, r->name);
		char *st = strcmp(r->state, "mounted") ? NULL : slurp(path);
		if (!st)
			continue;
		r->ops = field(st, "ops_rate");
		r->rd = field(st, "read_bytes_rate");
		r->wr = field(st, "write_bytes_rate");
		r->thr = field(st, "throttled_rate");
		r->feed = field10(st, "feed_events_rate"); /* sampled every 10 s */
		r->p50 = field(st, "recent_latency_p50_us");
		r->p99 = field(st, "recent_latency_p99_us");
		r->used = field(st, "bytes_used");
		r->quota = field(st, "quota_bytes");
		r->inodes = field(st, "inodes_used");
		r->quota_inodes = field(st, "quota_inodes");
		r->lag = field(st, "feed_lag");
		r->share = field(st, "worker_share");
		r->cache = field(st, "cache_limit");
		free(st);
	}
	free(list);
	qsort(*out, n, sizeof(**out), compare);
	return n;
}

/* A number in `w` columns: 1-2-3 digits and K/M/G/T (x1024 for bytes). */
static const char *num(char *buf, double v, bool bytes)
{
	static const char u[] = " KMGTPE";
	double base = bytes ? 1024 : 1000;
	int i = 0;

	if (exact) {
		snprintf(buf, 24, "%.0f", v);
		return buf;
	}
	while (v >= base * 0.9995 && i < 6) {
		v /= base;
		i++;
	}
	if (!i)
		snprintf(buf, 24, v && v < 10 && v != floor(v) ? "%.1f" : "%.0f", v);
	else
		snprintf(buf, 24, v < 10 ? "%.1f%c" : "%.0f%c", v, u[i]);
	return buf;
}

static const char *lat(char *buf, double us)
{
	if (exact || us < 1000)
		snprintf(buf, 24, "%.0f%s", us, exact ? "" : "us");
	else if (us < 1e6)
		snprintf(buf, 24, us < 10000 ? "%.1fms" : "%.0fms", us / 1000);
	else
		snprintf(buf, 24, "%.1fs", us / 1e6);
	return buf;
}

static const char *of(char *buf, double v, double q, bool bytes)
{
	char a[24], b[24];
	if (q > 0)
		snprintf(buf, 48, "%s/%s", num(a, v, bytes), num(b, q, bytes));
	else
		snprintf(buf, 48, "%s", num(a, v, bytes));
	return buf;
}

/* Columns: 8 5 5 5 5 5 9 7 4 4 4 2 5 and 12 spaces = 80. WK: the
 * governor's worker share ("-": the fair share only); CACHE: its cache
 * limit (the manager's mem= split by activity). */
#define HEAD_FMT "%-8s %5s %5s %5s %5s %5s %9s %7s %4s %4s %4s %2s %5s"

static void line_of(char *out, size_t cap, const struct row *r)
{
	char a[24], b[24], c[24], d[24], e[24], f[48], g[48], h[24], i[24], j[24], k[24], l[24];

	snprintf(k, sizeof(k), "%.0f", r->share);
	snprintf(out, cap, HEAD_FMT, r->name, num(a, r->ops, false), num(b, r->rd, true),
		 num(c, r->wr, true), lat(d, r->p50), lat(e, r->p99), of(f, r->used, r->quota, true),
		 of(g, r->inodes, r->quota_inodes, false), num(h, r->thr, false),
		 num(i, r->feed, false), num(j, r->lag, false), r->share > 0 ? k : "-",
		 r->cache > 0 ? num(l, r->cache, true) : "-");
	if (!exact && strlen(out) > 80) /* a long name or value: never wrap the screen */
		out[80] = 0;
}

static void title(char *out, size_t cap, size_t n, const struct row *rows)
{
	char t[16], a[24], b[24], c[24];
	double ops = 0, rd = 0, wr = 0;
	time_t now = time(NULL);

	for (size_t i = 0; i < n; i++) {
		ops += rows[i].ops;
		rd += rows[i].rd;
		wr += rows[i].wr;
	}
	strftime(t, sizeof(t), "%H:%M:%S", localtime(&now));
	snprintf(out, cap, "mfs top %s  %zu DBFS  %s ops/s  %sB/s read  %sB/s written  sort %s", t,
		 n, num(a, ops, false), num(b, rd, true), num(c, wr, true), keys[sort_key].name);
	if (strlen(out) > 80)
		out[80] = 0;
}

int main(int argc, char **argv)
{
	const char *mgr = NULL;
	double delay = 1;
	long count = -1;
	bool batch = false;
	int o;

	setlocale(LC_ALL, "");
	while ((o = getopt(argc, argv, "m:s:d:bn:ph")) != -1) {
		char *end;
		switch (o) {
		case 'm':
			mgr = optarg;
			break;
		case 's':
			for (sort_key = 0; sort_key < NKEYS && strcmp(keys[sort_key].name, optarg);
			     sort_key++)
				;
			if (sort_key == NKEYS) {
				fprintf(stderr, "mfsctl top: unknown sort key '%s'\n", optarg);
				usage(stderr);
				return 2;
			}
			break;
		case 'd':
			delay = strtod(optarg, &end);
			if (*end || !(delay >= 0.1 && delay <= 3600)) {
				fprintf(stderr, "mfsctl top: -d takes seconds from 0.1 to 3600\n");
				return 2;
			}
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*end || count < 1) {
				fprintf(stderr, "mfsctl top: -n takes a count of frames (1 or more)\n");
				return 2;
			}
			break;
		case 'b':
			batch = true;
			break;
		case 'p':
			exact = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!mgr || optind != argc) {
		usage(stderr);
		return 2;
	}
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/.list", mgr);
	if (access(probe, R_OK)) {
		fprintf(stderr, "mfsctl top: %s: %s\n", probe, strerror(errno));
		return 3;
	}

	struct row *rows = NULL;
	size_t cap = 0;
	char text[256];
	if (batch) {
		for (long frame = 0; count < 0 || frame < count; frame++) {
			if (frame) {
				struct timespec ts = {(time_t)delay,
						      (long)((delay - floor(delay)) * 1e9)};
				nanosleep(&ts, NULL);
			}
			size_t n = sample(mgr, &rows, &cap);
			title(text, sizeof(text), n, rows);
			printf("%s\n", text);
			printf(HEAD_FMT "\n", "NAME", "OPS/S", "RD/S", "WR/S", "P50", "P99", "USED",
			       "INODES", "THR", "FEED", "LAG", "WK", "CACHE");
			for (size_t i = 0; i < n; i++) {
				line_of(text, sizeof(text), &rows[i]);
				printf("%s\n", text);
			}
			printf("\n");
			fflush(stdout);
		}
		free(rows);
		return 0;
	}

	if (!initscr()) {
		fprintf(stderr, "mfsctl top: cannot use the terminal (try -b)\n");
		return 3;
	}
	cbreak();
	noecho();
	curs_set(0);
	keypad(stdscr, TRUE);
	timeout((int)(delay * 1000));
	for (long frame = 0; count < 0 || frame < count; frame++) {
		size_t n = sample(mgr, &rows, &cap);
		erase();
		title(text, sizeof(text), n, rows);
		mvaddnstr(0, 0, text, COLS);
		snprintf(text, sizeof(text), HEAD_FMT, "NAME", "OPS/S", "RD/S", "WR/S", "P50", "P99",
			 "USED", "INODES", "THR", "FEED", "LAG", "WK", "CACHE");
		attron(A_REVERSE);
		mvaddnstr(2, 0, text, COLS);
		attroff(A_REVERSE);
		for (size_t i = 0; i < n && (int)i + 3 < LINES; i++) {
			line_of(text, sizeof(text), &rows[i]);
			mvaddnstr(3 + (int)i, 0, text, COLS);
		}
		refresh();
		int ch = getch();
		if (ch == 'q' || ch == 'Q')
			break;
		if (ch == 's')
			sort_key = (sort_key + 1) % NKEYS;
	}
	endwin();
	free(rows);
	return 0;
}
