/*
 * http_auth.c - the bearer token of an HTTP request, and the front as an
 * OAuth 2.1 resource server (MCP authorization; RFC 6750, RFC 9728).
 *
 * Whether a token is good is the modules' to say (the auth module, through
 * the core: chain_check_credential), asked at the head of every request
 * and again for each request message once the body is read (a method or a
 * tool may need a scope). The answer becomes the status and challenge the
 * specification asks for: 401 with WWW-Authenticate: Bearer (error,
 * resource_metadata, scope), 403 insufficient_scope with the scope needed,
 * 503 when the token cannot be checked now. The Protected Resource
 * Metadata is served when a module validates OAuth tokens, at
 * /.well-known/oauth-protected-resource followed by the endpoint's path,
 * and at the root form.
 *
 * A session is bound to who its token stands for (the modules' subject),
 * not to the token: an OAuth client that refreshes its token keeps its
 * session. The token is handed to the session for the modules to read,
 * never to a log.
 */
#include <string.h>
#include <strings.h>
#include <openssl/evp.h>

#include "chain.h"
#include "http_conn.h"
#include "http_int.h"
#include "log.h"
#include "session.h"

#define PRM_PATH "/.well-known/oauth-protected-resource"

/* The SHA-256 of a bearer token TOK (N bytes): 0 or -1. */
int http_auth_cred_key(const char *tok, size_t n, unsigned char out[32])
{
	unsigned len = 0;
	return EVP_Digest(tok, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -1;
}

/* The bearer token of C's Authorization header (*N bytes), or NULL. */
const char *http_auth_bearer(struct hc_conn *c, size_t *n)
{
	const char *v = hf_header(c, "Authorization");
	if (!v || strncasecmp(v, "Bearer ", 7) != 0)
		return NULL;
	v += 7;
	while (*v == ' ')
		v++;
	size_t len = strlen(v);
	while (len > 0 && v[len - 1] == ' ')
		len--;
	*n = len;
	return len ? v : NULL;
}

/* The URL C's client reached the endpoint at: http://Host/path (a front
 * behind a proxy names its public URL in the module's "resource"). */
static void resource_of(struct http_front *f, struct hc_conn *c, char *out, size_t n)
{
	const char *host = hf_header(c, "Host");
	snprintf(out, n, "http://%s%s", host ? host : f->address, f->path);
}

/* The PRM URL for RESOURCE (its path after the well-known part). */
static void metadata_url(const char *resource, char *out, size_t n)
{
	const char *scheme = strstr(resource, "://");
	const char *path = scheme ? strchr(scheme + 3, '/') : NULL;
	int host = path ? (int)(path - resource) : (int)strlen(resource);
	snprintf(out, n, "%.*s" PRM_PATH "%s", host, resource,
		 path && strcmp(path, "/") != 0 ? path : "");
}

/* Appends a quoted-string parameter NAME="V" to OUT (N bytes), dropping
 * what a quoted string cannot hold. */
static void param(char *out, size_t n, const char *name, const char *v)
{
	size_t len = strlen(out);
	if (len + strlen(name) + 6 >= n)
		return;
	len += (size_t)snprintf(out + len, n - len, ", %s=\"", name);
	for (; *v && len + 3 < n; v++)
		if (*v != '"' && *v != '\\' && (unsigned char)*v >= 0x20)
			out[len++] = *v;
	out[len++] = '"';
	out[len] = '\0';
}

/* The WWW-Authenticate header line for CHK's answer, into OUT. */
static void challenge(struct http_front *f, const char *resource,
		      const struct mw_cred_check *chk, char *out, size_t n)
{
	snprintf(out, n, "WWW-Authenticate: Bearer realm=\"mcp-chain\"");
	if (chk->error)
		param(out, n, "error", chk->error);
	if (chk->error && chk->why[0])
		param(out, n, "error_description", chk->why);
	if (chk->scope[0])
		param(out, n, "scope", chk->scope);
	json_t *md = chain_resource_metadata(f->chain);
	if (md) {
		char url[1024];
		const char *configured = json_string_value(json_object_get(md, "resource"));
		metadata_url(configured ? configured : resource, url, sizeof url);
		param(out, n, "resource_metadata", url);
		json_decref(md);
	}
	size_t len = strlen(out);
	snprintf(out + len, n - len, "\r\n");
}

unsigned http_auth_check(struct http_front *f, struct hc_conn *c, struct hreq *r,
			 const char *method, const char *tool, void (*ready)(struct mw_cred_wait *),
			 char *why, char *chal, size_t n)
{
	char resource[600];
	struct mw_cred_check chk = { 0 };
	resource_of(f, c, resource, sizeof resource);
	chk.token = http_auth_bearer(c, &chk.len);
	chk.resource = resource;
	chk.method = method;
	chk.tool = tool;
	if (r)
		r->auth_wait.ready = ready;
	chain_check_credential(f->chain, &chk, r && ready ? &r->auth_wait : NULL);
	switch (chk.result) {
	case MW_CRED_NONE:
		return 0;
	case MW_CRED_OK:
		if (r && chk.has_subject) {
			memcpy(r->subject, chk.subject, 32);
			r->has_subject = true;
		}
		if (r && !method)   /* the head's answer says whether the body's requests are asked */
			r->per_request = chk.per_request;
		return 0;
	case MW_CRED_PENDING:
		if (r && ready)
			return HTTP_AUTH_PENDING;
		snprintf(why, n, "Service Unavailable: the token is being checked; try again");
		chal[0] = '\0';
		return 503;
	case MW_CRED_UNAVAILABLE:
		log_warn("http: a bearer token cannot be checked now: %s", chk.why);
		snprintf(why, n, "Service Unavailable: the token cannot be checked now (%s)", chk.why);
		snprintf(chal, n, "Retry-After: 5\r\n");
		return 503;
	case MW_CRED_SCOPE:
		log_info("http: %s%s%s refused (403): %s; needs \"%s\"", method ? method : "request",
			 tool ? " " : "", tool ? tool : "", chk.why, chk.scope);
		snprintf(why, n, "Forbidden: insufficient scope: this request needs \"%s\"", chk.scope);
		challenge(f, resource, &chk, chal, n);
		return 403;
	case MW_CRED_INVALID:
		break;
	}
	if (chk.token)
		log_info("http: a bearer token was refused (401): %s", chk.why);
	snprintf(why, n, "Unauthorized: %s", chk.why[0] ? chk.why : "a valid bearer token is required");
	challenge(f, resource, &chk, chal, n);
	return 401;
}

int http_auth_refuse(struct hreq *r, struct hc_conn *c, unsigned status, const char *why,
		     const char *chal)
{
	return http_stream_reply_error_with(r, c, status, -32000, why, chal && chal[0] ? chal : NULL);
}

bool http_auth_subject(struct hreq *r, unsigned char out[32])
{
	size_t n = 0;
	const char *tok = r && r->conn ? http_auth_bearer(r->conn, &n) : NULL;
	if (!tok)
		return false;
	if (r->has_subject) {
		memcpy(out, r->subject, 32);
		return true;
	}
	return http_auth_cred_key(tok, n, out) == 0;
}

/* Binds R's token to HS (modules read it as ctx->credential): a session
 * belongs to whom its first token stood for; a new token of the same
 * subject replaces the old (a refresh). */
int http_auth_bind(struct hsess *hs, struct hreq *r)
{
	size_t n = 0;
	const char *tok = r && r->conn ? http_auth_bearer(r->conn, &n) : NULL;
	if (!tok)
		return 0;
	unsigned char who[32];
	bool known = r->has_subject;
	if (known)
		memcpy(who, r->subject, 32);
	else if (http_auth_cred_key(tok, n, who) < 0)
		return -1;   /* nobody checks tokens: the token itself is who */
	if (hs->has_cred && CRYPTO_memcmp(hs->cred, who, 32) != 0)
		return -1;
	if (session_set_credential(hs->s, tok, n) < 0)
		return -1;
	memcpy(hs->cred, who, 32);
	hs->has_cred = true;
	return 0;
}

bool http_auth_metadata(struct http_front *f, struct hc_conn *c, const char *url, int *rc)
{
	size_t plen = strlen(PRM_PATH);
	if (strncmp(url, PRM_PATH, plen) != 0 ||
	    (url[plen] && strcmp(url + plen, f->path) != 0))
		return false;
	json_t *md = chain_resource_metadata(f->chain);
	if (!md)
		return false;
	char resource[600];
	enum req_kind kind;
	const char *why = NULL;
	unsigned status = hf_check_headers(f, c, "GET", &kind, &why);
	if (status) {
		json_decref(md);
		*rc = http_stream_reply_error(NULL, c, status, -32000, why);
		return true;
	}
	resource_of(f, c, resource, sizeof resource);
	if (!json_object_get(md, "resource"))
		json_object_set_new(md, "resource", json_string(resource));
	json_object_set_new(md, "bearer_methods_supported", json_pack("[s]", "header"));
	char *s = json_dumps(md, JSON_COMPACT);
	json_decref(md);
	*rc = http_stream_reply_with(NULL, c, 200, "application/json", s ? s : "{}",
				     s ? strlen(s) : 2, NULL, "Cache-Control: max-age=300\r\n");
	free(s);
	return true;
}

/* The scope check of one request message M of R (not a batch). */
static unsigned check_one(struct http_front *f, struct hreq *r, struct msg *m, char *why,
			  char *chal, size_t n)
{
	const char *method = msg_method(m);
	char buf[128], *heap = NULL;
	if (!method)
		return 0;   /* a response or notification: nothing to scope */
	const char *tool = strcmp(method, "tools/call") == 0 ? msg_subject(m, buf, sizeof buf, &heap)
							     : NULL;
	unsigned status = http_auth_check(f, r->conn, r, method, tool, NULL, why, chal, n);
	free(heap);
	return status;
}

unsigned http_auth_check_body(struct http_front *f, struct hreq *r, struct msg *m, char *why,
			      char *chal, size_t n)
{
	if (!r->has_subject || !r->per_request)
		return 0;   /* the head's answer holds for every request of the body */
	if (!json_is_array(m->tree))
		return check_one(f, r, m, why, chal, n);
	size_t i;
	json_t *e;
	json_array_foreach(m->tree, i, e) {
		struct msg one;
		msg_init_tree(&one, json_incref(e));
		unsigned status = check_one(f, r, &one, why, chal, n);
		msg_release(&one);
		if (status)
			return status;
	}
	return 0;
}
