/*
 * loopback.c - a single-user OAuth login with a loopback redirect
 * (docs/oauth-upstreams.md): discovery, a listener on 127.0.0.1 (the
 * entry's callbackPort, else the port of the registration kept, else any
 * free one), registration, the authorization URL, the browser's redirect
 * (state and iss checked), the code exchange, and the plain store -- all on
 * the loop. `mcp-chain auth login` (auth.c) and the stdio front's URL-mode
 * elicitation (single.c) both run it.
 */
#include "app.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>
#include <openssl/crypto.h>

#include "log.h"
#include "oauth_client.h"

#define REQ_MAX 8192

struct loopback_login {
	const struct cfg_server *s;
	const struct loopback_ops *ops;
	void *arg;
	struct oauth_flow *f;
	struct oauth_tokens stored;
	int lfd;
	ev_io lio;
	int cfd;                  /* the browser's connection being read, or -1 */
	ev_io cio;
	char req[REQ_MAX + 1];
	size_t len;
	ev_timer deadline;
	char redirect[80];
	bool over;                /* ops->done was called */
};

/* Closes the listener and the browser's connection. */
static void unlisten(struct loopback_login *l)
{
	ev_io_stop(EV_DEFAULT, &l->lio);
	if (l->cfd >= 0) {
		ev_io_stop(EV_DEFAULT, &l->cio);
		close(l->cfd);
		l->cfd = -1;
	}
	if (l->lfd >= 0)
		close(l->lfd);
	l->lfd = -1;
}

/* Ends the login: ERR NULL when the tokens are stored. */
static void finish(struct loopback_login *l, const char *err)
{
	if (l->over)
		return;
	l->over = true;
	ev_timer_stop(EV_DEFAULT, &l->deadline);
	unlisten(l);
	l->ops->done(l->arg, l, err);
}

/* The code was exchanged: keep the tokens. */
static void on_exchanged(void *arg, const char *err)
{
	struct loopback_login *l = arg;
	char why[300];
	if (err) {
		finish(l, err);
		return;
	}
	if (oauth_store_save(l->s->name, oauth_flow_tokens(l->f), why, sizeof why) < 0) {
		finish(l, why);
		return;
	}
	finish(l, NULL);
}

/* Writes an HTML answer to the browser and closes its connection. */
static void answer(struct loopback_login *l, int status, const char *text)
{
	char page[1200], esc[600];
	size_t o = 0;
	for (const char *p = text; *p && o + 7 < sizeof esc; p++) {
		const char *e = *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : *p == '&' ? "&amp;" : NULL;
		if (e) {
			memcpy(esc + o, e, strlen(e));
			o += strlen(e);
		} else {
			esc[o++] = *p;
		}
	}
	esc[o] = 0;
	int body = snprintf(page, sizeof page, "<!doctype html><title>mcp-chain</title>"
			    "<p>mcp-chain: %s</p>\n", esc);
	char head[200];
	int hl = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: text/html; charset=utf-8"
			  "\r\nContent-Length: %d\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
			  status, status == 200 ? "OK" : status == 404 ? "Not Found" : "Bad Request", body);
	if (write(l->cfd, head, (size_t)hl) < 0 || write(l->cfd, page, (size_t)body) < 0)
		log_debug("auth: the browser's connection closed before the answer");
	ev_io_stop(EV_DEFAULT, &l->cio);
	close(l->cfd);
	l->cfd = -1;
	l->len = 0;
	ev_io_start(EV_DEFAULT, &l->lio);
}

/* A whole request head came from the browser. */
static void on_request(struct loopback_login *l)
{
	char why[600];
	char *sp = strchr(l->req, ' '), *path = sp ? sp + 1 : NULL;
	if (!path || strncmp(l->req, "GET ", 4) != 0) {
		answer(l, 400, "not a GET request");
		return;
	}
	path[strcspn(path, " \r\n")] = 0;
	if (strncmp(path, "/callback", 9) != 0 || (path[9] && path[9] != '?')) {
		answer(l, 404, "not the login callback");
		return;
	}
	char *code = oauth_redirect_check(l->f, path[9] ? path + 10 : "", why, sizeof why);
	if (!code) {
		answer(l, 400, why);
		finish(l, why);
		return;
	}
	answer(l, 200, "logged in; you can close this window");
	unlisten(l);
	if (oauth_exchange(l->f, code, on_exchanged, l, why, sizeof why) < 0)
		finish(l, why);
	OPENSSL_cleanse(code, strlen(code));
	free(code);
}

/* The browser's connection is readable. */
static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
	struct loopback_login *l = w->data;
	(void)loop;
	(void)revents;
	ssize_t r = read(l->cfd, l->req + l->len, REQ_MAX - l->len);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		ev_io_stop(EV_DEFAULT, &l->cio);
		close(l->cfd);
		l->cfd = -1;
		l->len = 0;
		ev_io_start(EV_DEFAULT, &l->lio);
		return;
	}
	l->len += (size_t)r;
	l->req[l->len] = 0;
	if (strstr(l->req, "\r\n\r\n") || strstr(l->req, "\n\n"))
		on_request(l);
	else if (l->len == REQ_MAX)
		answer(l, 400, "request too long");
}

/* A connection to the callback port: read it (one at a time). */
static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct loopback_login *l = w->data;
	(void)revents;
	int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	l->cfd = fd;
	l->len = 0;
	ev_io_stop(loop, &l->lio);
	ev_io_init(&l->cio, on_conn, fd, EV_READ);
	l->cio.data = l;
	ev_io_start(loop, &l->cio);
}

/* Listens on 127.0.0.1:PORT; the port taken, or -1. */
static int listen_loopback(struct loopback_login *l, unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t al = sizeof a;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		close(fd);
		return -1;
	}
	l->lfd = fd;
	return ntohs(a.sin_port);
}

/* The port of a stored loopback redirect URI, or 0. */
static unsigned stored_port(const struct oauth_tokens *t)
{
	const char *p = t->registered && t->redirect_uri ? strstr(t->redirect_uri, "127.0.0.1:") : NULL;
	return p ? (unsigned)strtoul(p + 10, NULL, 10) : 0;
}

/* Registered: the URL to open, then wait for the redirect. */
static void on_registered(void *arg, const char *err)
{
	struct loopback_login *l = arg;
	if (err) {
		finish(l, err);
		return;
	}
	char *url = oauth_authorize_url(l->f);
	if (!url) {
		finish(l, "cannot build the authorization URL");
		return;
	}
	ev_io_init(&l->lio, on_accept, l->lfd, EV_READ);
	l->lio.data = l;
	ev_io_start(EV_DEFAULT, &l->lio);
	l->ops->url(l->arg, l, url);
	free(url);
}

/* Discovery ended: listen, then register. */
static void on_discovered(void *arg, const char *err)
{
	struct loopback_login *l = arg;
	char why[600];
	if (err) {
		finish(l, err);
		return;
	}
	const struct oauth_meta *m = oauth_flow_meta(l->f);
	int have = oauth_store_load(l->s->name, m->issuer, &l->stored, why, sizeof why);
	if (have < 0)
		log_warn("%s: ignoring %s", l->s->name, why);
	unsigned want = l->s->oauth->callback_port;
	int port = -1;
	if (!want && have > 0 && stored_port(&l->stored))
		port = listen_loopback(l, stored_port(&l->stored));
	if (port < 0)
		port = listen_loopback(l, want);
	if (port < 0) {
		snprintf(why, sizeof why, "cannot listen on 127.0.0.1:%u: %s", want, strerror(errno));
		finish(l, why);
		return;
	}
	snprintf(l->redirect, sizeof l->redirect, "http://127.0.0.1:%d/callback", port);
	if (oauth_register(l->f, l->redirect, have > 0 ? &l->stored : NULL, on_registered, l,
			   why, sizeof why) < 0)
		finish(l, why);
}

static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	finish(w->data, "no redirect came back in time");
}

struct loopback_login *loopback_login_start(const struct cfg_server *s, const char *scope,
					    double timeout, const struct loopback_ops *ops,
					    void *arg)
{
	char why[600];
	struct loopback_login *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->s = s;
	l->ops = ops;
	l->arg = arg;
	l->lfd = l->cfd = -1;
	ev_init(&l->lio, on_accept);
	l->f = oauth_flow_new(s->name, s->url, s->oauth, false);
	if (!l->f) {
		free(l);
		return NULL;
	}
	if (scope)
		oauth_flow_add_scope(l->f, scope);
	ev_timer_init(&l->deadline, on_deadline, timeout, 0.);
	l->deadline.data = l;
	ev_timer_start(EV_DEFAULT, &l->deadline);
	if (oauth_discover(l->f, NULL, on_discovered, l, why, sizeof why) < 0)
		finish(l, why);
	return l;
}

const struct oauth_tokens *loopback_login_tokens(struct loopback_login *l)
{
	return oauth_flow_tokens(l->f);
}

void loopback_login_free(struct loopback_login *l)
{
	if (!l)
		return;
	ev_timer_stop(EV_DEFAULT, &l->deadline);
	unlisten(l);
	oauth_flow_free(l->f);
	oauth_tokens_release(&l->stored);
	free(l);
}
