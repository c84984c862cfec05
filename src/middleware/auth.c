/*
 * auth.c - the "auth" middleware module: who is calling.
 *
 * A client presents a token either in a message's params._meta under
 * "metaKey", or on its transport (HTTP "Authorization: Bearer", which the
 * front hands the core as the session's credential: ctx->credential), or
 * once for the whole session in mcp-chain's environment ("env",
 * $MCP_CHAIN_TOKEN by default), read at start; in that order. A front
 * whose transport carries credentials asks check_credential first and
 * answers 401 itself when the token is missing or unknown. Tokens are
 * configured only as SHA-256 hashes: a presented token is hashed and
 * compared with every configured hash in constant time. The matching
 * entry names a principal (with roles), which becomes ctx->client for
 * the modules after this one -- policy's "clients" patterns match it --
 * with its roles in ctx->roles.
 * Without a credential, ctx->client is cleared, so a self-declared
 * clientInfo.name never passes for a principal.
 *
 * Nothing secret goes on: the _meta member is removed from every message
 * towards a backend, the environment variable is wiped and removed at
 * start (before backends are spawned, so they never inherit it), and no
 * log line carries a token.
 */
#include "mw_auth.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "auth_int.h"
#include "glob_match.h"
#include "log.h"
#include "rpc.h"

#define HASH_LEN 32
#define TOKEN_MAX 4096     /* longer tokens are refused unhashed */

/* One configured credential. */
struct token {
	unsigned char hash[HASH_LEN];
	unsigned char subject[HASH_LEN];  /* SHA-256 of the principal: who it stands for */
	char *principal;         /* owned */
	json_t *roles;           /* owned: array of strings */
};

enum env_state { ENV_NONE, ENV_OK, ENV_BAD };

struct auth {
	struct mw_module base;   /* must be first */
	struct token *tokens;    /* owned, ntokens of them */
	size_t ntokens;
	char *meta_key;          /* owned */
	char *env;               /* owned; NULL: no environment credential */
	struct glob_list open;   /* methods that need no credential */
	enum env_state env_state;
	const struct token *env_token;  /* ENV_OK: the one it matched */
	struct oauth *oauth;     /* owned: OAuth access tokens, or NULL */
};

/* ---- hashing and matching ---- */

/* SHA-256 of N bytes at P into OUT; returns 0 or -1. */
static int sha256(const void *p, size_t n, unsigned char out[HASH_LEN])
{
	unsigned len = 0;
	return EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) && len == HASH_LEN ? 0 : -1;
}

/* The token whose hash is H, comparing against every one (constant time). */
static const struct token *find_hash(const struct auth *a, const unsigned char *h)
{
	const struct token *found = NULL;
	for (size_t i = 0; i < a->ntokens; i++) {
		bool eq = CRYPTO_memcmp(a->tokens[i].hash, h, HASH_LEN) == 0;
		found = eq && !found ? &a->tokens[i] : found;
	}
	return found;
}

/* The token the secret S (LEN bytes) matches, or NULL; H gets S's hash
 * (when given: *HASHED says whether it was made). */
static const struct token *find_secret_h(const struct auth *a, const char *s, size_t len,
					 unsigned char h[HASH_LEN], bool *hashed)
{
	*hashed = len > 0 && len <= TOKEN_MAX && sha256(s, len, h) == 0;
	return *hashed ? find_hash(a, h) : NULL;
}

/* The token the secret S (LEN bytes) matches, or NULL. */
static const struct token *find_secret(const struct auth *a, const char *s, size_t len)
{
	unsigned char h[HASH_LEN];
	bool hashed;
	return find_secret_h(a, s, len, h, &hashed);
}

/* ---- the environment credential ---- */

/* Environment credentials taken so far: every auth module may read one. */
static struct env_taken {
	char name[128];
	bool present;
	unsigned char hash[HASH_LEN];
} taken[8];
static size_t ntaken;

/*
 * Hash of the variable NAME's value, or NULL when unset or empty. The
 * first call wipes and removes the variable; later ones (another auth
 * module) get the remembered hash.
 */
static const unsigned char *env_take(const char *name)
{
	for (size_t i = 0; i < ntaken; i++)
		if (strcmp(taken[i].name, name) == 0)
			return taken[i].present ? taken[i].hash : NULL;
	struct env_taken *t = ntaken < sizeof taken / sizeof *taken ? &taken[ntaken++] : NULL;
	char *v = getenv(name);
	size_t len = v ? strlen(v) : 0;
	bool ok = len > 0 && len <= TOKEN_MAX && t && sha256(v, len, t->hash) == 0;
	if (t) {
		snprintf(t->name, sizeof t->name, "%s", name);
		t->present = ok;
	}
	if (v) {
		memset(v, 0, len);   /* no copy left in /proc/PID/environ */
		unsetenv(name);
	}
	return ok ? t->hash : NULL;
}

/* ---- hooks ---- */

/* Removes params._meta[KEY] from MSG; returns its value (new reference) or NULL. */
static json_t *take_token(json_t *msg, const char *key)
{
	if (!msg)
		return NULL;   /* unread: reads() found no such member */
	json_t *params = json_object_get(msg, "params");
	json_t *meta = json_object_get(params, "_meta");
	json_t *tok = json_object_get(meta, key);
	if (!tok)
		return NULL;
	json_incref(tok);
	json_object_del(meta, key);
	if (json_object_size(meta) == 0)
		json_object_del(params, "_meta");
	return tok;
}

/* Makes T the exchange's principal: ctx->client and ctx->roles. */
static void set_principal(struct mw_ctx *ctx, const struct token *t)
{
	ctx->client = t->principal;  /* the module outlives every exchange it sees */
	ctx->roles = t->roles;
}

/* Refuses MSG (a request or notification) for WHY. */
static enum mw_verdict refuse(struct auth *a, struct mw_ctx *ctx, json_t **msg,
			      const char *why)
{
	log_warn("auth: %s \"%s\" refused: %s",
		 ctx->kind == RPC_REQUEST ? "request" : "notification", ctx->method, why);
	if (ctx->kind != RPC_REQUEST)
		return MW_DROP;
	json_t *err = rpc_error(json_object_get(*msg, "id"), MW_AUTH_UNAUTHENTICATED, why,
				json_pack("{s:s}", "metaKey", a->meta_key));
	json_decref(*msg);
	*msg = err;
	return MW_REPLY;
}

/* Why a request without a token in _meta has no credential. */
static void no_credential(const struct auth *a, char *why, size_t n)
{
	if (a->env_state == ENV_BAD)
		snprintf(why, n, "unauthenticated: the token in $%s matches no configured token",
			 a->env);
	else
		snprintf(why, n, "unauthenticated: put a token in params._meta[\"%s\"]%s%s%s",
			 a->meta_key, a->env ? " or start mcp-chain with $" : "",
			 a->env ? a->env : "", a->env ? " set" : "");
}

/* Checks and strips the credential of a message towards a backend. */
static enum mw_verdict auth_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct auth *a = (struct auth *)m;
	char why[400];
	if (ctx->dir != MW_TO_BACKEND)
		return MW_PASS;
	json_t *tok = take_token(*msg, a->meta_key);
	const struct token *t = NULL;
	if (tok) {
		t = json_is_string(tok) ? find_secret(a, json_string_value(tok),
						      json_string_length(tok)) : NULL;
		json_decref(tok);
		if (!t) {
			snprintf(why, sizeof why, "unauthenticated: the token in "
				 "params._meta[\"%s\"] matches no configured token", a->meta_key);
			return refuse(a, ctx, msg, why);
		}
	} else if (ctx->credential) {
		unsigned char h[HASH_LEN];
		bool hashed = ctx->credential_hash && ctx->credential_len <= TOKEN_MAX;
		if (hashed) {   /* the core hashed it once for the session */
			memcpy(h, ctx->credential_hash, HASH_LEN);
			t = ctx->credential_len ? find_hash(a, h) : NULL;
		} else {
			t = find_secret_h(a, ctx->credential, ctx->credential_len, h, &hashed);
		}
		if (!t && a->oauth) {
			const struct oauth_who *w = oauth_who(a->oauth, ctx->credential,
							      ctx->credential_len, hashed ? h : NULL,
							      ctx->method, ctx->name, why, sizeof why);
			if (!w)
				return refuse(a, ctx, msg, why);
			ctx->client = w->principal;   /* interned: outlives the exchange */
			ctx->roles = w->roles;
			return MW_PASS;
		}
		if (!t)
			return refuse(a, ctx, msg, "unauthenticated: the bearer token matches no "
				      "configured token");
	} else if (a->env_state == ENV_OK) {
		t = a->env_token;
	}
	if (t) {
		set_principal(ctx, t);
		return MW_PASS;
	}
	ctx->client = NULL;
	if (ctx->kind != RPC_REQUEST || glob_list_match(&a->open, ctx->method))
		return MW_PASS;
	no_credential(a, why, sizeof why);
	return refuse(a, ctx, msg, why);
}

/* Only a message that may carry a token in its _meta is read (to strip it). */
static bool auth_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	return ctx->dir == MW_TO_BACKEND && ctx->kind != RPC_RESPONSE &&
		mw_meta_has(ctx, ((struct auth *)m)->meta_key);
}

/* A transport's credential: required, and one of ours (a configured
 * token, or a valid OAuth access token with the scopes the request needs). */
static void auth_check_credential(struct mw_module *m, struct mw_cred_check *chk,
				  struct mw_cred_wait *wait)
{
	struct auth *a = (struct auth *)m;
	unsigned char h[HASH_LEN];
	bool hashed = false;
	const struct token *t = chk->token ? find_secret_h(a, chk->token, chk->len, h, &hashed)
					   : NULL;
	if (t) {
		chk->result = MW_CRED_OK;
		memcpy(chk->subject, t->subject, HASH_LEN);
		chk->has_subject = true;
		return;
	}
	if (a->oauth)
		return oauth_check(a->oauth, chk, hashed ? h : NULL, wait);
	chk->result = MW_CRED_INVALID;
	chk->error = chk->token ? "invalid_token" : NULL;
	snprintf(chk->why, sizeof chk->why, "%s", chk->token ? "the bearer token is not valid" :
		 "a bearer token is required (Authorization: Bearer ...)");
}

/* The OAuth part of the Protected Resource Metadata, when configured. */
static json_t *auth_resource_metadata(struct mw_module *m)
{
	struct auth *a = (struct auth *)m;
	return a->oauth ? oauth_metadata(a->oauth) : NULL;
}

/* Takes the environment credential, if configured. */
static int auth_start(struct mw_module *m)
{
	struct auth *a = (struct auth *)m;
	if (a->oauth && oauth_start(a->oauth) < 0)
		return -1;
	if (!a->env || a->env_state != ENV_NONE)
		return 0;
	const unsigned char *h = env_take(a->env);
	if (!h)
		return 0;
	a->env_token = find_hash(a, h);
	a->env_state = a->env_token ? ENV_OK : ENV_BAD;
	if (a->env_token)
		log_info("auth: $%s identifies the client as \"%s\"", a->env,
			 a->env_token->principal);
	else
		log_warn("auth: $%s matches no configured token: requests without a token "
			 "in params._meta[\"%s\"] will be refused", a->env, a->meta_key);
	return 0;
}

/* Frees the module. */
static void auth_destroy(struct mw_module *m)
{
	struct auth *a = (struct auth *)m;
	for (size_t i = 0; a->tokens && i < a->ntokens; i++) {
		free(a->tokens[i].principal);
		json_decref(a->tokens[i].roles);
	}
	OPENSSL_cleanse(a->tokens, a->ntokens * sizeof *a->tokens);
	free(a->tokens);
	free(a->meta_key);
	free(a->env);
	glob_list_release(&a->open);
	oauth_free(a->oauth);
	free(a);
}

static const struct mw_module_ops auth_ops = {
	.name = "auth",
	.reads = auth_reads,
	.on_message = auth_on_message,
	.check_credential = auth_check_credential,
	.resource_metadata = auth_resource_metadata,
	.start = auth_start,
	.destroy = auth_destroy,
};

/* ---- options ---- */

/* Decodes 64 hex digits S into OUT; returns 0 or -1. */
static int parse_hex(const char *s, unsigned char out[HASH_LEN])
{
	if (strlen(s) != 2 * HASH_LEN)
		return -1;
	for (size_t i = 0; i < HASH_LEN; i++) {
		char pair[3] = { s[2 * i], s[2 * i + 1], 0 };
		if (!isxdigit((unsigned char)pair[0]) || !isxdigit((unsigned char)pair[1]))
			return -1;
		out[i] = (unsigned char)strtoul(pair, NULL, 16);
	}
	return 0;
}

/* Parses "roles" at KEY: an array of non-empty strings (new reference). */
static json_t *parse_roles(struct mw_build *b, const char *key, json_t *v)
{
	size_t i;
	json_t *e;
	if (!v)
		return json_array();
	if (!json_is_array(v)) {
		mw_error(b, key, "must be an array of role names");
		return json_array();
	}
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || json_string_length(e) == 0) {
			char k[320];
			snprintf(k, sizeof k, "%s/%zu", key, i);
			mw_error(b, k, "must be a non-empty string");
		}
	}
	return json_incref(v);
}

/* Parses token entry I (V) into T. */
static void parse_token(struct mw_build *b, size_t i, json_t *v, struct token *t)
{
	static const char *const keys[] = { "sha256", "principal", "roles", NULL };
	char key[64], k[96];
	snprintf(key, sizeof key, "/tokens/%zu", i);
	if (!json_is_object(v)) {
		mw_error(b, key, "a token is an object {\"sha256\": \"<64 hex digits>\", "
			 "\"principal\": \"NAME\", \"roles\": [...]}");
		return;
	}
	mw_check_keys_at(b, key, v, keys);
	json_t *h = json_object_get(v, "sha256"), *p = json_object_get(v, "principal");
	snprintf(k, sizeof k, "%s/sha256", key);
	if (!json_is_string(h) || parse_hex(json_string_value(h), t->hash) < 0)
		mw_error(b, k, "missing or not 64 hex digits: the SHA-256 of the token, "
			 "as from `printf %%s TOKEN | sha256sum`");
	snprintf(k, sizeof k, "%s/principal", key);
	if (!json_is_string(p) || json_string_length(p) == 0)
		mw_error(b, k, "missing or not a non-empty string: the name the token stands for");
	else if ((t->principal = strdup(json_string_value(p))))
		sha256(t->principal, strlen(t->principal), t->subject);
	snprintf(k, sizeof k, "%s/roles", key);
	t->roles = parse_roles(b, k, json_object_get(v, "roles"));
}

/* Parses "tokens" into A, reporting duplicate hashes. */
static void parse_tokens(struct auth *a, json_t *v, bool oauth, struct mw_build *b)
{
	size_t i;
	json_t *e;
	if (!v && oauth)
		return;   /* OAuth access tokens only */
	if (!json_is_array(v) || json_array_size(v) == 0) {
		mw_error(b, "/tokens", "missing or not a non-empty array of "
			 "{\"sha256\", \"principal\", \"roles\"} (or give \"oauth\")");
		return;
	}
	a->tokens = calloc(json_array_size(v), sizeof *a->tokens);
	if (!a->tokens) {
		mw_error(b, "/tokens", "out of memory");
		return;
	}
	a->ntokens = json_array_size(v);
	json_array_foreach(v, i, e) {
		parse_token(b, i, e, &a->tokens[i]);
		for (size_t j = 0; j < i && a->tokens[i].principal; j++) {
			if (a->tokens[j].principal &&
			    memcmp(a->tokens[j].hash, a->tokens[i].hash, HASH_LEN) == 0) {
				char k[64];
				snprintf(k, sizeof k, "/tokens/%zu/sha256", i);
				mw_error(b, k, "the same hash as /tokens/%zu", j);
			}
		}
	}
}

/* True when S is a plausible environment variable name. */
static bool env_name_ok(const char *s)
{
	if (!*s || isdigit((unsigned char)*s) || strlen(s) >= sizeof taken[0].name)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

/* Parses "metaKey" and "env". */
static void parse_sources(struct auth *a, json_t *opts, struct mw_build *b)
{
	json_t *mk = json_object_get(opts, "metaKey"), *env = json_object_get(opts, "env");
	if (mk && (!json_is_string(mk) || json_string_length(mk) == 0))
		mw_error(b, "/metaKey", "must be a non-empty string (default \"%s\")",
			 MW_AUTH_META_KEY);
	else
		a->meta_key = strdup(mk ? json_string_value(mk) : MW_AUTH_META_KEY);
	if (json_is_false(env))
		return;
	if (env && (!json_is_string(env) || !env_name_ok(json_string_value(env))))
		mw_error(b, "/env", "must be an environment variable name, or false for none "
			 "(default \"%s\")", MW_AUTH_ENV);
	else
		a->env = strdup(env ? json_string_value(env) : MW_AUTH_ENV);
}

/* Parses "public": the methods that need no credential (default ping). */
static void parse_open(struct auth *a, json_t *v, struct mw_build *b)
{
	json_t *dflt = NULL;
	if (!v)
		v = dflt = json_pack("[s]", "ping");
	glob_list_parse(b, "/public", v, &a->open);
	json_decref(dflt);
}

/* Validates the options and makes the module. */
struct mw_module *mw_auth_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = { "tokens", "metaKey", "env", "public", "oauth", NULL };
	int before = b->nerr;
	struct auth *a = calloc(1, sizeof *a);
	if (!a) {
		mw_error(b, "", "out of memory");
		return NULL;
	}
	a->base.ops = &auth_ops;
	mw_check_keys(b, opts, keys);
	json_t *oauth = json_object_get(opts, "oauth");
	parse_tokens(a, json_object_get(opts, "tokens"), oauth != NULL, b);
	if (oauth)
		a->oauth = oauth_create(oauth, b);
	parse_sources(a, opts, b);
	parse_open(a, json_object_get(opts, "public"), b);
	if (b->nerr == before && !a->meta_key)
		mw_error(b, "", "out of memory");
	if (b->nerr > before) {
		auth_destroy(&a->base);
		return NULL;
	}
	return &a->base;
}
