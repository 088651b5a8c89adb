/* Status text (see render.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "render.h"
#include "uring.h"
#include "verbs.h"

const char *const mfs_file_names[MFS_NFILES] = {
	[MFS_FILE_STATUS] = "status",
	[MFS_FILE_STATS] = "stats",
	[MFS_FILE_CONFIG] = "config",
};

static void usage_of(struct mfs_dbfs *d, struct dbfs_usage *u)
{
	memset(u, 0, sizeof(*u));
	if (d->state == MFS_MOUNTED && d->fs)
		dbfs_usage(d->fs, u);
}

static void render_status(struct mfs_dbfs *d, struct mfs_buf *b)
{
	mfs_buf_printf(b, "name=%s\nstate=%s\n", d->conf.name, mfs_state_name(d->state));
	if (d->reason[0])
		mfs_buf_printf(b, "reason=%s\n", d->reason);
	mfs_buf_printf(b, "mountpoint=%s\nstore=%s\nowner=%u\n", d->conf.mountpoint,
		       d->conf.store, (unsigned)d->conf.owner);
	if (d->state == MFS_MOUNTED)
		mfs_buf_printf(b, "mounted_since=%llu\nconnection=%u\n",
			       (unsigned long long)d->mounted_at, d->conn);
}

static void render_config(struct mfs_dbfs *d, struct mfs_buf *b)
{
	mfs_buf_printf(b, "options=%s\nwant=%s\n", d->conf.opts,
		       d->conf.want_mounted ? "mounted" : "unmounted");
}

static void render_stats(struct mfs_dbfs *d, struct mfs_buf *b)
{
	struct dbfs_usage u;
	struct dbfs_counters c = {0};
	struct mfs_session_stats st = {0};

	usage_of(d, &u);
	uint64_t cb = 0, cl = 0, ct = 0;
	if (d->state == MFS_MOUNTED && d->fs) {
		dbfs_counters(d->fs, &c);
		dbfs_cache_usage(d->fs, &cb, &cl, &ct);
	}
	if (d->state == MFS_MOUNTED && d->sess)
		mfs_loop_stats(d->sess, &st);
	mfs_buf_printf(b,
		       "name=%s\nstate=%s\nrequests=%llu\nops=%llu\nerrors=%llu\n"
		       "read_bytes=%llu\nwrite_bytes=%llu\ncommits=%llu\nbatched_ops=%llu\n"
		       "latency_p50_us=%llu\nlatency_p99_us=%llu\nlatency_max_us=%llu\n"
		       "inflight=%u\npeak_inflight=%u\nthrottled=%llu\ncapped=%llu\nexpress=%llu\nring=%llu\n"
		       "yielded=%llu\nstarved=%llu\nyield_waits=%llu\n"
		       "bytes_used=%llu\nquota_bytes=%llu\ninodes_used=%llu\nquota_inodes=%llu\n"
		       "map_size=%llu\nfile_size=%llu\n"
		       "max_concurrent=%u\niops_limit=%llu\nbandwidth_limit=%llu\n"
		       "cache_bytes=%llu\ncache_limit=%llu\ncache_trimmed=%llu\n",
		       d->conf.name, mfs_state_name(d->state), (unsigned long long)st.ops,
		       (unsigned long long)c.ops, (unsigned long long)c.errors,
		       (unsigned long long)st.read_bytes, (unsigned long long)st.write_bytes,
		       (unsigned long long)c.commits, (unsigned long long)c.batched_ops,
		       (unsigned long long)mfs_lat_percentile(&st, 50) / 1000,
		       (unsigned long long)mfs_lat_percentile(&st, 99) / 1000,
		       (unsigned long long)st.lat_max_ns / 1000, st.inflight, st.peak_inflight,
		       (unsigned long long)st.throttled, (unsigned long long)st.capped,
		       (unsigned long long)st.express, (unsigned long long)st.ring,
		       (unsigned long long)st.yielded, (unsigned long long)st.starved,
		       (unsigned long long)st.yield_waits,
		       (unsigned long long)u.bytes, (unsigned long long)d->quota_bytes,
		       (unsigned long long)u.inodes, (unsigned long long)d->quota_inodes,
		       (unsigned long long)u.map_size, (unsigned long long)u.file_size,
		       d->limits.max_concurrent, (unsigned long long)d->limits.iops,
		       (unsigned long long)d->limits.bandwidth, (unsigned long long)cb,
		       (unsigned long long)cl, (unsigned long long)ct);
}

static void render_list(struct mfs_manager *mgr, struct mfs_buf *b)
{
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		struct dbfs_usage u;
		usage_of(d, &u);
		mfs_buf_printf(b, "name=");
		mfs_buf_escaped(b, d->conf.name);
		mfs_buf_printf(b, ",state=%s,mountpoint=", mfs_state_name(d->state));
		mfs_buf_escaped(b, d->conf.mountpoint);
		mfs_buf_printf(b, ",store=");
		mfs_buf_escaped(b, d->conf.store);
		mfs_buf_printf(b, ",bytes=%llu,inodes=%llu", (unsigned long long)u.bytes,
			       (unsigned long long)u.inodes);
		if (d->reason[0] && d->state == MFS_FAILED) {
			mfs_buf_printf(b, ",reason=");
			mfs_buf_escaped(b, d->reason);
		}
		mfs_buf_printf(b, "\n");
	}
}

static unsigned count_dir(const char *path)
{
	DIR *dir = opendir(path);
	unsigned n = 0;

	if (!dir)
		return 0;
	for (struct dirent *e; (e = readdir(dir));)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static void render_manager(struct mfs_manager *mgr, struct mfs_buf *b)
{
	unsigned total = 0, mounted = 0;
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%*d %ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	for (struct mfs_dbfs *d = mgr->list; d; d = d->next) {
		total++;
		mounted += d->state == MFS_MOUNTED;
	}
	mfs_buf_printf(b,
		       "version=%s\npid=%d\nuptime=%llu\nmountpoint=%s\nstate_dir=%s\n"
		       "workers=%u\nthreads=%u\nrss_kib=%ld\nfds=%u\ndbfs=%u\nmounted=%u\n"
		       "uring_queues=%u\nuring_offered=%s\nuring_roams=%llu\n",
		       MFS_VERSION, (int)getpid(),
		       (unsigned long long)(time(NULL) - (time_t)mgr->started_at), mgr->mountpoint,
		       mgr->state_dir, mfs_loop_workers(mgr->loop), count_dir("/proc/self/task"),
		       pages * (sysconf(_SC_PAGESIZE) / 1024), count_dir("/proc/self/fd"), total,
		       mounted, mfs_uring_queues(mgr->uring), mfs_uring_kernel_enabled() ? "yes" : "no",
		       (unsigned long long)mfs_uring_roams(mgr->uring));
}

int mfs_render_attr(struct mfs_manager *mgr, const char *attr, const struct mfs_caller *who,
		    struct mfs_buf *out)
{
	const struct mfs_verb *v = mfs_verb_find(attr);
	int rc = 0;

	if (v) {
		mfs_buf_printf(out, "%s", v->usage);
		return 0;
	}
	if (strncmp(attr, "user.mfs.", 9))
		return -ENODATA;
	attr += 9;
	if (!strcmp(attr, "error")) {
		char text[400];
		mfs_error_text(who, text, sizeof(text));
		mfs_buf_printf(out, "%s", text);
		return 0;
	}
	pthread_mutex_lock(&mgr->lock);
	if (!strcmp(attr, "list")) {
		render_list(mgr, out);
	} else if (!strcmp(attr, "status")) {
		render_manager(mgr, out);
	} else if (!strncmp(attr, "dbfs.", 5) || !strncmp(attr, "stats.", 6)) {
		bool stats = attr[1] == 't';
		struct mfs_dbfs *d = mfs_find(mgr, attr + (stats ? 6 : 5));
		if (!d)
			rc = -ENODATA;
		else if (stats)
			render_stats(d, out);
		else {
			render_status(d, out);
			render_config(d, out);
		}
	} else {
		rc = -ENODATA;
	}
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

int mfs_render_file(struct mfs_manager *mgr, uint32_t id, enum mfs_file f, struct mfs_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&mgr->lock);
	struct mfs_dbfs *d = mfs_find_id(mgr, id);
	if (!d)
		rc = -ENOENT;
	else if (f == MFS_FILE_STATUS)
		render_status(d, out);
	else if (f == MFS_FILE_STATS)
		render_stats(d, out);
	else
		render_config(d, out);
	pthread_mutex_unlock(&mgr->lock);
	return rc;
}

void mfs_render_names(struct mfs_manager *mgr, struct mfs_buf *out)
{
	static const char *const fixed[] = {"list", "status", "error"};

	for (size_t i = 0; i < mfs_nverbs; i++)
		mfs_buf_printf(out, "user.mfs.%s%c", mfs_verbs[i].name, '\0');
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		mfs_buf_printf(out, "user.mfs.%s%c", fixed[i], '\0');
	pthread_mutex_lock(&mgr->lock);
	for (struct mfs_dbfs *d = mgr->list; d && out->len < 60000; d = d->next)
		mfs_buf_printf(out, "user.mfs.dbfs.%s%cuser.mfs.stats.%s%c", d->conf.name, '\0',
			       d->conf.name, '\0');
	pthread_mutex_unlock(&mgr->lock);
}
