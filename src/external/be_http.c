/*
 * be_http.c - HTTP upstream transport (being written: see the HTTP
 * upstreams work). Until then an HTTP entry fails to start with a reason.
 */
#include "backend.h"

#include <stdio.h>

/* Refuses to start. */
static int http_start(struct backend *b)
{
	struct peer *p = backend_peer(b);
	snprintf(p->why_down, sizeof p->why_down, "HTTP upstreams are not available in this build");
	return -1;
}

/* Nothing to send to. */
static int http_send(struct backend *b, json_t *msg)
{
	(void)b;
	(void)msg;
	return -1;
}

/* Nothing to stop. */
static void http_stop(struct backend *b, double grace)
{
	(void)grace;
	backend_down(b, "stopped");
}

/* Nothing runs. */
static bool http_running(struct backend *b)
{
	(void)b;
	return false;
}

const struct be_transport_ops be_http_ops = {
	.kind = "http",
	.start = http_start,
	.send = http_send,
	.stop = http_stop,
	.running = http_running,
};
