/*
 * auth.c - "mcp-chain auth login|status|logout": the OAuth login of an
 * HTTP upstream that has "oauth" in its entry (docs/oauth-upstreams.md).
 *
 * login runs the whole flow on the loop: discovery, registration, the
 * authorization URL (printed on stderr as "open: URL"; xdg-open only with a
 * display and a terminal), a loopback listener on 127.0.0.1 for the
 * browser's redirect (state and iss checked), the code exchange, and the
 * store. status and logout read and remove the store; no command prints a
 * token.
 */
#include "app.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <openssl/crypto.h>

#include "config.h"
#include "curl_ev.h"
#include "log.h"
#include "oauth_client.h"

#define REQ_MAX 8192
#define LOGIN_TIMEOUT 300.0

extern char **environ;

struct login {
	const struct cfg_server *s;
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
	int rc;                   /* -1 while running; then the exit code */
};

/* Ends the login with RC (after saying WHY, when not NULL). */
static void finish(struct login *l, int rc, const char *why)
{
	if (why)
		fprintf(stderr, "mcp-chain: auth login %s: %s\n", l->s->name, why);
	if (l->rc < 0)
		l->rc = rc;
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/* The code was exchanged: keep the tokens. */
static void on_exchanged(void *arg, const char *err)
{
	struct login *l = arg;
	char why[300];
	if (err) {
		finish(l, 1, err);
		return;
	}
	const struct oauth_tokens *t = oauth_flow_tokens(l->f);
	if (oauth_store_save(l->s->name, t, why, sizeof why) < 0) {
		finish(l, 1, why);
		return;
	}
	fprintf(stderr, "mcp-chain: logged in to %s at %s", l->s->name, t->issuer);
	if (t->scope)
		fprintf(stderr, " (scope \"%s\")", t->scope);
	if (t->expires_at)
		fprintf(stderr, "; the access token expires in %.0f s%s", t->expires_at - (double)time(NULL),
			t->refresh_token ? " and will be refreshed" : "");
	fputc('\n', stderr);
	finish(l, 0, NULL);
}

/* Writes an HTML answer to the browser and closes its connection. */
static void answer(struct login *l, int status, const char *text)
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
static void on_request(struct login *l)
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
		finish(l, 1, why);
		return;
	}
	answer(l, 200, "logged in; you can close this window");
	ev_io_stop(EV_DEFAULT, &l->lio);
	if (oauth_exchange(l->f, code, on_exchanged, l, why, sizeof why) < 0)
		finish(l, 1, why);
	OPENSSL_cleanse(code, strlen(code));
	free(code);
}

/* The browser's connection is readable. */
static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
	struct login *l = w->data;
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
	struct login *l = w->data;
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
static int listen_loopback(struct login *l, unsigned port)
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

/* Opens URL in a browser when someone can see it. */
static void maybe_open(const char *url)
{
	if ((!getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY")) || !isatty(STDIN_FILENO))
		return;
	char *argv[] = { "xdg-open", (char *)url, NULL };
	pid_t pid;
	if (posix_spawnp(&pid, "xdg-open", NULL, NULL, argv, environ) != 0)
		fprintf(stderr, "mcp-chain: cannot run xdg-open; open the URL yourself\n");
}

/* Registered: print the URL and wait for the redirect. */
static void on_registered(void *arg, const char *err)
{
	struct login *l = arg;
	if (err) {
		finish(l, 1, err);
		return;
	}
	char *url = oauth_authorize_url(l->f);
	if (!url) {
		finish(l, 1, "cannot build the authorization URL");
		return;
	}
	fprintf(stderr, "mcp-chain: to log in to %s, open this URL in a browser:\nopen: %s\n",
		l->s->name, url);
	fflush(stderr);
	maybe_open(url);
	free(url);
	ev_io_init(&l->lio, on_accept, l->lfd, EV_READ);
	l->lio.data = l;
	ev_io_start(EV_DEFAULT, &l->lio);
}

/* Discovery ended: listen, then register. */
static void on_discovered(void *arg, const char *err)
{
	struct login *l = arg;
	char why[600];
	if (err) {
		finish(l, 1, err);
		return;
	}
	const struct oauth_meta *m = oauth_flow_meta(l->f);
	int have = oauth_store_load(l->s->name, m->issuer, &l->stored, why, sizeof why);
	if (have < 0)
		fprintf(stderr, "mcp-chain: ignoring %s\n", why);
	unsigned want = l->s->oauth->callback_port;
	int port = -1;
	if (!want && have > 0 && stored_port(&l->stored))
		port = listen_loopback(l, stored_port(&l->stored));
	if (port < 0)
		port = listen_loopback(l, want);
	if (port < 0) {
		snprintf(why, sizeof why, "cannot listen on 127.0.0.1:%u: %s", want, strerror(errno));
		finish(l, 1, why);
		return;
	}
	snprintf(l->redirect, sizeof l->redirect, "http://127.0.0.1:%d/callback", port);
	if (oauth_register(l->f, l->redirect, have > 0 ? &l->stored : NULL, on_registered, l,
			   why, sizeof why) < 0)
		finish(l, 1, why);
}

static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	finish(w->data, 1, "no redirect came back in time");
}

/* The entry NAME of C, an HTTP upstream; NULL (said why) otherwise. */
static const struct cfg_server *entry(const struct cfg *c, const char *name, bool need_oauth)
{
	for (size_t i = 0; i < c->nservers; i++) {
		const struct cfg_server *s = &c->servers[i];
		if (strcmp(s->name, name) != 0)
			continue;
		if (!s->url)
			fprintf(stderr, "mcp-chain: %s is not an HTTP upstream\n", name);
		else if (need_oauth && !s->oauth)
			fprintf(stderr, "mcp-chain: %s has no \"oauth\" in its entry (add \"oauth\": true)\n",
				name);
		else
			return s;
		return NULL;
	}
	fprintf(stderr, "mcp-chain: no server named \"%s\" in %s\n", name, c->path);
	return NULL;
}

static int login(const struct cfg_server *s, const char *scope)
{
	struct login l = { .s = s, .lfd = -1, .cfd = -1, .rc = -1 };
	char why[600];
	const char *t = getenv("MCP_CHAIN_AUTH_TIMEOUT");
	signal(SIGPIPE, SIG_IGN);
	l.f = oauth_flow_new(s->name, s->url, s->oauth, false);
	if (!l.f)
		return 1;
	if (scope)
		oauth_flow_add_scope(l.f, scope);
	ev_timer_init(&l.deadline, on_deadline, t ? atof(t) : LOGIN_TIMEOUT, 0.);
	l.deadline.data = &l;
	ev_timer_start(EV_DEFAULT, &l.deadline);
	if (oauth_discover(l.f, NULL, on_discovered, &l, why, sizeof why) < 0)
		finish(&l, 1, why);
	if (l.rc < 0)
		ev_run(EV_DEFAULT, 0);
	ev_timer_stop(EV_DEFAULT, &l.deadline);
	ev_io_stop(EV_DEFAULT, &l.lio);
	if (l.cfd >= 0) {
		ev_io_stop(EV_DEFAULT, &l.cio);
		close(l.cfd);
	}
	if (l.lfd >= 0)
		close(l.lfd);
	oauth_flow_free(l.f);
	oauth_tokens_release(&l.stored);
	curl_ev_release();
	return l.rc < 0 ? 1 : l.rc;
}

/* Prints what is kept for S; true when logged in. */
static void status_one(const struct cfg_server *s)
{
	struct oauth_tokens t;
	char why[300];
	int rc = oauth_store_load(s->name, NULL, &t, why, sizeof why);
	if (rc <= 0) {
		printf("%s: not logged in%s%s\n", s->name, rc < 0 ? ": " : "", rc < 0 ? why : "");
		return;
	}
	double left = t.expires_at ? t.expires_at - (double)time(NULL) : 0;
	printf("%s: logged in at %s", s->name, t.issuer);
	if (t.url && strcmp(t.url, s->url) != 0)
		printf(" (for another URL: %s)", t.url);
	if (!t.access_token)
		printf("; no access token");
	else if (!t.expires_at)
		printf("; access token without an expiry");
	else if (left > 0)
		printf("; access token expires in %.0f s", left);
	else
		printf("; access token expired %.0f s ago", -left);
	printf("; scope: %s; refresh token: %s; client: %s\n", t.scope ? t.scope : "(none)",
	       t.refresh_token ? "yes" : "no",
	       t.registered ? "registered dynamically" : t.client_id ? "pre-registered" : "?");
	oauth_tokens_release(&t);
}

static const char auth_usage[] =
	"usage: mcp-chain auth login NAME [--scope SCOPE] [-c FILE]\n"
	"       mcp-chain auth status [NAME] [-c FILE]\n"
	"       mcp-chain auth logout NAME [-c FILE]\n";

int app_auth_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "scope", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = getenv("MCP_CHAIN_CONFIG"), *scope = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 's': scope = optarg; break;
		case 'h': fputs(auth_usage, stdout); return 0;
		default: fputs(auth_usage, stderr); return 2;
		}
	}
	const char *cmd = optind < argc ? argv[optind] : NULL;
	const char *name = optind + 1 < argc ? argv[optind + 1] : NULL;
	if (!cmd || optind + 2 < argc || (strcmp(cmd, "status") && !name) ||
	    (strcmp(cmd, "login") && strcmp(cmd, "status") && strcmp(cmd, "logout"))) {
		fputs(auth_usage, stderr);
		return 2;
	}
	if (!config) {
		fputs("mcp-chain: no configuration given (use --config FILE)\n", stderr);
		return 2;
	}
	struct cfg_errors errs = { 0 };
	struct cfg *cfg = cfg_load(config, &errs);
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!cfg)
		return 1;
	int rc = 0;
	const struct cfg_server *s = name ? entry(cfg, name, strcmp(cmd, "login") == 0) : NULL;
	if (name && !s) {
		rc = 1;
	} else if (strcmp(cmd, "login") == 0) {
		rc = login(s, scope);
	} else if (strcmp(cmd, "status") == 0) {
		for (size_t i = 0; i < cfg->nservers; i++)
			if (s ? &cfg->servers[i] == s : cfg->servers[i].oauth != NULL)
				status_one(&cfg->servers[i]);
	} else {
		char why[300];
		int n = oauth_store_remove(s->name, why, sizeof why);
		if (n < 0)
			fprintf(stderr, "mcp-chain: %s\n", why);
		else
			printf("%s: %s\n", s->name, n ? "logged out" : "was not logged in");
		rc = n < 0;
	}
	cfg_free(cfg);
	return rc;
}
