/*
 * mfs — minimal single-DBFS runner (the manager replaces this; the
 * `--dbfs STORE MOUNTPOINT` form stays supported).
 *
 *   mfs [-f] --dbfs STORE [-o opt,...] MOUNTPOINT
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fuse_lowlevel.h>

#include "dbfs/dbfs.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: mfs [-f] --dbfs STORE [-o opt[,opt...]] MOUNTPOINT\n");
}

static int parse_opts(struct dbfs_options *o, char *s)
{
	char err[256];
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		char *eq = strchr(tok, '=');
		if (eq)
			*eq++ = '\0';
		int rc = dbfs_option_parse(o, tok, eq, err, sizeof(err));
		if (rc == -ENOENT) {
			fprintf(stderr, "mfs: unknown option '%s'\n", tok);
			return -1;
		}
		if (rc) {
			fprintf(stderr, "mfs: %s\n", err);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *store = NULL, *mnt = NULL;
	struct dbfs_options o;
	int foreground = 0;
	char err[512];

	dbfs_options_init(&o);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f")) {
			foreground = 1;
		} else if (!strcmp(argv[i], "--dbfs") && i + 1 < argc) {
			store = argv[++i];
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			if (parse_opts(&o, argv[++i]))
				return 2;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] != '-' && !mnt) {
			mnt = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!store || !mnt) {
		usage(stderr);
		return 2;
	}

	struct dbfs *fs;
	int rc = dbfs_open(store, &o, &fs, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "mfs: %s: %s\n", store, err);
		return 1;
	}
	char optstr[4200];
	snprintf(optstr, sizeof(optstr), "-odefault_permissions,fsname=dbfs:%s,subtype=dbfs%s%s",
		 store, getuid() == 0 ? ",allow_other" : "", o.read_only ? ",ro" : "");
	char *fargv[] = {argv[0], optstr, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(2, fargv);
	struct fuse_session *se = fuse_session_new(&args, dbfs_fuse_ops(),
						   sizeof(struct fuse_lowlevel_ops), fs);
	if (!se) {
		dbfs_close(fs);
		return 1;
	}
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt)) {
		fuse_session_destroy(se);
		dbfs_close(fs);
		return 1;
	}
	if (fuse_daemonize(foreground) != 0)
		return 1;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, 16);
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	rc = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	dbfs_close(fs);
	return rc ? 1 : 0;
}
