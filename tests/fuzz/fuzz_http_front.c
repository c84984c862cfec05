/*
 * fuzz_http_front.c - libFuzzer target for the HTTP front's request
 * handling as a client meets it: each input is the raw bytes one client
 * sends on one TCP connection to a running front (src/front/http.c over
 * http_conn.c and http_parse.c), in-process on 127.0.0.1, over a chain
 * with a backend that answers every request at once. Heads, bodies
 * (Content-Length and chunked), pipelined requests, sessions, stateless
 * 2026-07-28 calls, batches and the refusals all run for real; the front
 * must never crash, leak or break the loop, and whatever it writes back is
 * HTTP/1.1 responses. Its bounds are small (4 KiB messages, 16 sessions),
 * so that the fuzzer reaches the limits too.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <ev.h>
#include <jansson.h>

#include "chain.h"
#include "config.h"
#include "http_front.h"
#include "log.h"
#include "peer.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_http_front: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

static struct chain *chain;
static struct peer be;
static struct http_front *front;
static unsigned port;
static json_t *queue;          /* the backend's answers for the loop's next turn */
static ev_timer answer;

/* The backend answers what it was asked, on the loop's next turn. */
static void on_answer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	json_t *q = queue;
	queue = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(q, i, m)
		chain_receive(&be, json_incref(m));
	json_decref(q);
}

static int be_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	(void)p;
	(void)o;
	json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	if (!id || !method)
		return 0;
	json_array_append_new(queue, rpc_result(id, json_pack("{s:s,s:[]}", "echo", method,
							       "tools")));
	if (!ev_is_active(&answer)) {
		ev_timer_set(&answer, 0., 0.);
		ev_timer_start(EV_DEFAULT, &answer);
	}
	return 0;
}

static int be_initialize(struct peer *p, json_t *params, void (*cb)(void *arg, json_t *response),
			 void *arg)
{
	json_t *v = json_object_get(params, "protocolVersion");
	json_t *resp = rpc_result(json_null(), json_pack("{s:O,s:{s:{}},s:{s:s,s:s}}",
		"protocolVersion", v ? v : json_string("2025-06-18"), "capabilities", "tools",
		"serverInfo", "name", "fuzz", "version", "1"));
	p->ready = true;
	cb(arg, resp);
	json_decref(resp);
	return 0;
}

static const struct peer_ops be_ops = { .send = be_send, .initialize = be_initialize };

/* The chain, its backend and the front, once. */
static void setup(void)
{
	if (front)
		return;
	log_set_level(LOG_ERROR);
	ev_default_loop(0);
	chain = chain_new();
	peer_init(&be, &be_ops, PEER_BACKEND, "be");
	chain_add_peer(chain, &be);
	queue = json_array();
	ev_init(&answer, on_answer);
	struct cfg_listen l = {
		.address = "127.0.0.1", .port = 0, .max_connections = 8, .conn_timeout = 1,
		.max_sessions = 16, .max_sessions_per_client = 16, .max_sessions_per_principal = 16,
		.body_budget = 16384, .stream_buffer = 65536,
	};
	front = http_front_new(chain, &l, 4096);
	CHECK(front);
	port = http_front_port(front);
}

/* Runs the loop's ready work a few times. */
static void spin(int turns)
{
	for (int i = 0; i < turns; i++)
		ev_run(EV_DEFAULT, EVRUN_NOWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	CHECK(rc == 0 || errno == EINPROGRESS);
	size_t sent = 0, got = 0;
	char out[65536];
	bool closed = false;
	for (int turn = 0; turn < 200 && !closed; turn++) {
		if (sent < size) {
			ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS && errno != ENOTCONN)
				break;   /* the front closed while we wrote: fine */
		}
		spin(1);
		for (;;) {
			ssize_t n = recv(fd, out + (got < sizeof out ? got : 0),
					 got < sizeof out ? sizeof out - got : sizeof out, 0);
			if (n > 0) {
				if (got < sizeof out)
					got += (size_t)n;
				continue;
			}
			if (n == 0 || (n < 0 && errno != EAGAIN))
				closed = true;
			break;
		}
		if (sent == size && turn > 20)
			break;   /* the rest waits for a backend or a stream: enough */
	}
	/* whatever came back is HTTP/1.1 responses */
	if (got > 0)
		CHECK(got >= 9 && memcmp(out, "HTTP/1.1 ", 9) == 0);
	close(fd);
	spin(5);   /* the front sees the close and lets go of the request */
	return 0;
}
