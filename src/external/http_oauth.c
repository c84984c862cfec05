/*
 * http_oauth.c - an HTTP upstream's OAuth tokens (see http_int.h and
 * docs/oauth-upstreams.md): read from the store at start, sent as a
 * Bearer token on every request, refreshed before expiry and once on a
 * 401, and the backend down with "needs login: ..." when none will do.
 * Tokens never reach a log line or an error text.
 */
#include "http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "log.h"
#include "oauth_client.h"

#define REFRESH_MARGIN 60.0   /* seconds before expiry a token is renewed */

/* The reason every "needs login" starts with. */
static void needs_login(char *why, size_t n, const char *name, const char *detail)
{
	snprintf(why, n, "needs login: mcp-chain auth login %s%s%s", name, detail ? " (" : "",
		 detail ? detail : "");
	if (detail && strlen(why) + 1 < n)
		strcat(why, ")");
}

int http_auth_load(struct be_http *s, char *why, size_t n)
{
	const struct cfg_server *c = backend_cfg(s->b);
	if (!c->oauth)
		return 0;
	struct oauth_tokens *t = calloc(1, sizeof *t);
	char err[300] = "";
	int rc = t ? oauth_store_load(s->name, NULL, t, err, sizeof err) : -1;
	const char *detail = NULL;
	if (rc < 0)
		detail = err[0] ? err : "out of memory";
	else if (rc == 0)
		detail = NULL;
	else if (t->url && strcmp(t->url, s->url) != 0)
		detail = "the tokens kept are for another URL";
	else if (!t->refresh_token && !oauth_tokens_fresh(t, (double)time(NULL), 0))
		detail = t->access_token ? "the access token expired" : "no token kept";
	if (rc <= 0 || detail) {
		needs_login(why, n, s->name, detail);
		if (t)
			oauth_tokens_release(t);
		free(t);
		return BE_START_PERMANENT;
	}
	s->tok = t;
	log_debug("%s: OAuth tokens of %s read", s->name, t->issuer);
	return 0;
}

int http_auth_header(struct hx *x)
{
	const struct oauth_tokens *t = x->s->tok;
	if (!t || !t->access_token)
		return 0;
	char *v = NULL;
	if (asprintf(&v, "Bearer %s", t->access_token) < 0)
		return -1;
	int rc = hx_header(x, "Authorization", v);
	OPENSSL_cleanse(v, strlen(v));
	free(v);
	return rc;
}

void http_auth_release(struct be_http *s)
{
	oauth_refresh_cancel(s->refresh);
	s->refresh = NULL;
	if (s->tok)
		oauth_tokens_release(s->tok);
	free(s->tok);
	s->tok = NULL;
}

/* Writes S's tokens to the store (a failure is logged, not fatal). */
static void save(struct be_http *s)
{
	char err[300];
	if (oauth_store_save(s->name, s->tok, err, sizeof err) < 0)
		log_warn("%s: cannot keep the refreshed tokens: %s", s->name, err);
}

/* A refresh ended. */
static void on_refreshed(void *arg, const char *err)
{
	struct be_http *s = arg;
	s->refresh = NULL;
	if (err) {
		char why[sizeof s->why];
		log_warn("%s: %s", s->name, err);
		/* the refresh token is of no more use: the next start says "needs login" */
		free(s->tok->access_token);
		free(s->tok->refresh_token);
		s->tok->access_token = s->tok->refresh_token = NULL;
		save(s);
		needs_login(why, sizeof why, s->name, "the token refresh failed");
		http_down(s, why);
		return;
	}
	log_info("%s: access token refreshed", s->name);
	save(s);
	http_wake(s);
}

/* Starts a refresh; false when there is no refresh token or it cannot start. */
static bool refresh_begin(struct be_http *s)
{
	char why[300];
	if (s->refresh)
		return true;
	if (!s->tok->refresh_token)
		return false;
	s->refresh = oauth_refresh_start(s->tok, false, on_refreshed, s, why, sizeof why);
	if (!s->refresh)
		log_warn("%s: cannot refresh the access token: %s", s->name, why);
	return s->refresh != NULL;
}

bool http_auth_ready(struct be_http *s)
{
	if (!s->tok)
		return true;
	if (s->refresh)
		return false;
	if (oauth_tokens_fresh(s->tok, (double)time(NULL), REFRESH_MARGIN) || !s->tok->refresh_token)
		return true;
	return !refresh_begin(s);
}

bool http_auth_refused(struct be_http *s, struct hx *x)
{
	struct oauth_challenge ch;
	char why[sizeof s->why], detail[220];
	oauth_challenge_parse(x->www_auth, &ch);
	bool handled = true;
	if (x->status == 403) {
		handled = ch.error && strcmp(ch.error, "insufficient_scope") == 0;
		if (handled) {
			snprintf(detail, sizeof detail, "the server wants scope \"%.120s\": log in "
				 "again with --scope", ch.scope ? ch.scope : "?");
			needs_login(why, sizeof why, s->name, detail);
			http_down(s, why);
		}
	} else if (!s->tok) {
		handled = ch.resource_metadata != NULL;
		if (handled) {
			snprintf(why, sizeof why, "needs login: the server asks for OAuth: add "
				 "\"oauth\": true to \"%.40s\", then mcp-chain auth login %.40s",
				 s->name, s->name);
			http_down(s, why);
		}
	} else if (x->msg && !x->msg->auth_retried && refresh_begin(s)) {
		struct out *o = hx_take_msg(x);
		o->auth_retried = true;
		log_info("%s: HTTP 401: refreshing the access token", s->name);
		http_hold(s, o);
	} else {
		needs_login(why, sizeof why, s->name, "the access token was refused");
		http_down(s, why);
	}
	oauth_challenge_release(&ch);
	return handled;
}
