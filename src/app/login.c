/*
 * login.c - a perPrincipal upstream's sign-in through the HTTP front
 * (docs/oauth-upstreams.md, "One set of tokens per principal").
 *
 * A perPrincipal HTTP upstream without its principal's tokens answers
 * -32042 (URL elicitation required) with a link this file makes:
 * {publicUrl}/oauth/login?t=SEALED, SEALED holding the upstream, the
 * principal (the front's subject) and an expiry, sealed with tokenStore's
 * key (seal.h), so the link is the browser's only credential and cannot
 * be made or changed elsewhere. The routes, on the front
 * (http_front_set_routes):
 *
 *   GET /oauth/login?t=      discovery and registration (the OAuth client of
 *                            oauth_client.h, on the loop), then 302 to the
 *                            authorization endpoint; {state -> upstream,
 *                            principal, the flow and its PKCE verifier} kept
 *                            10 minutes
 *   GET /oauth/callback      state (used once), iss, the code exchanged, the
 *                            tokens sealed into the store for that principal,
 *                            and its live backends for that upstream told
 *                            (backend_credentials_changed)
 *   GET /oauth/logout?upstream=NAME   with the principal's bearer token:
 *                            its tokens for NAME removed, its backends told
 */
#include "app.h"
#include "http_front.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "backend.h"
#include "log.h"
#include "oauth_client.h"
#include "seal.h"

#define LOGIN_TTL 600.0              /* seconds a link and a login's state last */
#define LINK_AAD "mcp-chain login link"

/* One login under way, from /oauth/login to its callback. */
struct pending {
	struct app_login *l;
	char *name;                  /* the upstream */
	unsigned char subject[32];   /* the principal */
	struct oauth_flow *flow;
	char *state;                 /* the authorization request's, once sent */
	struct http_route *q;        /* the request waiting for a step, or NULL */
	double until;                /* ev_now after which it is dropped */
	bool dead;                   /* to free at the next sweep */
	struct pending *next;
};

/* A registration kept per upstream (used again by the next login). */
struct reg {
	char *name;
	struct oauth_tokens t;
	struct reg *next;
};

struct app_login {
	struct app *a;
	char *base;                  /* publicUrl, without a trailing "/" */
	char *redirect;              /* base + /oauth/callback */
	struct pending *pending;
	struct reg *regs;
	ev_timer sweep;
};

/* The entry NAME of A's configuration when it keeps tokens per principal. */
static const struct cfg_server *pp_entry(struct app *a, const char *name)
{
	for (size_t i = 0; name && i < a->cfg->nservers; i++) {
		const struct cfg_server *s = &a->cfg->servers[i];
		if (s->enabled && s->oauth && s->oauth->per_principal && strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

/* SUBJECT in hex into OUT (65 bytes). */
static void hex32(const unsigned char *subject, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", subject[i]);
}

/* ---- the link ---- */

/* oauth_login_link_fn: {publicUrl}/oauth/login?t=SEALED. */
static char *make_link(void *arg, const char *name, const unsigned char subject[32])
{
	struct app_login *l = arg;
	const struct cfg *c = l->a->cfg;
	char shex[65], *url = NULL;
	hex32(subject, shex);
	json_t *j = json_pack("{s:s,s:s,s:I}", "u", name, "s", shex, "e",
			      (json_int_t)(time(NULL) + (time_t)LOGIN_TTL));
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	char *t = text && c->has_token_key ?
		  seal_text(c->token_key, LINK_AAD, strlen(LINK_AAD), text, strlen(text)) : NULL;
	free(text);
	if (t && asprintf(&url, "%s/oauth/login?t=%s", l->base, t) < 0)
		url = NULL;
	free(t);
	return url;
}

/* Opens link text T: the upstream's name (new string) and the subject,
 * or NULL with WHY when forged, altered or expired. */
static char *open_link(struct app_login *l, const char *t, unsigned char subject[32],
		       const char **why)
{
	const struct cfg *c = l->a->cfg;
	unsigned char *plain = NULL;
	size_t n = 0;
	*why = "the sign-in link is not valid (altered, or made by another mcp-chain)";
	if (!t || !c->has_token_key ||
	    unseal_text(c->token_key, LINK_AAD, strlen(LINK_AAD), t, &plain, &n) < 0)
		return NULL;
	json_t *j = json_loadb((const char *)plain, n, 0, NULL);
	free(plain);
	const char *name = json_string_value(json_object_get(j, "u"));
	const char *shex = json_string_value(json_object_get(j, "s"));
	json_int_t e = json_integer_value(json_object_get(j, "e"));
	char *out = NULL;
	if (!name || !shex || strlen(shex) != 64) {
		json_decref(j);
		return NULL;
	}
	for (int i = 0; i < 32; i++) {
		unsigned v;
		if (sscanf(shex + 2 * i, "%2x", &v) != 1) {
			json_decref(j);
			return NULL;
		}
		subject[i] = (unsigned char)v;
	}
	if (e < (json_int_t)time(NULL))
		*why = "the sign-in link expired: call the tool again for a new one";
	else
		out = strdup(name);
	json_decref(j);
	return out;
}

/* ---- pages ---- */

/* Appends TEXT to B with HTML's special characters escaped. */
static void html_text(char *b, size_t n, const char *text)
{
	size_t len = strlen(b);
	for (; *text && len + 7 < n; text++) {
		const char *e = *text == '<' ? "&lt;" : *text == '>' ? "&gt;" : *text == '&' ? "&amp;" :
				*text == '"' ? "&quot;" : NULL;
		if (e) {
			memcpy(b + len, e, strlen(e));
			len += strlen(e);
		} else {
			b[len++] = *text;
		}
	}
	b[len] = '\0';
}

/* Answers Q with a small HTML page: TITLE, then TEXT. */
static int page(struct http_route *q, unsigned status, const char *title, const char *text)
{
	char b[2048] = "<!doctype html><meta charset=\"utf-8\"><title>mcp-chain</title><h1>";
	html_text(b, sizeof b, title);
	size_t len = strlen(b);
	snprintf(b + len, sizeof b - len, "</h1><p>");
	html_text(b, sizeof b, text);
	len = strlen(b);
	snprintf(b + len, sizeof b - len, "</p>\n");
	return http_route_reply(q, status, "text/html; charset=utf-8", b, strlen(b),
				"Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n");
}

/* ---- logins under way ---- */

/* P is over: its request (if one waits) answered already; freed later. */
static void pending_end(struct pending *p)
{
	if (p->q)
		http_route_release(p->q);
	p->q = NULL;
	p->dead = true;
	ev_timer_stop(EV_DEFAULT, &p->l->sweep);
	ev_timer_set(&p->l->sweep, 0., 60.);
	ev_timer_start(EV_DEFAULT, &p->l->sweep);
}

/* Frees the logins that ended or expired (not from inside their flows). */
static void on_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct app_login *l = w->data;
	double now = ev_now(loop);
	(void)revents;
	for (struct pending **pp = &l->pending; *pp;) {
		struct pending *p = *pp;
		if (!p->dead && p->until > now) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (p->q) {
			page(p->q, 504, "Sign-in timed out", "Call the tool again for a new link.");
			http_route_release(p->q);
		}
		oauth_flow_free(p->flow);
		free(p->name);
		free(p->state);
		OPENSSL_cleanse(p->subject, sizeof p->subject);
		free(p);
	}
	ev_timer_set(w, 60., 60.);
	ev_timer_again(loop, w);
	if (!l->pending)
		ev_timer_stop(loop, w);
}

/* The registration kept for upstream NAME, or NULL. */
static struct reg *reg_for(struct app_login *l, const char *name)
{
	for (struct reg *r = l->regs; r; r = r->next)
		if (strcmp(r->name, name) == 0)
			return r;
	return NULL;
}

/* Keeps P's registration for the next login to the same upstream. */
static void reg_keep(struct app_login *l, struct pending *p)
{
	struct reg *r = reg_for(l, p->name);
	if (!r) {
		r = calloc(1, sizeof *r);
		if (!r || !(r->name = strdup(p->name))) {
			free(r);
			return;
		}
		r->next = l->regs;
		l->regs = r;
	}
	oauth_tokens_copy_client(&r->t, oauth_flow_tokens(p->flow));
}

/* The "state" parameter of authorization URL U (new string), or NULL. */
static char *state_of(const char *u)
{
	const char *q = strchr(u, '?');
	while (q) {
		q++;
		if (strncmp(q, "state=", 6) == 0) {
			size_t n = strcspn(q + 6, "&#");
			return strndup(q + 6, n);
		}
		q = strchr(q, '&');
	}
	return NULL;
}

/* Registration done: the browser goes to the authorization endpoint. */
static void on_registered(void *arg, const char *err)
{
	struct pending *p = arg;
	if (err) {
		log_warn("oauth: sign-in to %s: %s", p->name, err);
		page(p->q, 502, "Sign-in failed", err);
		pending_end(p);
		return;
	}
	reg_keep(p->l, p);
	char *u = oauth_authorize_url(p->flow), *loc = NULL;
	p->state = u ? state_of(u) : NULL;
	if (!p->state || asprintf(&loc, "Location: %s\r\n", u) < 0) {
		loc = NULL;
		page(p->q, 500, "Sign-in failed", "out of memory");
		free(u);
		pending_end(p);
		return;
	}
	log_info("oauth: sign-in to %s: to the authorization endpoint", p->name);
	http_route_reply(p->q, 302, "text/plain", "", 0, loc);
	free(loc);
	free(u);
	http_route_release(p->q);
	p->q = NULL;
	p->until = ev_now(EV_DEFAULT) + LOGIN_TTL;
}

/* Discovery done: register (or use the registration kept). */
static void on_discovered(void *arg, const char *err)
{
	struct pending *p = arg;
	char why[600];
	if (err) {
		log_warn("oauth: sign-in to %s: %s", p->name, err);
		page(p->q, 502, "Sign-in failed", err);
		pending_end(p);
		return;
	}
	struct reg *r = reg_for(p->l, p->name);
	if (oauth_register(p->flow, p->l->redirect, r ? &r->t : NULL, on_registered, p, why,
			   sizeof why) < 0)
		on_registered(p, why);
}

/* GET /oauth/login?t=SEALED */
static int route_login(struct app_login *l, struct http_route *q)
{
	unsigned char subject[32];
	const char *why;
	char err[600];
	char *name = open_link(l, http_route_query(q, "t"), subject, &why);
	const struct cfg_server *s = name ? pp_entry(l->a, name) : NULL;
	if (!s) {
		free(name);
		return page(q, 400, "Cannot sign in", name ? "no such upstream" : why);
	}
	struct pending *p = calloc(1, sizeof *p);
	if (!p || !(p->flow = oauth_flow_new(s->name, s->url, s->oauth, false))) {
		free(p);
		free(name);
		return page(q, 500, "Cannot sign in", "out of memory");
	}
	p->l = l;
	p->name = name;
	memcpy(p->subject, subject, 32);
	p->until = ev_now(EV_DEFAULT) + LOGIN_TTL;
	p->q = q;
	http_route_hold(q);
	p->next = l->pending;
	l->pending = p;
	if (!ev_is_active(&l->sweep)) {
		ev_timer_set(&l->sweep, 60., 60.);
		ev_timer_start(EV_DEFAULT, &l->sweep);
	}
	if (oauth_discover(p->flow, NULL, on_discovered, p, err, sizeof err) < 0)
		on_discovered(p, err);
	return 0;
}

/* Tells SUBJECT's live backends for upstream NAME that its tokens changed. */
static void tell_backends(struct app *a, const char *name, const unsigned char *subject)
{
	for (struct schain *sc = a->schains; sc; sc = sc->next) {
		if (sc->released)
			continue;
		for (size_t i = 0; i < sc->nbackends; i++) {
			struct backend *b = sc->backends[i];
			const unsigned char *who = backend_principal(b);
			if (who && CRYPTO_memcmp(who, subject, 32) == 0 &&
			    strcmp(backend_cfg(b)->name, name) == 0)
				backend_credentials_changed(b);
		}
	}
}

/* The code was exchanged: the tokens are kept for the principal. */
static void on_exchanged(void *arg, const char *err)
{
	struct pending *p = arg;
	const struct cfg *c = p->l->a->cfg;
	char why[600], text[300];
	if (!err && !c->has_token_key)
		err = "no tokenStore key";
	if (!err && oauth_store_save_for(p->name, p->subject, c->token_key,
					 oauth_flow_tokens(p->flow), why, sizeof why) < 0)
		err = why;
	if (err) {
		log_warn("oauth: sign-in to %s: %s", p->name, err);
		page(p->q, 502, "Sign-in failed", err);
		pending_end(p);
		return;
	}
	log_info("oauth: signed in to %s for a principal", p->name);
	snprintf(text, sizeof text, "You can close this page and return to your client: its "
		 "next call to %s goes through.", p->name);
	char title[200];
	snprintf(title, sizeof title, "Signed in to %s", p->name);
	page(p->q, 200, title, text);
	tell_backends(p->l->a, p->name, p->subject);
	pending_end(p);
}

/* Appends "&KEY=VALUE" (VALUE percent-encoded) to OUT (N bytes). */
static void query_add(char *out, size_t n, const char *key, const char *v)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(out);
	if (!v)
		return;
	len += (size_t)snprintf(out + len, n > len ? n - len : 0, "%s%s=", len ? "&" : "", key);
	for (const unsigned char *p = (const unsigned char *)v; *p && len + 4 < n; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
			out[len++] = (char)*p;
		} else {
			out[len++] = '%';
			out[len++] = hex[*p >> 4];
			out[len++] = hex[*p & 15];
		}
	}
	out[len] = '\0';
}

/* GET /oauth/callback?code&state&iss */
static int route_callback(struct app_login *l, struct http_route *q)
{
	static const char *const keys[] = { "code", "state", "iss", "error",
					    "error_description", NULL };
	char query[8192] = "", why[600];
	const char *state = http_route_query(q, "state");
	struct pending **pp = &l->pending, *p = NULL;
	double now = ev_now(EV_DEFAULT);
	for (; state && *pp; pp = &(*pp)->next) {
		if (!(*pp)->dead && (*pp)->state && !(*pp)->q && (*pp)->until > now &&
		    strcmp((*pp)->state, state) == 0) {
			p = *pp;
			break;
		}
	}
	if (!p)
		return page(q, 400, "Cannot sign in", "unknown, expired or already used sign-in "
			    "state: call the tool again for a new link");
	free(p->state);   /* used once, whatever follows */
	p->state = NULL;
	for (int i = 0; keys[i]; i++)
		query_add(query, sizeof query, keys[i], http_route_query(q, keys[i]));
	char *code = oauth_redirect_check(p->flow, query, why, sizeof why);
	if (!code) {
		log_warn("oauth: sign-in to %s: %s", p->name, why);
		page(q, 400, "Sign-in failed", why);
		pending_end(p);
		return 0;
	}
	p->q = q;
	http_route_hold(q);
	int rc = oauth_exchange(p->flow, code, on_exchanged, p, why, sizeof why);
	OPENSSL_cleanse(code, strlen(code));
	free(code);
	if (rc < 0)
		on_exchanged(p, why);
	return 0;
}

/* GET /oauth/logout?upstream=NAME, with the principal's bearer token. */
static int route_logout(struct app_login *l, struct http_route *q)
{
	const unsigned char *who = http_route_subject(q);
	const char *name = http_route_query(q, "upstream");
	char why[400], text[300];
	if (!who)
		return http_route_reply(q, 401, "text/plain", "a bearer token is required\n", 27,
					"WWW-Authenticate: Bearer realm=\"mcp-chain\"\r\n");
	if (!pp_entry(l->a, name))
		return page(q, 400, "Cannot sign out", "no perPrincipal upstream of that name");
	char *n = strdup(name);
	int removed = n ? oauth_store_remove_for(n, who, why, sizeof why) : -1;
	if (removed < 0) {
		free(n);
		return page(q, 500, "Cannot sign out", n ? why : "out of memory");
	}
	log_info("oauth: a principal signed out of %s", n);
	tell_backends(l->a, n, who);
	snprintf(text, sizeof text, "Signed out of %s (%d token file%s removed).", n, removed,
		 removed == 1 ? "" : "s");
	free(n);
	return page(q, 200, "Signed out", text);
}

/* http_route_fn: the /oauth/ routes. */
static int on_route(void *arg, struct http_route *q)
{
	struct app_login *l = arg;
	const char *path = http_route_path(q);
	if (strcmp(path, "/oauth/login") == 0)
		return route_login(l, q);
	if (strcmp(path, "/oauth/callback") == 0)
		return route_callback(l, q);
	if (strcmp(path, "/oauth/logout") == 0)
		return route_logout(l, q);
	return http_route_reply(q, 404, "text/plain", "not found\n", 10, NULL);
}

int app_login_start(struct app *a)
{
	const struct cfg *c = a->cfg;
	if (!cfg_has_per_principal(c))
		return 0;
	struct app_login *l = calloc(1, sizeof *l);
	if (!l)
		return -1;
	l->a = a;
	int rc;
	if (c->listen.public_url)
		rc = asprintf(&l->base, "%s", c->listen.public_url);
	else if (strchr(c->listen.address, ':'))
		rc = asprintf(&l->base, "http://[%s]:%u", c->listen.address, http_front_port(a->http));
	else
		rc = asprintf(&l->base, "http://%s:%u", c->listen.address, http_front_port(a->http));
	if (rc < 0 || asprintf(&l->redirect, "%s/oauth/callback", l->base) < 0) {
		free(l);
		return -1;
	}
	ev_init(&l->sweep, on_sweep);
	l->sweep.data = l;
	a->login = l;
	http_front_set_routes(a->http, "/oauth/", on_route, l);
	oauth_set_login_link(make_link, l);
	log_info("oauth: per-principal sign-in at %s/oauth/login (redirect %s)", l->base,
		 l->redirect);
	return 0;
}

void app_login_free(struct app *a)
{
	struct app_login *l = a->login;
	if (!l)
		return;
	oauth_set_login_link(NULL, NULL);
	if (a->http)
		http_front_set_routes(a->http, NULL, NULL, NULL);
	ev_timer_stop(EV_DEFAULT, &l->sweep);
	while (l->pending) {
		struct pending *p = l->pending;
		l->pending = p->next;
		if (p->q)
			http_route_release(p->q);
		oauth_flow_free(p->flow);
		free(p->name);
		free(p->state);
		free(p);
	}
	while (l->regs) {
		struct reg *r = l->regs;
		l->regs = r->next;
		oauth_tokens_release(&r->t);
		free(r->name);
		free(r);
	}
	free(l->base);
	free(l->redirect);
	free(l);
	a->login = NULL;
}
