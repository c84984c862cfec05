/*
 * auth_oauth.c - the auth module's "oauth" options: the HTTP front as an
 * OAuth 2.1 resource server (MCP authorization, RFC 9068, RFC 9728).
 *
 * A bearer token that is no configured static token is an access token:
 * - a JWT is verified against its issuer's keys (jose.c: an allow-list of
 *   asymmetric algorithms, never "none" or HS*), then its claims: "iss"
 *   one of the configured issuers, "aud" the endpoint's canonical URL (or
 *   the configured audience), "exp", "nbf", "iat" with a small leeway;
 * - an opaque token is asked of the introspection endpoint (RFC 7662),
 *   when one is configured.
 * The scopes ("scope", "scp") and the configured role claims become the
 * principal's roles; the principal is the configured claim ("sub").
 * Required scopes (for every request, and per method or tool) make a
 * valid token without them a 403 insufficient_scope.
 *
 * Keys: each issuer's JWKS comes from a file, a URI, or the issuer's
 * metadata (RFC 8414, then OpenID Connect discovery; its "issuer" must
 * match exactly). Fetched on the loop (fetch.c), refreshed as its
 * Cache-Control says (between 5 minutes and a day; an hour without), and
 * again when a token names an unknown kid, at most once per
 * "refetchInterval". The last good keys stay in use while the issuer is
 * out of reach; with none yet, a token cannot be checked (503).
 *
 * Results are cached by the token's SHA-256 (never the token): a valid
 * token until it expires, a refused one for a minute, so a session's
 * requests cost a hash and a lookup. The cache is bounded ("cacheSize");
 * when full, expired answers go, else one settled answer (its token is
 * checked again when next presented).
 */
#include "auth_int.h"

#include <ev.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "fetch.h"
#include "glob_match.h"
#include "hmap.h"
#include "jose.h"
#include "log.h"

#define LEEWAY_DEFAULT      60
#define REFETCH_DEFAULT     30.0     /* seconds between unknown-kid refetches */
#define RETRY_AFTER_FAIL    30.0
#define KEYS_TTL_DEFAULT    3600.0
#define KEYS_TTL_MIN        300.0
#define KEYS_TTL_MAX        86400.0
#define BAD_TTL             60.0     /* a refused token's answer is kept this long */
#define INTROSPECT_TTL_MAX  300.0
#define CACHE_DEFAULT       10000
#define FETCH_TIMEOUT_MS    5000L
#define TOKEN_MAX           JOSE_MAX_TOKEN

struct oauth;

/* One trusted issuer and its keys. */
struct issuer {
	struct oauth *o;
	char *id;                 /* the exact "iss" */
	char *jwks_uri;           /* configured or discovered; owned */
	char *jwks_file;          /* owned, or NULL */
	bool discover;            /* jwks_uri from the issuer's metadata */
	struct jose_keys *keys;   /* the last good set, or NULL */
	struct fetch *inflight;   /* metadata or keys being fetched */
	int meta_try;             /* which metadata URL is being tried */
	double last_try;          /* loop time the last fetch started */
	bool failed;              /* the last fetch failed (keys may still be old) */
	char error[200];          /* why, for the log and a 503 */
	ev_timer refresh;
	struct mw_cred_wait *waits;  /* checks waiting for this fetch */
};

/* One required-scope rule: requests whose method and tool match need SCOPES. */
struct need {
	struct glob_list methods, tools;
	json_t *scopes;           /* owned: array of strings */
};

/* A token's cached answer. */
enum tok_state { TOK_PENDING, TOK_OK, TOK_BAD };

struct tok {
	struct oauth *o;
	unsigned char key[32];    /* SHA-256 of the token */
	enum tok_state state;
	double until;             /* wall time the answer holds until */
	const struct oauth_who *who;
	json_t *scopes;           /* owned: the token's scopes */
	json_t *aud;              /* owned: its "aud" (string or array), or NULL */
	unsigned char subject[32];
	char why[160];
	bool unavailable;         /* TOK_BAD because nothing could check it */
	struct fetch *introspect; /* TOK_PENDING: the introspection under way */
	struct mw_cred_wait *waits;
};

struct oauth {
	struct issuer *iss;
	size_t niss;
	const char **iss_ids;     /* NULL-terminated view of the ids (jose_expect) */
	json_t *audience;         /* owned: accepted "aud" values (array), or NULL */
	char *resource;           /* owned: the canonical URL, or NULL (the request's) */
	unsigned algs;
	long leeway;
	double refetch;
	char *principal_claim;    /* owned */
	json_t *role_claims;      /* owned: array of dotted claim paths */
	json_t *scopes;           /* owned: required of every request */
	json_t *scopes_supported; /* owned: for the metadata, or NULL */
	struct need *needs;
	size_t nneeds;
	char *introspect_url;     /* owned, or NULL */
	char *introspect_auth;    /* owned: "Authorization: Basic ..." */
	size_t cache_max;
	struct hmap toks;         /* SHA-256 -> struct tok */
	struct hmap whos;         /* principal + roles -> struct oauth_who */
	bool started;
};

/* ---- small things ---- */

static void sha256(const void *p, size_t n, unsigned char out[32])
{
	unsigned len = 0;
	if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

static double now_wall(void)
{
	return (double)time(NULL);
}

/* True when the array of strings A holds S. */
static bool has_string(const json_t *a, const char *s)
{
	size_t i;
	json_t *e;
	json_array_foreach(a, i, e)
		if (json_is_string(e) && strcmp(json_string_value(e), s) == 0)
			return true;
	return false;
}

/* True when the space-separated list S holds the word W. */
static bool has_word(const char *s, const char *w)
{
	size_t wl = strlen(w);
	while (*s) {
		size_t n = strcspn(s, " ");
		if (n == wl && strncmp(s, w, wl) == 0)
			return true;
		s += n + (s[n] == ' ');
	}
	return false;
}

/* Appends to OUT (N bytes) each string of NEED not there yet (a challenge
 * names every scope the request needs); true when HAVE lacks one. */
static bool missing_scopes(const json_t *need, const json_t *have, char *out, size_t n)
{
	size_t i;
	json_t *e;
	bool lack = false;
	json_array_foreach(need, i, e) {
		const char *s = json_string_value(e);
		if (!has_string(have, s)) {
			lack = true;
		}
		size_t len = strlen(out);
		if (!has_word(out, s) && len + strlen(s) + 2 < n)
			snprintf(out + len, n - len, "%s%s", len ? " " : "", s);
	}
	return lack;
}

/* ---- issuers' keys ---- */

static void issuer_fetch(struct issuer *is);

/* The metadata URL number I of issuer ID (RFC 8414 section 3.1, then OpenID
 * Connect discovery), or false when there is none. */
static bool meta_url(const char *id, int i, char *out, size_t n)
{
	const char *scheme_end = strstr(id, "://");
	if (!scheme_end)
		return false;
	const char *path = strchr(scheme_end + 3, '/');
	int host_len = path ? (int)(path - id) : (int)strlen(id);
	const char *p = path && strcmp(path, "/") != 0 ? path : "";
	size_t plen = strlen(p);
	while (plen > 0 && p[plen - 1] == '/')
		plen--;
	switch (i) {
	case 0:   /* RFC 8414: the well-known part inserted before the path */
		snprintf(out, n, "%.*s/.well-known/oauth-authorization-server%.*s", host_len, id,
			 (int)plen, p);
		return true;
	case 1:   /* OpenID Connect discovery: appended to the issuer */
		snprintf(out, n, "%.*s%.*s/.well-known/openid-configuration", host_len, id,
			 (int)plen, p);
		return true;
	case 2:   /* RFC 8414's form for OpenID Connect, when the issuer has a path */
		if (!plen)
			return false;
		snprintf(out, n, "%.*s/.well-known/openid-configuration%.*s", host_len, id,
			 (int)plen, p);
		return true;
	}
	return false;
}

/* The fetch of IS ended (well or not): wakes the checks that waited. */
static void issuer_settled(struct issuer *is, double next)
{
	is->inflight = NULL;
	ev_timer_stop(EV_DEFAULT, &is->refresh);
	ev_timer_set(&is->refresh, next, 0.);
	ev_timer_start(EV_DEFAULT, &is->refresh);
	mw_cred_wait_wake(&is->waits);
}

/* The fetch of IS failed for WHY: the old keys stay; tried again later. */
static void issuer_failed(struct issuer *is, const char *what, const char *why)
{
	is->failed = true;
	snprintf(is->error, sizeof is->error, "%s: %s", what, why);
	log_warn("auth: issuer %s: %s%s", is->id, is->error,
		 is->keys ? " (its last keys stay in use)" : "");
	issuer_settled(is, RETRY_AFTER_FAIL);
}

/* The keys came. */
static void on_jwks(void *arg, const struct fetch_res *res)
{
	struct issuer *is = arg;
	char why[200];
	if (!res->ok)
		return issuer_failed(is, "keys", res->error);
	if (res->status != 200) {
		snprintf(why, sizeof why, "HTTP %ld", res->status);
		return issuer_failed(is, "keys", why);
	}
	json_t *j = json_loadb(res->body, res->body_len, JSON_REJECT_DUPLICATES, NULL);
	struct jose_keys *k = j ? jose_keys_parse(j, why, sizeof why) : NULL;
	json_decref(j);
	if (!k)
		return issuer_failed(is, "keys", j ? why : "the answer is not JSON");
	jose_keys_free(is->keys);
	is->keys = k;
	is->failed = false;
	is->error[0] = '\0';
	double ttl = res->max_age < 0 ? KEYS_TTL_DEFAULT : (double)res->max_age;
	ttl = ttl < KEYS_TTL_MIN ? KEYS_TTL_MIN : ttl > KEYS_TTL_MAX ? KEYS_TTL_MAX : ttl;
	log_info("auth: issuer %s: %zu key(s)%s%s", is->id, jose_keys_count(k), why[0] ? "; " : "",
		 why);
	issuer_settled(is, ttl);
}

/* Starts fetching URL for IS; false when it could not start. */
static bool issuer_get(struct issuer *is, const char *url, fetch_done_fn done, const char *what)
{
	char why[200];
	const char *hdrs[] = { "Accept: application/json", NULL };
	struct fetch_req rq = { .url = url, .headers = hdrs, .timeout_ms = FETCH_TIMEOUT_MS };
	is->inflight = fetch_start(&rq, done, is, why, sizeof why);
	if (!is->inflight)
		issuer_failed(is, what, why);
	return is->inflight != NULL;
}

/* The issuer's metadata came (or did not): its jwks_uri, or the next URL. */
static void on_meta(void *arg, const struct fetch_res *res)
{
	struct issuer *is = arg;
	char url[1024];
	json_t *j = res->ok && res->status == 200 ?
		json_loadb(res->body, res->body_len, 0, NULL) : NULL;
	const char *iss = json_string_value(json_object_get(j, "issuer"));
	const char *ju = json_string_value(json_object_get(j, "jwks_uri"));
	if (j && iss && strcmp(iss, is->id) == 0 && ju && fetch_url_safe(ju)) {
		free(is->jwks_uri);
		is->jwks_uri = strdup(ju);
		json_decref(j);
		is->inflight = NULL;
		if (is->jwks_uri)
			issuer_get(is, is->jwks_uri, on_jwks, "keys");
		return;
	}
	char why[300];
	if (j && iss && strcmp(iss, is->id) != 0)
		snprintf(why, sizeof why, "its metadata names another issuer (\"%.100s\")", iss);
	else if (j && (!ju || !fetch_url_safe(ju)))
		snprintf(why, sizeof why, "its metadata has no usable jwks_uri (https, or http "
			 "on loopback)");
	else
		snprintf(why, sizeof why, "%s", res->ok ? "no metadata at the well-known URLs" :
			 res->error);
	json_decref(j);
	is->inflight = NULL;
	if (meta_url(is->id, ++is->meta_try, url, sizeof url))
		issuer_get(is, url, on_meta, "metadata");
	else
		issuer_failed(is, "metadata", why);
}

/* Starts a fetch of IS's keys (through its metadata when discovered). */
static void issuer_fetch(struct issuer *is)
{
	char url[1024];
	if (is->inflight || is->jwks_file)
		return;
	is->last_try = ev_now(EV_DEFAULT);
	if (is->jwks_uri && !is->discover) {
		issuer_get(is, is->jwks_uri, on_jwks, "keys");
		return;
	}
	is->meta_try = 0;
	if (meta_url(is->id, 0, url, sizeof url))
		issuer_get(is, url, on_meta, "metadata");
}

/* The refresh timer: keys are due again. */
static void on_refresh(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	issuer_fetch(w->data);
}

/* Loads IS's keys from its file; 0 or -1 (logged). */
static int issuer_load_file(struct issuer *is)
{
	json_error_t err;
	char why[200];
	json_t *j = json_load_file(is->jwks_file, JSON_REJECT_DUPLICATES, &err);
	struct jose_keys *k = j ? jose_keys_parse(j, why, sizeof why) : NULL;
	json_decref(j);
	if (!k)
		return log_fail("auth: %s: %s", is->jwks_file, j ? why : err.text);
	jose_keys_free(is->keys);
	is->keys = k;
	return 0;
}

/* ---- who a token stands for ---- */

/* The value at dotted PATH of CLAIMS ("realm_access.roles"), or NULL. */
static json_t *claim_at(json_t *claims, const char *path)
{
	char part[128];
	json_t *v = claims;
	while (v && *path) {
		size_t n = strcspn(path, ".");
		if (n >= sizeof part)
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		v = json_object_get(v, part);
		path += n + (path[n] == '.');
	}
	return v;
}

/* Adds the string or the strings of V to the array A (once each). */
static void add_strings(json_t *a, json_t *v, bool split_spaces)
{
	size_t i;
	json_t *e;
	if (json_is_string(v) && split_spaces) {
		const char *s = json_string_value(v);
		while (*s) {
			size_t n = strcspn(s, " ");
			if (n) {
				json_t *one = json_stringn(s, n);
				if (one && !has_string(a, json_string_value(one)))
					json_array_append(a, one);
				json_decref(one);
			}
			s += n + (s[n] == ' ');
		}
	} else if (json_is_string(v)) {
		if (!has_string(a, json_string_value(v)))
			json_array_append(a, v);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (json_is_string(e))
				add_strings(a, e, false);
	}
}

/* The interned principal NAME with ROLES (borrowed), or NULL (no memory). */
static const struct oauth_who *intern(struct oauth *o, const char *name, json_t *roles)
{
	char *r = json_dumps(roles, JSON_COMPACT);
	struct buf key = { 0 };
	const struct oauth_who *found = NULL;
	if (r && buf_printf(&key, "%s\n%s", name, r) == 0) {
		found = hmap_get(&o->whos, key.data, key.len);
		if (!found) {
			struct oauth_who *w = calloc(1, sizeof *w);
			if (w && (w->principal = strdup(name)) &&
			    hmap_put(&o->whos, key.data, key.len, w) == 0) {
				w->roles = json_incref(roles);
				found = w;
			} else if (w) {
				free(w->principal);
				free(w);
			}
		}
	}
	free(r);
	buf_release(&key);
	return found;
}

/* Fills T (TOK_OK) from verified CLAIMS; false with T->why when they name no one. */
static bool tok_from_claims(struct oauth *o, struct tok *t, json_t *claims)
{
	json_t *p = claim_at(claims, o->principal_claim);
	if (!json_is_string(p) || json_string_length(p) == 0) {
		snprintf(t->why, sizeof t->why, "the token has no \"%s\" claim", o->principal_claim);
		return false;
	}
	json_t *scopes = json_array(), *roles = json_array();
	add_strings(scopes, json_object_get(claims, "scope"), true);
	add_strings(scopes, json_object_get(claims, "scp"), true);
	add_strings(roles, scopes, false);
	size_t i;
	json_t *e;
	json_array_foreach(o->role_claims, i, e)
		add_strings(roles, claim_at(claims, json_string_value(e)), false);
	t->who = intern(o, json_string_value(p), roles);
	json_decref(roles);
	t->scopes = scopes;
	t->aud = json_incref(json_object_get(claims, "aud"));
	const char *iss = json_string_value(json_object_get(claims, "iss"));
	struct buf sub = { 0 };
	buf_printf(&sub, "oauth\n%s\n%s", iss ? iss : "", json_string_value(p));
	sha256(sub.data, sub.len, t->subject);
	buf_release(&sub);
	json_t *exp = json_object_get(claims, "exp");
	/* the leeway jose_check_claims allowed holds for the cached answer too */
	t->until = json_is_number(exp) ? json_number_value(exp) + (double)o->leeway :
		now_wall() + INTROSPECT_TTL_MAX;
	if (!t->who) {
		snprintf(t->why, sizeof t->why, "out of memory");
		return false;
	}
	t->state = TOK_OK;
	return true;
}

/* ---- the token cache ---- */

static void tok_free(struct tok *t)
{
	if (!t)
		return;
	fetch_cancel(t->introspect);
	mw_cred_wait_wake(&t->waits);   /* nobody left to answer them: they ask again */
	json_decref(t->scopes);
	json_decref(t->aud);
	free(t);
}

/* hmap_each: collects expired answers, and one settled answer to drop if
 * none has expired. */
struct sweep {
	double now;
	struct tok **out;
	size_t n, cap;
	struct tok *any;
};

static void sweep_one(void *value, void *arg)
{
	struct tok *t = value;
	struct sweep *s = arg;
	if (t->state == TOK_PENDING)
		return;
	if (t->until <= s->now && s->n < s->cap)
		s->out[s->n++] = t;
	else if (!s->any)
		s->any = t;
}

/* Room for one more answer: expired ones go first, else one settled answer
 * (it is checked again when next presented); false when none can go. */
static bool cache_room(struct oauth *o)
{
	if (o->toks.count < o->cache_max)
		return true;
	struct sweep s = { .now = now_wall(), .cap = o->toks.count };
	s.out = malloc(s.cap * sizeof *s.out);
	if (!s.out)
		return false;
	hmap_each(&o->toks, sweep_one, &s);
	for (size_t i = 0; i < s.n; i++)
		tok_free(hmap_del(&o->toks, s.out[i]->key, 32));
	if (o->toks.count >= o->cache_max && s.any)
		tok_free(hmap_del(&o->toks, s.any->key, 32));
	free(s.out);
	return o->toks.count < o->cache_max;
}

/* A new answer for KEY, cached when there is room (*CACHED says). */
static struct tok *tok_new(struct oauth *o, const unsigned char key[32], bool *cached)
{
	struct tok *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	memcpy(t->key, key, 32);
	t->o = o;
	*cached = cache_room(o) && hmap_put(&o->toks, key, 32, t) == 0;
	return t;
}

/* ---- checking a token ---- */

/* The issuer entry whose id is ID, or NULL. */
static struct issuer *issuer_of(struct oauth *o, const char *id)
{
	for (size_t i = 0; id && i < o->niss; i++)
		if (strcmp(o->iss[i].id, id) == 0)
			return &o->iss[i];
	return NULL;
}

/* The unverified "iss" of JWT TOK (N bytes): only to pick the keys to try. */
static char *peek_issuer(const char *tok, size_t n)
{
	const char *a = memchr(tok, '.', n);
	const char *b = a ? memchr(a + 1, '.', (size_t)(tok + n - a - 1)) : NULL;
	unsigned char *raw = NULL;
	size_t len = 0;
	if (!b || jose_b64url_decode(a + 1, (size_t)(b - a - 1), &raw, &len) < 0)
		return NULL;
	json_t *j = json_loadb((const char *)raw, len, 0, NULL);
	free(raw);
	const char *iss = json_string_value(json_object_get(j, "iss"));
	char *copy = iss ? strdup(iss) : NULL;
	json_decref(j);
	return copy;
}

/* What a JWT check needs from the issuer's keys right now. */
enum verdict { V_DONE, V_WAIT, V_UNAVAILABLE };

/*
 * Verifies the JWT TOK (N bytes) into T. V_WAIT: IS is fetching keys (the
 * caller waits on IS); V_UNAVAILABLE: no keys to check with.
 */
static enum verdict verify_jwt(struct oauth *o, struct tok *t, const char *tok, size_t n,
			       struct issuer **wait_on)
{
	char *iss = peek_issuer(tok, n);
	struct issuer *is = issuer_of(o, iss);
	free(iss);
	if (!is) {
		snprintf(t->why, sizeof t->why, "the token is not from a trusted issuer");
		return V_DONE;
	}
	if (!is->keys) {
		/* after a failed fetch, not again before refetchInterval: the checks
		 * it woke would otherwise start another at once, forever */
		if (!is->failed || ev_now(EV_DEFAULT) - is->last_try >= o->refetch)
			issuer_fetch(is);
		if (is->inflight) {
			*wait_on = is;
			return V_WAIT;
		}
		snprintf(t->why, sizeof t->why, "the issuer's keys are out of reach (%.100s)",
			 is->error[0] ? is->error : "not fetched");
		return V_UNAVAILABLE;
	}
	json_t *claims = NULL;
	char why[sizeof t->why];
	enum jose_status st = jose_verify(is->keys, tok, n, o->algs, &claims, why, sizeof why);
	if (st == JOSE_UNKNOWN_KID && !is->jwks_file) {
		if (!is->inflight && ev_now(EV_DEFAULT) - is->last_try >= o->refetch)
			issuer_fetch(is);   /* the issuer may have rotated its keys */
		if (is->inflight) {
			*wait_on = is;
			return V_WAIT;
		}
	}
	if (st != JOSE_OK) {
		snprintf(t->why, sizeof t->why, "%.159s", why);
		return V_DONE;
	}
	struct jose_expect e = { .issuers = o->iss_ids, .leeway = o->leeway, .require_exp = true };
	st = jose_check_claims(claims, &e, time(NULL), why, sizeof why);
	if (st != JOSE_OK)
		snprintf(t->why, sizeof t->why, "%.159s", why);
	else
		tok_from_claims(o, t, claims);
	json_decref(claims);
	return V_DONE;
}

static void settle_introspected(struct oauth *o, struct tok *t, json_t *j);

/* Introspection answered for the token T. */
static void on_introspect(void *arg, const struct fetch_res *res)
{
	struct tok *t = arg;
	t->introspect = NULL;
	json_t *j = res->ok && res->status == 200 ? json_loadb(res->body, res->body_len, 0, NULL) : NULL;
	t->state = TOK_BAD;
	t->until = now_wall() + BAD_TTL;
	if (!json_is_object(j)) {
		t->unavailable = true;
		t->until = now_wall();   /* asked again next time */
		snprintf(t->why, sizeof t->why, "the introspection endpoint did not answer (%s)",
			 res->ok ? "not a JSON object with status 200" : res->error);
		log_warn("auth: %s", t->why);
	} else if (!json_is_true(json_object_get(j, "active"))) {
		snprintf(t->why, sizeof t->why, "the token is not active");
	} else {
		settle_introspected(t->o, t, j);
	}
	json_decref(j);
	mw_cred_wait_wake(&t->waits);
}

/* Starts introspecting TOK for T; false when it cannot. */
static bool introspect(struct oauth *o, struct tok *t, const char *tok, size_t n)
{
	char why[200];
	struct buf form = { 0 };
	/* the token is base64url/JWS-safe in practice; escape anything else */
	static const char hex[] = "0123456789ABCDEF";
	buf_append(&form, "token_type_hint=access_token&token=", 35);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)tok[i];
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		    ch == '-' || ch == '_' || ch == '.' || ch == '~')
			buf_append(&form, &tok[i], 1);
		else
			buf_append(&form, (char[3]){ '%', hex[ch >> 4], hex[ch & 15] }, 3);
	}
	const char *hdrs[] = { "Accept: application/json", o->introspect_auth, NULL };
	struct fetch_req rq = { .url = o->introspect_url, .headers = hdrs, .body = form.data,
				.body_len = form.len, .timeout_ms = FETCH_TIMEOUT_MS };
	t->introspect = fetch_start(&rq, on_introspect, t, why, sizeof why);
	buf_release(&form);
	if (!t->introspect)
		snprintf(t->why, sizeof t->why, "cannot introspect: %.120s", why);
	return t->introspect != NULL;
}

/* Turns an active introspection answer J (borrowed) into T's answer. */
static void settle_introspected(struct oauth *o, struct tok *t, json_t *j)
{
	char why[sizeof t->why];
	struct jose_expect e = { .issuers = json_object_get(j, "iss") ? o->iss_ids : NULL,
				 .leeway = o->leeway };
	if (jose_check_claims(j, &e, time(NULL), why, sizeof why) != JOSE_OK)
		snprintf(t->why, sizeof t->why, "%.159s", why);
	else if (tok_from_claims(o, t, j) && t->until > now_wall() + INTROSPECT_TTL_MAX)
		t->until = now_wall() + INTROSPECT_TTL_MAX;   /* a revocation shows within minutes */
}

/* True when A (a string) and W name one resource: "https://h/mcp/" and
 * "https://h/mcp" are one. */
static bool same_resource(const char *a, const char *w)
{
	size_t al = strlen(a), wl = strlen(w);
	while (al > 1 && a[al - 1] == '/')
		al--;
	while (wl > 1 && w[wl - 1] == '/')
		wl--;
	return al == wl && strncmp(a, w, wl) == 0;
}

/* True when T's "aud" (a string or an array of strings) names W. */
static bool aud_names(const struct tok *t, const char *w)
{
	if (json_is_string(t->aud))
		return same_resource(json_string_value(t->aud), w);
	size_t i;
	json_t *e;
	json_array_foreach(t->aud, i, e)
		if (json_is_string(e) && same_resource(json_string_value(e), w))
			return true;
	return false;
}

/* Whether T is for us: one of the configured audiences, else the
 * configured resource, else the URL the client reached (RESOURCE). */
static bool audience_ok(const struct oauth *o, const struct tok *t, const char *resource)
{
	if (o->audience) {
		size_t i;
		json_t *e;
		json_array_foreach(o->audience, i, e)
			if (aud_names(t, json_string_value(e)))
				return true;
		return false;
	}
	const char *want = o->resource ? o->resource : resource;
	return !want || aud_names(t, want);   /* no URL to compare: the front names none */
}

/* The scopes METHOD and NAME need beyond what T has, into OUT; true when some lack. */
/* True when HAVE lacks a scope of NEED (no string is built: the common case). */
static bool any_missing(const json_t *need, const json_t *have)
{
	size_t i;
	json_t *e;
	json_array_foreach(need, i, e)
		if (!has_string(have, json_string_value(e)))
			return true;
	return false;
}

/* True when a require rule ND applies to METHOD about NAME. */
static bool need_applies(const struct need *nd, const char *method, const char *name)
{
	if (nd->methods.n && !glob_list_match(&nd->methods, method))
		return false;
	return !nd->tools.n || (strcmp(method, "tools/call") == 0 && glob_list_match(&nd->tools, name));
}

static bool lacks_scope(const struct oauth *o, const struct tok *t, const char *method,
			const char *name, char *out, size_t n)
{
	out[0] = '\0';
	bool lack = any_missing(o->scopes, t->scopes);
	for (size_t i = 0; !lack && method && i < o->nneeds; i++)
		lack = need_applies(&o->needs[i], method, name) &&
			any_missing(o->needs[i].scopes, t->scopes);
	if (!lack)
		return false;   /* the challenge's list is made only for a refusal */
	lack = missing_scopes(o->scopes, t->scopes, out, n);
	for (size_t i = 0; method && i < o->nneeds; i++)
		if (need_applies(&o->needs[i], method, name))
			lack |= missing_scopes(o->needs[i].scopes, t->scopes, out, n);
	if (!lack)
		out[0] = '\0';
	return lack;
}

/* The required scopes of every request, for a 401's challenge. */
static void base_scopes(const struct oauth *o, char *out, size_t n)
{
	size_t i;
	json_t *e;
	out[0] = '\0';
	json_array_foreach(o->scopes, i, e) {
		size_t len = strlen(out);
		snprintf(out + len, n - len, "%s%s", len ? " " : "", json_string_value(e));
	}
}

/* Answers CHK from T (settled). */
static void answer(struct oauth *o, const struct tok *t, struct mw_cred_check *chk)
{
	if (t->state != TOK_OK || t->until <= now_wall()) {
		chk->result = t->unavailable ? MW_CRED_UNAVAILABLE : MW_CRED_INVALID;
		chk->error = t->unavailable ? NULL : "invalid_token";
		snprintf(chk->why, sizeof chk->why, "%s", t->state == TOK_OK ?
			 "the token has expired" : t->why);
		base_scopes(o, chk->scope, sizeof chk->scope);
		return;
	}
	if (!audience_ok(o, t, chk->resource)) {
		chk->result = MW_CRED_INVALID;
		chk->error = "invalid_token";
		snprintf(chk->why, sizeof chk->why, "the token is for another resource (aud)");
		base_scopes(o, chk->scope, sizeof chk->scope);
		return;
	}
	if (lacks_scope(o, t, chk->method, chk->tool, chk->scope, sizeof chk->scope)) {
		chk->result = MW_CRED_SCOPE;
		chk->error = "insufficient_scope";
		snprintf(chk->why, sizeof chk->why, "the token lacks the scope this request needs");
		return;
	}
	chk->result = MW_CRED_OK;
	memcpy(chk->subject, t->subject, 32);
	chk->has_subject = true;
	chk->per_request = o->nneeds > 0;   /* a method or a tool may need more */
}

void oauth_check(struct oauth *o, struct mw_cred_check *chk, const unsigned char *hash,
		 struct mw_cred_wait *wait)
{
	unsigned char key[32];
	if (!chk->token) {
		chk->result = MW_CRED_INVALID;
		snprintf(chk->why, sizeof chk->why, "a bearer token is required");
		base_scopes(o, chk->scope, sizeof chk->scope);
		return;
	}
	if (chk->len > TOKEN_MAX) {
		chk->result = MW_CRED_INVALID;
		chk->error = "invalid_token";
		snprintf(chk->why, sizeof chk->why, "the token is too long");
		return;
	}
	if (hash)
		memcpy(key, hash, 32);
	else
		sha256(chk->token, chk->len, key);
	struct tok *t = hmap_get(&o->toks, key, 32);
	if (t && t->state == TOK_PENDING) {
		mw_cred_wait_add(&t->waits, wait);
		chk->result = MW_CRED_PENDING;
		return;
	}
	if (t && (t->state == TOK_OK || t->until > now_wall()))
		return answer(o, t, chk);   /* an expired OK answers "expired" */
	if (t)
		tok_free(hmap_del(&o->toks, key, 32));
	bool cached = false;
	t = tok_new(o, key, &cached);
	if (!t) {
		chk->result = MW_CRED_UNAVAILABLE;
		snprintf(chk->why, sizeof chk->why, "out of memory");
		return;
	}
	t->state = TOK_BAD;
	t->until = now_wall() + BAD_TTL;
	bool jwt = memchr(chk->token, '.', chk->len) != NULL;
	if (jwt) {
		struct issuer *is = NULL;
		enum verdict v = verify_jwt(o, t, chk->token, chk->len, &is);
		if (v == V_WAIT) {   /* asked again when the keys come: nothing kept now */
			if (cached)
				hmap_del(&o->toks, key, 32);
			tok_free(t);
			mw_cred_wait_add(&is->waits, wait);
			chk->result = MW_CRED_PENDING;
			return;
		}
		if (v == V_UNAVAILABLE) {
			t->unavailable = true;
			t->until = now_wall();
		}
	} else if (o->introspect_url && cached && introspect(o, t, chk->token, chk->len)) {
		t->state = TOK_PENDING;
		mw_cred_wait_add(&t->waits, wait);
		chk->result = MW_CRED_PENDING;
		return;
	} else if (o->introspect_url && !t->introspect && !cached) {
		t->unavailable = true;   /* every cached answer is still being found out */
		snprintf(t->why, sizeof t->why, "too many tokens are being checked at once");
	} else if (!o->introspect_url) {
		snprintf(t->why, sizeof t->why, "the token is not a JWT and no introspection "
			 "endpoint is configured");
	}
	answer(o, t, chk);
	if (!cached || t->unavailable) {
		if (cached)
			hmap_del(&o->toks, key, 32);
		tok_free(t);
	}
}

const struct oauth_who *oauth_who(struct oauth *o, const char *tok, size_t n,
				  const unsigned char *hash, const char *method, const char *name,
				  char *why, size_t wn)
{
	unsigned char key[32];
	char scope[256];
	if (hash)
		memcpy(key, hash, 32);
	else
		sha256(tok, n, key);
	const struct tok *t = hmap_get(&o->toks, key, 32);
	if (!t) {   /* dropped from a full cache since the front checked it: again, without I/O */
		struct mw_cred_check chk = { .token = tok, .len = n, .method = method, .tool = name };
		oauth_check(o, &chk, key, NULL);
		t = hmap_get(&o->toks, key, 32);   /* valid but short of scope: said below */
	}
	if (!t || t->state != TOK_OK) {
		snprintf(why, wn, "the bearer token is not a valid access token");
		return NULL;
	}
	if (t->until <= now_wall()) {
		snprintf(why, wn, "the bearer token has expired");
		return NULL;
	}
	if (lacks_scope(o, t, method, name, scope, sizeof scope)) {
		snprintf(why, wn, "insufficient scope: this request needs \"%s\"", scope);
		return NULL;
	}
	return t->who;
}

json_t *oauth_metadata(struct oauth *o)
{
	json_t *md = json_object(), *servers = json_array();
	for (size_t i = 0; i < o->niss; i++)
		json_array_append_new(servers, json_string(o->iss[i].id));
	json_object_set_new(md, "authorization_servers", servers);
	json_t *sup = o->scopes_supported ? json_incref(o->scopes_supported) : json_array();
	if (!o->scopes_supported) {
		add_strings(sup, o->scopes, false);
		for (size_t i = 0; i < o->nneeds; i++)
			add_strings(sup, o->needs[i].scopes, false);
	}
	json_object_set_new(md, "scopes_supported", sup);
	if (o->resource)
		json_object_set_new(md, "resource", json_string(o->resource));
	return md;
}

/* ---- life ---- */

int oauth_start(struct oauth *o)
{
	if (o->started)
		return 0;
	o->started = true;
	for (size_t i = 0; i < o->niss; i++) {
		struct issuer *is = &o->iss[i];
		if (is->jwks_file) {
			if (issuer_load_file(is) < 0)
				return -1;
		} else {
			issuer_fetch(is);   /* keys ready before the first token, most times */
		}
	}
	return 0;
}

/* hmap_each: frees a principal. */
static void who_free(void *value, void *arg)
{
	struct oauth_who *w = value;
	(void)arg;
	free(w->principal);
	json_decref(w->roles);
	free(w);
}

/* hmap_each: frees a cached answer. */
static void tok_free_each(void *value, void *arg)
{
	(void)arg;
	tok_free(value);
}

void oauth_free(struct oauth *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->niss; i++) {
		struct issuer *is = &o->iss[i];
		fetch_cancel(is->inflight);
		ev_timer_stop(EV_DEFAULT, &is->refresh);
		mw_cred_wait_wake(&is->waits);
		jose_keys_free(is->keys);
		free(is->id);
		free(is->jwks_uri);
		free(is->jwks_file);
	}
	free(o->iss);
	free(o->iss_ids);
	hmap_each(&o->toks, tok_free_each, NULL);
	hmap_release(&o->toks);
	hmap_each(&o->whos, who_free, NULL);
	hmap_release(&o->whos);
	for (size_t i = 0; i < o->nneeds; i++) {
		glob_list_release(&o->needs[i].methods);
		glob_list_release(&o->needs[i].tools);
		json_decref(o->needs[i].scopes);
	}
	free(o->needs);
	json_decref(o->audience);
	json_decref(o->role_claims);
	json_decref(o->scopes);
	json_decref(o->scopes_supported);
	free(o->resource);
	free(o->principal_claim);
	free(o->introspect_url);
	if (o->introspect_auth)
		OPENSSL_cleanse(o->introspect_auth, strlen(o->introspect_auth));
	free(o->introspect_auth);
	free(o);
}

/* ---- options ---- */

/* An array of non-empty strings at KEY (V borrowed), as a new reference;
 * a single string is taken as a one-element array. NULL after mw_error. */
static json_t *strings_at(struct mw_build *b, const char *key, json_t *v)
{
	size_t i;
	json_t *e;
	if (json_is_string(v) && json_string_length(v) > 0)
		return json_pack("[O]", v);
	if (!json_is_array(v)) {
		mw_error(b, key, "must be a string or an array of strings");
		return NULL;
	}
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || json_string_length(e) == 0) {
			char k[320];
			snprintf(k, sizeof k, "%s/%zu", key, i);
			mw_error(b, k, "must be a non-empty string");
			return NULL;
		}
	}
	return json_incref(v);
}

/* True when URL is https, or http on a loopback host (a test's provider). */
static bool url_ok(const char *url)
{
	return fetch_url_safe(url);
}

/* Parses one issuer at KEY: a string, or {"issuer", "jwksUri", "jwksFile"}. */
static void parse_issuer(struct mw_build *b, const char *key, json_t *v, struct issuer *is)
{
	static const char *const keys[] = { "issuer", "jwksUri", "jwksFile", NULL };
	char k[320];
	json_t *id = v, *uri = NULL, *file = NULL;
	if (json_is_object(v)) {
		mw_check_keys_at(b, key, v, keys);
		id = json_object_get(v, "issuer");
		uri = json_object_get(v, "jwksUri");
		file = json_object_get(v, "jwksFile");
		snprintf(k, sizeof k, "%s/issuer", key);
	} else {
		snprintf(k, sizeof k, "%s", key);
	}
	if (!json_is_string(id) || !url_ok(json_string_value(id))) {
		mw_error(b, k, "must be the issuer's URL, exactly as its tokens' \"iss\" "
			 "(https, or http on a loopback host)");
		return;
	}
	is->id = strdup(json_string_value(id));
	if (uri && (!json_is_string(uri) || !url_ok(json_string_value(uri)))) {
		snprintf(k, sizeof k, "%s/jwksUri", key);
		mw_error(b, k, "must be the URL of the issuer's JWKS (https, or http on loopback)");
	} else if (uri) {
		is->jwks_uri = strdup(json_string_value(uri));
	}
	if (file && (!json_is_string(file) || json_string_length(file) == 0)) {
		snprintf(k, sizeof k, "%s/jwksFile", key);
		mw_error(b, k, "must be the path of a JWKS file");
	} else if (file) {
		is->jwks_file = strdup(json_string_value(file));
	}
	is->discover = !uri && !file;
}

/* Parses "issuer"/"issuers" (and the one issuer's "jwksUri"/"jwksFile"). */
static void parse_issuers(struct oauth *o, json_t *opts, struct mw_build *b)
{
	json_t *one = json_object_get(opts, "issuer"), *many = json_object_get(opts, "issuers");
	json_t *list = NULL;
	if (one && many) {
		mw_error(b, "/oauth/issuers", "give \"issuer\" or \"issuers\", not both");
		return;
	}
	if (one) {
		list = json_pack("[{sO}]", "issuer", one);
		json_t *u = json_object_get(opts, "jwksUri"), *f = json_object_get(opts, "jwksFile");
		if (u)
			json_object_set(json_array_get(list, 0), "jwksUri", u);
		if (f)
			json_object_set(json_array_get(list, 0), "jwksFile", f);
	} else if ((json_object_get(opts, "jwksUri") || json_object_get(opts, "jwksFile")) && many) {
		mw_error(b, "/oauth/jwksUri", "with \"issuers\", give each its own jwksUri/jwksFile");
		return;
	} else {
		list = json_incref(many);
	}
	if (!json_is_array(list) || json_array_size(list) == 0) {
		mw_error(b, one ? "/oauth/issuer" : "/oauth/issuers", "missing: the authorization "
			 "server(s) whose tokens are accepted (\"issuer\": \"https://...\")");
		json_decref(list);
		return;
	}
	o->niss = json_array_size(list);
	o->iss = calloc(o->niss, sizeof *o->iss);
	o->iss_ids = calloc(o->niss + 1, sizeof *o->iss_ids);
	if (!o->iss || !o->iss_ids) {
		o->niss = 0;
		json_decref(list);
		mw_error(b, "/oauth", "out of memory");
		return;
	}
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		char k[64];
		snprintf(k, sizeof k, one ? "/oauth/issuer" : "/oauth/issuers/%zu", i);
		struct issuer *is = &o->iss[i];
		is->o = o;
		ev_init(&is->refresh, on_refresh);
		is->refresh.data = is;
		is->last_try = -1e9;
		parse_issuer(b, one ? "/oauth" : k, e, is);
		o->iss_ids[i] = is->id;
	}
	json_decref(list);
}

/* Parses "require": [{"methods", "tools", "scopes"}]. */
static void parse_needs(struct oauth *o, json_t *v, struct mw_build *b)
{
	static const char *const keys[] = { "methods", "tools", "scopes", NULL };
	size_t i;
	json_t *e;
	if (!v)
		return;
	if (!json_is_array(v)) {
		mw_error(b, "/oauth/require", "must be an array of {\"methods\", \"tools\", \"scopes\"}");
		return;
	}
	o->needs = calloc(json_array_size(v) + 1, sizeof *o->needs);
	if (!o->needs)
		return;
	json_array_foreach(v, i, e) {
		char k[64], kk[96];
		snprintf(k, sizeof k, "/oauth/require/%zu", i);
		if (!json_is_object(e)) {
			mw_error(b, k, "must be {\"methods\": [...], \"tools\": [...], \"scopes\": [...]}");
			continue;
		}
		mw_check_keys_at(b, k, e, keys);
		struct need *nd = &o->needs[o->nneeds++];
		json_t *m = json_object_get(e, "methods"), *t = json_object_get(e, "tools");
		snprintf(kk, sizeof kk, "%s/methods", k);
		if (m)
			glob_list_parse(b, kk, m, &nd->methods);
		snprintf(kk, sizeof kk, "%s/tools", k);
		if (t)
			glob_list_parse(b, kk, t, &nd->tools);
		snprintf(kk, sizeof kk, "%s/scopes", k);
		nd->scopes = strings_at(b, kk, json_object_get(e, "scopes"));
		if (!nd->scopes)
			nd->scopes = json_array();
	}
}

/* Parses "introspection": {"url", "clientId", "clientSecret"}. */
static void parse_introspection(struct oauth *o, json_t *v, struct mw_build *b)
{
	static const char *const keys[] = { "url", "clientId", "clientSecret", NULL };
	if (!v)
		return;
	if (!json_is_object(v)) {
		mw_error(b, "/oauth/introspection", "must be {\"url\", \"clientId\", \"clientSecret\"}");
		return;
	}
	mw_check_keys_at(b, "/oauth/introspection", v, keys);
	const char *url = json_string_value(json_object_get(v, "url"));
	const char *id = json_string_value(json_object_get(v, "clientId"));
	const char *secret = json_string_value(json_object_get(v, "clientSecret"));
	if (!url || !url_ok(url))
		mw_error(b, "/oauth/introspection/url", "must be the RFC 7662 endpoint's URL "
			 "(https, or http on loopback)");
	if (!id || !secret)
		mw_error(b, "/oauth/introspection", "\"clientId\" and \"clientSecret\" are needed "
			 "(the endpoint authenticates the resource server)");
	if (!url || !id || !secret)
		return;
	struct buf cred = { 0 };
	buf_printf(&cred, "%s:%s", id, secret);
	char *b64 = NULL;
	unsigned char *enc = malloc(4 * ((cred.len + 2) / 3) + 1);
	if (enc && EVP_EncodeBlock(enc, (const unsigned char *)cred.data, (int)cred.len) >= 0)
		b64 = (char *)enc;
	struct buf h = { 0 };
	if (b64 && buf_printf(&h, "Authorization: Basic %s", b64) == 0)
		o->introspect_auth = strndup(h.data, h.len);
	OPENSSL_cleanse(cred.data, cred.len);
	buf_release(&cred);
	if (h.data)
		OPENSSL_cleanse(h.data, h.len);
	buf_release(&h);
	free(enc);
	o->introspect_url = strdup(url);
}

/* Parses the numbers and names with defaults. */
static void parse_knobs(struct oauth *o, json_t *opts, struct mw_build *b)
{
	json_t *v;
	o->leeway = LEEWAY_DEFAULT;
	o->refetch = REFETCH_DEFAULT;
	o->cache_max = CACHE_DEFAULT;
	o->algs = JOSE_ALG_DEFAULT;
	if ((v = json_object_get(opts, "leeway"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 600)
			mw_error(b, "/oauth/leeway", "must be seconds from 0 to 600 (default %d)",
				 LEEWAY_DEFAULT);
		else
			o->leeway = (long)json_integer_value(v);
	}
	if ((v = json_object_get(opts, "refetchInterval"))) {
		if (!json_is_number(v) || json_number_value(v) < 1 || json_number_value(v) > 3600)
			mw_error(b, "/oauth/refetchInterval", "must be seconds from 1 to 3600 "
				 "(default %g)", REFETCH_DEFAULT);
		else
			o->refetch = json_number_value(v);
	}
	if ((v = json_object_get(opts, "cacheSize"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 10000000)
			mw_error(b, "/oauth/cacheSize", "must be a count from 1 to 10000000 "
				 "(default %d)", CACHE_DEFAULT);
		else
			o->cache_max = (size_t)json_integer_value(v);
	}
	if ((v = json_object_get(opts, "algorithms"))) {
		json_t *names = strings_at(b, "/oauth/algorithms", v);
		size_t i;
		json_t *e;
		o->algs = 0;
		json_array_foreach(names, i, e) {
			unsigned a = jose_alg_parse(json_string_value(e));
			char k[64];
			snprintf(k, sizeof k, "/oauth/algorithms/%zu", i);
			if (!a)
				mw_error(b, k, "\"%s\" is not accepted: RS256, RS384, RS512, PS256, "
					 "PS384, PS512, ES256, ES384, ES512 or EdDSA (never none or HS*)",
					 json_string_value(e));
			o->algs |= a;
		}
		json_decref(names);
	}
	v = json_object_get(opts, "principalClaim");
	if (v && (!json_is_string(v) || json_string_length(v) == 0))
		mw_error(b, "/oauth/principalClaim", "must be a claim name (default \"sub\")");
	o->principal_claim = strdup(json_is_string(v) ? json_string_value(v) : "sub");
	v = json_object_get(opts, "roleClaims");
	o->role_claims = v ? strings_at(b, "/oauth/roleClaims", v) : json_array();
	v = json_object_get(opts, "scopes");
	o->scopes = v ? strings_at(b, "/oauth/scopes", v) : json_array();
	if ((v = json_object_get(opts, "scopesSupported")))
		o->scopes_supported = strings_at(b, "/oauth/scopesSupported", v);
	if ((v = json_object_get(opts, "audience")))
		o->audience = strings_at(b, "/oauth/audience", v);
	v = json_object_get(opts, "resource");
	if (v && (!json_is_string(v) || strncmp(json_string_value(v), "http", 4) != 0 ||
		  strchr(json_string_value(v), '#')))
		mw_error(b, "/oauth/resource", "must be the endpoint's canonical URL as clients "
			 "use it (\"https://mcp.example.com/mcp\"), without a fragment");
	else if (v)
		o->resource = strdup(json_string_value(v));
}

struct oauth *oauth_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = {
		"issuer", "issuers", "jwksUri", "jwksFile", "resource", "audience", "algorithms",
		"leeway", "principalClaim", "roleClaims", "scopes", "scopesSupported", "require",
		"introspection", "cacheSize", "refetchInterval", NULL
	};
	int before = b->nerr;
	if (!json_is_object(opts)) {
		mw_error(b, "/oauth", "must be an object: {\"issuer\": \"https://...\", ...}");
		return NULL;
	}
	struct oauth *o = calloc(1, sizeof *o);
	if (!o) {
		mw_error(b, "/oauth", "out of memory");
		return NULL;
	}
	mw_check_keys_at(b, "/oauth", opts, keys);
	parse_issuers(o, opts, b);
	parse_knobs(o, opts, b);
	parse_needs(o, json_object_get(opts, "require"), b);
	parse_introspection(o, json_object_get(opts, "introspection"), b);
	if (b->nerr > before) {
		oauth_free(o);
		return NULL;
	}
	return o;
}
