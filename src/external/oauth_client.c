/*
 * oauth_client.c - the OAuth 2.1 client's flow (see oauth_client.h):
 * registration, the authorization request and its redirect, the token
 * endpoint (code exchange and refresh). Discovery is in oauth_discover.c,
 * the token store in oauth_store.c.
 */
#include "oauth_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "jose.h"
#include "log.h"

/* --- small helpers --- */

int oauth_set(char **dst, const char *src)
{
	char *c = src ? strdup(src) : NULL;
	if (src && !c)
		return -1;
	free(*dst);
	*dst = c;
	return 0;
}

void oauth_excerpt(char *out, size_t n, const char *s)
{
	size_t i = 0;
	for (; s && s[i] && i + 1 < n; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (n)
		out[i < n ? i : n - 1] = 0;
}

json_t *oauth_json_body(const struct fetch_res *res)
{
	json_t *j = res->body ? json_loadb(res->body, res->body_len, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

void oauth_urls_clear(struct oauth_flow *f)
{
	for (int i = 0; i < 4; i++) {
		free(f->urls[i]);
		f->urls[i] = NULL;
	}
	f->ui = 0;
}

/* Appends "&KEY=VALUE" (form-urlencoded) to B; the first without '&'. */
static void form_add(struct buf *b, const char *key, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	if (!value)
		return;
	if (b->len)
		buf_append(b, "&", 1);
	buf_append(b, key, strlen(key));
	buf_append(b, "=", 1);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '.' || *p == '_' || *p == '~')
			buf_append(b, (const char *)p, 1);
		else
			buf_append(b, e, 3);
	}
}

/* --- tokens --- */

void oauth_tokens_release(struct oauth_tokens *t)
{
	char **s[] = { &t->url, &t->issuer, &t->token_endpoint, &t->client_id, &t->client_secret,
		       &t->auth_method, &t->redirect_uri, &t->resource, &t->access_token,
		       &t->refresh_token, &t->scope };
	for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
		if (*s[i])
			OPENSSL_cleanse(*s[i], strlen(*s[i]));
		free(*s[i]);
	}
	memset(t, 0, sizeof *t);
}

int oauth_tokens_copy_client(struct oauth_tokens *to, const struct oauth_tokens *from)
{
	to->registered = from->registered;
	return oauth_set(&to->issuer, from->issuer) | oauth_set(&to->client_id, from->client_id) |
	       oauth_set(&to->client_secret, from->client_secret) |
	       oauth_set(&to->auth_method, from->auth_method) |
	       oauth_set(&to->redirect_uri, from->redirect_uri);
}

bool oauth_tokens_fresh(const struct oauth_tokens *t, double now, double margin)
{
	return t->access_token && (t->expires_at == 0 || t->expires_at - margin > now);
}

/* --- the flow --- */

static const struct cfg_oauth no_options = { .resource = true };

struct oauth_flow *oauth_flow_new(const char *name, const char *url, const struct cfg_oauth *o,
				  bool allow_http)
{
	struct oauth_flow *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->name = strdup(name);
	f->url = strdup(url);
	f->o = o ? o : &no_options;
	f->allow_http = allow_http;
	if (!f->name || !f->url) {
		oauth_flow_free(f);
		return NULL;
	}
	return f;
}

void oauth_flow_free(struct oauth_flow *f)
{
	if (!f)
		return;
	fetch_cancel(f->fetch);
	oauth_urls_clear(f);
	oauth_challenge_release(&f->ch);
	oauth_tokens_release(&f->tok);
	struct oauth_meta *m = &f->meta;
	free(m->prm_url);
	free(m->issuer);
	free(m->authorization_endpoint);
	free(m->token_endpoint);
	free(m->registration_endpoint);
	free(m->scope);
	free(m->resource);
	free(f->extra_scope);
	free(f->name);
	free(f->url);
	OPENSSL_cleanse(f->verifier, sizeof f->verifier);
	free(f);
}

const struct oauth_meta *oauth_flow_meta(const struct oauth_flow *f)
{
	return &f->meta;
}

struct oauth_tokens *oauth_flow_tokens(struct oauth_flow *f)
{
	return &f->tok;
}

void oauth_flow_add_scope(struct oauth_flow *f, const char *scope)
{
	oauth_set(&f->extra_scope, scope);
}

void oauth_flow_finish(struct oauth_flow *f, const char *err)
{
	oauth_urls_clear(f);
	if (err && err != f->err)
		snprintf(f->err, sizeof f->err, "%s", err);
	oauth_done_fn done = f->done;
	f->done = NULL;
	if (done)
		done(f->arg, err ? f->err : NULL);
}

void oauth_flow_failf(struct oauth_flow *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->err, sizeof f->err, fmt, ap);
	va_end(ap);
	oauth_flow_finish(f, f->err);
}

int oauth_fetch(struct oauth_flow *f, const struct fetch_req *rq, fetch_done_fn cb)
{
	char why[200];
	f->fetch = fetch_start(rq, cb, f, why, sizeof why);
	if (f->fetch)
		return 0;
	oauth_flow_failf(f, "cannot fetch %s: %s", rq->url, why);
	return -1;
}

/* --- registration --- */

/* The client authentication for a secret, as the server lists it. */
static const char *secret_method(const struct oauth_flow *f)
{
	return f->meta.basic || !f->meta.post ? "client_secret_basic" : "client_secret_post";
}

/* Dynamic Client Registration answered. */
static void on_registered(void *arg, const struct fetch_res *res)
{
	struct oauth_flow *f = arg;
	f->fetch = NULL;
	if (!res->ok) {
		oauth_flow_failf(f, "client registration at %s failed: %s",
				 f->meta.registration_endpoint, res->error);
		return;
	}
	json_t *j = oauth_json_body(res);
	const char *id = json_string_value(json_object_get(j, "client_id"));
	if ((res->status != 201 && res->status != 200) || !id) {
		char e[100], d[300];
		oauth_excerpt(e, sizeof e, json_string_value(json_object_get(j, "error")));
		oauth_excerpt(d, sizeof d, json_string_value(json_object_get(j, "error_description")));
		oauth_flow_failf(f, "client registration at %s refused (HTTP %ld)%s%s%s%s",
				 f->meta.registration_endpoint, res->status, e[0] ? ": " : "", e,
				 d[0] ? ": " : "", d);
		json_decref(j);
		return;
	}
	const char *secret = json_string_value(json_object_get(j, "client_secret"));
	const char *method = json_string_value(json_object_get(j, "token_endpoint_auth_method"));
	struct oauth_tokens *t = &f->tok;
	t->registered = true;
	int rc = oauth_set(&t->client_id, id) | oauth_set(&t->client_secret, secret) |
		 oauth_set(&t->auth_method, method ? method : secret ? secret_method(f) : "none");
	json_decref(j);
	log_info("oauth: %s: registered as a client of %s", f->name, f->meta.issuer);
	oauth_flow_finish(f, rc ? "out of memory" : NULL);
}

/* Starts Dynamic Client Registration (RFC 7591) of a public native client. */
static int register_dynamic(struct oauth_flow *f)
{
	json_t *m = json_pack("{s:s, s:[s], s:[s,s], s:[s], s:s, s:s}",
			      "client_name", "mcp-chain", "redirect_uris", f->tok.redirect_uri,
			      "grant_types", "authorization_code", "refresh_token",
			      "response_types", "code", "token_endpoint_auth_method", "none",
			      "application_type", "native");
	if (m && f->meta.scope)
		json_object_set_new(m, "scope", json_string(f->meta.scope));
	char *body = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	if (!body) {
		oauth_flow_finish(f, "out of memory");
		return 0;
	}
	static const char *const hdrs[] = { "Accept: application/json", NULL };
	struct fetch_req rq = {
		.url = f->meta.registration_endpoint, .headers = hdrs, .body = body,
		.body_len = strlen(body), .content_type = "application/json",
		.timeout_ms = OAUTH_TIMEOUT_MS, .max_body = OAUTH_FETCH_MAX,
		.allow_http = f->allow_http,
	};
	oauth_fetch(f, &rq, on_registered);
	free(body);
	return 0;
}

int oauth_register(struct oauth_flow *f, const char *redirect_uri,
		   const struct oauth_tokens *stored, oauth_done_fn done, void *arg,
		   char *why, size_t n)
{
	struct oauth_tokens *t = &f->tok;
	if (!f->meta.issuer || !f->meta.token_endpoint) {
		snprintf(why, n, "discovery has not been done");
		return -1;
	}
	f->done = done;
	f->arg = arg;
	if (oauth_set(&t->redirect_uri, redirect_uri) < 0 ||
	    oauth_set(&t->issuer, f->meta.issuer) < 0 ||
	    oauth_set(&t->token_endpoint, f->meta.token_endpoint) < 0 ||
	    oauth_set(&t->url, f->url) < 0 || oauth_set(&t->resource, f->meta.resource) < 0) {
		snprintf(why, n, "out of memory");
		return -1;
	}
	const struct cfg_oauth *o = f->o;
	if (o->client_id) {   /* pre-registered */
		t->registered = false;
		int rc = oauth_set(&t->client_id, o->client_id) |
			 oauth_set(&t->client_secret, o->client_secret) |
			 oauth_set(&t->auth_method, o->client_secret ? secret_method(f) : "none");
		oauth_flow_finish(f, rc ? "out of memory" : NULL);
		return 0;
	}
	if (stored && stored->client_id && stored->issuer &&
	    strcmp(stored->issuer, f->meta.issuer) == 0 &&
	    (!stored->registered || (stored->redirect_uri &&
				     strcmp(stored->redirect_uri, redirect_uri) == 0))) {
		t->registered = stored->registered;
		int rc = oauth_set(&t->client_id, stored->client_id) |
			 oauth_set(&t->client_secret, stored->client_secret) |
			 oauth_set(&t->auth_method, stored->auth_method ? stored->auth_method : "none");
		log_info("oauth: %s: the registration kept for %s is used again", f->name,
			 f->meta.issuer);
		oauth_flow_finish(f, rc ? "out of memory" : NULL);
		return 0;
	}
	if (o->client_metadata_url && f->meta.cimd) {
		t->registered = false;
		int rc = oauth_set(&t->client_id, o->client_metadata_url) |
			 oauth_set(&t->client_secret, NULL) | oauth_set(&t->auth_method, "none");
		oauth_flow_finish(f, rc ? "out of memory" : NULL);
		return 0;
	}
	if (!f->meta.registration_endpoint) {
		snprintf(why, n, "the authorization server %s offers no dynamic client registration%s: "
			 "register mcp-chain there and set \"clientId\" in \"oauth\"", f->meta.issuer,
			 o->client_metadata_url ? " and no client ID metadata documents" : "");
		return -1;
	}
	return register_dynamic(f);
}

/* --- the authorization request --- */

char *oauth_authorize_url(struct oauth_flow *f)
{
	const struct oauth_meta *m = &f->meta;
	if (!m->authorization_endpoint || !f->tok.client_id ||
	    jose_random_token(f->state, sizeof f->state) < 0 ||
	    jose_pkce_pair(f->verifier, f->challenge) < 0)
		return NULL;
	struct buf q = {0};
	form_add(&q, "response_type", "code");
	form_add(&q, "client_id", f->tok.client_id);
	form_add(&q, "redirect_uri", f->tok.redirect_uri);
	form_add(&q, "code_challenge", f->challenge);
	form_add(&q, "code_challenge_method", "S256");
	form_add(&q, "state", f->state);
	form_add(&q, "scope", m->scope);
	form_add(&q, "resource", m->resource);
	char *url = NULL;
	if (buf_append(&q, "", 1) == 0 &&
	    asprintf(&url, "%s%c%s", m->authorization_endpoint,
		     strchr(m->authorization_endpoint, '?') ? '&' : '?', q.data) < 0)
		url = NULL;
	buf_release(&q);
	return url;
}

/* Decodes the form-urlencoded S (N bytes) into a new string. */
static char *form_decode(const char *s, size_t n)
{
	char *o = malloc(n + 1), *q = o;
	for (size_t i = 0; o && i < n; i++) {
		if (s[i] == '+') {
			*q++ = ' ';
		} else if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
			   isxdigit((unsigned char)s[i + 2])) {
			char h[3] = { s[i + 1], s[i + 2], 0 };
			*q++ = (char)strtol(h, NULL, 16);
			i += 2;
		} else {
			*q++ = s[i];
		}
	}
	if (o)
		*q = 0;
	return o;
}

/* The value of KEY in the query Q (new string), or NULL. */
static char *query_get(const char *q, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		size_t len = strcspn(p, "&");
		if (len > kl && strncmp(p, key, kl) == 0 && p[kl] == '=')
			return form_decode(p + kl + 1, len - kl - 1);
	}
	return NULL;
}

char *oauth_redirect_check(struct oauth_flow *f, const char *query, char *why, size_t n)
{
	char *state = query_get(query, "state"), *iss = query_get(query, "iss");
	char *error = query_get(query, "error"), *code = NULL;
	if (!f->state[0] || !state || strcmp(state, f->state) != 0) {
		snprintf(why, n, "the redirect's state %s: refused (a forged or stale redirect?)",
			 state ? "does not match the request's" : "is missing");
	} else if (iss && strcmp(iss, f->meta.issuer) != 0) {
		char e[200];
		oauth_excerpt(e, sizeof e, iss);
		snprintf(why, n, "the redirect's iss \"%s\" is not the issuer \"%s\" (RFC 9207: a "
			 "mix-up attack?)", e, f->meta.issuer);
	} else if (!iss && f->meta.iss_param) {
		snprintf(why, n, "the redirect has no iss, which %s says it sends (RFC 9207)",
			 f->meta.issuer);
	} else if (error) {
		char e[100], d[300];
		char *desc = query_get(query, "error_description");
		oauth_excerpt(e, sizeof e, error);
		oauth_excerpt(d, sizeof d, desc);
		free(desc);
		snprintf(why, n, "the authorization server refused: %s%s%s", e, d[0] ? ": " : "", d);
	} else if (!(code = query_get(query, "code")) || !*code) {
		free(code);
		code = NULL;
		snprintf(why, n, "the redirect carries no code");
	}
	free(state);
	free(iss);
	free(error);
	return code;
}

/* --- the token endpoint --- */

struct oauth_refresh {
	struct fetch *fetch;
	struct oauth_tokens *t;
	oauth_done_fn done;
	void *arg;
	char err[600];
};

/* "Authorization: Basic ..." for T's client (RFC 6749 2.3.1: each part
 * form-urlencoded first). New string, or NULL. */
static char *basic_header(const struct oauth_tokens *t)
{
	struct buf id = {0}, sec = {0};
	form_add(&id, "x", t->client_id);
	form_add(&sec, "x", t->client_secret ? t->client_secret : "");
	char *pair = NULL, *line = NULL;
	if (buf_append(&id, "", 1) == 0 && buf_append(&sec, "", 1) == 0 &&
	    asprintf(&pair, "%s:%s", id.data + 2, sec.data + 2) >= 0) {
		size_t pl = strlen(pair);
		unsigned char *enc = malloc(4 * ((pl + 2) / 3) + 1);
		if (enc) {
			EVP_EncodeBlock(enc, (const unsigned char *)pair, (int)pl);
			if (asprintf(&line, "Authorization: Basic %s", enc) < 0)
				line = NULL;
			OPENSSL_cleanse(enc, strlen((char *)enc));
			free(enc);
		}
		OPENSSL_cleanse(pair, pl);
		free(pair);
	}
	buf_release(&id);
	buf_release(&sec);
	return line;
}

/*
 * POSTs FORM (taken; the client's authentication is added) to T's token
 * endpoint; the answer goes to CB with ARG. Returns the fetch, or NULL
 * with WHY.
 */
static struct fetch *token_post(const struct oauth_tokens *t, struct buf *form, bool allow_http,
				fetch_done_fn cb, void *arg, char *why, size_t n)
{
	const char *method = t->auth_method ? t->auth_method : "none";
	char *basic = NULL;
	if (strcmp(method, "client_secret_basic") == 0) {
		basic = basic_header(t);
	} else {
		form_add(form, "client_id", t->client_id);
		if (strcmp(method, "client_secret_post") == 0)
			form_add(form, "client_secret", t->client_secret);
	}
	const char *hdrs[] = { "Accept: application/json", basic, NULL };
	struct fetch_req rq = {
		.url = t->token_endpoint, .headers = hdrs, .body = form->data ? form->data : "",
		.body_len = form->len, .timeout_ms = OAUTH_TIMEOUT_MS, .max_body = OAUTH_FETCH_MAX,
		.allow_http = allow_http,
	};
	struct fetch *fx = NULL;
	if (strcmp(method, "client_secret_basic") == 0 && !basic)
		snprintf(why, n, "out of memory");
	else
		fx = fetch_start(&rq, cb, arg, why, n);
	if (basic) {
		OPENSSL_cleanse(basic, strlen(basic));
		free(basic);
	}
	if (form->data)
		OPENSSL_cleanse(form->data, form->len);
	buf_release(form);
	return fx;
}

/*
 * Reads a token endpoint's answer RES into T; 0, or -1 with the error in
 * ERR (never holding a token).
 */
static int take_tokens(struct oauth_tokens *t, const struct fetch_res *res, const char *what,
		       char *err, size_t n)
{
	if (!res->ok) {
		snprintf(err, n, "%s at %s failed: %s", what, t->token_endpoint, res->error);
		return -1;
	}
	json_t *j = oauth_json_body(res);
	const char *at = json_string_value(json_object_get(j, "access_token"));
	const char *type = json_string_value(json_object_get(j, "token_type"));
	if (res->status != 200 || !at) {
		char e[100], d[300];
		oauth_excerpt(e, sizeof e, json_string_value(json_object_get(j, "error")));
		oauth_excerpt(d, sizeof d, json_string_value(json_object_get(j, "error_description")));
		snprintf(err, n, "%s refused by %s (HTTP %ld): %s%s%s", what, t->token_endpoint,
			 res->status, e[0] ? e : "no access token in the answer", d[0] ? ": " : "", d);
		json_decref(j);
		return -1;
	}
	if (!type || strcasecmp(type, "Bearer") != 0) {
		char e[60];
		oauth_excerpt(e, sizeof e, type ? type : "(none)");
		snprintf(err, n, "%s at %s: token_type \"%s\" is not Bearer", what, t->token_endpoint, e);
		json_decref(j);
		return -1;
	}
	json_t *exp = json_object_get(j, "expires_in");
	const char *rt = json_string_value(json_object_get(j, "refresh_token"));
	const char *scope = json_string_value(json_object_get(j, "scope"));
	int rc = oauth_set(&t->access_token, at) | (rt ? oauth_set(&t->refresh_token, rt) : 0) |
		 (scope ? oauth_set(&t->scope, scope) : 0);
	t->expires_at = json_is_number(exp) && json_number_value(exp) > 0 ?
			(double)time(NULL) + json_number_value(exp) : 0;
	json_decref(j);
	if (rc)
		snprintf(err, n, "out of memory");
	return rc ? -1 : 0;
}

/* The code exchange answered. */
static void on_exchanged(void *arg, const struct fetch_res *res)
{
	struct oauth_flow *f = arg;
	f->fetch = NULL;
	OPENSSL_cleanse(f->verifier, sizeof f->verifier);
	if (take_tokens(&f->tok, res, "the code exchange", f->err, sizeof f->err) < 0) {
		oauth_flow_finish(f, f->err);
		return;
	}
	if (!f->tok.scope)
		oauth_set(&f->tok.scope, f->meta.scope);
	oauth_flow_finish(f, NULL);
}

int oauth_exchange(struct oauth_flow *f, const char *code, oauth_done_fn done, void *arg,
		   char *why, size_t n)
{
	if (!f->verifier[0] || !f->tok.client_id) {
		snprintf(why, n, "no authorization request was made");
		return -1;
	}
	struct buf form = {0};
	form_add(&form, "grant_type", "authorization_code");
	form_add(&form, "code", code);
	form_add(&form, "redirect_uri", f->tok.redirect_uri);
	form_add(&form, "code_verifier", f->verifier);
	form_add(&form, "resource", f->meta.resource);
	f->done = done;
	f->arg = arg;
	f->fetch = token_post(&f->tok, &form, f->allow_http, on_exchanged, f, why, n);
	return f->fetch ? 0 : -1;
}

/* A refresh answered. */
static void on_refreshed(void *arg, const struct fetch_res *res)
{
	struct oauth_refresh *r = arg;
	int rc = take_tokens(r->t, res, "the token refresh", r->err, sizeof r->err);
	r->done(r->arg, rc < 0 ? r->err : NULL);
	free(r);
}

struct oauth_refresh *oauth_refresh_start(struct oauth_tokens *t, bool allow_http,
					  oauth_done_fn done, void *arg, char *why, size_t n)
{
	if (!t->refresh_token || !t->token_endpoint || !t->client_id) {
		snprintf(why, n, "no refresh token");
		return NULL;
	}
	struct oauth_refresh *r = calloc(1, sizeof *r);
	if (!r) {
		snprintf(why, n, "out of memory");
		return NULL;
	}
	r->t = t;
	r->done = done;
	r->arg = arg;
	struct buf form = {0};
	form_add(&form, "grant_type", "refresh_token");
	form_add(&form, "refresh_token", t->refresh_token);
	form_add(&form, "resource", t->resource);
	r->fetch = token_post(t, &form, allow_http, on_refreshed, r, why, n);
	if (!r->fetch) {
		free(r);
		return NULL;
	}
	return r;
}

void oauth_refresh_cancel(struct oauth_refresh *r)
{
	if (!r)
		return;
	fetch_cancel(r->fetch);
	free(r);
}
