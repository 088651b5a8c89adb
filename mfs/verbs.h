/*
 * The control verbs: one row per command attribute `user.mfs.VERB` on the
 * manager root, in a static table (verbs.c). A row names the verb, its
 * parser (parse.h: validates the value completely, syntax, keys, option
 * values, names, path shapes, without touching any state), its executor
 * (execute.h: checks what needs the file system or the manager's state,
 * then changes it, on the control thread) and the usage text that reading
 * the attribute returns. Adding a verb is adding a row.
 */
#ifndef MFS_VERBS_H
#define MFS_VERBS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "caller.h"
#include "feed_spec.h"
#include "manager.h"

struct mfs_verb;

/* A parsed command, handed to the control thread. */
struct mfs_cmd {
	const struct mfs_verb *verb;
	struct mfs_caller who;
	char name[MFS_NAME_MAX + 1];
	char store[PATH_MAX];      /* mount: "" when not given */
	char mountpoint[PATH_MAX]; /* mount: "" when not given */
	bool create;               /* mount */
	bool force;                /* unmount */
	/* mount: the DBFS options given; config: the settings to change;
	 * canonical `key=value,...` text */
	char opts[MFS_OPTS_MAX];
	/* subscribe, unsubscribe: the subscription; subscribe: where it starts
	 * (from= or since=; DBFS_FEED_NOW when neither) and, in opts, its
	 * filters as canonical `key=value,...` text */
	char sub[DBFS_FEED_SUB_MAX + 1];
	struct mfs_feed_pos pos;
	void *req;                 /* fuse_req_t to answer, or NULL */
};

struct mfs_verb {
	const char *name; /* attribute is "user.mfs." name */
	/* Parse and validate `len` bytes of value into cmd. 0 or -errno with a
	 * one-line reason in err. Pure: any thread. */
	int (*parse)(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
		     size_t errlen);
	/* Check the command against the file system and the manager's state,
	 * then carry it out; a refusal changes nothing. 0 or -errno with a
	 * reason in err (may be left empty), or MFS_EXEC_LATER: the command was
	 * handed on, and its taker answers and frees it. Control thread only,
	 * mgr->lock not held. */
	int (*exec)(struct mfs_manager *mgr, struct mfs_cmd *cmd, char *err, size_t errlen);
	const char *usage; /* what reading the attribute returns */
};

/* exec's "handed on" result (see above): never an errno. */
#define MFS_EXEC_LATER 1

extern const struct mfs_verb mfs_verbs[];
extern const size_t mfs_nverbs;

/* The verb for a full attribute name ("user.mfs.mount"), or NULL. Pure: any
 * thread. */
const struct mfs_verb *mfs_verb_find(const char *attr);

/* Longest accepted value (the kernel's own limit is 64 KiB). */
#define MFS_VALUE_MAX 16384

#endif
