/*
 * auth_int.h - the auth module's OAuth part (auth_oauth.c), as auth.c
 * uses it: bearer tokens that are OAuth 2.1 access tokens (JWTs checked
 * against an issuer's keys, or opaque ones asked of an introspection
 * endpoint), for an HTTP front that is a resource server (RFC 9728).
 */
#ifndef MCPC_AUTH_INT_H
#define MCPC_AUTH_INT_H

#include <jansson.h>

#include "middleware.h"

struct oauth;

/* Who a valid token stands for: interned by the module, so it outlives
 * every exchange that borrows it (mw_ctx.client, mw_ctx.roles). */
struct oauth_who {
	char *principal;     /* owned */
	json_t *roles;       /* owned: array of strings (scopes and role claims) */
};

/* The "oauth" options at KEY of the module (borrowed); NULL after an
 * mw_error when they are wrong. */
struct oauth *oauth_create(json_t *opts, struct mw_build *b);

/* Goes live: loads the key files, starts fetching issuers' keys. */
int oauth_start(struct oauth *o);

/* Frees O (NULL is fine): pending fetches are cancelled, waits dropped. */
void oauth_free(struct oauth *o);

/* Answers CHK for a token that is no static one (mw_module_ops.check_credential);
 * HASH: the token's SHA-256 when the caller has it, else NULL. */
void oauth_check(struct oauth *o, struct mw_cred_check *chk, const unsigned char *hash,
		 struct mw_cred_wait *wait);

/*
 * Who the token TOK (N bytes), checked by the front already, stands for,
 * for a request of METHOD about NAME (the tool, for tools/call), or NULL
 * with the reason in WHY: unknown, no longer valid, or without the scope
 * that request needs.
 */
const struct oauth_who *oauth_who(struct oauth *o, const char *tok, size_t n,
				  const unsigned char *hash, const char *method, const char *name,
				  char *why, size_t wn);

/* The module's part of the Protected Resource Metadata (new reference). */
json_t *oauth_metadata(struct oauth *o);

#endif
