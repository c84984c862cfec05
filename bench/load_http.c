/*
 * load_http.c: mcp-bench-load's Streamable HTTP transport (--url).
 *
 * One TCP connection per operation in flight, HTTP/1.1 keep-alive, one
 * request at a time on each (no pipelining), every socket non-blocking on
 * one level-triggered epoll set.  A request is a POST of one JSON-RPC
 * message carrying Accept, Mcp-Session-Id and MCP-Protocol-Version as the
 * specification asks of a client.  Its response is read however it is
 * framed (Content-Length, chunked, or until the server closes) and however
 * it is encoded: an application/json body is one message, handed to the
 * core when the body ends; a text/event-stream body is cut into events as
 * bytes arrive (data: lines joined with "\n", a blank line ends an event,
 * lines end with LF or CRLF) and each event's data is handed to the core at
 * once, so a progress notification is checked against its result in stream
 * order.  Whatever goes wrong (a status other than 200, a connection closed
 * or reset, a body that ends without the request's answer) is counted as an
 * error of that request, which then ends; a failed handshake stops the run.
 *
 * Sessions: session k does its handshake (initialize, then
 * notifications/initialized) on connection k % conns; operation slot s
 * then posts on connection s in session s % sessions.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "load.h"

#define PROTOCOL "2025-06-18"
#define MAX_HEAD 65536
#define READ_CHUNK 16384
#define INITIALIZED "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"

/* What the request in progress on a connection is. */
enum what { W_NONE, W_INIT, W_NOTE, W_OP };

/* Where the response parser is. */
enum phase {
	P_HEAD,        /* status line and headers */
	P_LEN,         /* a Content-Length body */
	P_CHUNK_SIZE,  /* a chunk-size line */
	P_CHUNK_DATA,  /* chunk data */
	P_CHUNK_END,   /* the CRLF after chunk data */
	P_TRAILER,     /* trailer lines after the last chunk */
	P_CLOSE,       /* a body that ends when the server closes */
	P_NONE,        /* no body */
};

/* A request waiting for its connection's previous response to end. */
struct queued {
	bool set;
	enum what what;
	long id;
	long session;
	struct buf body;
};

/* One connection and the exchange on it. */
struct conn {
	int fd;              /* -1 when closed */
	bool connecting;     /* non-blocking connect in progress */
	bool ep_out;         /* EPOLLOUT is in the interest set */
	bool busy;           /* a request is open (written or being written) */
	bool stamped;        /* its write time was reported */
	bool counted;        /* its answer was counted by Content-Type */
	enum what what;      /* what that request is */
	long id;             /* its JSON-RPC id (W_INIT, W_OP) */
	long session;        /* its session */
	struct buf out;      /* the request's bytes */
	size_t woff;         /* bytes of out written */
	struct queued next;  /* the next request of this connection */
	long setup_next;     /* handshakes: the next session for this connection */
	const char *fail;    /* a failure to handle at the next turn (in fail_text) */
	char fail_text[160];
	/* the response being read */
	struct buf in;       /* bytes read and not parsed yet (from ipos) */
	size_t ipos;
	enum phase phase;
	int status;
	bool sse, json, chunked, close_after;
	long long left;      /* bytes left in the body or chunk */
	char ctype[64];      /* Content-Type as sent, for messages */
	char *sid;           /* Mcp-Session-Id of an initialize response */
	struct buf body;     /* a JSON body, or any body of another status */
	struct buf line;     /* SSE: a line still incomplete */
	struct buf data;     /* SSE: the data of the event being read */
	int data_lines;
};

/* A session on the server. */
struct session {
	char *sid;           /* its Mcp-Session-Id (NULL if the server gave none) */
	int64_t t0;          /* when its initialize was written */
};

static struct {
	struct sockaddr_storage addr;
	socklen_t alen;
	char authority[256];
	char path[512];
	char port[16];
	const char *accept;
	char *extra;         /* --header line(s), each ending in CRLF; "" for none */
	long nconns, nsessions;
	struct conn *conns;
	struct session *sessions;
	long setup_end;      /* handshakes asked for: sessions below this */
	long setup_want;     /* ... how many */
	long setup_done;     /* ... finished */
	int epfd;
	bool any_fail;       /* some connection has a failure to handle */
	struct http_counts counts;
} H = { .epfd = -1 };

static void conn_start(struct conn *c, enum what what, long id, long session,
                       const char *body, size_t len);
static void conn_fail(struct conn *c, const char *reason, int64_t t);

/* The counts so far. */
struct http_counts http_counts(void)
{
	return H.counts;
}

/* Hand the message msg (len bytes) that came on c at t to the core; once it
 * has answered c's operation, count the answer by how it came. */
static void deliver(struct conn *c, const char *msg, size_t len, int64_t t)
{
	load_on_message(msg, len, t);
	if (c->what == W_OP && !c->counted && load_answered(c->id)) {
		c->counted = true;
		if (c->sse)
			H.counts.resp_sse++;
		else
			H.counts.resp_json++;
	}
}

/* Split URL into address, authority and path; resolve the host once. */
static void parse_url(const char *url)
{
	if (strncmp(url, "http://", 7) != 0)
		die("--url must start with http:// (got %s)", url);
	const char *a = url + 7;
	const char *slash = strchr(a, '/');
	size_t alen = slash ? (size_t)(slash - a) : strlen(a);
	if (alen == 0 || alen >= sizeof H.authority)
		die("bad --url %s", url);
	memcpy(H.authority, a, alen);
	H.authority[alen] = '\0';
	snprintf(H.path, sizeof H.path, "%s", slash ? slash : "/");
	char host[256];
	const char *colon = strrchr(H.authority, ':');
	if (H.authority[0] == '[') {
		const char *rb = strchr(H.authority, ']');
		if (!rb)
			die("bad --url %s", url);
		snprintf(host, sizeof host, "%.*s", (int)(rb - H.authority - 1), H.authority + 1);
		colon = rb[1] == ':' ? rb + 1 : NULL;
	} else {
		snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - H.authority) : (int)alen,
		         H.authority);
	}
	snprintf(H.port, sizeof H.port, "%s", colon ? colon + 1 : "80");
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(host, H.port, &hints, &res);
	if (rc != 0 || !res)
		die("cannot resolve %s: %s", host, gai_strerror(rc));
	memcpy(&H.addr, res->ai_addr, res->ai_addrlen);
	H.alen = res->ai_addrlen;
	freeaddrinfo(res);
}

/* Set up the transport (see load.h). */
void http_init(const char *url, long conns, long sessions, bool accept_sse, const char *header)
{
	parse_url(url);
	H.accept = accept_sse ? "application/json, text/event-stream" : "application/json";
	H.extra = "";
	if (header && asprintf(&H.extra, "%s\r\n", header) < 0)
		die("out of memory");
	H.nconns = conns;
	H.nsessions = sessions;
	H.conns = calloc((size_t)conns, sizeof *H.conns);
	H.sessions = calloc((size_t)sessions, sizeof *H.sessions);
	if (!H.conns || !H.sessions)
		die("out of memory");
	for (long i = 0; i < conns; i++)
		H.conns[i].fd = -1;
	H.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (H.epfd < 0)
		die("epoll_create1: %s", strerror(errno));
}

/* A blocking connect to the server; 0 on success, else errno. */
static int probe_connect(void)
{
	int fd = socket(H.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	int rc = connect(fd, (struct sockaddr *)&H.addr, H.alen) == 0 ? 0 : errno;
	close(fd);
	return rc;
}

/* Fail unless nothing answers on the port yet (see load.h). */
void http_check_port_free(void)
{
	if (probe_connect() == 0)
		set_fatal("something already listens on %s before the server under test "
		          "started: pick another port", H.authority);
}

/* Wait until the server accepts connections (see load.h). */
void http_wait_ready(pid_t pid, int64_t deadline)
{
	for (;;) {
		int rc = probe_connect();
		if (rc == 0)
			return;
		siginfo_t si = { 0 };
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid) {
			set_fatal("the server exited before it accepted a connection on %s",
			          H.authority);
			return;
		}
		if (now_ns() > deadline) {
			set_fatal("the server did not accept a connection on %s in time (%s)",
			          H.authority, strerror(rc));
			return;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
	}
}

/* Change the epoll interest of c to reading, plus writing if out. */
static void ep_set(struct conn *c, bool out)
{
	struct epoll_event ev = {
		.events = EPOLLIN | (out ? EPOLLOUT : 0),
		.data.u64 = (uint64_t)(c - H.conns) | ((uint64_t)(uint32_t)c->fd << 32),
	};
	if (epoll_ctl(H.epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
	c->ep_out = out;
}

/* Have c's failure handled at the next turn of the loop (no recursion
 * from a failure straight into the next operation's connect). */
static void defer_fail(struct conn *c, const char *what, int err)
{
	if (c->fail)
		return;
	snprintf(c->fail_text, sizeof c->fail_text, "%s: %s", what, strerror(err));
	c->fail = c->fail_text;
	H.any_fail = true;
}

/* Reset the response parser of c for the next response. */
static void parse_reset(struct conn *c)
{
	c->phase = P_HEAD;
	c->status = 0;
	c->sse = c->json = c->chunked = c->close_after = false;
	c->left = 0;
	c->ctype[0] = '\0';
	free(c->sid);
	c->sid = NULL;
	c->body.len = c->line.len = c->data.len = 0;
	c->data_lines = 0;
}

/* Close c's socket; what was open on it is the caller's to account for. */
static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);  /* also leaves the epoll set */
	c->fd = -1;
	c->connecting = c->ep_out = c->busy = false;
	c->what = W_NONE;
	c->out.len = c->woff = 0;
	c->in.len = c->ipos = 0;
	parse_reset(c);
}

/* Write what is left of c's request. */
static void conn_write(struct conn *c)
{
	if (!c->stamped) {
		int64_t t = now_ns();
		c->stamped = true;
		if (c->what == W_OP)
			load_on_write(c->id, t);
		else if (c->what == W_INIT)
			H.sessions[c->session].t0 = t;
	}
	while (c->woff < c->out.len) {
		ssize_t n = write(c->fd, c->out.data + c->woff, c->out.len - c->woff);
		if (n > 0) {
			c->woff += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			if (!c->ep_out)
				ep_set(c, true);
			return;
		} else {
			defer_fail(c, "writing the request", n < 0 ? errno : EIO);
			return;
		}
	}
	if (c->ep_out)
		ep_set(c, false);
	c->out.len = c->woff = 0;
}

/* Open a connection for c and write its request once connected. */
static void conn_connect(struct conn *c)
{
	int fd = socket(H.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		defer_fail(c, "socket", errno);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->fd = fd;
	H.counts.connects++;
	int rc = connect(fd, (struct sockaddr *)&H.addr, H.alen);
	if (rc < 0 && errno != EINPROGRESS) {
		defer_fail(c, "connect", errno);
		return;
	}
	struct epoll_event ev = {
		.events = EPOLLIN | (rc < 0 ? EPOLLOUT : 0),
		.data.u64 = (uint64_t)(c - H.conns) | ((uint64_t)(uint32_t)fd << 32),
	};
	if (epoll_ctl(H.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
	c->ep_out = rc < 0;
	c->connecting = rc < 0;
	if (!c->connecting)
		conn_write(c);
}

/* The non-blocking connect of c has finished, one way or the other. */
static void conn_connected(struct conn *c, int64_t t)
{
	int err = 0;
	socklen_t len = sizeof err;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		char why[128];
		snprintf(why, sizeof why, "connect: %s", strerror(err));
		conn_fail(c, why, t);
		return;
	}
	c->connecting = false;
	conn_write(c);
}

/* Put the POST of body (len bytes) for what on c, in session, and send it. */
static void conn_start(struct conn *c, enum what what, long id, long session,
                       const char *body, size_t len)
{
	const char *sid = H.sessions[session].sid;
	c->busy = true;
	c->stamped = false;
	c->counted = false;
	c->what = what;
	c->id = id;
	c->session = session;
	parse_reset(c);
	c->out.len = c->woff = 0;
	buf_printf(&c->out, "POST %s HTTP/1.1\r\nHost: %s\r\n"
	           "Content-Type: application/json\r\nAccept: %s\r\n%s"
	           "%s%s%s%s%s%sContent-Length: %zu\r\n\r\n",
	           H.path, H.authority, H.accept, H.extra,
	           what == W_INIT ? "" : "MCP-Protocol-Version: ",
	           what == W_INIT ? "" : PROTOCOL,
	           what == W_INIT ? "" : "\r\n",
	           sid ? "Mcp-Session-Id: " : "", sid ? sid : "", sid ? "\r\n" : "",
	           len);
	buf_append(&c->out, body, len);
	if (c->fd < 0)
		conn_connect(c);
	else if (!c->connecting)
		conn_write(c);
}

/* Start the request queued on c, if any and if c is free. */
static void conn_pop_next(struct conn *c)
{
	if (c->busy || !c->next.set)
		return;
	struct queued q = c->next;
	c->next.set = false;
	conn_start(c, q.what, q.id, q.session, q.body.data, q.body.len);
	c->next.body = q.body;  /* keep the buffer for the next one */
	c->next.body.len = 0;
}

/* Send operation request id for slot (see load.h). */
void http_send(int32_t slot, long id, const char *body, size_t len)
{
	struct conn *c = &H.conns[slot];
	long session = slot % H.nsessions;
	if (!c->busy) {
		conn_start(c, W_OP, id, session, body, len);
		return;
	}
	if (c->next.set)
		die("internal: two requests queued on connection %d", (int)slot);
	c->next.set = true;
	c->next.what = W_OP;
	c->next.id = id;
	c->next.session = session;
	c->next.body.len = 0;
	buf_append(&c->next.body, body, len);
}

/* Send the initialize of session k on c. */
static void send_initialize(struct conn *c, long k)
{
	struct buf b = { 0 };
	long id = load_new_init();
	buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"initialize\","
	           "\"params\":{\"protocolVersion\":\"" PROTOCOL "\",\"capabilities\":{},"
	           "\"clientInfo\":{\"name\":\"" PROG "\",\"version\":\"0.1.0\"}}}", id);
	conn_start(c, W_INIT, id, k, b.data, b.len);
	free(b.data);
}

/* Start the handshakes of sessions [first, first + count) (see load.h). */
void http_open_sessions(long first, long count)
{
	if (first + count > H.nsessions)
		die("internal: session %ld of %ld", first + count - 1, H.nsessions);
	H.setup_end = first + count;
	H.setup_want = count;
	H.setup_done = 0;
	for (long i = 0; i < H.nconns && i < count; i++) {
		struct conn *c = &H.conns[(first + i) % H.nconns];
		c->setup_next = first + i;
		send_initialize(c, c->setup_next);
	}
}

/* True once every handshake asked for has finished (see load.h). */
bool http_sessions_done(void)
{
	return H.setup_done >= H.setup_want;
}

/* Describe the requests still open, for a time-out message (see load.h). */
void http_describe_open(char *out, size_t size)
{
	static const char *const phases[] = {
		"headers", "body", "chunk size", "chunk", "chunk end", "trailer",
		"body until close", "no body",
	};
	long open = 0, connecting = 0, writing = 0, head = 0;
	long first = -1;
	for (long i = 0; i < H.nconns; i++) {
		struct conn *c = &H.conns[i];
		if (!c->busy)
			continue;
		open++;
		if (c->connecting)
			connecting++;
		else if (c->woff < c->out.len)
			writing++;
		else if (c->phase == P_HEAD && c->in.len == 0)
			head++;
		if (first < 0)
			first = i;
	}
	int n = snprintf(out, size, "%ld requests open: %ld connecting, %ld being written, "
	                 "%ld with no byte of response", open, connecting, writing, head);
	if (first >= 0 && n > 0 && (size_t)n < size) {
		struct conn *c = &H.conns[first];
		snprintf(out + n, size - (size_t)n, "; connection %ld: %s, HTTP %d, reading %s, "
		         "%zu bytes unparsed", first,
		         c->what == W_OP ? "an operation" : c->what == W_INIT ? "initialize" :
		         "notifications/initialized", c->status, phases[c->phase],
		         c->in.len - c->ipos);
	}
}

/* Close every connection (see load.h). */
void http_close_all(void)
{
	for (long i = 0; i < H.nconns; i++)
		conn_close(&H.conns[i]);
}

/* The start of c's body on one line, into s (size bytes), for a message. */
static void body_snippet(const struct conn *c, char *s, size_t size)
{
	size_t n = c->body.len < size - 1 ? c->body.len : size - 1;
	for (size_t i = 0; i < n; i++) {
		char ch = c->body.data[i];
		s[i] = ch == '\n' || ch == '\r' ? ' ' : ch;
	}
	s[n] = '\0';
}

/* The response on c has ended (at t): account for it, go on. */
static void conn_done(struct conn *c, int64_t t)
{
	enum what what = c->what;
	long id = c->id, k = c->session;
	int status = c->status;
	bool sse = c->sse, json = c->json, ok200 = status == 200 && (json || sse);
	if (ok200 && json && c->body.len)
		deliver(c, c->body.data, c->body.len, t);  /* a next request waits */
	char snippet[201], ctype[sizeof c->ctype];
	body_snippet(c, snippet, sizeof snippet);
	memcpy(ctype, c->ctype, sizeof ctype);
	char *sid = c->sid;
	c->sid = NULL;
	c->busy = false;
	c->what = W_NONE;
	if (c->close_after)
		conn_close(c);  /* before anything can start a request on it */
	else
		parse_reset(c);
	switch (what) {
	case W_OP:
		if (status != 200) {
			H.counts.status_other++;
			H.counts.last_status = status;
		}
		if (!load_answered(id)) {
			if (status != 200)
				error_at("request %ld: HTTP %d: %s", id, status, snippet);
			else if (!ok200)
				error_at("request %ld: HTTP 200 with Content-Type '%s'", id, ctype);
			else
				error_at("request %ld: the %s response ended without its answer", id,
				         sse ? "SSE" : "JSON");
			load_on_lost(id, t);
		}
		break;
	case W_INIT:
		if (!ok200 || !load_answered(id)) {
			set_fatal("session %ld: initialize: HTTP %d (%s) without an answer: %s", k,
			          status, ctype, snippet);
			break;
		}
		H.sessions[k].sid = sid;
		sid = NULL;
		conn_start(c, W_NOTE, 0, k, INITIALIZED, strlen(INITIALIZED));
		break;
	case W_NOTE:
		if (status < 200 || status > 299) {
			set_fatal("session %ld: notifications/initialized: HTTP %d: %s", k, status,
			          snippet);
			break;
		}
		H.setup_done++;
		load_on_session(t - H.sessions[k].t0);
		c->setup_next += H.nconns;
		if (c->setup_next < H.setup_end)
			send_initialize(c, c->setup_next);
		break;
	case W_NONE:
		break;
	}
	free(sid);
	conn_pop_next(c);
}

/* The connection c failed (reason) at t: what was open on it fails too. */
static void conn_fail(struct conn *c, const char *reason, int64_t t)
{
	bool busy = c->busy;
	enum what what = c->what;
	long id = c->id, k = c->session;
	conn_close(c);
	c->fail = NULL;
	if (busy) {
		switch (what) {
		case W_OP:
			if (!load_answered(id)) {
				error_at("request %ld: %s", id, reason);
				load_on_lost(id, t);
			} else {
				error_at("request %ld: answered, then the response broke off: %s",
				         id, reason);
			}
			break;
		case W_INIT:
		case W_NOTE:
			set_fatal("session %ld: %s: %s", k,
			          what == W_INIT ? "initialize" : "notifications/initialized", reason);
			break;
		case W_NONE:
			break;
		}
	}
	conn_pop_next(c);
}

/* One line of an SSE body (without its line end). */
static void sse_line(struct conn *c, const char *s, size_t n, int64_t t)
{
	if (n == 0) {  /* a blank line ends the event */
		if (c->data.len) {
			H.counts.events++;
			deliver(c, c->data.data, c->data.len, t);
		}
		c->data.len = 0;
		c->data_lines = 0;
		return;
	}
	if (s[0] == ':')
		return;  /* a comment */
	const char *colon = memchr(s, ':', n);
	size_t flen = colon ? (size_t)(colon - s) : n;
	if (flen != 4 || memcmp(s, "data", 4) != 0)
		return;  /* event:, id:, retry: - not needed here */
	const char *v = colon ? colon + 1 : s + n;
	size_t vlen = (size_t)(s + n - v);
	if (vlen && *v == ' ') {
		v++;
		vlen--;
	}
	if (c->data_lines++)
		buf_append(&c->data, "\n", 1);
	buf_append(&c->data, v, vlen);
}

/* Handle the complete lines in [p, p + n); returns the bytes consumed. */
static size_t sse_lines(struct conn *c, const char *p, size_t n, int64_t t)
{
	size_t off = 0;
	const char *nl;
	while ((nl = memchr(p + off, '\n', n - off)) != NULL) {
		size_t end = (size_t)(nl - p), len = end - off;
		if (len && p[end - 1] == '\r')
			len--;
		sse_line(c, p + off, len, t);
		off = end + 1;
	}
	return off;
}

/* n bytes of an SSE body, in arrival order. */
static void sse_feed(struct conn *c, const char *p, size_t n, int64_t t)
{
	if (c->line.len) {  /* finish the line an earlier read left incomplete */
		const char *nl = memchr(p, '\n', n);
		if (!nl) {
			buf_append(&c->line, p, n);
			return;
		}
		size_t k = (size_t)(nl - p) + 1;
		buf_append(&c->line, p, k);
		sse_lines(c, c->line.data, c->line.len, t);
		c->line.len = 0;
		p += k;
		n -= k;
	}
	size_t used = sse_lines(c, p, n, t);
	if (used < n)
		buf_append(&c->line, p + used, n - used);
}

/* n bytes of the response body of c. */
static void body_data(struct conn *c, const char *p, size_t n, int64_t t)
{
	if (c->status == 200 && c->sse)
		sse_feed(c, p, n, t);
	else
		buf_append(&c->body, p, n);
}

/* True if the n bytes at s start with the header name (any case) and a colon;
 * *v is then the trimmed value, *vlen its length. */
static bool header_is(const char *s, size_t n, const char *name, const char **v,
                      size_t *vlen)
{
	size_t k = strlen(name);
	if (n <= k || s[k] != ':' || strncasecmp(s, name, k) != 0)
		return false;
	const char *a = s + k + 1, *e = s + n;
	while (a < e && (*a == ' ' || *a == '\t'))
		a++;
	while (e > a && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*v = a;
	*vlen = (size_t)(e - a);
	return true;
}

/* True if the n bytes at v hold word (any case). */
static bool has_word(const char *v, size_t n, const char *word)
{
	size_t k = strlen(word);
	for (size_t i = 0; i + k <= n; i++)
		if (strncasecmp(v + i, word, k) == 0)
			return true;
	return false;
}

/* Parse the head [s, s + n) (without the blank line) and choose how the
 * body is framed; false if malformed. */
static bool parse_head(struct conn *c, const char *s, size_t n)
{
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0)
		return false;
	c->status = atoi(s + 9);
	if (c->status < 100 || c->status > 999)
		return false;
	if (s[7] == '0')
		c->close_after = true;
	bool have_len = false;
	const char *e = s + n, *p = memchr(s, '\n', n);
	while (p && p < e) {
		const char *line = p + 1;
		const char *nl = memchr(line, '\n', (size_t)(e - line));
		size_t len = (size_t)((nl ? nl : e) - line);
		if (len && line[len - 1] == '\r')
			len--;
		const char *v;
		size_t vlen;
		if (header_is(line, len, "content-length", &v, &vlen)) {
			c->left = strtoll(v, NULL, 10);
			have_len = true;
		} else if (header_is(line, len, "transfer-encoding", &v, &vlen)) {
			c->chunked = has_word(v, vlen, "chunked");
		} else if (header_is(line, len, "content-type", &v, &vlen)) {
			snprintf(c->ctype, sizeof c->ctype, "%.*s", (int)vlen, v);
			c->json = strncasecmp(v, "application/json", 16) == 0;
			c->sse = strncasecmp(v, "text/event-stream", 17) == 0;
		} else if (header_is(line, len, "mcp-session-id", &v, &vlen)) {
			free(c->sid);
			c->sid = strndup(v, vlen);
		} else if (header_is(line, len, "connection", &v, &vlen)) {
			if (has_word(v, vlen, "close"))
				c->close_after = true;
		}
		p = nl;
	}
	if (c->status < 200)
		c->phase = P_HEAD;  /* an interim response: the real one follows */
	else if (c->status == 204 || c->status == 304)
		c->phase = P_NONE;
	else if (c->chunked)
		c->phase = P_CHUNK_SIZE;
	else if (have_len)
		c->phase = c->left > 0 ? P_LEN : P_NONE;
	else
		c->phase = P_CLOSE, c->close_after = true;
	return true;
}

/* What one step of the parser did. */
enum step { S_MORE, S_WAIT, S_END };

/* One step of the parser of c at t: S_MORE to go on, S_WAIT for more bytes,
 * S_END when the response ended or the connection failed. */
static enum step parse_step(struct conn *c, int64_t t)
{
	char *p = c->in.data + c->ipos;
	size_t avail = c->in.len - c->ipos;
	const char *eol;
	switch (c->phase) {
	case P_HEAD: {
		const char *end = memmem(p, avail, "\r\n\r\n", 4);
		if (!end) {
			if (avail <= MAX_HEAD)
				return S_WAIT;
			conn_fail(c, "response headers too long", t);
			return S_END;
		}
		c->ipos += (size_t)(end - p) + 4;
		if (!parse_head(c, p, (size_t)(end - p))) {
			conn_fail(c, "malformed response status line", t);
			return S_END;
		}
		if (c->phase == P_HEAD)
			parse_reset(c);  /* 1xx */
		else if (c->phase == P_NONE)
			conn_done(c, t);
		return c->phase == P_NONE ? S_END : S_MORE;
	}
	case P_LEN:
	case P_CHUNK_DATA: {
		size_t k = (unsigned long long)c->left < avail ? (size_t)c->left : avail;
		int fd = c->fd;
		c->ipos += k;
		c->left -= (long long)k;
		body_data(c, p, k, t);
		if (c->fd != fd)
			return S_END;
		if (c->left > 0)
			return S_WAIT;
		if (c->phase == P_CHUNK_DATA) {
			c->phase = P_CHUNK_END;
			return S_MORE;
		}
		conn_done(c, t);
		return S_END;
	}
	case P_CHUNK_END:
		if (avail < 2)
			return S_WAIT;
		if (p[0] != '\r' || p[1] != '\n') {
			conn_fail(c, "malformed chunked body (no CRLF after a chunk)", t);
			return S_END;
		}
		c->ipos += 2;
		c->phase = P_CHUNK_SIZE;
		return S_MORE;
	case P_CHUNK_SIZE: {
		eol = memmem(p, avail, "\r\n", 2);
		if (!eol)
			return S_WAIT;
		char *end;
		long long size = strtoll(p, &end, 16);
		if (end == p || size < 0) {
			conn_fail(c, "malformed chunk size", t);
			return S_END;
		}
		c->ipos += (size_t)(eol - p) + 2;
		c->left = size;
		c->phase = size ? P_CHUNK_DATA : P_TRAILER;
		return S_MORE;
	}
	case P_TRAILER:
		eol = memmem(p, avail, "\r\n", 2);
		if (!eol)
			return S_WAIT;
		c->ipos += (size_t)(eol - p) + 2;
		if (eol != p)
			return S_MORE;  /* a trailer field */
		conn_done(c, t);
		return S_END;
	case P_CLOSE:
		c->ipos += avail;
		body_data(c, p, avail, t);
		return S_WAIT;
	case P_NONE:
		break;
	}
	return S_WAIT;
}

/* Parse what c has read, at t. */
static void conn_parse(struct conn *c, int64_t t)
{
	int fd = c->fd;
	while (c->fd == fd && c->ipos < c->in.len) {
		if (!c->busy) {
			conn_fail(c, "the server sent bytes with no request open", t);
			break;
		}
		if (parse_step(c, t) == S_WAIT)
			break;
	}
	if (c->fd == fd && c->ipos > 0) {
		memmove(c->in.data, c->in.data + c->ipos, c->in.len - c->ipos);
		c->in.len -= c->ipos;
		c->ipos = 0;
	}
}

/* Read what the server sent on c and act on it. */
static void conn_read(struct conn *c)
{
	int fd = c->fd, err = 0;
	bool eof = false;
	for (;;) {
		buf_reserve(&c->in, READ_CHUNK);
		size_t room = c->in.cap - c->in.len;
		ssize_t n = read(fd, c->in.data + c->in.len, room);
		if (n > 0) {
			c->in.len += (size_t)n;
			if ((size_t)n < room)
				break;
		} else if (n == 0) {
			eof = true;
			break;
		} else if (errno == EINTR) {
			continue;
		} else {
			if (errno != EAGAIN)
				err = errno;
			break;
		}
	}
	int64_t t = now_ns();
	conn_parse(c, t);
	if (c->fd != fd || (!eof && !err))
		return;
	if (c->busy && c->phase == P_CLOSE && !err) {
		conn_done(c, t);  /* the body that ends with the connection (closes it) */
		return;
	}
	if (!c->busy) {
		conn_close(c);  /* an idle keep-alive connection the server closed */
		return;
	}
	char why[160];
	snprintf(why, sizeof why, "the server %s the connection %s",
	         err ? "reset" : "closed",
	         c->phase == P_HEAD && c->in.len == 0 ? "before answering" : "mid-response");
	if (err)
		snprintf(why + strlen(why), sizeof why - strlen(why), " (%s)", strerror(err));
	conn_fail(c, why, t);
}

/* One turn of the loop (see load.h). */
void http_pump(int timeout_ms)
{
	if (H.any_fail) {
		int64_t t = now_ns();
		H.any_fail = false;
		for (long i = 0; i < H.nconns; i++) {
			struct conn *c = &H.conns[i];
			if (c->fail) {
				char why[sizeof c->fail_text];
				memcpy(why, c->fail_text, sizeof why);
				c->fail = NULL;
				conn_fail(c, why, t);
			}
		}
		timeout_ms = 0;
	}
	struct epoll_event evs[256];
	int n = epoll_wait(H.epfd, evs, 256, timeout_ms);
	if (n < 0 && errno != EINTR)
		die("epoll_wait: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		struct conn *c = &H.conns[(uint32_t)evs[i].data.u64];
		if (c->fd < 0 || (uint32_t)c->fd != (uint32_t)(evs[i].data.u64 >> 32) || c->fail)
			continue;  /* closed (or reopened) by an earlier event of this turn */
		uint32_t e = evs[i].events;
		if (c->connecting) {
			if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP))
				conn_connected(c, now_ns());
			continue;
		}
		if ((e & EPOLLOUT) && c->out.len > c->woff)
			conn_write(c);
		if ((e & (EPOLLIN | EPOLLERR | EPOLLHUP)) && c->fd >= 0 && !c->fail)
			conn_read(c);
	}
}
