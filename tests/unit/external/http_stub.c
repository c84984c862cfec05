/*
 * http_stub.c - the scripted HTTP/1.1 server of the HTTP upstream tests
 * (see http_stub.h).
 */
#include "http_stub.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

struct stub_conn {
	ev_io io;
	int fd;                 /* -1 once closed */
	char *in;               /* what arrived, not yet a whole request */
	size_t in_len;
	struct stub_conn *next;
};

static struct {
	int lfd;
	ev_io accept_io;
	stub_fn fn;
	void *arg;
	struct stub_conn *conns;
	struct stub_req **reqs;
	size_t nreqs;
} ST = { .lfd = -1 };

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* The length of the request head at the start of C's input (with its blank
 * line), or 0 when incomplete. */
static size_t head_len(const struct stub_conn *c)
{
	for (size_t i = 0; i + 3 < c->in_len; i++)
		if (memcmp(c->in + i, "\r\n\r\n", 4) == 0)
			return i + 4;
	return 0;
}

/* Takes one whole request off C's input, if there is one. */
static struct stub_req *take_request(struct stub_conn *c)
{
	size_t hl = head_len(c);
	if (!hl)
		return NULL;
	char *head = strndup(c->in, hl);
	size_t clen = 0;
	const char *v = strcasestr(head, "\r\nContent-Length:");
	if (v)
		clen = strtoul(v + 17, NULL, 10);
	if (c->in_len < hl + clen) {
		free(head);
		return NULL;
	}
	struct stub_req *r = calloc(1, sizeof *r);
	assert_non_null(r);
	sscanf(head, "%15s %511s", r->method, r->path);
	char *eol = strstr(head, "\r\n");
	r->head = strdup(eol + 2);
	free(head);
	r->body = malloc(clen + 1);
	memcpy(r->body, c->in + hl, clen);
	r->body[clen] = '\0';
	r->body_len = clen;
	r->conn = c;
	memmove(c->in, c->in + hl + clen, c->in_len - hl - clen);
	c->in_len -= hl + clen;
	return r;
}

/* Data (or the end) on a connection. */
static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stub_conn *c = w->data;
	char buf[16384];
	(void)loop;
	(void)revents;
	ssize_t n = read(c->fd, buf, sizeof buf);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		stub_close(c);
		return;
	}
	c->in = realloc(c->in, c->in_len + (size_t)n);
	memcpy(c->in + c->in_len, buf, (size_t)n);
	c->in_len += (size_t)n;
	struct stub_req *r;
	while (c->fd >= 0 && (r = take_request(c)) != NULL) {
		ST.reqs = realloc(ST.reqs, (ST.nreqs + 1) * sizeof *ST.reqs);
		ST.reqs[ST.nreqs++] = r;
		if (ST.fn)
			ST.fn(c, r, ST.arg);
		else
			stub_reply(c, 500, "text/plain", NULL, "no handler");
	}
}

/* A new connection. */
static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)w;
	(void)revents;
	int fd = accept(ST.lfd, NULL, NULL);
	if (fd < 0)
		return;
	set_nonblock(fd);
	struct stub_conn *c = calloc(1, sizeof *c);
	assert_non_null(c);
	c->fd = fd;
	ev_io_init(&c->io, on_conn, fd, EV_READ);
	c->io.data = c;
	ev_io_start(loop, &c->io);
	c->next = ST.conns;
	ST.conns = c;
}

int stub_start(stub_fn fn, void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	assert_int_equal(ST.lfd, -1);
	ST.fn = fn;
	ST.arg = arg;
	ST.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(ST.lfd >= 0);
	set_nonblock(ST.lfd);
	assert_int_equal(bind(ST.lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(ST.lfd, 16), 0);
	assert_int_equal(getsockname(ST.lfd, (struct sockaddr *)&a, &alen), 0);
	ev_io_init(&ST.accept_io, on_accept, ST.lfd, EV_READ);
	ev_io_start(EV_DEFAULT, &ST.accept_io);
	return ntohs(a.sin_port);
}

void stub_stop(void)
{
	if (ST.lfd >= 0) {
		ev_io_stop(EV_DEFAULT, &ST.accept_io);
		close(ST.lfd);
		ST.lfd = -1;
	}
	while (ST.conns) {
		struct stub_conn *c = ST.conns;
		ST.conns = c->next;
		stub_close(c);
		free(c->in);
		free(c);
	}
	for (size_t i = 0; i < ST.nreqs; i++) {
		free(ST.reqs[i]->head);
		free(ST.reqs[i]->body);
		free(ST.reqs[i]);
	}
	free(ST.reqs);
	ST.reqs = NULL;
	ST.nreqs = 0;
	ST.fn = NULL;
}

size_t stub_count(void)
{
	return ST.nreqs;
}

const struct stub_req *stub_get(size_t i)
{
	return i < ST.nreqs ? ST.reqs[i] : NULL;
}

size_t stub_count_method(const char *method)
{
	size_t n = 0;
	for (size_t i = 0; i < ST.nreqs; i++)
		n += strcmp(ST.reqs[i]->method, method) == 0;
	return n;
}

const char *stub_header(const struct stub_req *r, const char *name)
{
	static char out[2048];
	size_t nl = strlen(name);
	for (const char *l = r->head; *l;) {
		const char *eol = strstr(l, "\r\n");
		if (!eol)
			break;
		if ((size_t)(eol - l) > nl && strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
			const char *v = l + nl + 1;
			while (*v == ' ')
				v++;
			snprintf(out, sizeof out, "%.*s", (int)(eol - v), v);
			return out;
		}
		l = eol + 2;
	}
	return NULL;
}

/* Writes all of DATA, or fails the test (small amounts on loopback). */
static void write_all(struct stub_conn *c, const char *data, size_t len)
{
	while (c->fd >= 0 && len > 0) {
		ssize_t n = write(c->fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			stub_close(c);
			return;
		}
		if (n < 0)
			fail_msg("stub: write: %s", strerror(errno));
		data += n;
		len -= (size_t)n;
	}
}

/* Writes a response head; CLEN < 0: no Content-Length. */
static void write_head(struct stub_conn *c, int status, const char *ctype, const char *extra,
		       long clen)
{
	char head[4096];
	int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nConnection: close\r\n", status);
	if (ctype)
		n += snprintf(head + n, sizeof head - n, "Content-Type: %s\r\n", ctype);
	if (clen >= 0)
		n += snprintf(head + n, sizeof head - n, "Content-Length: %ld\r\n", clen);
	n += snprintf(head + n, sizeof head - n, "%s\r\n", extra ? extra : "");
	assert_true(n < (int)sizeof head);
	write_all(c, head, (size_t)n);
}

void stub_reply(struct stub_conn *c, int status, const char *ctype, const char *extra,
		const char *body)
{
	size_t len = body ? strlen(body) : 0;
	write_head(c, status, ctype, extra, (long)len);
	write_all(c, body ? body : "", len);
	stub_close(c);
}

void stub_head(struct stub_conn *c, int status, const char *ctype, const char *extra)
{
	write_head(c, status, ctype, extra, -1);
}

void stub_write(struct stub_conn *c, const char *text)
{
	write_all(c, text, strlen(text));
}

void stub_close(struct stub_conn *c)
{
	if (c->fd < 0)
		return;
	ev_io_stop(EV_DEFAULT, &c->io);
	close(c->fd);
	c->fd = -1;
}

bool stub_open(const struct stub_conn *c)
{
	return c->fd >= 0;
}

int stub_dead_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	return ntohs(a.sin_port);
}
