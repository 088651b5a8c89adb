/* The metrics over HTTP, with libmicrohttpd (see http_metrics.h). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <microhttpd.h>

#include "http_metrics.h"
#include "log.h"
#include "metrics.h"

struct mfs_http {
	struct MHD_Daemon *d;
	struct mfs_manager *mgr;
};

int mfs_http_parse(const char *text, struct sockaddr_storage *sa, socklen_t *len, char *err,
		   size_t errlen)
{
	char host[256];
	const char *colon = strrchr(text, ':');
	size_t hl;

	if (!colon || colon == text || !colon[1])
		goto bad;
	hl = (size_t)(colon - text);
	if (text[0] == '[') { /* [IPv6]:PORT */
		if (hl < 3 || text[hl - 1] != ']')
			goto bad;
		text++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		goto bad;
	memcpy(host, text, hl);
	host[hl] = 0;
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		goto bad;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
	int rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "metrics_listen: %s: %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
bad:
	snprintf(err, errlen, "metrics_listen must be ADDR:PORT (127.0.0.1:9464, [::1]:9464)");
	return -EINVAL;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *data_size, void **req_cls)
{
	struct mfs_http *h = cls;
	struct MHD_Response *r;
	struct mfs_buf b = {0};
	unsigned status = MHD_HTTP_OK;
	enum MHD_Result ret;

	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		mfs_buf_printf(&b, "only GET\n");
	} else if (strcmp(url, "/metrics") && strcmp(url, "/")) {
		status = MHD_HTTP_NOT_FOUND;
		mfs_buf_printf(&b, "not found: the metrics are at /metrics\n");
	} else {
		mfs_metrics_text(h->mgr, &b);
	}
	if (b.oom) {
		mfs_buf_free(&b);
		return MHD_NO; /* the connection is closed: the scrape fails */
	}
	r = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY);
	mfs_buf_free(&b);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type",
				status == MHD_HTTP_OK ? MFS_METRICS_CONTENT_TYPE : "text/plain");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

int mfs_http_start(struct mfs_manager *mgr, const struct sockaddr_storage *sa, struct mfs_http **out,
		   char *err, size_t errlen)
{
	struct mfs_http *h = calloc(1, sizeof(*h));
	int fd = -1, one = 1, rc;
	socklen_t len = sa->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						  : sizeof(struct sockaddr_in);

	*out = NULL;
	if (!h)
		return -ENOMEM;
	h->mgr = mgr;
	/* our own socket: a bind error comes back as its errno */
	fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (const struct sockaddr *)sa, len) || listen(fd, 16)) {
		rc = -errno;
		snprintf(err, errlen, "metrics_listen: %s", strerror(errno));
		goto fail;
	}
	h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
				    (sa->ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				0, NULL, NULL, answer, h, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u,
				MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_END);
	if (!h->d) {
		rc = -EIO;
		snprintf(err, errlen, "metrics_listen: libmicrohttpd did not start");
		goto fail;
	}
	*out = h;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(h);
	return rc;
}

void mfs_http_stop(struct mfs_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
