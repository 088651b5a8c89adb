/*
 * -o metrics_listen=ADDR:PORT: the Prometheus exposition (metrics.h) over
 * HTTP, served by libmicrohttpd on a thread of its own (one connection at
 * a time: a scrape is one request every few seconds). GET /metrics (and
 * GET /) answers 200 with the text; other paths 404, other methods 405.
 */
#ifndef MFS_HTTP_METRICS_H
#define MFS_HTTP_METRICS_H

#include <stddef.h>
#include <sys/socket.h>

#include "manager.h"

struct mfs_http;

/* Parse ADDR:PORT (an IPv4 address, [IPv6], or a host name as
 * getaddrinfo knows it; PORT 1..65535) into `sa`. -EINVAL with `err`. */
int mfs_http_parse(const char *text, struct sockaddr_storage *sa, socklen_t *len, char *err,
		   size_t errlen);

/* Listen on `sa` and serve. -EADDRINUSE, -EACCES, ... (the bind's), -EIO
 * when libmicrohttpd refuses to start; `err` says why. The thread that
 * sets the process up; mgr must outlive it. */
int mfs_http_start(struct mfs_manager *mgr, const struct sockaddr_storage *sa, struct mfs_http **out,
		   char *err, size_t errlen);

/* Stop serving (waits for a scrape in progress). NULL: nothing. */
void mfs_http_stop(struct mfs_http *h);

#endif
