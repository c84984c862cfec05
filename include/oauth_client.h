/*
 * oauth_client.h - mcp-chain as an OAuth 2.1 client of a protected HTTP
 * upstream (the MCP authorization spec, revision 2025-11-25,
 * basic/authorization; docs/oauth-upstreams.md).
 *
 * One flow (struct oauth_flow) walks what a login needs, each step on the
 * loop through the core's fetch (fetch.h), each ending in a done callback:
 *
 *   oauth_discover   the upstream's 401 challenge, else RFC 9728 Protected
 *                    Resource Metadata (path form, then root; its
 *                    "resource" must cover the upstream URL), then the
 *                    authorization server's metadata (RFC 8414 and OpenID
 *                    discovery in the spec's order; "issuer" exact) and
 *                    PKCE S256 required;
 *   oauth_register   pre-registered clientId, else a Client ID Metadata
 *                    Document URL the server accepts, else Dynamic Client
 *                    Registration (RFC 7591); a registration stored for the
 *                    issuer is used again;
 *   oauth_authorize_url, oauth_redirect_check
 *                    the authorization request (code, PKCE S256, state,
 *                    RFC 8707 resource, scope) and its redirect (state,
 *                    RFC 9207 iss);
 *   oauth_exchange   the code for tokens.
 *
 * oauth_refresh_start renews the tokens of a struct oauth_tokens on its own
 * (the HTTP upstream does it before expiry and on a 401).
 *
 * Nothing here logs a token, a code, a verifier or a secret, and no error
 * text holds one: errors name the step, the URL and what the server said
 * (its "error" and "error_description").
 */
#ifndef MCPC_OAUTH_CLIENT_H
#define MCPC_OAUTH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The Bearer parameters of a WWW-Authenticate value (RFC 6750, RFC 9728). */
struct oauth_challenge {
	char *resource_metadata;  /* owned; NULL: none */
	char *scope;              /* owned; NULL: none */
	char *error;              /* owned: "invalid_token", "insufficient_scope"...; NULL */
};

/*
 * Reads the Bearer challenge of V (a WWW-Authenticate value, borrowed;
 * other schemes in it are skipped) into C (its old contents not freed).
 * Returns 0 when V holds a Bearer challenge, -1 otherwise (C then empty).
 */
int oauth_challenge_parse(const char *v, struct oauth_challenge *c);
void oauth_challenge_release(struct oauth_challenge *c);

/*
 * What is kept for one upstream at one issuer (oauth_store.c writes it):
 * the client's registration and its tokens. Every string owned; any may be
 * NULL.
 */
struct oauth_tokens {
	char *url;                /* the upstream it was obtained for */
	char *issuer;
	char *token_endpoint;
	char *client_id;
	char *client_secret;
	char *auth_method;        /* "none", "client_secret_basic", "client_secret_post" */
	char *redirect_uri;       /* the registered loopback callback */
	bool registered;          /* the client came from Dynamic Client Registration */
	char *resource;           /* RFC 8707 resource sent, NULL when left out */
	char *access_token;
	char *refresh_token;
	char *scope;              /* granted (or asked, when the server did not say) */
	double expires_at;        /* seconds since the epoch; 0: not said */
};

void oauth_tokens_release(struct oauth_tokens *t);

/* Copies FROM's registration (client, endpoint, issuer) into TO (replaced). */
int oauth_tokens_copy_client(struct oauth_tokens *to, const struct oauth_tokens *from);

/* True when T holds an access token that is not within MARGIN seconds of
 * its expiry (at NOW, seconds since the epoch). */
bool oauth_tokens_fresh(const struct oauth_tokens *t, double now, double margin);

/* What discovery found. Owned by the flow. */
struct oauth_meta {
	char *prm_url;            /* the Protected Resource Metadata read, or NULL */
	char *issuer;
	char *authorization_endpoint;
	char *token_endpoint;
	char *registration_endpoint;   /* NULL: no DCR */
	bool cimd;                /* client_id_metadata_document_supported */
	bool iss_param;           /* authorization_response_iss_parameter_supported */
	bool basic, post;         /* token_endpoint_auth_methods_supported lists them */
	char *scope;              /* to ask for: the challenge's, else PRM's scopes_supported */
	char *resource;           /* RFC 8707 resource to send, or NULL */
};

/* Called once when a step ends: ERR NULL on success, else why (borrowed). */
typedef void (*oauth_done_fn)(void *arg, const char *err);

struct oauth_flow;

/*
 * A new flow for upstream NAME at URL (both copied) with the entry's
 * options O (borrowed for the flow's life; NULL: all defaults). The
 * fetches may use plain http to any host when ALLOW_HTTP (tests), else
 * only https and loopback http.
 */
struct oauth_flow *oauth_flow_new(const char *name, const char *url, const struct cfg_oauth *o,
				  bool allow_http);

/* Cancels what runs (its callback is not called) and frees F. NULL is fine. */
void oauth_flow_free(struct oauth_flow *f);

const struct oauth_meta *oauth_flow_meta(const struct oauth_flow *f);

/* The registration and tokens so far (owned by F; take them with care). */
struct oauth_tokens *oauth_flow_tokens(struct oauth_flow *f);

/* Extra scope (a step-up's) asked for besides the discovered one (copied). */
void oauth_flow_add_scope(struct oauth_flow *f, const char *scope);

/*
 * Discovery. WWW_AUTH (borrowed, may be NULL) is the upstream's 401
 * challenge; without it the flow first POSTs an initialize to the
 * upstream to get one. 0 when started (DONE follows), -1 with WHY.
 */
int oauth_discover(struct oauth_flow *f, const char *www_auth, oauth_done_fn done, void *arg,
		   char *why, size_t n);

/*
 * Registration for REDIRECT_URI (copied). STORED (borrowed, may be NULL) is
 * a registration kept from before: used again when it is for the same
 * issuer (and, if it was registered dynamically, for the same redirect
 * URI). May call DONE before it returns (nothing to fetch). 0 or -1 with WHY.
 */
int oauth_register(struct oauth_flow *f, const char *redirect_uri,
		   const struct oauth_tokens *stored, oauth_done_fn done, void *arg,
		   char *why, size_t n);

/* The authorization URL (new string), with a new state and PKCE pair kept
 * in F; NULL when out of memory. */
char *oauth_authorize_url(struct oauth_flow *f);

/*
 * Checks the redirect's QUERY (borrowed, without '?'): state, iss (RFC
 * 9207: checked when present, required when the server advertises it),
 * error. Returns the code (new string), or NULL with WHY.
 */
char *oauth_redirect_check(struct oauth_flow *f, const char *query, char *why, size_t n);

/* Exchanges CODE (copied) at the token endpoint; the tokens land in F. */
int oauth_exchange(struct oauth_flow *f, const char *code, oauth_done_fn done, void *arg,
		   char *why, size_t n);

struct oauth_refresh;

/*
 * Refreshes T (borrowed until DONE or cancel) with its refresh token; on
 * success T's tokens are replaced (a refresh token not sent back is kept).
 * ALLOW_HTTP as for a flow. NULL with WHY when it cannot start.
 */
struct oauth_refresh *oauth_refresh_start(struct oauth_tokens *t, bool allow_http,
					  oauth_done_fn done, void *arg, char *why, size_t n);

/* Cancels R (DONE not called). NULL is fine. */
void oauth_refresh_cancel(struct oauth_refresh *r);

/* --- helpers (exposed for tests) --- */

/* The RFC 9728 well-known URLs for resource URL, path form first:
 * OUT[0], OUT[1] (new strings; OUT[1] NULL when URL has no path). 0 or -1. */
int oauth_prm_urls(const char *url, char *out[2]);

/* The authorization server metadata URLs for ISSUER in the spec's order:
 * up to 3 new strings in OUT, NULL after the last. 0 or -1. */
int oauth_as_urls(const char *issuer, char *out[4]);

/* True when the PRM's RESOURCE covers the upstream URL (same origin, its
 * path a prefix at a segment boundary), as the official SDK checks. */
bool oauth_resource_covers(const char *resource, const char *url);

/* The canonical form of URL (RFC 8707, the spec's "canonical server URI"):
 * scheme and host lower case, no fragment. New string, or NULL. */
char *oauth_canonical_url(const char *url);

/* --- the token store (oauth_store.c) --- */

/* The store's directory: $XDG_STATE_HOME/mcp-chain/oauth, else
 * ~/.local/state/mcp-chain/oauth. New string, or NULL. */
char *oauth_store_dir(void);

/*
 * Writes T for upstream NAME (file per name and issuer, 0600, in a 0700
 * directory, atomically). 0, or -1 with WHY.
 */
int oauth_store_save(const char *name, const struct oauth_tokens *t, char *why, size_t n);

/*
 * Reads what is kept for NAME: at ISSUER, or (ISSUER NULL) the newest of
 * its files. 1 found (T filled; release it), 0 none, -1 unreadable (WHY).
 */
int oauth_store_load(const char *name, const char *issuer, struct oauth_tokens *t,
		     char *why, size_t n);

/* Removes NAME's files; the number removed, or -1 with WHY. */
int oauth_store_remove(const char *name, char *why, size_t n);

/*
 * The same for one principal of the HTTP front ("perPrincipal"): SUBJECT
 * is who its bearer token stands for (32 bytes, the front's hash). The
 * file, NAME.ISSUERHASH.SUBJECTHEX.json, holds the issuer in the clear and
 * the tokens sealed (seal.h) under KEY (tokenStore's) with the upstream's
 * name, the issuer and the subject as associated data: a file moved to
 * another name, principal or issuer does not open. The plain files above
 * stay the single-user form of `mcp-chain auth login`.
 */
int oauth_store_save_for(const char *name, const unsigned char subject[32],
			 const unsigned char key[32], const struct oauth_tokens *t,
			 char *why, size_t n);
/* 1 found (T filled), 0 none, -1 unreadable or not opened with KEY (WHY). */
int oauth_store_load_for(const char *name, const unsigned char subject[32],
			 const unsigned char key[32], struct oauth_tokens *t, char *why, size_t n);
/* Removes SUBJECT's files for NAME; the number removed, or -1 with WHY. */
int oauth_store_remove_for(const char *name, const unsigned char subject[32], char *why,
			   size_t n);

/*
 * The login link of a perPrincipal upstream: the wiring, which knows the
 * front's public URL and the key, makes it for upstream NAME and principal
 * SUBJECT (a new string, or NULL); the HTTP upstream puts it in its
 * URL-elicitation-required errors (-32042). Unset: no link (the error
 * says so).
 */
typedef char *(*oauth_login_link_fn)(void *arg, const char *name,
				     const unsigned char subject[32]);
void oauth_set_login_link(oauth_login_link_fn fn, void *arg);

/*
 * A single-user upstream's login started for a client that declared
 * URL-mode elicitation (the stdio front): START begins (or joins) the login
 * of upstream NAME and calls READY once, with the authorization URL to open
 * (borrowed) or ERR, maybe before it returns; 0 started, -1 none can be.
 * CANCEL drops the waits of READY_ARG. With no hooks set, a single-user
 * upstream without tokens is down with "needs login" as before.
 */
typedef void (*oauth_url_fn)(void *ready_arg, const char *url, const char *err);
struct oauth_single_login {
	int (*start)(void *arg, const char *name, oauth_url_fn ready, void *ready_arg);
	void (*cancel)(void *arg, void *ready_arg);
	void *arg;
};
/* H copied; NULL unsets. */
void oauth_set_single_login(const struct oauth_single_login *h);

#endif
