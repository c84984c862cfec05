/*
 * http_test.c - the HTTP front's test harness (see http_test.h).
 */
#include "http_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "middleware.h"
#include "rpc.h"

struct chain *htt_chain;
struct htb htt_be;
struct http_front *htt_front;
static struct pipeline *htt_pl;
static ev_timer answer_timer;

/* ---- the fake backend ---- */

static void answer_pending(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	json_t *p = htt_be.pending;
	htt_be.pending = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(p, i, m)
		chain_receive(&htt_be.peer, json_incref(m));
	json_decref(p);
}

static int htb_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	(void)p;
	(void)o;
	json_array_append_new(htt_be.got, json_deep_copy(msg));
	json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	if (!id || !method || htt_be.hold)
		return 0;
	json_array_append_new(htt_be.pending, rpc_result(id, htt_be.tools &&
		strcmp(method, "tools/list") == 0 ? json_pack("{s:O}", "tools", htt_be.tools) :
		json_pack("{s:s}", "echo", method)));
	ev_timer_stop(EV_DEFAULT, &answer_timer);
	ev_timer_set(&answer_timer, 0., 0.);
	ev_timer_start(EV_DEFAULT, &answer_timer);
	return 0;
}

static int htb_initialize(struct peer *p, json_t *params, void (*cb)(void *arg, json_t *response),
			  void *arg)
{
	json_t *v = json_object_get(params, "protocolVersion");
	json_t *resp = rpc_result(json_null(), json_pack("{s:O,s:{s:{}},s:{s:s,s:s}}",
		"protocolVersion", v, "capabilities", "tools", "serverInfo", "name", "fake",
		"version", "1"));
	p->ready = true;
	cb(arg, resp);
	json_decref(resp);
	return 0;
}

static const struct peer_ops htb_ops = { .send = htb_send, .initialize = htb_initialize };

void htt_start(const struct cfg_listen *l, size_t max, const char *auth_tokens)
{
	ev_default_loop(0);
	htt_chain = chain_new();
	memset(&htt_be, 0, sizeof htt_be);
	peer_init(&htt_be.peer, &htb_ops, PEER_BACKEND, "be");
	htt_be.got = json_array();
	htt_be.pending = json_array();
	chain_add_peer(htt_chain, &htt_be.peer);
	ev_init(&answer_timer, answer_pending);
	if (auth_tokens) {
		char text[1024];
		snprintf(text, sizeof text, "[{\"use\":\"auth\",\"env\":false,\"tokens\":%s}]",
			 auth_tokens);
		json_t *arr = json_loads(text, 0, NULL);
		struct cfg_errors errs = { 0 };
		mw_use_registry(mw_registry);
		htt_pl = pipeline_build(arr, "t.json", "/middleware", &errs);
		json_decref(arr);
		assert_int_equal(errs.count, 0);
		assert_non_null(htt_pl);
		cfg_errors_release(&errs);
		assert_int_equal(pipeline_start(htt_pl), 0);
		chain_set_pipeline(htt_chain, htt_pl);
	}
	struct cfg_listen def = { .address = "127.0.0.1", .port = 0 };
	htt_front = http_front_new(htt_chain, l ? l : &def, max);
	assert_non_null(htt_front);
	assert_true(http_front_port(htt_front) > 0);
	/* its fake backend speaks the handshake era: 2026-07-28 clients meet the bridge */
	http_front_offer_stateless(htt_front, true);
}

void htt_stop(void)
{
	http_front_free(htt_front);
	htt_front = NULL;
	ev_timer_stop(EV_DEFAULT, &answer_timer);
	chain_peer_gone(&htt_be.peer, "test over");
	chain_remove_peer(&htt_be.peer);
	peer_release(&htt_be.peer);
	json_decref(htt_be.got);
	json_decref(htt_be.pending);
	json_decref(htt_be.tools);
	htt_be.tools = NULL;
	chain_free(htt_chain);
	htt_chain = NULL;
	pipeline_unref(htt_pl);
	htt_pl = NULL;
}

/* ---- the client ---- */

static void stop_loop(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	*(bool *)w->data = true;
	ev_break(loop, EVBREAK_ALL);
}

void htt_run_for(double seconds)
{
	ev_timer t;
	bool fired = false;
	ev_timer_init(&t, stop_loop, seconds, 0.);
	t.data = &fired;
	ev_timer_start(EV_DEFAULT, &t);
	while (!fired)
		ev_run(EV_DEFAULT, EVRUN_ONCE);
	ev_timer_stop(EV_DEFAULT, &t);
}

struct waiter {
	struct hconn *c;
	const char *want;
	bool done;
};

static bool have(struct waiter *w)
{
	return w->c->eof || (w->want && w->c->data && memmem(w->c->data, w->c->n, w->want,
							     strlen(w->want)));
}

static void on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct waiter *w = io->data;
	char tmp[8192];
	(void)revents;
	for (;;) {
		ssize_t n = read(w->c->fd, tmp, sizeof tmp);
		if (n > 0) {
			w->c->data = realloc(w->c->data, w->c->n + (size_t)n + 1);
			assert_non_null(w->c->data);
			memcpy(w->c->data + w->c->n, tmp, (size_t)n);
			w->c->n += (size_t)n;
			w->c->data[w->c->n] = '\0';
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			w->c->eof = true;
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (have(w)) {
		w->done = true;
		ev_break(loop, EVBREAK_ALL);
	}
}

bool htt_wait(struct hconn *c, const char *want, double seconds)
{
	struct waiter w = { c, want, false };
	if (have(&w))
		return !c->eof || !want || memmem(c->data, c->n, want, strlen(want));
	ev_io io;
	ev_timer t;
	bool fired = false;
	ev_io_init(&io, on_readable, c->fd, EV_READ);
	io.data = &w;
	ev_io_start(EV_DEFAULT, &io);
	ev_timer_init(&t, stop_loop, seconds, 0.);
	t.data = &fired;
	ev_timer_start(EV_DEFAULT, &t);
	while (!w.done && !fired)
		ev_run(EV_DEFAULT, EVRUN_ONCE);
	ev_io_stop(EV_DEFAULT, &io);
	ev_timer_stop(EV_DEFAULT, &t);
	if (!want)
		return c->eof;
	return c->data && memmem(c->data, c->n, want, strlen(want));
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			ev_run(EV_DEFAULT, EVRUN_NOWAIT);   /* let the server read */
			continue;
		}
		assert_true(k > 0);
		p += k;
		n -= (size_t)k;
	}
}

static void open_raw(const char *raw, size_t n, struct hconn *c)
{
	memset(c, 0, sizeof *c);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)http_front_port(htt_front)) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	send_all(c->fd, raw, n);
}

void htt_close(struct hconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->data);
	c->data = NULL;
	c->n = 0;
}

/* Splits what C read into R: status, head, body (de-chunked). */
void htt_parse(struct hconn *c, struct hres *r)
{
	memset(r, 0, sizeof *r);
	if (!c->data)
		fail_msg("no response at all");
	char *end = strstr(c->data, "\r\n\r\n");
	if (!end)
		fail_msg("no complete head in: %s", c->data);
	r->head = strndup(c->data, (size_t)(end - c->data) + 2);
	assert_int_equal(sscanf(r->head, "HTTP/1.%*d %d", &r->status), 1);
	const char *b = end + 4;
	size_t left = c->n - (size_t)(b - c->data);
	const char *te = hres_header(r, "Transfer-Encoding");
	r->body = malloc(left + 1);
	assert_non_null(r->body);
	if (te && strcasecmp(te, "chunked") == 0) {
		while (left > 0) {
			char *e;
			unsigned long k = strtoul(b, &e, 16);
			const char *data = strstr(b, "\r\n");
			if (!data || k == 0)
				break;
			data += 2;
			assert_true((size_t)(data - b) + k <= left);
			memcpy(r->body + r->body_n, data, k);
			r->body_n += k;
			left -= (size_t)(data - b) + k + 2;
			b = data + k + 2;
		}
	} else {
		memcpy(r->body, b, left);
		r->body_n = left;
	}
	r->body[r->body_n] = '\0';
}

void htt_do(const char *raw, struct hres *out)
{
	struct hconn c;
	open_raw(raw, strlen(raw), &c);
	if (!htt_wait(&c, NULL, 5.))
		fail_msg("the server did not close the connection; got: %s", c.data ? c.data : "");
	htt_parse(&c, out);
	htt_close(&c);
}

static char *build(const char *method, const char *path, const char *headers, const char *body,
		   bool close)
{
	size_t blen = body ? strlen(body) : 0;
	size_t n = strlen(method) + strlen(path) + strlen(headers) + blen + 256;
	char *raw = malloc(n);
	assert_non_null(raw);
	bool host = strcasestr(headers, "\r\nHost:") || strncasecmp(headers, "Host:", 5) == 0;
	int k = snprintf(raw, n, "%s %s HTTP/1.1\r\n%s%s%s%s", method, path,
			 host ? "" : "Host: 127.0.0.1\r\n", close ? "Connection: close\r\n" : "",
			 headers, body ? "" : "\r\n");
	if (body)
		snprintf(raw + k, n - (size_t)k, "Content-Length: %zu\r\n\r\n%s", blen, body);
	return raw;
}

void htt_req(const char *method, const char *path, const char *headers, const char *body,
	     struct hres *out)
{
	char *raw = build(method, path, headers, body, true);
	htt_do(raw, out);
	free(raw);
}

void htt_open(const char *method, const char *path, const char *headers, const char *body,
	      struct hconn *c)
{
	char *raw = build(method, path, headers, body, false);
	open_raw(raw, strlen(raw), c);
	free(raw);
}

void hres_release(struct hres *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof *r);
}

const char *hres_header(const struct hres *r, const char *name)
{
	static char value[512];
	size_t n = strlen(name);
	for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;
		if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1;
			while (*v == ' ')
				v++;
			const char *e = strstr(v, "\r\n");
			snprintf(value, sizeof value, "%.*s", (int)(e - v), v);
			return value;
		}
	}
	return NULL;
}

json_t *hres_json(const struct hres *r)
{
	json_error_t e;
	json_t *v = json_loadb(r->body, r->body_n, 0, &e);
	if (!v)
		fail_msg("not JSON (%s): %s", e.text, r->body);
	return v;
}

void htt_initialize(const char *version, const char *headers, char *sid)
{
	char body[512], hdrs[512];
	struct hres r;
	snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
		 "{\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
		 "\"version\":\"1\"}}}", version);
	snprintf(hdrs, sizeof hdrs, "Content-Type: application/json\r\n"
		 "Accept: application/json, text/event-stream\r\n%s", headers ? headers : "");
	htt_req("POST", "/mcp", hdrs, body, &r);
	if (r.status != 200)
		fail_msg("initialize: HTTP %d: %s", r.status, r.body);
	const char *s = hres_header(&r, "Mcp-Session-Id");
	assert_non_null(s);
	snprintf(sid, 64, "%s", s);
	assert_true(strstr(r.body, "\"protocolVersion\"") != NULL);
	hres_release(&r);
}
