/*
 * Parsers of the control verbs' values (the parse column of verbs.h): each
 * checks the whole value (at most MFS_VALUE_MAX bytes, `key=value,...` with
 * unique keys) and fills the command. Errors: -E2BIG (value too long),
 * -EINVAL (syntax, unknown or repeated key, bad value, missing key),
 * -ENAMETOOLONG (a path), each with a one-line reason in err. Pure: any
 * thread, no state read or changed.
 */
#ifndef MFS_PARSE_H
#define MFS_PARSE_H

#include "verbs.h"

/* name=N,store=DIR,mountpoint=DIR[,create][,option=value...] */
int mfs_parse_mount(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen);
/* N[,force] (or name=N[,force]) */
int mfs_parse_unmount(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen);
/* name=N,key=value[,key=value...]: at least one setting */
int mfs_parse_config(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen);
/* N */
int mfs_parse_forget(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen);
/* N */
int mfs_parse_sync(const char *value, size_t len, struct mfs_cmd *cmd, char *err, size_t errlen);
/* subscribe: name=N,sub=S[,from=POS|since=TIME][,filter=...]; unsubscribe:
 * name=N,sub=S (parse_feed.c; positions and filters: feed_spec.h). */
int mfs_parse_subscribe(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			size_t errlen);
int mfs_parse_unsubscribe(const char *value, size_t len, struct mfs_cmd *cmd, char *err,
			  size_t errlen);

#endif
