/*
 * auth.c - "mcp-chain auth login|status|logout": the OAuth login of an
 * HTTP upstream that has "oauth" in its entry (docs/oauth-upstreams.md).
 *
 * login runs the loopback login of loopback.c (discovery, registration, a
 * listener on 127.0.0.1 for the browser's redirect, the code exchange, the
 * store) and prints its authorization URL on stderr as "open: URL"
 * (xdg-open only with a display and a terminal). status and logout read
 * and remove the store; no command prints a token.
 */
#include "app.h"

#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "config.h"
#include "curl_ev.h"
#include "log.h"
#include "oauth_client.h"

#define LOGIN_TIMEOUT 300.0

extern char **environ;

struct login {
	const struct cfg_server *s;
	int rc;                   /* -1 while running; then the exit code */
};

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

/* The authorization URL is ready: print it. */
static void on_url(void *arg, struct loopback_login *ll, const char *url)
{
	struct login *l = arg;
	(void)ll;
	fprintf(stderr, "mcp-chain: to log in to %s, open this URL in a browser:\nopen: %s\n",
		l->s->name, url);
	fflush(stderr);
	maybe_open(url);
}

/* The login ended: the tokens are kept, or ERR says why not. */
static void on_done(void *arg, struct loopback_login *ll, const char *err)
{
	struct login *l = arg;
	if (err) {
		fprintf(stderr, "mcp-chain: auth login %s: %s\n", l->s->name, err);
		l->rc = 1;
	} else {
		const struct oauth_tokens *t = loopback_login_tokens(ll);
		fprintf(stderr, "mcp-chain: logged in to %s at %s", l->s->name, t->issuer);
		if (t->scope)
			fprintf(stderr, " (scope \"%s\")", t->scope);
		if (t->expires_at)
			fprintf(stderr, "; the access token expires in %.0f s%s",
				t->expires_at - (double)time(NULL),
				t->refresh_token ? " and will be refreshed" : "");
		fputc('\n', stderr);
		l->rc = 0;
	}
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static const struct loopback_ops login_ops = { on_url, on_done };

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
	struct login l = { .s = s, .rc = -1 };
	const char *t = getenv("MCP_CHAIN_AUTH_TIMEOUT");
	signal(SIGPIPE, SIG_IGN);
	struct loopback_login *ll = loopback_login_start(s, scope, t ? atof(t) : LOGIN_TIMEOUT,
							 &login_ops, &l);
	if (!ll)
		return 1;
	if (l.rc < 0)
		ev_run(EV_DEFAULT, 0);
	loopback_login_free(ll);
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
