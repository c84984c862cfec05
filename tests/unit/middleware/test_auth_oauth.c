/*
 * test_auth_oauth.c - unit tests for the auth module's "oauth" options
 * (src/middleware/auth_oauth.c): OAuth 2.1 access tokens for the HTTP
 * front, through the module's public surface only (the pipeline's
 * credential check, a message's walk, the resource metadata).
 *
 * No network: the issuer's keys (an EC P-256 key "k1" and an RSA 2048 key
 * "r1", made here) are in a jwksFile written in the run's directory, and
 * every token is signed here. Covered: good ES256 and RS256 tokens and
 * their subjects, the answer cache (an OK answer turns "expired" without
 * being verified again), the audience (the request's resource, a
 * configured resource or audience), each bad token (401 invalid_token
 * with a reason that never holds the token), scopes per request and per
 * tool, the principal and roles a walk gets, the metadata, option errors
 * with their key paths, and a cache of one answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "mw_test.h"
#include "tmpdir_test.h"

#include "jose.h"
#include "middleware.h"
#include "mw_auth.h"

#define ISSUER   "https://issuer.test"
#define RESOURCE "https://mcp.test/mcp"

/* The issuer's keys, made once, and the JWKS file that holds their public halves. */
static EVP_PKEY *ec, *rsa;
static char jwks_path[512];

/* ---- keys and tokens ---- */

/* BN as exactly LEN big-endian bytes (0: its own length) in base64url
 * (malloc'd). Frees BN. */
static char *b64bn(BIGNUM *bn, int len)
{
	unsigned char buf[1024];
	int n = len ? BN_bn2binpad(bn, buf, len) : BN_bn2bin(bn, buf);
	assert_true(n > 0);
	BN_free(bn);
	return jose_b64url_encode(buf, (size_t)n);
}

/* The public JWK of PK (EC P-256 or RSA) with KID (new reference). */
static json_t *jwk(EVP_PKEY *pk, const char *kid)
{
	json_t *j;
	if (EVP_PKEY_is_a(pk, "RSA")) {
		BIGNUM *n = NULL, *e = NULL;
		assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_N, &n), 1);
		assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_E, &e), 1);
		char *ns = b64bn(n, 0), *es = b64bn(e, 0);
		j = json_pack("{s:s, s:s, s:s}", "kty", "RSA", "n", ns, "e", es);
		free(ns);
		free(es);
	} else {
		BIGNUM *x = NULL, *y = NULL;
		assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_X, &x), 1);
		assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
		char *xs = b64bn(x, 32), *ys = b64bn(y, 32);
		j = json_pack("{s:s, s:s, s:s, s:s}", "kty", "EC", "crv", "P-256", "x", xs, "y", ys);
		free(xs);
		free(ys);
	}
	assert_non_null(j);
	json_object_set_new(j, "kid", json_string(kid));
	return j;
}

/* S (NUL-terminated) in base64url (malloc'd). */
static char *b64s(const char *s)
{
	char *e = jose_b64url_encode(s, strlen(s));
	assert_non_null(e);
	return e;
}

/* PK's signature (ES256 or RS256) of IN, as a JWS carries it (malloc'd,
 * *LEN bytes): ES256's DER signature becomes raw r || s. */
static unsigned char *sign(EVP_PKEY *pk, const char *in, size_t *len)
{
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	assert_int_equal(EVP_DigestSignInit_ex(m, NULL, "SHA256", NULL, NULL, pk, NULL), 1);
	assert_int_equal(EVP_DigestSign(m, NULL, len, (const unsigned char *)in, strlen(in)), 1);
	unsigned char *sig = malloc(*len);
	assert_int_equal(EVP_DigestSign(m, sig, len, (const unsigned char *)in, strlen(in)), 1);
	EVP_MD_CTX_free(m);
	if (!EVP_PKEY_is_a(pk, "EC"))
		return sig;
	const unsigned char *p = sig;
	ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)*len);
	const BIGNUM *r, *s;
	assert_non_null(es);
	ECDSA_SIG_get0(es, &r, &s);
	unsigned char *raw = malloc(64);
	assert_int_equal(BN_bn2binpad(r, raw, 32), 32);
	assert_int_equal(BN_bn2binpad(s, raw + 32, 32), 32);
	ECDSA_SIG_free(es);
	free(sig);
	*len = 64;
	return raw;
}

/* "H.P" of the header and payload texts (malloc'd). */
static char *signing_input(const char *hdr, const char *pay)
{
	char *h = b64s(hdr), *p = b64s(pay);
	size_t n = strlen(h) + strlen(p) + 2;
	char *in = malloc(n);
	snprintf(in, n, "%s.%s", h, p);
	free(h);
	free(p);
	return in;
}

/* "IN.SIG" with SIG (N bytes) in base64url (malloc'd). Frees IN. */
static char *with_sig(char *in, const unsigned char *sig, size_t n)
{
	char *s = jose_b64url_encode(sig, n);
	size_t len = strlen(in) + strlen(s) + 2;
	char *t = malloc(len);
	snprintf(t, len, "%s.%s", in, s);
	free(in);
	free(s);
	return t;
}

/* A compact JWS of the header HDR and the payload PAY (texts), signed
 * by PK (malloc'd). */
static char *jws(EVP_PKEY *pk, const char *hdr, const char *pay)
{
	char *in = signing_input(hdr, pay);
	size_t sl;
	unsigned char *sig = sign(pk, in, &sl);
	char *t = with_sig(in, sig, sl);
	free(sig);
	return t;
}

/* The payload CLAIMS (stolen) as text (malloc'd). */
static char *claims_text(json_t *claims)
{
	assert_non_null(claims);
	char *s = json_dumps(claims, JSON_COMPACT);
	json_decref(claims);
	assert_non_null(s);
	return s;
}

/* Good claims for SUB with SCOPE, expiring EXP_IN seconds from now (new
 * reference), for the caller to change. */
static json_t *claims(const char *sub, const char *scope, long exp_in)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "iss", ISSUER, "aud", RESOURCE,
			 "sub", sub, "scope", scope, "exp", (json_int_t)(time(NULL) + exp_in),
			 "iat", (json_int_t)time(NULL));
}

/* A token signed by the EC key ("k1", ES256) with CLAIMS (stolen; malloc'd). */
static char *es256(json_t *c)
{
	char *pay = claims_text(c);
	char *t = jws(ec, "{\"alg\":\"ES256\",\"kid\":\"k1\",\"typ\":\"at+jwt\"}", pay);
	free(pay);
	return t;
}

/* A token signed by the RSA key ("r1", RS256) with CLAIMS (stolen; malloc'd). */
static char *rs256(json_t *c)
{
	char *pay = claims_text(c);
	char *t = jws(rsa, "{\"alg\":\"RS256\",\"kid\":\"r1\",\"typ\":\"at+jwt\"}", pay);
	free(pay);
	return t;
}

/* ---- the module ---- */

/* A started pipeline with one auth module whose "oauth" options are the
 * test's issuer and key file, the usual scopes, and EXTRA (members, may be ""). */
static struct pipeline *oauth_with(const char *extra)
{
	return mwt_start_okf("[{\"use\":\"auth\",\"env\":false,\"oauth\":{\"issuer\":\"" ISSUER
		"\",\"jwksFile\":\"%s\",\"scopes\":[\"mcp:read\"],\"require\":[{\"tools\":[\"echo\"],"
		"\"scopes\":[\"mcp:call\"]}],\"roleClaims\":[\"realm_access.roles\"]%s%s}}]",
		jwks_path, *extra ? "," : "", extra);
}

static struct pipeline *oauth_default(void)
{
	return oauth_with("\"leeway\":0");
}

/* Checks TOK (may be NULL) for a request of METHOD about TOOL (both may be
 * NULL) at RESOURCE (may be NULL) into CHK. */
static void check_at(struct pipeline *pl, const char *tok, const char *resource,
		     const char *method, const char *tool, struct mw_cred_check *chk)
{
	memset(chk, 0, sizeof *chk);
	chk->token = tok;
	chk->len = tok ? strlen(tok) : 0;
	chk->resource = resource;
	chk->method = method;
	chk->tool = tool;
	pipeline_check_credential(pl, chk, NULL);
	assert_int_not_equal(chk->result, MW_CRED_PENDING);   /* a key file: never any I/O */
}

/* check_at for the head of a request to RESOURCE (no method yet). */
static void check(struct pipeline *pl, const char *tok, struct mw_cred_check *chk)
{
	check_at(pl, tok, RESOURCE, NULL, NULL, chk);
}

/* Asserts that TOK checks OK at the head; returns its subject into SUBJECT. */
static void expect_ok(struct pipeline *pl, const char *tok, unsigned char subject[32])
{
	struct mw_cred_check chk;
	check(pl, tok, &chk);
	if (chk.result != MW_CRED_OK)
		fail_msg("refused (%d): %s", chk.result, chk.why);
	assert_true(chk.has_subject);
	assert_null(chk.error);
	if (subject)
		memcpy(subject, chk.subject, 32);
}

/* Asserts that no part of TOK (4 bytes or more between dots) is in TEXT. */
static void expect_no_part(const char *text, const char *tok)
{
	const char *p = tok, *end = tok + strlen(tok);
	while (p < end) {
		const char *dot = strchr(p, '.');
		size_t len = (size_t)((dot ? dot : end) - p);
		if (len >= 4) {
			char *part = strndup(p, len);
			if (strstr(text, part))
				fail_msg("\"%s\" holds a part of the token", text);
			free(part);
		}
		p += len + 1;
	}
}

/* Asserts that TOK at RESOURCE is a 401 invalid_token whose reason holds
 * WANT (when not NULL) and nothing of the token. */
static void expect_invalid_at(struct pipeline *pl, const char *tok, const char *resource,
			      const char *want)
{
	struct mw_cred_check chk;
	check_at(pl, tok, resource, NULL, NULL, &chk);
	if (chk.result != MW_CRED_INVALID)
		fail_msg("answer %d (%s), wanted invalid (%s)", chk.result, chk.why,
			 want ? want : "");
	assert_non_null(chk.error);
	assert_string_equal(chk.error, "invalid_token");
	assert_false(chk.has_subject);
	assert_true(chk.why[0] != '\0');
	if (want && !strstr(chk.why, want))
		fail_msg("why \"%s\", wanted \"%s\" in it", chk.why, want);
	expect_no_part(chk.why, tok);
	assert_string_equal(chk.scope, "mcp:read");   /* what to ask for instead */
}

static void expect_invalid(struct pipeline *pl, const char *tok, const char *want)
{
	expect_invalid_at(pl, tok, RESOURCE, want);
}

#define CALL_ECHO "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"," \
	"\"params\":{\"name\":\"echo\",\"arguments\":{}}}"

/* Walks a tools/call of echo from the client with the transport credential TOK. */
static void walk_call(struct mwt_run *r, struct pipeline *pl, const char *tok)
{
	mwt_walk(r, pl, &(struct mwt_msg){ .client = "self-declared", .credential = tok,
		.name = "echo", .text = CALL_ECHO });
}

/* ---- good tokens ---- */

/* ES256 and RS256 tokens pass; the subject is the issuer and sub, whatever the token. */
static void test_good_tokens(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	char *a1 = es256(claims("alice", "mcp:read mcp:call", 3600));
	char *a2 = rs256(claims("alice", "mcp:read mcp:call", 3600));
	char *b = es256(claims("bob", "mcp:read mcp:call", 3600));
	unsigned char s1[32], s2[32], s3[32];
	expect_ok(pl, a1, s1);
	expect_ok(pl, a2, s2);
	expect_ok(pl, b, s3);
	assert_memory_equal(s1, s2, 32);
	assert_memory_not_equal(s1, s3, 32);
	/* a request the token's scopes cover passes too */
	struct mw_cred_check chk;
	check_at(pl, a2, RESOURCE, "tools/call", "echo", &chk);
	assert_int_equal(chk.result, MW_CRED_OK);
	/* "scp" as an array counts as the scopes */
	json_t *c = claims("carol", "", 3600);
	json_object_del(c, "scope");
	json_object_set_new(c, "scp", json_pack("[ss]", "mcp:read", "mcp:call"));
	char *t = rs256(c);
	check_at(pl, t, RESOURCE, "tools/call", "echo", &chk);
	assert_int_equal(chk.result, MW_CRED_OK);
	free(t);
	free(a1);
	free(a2);
	free(b);
	pipeline_unref(pl);
}

/* A second check is answered from the cache: an OK answer turns into
 * "the token has expired" once its exp passes, without the token being
 * verified again (which would say "expired N s ago", as for a token
 * never seen). */
static void test_cache(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	json_t *c = claims("alice", "mcp:read mcp:call", 2);
	json_t *c2 = json_deep_copy(c);
	json_object_set_new(c2, "jti", json_string("another"));
	json_int_t exp = json_integer_value(json_object_get(c, "exp"));
	char *t = es256(c), *same_claims = es256(c2);
	struct mw_cred_check chk, again;
	check(pl, t, &chk);
	assert_int_equal(chk.result, MW_CRED_OK);
	check(pl, t, &again);
	assert_int_equal(again.result, MW_CRED_OK);
	assert_memory_equal(again.subject, chk.subject, 32);
	while (time(NULL) < exp)
		usleep(50 * 1000);
	expect_invalid(pl, t, "the token has expired");
	expect_invalid(pl, same_claims, "expired");
	check(pl, same_claims, &chk);
	assert_null(strstr(chk.why, "the token has expired"));
	assert_non_null(strstr(chk.why, "s ago"));   /* verified: jose's own words */
	free(t);
	free(same_claims);
	pipeline_unref(pl);
}

/* The token's "aud" must be the resource the request reached (or hold it);
 * a configured "audience" or "resource" is what counts instead. */
static void test_audience(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	json_t *c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "aud", json_string("https://other.test/mcp"));
	char *other = es256(c);
	expect_invalid(pl, other, "another resource");
	c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "aud", json_pack("[ss]", "https://other.test/mcp", RESOURCE));
	char *list = es256(c);
	expect_ok(pl, list, NULL);
	c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "aud", json_string(RESOURCE "/"));
	char *slash = es256(c);
	expect_ok(pl, slash, NULL);
	char *good = es256(claims("alice", "mcp:read", 3600));
	expect_invalid_at(pl, good, "https://elsewhere.test/mcp", "another resource");
	pipeline_unref(pl);

	/* a configured audience: the token must name it, not the resource */
	pl = oauth_with("\"leeway\":0,\"audience\":[\"api://mcp\"]");
	c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "aud", json_string("api://mcp"));
	char *api = rs256(c);
	expect_ok(pl, api, NULL);
	expect_invalid(pl, good, "another resource");
	pipeline_unref(pl);

	/* a configured resource: the request's URL no longer counts */
	pl = oauth_with("\"leeway\":0,\"resource\":\"https://front.test/mcp\"");
	c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "aud", json_string("https://front.test/mcp"));
	char *front = rs256(c);
	expect_ok(pl, front, NULL);
	expect_invalid(pl, good, "another resource");
	pipeline_unref(pl);
	free(other);
	free(list);
	free(slash);
	free(good);
	free(api);
	free(front);
}

/* A token that changed A's character at OFFSET of the signature (malloc'd). */
static char *altered_sig(const char *t, size_t offset)
{
	char *a = strdup(t);
	char *s = strrchr(a, '.') + 1;
	s[offset] = s[offset] == 'A' ? 'B' : 'A';
	return a;
}

/* Each kind of bad token is a 401 invalid_token, its reason free of the token. */
static void test_bad_tokens(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	json_t *c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "iss", json_string("https://evil.test"));
	char *t = es256(c);
	expect_invalid(pl, t, "trusted issuer");
	free(t);

	t = es256(claims("alice", "mcp:read", -5));
	expect_invalid(pl, t, "expired");
	free(t);

	c = claims("alice", "mcp:read", 3600);
	json_object_set_new(c, "nbf", json_integer(time(NULL) + 600));
	t = rs256(c);
	expect_invalid(pl, t, "nbf");
	free(t);

	/* alg none, with and without a signature */
	char *pay = claims_text(claims("alice", "mcp:read", 3600));
	char *in = signing_input("{\"alg\":\"none\",\"kid\":\"k1\"}", pay);
	t = with_sig(in, (const unsigned char *)"", 0);
	expect_invalid(pl, t, "none");
	free(t);

	/* HS256 keyed with the RSA key's public PEM (key confusion) */
	BIO *bio = BIO_new(BIO_s_mem());
	assert_int_equal(PEM_write_bio_PUBKEY(bio, rsa), 1);
	char *pem;
	long pl_len = BIO_get_mem_data(bio, &pem);
	in = signing_input("{\"alg\":\"HS256\",\"kid\":\"r1\"}", pay);
	unsigned char mac[32];
	size_t ml = 0;
	assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, pem, (size_t)pl_len,
				  (unsigned char *)in, strlen(in), mac, sizeof mac, &ml));
	t = with_sig(in, mac, ml);
	expect_invalid(pl, t, "HS");
	free(t);
	BIO_free(bio);

	/* an altered signature, for each key */
	char *good = es256(claims("alice", "mcp:read", 3600));
	t = altered_sig(good, 10);
	expect_invalid(pl, t, NULL);
	free(t);
	free(good);
	good = rs256(claims("alice", "mcp:read", 3600));
	t = altered_sig(good, 10);
	expect_invalid(pl, t, NULL);
	free(t);
	free(good);

	/* an unknown kid: keys from a file are not fetched again */
	t = jws(ec, "{\"alg\":\"ES256\",\"kid\":\"k9\"}", pay);
	expect_invalid(pl, t, "kid");
	free(t);

	/* signed by the EC key but claiming the RSA key's kid */
	t = jws(ec, "{\"alg\":\"ES256\",\"kid\":\"r1\"}", pay);
	expect_invalid(pl, t, NULL);
	free(t);

	/* not a JWT, and no introspection endpoint to ask */
	expect_invalid(pl, "opaque-access-token-0123456789", "not a JWT");
	free(pay);

	/* a second check answers the same from the cache */
	expect_invalid(pl, "opaque-access-token-0123456789", "not a JWT");
	pipeline_unref(pl);
}

/* No token: a 401 without an error code, naming the scope to ask for. */
static void test_no_token(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	struct mw_cred_check chk;
	check(pl, NULL, &chk);
	assert_int_equal(chk.result, MW_CRED_INVALID);
	assert_null(chk.error);
	assert_string_equal(chk.scope, "mcp:read");
	assert_false(chk.has_subject);
	/* the same for a request */
	check_at(pl, NULL, RESOURCE, "tools/call", "echo", &chk);
	assert_int_equal(chk.result, MW_CRED_INVALID);
	assert_null(chk.error);
	pipeline_unref(pl);
}

/* Scopes: every request needs mcp:read, a call of echo mcp:call too. */
static void test_scopes(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	char *reader = es256(claims("alice", "mcp:read", 3600));
	char *caller = rs256(claims("alice", "mcp:call", 3600));
	struct mw_cred_check chk;
	check_at(pl, reader, RESOURCE, "tools/call", "echo", &chk);
	assert_int_equal(chk.result, MW_CRED_SCOPE);
	assert_string_equal(chk.error, "insufficient_scope");
	assert_non_null(strstr(chk.scope, "mcp:call"));
	assert_false(chk.has_subject);
	expect_no_part(chk.why, reader);
	check_at(pl, reader, RESOURCE, "tools/list", NULL, &chk);
	assert_int_equal(chk.result, MW_CRED_OK);
	check_at(pl, reader, RESOURCE, "tools/call", "other", &chk);
	assert_int_equal(chk.result, MW_CRED_OK);   /* the rule is echo's */
	expect_ok(pl, reader, NULL);
	/* without mcp:read: refused at the head already */
	check(pl, caller, &chk);
	assert_int_equal(chk.result, MW_CRED_SCOPE);
	assert_string_equal(chk.error, "insufficient_scope");
	assert_non_null(strstr(chk.scope, "mcp:read"));
	check_at(pl, caller, RESOURCE, "tools/call", "echo", &chk);
	assert_int_equal(chk.result, MW_CRED_SCOPE);
	assert_non_null(strstr(chk.scope, "mcp:read"));
	free(reader);
	free(caller);
	pipeline_unref(pl);

	/* a needed scope inside another's name is still named */
	pl = mwt_start_okf("[{\"use\":\"auth\",\"env\":false,\"oauth\":{\"issuer\":\""
		ISSUER "\",\"jwksFile\":\"%s\",\"scopes\":[\"files:read:all\"],\"require\":"
		"[{\"methods\":[\"tools/call\"],\"scopes\":[\"files:read\"]}]}}]", jwks_path);
	char *t = es256(claims("alice", "files:read:all", 3600));
	check_at(pl, t, RESOURCE, "tools/call", "echo", &chk);
	assert_int_equal(chk.result, MW_CRED_SCOPE);
	assert_string_equal(chk.scope, "files:read:all files:read");
	free(t);
	pipeline_unref(pl);
}

/* A walk with a good token names its principal, with the scopes and the
 * role claim's values as roles; one without the tool's scope is refused. */
static void test_on_message(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	json_t *c = claims("alice", "mcp:read mcp:call", 3600);
	json_object_set_new(c, "realm_access", json_pack("{s:[ss]}", "roles", "admin", "ops"));
	char *good = es256(c);
	char *reader = rs256(claims("bob", "mcp:read", 3600));
	struct mwt_run r;
	expect_ok(pl, good, NULL);   /* as the front does first */
	walk_call(&r, pl, good);
	assert_int_equal(r.verdict, MW_PASS);
	assert_non_null(r.ctx.client);
	assert_string_equal(r.ctx.client, "alice");
	mwt_expect_json(r.ctx.roles, "", "[\"mcp:read\",\"mcp:call\",\"admin\",\"ops\"]");
	mwt_run_release(&r);

	/* as the front would not (it answers 403 first), and as when the answer
	 * was dropped from the cache: refused, naming the scope */
	walk_call(&r, pl, reader);
	assert_int_equal(r.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&r), MW_AUTH_UNAUTHENTICATED);
	const char *msg = mwt_error_message(&r);
	assert_non_null(msg);
	assert_non_null(strstr(msg, "mcp:call"));
	expect_no_part(msg, reader);
	char *all = json_dumps(r.got, JSON_COMPACT);
	expect_no_part(all, reader);
	free(all);
	mwt_run_release(&r);
	expect_ok(pl, reader, NULL);   /* the front's check at the head */
	walk_call(&r, pl, reader);
	assert_int_equal(r.verdict, MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&r), "mcp:call"));
	expect_no_part(mwt_error_message(&r), reader);
	mwt_run_release(&r);

	/* a tools/list needs only mcp:read */
	mwt_walk(&r, pl, &(struct mwt_msg){ .credential = reader,
		.text = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}" });
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(r.ctx.client, "bob");
	mwt_expect_json(r.ctx.roles, "", "[\"mcp:read\"]");
	mwt_run_release(&r);

	/* a token that is not valid names no one */
	walk_call(&r, pl, "opaque-access-token-0123456789");
	assert_int_equal(r.verdict, MW_REPLY);
	expect_no_part(mwt_error_message(&r), "opaque-access-token-0123456789");
	mwt_run_release(&r);
	free(good);
	free(reader);
	pipeline_unref(pl);
}

/* The Protected Resource Metadata: the issuer, the scopes, the resource
 * only when configured. */
static void test_metadata(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_default();
	json_t *md = pipeline_resource_metadata(pl);
	assert_non_null(md);
	mwt_expect_json(md, "authorization_servers", "[\"" ISSUER "\"]");
	json_t *sup = json_object_get(md, "scopes_supported");
	assert_true(json_is_array(sup));
	bool read = false, call = false;
	size_t i;
	json_t *e;
	json_array_foreach(sup, i, e) {
		read |= strcmp(json_string_value(e), "mcp:read") == 0;
		call |= strcmp(json_string_value(e), "mcp:call") == 0;
	}
	assert_true(read && call);
	assert_null(json_object_get(md, "resource"));
	json_decref(md);
	pipeline_unref(pl);

	pl = oauth_with("\"resource\":\"https://front.test/mcp\","
			"\"scopesSupported\":[\"mcp:read\",\"mcp:call\",\"mcp:admin\"]");
	md = pipeline_resource_metadata(pl);
	mwt_expect_json(md, "resource", "\"https://front.test/mcp\"");
	mwt_expect_json(md, "scopes_supported", "[\"mcp:read\",\"mcp:call\",\"mcp:admin\"]");
	json_decref(md);
	pipeline_unref(pl);
}

/* Expects the auth module with "oauth": {OAUTH} not to build, with an
 * error at the key path WANT. */
static void expect_oauth_error(const char *oauth, const char *want)
{
	char opts[1024];
	snprintf(opts, sizeof opts, "\"env\":false,\"oauth\":{%s}", oauth);
	mwt_expect_module_error("auth", opts, want);
}

/* Each wrong option names its key's path. */
static void test_option_errors(void **state)
{
	(void)state;
	char ok[600];
	snprintf(ok, sizeof ok, "\"issuer\":\"" ISSUER "\",\"jwksFile\":\"%s\"", jwks_path);
	char o[800];
	snprintf(o, sizeof o, "%s,\"algorithms\":[\"RS256\",\"HS256\"]", ok);
	expect_oauth_error(o, "/middleware/0/oauth/algorithms/1");
	snprintf(o, sizeof o, "%s,\"algorithms\":[\"none\"]", ok);
	expect_oauth_error(o, "/middleware/0/oauth/algorithms/0");
	snprintf(o, sizeof o, "%s,\"leeway\":-1", ok);
	expect_oauth_error(o, "/middleware/0/oauth/leeway");
	snprintf(o, sizeof o, "%s,\"cacheSize\":0", ok);
	expect_oauth_error(o, "/middleware/0/oauth/cacheSize");
	snprintf(o, sizeof o, "%s,\"bogus\":1", ok);
	expect_oauth_error(o, "/middleware/0/oauth/bogus");
	snprintf(o, sizeof o, "%s,\"issuers\":[\"https://other.test\"]", ok);
	expect_oauth_error(o, "/middleware/0/oauth/issuers");
	expect_oauth_error("\"issuer\":\"http://issuer.test\"", "/middleware/0/oauth/issuer");
	expect_oauth_error("\"jwksFile\":\"/x\"", "/middleware/0/oauth/issuer");
	snprintf(o, sizeof o, "\"issuer\":\"" ISSUER "\",\"jwksFile\":\"%s\",\"resource\":\"ftp://x\"",
		 jwks_path);
	expect_oauth_error(o, "/middleware/0/oauth/resource");

	/* an http issuer on loopback is fine (a test's provider) */
	char text[1024];
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"env\":false,\"oauth\":{\"issuer\":"
		 "\"http://127.0.0.1:9/\",\"jwksFile\":\"%s\"}}]", jwks_path);
	pipeline_unref(mwt_start_ok(text));

	/* a key file that cannot be read fails the start, not the build */
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"auth\",\"env\":false,\"oauth\":{"
		"\"issuer\":\"" ISSUER "\",\"jwksFile\":\"/nonexistent/jwks.json\"}}]");
	assert_int_equal(pipeline_start(pl), -1);
	pipeline_unref(pl);
}

/* With room for one answer, two tokens taking turns both stay valid (a
 * dropped answer is checked again), and a walk with the dropped one still
 * names its principal. */
static void test_cache_of_one(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_with("\"leeway\":0,\"cacheSize\":1");
	char *a = es256(claims("alice", "mcp:read mcp:call", 3600));
	char *b = rs256(claims("bob", "mcp:read mcp:call", 3600));
	unsigned char sa[32], sb[32], s[32];
	expect_ok(pl, a, sa);
	expect_ok(pl, b, sb);
	for (int i = 0; i < 3; i++) {
		expect_ok(pl, a, s);
		assert_memory_equal(s, sa, 32);
		expect_ok(pl, b, s);
		assert_memory_equal(s, sb, 32);
	}
	/* b holds the one place: a's walk checks it again */
	struct mwt_run r;
	walk_call(&r, pl, a);
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(r.ctx.client, "alice");
	mwt_run_release(&r);
	walk_call(&r, pl, b);
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(r.ctx.client, "bob");
	mwt_run_release(&r);
	free(a);
	free(b);
	pipeline_unref(pl);
}

/* The leeway forgives a clock behind the issuer's: a token expired less
 * than "leeway" seconds ago still passes, here and on the walk. */
static void test_leeway(void **state)
{
	(void)state;
	struct pipeline *pl = oauth_with("\"leeway\":60");
	char *t = es256(claims("alice", "mcp:read mcp:call", -10));
	expect_ok(pl, t, NULL);
	struct mwt_run r;
	walk_call(&r, pl, t);
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(r.ctx.client, "alice");
	mwt_run_release(&r);
	free(t);
	t = es256(claims("alice", "mcp:read mcp:call", -61));
	expect_invalid(pl, t, "expired");
	free(t);
	pipeline_unref(pl);
}

/* Makes the keys and writes the JWKS file. */
static int setup(void **state)
{
	if (tmpd_setup(state) < 0)
		return -1;
	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	if (!ec || !rsa)
		return -1;
	json_t *set = json_pack("{s:[oo]}", "keys", jwk(ec, "k1"), jwk(rsa, "r1"));
	char *text = json_dumps(set, JSON_COMPACT);
	json_decref(set);
	tmpd_path(jwks_path, sizeof jwks_path, "jwks.json");
	tmpd_spit(jwks_path, text);
	free(text);
	return 0;
}

/* Frees the keys and removes the directory. */
static int teardown(void **state)
{
	EVP_PKEY_free(ec);
	EVP_PKEY_free(rsa);
	return tmpd_teardown(state);
}

/* Runs the tests. */
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_tokens),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_audience),
		cmocka_unit_test(test_bad_tokens),
		cmocka_unit_test(test_no_token),
		cmocka_unit_test(test_scopes),
		cmocka_unit_test(test_on_message),
		cmocka_unit_test(test_metadata),
		cmocka_unit_test(test_option_errors),
		cmocka_unit_test(test_cache_of_one),
		cmocka_unit_test(test_leeway),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
