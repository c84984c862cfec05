/*
 * http_conn.c - HTTP/1.1 connections on the loop (http_conn.h): accept,
 * read and frame each request (http_parse.h), read its body within the
 * bounds, write its response, keep the connection for the next one.
 *
 * A connection is in one of four states: reading a head (HEAD), reading
 * the body the handler asked for (BODY), with the handler (APP: waiting
 * for its answer, or writing it), or closing after a refusal (LINGER: its
 * output is written, the write side shut, and what the client still
 * sends is read and dropped for a moment, so that the answer is not lost
 * to a reset). Connections that need writing or a handler's attention
 * are listed in the server's pending list, served by an ev_prepare of
 * the highest priority: the answers one loop iteration produced leave
 * before the loop sleeps, and the chain's writers (lower priority) flush
 * what a pipelined request handed them in the same iteration.
 *
 * Why one file of some 1,100 lines: one connection's state machine (the
 * states above, its timer, its reads and writes), whose transitions must be
 * read together to see that every path ends a request exactly once.
 */
#include "http_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_parse.h"
#include "log.h"

#define READ_CHUNK 16384        /* bytes read at a time */
#define PULL_CHUNK 16384        /* bytes asked of a stream's reader at a time */
#define OUT_HIGH (64 * 1024)    /* a stream is not pulled beyond this much unwritten */
#define LINGER_TIME 2.0         /* s a refused connection's input is drained */
#define LINGER_BYTES (1 << 20)  /* bytes drained at most */
#define ACCEPT_PAUSE 0.1        /* s the listening socket rests when out of descriptors */

enum hc_state { ST_HEAD, ST_BODY, ST_APP, ST_LINGER };

struct hc_conn {
	struct hc_server *s;
	int fd;
	enum hc_state state;
	ev_io rio, wio;
	ev_timer tm;
	struct buf in;              /* bytes read, not yet taken */
	struct buf out;             /* bytes to write */
	struct buf tail;            /* then these: a whole body handed over
				     * (hc_reply_buf), written without a copy */
	struct hc_conn *prev, *next;   /* in s->conns */
	struct hc_conn *pnext;      /* in s->pending */
	bool pending;
	bool over;                  /* above max_conns: answered 503 */
	bool dead;                  /* closed: freed by the pending pass */
	bool reading;               /* rio is started */
	double idle_since;          /* ev_now when it last became idle */
	char peer[48];
	/* the request it carries */
	bool has_req;
	struct hp_request req;      /* spans into HEAD */
	char *head;                 /* owned copy of the head's bytes */
	char *qbuf;                 /* owned: hc_query's last answer */
	void *ctx;
	bool body_done;             /* no body, or all of it read */
	bool want_body;             /* hc_read_body was called */
	bool chunked;
	bool over_budget;           /* its chunks went past the body budget */
	struct hp_chunked ch;
	uint64_t left;              /* Content-Length bytes still to read */
	uint64_t reserved;          /* bytes of the body budget it holds */
	struct buf body;
	/* its response */
	bool responded;
	bool want_resume;
	bool streaming;
	bool read_wait;             /* its reader said HC_READ_WAIT */
	bool stream_end;
	bool close_after;
	bool head_only;             /* a HEAD request: no body is written */
	hc_read_fn read;
	size_t linger_bytes;
};

struct hc_server {
	int fd;
	ev_io lio;
	ev_prepare pre;
	ev_timer kick;              /* makes sure the loop does not sleep on pending work */
	bool listening;             /* LIO started */
	bool paused;                /* out of descriptors: not accepting until PAUSE */
	ev_timer pause;
	bool quiesced;
	bool closing;               /* connections close once their answer is out */
	bool in_pass;
	struct hc_limits lim;
	struct hc_handler h;
	void *arg;
	struct hc_conn *conns;
	unsigned nconns;
	struct hc_conn *pending, **pending_tail;
	uint64_t body_bytes;        /* bodies being received, all connections */
	unsigned long long responses[600];
	unsigned long long bytes_in, bytes_out;
};

static void conn_close(struct hc_conn *c);
static void conn_advance(struct hc_conn *c);
static void conn_schedule(struct hc_conn *c);
static void refuse(struct hc_conn *c, unsigned status, const char *why);

/* ---- small things ---- */

/* The reason phrase of STATUS. */
static const char *reason(unsigned status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 417: return "Expectation Failed";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

/* Sets FD non-blocking and close-on-exec. */
static int fd_setup(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Starts or stops watching C for input. */
static void conn_read_on(struct hc_conn *c, bool on)
{
	if (on == c->reading || c->dead)
		return;
	c->reading = on;
	if (on)
		ev_io_start(EV_DEFAULT, &c->rio);
	else
		ev_io_stop(EV_DEFAULT, &c->rio);
}

/* (Re)arms C's timer for SECONDS from now; 0 stops it. */
static void conn_timer(struct hc_conn *c, double seconds)
{
	ev_timer_stop(EV_DEFAULT, &c->tm);
	if (seconds > 0) {   /* the repeat too: ev_timer_again restarts it on progress */
		ev_timer_set(&c->tm, seconds, seconds);
		ev_timer_start(EV_DEFAULT, &c->tm);
	}
}

/* Gives back the body budget C holds. */
static void budget_release(struct hc_conn *c)
{
	c->s->body_bytes -= c->reserved;
	c->reserved = 0;
}

/* Forgets C's request (its context was given back already). */
static void req_clear(struct hc_conn *c)
{
	budget_release(c);
	buf_release(&c->body);
	free(c->head);
	free(c->qbuf);
	c->head = c->qbuf = NULL;
	c->ctx = NULL;
	c->has_req = false;
	c->body_done = c->want_body = c->chunked = c->over_budget = false;
	c->responded = c->want_resume = c->streaming = c->read_wait = false;
	c->stream_end = c->head_only = false;
	c->read = NULL;
	c->left = 0;
	memset(&c->req, 0, sizeof c->req);
}

/* Hands C's request context back to the handler (once). */
static void req_end(struct hc_conn *c, bool ok)
{
	void *ctx = c->ctx;
	c->ctx = NULL;
	if (ctx && c->s->h.on_end)
		c->s->h.on_end(c->s->arg, c, ctx, ok);
}

/* ---- the listening socket ---- */

/* Watches the listening socket while there is room for a connection. */
static void listen_update(struct hc_server *s)
{
	bool want = !s->quiesced && !s->paused && s->fd >= 0 &&
		s->nconns < s->lim.max_conns + HC_OVERFLOW;
	if (want == s->listening)
		return;
	s->listening = want;
	if (want)
		ev_io_start(EV_DEFAULT, &s->lio);
	else
		ev_io_stop(EV_DEFAULT, &s->lio);
}

/* The idle connection but EXCEPT that waited longest for a request, or NULL
 * (connections accepted in one turn wait alike: the first met of them). */
static struct hc_conn *oldest_idle(struct hc_server *s, const struct hc_conn *except)
{
	struct hc_conn *best = NULL;
	for (struct hc_conn *c = s->conns; c; c = c->next)
		if (c != except && !c->dead && c->state == ST_HEAD && !c->has_req &&
		    buf_pending(&c->in) == 0 && !c->over &&
		    (!best || c->idle_since < best->idle_since))
			best = c;
	return best;
}

static void on_conn_read(struct ev_loop *loop, ev_io *w, int revents);
static void on_conn_write(struct ev_loop *loop, ev_io *w, int revents);
static void on_conn_timer(struct ev_loop *loop, ev_timer *w, int revents);

/* Takes the connection FD from ADDR. */
static void conn_new(struct hc_server *s, int fd, const struct sockaddr_storage *addr)
{
	struct hc_conn *c = calloc(1, sizeof *c);
	if (!c || fd_setup(fd) < 0) {
		free(c);
		close(fd);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->s = s;
	c->fd = fd;
	c->state = ST_HEAD;
	if (addr->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, c->peer, sizeof c->peer);
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, c->peer, sizeof c->peer);
	ev_io_init(&c->rio, on_conn_read, fd, EV_READ);
	ev_io_init(&c->wio, on_conn_write, fd, EV_WRITE);
	ev_init(&c->tm, on_conn_timer);
	c->rio.data = c->wio.data = c->tm.data = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	c->idle_since = ev_now(EV_DEFAULT);
	if (s->nconns > s->lim.max_conns) {
		/* room is made by an idle keep-alive connection before anyone is refused */
		struct hc_conn *idle = oldest_idle(s, c);
		if (idle)
			conn_close(idle);
		else
			c->over = true;
	}
	conn_read_on(c, true);
	conn_timer(c, s->lim.timeout);   /* the first head, whole, within it */
	listen_update(s);
}

/* New connections. */
static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct hc_server *s = w->data;
	(void)loop;
	(void)revents;
	while (s->listening) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof ss;
		int fd = accept(s->fd, (struct sockaddr *)&ss, &len);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* the connection stays in the backlog, the socket
				 * readable: watched on, the loop turned without end
				 * (and logged this each turn). Rest a moment (ev.pod,
				 * "The special problem of accept()ing when you can't") */
				log_warn("http: cannot accept a connection: %s", strerror(errno));
				s->paused = true;
				listen_update(s);
				ev_timer_set(&s->pause, ACCEPT_PAUSE, 0.);
				ev_timer_start(EV_DEFAULT, &s->pause);
			}
			return;
		}
		conn_new(s, fd, &ss);
	}
}

/* The rest after running out of descriptors is over: accept again. */
static void on_pause_end(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hc_server *s = w->data;
	(void)loop;
	(void)revents;
	s->paused = false;
	listen_update(s);
}

/* ---- writing ---- */

/* Appends what C's stream reader has, framed, until it waits or ends. -1: abandon. */
static int conn_pull(struct hc_conn *c)
{
	bool chunked = c->req.minor >= 1;
	if (c->head_only) {
		/* a HEAD answer has no content (RFC 9110 section 9.3.2), streamed
		 * or not (hc_reply leaves its body out): the reader is not asked,
		 * else its chunks went out as garbage before the next answer */
		c->stream_end = true;
		return 0;
	}
	while (!c->read_wait && !c->stream_end && buf_pending(&c->out) < OUT_HIGH) {
		if (buf_reserve(&c->out, PULL_CHUNK + 12) < 0)
			return -1;
		char *at = c->out.data + c->out.len;
		ssize_t n = c->read(c->ctx, at + (chunked ? 10 : 0), PULL_CHUNK);
		if (n == HC_READ_WAIT) {
			c->read_wait = true;
		} else if (n == HC_READ_END) {
			c->stream_end = true;
			if (chunked && buf_append(&c->out, "0\r\n\r\n", 5) < 0)
				return -1;
			if (!chunked)
				c->close_after = true;
		} else if (n < 0) {
			return -1;
		} else {
			if (chunked) {
				static const char hex[] = "0123456789abcdef";
				for (int i = 0; i < 8; i++)   /* the size, as 8 hex digits */
					at[i] = hex[((size_t)n >> (28 - 4 * i)) & 15];
				at[8] = '\r';
				at[9] = '\n';
				memcpy(at + 10 + n, "\r\n", 2);
				c->out.len += (size_t)n + 12;
			} else {
				c->out.len += (size_t)n;
			}
			c->s->bytes_out += (size_t)n;
		}
	}
	return 0;
}

/* Writes what C has; -1 when the connection is gone. */
static int conn_write(struct hc_conn *c)
{
	while (buf_pending(&c->out) + buf_pending(&c->tail) > 0) {
		struct iovec iov[2] = {   /* an empty buffer may have no memory: no pointer into it */
			{ buf_pending(&c->out) ? c->out.data + c->out.off : NULL, buf_pending(&c->out) },
			{ buf_pending(&c->tail) ? c->tail.data + c->tail.off : NULL, buf_pending(&c->tail) },
		};
		struct msghdr mh = { .msg_iov = iov[0].iov_len ? iov : iov + 1,
				     .msg_iovlen = iov[0].iov_len ? 2 : 1 };
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_start(EV_DEFAULT, &c->wio);
			conn_timer(c, c->s->lim.timeout);   /* a reader that stalls is let go */
			return 0;
		}
		if (n <= 0)
			return -1;
		size_t head = (size_t)n < iov[0].iov_len ? (size_t)n : iov[0].iov_len;
		buf_consume(&c->out, head);
		buf_consume(&c->tail, (size_t)n - head);
	}
	buf_shrink(&c->out, 65536);
	buf_release(&c->tail);
	ev_io_stop(EV_DEFAULT, &c->wio);
	if (c->state == ST_APP)
		ev_timer_stop(EV_DEFAULT, &c->tm);   /* waiting for the handler is not a stall */
	return 0;
}

/* Shuts C's writing side once its answer is out, and drains its input a moment. */
static void conn_linger(struct hc_conn *c)
{
	c->state = ST_LINGER;
	shutdown(c->fd, SHUT_WR);
	buf_release(&c->in);
	conn_read_on(c, true);
	conn_timer(c, c->s->lim.timeout < LINGER_TIME ? c->s->lim.timeout : LINGER_TIME);
}

/* C's response is written whole: the request ends, and the next may begin. */
static void conn_request_done(struct hc_conn *c)
{
	req_end(c, true);
	bool close_it = c->close_after || c->s->closing;
	req_clear(c);
	if (close_it) {
		conn_linger(c);
		return;
	}
	c->state = ST_HEAD;
	c->idle_since = ev_now(EV_DEFAULT);
	conn_timer(c, c->s->lim.timeout);
	conn_read_on(c, true);
	conn_advance(c);   /* a pipelined request already read */
}

/* Serves C from the pending pass: its handler's turn, its reader, its writes. */
static void conn_serve(struct hc_conn *c)
{
	struct hc_server *s = c->s;
	if (c->state == ST_APP && !c->responded && c->want_resume) {
		c->want_resume = false;
		if (s->h.on_resume && s->h.on_resume(s->arg, c) < 0) {
			conn_close(c);
			return;
		}
		if (c->dead)
			return;
	}
	if (c->streaming && conn_pull(c) < 0) {
		conn_close(c);
		return;
	}
	if (conn_write(c) < 0) {
		conn_close(c);
		return;
	}
	if (c->state == ST_LINGER || buf_pending(&c->out) + buf_pending(&c->tail) > 0 ||
	    !c->responded)
		return;
	if (!c->streaming || c->stream_end)
		conn_request_done(c);
	else if (!c->read_wait)
		conn_schedule(c);   /* the reader has more than OUT_HIGH to give */
}

/* Lists C for the pending pass. */
static void conn_schedule(struct hc_conn *c)
{
	struct hc_server *s = c->s;
	if (c->pending || c->dead)
		return;
	c->pending = true;
	c->pnext = NULL;
	*s->pending_tail = c;
	s->pending_tail = &c->pnext;
	if (!ev_is_active(&s->kick)) {   /* in a pass too: it serves what was listed before it */
		ev_timer_set(&s->kick, 0., 0.);
		ev_timer_start(EV_DEFAULT, &s->kick);
	}
}

/*
 * Serves the connections pending when it starts. Those that become pending
 * meanwhile (a pipelined request answered, a reader with more than
 * OUT_HIGH to give) wait for the next pass, which the kick timer makes
 * come after a poll that does not sleep: a connection always writing
 * cannot keep the loop from the others.
 */
static void pending_pass(struct hc_server *s)
{
	if (s->in_pass)
		return;
	s->in_pass = true;
	ev_timer_stop(EV_DEFAULT, &s->kick);
	struct hc_conn *list = s->pending;
	s->pending = NULL;
	s->pending_tail = &s->pending;
	while (list) {
		struct hc_conn *c = list;
		list = c->pnext;
		c->pending = false;
		if (c->dead)
			free(c);
		else
			conn_serve(c);
	}
	s->in_pass = false;
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	pending_pass(w->data);
}

static void on_kick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	pending_pass(w->data);
}

static void on_conn_write(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	struct hc_conn *c = w->data;
	ev_io_stop(EV_DEFAULT, w);
	conn_schedule(c);
}

/* ---- closing ---- */

/* Ends C (a request still open ends without its answer written); freed
 * by the pending pass, since a caller up the stack may still hold it. */
static void conn_close(struct hc_conn *c)
{
	struct hc_server *s = c->s;
	if (c->dead)
		return;
	c->dead = true;
	ev_io_stop(EV_DEFAULT, &c->rio);
	ev_io_stop(EV_DEFAULT, &c->wio);
	ev_timer_stop(EV_DEFAULT, &c->tm);
	c->reading = false;
	req_end(c, false);           /* a request still open did not get its answer out */
	req_clear(c);
	close(c->fd);
	c->fd = -1;
	buf_release(&c->in);
	buf_release(&c->out);
	buf_release(&c->tail);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	listen_update(s);
	if (!c->pending) {   /* freed by the pass: a caller up the stack may still hold it */
		c->pending = true;
		c->pnext = NULL;
		*s->pending_tail = c;
		s->pending_tail = &c->pnext;
	}
}

static void on_conn_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hc_conn *c = w->data;
	(void)loop;
	(void)revents;
	if (c->state == ST_HEAD && (c->has_req || buf_pending(&c->in) > 0))
		log_debug("http: a client from %s sent no whole request head in time: closed", c->peer);
	else if (c->state == ST_BODY)
		log_debug("http: a client from %s stalled sending a body: closed", c->peer);
	else if (c->state == ST_APP)
		log_debug("http: a client from %s stopped reading its answer: closed", c->peer);
	conn_close(c);
}

/* ---- reading ---- */

/* Takes body bytes for C (a chunked body's decoder calls it too). */
static int body_take(void *arg, const char *p, size_t n)
{
	struct hc_conn *c = arg;
	struct hc_server *s = c->s;
	if (c->chunked) {
		if (s->body_bytes + n > s->lim.body_budget) {
			c->over_budget = true;
			return 1;
		}
		s->body_bytes += n;
		c->reserved += n;
	}
	s->bytes_in += n;
	return buf_append(&c->body, p, n) < 0 ? 1 : 0;
}

/* C's body is whole: the handler has it. */
static void body_complete(struct hc_conn *c)
{
	struct hc_server *s = c->s;
	c->body_done = true;
	c->state = ST_APP;
	ev_timer_stop(EV_DEFAULT, &c->tm);
	budget_release(c);   /* the handler owns it now */
	if (s->h.on_body && s->h.on_body(s->arg, c, &c->body) < 0) {
		conn_close(c);
		return;
	}
	buf_release(&c->body);
}

/* Reads C's body from its input. */
static void body_advance(struct hc_conn *c)
{
	if (c->chunked) {
		bool done = false;
		unsigned status = 400;
		const char *why = "bad chunked body";
		ssize_t n = hp_chunked_feed(&c->ch, c->in.data + c->in.off, buf_pending(&c->in),
					    body_take, c, &done, &status, &why);
		if (n == -2) {
			bool budget = c->over_budget;
			refuse(c, budget ? 503 : 500, budget ?
			       "Service Unavailable: too many request bodies are being received" :
			       "out of memory");
			return;
		}
		if (n < 0) {
			refuse(c, status, why);
			return;
		}
		buf_consume(&c->in, (size_t)n);
		if (done)
			body_complete(c);
		return;
	}
	size_t n = buf_pending(&c->in);
	if (n > c->left)
		n = (size_t)c->left;
	if (n > 0) {
		if (body_take(c, c->in.data + c->in.off, n) != 0) {
			refuse(c, 500, "out of memory");
			return;
		}
		buf_consume(&c->in, n);
		c->left -= n;
	}
	if (c->left == 0)
		body_complete(c);
}

/* Copies C's head (LEN bytes of its input) so that its spans outlive the input. */
static int head_keep(struct hc_conn *c, size_t len)
{
	const char *base = c->in.data + c->in.off;
	c->head = malloc(len + 1);
	if (!c->head)
		return -1;
	memcpy(c->head, base, len);
	c->head[len] = '\0';
	struct hp_request *r = &c->req;
	/* spans into the input move to the copy (the parser may point one at
	 * a constant: absolute-form's empty path is "/") */
#define MOVE(sp) do { if ((sp).p >= base && (sp).p <= base + len) \
		(sp).p = c->head + ((sp).p - base); } while (0)
	MOVE(r->method);
	MOVE(r->target);
	MOVE(r->path);
	MOVE(r->query);
	MOVE(r->host);
	for (size_t i = 0; i < r->nheaders; i++) {
		MOVE(r->headers[i].name);
		MOVE(r->headers[i].value);
	}
#undef MOVE
	/* NUL-terminate what is read as text: the byte after each is a
	 * delimiter (SP, '?', CR or whitespace) the spans do not need */
#define TERM(sp) do { if ((sp).p >= c->head && (sp).p + (sp).n < c->head + len) \
		((char *)(sp).p)[(sp).n] = '\0'; } while (0)
	TERM(r->method);
	TERM(r->query);
	TERM(r->path);
	for (size_t i = 0; i < r->nheaders; i++)
		TERM(r->headers[i].value);
#undef TERM
	return 0;
}

/* Reads C's next request head from its input, and hands it over. */
static void head_advance(struct hc_conn *c)
{
	struct hc_server *s = c->s;
	unsigned status = 400;
	const char *why = "Bad Request";
	if (buf_pending(&c->in) == 0)
		return;
	ssize_t n = hp_parse_head(c->in.data + c->in.off, buf_pending(&c->in), s->lim.max_head,
				  &c->req, &status, &why);
	if (n == 0)
		return;
	c->has_req = true;
	c->state = ST_APP;
	if (n < 0) {
		refuse(c, status, why);
		return;
	}
	if (head_keep(c, (size_t)n) < 0) {
		conn_close(c);
		return;
	}
	buf_consume(&c->in, (size_t)n);
	ev_timer_stop(EV_DEFAULT, &c->tm);
	c->body_done = c->req.body == HP_BODY_NONE ||
		(c->req.body == HP_BODY_LENGTH && c->req.length == 0);
	c->head_only = strcmp(c->req.method.p, "HEAD") == 0;
	if (s->h.on_head && s->h.on_head(s->arg, c) < 0)
		conn_close(c);
}

/* Moves C on with what its input holds. */
static void conn_advance(struct hc_conn *c)
{
	if (c->dead)
		return;
	if (c->state == ST_HEAD)
		head_advance(c);
	else if (c->state == ST_BODY)
		body_advance(c);
	if (c->dead)
		return;
	/* while the handler has the request, input is kept only up to a
	 * head's size (a pipelined request); reading goes on to see an EOF */
	if (c->state == ST_APP && buf_pending(&c->in) >= c->s->lim.max_head)
		conn_read_on(c, false);
}

/* Input on C. */
static void on_conn_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct hc_conn *c = w->data;
	(void)loop;
	(void)revents;
	if (c->state == ST_LINGER) {
		char sink[4096];
		ssize_t n = recv(c->fd, sink, sizeof sink, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		c->linger_bytes += n > 0 ? (size_t)n : 0;
		if (n <= 0 || c->linger_bytes > LINGER_BYTES)
			conn_close(c);
		return;
	}
	size_t want = READ_CHUNK;
	char *to;
	bool direct = c->state == ST_BODY && !c->chunked && buf_pending(&c->in) == 0;
	if (direct) {   /* a body of known length goes straight where it is kept */
		want = c->left < (1 << 20) ? (size_t)c->left : (1 << 20);
		if (buf_reserve(&c->body, want) < 0) {
			refuse(c, 500, "out of memory");
			return;
		}
		to = c->body.data + c->body.len;
	} else {
		if (buf_pending(&c->in) == 0)
			buf_release(&c->in);
		if (buf_reserve(&c->in, want) < 0) {
			conn_close(c);
			return;
		}
		to = c->in.data + c->in.len;
	}
	ssize_t n = recv(c->fd, to, want, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		/* the client is gone (or said it sends no more) */
		if (c->has_req)
			log_debug("http: a client from %s closed its connection with a request open",
				  c->peer);
		conn_close(c);
		return;
	}
	if (direct) {
		c->body.len += (size_t)n;
		c->left -= (uint64_t)n;
		c->s->bytes_in += (uint64_t)n;
		ev_timer_again(EV_DEFAULT, &c->tm);
		if (c->left == 0)
			body_complete(c);
		return;
	}
	c->in.len += (size_t)n;
	if (c->state == ST_BODY)
		ev_timer_again(EV_DEFAULT, &c->tm);
	conn_advance(c);
}

/* ---- refusing ---- */

/* Answers C's request STATUS with WHY itself; the connection closes after. */
static void refuse(struct hc_conn *c, unsigned status, const char *why)
{
	struct hc_server *s = c->s;
	if (c->responded || c->dead) {
		conn_close(c);
		return;
	}
	req_end(c, false);           /* the handler's request (if any) is over */
	budget_release(c);
	buf_release(&c->body);
	c->state = ST_APP;
	c->has_req = true;
	c->body_done = false;        /* so the connection closes after the answer */
	c->close_after = true;
	c->streaming = false;
	if (s->h.on_refuse)
		s->h.on_refuse(s->arg, c, status, why);
	if (!c->responded) {
		char text[300];
		int n = snprintf(text, sizeof text, "%s\n", why);
		hc_reply(c, status, "Content-Type: text/plain; charset=utf-8\r\n", text,
			 (size_t)(n < 0 ? 0 : n >= (int)sizeof text ? (int)sizeof text - 1 : n));
	}
	conn_read_on(c, false);
}

/* ---- the API ---- */

const char *hc_method(const struct hc_conn *c) { return c->head ? c->req.method.p : ""; }
const char *hc_path(const struct hc_conn *c) { return c->head ? c->req.path.p : ""; }
const char *hc_peer(const struct hc_conn *c) { return c->peer; }
bool hc_over(const struct hc_conn *c) { return c->over; }
void hc_set_ctx(struct hc_conn *c, void *ctx) { c->ctx = ctx; }
void *hc_ctx(const struct hc_conn *c) { return c->ctx; }

const char *hc_header(const struct hc_conn *c, const char *name)
{
	if (!c->head)
		return NULL;
	const struct hp_span *v = hp_header(&c->req, name);
	return v ? v->p : NULL;
}

bool hc_header_at(const struct hc_conn *c, size_t i, const char **name, size_t *nlen,
		  const char **value)
{
	if (!c->head || i >= c->req.nheaders)
		return false;
	*name = c->req.headers[i].name.p;
	*nlen = c->req.headers[i].name.n;
	*value = c->req.headers[i].value.p;
	return true;
}

bool hc_has_body(const struct hc_conn *c, uint64_t *length)
{
	*length = c->req.body == HP_BODY_CHUNKED ? UINT64_MAX : c->req.length;
	return c->req.body == HP_BODY_CHUNKED || (c->req.body == HP_BODY_LENGTH && c->req.length > 0);
}

/* The value of hex digit X, or -1. */
static int hexval(char x)
{
	return x >= '0' && x <= '9' ? x - '0' : x >= 'a' && x <= 'f' ? x - 'a' + 10 :
		x >= 'A' && x <= 'F' ? x - 'A' + 10 : -1;
}

/* Decodes N bytes of a query component (%XX, '+') into OUT (N + 1 bytes); its length. */
static size_t query_decode(const char *p, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '%' && i + 2 < n && hexval(p[i + 1]) >= 0 && hexval(p[i + 2]) >= 0) {
			out[o++] = (char)(hexval(p[i + 1]) * 16 + hexval(p[i + 2]));
			i += 2;
		} else {
			out[o++] = p[i] == '+' ? ' ' : p[i];
		}
	}
	out[o] = '\0';
	return o;
}

const char *hc_query(struct hc_conn *c, const char *name)
{
	if (!c->head || !c->req.query.p)
		return NULL;
	const char *q = c->req.query.p, *end = q + c->req.query.n;
	size_t len = strlen(name);
	while (q < end) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		const char *stop = amp ? amp : end;
		const char *eq = memchr(q, '=', (size_t)(stop - q));
		const char *kend = eq ? eq : stop;
		if ((size_t)(kend - q) == len && memcmp(q, name, len) == 0) {
			const char *v = eq ? eq + 1 : stop;
			size_t vn = (size_t)(stop - v);
			free(c->qbuf);
			c->qbuf = malloc(vn + 1);
			if (!c->qbuf)
				return NULL;
			size_t got = query_decode(v, vn, c->qbuf);
			return memchr(c->qbuf, '\0', got) ? NULL : c->qbuf;   /* a %00 names nothing */
		}
		q = stop + 1;
	}
	return NULL;
}

void hc_read_body(struct hc_conn *c)
{
	struct hc_server *s = c->s;
	if (c->dead || c->want_body || c->responded)
		return;
	c->want_body = true;
	if (c->body_done) {
		body_complete(c);
		return;
	}
	if (c->req.body == HP_BODY_LENGTH) {
		if (c->req.length > s->lim.max_body) {
			refuse(c, 413, "Content Too Large");
			return;
		}
		if (s->body_bytes + c->req.length > s->lim.body_budget) {
			refuse(c, 503, "Service Unavailable: too many request bodies are being received");
			return;
		}
		s->body_bytes += c->req.length;
		c->reserved = c->req.length;
		c->left = c->req.length;
		c->chunked = false;
	} else {
		c->chunked = true;
		hp_chunked_init(&c->ch, s->lim.max_body);
	}
	if (c->req.expect_continue && c->req.minor >= 1) {
		buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
		s->responses[100]++;
		conn_schedule(c);
	}
	c->state = ST_BODY;
	ev_timer_set(&c->tm, 0., s->lim.timeout);
	ev_timer_again(EV_DEFAULT, &c->tm);
	/* asked for later (from on_resume), the input may have been stopped
	 * at max_head bytes while the handler had the request (conn_advance):
	 * without this the rest of the body was never read, and the
	 * connection timed out as if the client had stalled */
	conn_read_on(c, true);
	body_advance(c);
}

/* Writes the status line and headers of C's response. */
static int put_head(struct hc_conn *c, unsigned status, const char *headers, bool stream,
		    size_t n)
{
	struct hc_server *s = c->s;
	if (!c->body_done || !c->req.keep_alive || c->over || s->closing)
		c->close_after = true;
	if (stream && c->req.minor == 0)
		c->close_after = true;   /* HTTP/1.0: the end of the stream is the close */
	int rc = buf_printf(&c->out, "HTTP/1.1 %u %s\r\n%s", status, reason(status),
			    headers ? headers : "");
	if (rc == 0 && stream && c->req.minor >= 1)
		rc = buf_append(&c->out, "Transfer-Encoding: chunked\r\n", 28);
	else if (rc == 0 && !stream)
		rc = buf_printf(&c->out, "Content-Length: %zu\r\n", n);
	if (rc == 0 && c->close_after)
		rc = buf_append(&c->out, "Connection: close\r\n", 19);
	if (rc == 0)
		rc = buf_append(&c->out, "\r\n", 2);
	if (status < 600)
		s->responses[status]++;
	c->responded = true;
	return rc;
}

int hc_reply(struct hc_conn *c, unsigned status, const char *headers, const char *body, size_t n)
{
	if (c->dead || c->responded)
		return -1;
	int rc = put_head(c, status, headers, false, n);
	if (rc == 0 && n > 0 && !c->head_only)   /* after a body handed over, if one waits */
		rc = buf_append(buf_pending(&c->tail) ? &c->tail : &c->out, body, n);
	c->s->bytes_out += n;
	conn_schedule(c);
	return rc;
}

int hc_reply_buf(struct hc_conn *c, unsigned status, const char *headers, struct buf *body)
{
	size_t n = buf_pending(body);
	if (c->dead || c->responded)
		return -1;
	int rc = put_head(c, status, headers, false, n);
	if (rc == 0 && n > 0 && !c->head_only) {
		if (buf_pending(&c->tail) == 0) {   /* its memory, as it is */
			buf_release(&c->tail);
			c->tail = *body;
			memset(body, 0, sizeof *body);
		} else {
			rc = buf_append(&c->tail, body->data + body->off, n);
		}
	}
	c->s->bytes_out += n;
	conn_schedule(c);
	return rc;
}

int hc_stream(struct hc_conn *c, unsigned status, const char *headers, hc_read_fn read)
{
	if (c->dead || c->responded)
		return -1;
	int rc = put_head(c, status, headers, true, 0);
	c->streaming = true;
	c->read = read;
	c->read_wait = false;
	conn_schedule(c);
	return rc;
}

void hc_resume(struct hc_conn *c)
{
	if (c->dead)
		return;
	if (c->streaming)
		c->read_wait = false;
	else if (!c->responded)
		c->want_resume = true;
	conn_schedule(c);
}

/* ---- the server ---- */

struct hc_server *hc_server_new(const struct sockaddr *sa, socklen_t len,
				const struct hc_limits *limits, const struct hc_handler *h,
				void *arg, unsigned *port)
{
	struct hc_server *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->lim = *limits;
	s->h = *h;
	s->arg = arg;
	s->pending_tail = &s->pending;
	s->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(s->fd, sa, len) < 0 || listen(s->fd, 511) < 0) {
		int e = errno;
		if (s->fd >= 0)
			close(s->fd);
		free(s);
		errno = e;
		return NULL;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(s->fd, (struct sockaddr *)&ss, &sl) == 0)
		*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
			      ((struct sockaddr_in *)&ss)->sin_port);
	ev_io_init(&s->lio, on_accept, s->fd, EV_READ);
	s->lio.data = s;
	ev_prepare_init(&s->pre, on_prepare);
	ev_set_priority(&s->pre, EV_MAXPRI);
	s->pre.data = s;
	ev_prepare_start(EV_DEFAULT, &s->pre);
	ev_unref(EV_DEFAULT);   /* it alone must not keep the loop alive */
	ev_init(&s->kick, on_kick);
	s->kick.data = s;
	ev_init(&s->pause, on_pause_end);
	s->pause.data = s;
	listen_update(s);
	return s;
}

void hc_server_quiesce(struct hc_server *s)
{
	if (s->quiesced)
		return;
	s->quiesced = true;
	listen_update(s);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

void hc_server_stop(struct hc_server *s)
{
	hc_server_quiesce(s);
	s->closing = true;
	for (struct hc_conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		/* idle: nothing more will come for it. A head begun (bytes in its
		 * input) is a request on its way, not idle (as for oldest_idle):
		 * it is answered, then closed, or closed by the timeout */
		if (c->state == ST_HEAD && !c->has_req && buf_pending(&c->in) == 0)
			conn_close(c);
	}
}

void hc_server_free(struct hc_server *s)
{
	if (!s)
		return;
	hc_server_quiesce(s);
	while (s->conns)
		conn_close(s->conns);
	while (s->pending) {   /* closed connections the pass has not freed */
		struct hc_conn *c = s->pending;
		s->pending = c->pnext;
		free(c);
	}
	ev_timer_stop(EV_DEFAULT, &s->kick);
	ev_timer_stop(EV_DEFAULT, &s->pause);
	ev_ref(EV_DEFAULT);
	ev_prepare_stop(EV_DEFAULT, &s->pre);
	free(s);
}

unsigned hc_server_conns(const struct hc_server *s) { return s->nconns; }

unsigned long long hc_server_responses(const struct hc_server *s, unsigned status)
{
	return status < 600 ? s->responses[status] : 0;
}

unsigned long long hc_server_bytes_in(const struct hc_server *s) { return s->bytes_in; }
unsigned long long hc_server_bytes_out(const struct hc_server *s) { return s->bytes_out; }
