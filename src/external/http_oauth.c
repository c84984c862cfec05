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
#include <openssl/rand.h>

#include "log.h"
#include "oauth_client.h"
#include "rpc.h"

#define RPC_URL_ELICITATION_REQUIRED (-32042)   /* MCP 2025-11-25 */

static oauth_login_link_fn login_link;
static void *login_link_arg;

void oauth_set_login_link(oauth_login_link_fn fn, void *arg)
{
	login_link = fn;
	login_link_arg = arg;
}

static struct oauth_single_login single_login;

void oauth_set_single_login(const struct oauth_single_login *h)
{
	if (h)
		single_login = *h;
	else
		memset(&single_login, 0, sizeof single_login);
}

#define REFRESH_MARGIN 60.0   /* seconds before expiry a token is renewed */

/* The reason every "needs login" starts with. */
static void needs_login(char *why, size_t n, const char *name, const char *detail)
{
	char full[512];
	snprintf(full, sizeof full, "needs login: mcp-chain auth login %.100s%s%.300s%s", name,
		 detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
	size_t len = strlen(full);   /* cut to N: a reason, not a format */
	if (n == 0)
		return;
	len = len < n ? len : n - 1;
	memcpy(why, full, len);
	why[len] = '\0';
}

/* S needs its principal's login: it answers requests itself from now. */
static void login_needed(struct be_http *s, const char *detail)
{
	unsigned char r[16];
	s->login = true;
	if (RAND_bytes(r, sizeof r) != 1)
		memset(r, 0, sizeof r);
	for (int i = 0; i < 16; i++)
		snprintf(s->elicit_id + 2 * i, 3, "%02x", r[i]);
	log_info("%s: needs %s login%s%s%s", s->name, s->single ? "a" : "its principal's",
		 detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
}

/* The principal's tokens from the sealed store: 1 usable (T filled), 0
 * none or not usable (DETAIL says why, when it is worth a log line). */
static int load_principal(struct be_http *s, struct oauth_tokens *t, const char **detail)
{
	const struct cfg *top = backend_top(s->b);
	const unsigned char *who = backend_principal(s->b);
	static char err[300];
	*detail = NULL;
	if (!who || !top->has_token_key) {
		*detail = "no principal: the session has no bearer token";
		return 0;
	}
	int rc = oauth_store_load_for(s->name, who, top->token_key, t, err, sizeof err);
	if (rc < 0)
		*detail = err;
	if (rc > 0 && t->url && strcmp(t->url, s->url) != 0)
		*detail = "the tokens kept are for another URL";
	else if (rc > 0 && !t->refresh_token && !oauth_tokens_fresh(t, (double)time(NULL), 0))
		*detail = t->access_token ? "the access token expired" : "no token kept";
	if (rc > 0 && !*detail)
		return 1;
	if (rc > 0)
		oauth_tokens_release(t);
	return 0;
}

/* The plain store's tokens (single-user): 1 usable (T filled), 0 none or
 * not usable (DETAIL says why, when there is more to say than "none"). */
static int load_single(struct be_http *s, struct oauth_tokens *t, const char **detail)
{
	static char err[300];
	int rc = oauth_store_load(s->name, NULL, t, err, sizeof err);
	*detail = NULL;
	if (rc < 0)
		*detail = err[0] ? err : "out of memory";
	else if (rc > 0 && t->url && strcmp(t->url, s->url) != 0)
		*detail = "the tokens kept are for another URL";
	else if (rc > 0 && !t->refresh_token && !oauth_tokens_fresh(t, (double)time(NULL), 0))
		*detail = t->access_token ? "the access token expired" : "no token kept";
	if (rc > 0 && !*detail)
		return 1;
	if (rc > 0)
		oauth_tokens_release(t);
	return 0;
}

int http_auth_load(struct be_http *s, char *why, size_t n)
{
	const struct cfg_server *c = backend_cfg(s->b);
	if (!c->oauth)
		return 0;
	if (c->oauth->per_principal) {
		struct oauth_tokens *t = calloc(1, sizeof *t);
		const char *detail = NULL;
		if (t && load_principal(s, t, &detail) == 1) {
			s->tok = t;
			log_debug("%s: OAuth tokens of %s read for its principal", s->name, t->issuer);
			return 0;
		}
		free(t);
		login_needed(s, detail);
		return 0;
	}
	struct oauth_tokens *t = calloc(1, sizeof *t);
	const char *detail = NULL;
	if (!t || load_single(s, t, &detail) != 1) {
		needs_login(why, n, s->name, t ? detail : "out of memory");
		free(t);
		if (!single_login.start)
			return BE_START_PERMANENT;
		/* up, needing login: a client that can open a URL is asked to */
		free(s->login_why);
		s->login_why = strdup(why);
		s->single = true;
		login_needed(s, detail);
		return s->login_why ? 0 : BE_START_PERMANENT;
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
	if (s->url_asked && single_login.cancel)
		single_login.cancel(single_login.arg, s);
	s->url_asked = false;
	json_decref(s->url_waiters);
	s->url_waiters = NULL;
	free(s->login_url);
	s->login_url = NULL;
	free(s->login_why);
	s->login_why = NULL;
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
	const struct cfg *top = backend_top(s->b);
	const unsigned char *who = backend_principal(s->b);
	int rc;
	if (backend_cfg(s->b)->oauth->per_principal)
		rc = who && top->has_token_key ? oauth_store_save_for(s->name, who, top->token_key,
								      s->tok, err, sizeof err) : 0;
	else
		rc = oauth_store_save(s->name, s->tok, err, sizeof err);
	if (rc < 0)
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

/* ---- perPrincipal: the login the principal needs ---- */

/* The -32042 error for request ID (borrowed): its login link. */
static json_t *elicitation_required(struct be_http *s, json_t *id)
{
	const unsigned char *who = backend_principal(s->b);
	char *url;
	if (s->single) {
		url = s->login_url ? strdup(s->login_url) : NULL;
	} else if (!who) {
		return rpc_errorf(id, -32000, "%s keeps tokens per principal, and this call has no "
				  "principal (no bearer token, or a 2026-07-28 call without a "
				  "session)", s->name);
	} else {
		url = login_link ? login_link(login_link_arg, s->name, who) : NULL;
	}
	if (!url)
		return rpc_errorf(id, -32000, "%s needs you to sign in, and no login link can be "
				  "made", s->name);
	char msg[200];
	snprintf(msg, sizeof msg, "Sign in to %s", s->name);
	json_t *data = json_pack("{s:[{s:s,s:s,s:s,s:s}]}", "elicitations", "mode", "url",
				 "elicitationId", s->elicit_id, "url", url, "message", msg);
	free(url);
	char text[240];
	snprintf(text, sizeof text, "%s needs you to sign in: open the link, then try again",
		 s->name);
	return rpc_error(id, RPC_URL_ELICITATION_REQUIRED, text, data);
}

/* A minimal initialize result of our own while the upstream is out of
 * reach: the lists it may bring are promised (list_changed follows the
 * sign-in). */
static json_t *own_init_result(struct be_http *s, json_t *params)
{
	const char *v = json_string_value(json_object_get(params, "protocolVersion"));
	char instr[300];
	snprintf(instr, sizeof instr, "%s needs you to sign in: any call of it answers with the "
		 "link (error -32042); its tools appear once you have", s->name);
	return json_pack("{s:s,s:{s:{s:b},s:{s:b},s:{s:b}},s:{s:s,s:s},s:s}",
			 "protocolVersion", v ? v : "2025-11-25",
			 "capabilities", "tools", "listChanged", 1, "prompts", "listChanged", 1,
			 "resources", "listChanged", 1,
			 "serverInfo", "name", s->name, "version", "sign-in required",
			 "instructions", instr);
}

/* True when initialize PARAMS (borrowed) declare URL-mode elicitation. */
static bool url_elicitation(json_t *params)
{
	json_t *e = json_object_get(json_object_get(params, "capabilities"), "elicitation");
	return json_is_object(json_object_get(e, "url"));
}

/* The wiring knows the authorization URL (or ERR): the waiting requests
 * get their -32042 (or the error). */
static void on_login_url(void *arg, const char *url, const char *err)
{
	struct be_http *s = arg;
	size_t i;
	json_t *id;
	s->url_asked = false;
	free(s->login_url);
	s->login_url = url ? strdup(url) : NULL;
	json_array_foreach(s->url_waiters, i, id) {
		json_t *resp = s->login_url ? elicitation_required(s, id) :
			rpc_errorf(id, -32000, "%s needs you to sign in, and the sign-in cannot "
				   "start: %.300s", s->name, err ? err : "?");
		if (resp)
			http_push(s, resp, 0);
	}
	json_array_clear(s->url_waiters);
	http_wake(s);
}

/* A single-user upstream's request ID (borrowed) waits for the URL, which
 * the wiring is asked for; false when it cannot be. */
static bool wait_url(struct be_http *s, json_t *id)
{
	if (!s->url_waiters)
		s->url_waiters = json_array();
	if (!s->url_waiters || json_array_append(s->url_waiters, id) < 0)
		return false;
	if (s->url_asked)
		return true;
	s->url_asked = true;
	if (single_login.start(single_login.arg, s->name, on_login_url, s) == 0)
		return true;
	s->url_asked = false;
	json_array_remove(s->url_waiters, json_array_size(s->url_waiters) - 1);
	return false;
}

bool http_auth_answer(struct be_http *s, json_t *msg)
{
	if (!s->login)
		return false;
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id"), *resp;
	if (!m || !id || json_is_null(id))
		return true;   /* a notification or a response: nobody to hear it */
	if (strcmp(m, "initialize") == 0 && s->single &&
	    !url_elicitation(json_object_get(msg, "params")))   /* as without the flow */
		resp = rpc_error(id, -32000, s->login_why, NULL);
	else if (strcmp(m, "initialize") == 0)
		resp = rpc_result(id, own_init_result(s, json_object_get(msg, "params")));
	else if (strcmp(m, "server/discover") == 0)   /* initialize, then */
		resp = rpc_error(id, RPC_METHOD_NOT_FOUND, "Method not found", NULL);
	else if (strcmp(m, "ping") == 0)
		resp = rpc_result(id, json_object());
	else if (s->single && !s->login_url && wait_url(s, id))
		return true;   /* on_login_url answers */
	else if (s->single && !s->login_url)
		resp = rpc_errorf(id, -32000, "%s", s->login_why);
	else
		resp = elicitation_required(s, id);
	if (resp)
		http_push(s, resp, 0);
	http_wake(s);
	return true;
}

void http_auth_reload(struct be_http *s)
{
	const struct cfg_server *c = backend_cfg(s->b);
	if (!c->oauth || (!c->oauth->per_principal && !s->single) || s->down || s->stopping)
		return;
	struct oauth_tokens *t = calloc(1, sizeof *t);
	const char *detail = NULL;
	if (!t || (s->single ? load_single(s, t, &detail) : load_principal(s, t, &detail)) != 1) {
		free(t);
		if (s->single && s->login) {   /* the sign-in failed: the next call starts anew */
			free(s->login_url);
			s->login_url = NULL;
		}
		if (!s->login)   /* back to "needs login" once restarted */
			http_down(s, "its principal signed out: needs login");
		return;
	}
	if (s->refresh) {   /* the new tokens win over a refresh of the old */
		oauth_refresh_cancel(s->refresh);
		s->refresh = NULL;
	}
	if (s->tok)
		oauth_tokens_release(s->tok);
	free(s->tok);
	s->tok = t;
	if (!s->login) {
		log_info("%s: its principal signed in again: new tokens", s->name);
		http_wake(s);
		return;
	}
	s->login = false;
	s->signing_in = true;
	log_info("%s: its principal signed in: starting a session", s->name);
	http_renew_session(s);
}

void http_auth_signed_in(struct be_http *s)
{
	static const char *const lists[] = {
		"notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/resources/list_changed",
	};
	s->signing_in = false;
	for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
		json_t *n = rpc_notification(lists[i], NULL);
		if (n)
			http_push(s, n, 0);
	}
	json_t *done = rpc_notification("notifications/elicitation/complete",
					json_pack("{s:s}", "elicitationId", s->elicit_id));
	if (done)
		http_push(s, done, 0);
	http_wake(s);
}
