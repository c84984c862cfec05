/*
 * test_http_conn.c - unit tests for src/front/http_conn.c: the HTTP/1.1
 * connection layer alone, behind a small handler of the test's own, on
 * 127.0.0.1 (an ephemeral port), spoken to over plain non-blocking
 * sockets from the same loop: answers, keep-alive and closing,
 * pipelining, bodies (length, chunked, 100-continue), streamed answers,
 * the bounds (body size and budget, time, connections), quiescing and
 * stopping, and what the handler reads of a request. Every wait runs the
 * loop for a bounded time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "buf.h"
#include "http_conn.h"
#include "log.h"

#define HOST "Host: 127.0.0.1\r\n"
#define GET_HELLO "GET /hello HTTP/1.1\r\n" HOST "\r\n"
#define HELLO_ANSWER "HTTP/1.1 200 OK\r\nX-Test: yes\r\nContent-Length: 6\r\n\r\nhello\n"
#define MAX_REQS 64
#define MAX_CLIENTS 32

/* ---- the handler ---- */

/* One request the handler saw (its context). */
struct rec {
	struct hc_conn *c;
	char path[64];
	bool over;
	bool ended, ok;
	int head_seq, end_seq;   /* when on_head and on_end came, in th.seq order */
};

/* A piece of a streamed answer: text, or what the reader says instead. */
enum piece_kind { P_TEXT, P_WAIT, P_END, P_ERROR, P_FOREVER };
struct piece {
	enum piece_kind kind;
	const char *text;
};

static struct th {
	struct hc_server *s;
	unsigned port;
	struct rec reqs[MAX_REQS];
	int nreqs;
	int seq;
	int bodies;
	struct buf body;         /* the last body on_body had (taken) */
	int refuses;
	unsigned refuse_status;
	int resumes;
	const struct piece *script;   /* the stream's reader gives these in turn */
	size_t script_i;
	int reads;
	/* what /inspect read of its request */
	char method[16], path[32], sid[32], x[16], hdr[32], hdr2[32], peer[48];
	bool missing_null, hdr_missing_null;
} th;

/* The N-th request the handler saw (0-based). */
static struct rec *req_n(int n)
{
	assert_true(n < th.nreqs);
	return &th.reqs[n];
}

/* The stream's reader: the script's next piece (hc_read_fn). */
static ssize_t reader(void *ctx, char *out, size_t max)
{
	struct rec *r = ctx;
	assert_non_null(r);
	assert_string_equal(r->path, "/stream");
	th.reads++;
	const struct piece *p = &th.script[th.script_i++];
	switch (p->kind) {
	case P_WAIT: return HC_READ_WAIT;
	case P_END: th.script_i--; return HC_READ_END;   /* asked again: still the end */
	case P_ERROR: return HC_READ_ERROR;
	case P_FOREVER: th.script_i--; memset(out, 'z', max); return (ssize_t)max;
	default: break;
	}
	size_t n = strlen(p->text);
	assert_true(n > 0 && n <= max);
	memcpy(out, p->text, n);
	return (ssize_t)n;
}

/* Answers C STATUS with TEXT, whole. */
static int reply_text(struct hc_conn *c, unsigned status, const char *text)
{
	return hc_reply(c, status, "X-Test: yes\r\n", text, strlen(text));
}

/* Keeps SRC (NULL shown as "(null)") in DST, N bytes. */
static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "(null)");
}

/* A request by its path: /hello answered at once, /body read, /deny
 * answered without its body, /stream streamed, /fail closed, /inspect
 * read; /hold and /hold-body wait for hc_resume (on_resume). */
static int on_head(void *arg, struct hc_conn *c)
{
	assert_ptr_equal(arg, &th);
	assert_true(th.nreqs < MAX_REQS);
	struct rec *r = &th.reqs[th.nreqs++];
	memset(r, 0, sizeof *r);
	r->c = c;
	r->head_seq = ++th.seq;
	snprintf(r->path, sizeof r->path, "%s", hc_path(c));
	hc_set_ctx(c, r);
	assert_ptr_equal(hc_ctx(c), r);
	if (hc_over(c)) {
		r->over = true;
		return reply_text(c, 503, "busy\n");
	}
	if (strcmp(r->path, "/hello") == 0)
		return reply_text(c, 200, "hello\n");
	if (strcmp(r->path, "/body") == 0) {
		hc_read_body(c);
		return 0;
	}
	if (strcmp(r->path, "/deny") == 0)
		return reply_text(c, 403, "no\n");
	if (strcmp(r->path, "/stream") == 0)
		return hc_stream(c, 200, "Content-Type: text/plain\r\n", reader);
	if (strcmp(r->path, "/fail") == 0)
		return -1;
	if (strcmp(r->path, "/inspect") == 0) {
		copy(th.method, sizeof th.method, hc_method(c));
		copy(th.path, sizeof th.path, hc_path(c));
		copy(th.sid, sizeof th.sid, hc_query(c, "sessionId"));
		copy(th.x, sizeof th.x, hc_query(c, "x"));
		th.missing_null = hc_query(c, "missing") == NULL;
		copy(th.hdr, sizeof th.hdr, hc_header(c, "x-mixed-case"));
		copy(th.hdr2, sizeof th.hdr2, hc_header(c, "X-MIXED-CASE"));
		th.hdr_missing_null = hc_header(c, "X-Absent") == NULL;
		copy(th.peer, sizeof th.peer, hc_peer(c));
		return reply_text(c, 200, "seen\n");
	}
	/* "/hold", "/hold-body": answered after hc_resume */
	return 0;
}

/* Takes the body, answers with its length. */
static int on_body(void *arg, struct hc_conn *c, struct buf *body)
{
	assert_ptr_equal(arg, &th);
	th.bodies++;
	buf_release(&th.body);
	th.body = *body;             /* taken: the layer must not free it */
	memset(body, 0, sizeof *body);
	char text[64];
	snprintf(text, sizeof text, "got %zu\n", buf_pending(&th.body));
	return reply_text(c, 200, text);
}

/* /hold-body reads its body now; /hold is answered "late N". */
static int on_resume(void *arg, struct hc_conn *c)
{
	assert_ptr_equal(arg, &th);
	struct rec *r = hc_ctx(c);
	assert_non_null(r);
	th.resumes++;
	if (strcmp(r->path, "/hold-body") == 0) {
		hc_read_body(c);
		return 0;
	}
	char text[64];
	snprintf(text, sizeof text, "late %d\n", (int)(r - th.reqs));
	return reply_text(c, 200, text);
}

/* Notes the request's end (once). */
static void on_end(void *arg, struct hc_conn *c, void *ctx, bool ok)
{
	assert_ptr_equal(arg, &th);
	struct rec *r = ctx;
	assert_ptr_equal(r->c, c);
	assert_false(r->ended);      /* once */
	r->ended = true;
	r->ok = ok;
	r->end_seq = ++th.seq;
}

/* Notes the refusal; answers it with a header of its own. */
static void on_refuse(void *arg, struct hc_conn *c, unsigned status, const char *why)
{
	assert_ptr_equal(arg, &th);
	assert_non_null(why);
	th.refuses++;
	th.refuse_status = status;
	hc_reply(c, status, "X-Refused: yes\r\n", "refused\n", 8);
}

static const struct hc_handler handler = {
	.on_head = on_head, .on_body = on_body, .on_resume = on_resume, .on_end = on_end,
	.on_refuse = on_refuse,
};

/* Generous bounds: each test narrows the one it is about. */
static struct hc_limits limits(void)
{
	return (struct hc_limits){ .max_conns = 64, .timeout = 5.0, .max_head = 8192,
				   .max_body = 1 << 20, .body_budget = 4 << 20 };
}

/* Starts the server with LIM. */
static void start(const struct hc_limits *lim)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	th.s = hc_server_new((struct sockaddr *)&a, sizeof a, lim, &handler, &th, &th.port);
	assert_non_null(th.s);
	assert_true(th.port > 0);
}

/* ---- the loop ---- */

/* Ends a run_for. */
static void stop_loop(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	*(bool *)w->data = true;
	ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop for SECONDS. */
static void run_for(double seconds)
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

/* Runs the loop until COND holds, SECS at most (COND is then asserted by the caller). */
#define WAIT_FOR(cond, secs) \
	for (double end_ = ev_time() + (secs); !(cond) && ev_time() < end_;) \
		run_for(0.002)

/* ---- the clients ---- */

struct cl {
	bool used;
	int fd;
	char *data;                  /* what it read (NUL-terminated) */
	size_t n;
	bool eof;
	int err;                     /* the errno that ended reading, 0 on EOF */
};

static struct cl clients[MAX_CLIENTS];

/* A socket to the server, or -1 with errno (a blocking connect). */
static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)th.port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* A new non-blocking client. */
static struct cl *cl_open(void)
{
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct cl *c = &clients[i];
		if (c->used)
			continue;
		memset(c, 0, sizeof *c);
		c->used = true;
		c->fd = dial();
		assert_true(c->fd >= 0);
		assert_int_equal(fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK), 0);
		return c;
	}
	fail_msg("too many clients");
	return NULL;
}

/* Closes C and forgets it. */
static void cl_close(struct cl *c)
{
	if (c->used)
		close(c->fd);
	free(c->data);
	memset(c, 0, sizeof *c);
}

/* Forgets what C read so far. */
static void cl_forget(struct cl *c)
{
	free(c->data);
	c->data = NULL;
	c->n = 0;
}

/* Reads what has arrived for C. */
static void cl_drain(struct cl *c)
{
	char tmp[65536];
	while (!c->eof) {
		ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			c->eof = true;
			c->err = n < 0 ? errno : 0;
			return;
		}
		c->data = realloc(c->data, c->n + (size_t)n + 1);
		assert_non_null(c->data);
		memcpy(c->data + c->n, tmp, (size_t)n);
		c->n += (size_t)n;
		c->data[c->n] = '\0';
	}
}

/* Sends N bytes at P (the loop runs while the socket is full; 5 s at most). */
static void cl_send(struct cl *c, const char *p, size_t n)
{
	double end = ev_time() + 5.;
	while (n > 0) {
		ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			assert_true(ev_time() < end);
			ev_run(EV_DEFAULT, EVRUN_NOWAIT);   /* let the server read */
			cl_drain(c);
			continue;
		}
		if (k <= 0)
			fail_msg("send: %s", strerror(errno));
		p += k;
		n -= (size_t)k;
	}
}

/* Sends TEXT. */
static void cl_sends(struct cl *c, const char *text)
{
	cl_send(c, text, strlen(text));
}

/* Sends TEXT a byte at a time, the server reading each before the next. */
static void cl_trickle(struct cl *c, const char *text)
{
	for (; *text; text++) {
		cl_send(c, text, 1);
		for (int i = 0; i < 3; i++)
			ev_run(EV_DEFAULT, EVRUN_NOWAIT);
	}
}

/* True once the server closed C (what came before is read). */
static bool cl_eof(struct cl *c)
{
	cl_drain(c);
	return c->eof;
}

/* True once C read TEXT. */
static bool cl_has(struct cl *c, const char *text)
{
	cl_drain(c);
	return c->data && strstr(c->data, text);
}

/* ---- reading responses ---- */

struct resp {
	int status;
	char head[2048];             /* status line and fields, each ending CRLF */
	char body[16384];
	size_t body_n;
};

/* The value of R's first field NAME (static), or NULL. */
static const char *resp_header(const struct resp *r, const char *name)
{
	static char value[256];
	size_t n = strlen(name);
	for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;
		if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1;
			while (*v == ' ')
				v++;
			snprintf(value, sizeof value, "%.*s", (int)(strstr(v, "\r\n") - v), v);
			return value;
		}
	}
	return NULL;
}

/* Decodes the chunked body at P (N bytes) into R: bytes used, 0 incomplete, -1 malformed. */
static ssize_t dechunk(const char *p, size_t n, struct resp *r)
{
	size_t at = 0;
	for (;;) {
		const char *eol = memmem(p + at, n - at, "\r\n", 2);
		if (!eol)
			return 0;
		char *e;
		unsigned long k = strtoul(p + at, &e, 16);
		if (e != eol || e == p + at)
			return -1;
		at = (size_t)(eol - p) + 2;
		if (k == 0)
			return n - at >= 2 ? (memcmp(p + at, "\r\n", 2) == 0 ? (ssize_t)at + 2 : -1) : 0;
		if (n - at < k + 2)
			return 0;
		if (memcmp(p + at + k, "\r\n", 2) != 0 || r->body_n + k > sizeof r->body - 1)
			return -1;
		memcpy(r->body + r->body_n, p + at, k);
		r->body_n += k;
		at += k + 2;
	}
}

/* Parses the response at P (N bytes; EOF: nothing follows) into R: its
 * length, 0 when incomplete, -1 when malformed. */
static ssize_t resp_parse(const char *p, size_t n, bool eof, struct resp *r)
{
	memset(r, 0, sizeof *r);
	const char *end = memmem(p, n, "\r\n\r\n", 4);
	if (!end)
		return 0;
	size_t hn = (size_t)(end - p) + 2;
	if (hn >= sizeof r->head || sscanf(p, "HTTP/1.1 %3d ", &r->status) != 1)
		return -1;
	memcpy(r->head, p, hn);
	const char *b = end + 4;
	size_t left = n - (size_t)(b - p);
	const char *te = resp_header(r, "Transfer-Encoding");
	const char *cl = resp_header(r, "Content-Length");
	size_t used;
	if (te) {
		if (strcmp(te, "chunked") != 0)
			return -1;
		ssize_t k = dechunk(b, left, r);
		if (k <= 0)
			return k;
		used = (size_t)k;
	} else if (cl || r->status < 200) {
		used = cl ? strtoul(cl, NULL, 10) : 0;
		if (used > sizeof r->body - 1)
			return -1;
		if (left < used)
			return 0;
		memcpy(r->body, b, used);
		r->body_n = used;
	} else {   /* until the connection closes */
		if (!eof)
			return 0;
		if (left > sizeof r->body - 1)
			return -1;
		memcpy(r->body, b, left);
		r->body_n = used = left;
	}
	r->body[r->body_n] = '\0';
	return (ssize_t)((size_t)(b - p) + used);
}

/* Complete responses C read so far; the I-th into R when R. */
static int cl_resps(struct cl *c, int i, struct resp *r)
{
	static struct resp tmp;
	cl_drain(c);
	size_t at = 0;
	int count = 0;
	while (at < c->n) {
		struct resp *into = r && count == i ? r : &tmp;
		ssize_t k = resp_parse(c->data + at, c->n - at, c->eof, into);
		if (k < 0)
			fail_msg("malformed response: %s", c->data + at);
		if (k == 0)
			break;
		at += (size_t)k;
		count++;
	}
	return count;
}

/* Waits for C's I-th response (SECS at most) into R. */
static void cl_resp(struct cl *c, int i, struct resp *r, double secs)
{
	WAIT_FOR(cl_resps(c, i, NULL) > i, secs);
	if (cl_resps(c, i, r) <= i)
		fail_msg("no response %d in %.1f s; read: %s", i, secs, c->data ? c->data : "");
}

/* True when R says the connection closes after it. */
static bool closes(const struct resp *r)
{
	const char *v = resp_header(r, "Connection");
	return v && strcmp(v, "close") == 0;
}

/* ---- fixtures ---- */

/* The loop, a handler with nothing seen yet, no client. */
static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	memset(&th, 0, sizeof th);
	memset(clients, 0, sizeof clients);
	return 0;
}

/* Closes the clients, then frees the server (on_end for what is open). */
static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].used)
			cl_close(&clients[i]);
	hc_server_free(th.s);
	th.s = NULL;
	buf_release(&th.body);
	run_for(0.001);
	return 0;
}

/* ---- answers, keep-alive, closing ---- */

/* A GET answered at once; a second on the same connection; the ends are ok. */
static void test_keep_alive(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, GET_HELLO);
	WAIT_FOR(cl_has(a, "hello\n"), 1.);
	run_for(0.02);
	cl_drain(a);
	assert_string_equal(a->data, HELLO_ANSWER);   /* the whole answer, to the byte */
	assert_false(a->eof);
	cl_forget(a);
	cl_sends(a, GET_HELLO);
	struct resp r;
	cl_resp(a, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello\n");
	assert_false(closes(&r));
	run_for(0.02);
	assert_false(cl_eof(a));
	assert_int_equal(th.nreqs, 2);
	assert_true(req_n(0)->ended && req_n(0)->ok);
	assert_true(req_n(1)->ended && req_n(1)->ok);
	assert_int_equal(hc_server_conns(th.s), 1);
	assert_int_equal(hc_server_responses(th.s, 200), 2);
	assert_int_equal(hc_server_bytes_out(th.s), 12);
}

/* "Connection: close" from the client, and HTTP/1.0: closed after the answer. */
static void test_close_after(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, "GET /hello HTTP/1.1\r\n" HOST "Connection: close\r\n\r\n");
	cl_resp(a, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello\n");
	assert_true(closes(&r));
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);
	assert_int_equal(a->err, 0);

	struct cl *b = cl_open();
	cl_sends(b, "GET /hello HTTP/1.0\r\n\r\n");
	cl_resp(b, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_true(closes(&r));
	WAIT_FOR(cl_eof(b), 1.);
	assert_true(b->eof);

	/* HTTP/1.0 streamed: no chunks, the close ends the body */
	static const struct piece script[] = { { P_TEXT, "alpha" }, { P_TEXT, "beta" }, { P_END, 0 } };
	th.script = script;
	struct cl *c = cl_open();
	cl_sends(c, "GET /stream HTTP/1.0\r\n\r\n");
	WAIT_FOR(cl_eof(c), 1.);
	assert_true(c->eof);
	assert_int_equal(cl_resps(c, 0, &r), 1);
	assert_null(resp_header(&r, "Transfer-Encoding"));
	assert_true(closes(&r));
	assert_string_equal(r.body, "alphabeta");
	assert_true(req_n(2)->ended && req_n(2)->ok);
	assert_int_equal(hc_server_conns(th.s), 3);   /* lingering, until the clients close */
	cl_close(a);
	cl_close(b);
	cl_close(c);
	WAIT_FOR(hc_server_conns(th.s) == 0, 1.);
	assert_int_equal(hc_server_conns(th.s), 0);
}

/* The handler's -1 from on_head closes the connection. */
static void test_handler_closes(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "GET /fail HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);
	assert_int_equal(a->n, 0);
	assert_true(req_n(0)->ended);
	assert_false(req_n(0)->ok);
}

/* ---- pipelining ---- */

static void test_pipelining(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "GET /hold HTTP/1.1\r\n" HOST "\r\n" GET_HELLO);
	run_for(0.1);
	assert_int_equal(th.nreqs, 1);            /* the second waits in the input */
	assert_int_equal(a->n, 0);
	assert_true(cl_resps(a, 0, NULL) == 0);
	hc_resume(req_n(0)->c);
	struct resp r;
	cl_resp(a, 1, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello\n");
	cl_resps(a, 0, &r);
	assert_string_equal(r.body, "late 0\n");
	assert_int_equal(th.resumes, 1);
	assert_int_equal(th.nreqs, 2);
	/* the second came to the handler only once the first was written whole */
	assert_true(req_n(0)->ended && req_n(0)->ok);
	assert_true(req_n(0)->end_seq < req_n(1)->head_seq);
	assert_false(cl_eof(a));
}

/* ---- bodies ---- */

static void test_body_length(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 10\r\n\r\nhello");
	run_for(0.05);
	assert_int_equal(th.bodies, 0);
	cl_sends(a, " body" GET_HELLO);   /* the rest, and the next request */
	struct resp r;
	cl_resp(a, 1, &r, 1.);
	assert_string_equal(r.body, "hello\n");
	cl_resps(a, 0, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "got 10\n");
	assert_false(closes(&r));
	assert_int_equal(th.bodies, 1);
	assert_int_equal(buf_pending(&th.body), 10);
	assert_memory_equal(th.body.data + th.body.off, "hello body", 10);
	assert_int_equal(hc_server_bytes_in(th.s), 10);
	/* a large one, read straight into the body */
	static char payload[300000];
	size_t big = sizeof payload;
	for (size_t i = 0; i < big; i++)
		payload[i] = (char)('a' + i % 26);
	cl_forget(a);
	char head[128];
	snprintf(head, sizeof head, "POST /body HTTP/1.1\r\n" HOST "Content-Length: %zu\r\n\r\n", big);
	cl_sends(a, head);
	cl_send(a, payload, big);
	cl_resp(a, 0, &r, 2.);
	assert_string_equal(r.body, "got 300000\n");
	assert_int_equal(buf_pending(&th.body), big);
	assert_memory_equal(th.body.data + th.body.off, payload, big);
}

static void test_body_chunked(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "POST /body HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n");
	cl_trickle(a, "4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n"
		   "Trailer-Field: x\r\n\r\n");
	cl_sends(a, GET_HELLO);                   /* kept alive after it */
	struct resp r;
	cl_resp(a, 1, &r, 1.);
	assert_string_equal(r.body, "hello\n");
	cl_resps(a, 0, &r);
	assert_string_equal(r.body, "got 23\n");
	assert_int_equal(th.bodies, 1);
	assert_int_equal(buf_pending(&th.body), 23);
	assert_memory_equal(th.body.data + th.body.off, "Wikipedia in\r\n\r\nchunks.", 23);
}

/* Expect: 100-continue: the 100 only when the handler asks for the body. */
static void test_expect_continue(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "POST /hold-body HTTP/1.1\r\n" HOST "Content-Length: 5\r\n"
		 "Expect: 100-continue\r\n\r\n");
	run_for(0.2);
	assert_int_equal(th.nreqs, 1);
	cl_drain(a);
	assert_int_equal(a->n, 0);                /* nothing before the handler wants it */
	hc_resume(req_n(0)->c);                   /* on_resume: hc_read_body */
	WAIT_FOR(cl_has(a, "\r\n\r\n"), 1.);
	run_for(0.05);
	cl_drain(a);
	assert_string_equal(a->data, "HTTP/1.1 100 Continue\r\n\r\n");
	assert_int_equal(th.bodies, 0);
	cl_sends(a, "hello");
	struct resp r;
	cl_resp(a, 1, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "got 5\n");
	assert_false(closes(&r));
	assert_memory_equal(th.body.data + th.body.off, "hello", 5);
	assert_int_equal(hc_server_responses(th.s, 100), 1);
	/* HTTP/1.0 ignores Expect: no 100 */
	struct cl *b = cl_open();
	cl_sends(b, "POST /body HTTP/1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
	run_for(0.1);
	cl_drain(b);
	assert_int_equal(b->n, 0);
	cl_sends(b, "ok");
	cl_resp(b, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "got 2\n");
}

/* The body asked for later, when the client did not wait to send it
 * (more of it than the input keeps while the handler has the request). */
static void test_body_later(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.timeout = 0.4;
	start(&lim);
	static char payload[40000];
	size_t big = sizeof payload;
	for (size_t i = 0; i < big; i++)
		payload[i] = (char)('A' + i % 23);
	struct cl *a = cl_open();
	char head[128];
	snprintf(head, sizeof head, "POST /hold-body HTTP/1.1\r\n" HOST "Content-Length: %zu\r\n\r\n",
		 big);
	cl_sends(a, head);
	cl_send(a, payload, big);
	run_for(0.6);                             /* waiting for the handler: no timeout */
	assert_int_equal(th.nreqs, 1);
	assert_int_equal(th.bodies, 0);
	assert_false(cl_eof(a));
	hc_resume(req_n(0)->c);                   /* on_resume: hc_read_body */
	struct resp r;
	cl_resp(a, 0, &r, 2.);
	assert_string_equal(r.body, "got 40000\n");
	assert_int_equal(buf_pending(&th.body), big);
	assert_memory_equal(th.body.data + th.body.off, payload, big);
	assert_false(closes(&r));
}

/* A HEAD request's answer has no body, whole or streamed. */
static void test_head_request(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "HEAD /hello HTTP/1.1\r\n" HOST "\r\n" GET_HELLO);
	WAIT_FOR(cl_has(a, "hello\n"), 1.);
	run_for(0.02);
	cl_drain(a);
	assert_non_null(a->data);
	assert_string_equal(a->data, "HTTP/1.1 200 OK\r\nX-Test: yes\r\nContent-Length: 6\r\n\r\n"
			    HELLO_ANSWER);
	static const struct piece script[] = { { P_TEXT, "alpha" }, { P_END, 0 } };
	th.script = script;
	cl_forget(a);
	cl_sends(a, "HEAD /stream HTTP/1.1\r\n" HOST "\r\n" GET_HELLO);
	WAIT_FOR(cl_has(a, "hello\n"), 1.);
	run_for(0.02);
	cl_drain(a);
	assert_non_null(a->data);
	assert_string_equal(a->data, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n" HELLO_ANSWER);
	assert_true(req_n(2)->ended && req_n(2)->ok);
}

/* Answered from on_head, the body unread: no 100, closed after, lingering. */
static void test_answer_without_body(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, "POST /deny HTTP/1.1\r\n" HOST "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
	cl_resp(a, 0, &r, 1.);
	assert_int_equal(r.status, 403);
	assert_false(cl_has(a, "100 Continue"));
	assert_true(closes(&r));
	assert_string_equal(r.body, "no\n");
	WAIT_FOR(cl_eof(a), 1.);                  /* its writing side is shut */
	assert_true(a->eof);
	assert_int_equal(a->err, 0);
	cl_sends(a, "hello");                     /* the server still drains */
	run_for(0.05);
	assert_int_equal(hc_server_conns(th.s), 1);
	cl_close(a);
	WAIT_FOR(hc_server_conns(th.s) == 0, 1.);
	assert_int_equal(hc_server_conns(th.s), 0);

	/* a client sending a large body all the while still reads its answer whole */
	static char payload[400000];
	size_t big = sizeof payload;
	struct cl *b = cl_open();
	char head[128];
	snprintf(head, sizeof head, "POST /deny HTTP/1.1\r\n" HOST "Content-Length: %zu\r\n\r\n", big);
	cl_sends(b, head);
	cl_send(b, payload, big);
	WAIT_FOR(cl_eof(b), 2.);
	assert_true(b->eof);
	assert_int_equal(b->err, 0);              /* no reset */
	assert_int_equal(cl_resps(b, 0, &r), 1);
	assert_int_equal(r.status, 403);
	assert_true(closes(&r));
	assert_int_equal(th.bodies, 0);
}

/* ---- streamed answers ---- */

static void test_stream(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	static const struct piece script[] = {
		{ P_TEXT, "alpha" }, { P_TEXT, "beta" }, { P_WAIT, 0 },
		{ P_TEXT, "gamma" }, { P_WAIT, 0 }, { P_TEXT, "delta" }, { P_END, 0 },
	};
	th.script = script;
	struct cl *a = cl_open();
	cl_sends(a, "GET /stream HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(cl_has(a, "beta"), 1.);
	run_for(0.05);
	assert_int_equal(th.reads, 3);            /* asked no more after the wait */
	assert_true(cl_has(a, "Transfer-Encoding: chunked\r\n"));
	assert_true(cl_has(a, "Content-Type: text/plain\r\n"));
	assert_int_equal(cl_resps(a, 0, NULL), 0);
	assert_false(req_n(0)->ended);
	hc_resume(req_n(0)->c);
	WAIT_FOR(cl_has(a, "gamma"), 1.);
	run_for(0.05);
	assert_int_equal(cl_resps(a, 0, NULL), 0);
	hc_resume(req_n(0)->c);
	struct resp r;
	cl_resp(a, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "alphabetagammadelta");
	assert_false(closes(&r));
	assert_true(req_n(0)->ended && req_n(0)->ok);
	/* kept alive */
	cl_forget(a);
	cl_sends(a, GET_HELLO);
	cl_resp(a, 0, &r, 1.);
	assert_string_equal(r.body, "hello\n");
}

/* A stream whose reader fails: the connection closes, on_end(false). */
static void test_stream_error(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	static const struct piece script[] = { { P_TEXT, "part" }, { P_WAIT, 0 }, { P_ERROR, 0 } };
	th.script = script;
	struct cl *a = cl_open();
	cl_sends(a, "GET /stream HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(cl_has(a, "part"), 1.);
	assert_true(cl_has(a, "part"));
	assert_false(req_n(0)->ended);
	hc_resume(req_n(0)->c);
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);
	assert_int_equal(cl_resps(a, 0, NULL), 0);   /* no last chunk */
	assert_true(req_n(0)->ended);
	assert_false(req_n(0)->ok);
	assert_int_equal(hc_server_conns(th.s), 0);
}

/* A client that goes while its request waits: on_end(false) at once. */
static void test_client_gone(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "GET /hold HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(th.nreqs == 1, 1.);
	assert_int_equal(th.nreqs, 1);
	double t0 = ev_time();
	cl_close(a);
	WAIT_FOR(req_n(0)->ended, 1.);
	assert_true(req_n(0)->ended);
	assert_false(req_n(0)->ok);
	assert_true(ev_time() - t0 < 0.2);
	/* ... and while its stream waits */
	static const struct piece script[] = { { P_TEXT, "x" }, { P_WAIT, 0 }, { P_END, 0 } };
	th.script = script;
	struct cl *b = cl_open();
	cl_sends(b, "GET /stream HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(cl_has(b, "\r\n\r\n"), 1.);
	t0 = ev_time();
	cl_close(b);
	WAIT_FOR(req_n(1)->ended, 1.);
	assert_true(req_n(1)->ended);
	assert_false(req_n(1)->ok);
	assert_true(ev_time() - t0 < 0.2);
	assert_int_equal(hc_server_conns(th.s), 0);
}

/* ---- bounds ---- */

static void test_max_body(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.max_body = 1000;
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 1001\r\nExpect: 100-continue\r\n\r\n");
	cl_resp(a, 0, &r, 1.);                    /* without a byte of the body */
	assert_int_equal(r.status, 413);
	assert_string_equal(resp_header(&r, "X-Refused"), "yes");
	assert_true(closes(&r));
	assert_false(cl_has(a, "100 Continue"));
	assert_int_equal(th.refuses, 1);
	assert_int_equal(th.refuse_status, 413);
	assert_int_equal(th.bodies, 0);
	assert_true(req_n(0)->ended);             /* the handler's request is over */
	assert_false(req_n(0)->ok);
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);

	/* exactly the bound is fine */
	char body[1001];
	memset(body, 'b', 1000);
	body[1000] = '\0';
	struct cl *b = cl_open();
	cl_sends(b, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 1000\r\n\r\n");
	cl_sends(b, body);
	cl_resp(b, 0, &r, 1.);
	assert_string_equal(r.body, "got 1000\n");

	/* a chunked one: 413 where the size passes the bound, before its data */
	struct cl *c = cl_open();
	cl_sends(c, "POST /body HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
		 "200\r\n");
	cl_send(c, body, 0x200);
	cl_sends(c, "\r\n1f9\r\n");                /* 512 + 505 > 1000 */
	cl_resp(c, 0, &r, 1.);
	assert_int_equal(r.status, 413);
	assert_true(closes(&r));
	assert_int_equal(th.refuse_status, 413);
	assert_int_equal(th.refuses, 2);
	assert_int_equal(th.bodies, 1);
	WAIT_FOR(cl_eof(c), 1.);
	assert_true(c->eof);
}

static void test_body_budget(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.max_body = 1000;
	lim.body_budget = 1000;
	start(&lim);
	struct resp r;
	char body[601];
	memset(body, 'q', 600);
	body[600] = '\0';
	struct cl *a = cl_open();
	cl_sends(a, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 600\r\n\r\nabc");
	run_for(0.05);
	struct cl *b = cl_open();
	cl_sends(b, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 600\r\n\r\n");
	cl_resp(b, 0, &r, 1.);
	assert_int_equal(r.status, 503);
	assert_true(closes(&r));
	assert_int_equal(th.refuse_status, 503);
	WAIT_FOR(cl_eof(b), 1.);
	assert_true(b->eof);
	/* chunked, against the same budget */
	struct cl *c = cl_open();
	cl_sends(c, "POST /body HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n1f4\r\n");
	cl_send(c, body, 500);
	cl_resp(c, 0, &r, 1.);
	assert_int_equal(r.status, 503);
	assert_true(closes(&r));
	assert_int_equal(th.refuses, 2);
	/* the first goes on; its budget is given back after */
	cl_send(a, body, 597);
	cl_resp(a, 0, &r, 1.);
	assert_string_equal(r.body, "got 600\n");
	struct cl *d = cl_open();
	cl_sends(d, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 600\r\n\r\n");
	cl_sends(d, body);
	cl_resp(d, 0, &r, 1.);
	assert_string_equal(r.body, "got 600\n");
	assert_int_equal(th.bodies, 2);
}

#define TIMEOUT 0.4

/* A head trickled a byte per 100 ms is closed after the timeout all the same. */
static void test_timeout_head(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.timeout = TIMEOUT;
	start(&lim);
	struct cl *a = cl_open();
	double t0 = ev_time();
	const char *head = "GET /hello HTTP/1.1\r\n" HOST "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	for (const char *p = head; *p && !cl_eof(a) && ev_time() - t0 < 3.; p++) {
		if (send(a->fd, p, 1, MSG_NOSIGNAL) != 1)
			break;
		run_for(0.1);
	}
	WAIT_FOR(cl_eof(a), 1.);
	double took = ev_time() - t0;
	assert_true(a->eof);
	if (took < TIMEOUT - 0.05 || took > TIMEOUT + 0.3)
		fail_msg("closed after %.3f s", took);
	assert_int_equal(a->n, 0);
	assert_int_equal(th.nreqs, 0);
}

/* A body trickled in keeps its connection (progress); one that stalls
 * is closed after the timeout. */
static void test_timeout_body(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.timeout = TIMEOUT;
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 12\r\n\r\n");
	for (const char *p = "slow but on"; *p; p++) {   /* 11 bytes, 1.1 s */
		cl_send(a, p, 1);
		run_for(0.1);
	}
	cl_sends(a, "!");
	cl_resp(a, 0, &r, 1.);
	assert_string_equal(r.body, "got 12\n");
	assert_memory_equal(th.body.data + th.body.off, "slow but on!", 12);

	struct cl *b = cl_open();
	cl_sends(b, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 10\r\n\r\nhello");
	double t0 = ev_time();
	WAIT_FOR(cl_eof(b), 2.);
	double took = ev_time() - t0;
	assert_true(b->eof);
	if (took < TIMEOUT - 0.05 || took > TIMEOUT + 0.3)
		fail_msg("closed after %.3f s", took);
	assert_int_equal(b->n, 0);
	assert_true(req_n(1)->ended);
	assert_false(req_n(1)->ok);
}

/* A client that stops reading a stream is let go after the timeout. */
static void test_timeout_slow_reader(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.timeout = TIMEOUT;
	start(&lim);
	static const struct piece script[] = { { P_FOREVER, 0 } };
	th.script = script;
	struct cl *a = cl_open();
	cl_sends(a, "GET /stream HTTP/1.1\r\n" HOST "\r\n");   /* and never reads */
	double t0 = ev_time();
	WAIT_FOR(th.nreqs == 1 && th.reqs[0].ended, 4.);
	double took = ev_time() - t0;
	assert_true(th.nreqs == 1 && th.reqs[0].ended);
	assert_false(th.reqs[0].ok);
	if (took < TIMEOUT - 0.05 || took > TIMEOUT + 1.5)
		fail_msg("closed after %.3f s", took);
	assert_int_equal(hc_server_conns(th.s), 0);
}

/* An idle kept-alive connection closes after the timeout; a request
 * waiting for the handler does not. */
static void test_timeout_idle(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.timeout = TIMEOUT;
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, GET_HELLO);
	cl_resp(a, 0, &r, 1.);
	double t0 = ev_time();
	WAIT_FOR(cl_eof(a), 2.);
	double took = ev_time() - t0;
	assert_true(a->eof);
	if (took < TIMEOUT - 0.05 || took > TIMEOUT + 0.3)
		fail_msg("closed after %.3f s", took);

	struct cl *b = cl_open();
	cl_sends(b, "GET /hold HTTP/1.1\r\n" HOST "\r\n");
	run_for(TIMEOUT * 2.5);
	assert_false(cl_eof(b));
	assert_int_equal(th.nreqs, 2);
	assert_false(req_n(1)->ended);
	hc_resume(req_n(1)->c);
	cl_resp(b, 0, &r, 1.);
	assert_string_equal(r.body, "late 1\n");
	assert_true(req_n(1)->ok);
	/* ... and a stream that waits for events does not either */
	static const struct piece script[] = { { P_TEXT, "x" }, { P_WAIT, 0 }, { P_END, 0 } };
	th.script = script;
	cl_forget(b);
	cl_sends(b, "GET /stream HTTP/1.1\r\n" HOST "\r\n");
	run_for(TIMEOUT * 2.5);
	assert_false(cl_eof(b));
	hc_resume(req_n(2)->c);
	cl_resp(b, 0, &r, 1.);
	assert_string_equal(r.body, "x");
	/* idle again: closed after the timeout */
	WAIT_FOR(cl_eof(b), TIMEOUT + 0.5);
	assert_true(b->eof);
}

/* A third connection while two are idle closes the oldest idle one. */
static void test_max_conns_idle(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.max_conns = 2;
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, GET_HELLO);
	cl_resp(a, 0, &r, 1.);
	run_for(0.02);
	struct cl *b = cl_open();
	cl_sends(b, GET_HELLO);
	cl_resp(b, 0, &r, 1.);
	run_for(0.02);
	struct cl *c = cl_open();
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);
	run_for(0.02);
	assert_false(cl_eof(b));
	cl_sends(c, GET_HELLO);
	cl_resp(c, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_false(closes(&r));
	assert_false(req_n(2)->over);
	assert_int_equal(hc_server_conns(th.s), 2);
	cl_forget(b);
	cl_sends(b, GET_HELLO);
	cl_resp(b, 0, &r, 1.);
	assert_int_equal(r.status, 200);
}

/* While two have requests open, a third is hc_over. */
static void test_max_conns_busy(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.max_conns = 2;
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, "GET /hold HTTP/1.1\r\n" HOST "\r\n");
	struct cl *b = cl_open();
	cl_sends(b, "GET /hold HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(th.nreqs == 2, 1.);
	assert_int_equal(th.nreqs, 2);
	struct cl *c = cl_open();
	cl_sends(c, GET_HELLO);
	cl_resp(c, 0, &r, 1.);
	assert_int_equal(r.status, 503);
	assert_true(closes(&r));
	assert_true(req_n(2)->over);
	assert_false(req_n(0)->over || req_n(1)->over);
	WAIT_FOR(cl_eof(c), 1.);
	assert_true(c->eof);
	hc_resume(req_n(0)->c);
	hc_resume(req_n(1)->c);
	cl_resp(a, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	cl_resp(b, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_false(closes(&r));
}

/* True when no connection is open, nor was for the last 50 ms of the loop. */
static bool conns_settled(void)
{
	if (hc_server_conns(th.s) != 0)
		return false;
	for (int i = 0; i < 5; i++) {
		run_for(0.01);
		if (hc_server_conns(th.s) != 0)
			return false;
	}
	return true;
}

/* Past max_conns + HC_OVERFLOW the listening socket waits (the first two
 * busy, none idle to make room: the others are over); once they all
 * close, it is served again. */
static void test_max_conns_overflow(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	lim.max_conns = 2;
	start(&lim);
	enum { N = 2 + HC_OVERFLOW + 4 };
	for (int round = 0; round < 5; round++) {
		struct cl *cs[N];
		int held = th.nreqs;
		for (int i = 0; i < 2; i++) {
			cs[i] = cl_open();
			cl_sends(cs[i], "GET /hold HTTP/1.1\r\n" HOST "\r\n");
		}
		WAIT_FOR(th.nreqs == held + 2, 1.);
		assert_int_equal(th.nreqs, held + 2);
		for (int i = 2; i < N; i++)
			cs[i] = cl_open();            /* the last 4 wait in the backlog */
		run_for(0.05);
		assert_int_equal(hc_server_conns(th.s), lim.max_conns + HC_OVERFLOW);
		for (int i = 0; i < N; i++)
			cl_close(cs[i]);
		/* none left, the backlog's accepted too (else the new one comes
		 * with them, and is over) */
		WAIT_FOR(conns_settled(), 1.);
		assert_int_equal(hc_server_conns(th.s), 0);
		assert_true(req_n(held)->ended && req_n(held + 1)->ended);
		assert_false(req_n(held)->ok || req_n(held + 1)->ok);
		struct cl *a = cl_open();
		cl_sends(a, GET_HELLO);
		struct resp r;
		cl_resp(a, 0, &r, 1.);
		assert_int_equal(r.status, 200);
		cl_close(a);
		WAIT_FOR(hc_server_conns(th.s) == 0, 1.);
	}
}

/* Out of descriptors, the server does not spin on its listening socket;
 * once one is free, it accepts again. */
static void test_accept_emfile(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	int spare[64], nspare = 0;
	int fd = dup(0);                          /* the lowest free descriptor */
	assert_true(fd >= 0);
	close(fd);
	low = old;
	low.rlim_cur = (rlim_t)fd + 40;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nspare < 64 && (fd = dup(0)) >= 0)
		spare[nspare++] = fd;
	assert_true(nspare > 2 && nspare < 64);
	close(spare[--nspare]);                   /* room for the client's socket alone */
	struct cl *a = cl_open();
	cl_sends(a, GET_HELLO);
	unsigned before = ev_iteration(EV_DEFAULT);
	run_for(0.2);
	unsigned turns = ev_iteration(EV_DEFAULT) - before;
	close(spare[--nspare]);                   /* room for the server's */
	struct resp r;
	cl_resp(a, 0, &r, 1.);
	while (nspare > 0)
		close(spare[--nspare]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	if (turns > 50)
		fail_msg("the loop turned %u times in 0.2 s", turns);
	assert_int_equal(r.status, 200);
}

/* ---- quiescing, stopping ---- */

static void test_quiesce(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, GET_HELLO);
	cl_resp(a, 0, &r, 1.);
	hc_server_quiesce(th.s);
	run_for(0.01);
	int fd = dial(), e = errno;
	assert_int_equal(fd, -1);
	assert_int_equal(e, ECONNREFUSED);
	for (int i = 0; i < 2; i++) {
		cl_forget(a);
		cl_sends(a, GET_HELLO);
		cl_resp(a, 0, &r, 1.);
		assert_int_equal(r.status, 200);
		assert_false(closes(&r));
	}
	assert_false(cl_eof(a));
}

static void test_stop(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	static const struct piece script[] = {
		{ P_TEXT, "one" }, { P_WAIT, 0 }, { P_TEXT, "two" }, { P_END, 0 },
	};
	th.script = script;
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, GET_HELLO);
	cl_resp(a, 0, &r, 1.);
	struct cl *b = cl_open();
	cl_sends(b, "GET /stream HTTP/1.1\r\n" HOST "\r\n");
	WAIT_FOR(cl_has(b, "one"), 1.);
	assert_true(cl_has(b, "one"));
	struct cl *c = cl_open();
	cl_sends(c, "GET /hello HTTP/1.1\r\n");   /* half a head */
	run_for(0.05);
	hc_server_stop(th.s);
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);                      /* idle: closed now */
	assert_int_equal(dial(), -1);
	run_for(0.05);
	assert_false(cl_eof(b));                  /* streaming: goes on */
	assert_false(cl_eof(c));                  /* its request has begun: answered */
	cl_sends(c, HOST "\r\n");
	cl_resp(c, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_true(closes(&r));
	WAIT_FOR(cl_eof(c), 1.);
	assert_true(c->eof);
	cl_close(c);
	hc_resume(req_n(1)->c);
	WAIT_FOR(cl_eof(b), 1.);
	assert_true(b->eof);                      /* closed after its end */
	assert_int_equal(cl_resps(b, 0, &r), 1);
	assert_string_equal(r.body, "onetwo");
	assert_true(req_n(1)->ended && req_n(1)->ok);
	cl_close(b);
	WAIT_FOR(hc_server_conns(th.s) == 0, 1.);
	assert_int_equal(hc_server_conns(th.s), 0);
}

/* ---- what the handler reads; framing errors ---- */

static void test_inspect(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct resp r;
	struct cl *a = cl_open();
	cl_sends(a, "GET /inspect?sessionId=a%20b&x=1 HTTP/1.1\r\n" HOST
		 "X-Mixed-Case:  Value 1 \r\n\r\n");
	cl_resp(a, 0, &r, 1.);
	assert_int_equal(r.status, 200);
	assert_string_equal(th.method, "GET");
	assert_string_equal(th.path, "/inspect");
	assert_string_equal(th.sid, "a b");
	assert_string_equal(th.x, "1");
	assert_true(th.missing_null);
	assert_string_equal(th.hdr, "Value 1");
	assert_string_equal(th.hdr2, "Value 1");
	assert_true(th.hdr_missing_null);
	assert_string_equal(th.peer, "127.0.0.1");
}

static void test_bad_framing(void **state)
{
	(void)state;
	struct hc_limits lim = limits();
	start(&lim);
	struct cl *a = cl_open();
	cl_sends(a, "POST /body HTTP/1.1\r\n" HOST "Content-Length: 1\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" GET_HELLO);
	WAIT_FOR(cl_eof(a), 1.);
	assert_true(a->eof);
	run_for(0.05);
	struct resp r;
	assert_int_equal(cl_resps(a, 0, &r), 1);   /* the one behind is never answered */
	assert_int_equal(r.status, 400);
	assert_true(closes(&r));
	assert_string_equal(resp_header(&r, "X-Refused"), "yes");
	assert_int_equal(th.refuses, 1);
	assert_int_equal(th.refuse_status, 400);
	assert_int_equal(th.nreqs, 0);
	assert_int_equal(hc_server_responses(th.s, 400), 1);
	assert_int_equal(hc_server_responses(th.s, 200), 0);

	/* a head over max_head: 431 */
	char big[9000];
	int n = snprintf(big, sizeof big, "GET /hello HTTP/1.1\r\n" HOST "X-Big: ");
	memset(big + n, 'v', sizeof big - (size_t)n - 1);
	big[sizeof big - 1] = '\0';
	struct cl *b = cl_open();
	cl_sends(b, big);
	cl_resp(b, 0, &r, 1.);
	assert_int_equal(r.status, 431);
	assert_true(closes(&r));
	assert_int_equal(th.refuse_status, 431);
	WAIT_FOR(cl_eof(b), 1.);
	assert_true(b->eof);
	assert_int_equal(th.nreqs, 0);
}

int main(void)
{
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_keep_alive),
		T(test_close_after),
		T(test_handler_closes),
		T(test_pipelining),
		T(test_body_length),
		T(test_body_chunked),
		T(test_expect_continue),
		T(test_body_later),
		T(test_answer_without_body),
		T(test_head_request),
		T(test_stream),
		T(test_stream_error),
		T(test_client_gone),
		T(test_max_body),
		T(test_body_budget),
		T(test_timeout_head),
		T(test_timeout_body),
		T(test_timeout_slow_reader),
		T(test_timeout_idle),
		T(test_max_conns_idle),
		T(test_max_conns_busy),
		T(test_max_conns_overflow),
		T(test_accept_emfile),
		T(test_quiesce),
		T(test_stop),
		T(test_inspect),
		T(test_bad_framing),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
