/*
 * oauth_discover.c - finding an upstream's authorization server (see
 * oauth_client.h): the 401 challenge, RFC 9728 Protected Resource Metadata,
 * RFC 8414 / OpenID Connect discovery, in the order of the MCP
 * authorization spec (2025-11-25) and with the checks the official SDK
 * makes (the PRM's "resource" covers the upstream URL; "issuer" exact).
 */
#include "oauth_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

enum { D_PROBE, D_PRM, D_AS };

/* --- WWW-Authenticate --- */

/* Skips white space and commas. */
static const char *skip_sep(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == ',')
		p++;
	return p;
}

/* Reads one auth-param value at P (quoted or a token) into a new string. */
static char *param_value(const char **pp)
{
	const char *p = *pp;
	struct buf b = {0};
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1])
				p++;
			buf_append(&b, p, 1);
		}
		if (*p == '"')
			p++;
	} else {
		const char *s = p;
		p += strcspn(p, " \t,");
		buf_append(&b, s, (size_t)(p - s));
	}
	buf_append(&b, "", 1);
	*pp = p;
	return b.data;
}

void oauth_challenge_release(struct oauth_challenge *c)
{
	free(c->resource_metadata);
	free(c->scope);
	free(c->error);
	memset(c, 0, sizeof *c);
}

int oauth_challenge_parse(const char *v, struct oauth_challenge *c)
{
	memset(c, 0, sizeof *c);
	bool bearer = false, seen = false;
	const char *p = v ? v : "";
	while (*(p = skip_sep(p))) {
		const char *name = p;
		p += strcspn(p, " \t,=");
		size_t nl = (size_t)(p - name);
		const char *q = p;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q != '=' || nl == 0) {   /* a scheme: the parameters after it are its own */
			bearer = nl == 6 && strncasecmp(name, "Bearer", 6) == 0;
			seen |= bearer;
			p += nl == 0;
			continue;
		}
		p = q + 1;
		while (*p == ' ' || *p == '\t')
			p++;
		char *val = param_value(&p);
		char **slot = NULL;
		if (bearer && nl == 17 && strncasecmp(name, "resource_metadata", 17) == 0)
			slot = &c->resource_metadata;
		else if (bearer && nl == 5 && strncasecmp(name, "scope", 5) == 0)
			slot = &c->scope;
		else if (bearer && nl == 5 && strncasecmp(name, "error", 5) == 0)
			slot = &c->error;
		if (slot && !*slot)
			*slot = val;
		else
			free(val);
	}
	return seen ? 0 : -1;
}

/* --- URLs --- */

/* Length of URL's scheme and authority ("https://h:1"); 0 when not http(s). */
static size_t origin_len(const char *url)
{
	const char *s = strstr(url, "://");
	if (!s || (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8)))
		return 0;
	return (size_t)(s + 3 - url) + strcspn(s + 3, "/?#");
}

/* The path of URL without query and fragment: start and length. */
static const char *url_path(const char *url, size_t *len)
{
	const char *p = url + origin_len(url);
	*len = strcspn(p, "?#");
	return p;
}

char *oauth_canonical_url(const char *url)
{
	size_t o = origin_len(url);
	if (!o)
		return NULL;
	char *c = strndup(url, strcspn(url, "#"));
	for (size_t i = 0; c && i < o; i++)
		c[i] = (char)tolower((unsigned char)c[i]);
	return c;
}

int oauth_prm_urls(const char *url, char *out[2])
{
	size_t o = origin_len(url), pl;
	const char *path = url_path(url, &pl);
	out[0] = out[1] = NULL;
	if (!o)
		return -1;
	while (pl > 0 && path[pl - 1] == '/')
		pl--;
	int rc = 0;
	if (pl > 0)
		rc = asprintf(&out[0], "%.*s/.well-known/oauth-protected-resource%.*s", (int)o, url,
			      (int)pl, path);
	if (rc >= 0)
		rc = asprintf(&out[pl > 0], "%.*s/.well-known/oauth-protected-resource", (int)o, url);
	if (rc < 0) {
		free(out[0]);
		out[0] = out[1] = NULL;
		return -1;
	}
	return 0;
}

int oauth_as_urls(const char *issuer, char *out[4])
{
	size_t o = origin_len(issuer), pl;
	const char *path = url_path(issuer, &pl);
	memset(out, 0, 4 * sizeof *out);
	if (!o)
		return -1;
	while (pl > 0 && path[pl - 1] == '/')
		pl--;
	int rc;
	if (pl == 0) {
		rc = asprintf(&out[0], "%.*s/.well-known/oauth-authorization-server", (int)o, issuer);
		if (rc >= 0)
			rc = asprintf(&out[1], "%.*s/.well-known/openid-configuration", (int)o, issuer);
	} else {
		rc = asprintf(&out[0], "%.*s/.well-known/oauth-authorization-server%.*s", (int)o,
			      issuer, (int)pl, path);
		if (rc >= 0)
			rc = asprintf(&out[1], "%.*s/.well-known/openid-configuration%.*s", (int)o,
				      issuer, (int)pl, path);
		if (rc >= 0)
			rc = asprintf(&out[2], "%.*s%.*s/.well-known/openid-configuration", (int)o,
				      issuer, (int)pl, path);
	}
	if (rc < 0) {
		for (int i = 0; i < 4; i++) {
			free(out[i]);
			out[i] = NULL;
		}
		return -1;
	}
	return 0;
}

bool oauth_resource_covers(const char *resource, const char *url)
{
	size_t ro = origin_len(resource), uo = origin_len(url), rl, ul;
	if (!ro || ro != uo || strncasecmp(resource, url, ro) != 0)
		return false;
	const char *rp = url_path(resource, &rl), *up = url_path(url, &ul);
	if (ul < rl)   /* "/foo" is not covered by "/foo/" (as the SDK says) */
		return false;
	/* both read as ending in "/": "/api" covers "/api/x", not "/api2" */
	size_t r = rl > 0 && rp[rl - 1] == '/' ? rl - 1 : rl;
	size_t u = ul > 0 && up[ul - 1] == '/' ? ul - 1 : ul;
	if (u < r || strncmp(rp, up, r) != 0)
		return false;
	return u == r || up[r] == '/';
}

/* --- discovery steps --- */

static void try_next(struct oauth_flow *f);

/* Notes URL as tried, for the error text. */
static void note_tried(struct oauth_flow *f, const char *url, long status)
{
	size_t l = strlen(f->tried);
	snprintf(f->tried + l, sizeof f->tried - l, "%s%s (%ld)", l ? ", " : "", url, status);
}

/* The scope to ask for: the configured list, else the challenge's, else
 * the PRM's scopes_supported; plus a step-up's. */
/* True when the space-separated list L (N bytes, not NUL-terminated) holds
 * the word W (WN bytes). */
static bool has_word(const char *l, size_t n, const char *w, size_t wn)
{
	for (size_t i = 0; l && i < n;) {
		size_t j = i;
		while (j < n && l[j] != ' ')
			j++;
		if (j - i == wn && memcmp(l + i, w, wn) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

static void choose_scope(struct oauth_flow *f, json_t *prm)
{
	struct buf b = {0};
	if (f->o->scopes) {
		for (size_t i = 0; f->o->scopes[i]; i++) {
			if (b.len)
				buf_append(&b, " ", 1);
			buf_append(&b, f->o->scopes[i], strlen(f->o->scopes[i]));
		}
	} else if (f->ch.scope && *f->ch.scope) {
		buf_append(&b, f->ch.scope, strlen(f->ch.scope));
	} else {
		size_t i;
		json_t *s;
		json_array_foreach(json_object_get(prm, "scopes_supported"), i, s) {
			if (!json_is_string(s))
				continue;
			if (b.len)
				buf_append(&b, " ", 1);
			buf_append(&b, json_string_value(s), json_string_length(s));
		}
	}
	for (const char *w = f->extra_scope; w && *w;) {   /* each scope asked for, once */
		size_t wn = strcspn(w, " ");
		if (wn && !has_word(b.data, b.len, w, wn)) {
			if (b.len)
				buf_append(&b, " ", 1);
			buf_append(&b, w, wn);
		}
		w += wn + (w[wn] == ' ');
	}
	free(f->meta.scope);
	f->meta.scope = NULL;
	if (b.len) {
		buf_append(&b, "", 1);
		f->meta.scope = b.data;
	} else {
		buf_release(&b);
	}
}

/* Checks and keeps the authorization server's metadata M fetched from FROM. */
static void take_as(struct oauth_flow *f, json_t *m, const char *from)
{
	struct oauth_meta *d = &f->meta;
	const char *iss = json_string_value(json_object_get(m, "issuer"));
	if (!iss || strcmp(iss, d->issuer) != 0) {
		char said[200];
		oauth_excerpt(said, sizeof said, iss ? iss : "(none)");
		oauth_flow_failf(f, "authorization server metadata at %s names issuer \"%s\", "
				 "not \"%s\" (RFC 8414: they must match exactly)", from, said, d->issuer);
		return;
	}
	const char *ae = json_string_value(json_object_get(m, "authorization_endpoint"));
	const char *te = json_string_value(json_object_get(m, "token_endpoint"));
	if (!ae || !te) {
		oauth_flow_failf(f, "authorization server metadata at %s has no %s", from,
				 ae ? "token_endpoint" : "authorization_endpoint");
		return;
	}
	bool s256 = false;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(m, "code_challenge_methods_supported"), i, v)
		s256 |= json_is_string(v) && strcmp(json_string_value(v), "S256") == 0;
	if (!s256) {
		oauth_flow_failf(f, "the authorization server %s does not list S256 in "
				 "code_challenge_methods_supported: PKCE cannot be used, so mcp-chain "
				 "will not log in there", d->issuer);
		return;
	}
	json_array_foreach(json_object_get(m, "token_endpoint_auth_methods_supported"), i, v) {
		const char *s = json_string_value(v);
		d->basic |= s && strcmp(s, "client_secret_basic") == 0;
		d->post |= s && strcmp(s, "client_secret_post") == 0;
	}
	d->cimd = json_is_true(json_object_get(m, "client_id_metadata_document_supported"));
	d->iss_param = json_is_true(json_object_get(m, "authorization_response_iss_parameter_supported"));
	if (oauth_set(&d->authorization_endpoint, ae) < 0 || oauth_set(&d->token_endpoint, te) < 0 ||
	    oauth_set(&d->registration_endpoint,
		      json_string_value(json_object_get(m, "registration_endpoint"))) < 0) {
		oauth_flow_finish(f, "out of memory");
		return;
	}
	oauth_flow_finish(f, NULL);
}

/* Checks the PRM M fetched from FROM and moves on to the authorization server. */
static void take_prm(struct oauth_flow *f, json_t *m, const char *from)
{
	const char *res = json_string_value(json_object_get(m, "resource"));
	if (!res || !oauth_resource_covers(res, f->url)) {
		char said[200];
		oauth_excerpt(said, sizeof said, res ? res : "(none)");
		oauth_flow_failf(f, "the protected resource metadata at %s is for \"%s\", which does "
				 "not cover %s", from, said, f->url);
		return;
	}
	const char *as = json_string_value(json_array_get(json_object_get(m, "authorization_servers"), 0));
	if (!as) {
		oauth_flow_failf(f, "the protected resource metadata at %s lists no authorization server",
				 from);
		return;
	}
	oauth_set(&f->meta.prm_url, from);
	oauth_set(&f->meta.issuer, as);
	if (f->o->resource && !f->o->resource_url)
		oauth_set(&f->meta.resource, res);   /* RFC 8707's value: exactly as the PRM says */
	choose_scope(f, m);
	oauth_urls_clear(f);
	f->step = D_AS;
	if (oauth_as_urls(as, f->urls) < 0) {
		oauth_flow_failf(f, "the authorization server \"%s\" is not an http(s) URL", as);
		return;
	}
	try_next(f);
}

/* No PRM anywhere: the 2025-03-26 fallback, the upstream's origin as issuer. */
static void no_prm(struct oauth_flow *f)
{
	size_t o = origin_len(f->url);
	char *iss = strndup(f->url, o);
	log_info("oauth: %s: no protected resource metadata (%s); trying %s as the "
		 "authorization server", f->name, f->tried, iss ? iss : "?");
	free(f->meta.issuer);
	f->meta.issuer = iss;
	choose_scope(f, NULL);
	oauth_urls_clear(f);
	f->step = D_AS;
	if (!iss || oauth_as_urls(iss, f->urls) < 0) {
		oauth_flow_finish(f, "out of memory");
		return;
	}
	try_next(f);
}

/* A metadata candidate answered. */
static void on_meta(void *arg, const struct fetch_res *res)
{
	struct oauth_flow *f = arg;
	f->fetch = NULL;
	const char *url = f->urls[f->ui];
	if (!res->ok) {
		oauth_flow_failf(f, "cannot fetch %s: %s", url, res->error);
		return;
	}
	note_tried(f, url, res->status);
	json_t *m = res->status == 200 ? oauth_json_body(res) : NULL;
	if (m) {
		if (f->step == D_PRM)
			take_prm(f, m, url);
		else
			take_as(f, m, url);
		json_decref(m);
		return;
	}
	if (res->status == 200 || (res->status >= 500 && f->step == D_AS)) {
		oauth_flow_failf(f, "%s answered %s", url,
				 res->status == 200 ? "200 without a JSON object" : "with a server error");
		return;
	}
	f->ui++;
	try_next(f);
}

/* Fetches the step's next candidate, or ends the step. */
static void try_next(struct oauth_flow *f)
{
	if (!f->urls[f->ui]) {
		if (f->step == D_PRM && !f->ch.resource_metadata)
			no_prm(f);
		else if (f->step == D_PRM)
			oauth_flow_failf(f, "no protected resource metadata: tried %s", f->tried);
		else
			oauth_flow_failf(f, "no authorization server metadata for %s: tried %s",
					 f->meta.issuer, f->tried);
		return;
	}
	static const char *const accept[] = { "Accept: application/json", NULL };
	struct fetch_req rq = {
		.url = f->urls[f->ui], .headers = accept, .timeout_ms = OAUTH_TIMEOUT_MS,
		.max_body = OAUTH_FETCH_MAX, .allow_http = f->allow_http,
	};
	oauth_fetch(f, &rq, on_meta);
}

/* Starts the PRM step. */
static void prm_begin(struct oauth_flow *f)
{
	oauth_urls_clear(f);
	f->step = D_PRM;
	f->tried[0] = 0;
	if (f->ch.resource_metadata) {
		if (origin_len(f->ch.resource_metadata) == 0) {
			oauth_flow_failf(f, "the challenge's resource_metadata is not an http(s) URL");
			return;
		}
		f->urls[0] = strdup(f->ch.resource_metadata);
	} else if (oauth_prm_urls(f->url, f->urls) < 0) {
		oauth_flow_failf(f, "%s is not an http(s) URL", f->url);
		return;
	}
	try_next(f);
}

/* The probe (an initialize POSTed without a token) answered. */
static void on_probe(void *arg, const struct fetch_res *res)
{
	struct oauth_flow *f = arg;
	f->fetch = NULL;
	if (!res->ok) {
		oauth_flow_failf(f, "cannot reach %s: %s", f->url, res->error);
		return;
	}
	if (res->status == 401 && res->www_authenticate)
		oauth_challenge_parse(res->www_authenticate, &f->ch);
	else
		log_info("oauth: %s: %s answered HTTP %ld without a token", f->name, f->url,
			 res->status);
	prm_begin(f);
}

int oauth_discover(struct oauth_flow *f, const char *www_auth, oauth_done_fn done, void *arg,
		   char *why, size_t n)
{
	if (f->fetch) {
		snprintf(why, n, "a step is under way");
		return -1;
	}
	f->done = done;
	f->arg = arg;
	f->err[0] = 0;
	oauth_challenge_release(&f->ch);
	free(f->meta.resource);
	f->meta.resource = !f->o->resource ? NULL : f->o->resource_url ? strdup(f->o->resource_url) :
			   oauth_canonical_url(f->url);
	if (www_auth) {
		oauth_challenge_parse(www_auth, &f->ch);
		prm_begin(f);
		return 0;
	}
	static const char init[] =
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
		"\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
		"\"clientInfo\":{\"name\":\"mcp-chain\",\"version\":\"auth\"}}}";
	static const char *const hdrs[] = { "Accept: application/json, text/event-stream", NULL };
	struct fetch_req rq = {
		.url = f->url, .headers = hdrs, .body = init, .body_len = sizeof init - 1,
		.content_type = "application/json", .timeout_ms = OAUTH_TIMEOUT_MS,
		.max_body = OAUTH_FETCH_MAX, .allow_http = f->allow_http,
	};
	f->step = D_PROBE;
	oauth_fetch(f, &rq, on_probe);   /* a failure is reported through DONE */
	return 0;
}
