/*
 * http_auth.c - the bearer token of an HTTP request: checked through the
 * core (a module such as auth says whether it is valid), bound to the
 * session it opens or uses, and hashed so the session caps can count
 * sessions per token without keeping it.
 */
#include <string.h>
#include <strings.h>
#include <openssl/evp.h>

#include "chain.h"
#include "http_conn.h"
#include "http_int.h"
#include "session.h"

/* ---- bearer credentials (the auth module checks them through the core) ---- */

/* The SHA-256 of a bearer token TOK (N bytes): sessions are counted per
 * token without keeping it; 0 or -1. */
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

/*
 * 0, or 401 with *WHY when a module checks credentials (auth) and C's
 * bearer token is missing or unknown. The token goes to the modules
 * through the core (chain_check_credential), never to a log.
 */
unsigned http_auth_check(struct http_front *f, struct hc_conn *c, const char **why)
{
	size_t n = 0;
	const char *tok = http_auth_bearer(c, &n);
	if (chain_check_credential(f->chain, tok, n) >= 0)
		return 0;
	*why = tok ? "Unauthorized: the bearer token is not valid" :
		     "Unauthorized: a bearer token is required (Authorization: Bearer ...)";
	return 401;
}

/* Binds C's bearer token to HS (modules read it as ctx->credential);
 * -1 when HS is bound to another. */
int http_auth_bind(struct hsess *hs, struct hc_conn *c)
{
	size_t n = 0;
	const char *tok = http_auth_bearer(c, &n);
	if (!tok)
		return 0;
	if (session_set_credential(hs->s, tok, n) < 0)
		return -1;
	if (!hs->has_cred)
		hs->has_cred = http_auth_cred_key(tok, n, hs->cred) == 0;
	return 0;
}
