/*
 * http_xfer.c - the parts of the HTTP upstream transport that do not
 * depend on the protocol generation: HTTP transfers (options, headers,
 * reply parsing into messages, the size bound, pausing), the inbox and
 * its flush, failures and the down report. See http_int.h.
 */
#include "http_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chain.h"
#include "era.h"
#include "log.h"
#include "mcpc_version.h"
#include "rpc.h"

#define CONNECT_TIMEOUT_MS 10000L
#define SESSION_ID_MAX 1024

static void on_flush(struct ev_loop *loop, ev_prepare *w, int revents);

/*
 * The flush runs just before the loop blocks; what it changed (a response
 * delivered, the transport down) is seen by the owner's ev_check only after
 * the loop wakes up again. An idle watcher makes that next turn immediate.
 */
static void on_kick(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)revents;
	ev_idle_stop(loop, w);
}

/* New transport state. */
struct be_http *http_new(struct backend *b, const struct http_mode *mode)
{
	struct be_http *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	const struct cfg_server *c = backend_cfg(b);
	s->b = b;
	s->mode = mode;
	s->name = backend_peer(b)->name;
	s->url = c->url;
	s->max = backend_top(b)->max_message;
	s->in_tail = &s->in_head;
	s->held_tail = &s->held;
	ev_prepare_init(&s->flush, on_flush);
	s->flush.data = s;
	ev_idle_init(&s->kick, on_kick);
	return s;
}

/* Frees the inbox. */
static void drop_inbox(struct be_http *s)
{
	while (s->in_head) {
		struct in_msg *m = s->in_head;
		s->in_head = m->next;
		json_decref(m->msg);
		free(m);
	}
	s->in_tail = &s->in_head;
}

/* Frees the transport state. */
void http_free(struct be_http *s)
{
	if (!s)
		return;
	http_abort_all(s);
	ev_prepare_stop(EV_DEFAULT, &s->flush);
	ev_idle_stop(EV_DEFAULT, &s->kick);
	drop_inbox(s);
	http_drop_held(s);
	http_auth_release(s);
	free(s->session);
	free(s->proto);
	param_table_release(&s->params);
	free(s->get_last_id);
	free(s->endpoint);
	json_decref(s->init_id);
	json_decref(s->init_params);
	json_decref(s->reinit_id);
	free(s);
}

/* Serializes MSG for POSTing. */
/* True when S is at most MAX visible ASCII bytes or spaces (no CR, LF). */
static bool header_safe(const char *s, size_t max)
{
	size_t n = 0;
	for (; s[n] && n <= max; n++)
		if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e)
			return false;
	return n > 0 && n <= max;
}

/* The trace context META (params._meta) carries, for O's HTTP headers:
 * short printable strings only, as a header holds them. */
static void trace_headers(struct out *o, json_t *meta)
{
	const char *tp = json_string_value(json_object_get(meta, "traceparent"));
	const char *ts = json_string_value(json_object_get(meta, "tracestate"));
	if (!tp || !header_safe(tp, 128))
		return;
	o->traceparent = strdup(tp);
	if (ts && header_safe(ts, 512))
		o->tracestate = strdup(ts);
}

struct out *out_new(json_t *msg, enum out_kind kind)
{
	struct out *o = calloc(1, sizeof *o);
	if (!o)
		return NULL;
	o->body = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!o->body) {
		free(o);
		return NULL;
	}
	o->len = strlen(o->body);
	o->kind = kind;
	o->retry = -1;
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (method && id && !json_is_null(id))
		o->id = json_incref(id);
	o->is_init = method && strcmp(method, "initialize") == 0;
	o->is_initialized = method && strcmp(method, "notifications/initialized") == 0;
	/* the stateless era: the body says which era; the headers repeat it */
	json_t *params = json_object_get(msg, "params");
	trace_headers(o, json_object_get(params, "_meta"));
	const char *v = era_request_version(params);
	if (method && v && era_stateless_supported(v)) {
		const char *name = json_string_value(json_object_get(params, "name"));
		if (!name)
			name = json_string_value(json_object_get(params, "uri"));
		o->version = strdup(v);
		o->method = strdup(method);
		o->name = name ? strdup(name) : NULL;
	}
	return o;
}

/* Frees a message. */
void out_free(struct out *o)
{
	if (!o)
		return;
	free(o->traceparent);
	free(o->tracestate);
	free(o->body);
	json_decref(o->id);
	free(o->version);
	free(o->method);
	free(o->name);
	free(o);
}

/* Takes a transfer out of its transport's list. */
static void hx_unlink(struct hx *x)
{
	struct be_http *s = x->s;
	if (x->prev)
		x->prev->next = x->next;
	else if (s->xfers == x)
		s->xfers = x->next;
	if (x->next)
		x->next->prev = x->prev;
	x->prev = x->next = NULL;
	if (s->get == x)
		s->get = NULL;
	if (s->stream == x)
		s->stream = NULL;
}

/* Frees a transfer that is out of the list. */
static void hx_destroy(struct hx *x)
{
	ev_timer_stop(EV_DEFAULT, &x->wait);
	curl_ev_remove(&x->base);
	curl_easy_cleanup(x->base.easy);
	curl_slist_free_all(x->hdrs);
	sse_release(&x->parser);
	buf_release(&x->body);
	free(x->session);
	free(x->start_id);
	free(x->www_auth);
	out_free(x->msg);
	free(x);
}

/* Aborts a transfer. */
void hx_abort(struct hx *x)
{
	hx_unlink(x);
	hx_destroy(x);
}

/* Aborts every transfer. */
void http_abort_all(struct be_http *s)
{
	while (s->xfers)
		hx_abort(s->xfers);
}

/* libcurl says X ended: its owner decides, then it is freed. */
static void hx_done(struct curl_ev_xfer *base, CURLcode rc)
{
	struct hx *x = (struct hx *)base;
	hx_unlink(x);
	if (x->on_done)
		x->on_done(x, rc);
	hx_destroy(x);
}

/*
 * Notes that M answers the request X is for. An answer to a 2026-07-28
 * tools/list teaches the transport the tools' x-mcp-header marks, and
 * loses the tools whose marks are invalid (the client must not see them).
 */
static void note_response(struct hx *x, json_t *m)
{
	if (!x->msg || !x->msg->id || json_object_get(m, "method") ||
	    !json_equal(json_object_get(m, "id"), x->msg->id))
		return;
	x->got_response = true;
	if (x->msg->method && strcmp(x->msg->method, "tools/list") == 0)
		param_learn(&x->s->params, json_object_get(json_object_get(m, "result"), "tools"),
			    x->s->name, true);
}

/* Parses a message (or a batch) received on X and queues it. */
static void parse_push(struct hx *x, const char *data, size_t len)
{
	json_error_t e;
	json_t *m = json_loadb(data, len, JSON_ALLOW_NUL, &e);
	if (!m || !(json_is_object(m) || json_is_array(m))) {
		log_warn("%s: skipped a reply that is not a JSON-RPC message: %.*s%s", x->s->name,
			 (int)(len > 200 ? 200 : len), data, len > 200 ? "..." : "");
		json_decref(m);
		return;
	}
	if (json_is_object(m)) {
		note_response(x, m);
		http_push(x->s, m, len);
		return;
	}
	size_t i;
	json_t *el;
	json_array_foreach(m, i, el) {
		note_response(x, el);
		http_push(x->s, json_incref(el), 0);
	}
	json_decref(m);
}

/* An event too large to keep: answer its request if it was a response. */
static void on_oversize(struct hx *x, const struct sse_event *ev)
{
	struct be_http *s = x->s;
	log_warn("%s: dropped a %zu-byte message: larger than maxMessageBytes (%zu)",
		 s->name, ev->total, s->max);
	json_t *id = rpc_scan_id(ev->data, ev->len);
	if (!id)
		return;
	if (!memmem(ev->data, ev->len, "\"method\"", 8)) {
		json_t *err = rpc_errorf(id, RPC_INTERNAL_ERROR,
			"the backend's response (%zu bytes) exceeds maxMessageBytes (%zu)",
			ev->total, s->max);
		note_response(x, err);
		http_push(s, err, 0);
	}
	json_decref(id);
}

/* True when the N bytes at S are only white space. */
static bool blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

/* An SSE event arrived on X (inside libcurl). */
static int on_event(const struct sse_event *ev, void *arg)
{
	struct hx *x = arg;
	x->dispatched = true;
	if (strcmp(ev->type, "message") != 0)
		return x->s->mode->named_event ? x->s->mode->named_event(x, ev) : 0;
	if (ev->oversize)
		on_oversize(x, ev);
	else if (!blank(ev->data, ev->len))
		parse_push(x, ev->data, ev->len);
	return 0;
}

/* Keeps the head of an error reply, for its message. */
static size_t keep_error_body(struct hx *x, const char *data, size_t len)
{
	size_t room = x->body.len < HTTP_ERRBODY_MAX ? HTTP_ERRBODY_MAX - x->body.len : 0;
	if (len > 0 && room > 0)
		buf_append(&x->body, data, len < room ? len : room);
	return len;
}

/* Refuses X's reply: it will end with a write error, and WHY. */
static size_t refuse(struct hx *x, const char *why)
{
	x->refused = true;
	snprintf(x->why, sizeof x->why, "%s", why);
	return 0;
}

/* CURLOPT_WRITEFUNCTION: a piece of the reply body. */
static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
	struct hx *x = arg;
	size_t len = size * n;
	if (x->s->paused && x->status / 100 == 2 && x->kind != HX_DELETE) {
		if (!x->paused)
			log_debug("%s: reply paused (flow control)", x->s->name);
		x->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (x->status / 100 != 2 || x->kind == HX_DELETE)
		return keep_error_body(x, data, len);
	if (x->sse)
		return sse_feed(&x->parser, data, len, on_event, x) < 0 ? 0 : len;
	if (x->kind != HX_POST)
		return refuse(x, "the reply is not an event stream");
	if (x->body.len + len > x->s->max) {
		x->oversize = true;
		return 0;
	}
	return len > 0 && buf_append(&x->body, data, len) < 0 ? 0 : len;
}

/* The reply's headers are complete: status, type, and a new session. */
static void headers_end(struct hx *x)
{
	struct be_http *s = x->s;
	char *ct = NULL;
	curl_easy_getinfo(x->base.easy, CURLINFO_RESPONSE_CODE, &x->status);
	curl_easy_getinfo(x->base.easy, CURLINFO_CONTENT_TYPE, &ct);
	x->sse = ct && strncasecmp(ct, "text/event-stream", 17) == 0;
	if (x->status / 100 != 2 || !x->session || !x->msg ||
	    !(x->msg->is_init || x->msg->kind == OUT_REINIT))
		return;
	if (s->session && strcmp(s->session, x->session) == 0)
		return;
	free(s->session);
	s->session = x->session;
	x->session = NULL;
	s->gen++;
	log_debug("%s: session %s", s->name, s->session);
}

/* Keeps an Mcp-Session-Id value if it is made of visible ASCII. */
static void take_session(struct hx *x, const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
			n = 0;
	if (n == 0 || n > SESSION_ID_MAX) {
		log_warn("%s: ignored a malformed Mcp-Session-Id header", x->s->name);
		return;
	}
	free(x->session);
	x->session = strndup(v, n);
}

/* CURLOPT_HEADERFUNCTION: one header line of the reply. */
static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct hx *x = arg;
	size_t len = size * n;
	if (len <= 2 && (len == 0 || line[0] == '\r' || line[0] == '\n')) {
		headers_end(x);
		return len;
	}
	if (len > 15 && strncasecmp(line, "mcp-session-id:", 15) == 0) {
		const char *v = line + 15, *end = line + len;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
			end--;
		take_session(x, v, (size_t)(end - v));
	} else if (len > 17 && strncasecmp(line, "www-authenticate:", 17) == 0 && !x->www_auth &&
		   len < 4096) {
		const char *v = line + 17, *end = line + len;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && (end[-1] == '\r' || end[-1] == '\n'))
			end--;
		x->www_auth = strndup(v, (size_t)(end - v));
	}
	return len;
}

/* True for a configured header the transport sets itself. */
static bool reserved_header(const char *h)
{
	static const char *const names[] = {
		"mcp-session-id:", "mcp-protocol-version:", "last-event-id:",
		"content-type:", "accept:", NULL,
	};
	for (size_t i = 0; names[i]; i++)
		if (strncasecmp(h, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

/* Appends one raw header line. */
static int add_line(struct hx *x, const char *line)
{
	struct curl_slist *l = curl_slist_append(x->hdrs, line);
	if (!l)
		return -1;
	x->hdrs = l;
	return 0;
}

/* Adds a request header ("NAME:" alone, for an empty VALUE, drops curl's own). */
int hx_header(struct hx *x, const char *name, const char *value)
{
	char *line;
	if (asprintf(&line, value[0] ? "%s: %s" : "%s:", name, value) < 0)
		return -1;
	int rc = add_line(x, line);
	free(line);
	return rc;
}

static int add_param(void *x, const char *name, const char *value)
{
	return hx_header(x, name, value);
}

/* Adds the 2026-07-28 era's headers: version, method, name, marked arguments. */
int hx_stateless_headers(struct hx *x)
{
	const struct out *o = x->msg;
	x->gen = x->s->gen;
	if (hx_header(x, "MCP-Protocol-Version", o->version) < 0 ||
	    hx_header(x, "Mcp-Method", o->method) < 0)
		return -1;
	if (o->name) {
		char *v = param_encode(o->name, strlen(o->name));
		int rc = v ? hx_header(x, "Mcp-Name", v) : -1;
		free(v);
		if (rc < 0)
			return -1;
	}
	if (!o->name || strcmp(o->method, "tools/call") != 0 ||
	    !hmap_get(&x->s->params.tools, o->name, strlen(o->name)))
		return 0;
	json_t *body = json_loadb(o->body, o->len, 0, NULL);
	int rc = param_headers(&x->s->params, o->name,
			       json_object_get(json_object_get(body, "params"), "arguments"),
			       add_param, x);
	json_decref(body);
	return rc;
}

int hx_session_headers(struct hx *x, bool with_proto)
{
	struct be_http *s = x->s;
	x->gen = s->gen;
	x->sent_session = s->session != NULL;
	if (s->session && hx_header(x, "Mcp-Session-Id", s->session) < 0)
		return -1;
	if (with_proto && s->proto && hx_header(x, "MCP-Protocol-Version", s->proto) < 0)
		return -1;
	return 0;
}

/* Options every transfer shares. */
static void set_common(struct hx *x, const char *url)
{
	CURL *e = x->base.easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->err);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "mcp-chain/" MCPC_VERSION);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
}

/* The delay of a transfer started later is over. */
static void on_wait(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hx *x = w->data;
	(void)loop;
	(void)revents;
	if (curl_ev_add(&x->base) < 0)
		hx_done(&x->base, CURLE_FAILED_INIT);
}

/* New transfer. */
struct hx *hx_new(struct be_http *s, enum hx_kind kind, const char *url, struct out *msg,
		  hx_done_fn on_done)
{
	struct hx *x = calloc(1, sizeof *x);
	if (!x || !(x->base.easy = curl_easy_init())) {
		free(x);
		return NULL;
	}
	x->base.done = hx_done;
	x->s = s;
	x->kind = kind;
	x->on_done = on_done;
	sse_init(&x->parser, s->max);
	ev_init(&x->wait, on_wait);
	x->wait.data = x;
	set_common(x, url);
	char **h = backend_cfg(s->b)->headers;
	for (size_t i = 0; h && h[i]; i++)
		if (!reserved_header(h[i]) &&
		    !(s->tok && strncasecmp(h[i], "authorization:", 14) == 0) &&
		    add_line(x, h[i]) < 0) {
			hx_destroy(x);
			return NULL;
		}
	if (http_auth_header(x) < 0) {
		hx_destroy(x);
		return NULL;
	}
	x->msg = msg;
	x->next = s->xfers;
	if (s->xfers)
		s->xfers->prev = x;
	s->xfers = x;
	return x;
}

/* Starts a transfer now or later. */
int hx_start(struct hx *x, double delay)
{
	curl_easy_setopt(x->base.easy, CURLOPT_HTTPHEADER, x->hdrs);
	if (delay > 0) {
		ev_timer_set(&x->wait, delay, 0.);
		ev_timer_start(EV_DEFAULT, &x->wait);
		return 0;
	}
	if (curl_ev_add(&x->base) == 0)
		return 0;
	x->msg = NULL;  /* still the caller's */
	hx_abort(x);
	return -1;
}

/* New POST of O (taken on success) with the headers both generations use. */
struct hx *hx_new_post(struct be_http *s, const char *url, struct out *o, hx_done_fn on_done)
{
	struct hx *x = hx_new(s, HX_POST, url, o, on_done);
	if (!x)
		return NULL;
	curl_easy_setopt(x->base.easy, CURLOPT_POSTFIELDS, o->body);
	curl_easy_setopt(x->base.easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->len);
	if (hx_header(x, "Content-Type", "application/json") < 0 ||
	    hx_header(x, "Accept", "application/json, text/event-stream") < 0 ||
	    hx_header(x, "Expect", "") < 0 ||
	    (o->traceparent && hx_header(x, "traceparent", o->traceparent) < 0) ||
	    (o->tracestate && hx_header(x, "tracestate", o->tracestate) < 0)) {
		x->msg = NULL;
		hx_abort(x);
		return NULL;
	}
	return x;
}

/* Queues the messages of a JSON reply body. */
void hx_push_body(struct hx *x)
{
	if (x->body.len > 0)
		parse_push(x, x->body.data, x->body.len);
}

/* Detaches the message. */
struct out *hx_take_msg(struct hx *x)
{
	struct out *o = x->msg;
	x->msg = NULL;
	return o;
}

/* Why a transfer failed. */
const char *hx_error(const struct hx *x, CURLcode rc)
{
	if (x->refused)
		return x->why;
	return x->err[0] ? x->err : curl_easy_strerror(rc);
}

/* The JSON-RPC error message (or first text line) of an error reply. */
const char *hx_reply_message(struct hx *x, char *out, size_t outlen)
{
	json_error_t e;
	json_t *j = json_loadb(x->body.data ? x->body.data : "", x->body.len, 0, &e);
	const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
	size_t n = 0;
	if (m)
		snprintf(out, outlen, "%s", m);
	else
		while (n + 1 < outlen && n < x->body.len && n < 160 &&
		       x->body.data[n] >= 0x20 && x->body.data[n] < 0x7f) {
			out[n] = x->body.data[n];
			n++;
		}
	if (!m)
		out[n] = '\0';
	json_decref(j);
	return out[0] ? out : NULL;
}

/*
 * The JSON-RPC error response an error status came with, as the answer
 * to the request ID (borrowed): new, or NULL when the body is not an
 * error response to that request (or to none: id null).
 */
json_t *hx_reply_error(struct hx *x, json_t *id)
{
	json_t *j = json_loadb(x->body.data ? x->body.data : "", x->body.len, 0, NULL);
	json_t *e = json_object_get(j, "error"), *rid = json_object_get(j, "id"), *r = NULL;
	if (json_is_object(j) && json_is_object(e) && json_is_integer(json_object_get(e, "code")) &&
	    json_is_string(json_object_get(e, "message")) && !json_object_get(j, "result") &&
	    rid && (json_is_null(rid) || json_equal(rid, id)))
		r = json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", id, "error", e);
	json_decref(j);
	return r;
}

/* Resumes transfers the write callback paused. */
static void resume_paused(struct be_http *s)
{
	for (struct hx *x = s->xfers; x; x = x->next)
		if (x->paused) {
			x->paused = false;
			log_debug("%s: reply resumed", s->name);
			curl_easy_pause(x->base.easy, CURLPAUSE_CONT);
		}
}

/* Posts what was held, if the mode allows it now. */
static void post_held(struct be_http *s)
{
	while (s->held && !s->down && s->mode->can_post(s)) {
		struct out *o = s->held;
		s->held = o->next;
		if (!s->held)
			s->held_tail = &s->held;
		o->next = NULL;
		if (s->mode->post(s, o) < 0) {
			http_fail(s, o, RPC_BACKEND_GONE, 0, "cannot start an HTTP request");
			out_free(o);
		}
	}
}

/* Hands the inbox on while the chain accepts it. */
static void deliver_inbox(struct be_http *s)
{
	while (s->in_head && (!s->paused || s->down_pending)) {
		struct in_msg *m = s->in_head;
		s->in_head = m->next;
		if (!s->in_head)
			s->in_tail = &s->in_head;
		json_t *msg = m->msg;
		size_t bytes = m->bytes;
		free(m);
		if (!s->down && s->mode->intercept(s, msg))
			json_decref(msg);
		else
			backend_deliver(s->b, msg, bytes);
	}
}

/* The safe point: deliver, post held messages, report down. */
static void on_flush(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct be_http *s = w->data;
	(void)revents;
	if (!s->paused)
		resume_paused(s);
	post_held(s);
	deliver_inbox(s);
	ev_idle_start(loop, &s->kick);
	if (s->down_pending && !s->in_head) {
		s->down_pending = false;
		ev_prepare_stop(loop, w);
		http_abort_all(s);
		backend_down(s->b, s->why);
		return;
	}
	if (!s->in_head || s->paused)
		ev_prepare_stop(loop, w);
}

/*
 * Arms the flush. A prepare watcher started from inside another one's
 * callback (the app's step stopping the backends at shutdown, which
 * reports a transport without a session down from here) is only invoked
 * at the loop's next turn, after the loop has blocked: the kick keeps that
 * turn from blocking, or the report would wait for an unrelated event (the
 * shutdown deadline, at worst).
 */
void http_wake(struct be_http *s)
{
	if (!ev_is_active(&s->flush))
		ev_prepare_start(EV_DEFAULT, &s->flush);
	ev_idle_start(EV_DEFAULT, &s->kick);
}

/* Queues a message for delivery. */
void http_push(struct be_http *s, json_t *msg, size_t bytes)
{
	struct in_msg *m = calloc(1, sizeof *m);
	if (!m) {
		json_decref(msg);
		return;
	}
	m->msg = msg;
	m->bytes = bytes;
	*s->in_tail = m;
	s->in_tail = &m->next;
	http_wake(s);
}

/* Answers a request with an error. */
void http_fail(struct be_http *s, const struct out *o, int code, long status,
	       const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_warn("%s: %s", s->name, msg);
	if (!o || !o->id || o->kind != OUT_CHAIN)
		return;
	json_t *data = status > 0 ? json_pack("{s:I}", "httpStatus", (json_int_t)status) : NULL;
	json_t *err = rpc_errorf(o->id, code, "backend %s: %s", s->name, msg);
	if (data)
		json_object_set_new(json_object_get(err, "error"), "data", data);
	http_push(s, err, 0);
}

/* Holds a message. */
void http_hold(struct be_http *s, struct out *o)
{
	o->next = NULL;
	*s->held_tail = o;
	s->held_tail = &o->next;
}

/* Frees held messages. */
void http_drop_held(struct be_http *s)
{
	while (s->held) {
		struct out *o = s->held;
		s->held = o->next;
		out_free(o);
	}
	s->held_tail = &s->held;
}

/* Down: stop everything now, tell the backend after the inbox. */
void http_down(struct be_http *s, const char *why)
{
	if (s->down)
		return;
	s->down = true;
	s->down_pending = true;
	snprintf(s->why, sizeof s->why, "%s", why);
	if (!curl_ev_busy())
		http_abort_all(s);
	http_drop_held(s);
	free(s->session);
	s->session = NULL;
	http_wake(s);
}
