/*
 * test_jose.c - unit tests for src/core/jose.c: strict base64url, random
 * tokens and PKCE (with RFC 7636's own example), key sets from JWKS (each
 * kind of key kept, each unusable one skipped), compact JWS verification
 * of tokens signed here with keys generated here (every algorithm, and
 * the attacks: "none", HS256 keyed with the RSA key's PEM, altered
 * signature or payload, DER ECDSA signatures, algorithms and keys that do
 * not fit), malformed tokens, and the claim checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "jose.h"

/* The keys of every test, made once. */
static EVP_PKEY *rsa, *rsa2, *rsa1024, *ec256, *ec384, *ec521, *ed;

#define NOW 1700000000L

/* ---- helpers ---- */

/* TEXT parsed as JSON, failing the test when it is not (new reference). */
static json_t *J(const char *text)
{
	json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
	if (!j)
		fail_msg("not JSON: %s", text);
	return j;
}

/* S (NUL-terminated) in base64url (malloc'd). */
static char *b64s(const char *s)
{
	char *e = jose_b64url_encode(s, strlen(s));
	assert_non_null(e);
	return e;
}

/* BN as exactly LEN big-endian bytes, in base64url (malloc'd); LEN 0: its
 * own length. Frees BN. */
static char *b64bn(BIGNUM *bn, int len)
{
	unsigned char buf[1024];
	int n = len ? BN_bn2binpad(bn, buf, len) : BN_bn2bin(bn, buf);
	assert_true(n > 0);
	BN_free(bn);
	return jose_b64url_encode(buf, (size_t)n);
}

/* The public JWK of PK, with KID and ALG when not NULL (new reference). */
static json_t *jwk(EVP_PKEY *pk, const char *kid, const char *alg)
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
	} else if (EVP_PKEY_is_a(pk, "EC")) {
		char group[64];
		BIGNUM *x = NULL, *y = NULL;
		int coord = (EVP_PKEY_get_bits(pk) + 7) / 8;
		assert_int_equal(EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME,
								group, sizeof group, NULL), 1);
		assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_X, &x), 1);
		assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
		const char *crv = strcmp(group, "prime256v1") == 0 ? "P-256"
				: strcmp(group, "secp384r1") == 0 ? "P-384" : "P-521";
		char *xs = b64bn(x, coord), *ys = b64bn(y, coord);
		j = json_pack("{s:s, s:s, s:s, s:s}", "kty", "EC", "crv", crv, "x", xs, "y", ys);
		free(xs);
		free(ys);
	} else {
		unsigned char pub[32];
		size_t len = 0;
		assert_int_equal(EVP_PKEY_get_octet_string_param(pk, OSSL_PKEY_PARAM_PUB_KEY,
								 pub, sizeof pub, &len), 1);
		char *xs = jose_b64url_encode(pub, len);
		j = json_pack("{s:s, s:s, s:s}", "kty", "OKP", "crv", "Ed25519", "x", xs);
		free(xs);
	}
	assert_non_null(j);
	if (kid)
		json_object_set_new(j, "kid", json_string(kid));
	if (alg)
		json_object_set_new(j, "alg", json_string(alg));
	return j;
}

/* {"keys": [the N JWKs after N]} (steals them). */
static json_t *jwks(int n, ...)
{
	json_t *arr = json_array();
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, va_arg(ap, json_t *));
	va_end(ap);
	return json_pack("{s:o}", "keys", arr);
}

/* The key set of the N JWKs after N (steals them), which must parse. */
static struct jose_keys *keyset(int n, ...)
{
	json_t *arr = json_array();
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, va_arg(ap, json_t *));
	va_end(ap);
	json_t *set = json_pack("{s:o}", "keys", arr);
	char why[256];
	struct jose_keys *k = jose_keys_parse(set, why, sizeof why);
	if (!k)
		fail_msg("key set refused: %s", why);
	json_decref(set);
	return k;
}

/* PK's signature with ALG of IN (malloc'd, *LEN bytes); an ES* signature
 * raw r || s unless DER. */
static unsigned char *sign(EVP_PKEY *pk, const char *alg, const char *in, size_t *len, bool der)
{
	const char *md = strcmp(alg, "EdDSA") == 0 ? NULL
		       : alg[2] == '2' ? "SHA256" : alg[2] == '3' ? "SHA384" : "SHA512";
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pc = NULL;
	assert_int_equal(EVP_DigestSignInit_ex(m, &pc, md, NULL, NULL, pk, NULL), 1);
	if (alg[0] == 'P') {
		assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(pc, RSA_PKCS1_PSS_PADDING), 1);
		assert_int_equal(EVP_PKEY_CTX_set_rsa_pss_saltlen(pc, RSA_PSS_SALTLEN_DIGEST), 1);
	}
	assert_int_equal(EVP_DigestSign(m, NULL, len, (const unsigned char *)in, strlen(in)), 1);
	unsigned char *sig = malloc(*len);
	assert_int_equal(EVP_DigestSign(m, sig, len, (const unsigned char *)in, strlen(in)), 1);
	EVP_MD_CTX_free(m);
	if (alg[0] != 'E' || alg[1] != 'S' || der)
		return sig;
	const unsigned char *p = sig;
	ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)*len);
	const BIGNUM *r, *s;
	assert_non_null(es);
	ECDSA_SIG_get0(es, &r, &s);
	int c = (EVP_PKEY_get_bits(pk) + 7) / 8;
	unsigned char *raw = malloc(2 * (size_t)c);
	assert_int_equal(BN_bn2binpad(r, raw, c), c);
	assert_int_equal(BN_bn2binpad(s, raw + c, c), c);
	ECDSA_SIG_free(es);
	free(sig);
	*len = 2 * (size_t)c;
	return raw;
}

/* "H.P.S" from three NUL-terminated parts (malloc'd). */
static char *join(const char *h, const char *p, const char *s)
{
	size_t n = strlen(h) + strlen(p) + strlen(s) + 3;
	char *t = malloc(n);
	snprintf(t, n, "%s.%s.%s", h, p, s);
	return t;
}

/* A compact JWS of the header HDR and payload PAY (JSON texts), signed by
 * PK with ALG (ES*: DER when DER). Malloc'd. */
static char *token_der(EVP_PKEY *pk, const char *alg, const char *hdr, const char *pay, bool der)
{
	char *h = b64s(hdr), *p = b64s(pay);
	char *in = malloc(strlen(h) + strlen(p) + 2);
	sprintf(in, "%s.%s", h, p);
	size_t sl;
	unsigned char *sig = sign(pk, alg, in, &sl, der);
	char *s = jose_b64url_encode(sig, sl);
	char *t = join(h, p, s);
	free(h);
	free(p);
	free(in);
	free(sig);
	free(s);
	return t;
}

static char *token(EVP_PKEY *pk, const char *alg, const char *hdr, const char *pay)
{
	return token_der(pk, alg, hdr, pay, false);
}

#define PAYLOAD "{\"iss\":\"https://as.example\",\"aud\":\"mcp\",\"sub\":\"u1\",\"exp\":1700000600}"

/* Verifies TOK with KS and ALLOW, asserts the status is WANT and, when it
 * is not JOSE_OK, that WHY says something and holds no part of TOK nor
 * SECRET (a kid; may be NULL). Returns the claims on JOSE_OK. */
static json_t *expect_n(const struct jose_keys *ks, const char *tok, size_t n, unsigned allow,
			enum jose_status want, const char *secret)
{
	json_t *claims = (json_t *)&claims;
	char why[256] = "";
	enum jose_status st = jose_verify(ks, tok, n, allow, &claims, why, sizeof why);
	if (st != want)
		fail_msg("status %s (%s), wanted %s", jose_status_text(st), why, jose_status_text(want));
	if (st == JOSE_OK) {
		assert_true(json_is_object(claims));
		return claims;
	}
	assert_null(claims);
	assert_true(why[0] != '\0');
	const char *p = tok, *end = tok + n;
	while (p < end) {   /* no part of 4 bytes or more in WHY */
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t len = (size_t)((dot ? dot : end) - p);
		if (len >= 4 && len < sizeof why) {
			char part[sizeof why];
			memcpy(part, p, len);
			part[len] = '\0';
			if (strstr(why, part))
				fail_msg("reason holds a part of the token: %s", why);
		}
		p += len + 1;
	}
	if (secret)
		assert_null(strstr(why, secret));
	return NULL;
}

static json_t *expect(const struct jose_keys *ks, const char *tok, unsigned allow,
		      enum jose_status want)
{
	return expect_n(ks, tok, strlen(tok), allow, want, NULL);
}

/* TOK verifies with KS, its claims being PAYLOAD. */
static void expect_ok(const struct jose_keys *ks, const char *tok, unsigned allow)
{
	json_t *c = expect(ks, tok, allow, JOSE_OK), *want = J(PAYLOAD);
	assert_true(json_equal(c, want));
	json_decref(c);
	json_decref(want);
}

/* ---- base64url ---- */

/* Known vectors, every length up to 64 both ways, and the one alphabet. */
static void test_b64url_round_trip(void **state)
{
	(void)state;
	static const struct { const char *in, *out; } v[] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg" }, { "fooba", "Zm9vYmE" }, { "foobar", "Zm9vYmFy" },
		{ "\xfb\xff", "-_8" }, { "\xff\xff\xfe", "___-" },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		char *e = b64s(v[i].in);
		assert_string_equal(e, v[i].out);
		free(e);
		unsigned char *d;
		size_t dl;
		assert_int_equal(jose_b64url_decode(v[i].out, strlen(v[i].out), &d, &dl), 0);
		assert_int_equal(dl, strlen(v[i].in));
		assert_memory_equal(d, v[i].in, dl);
		assert_int_equal(d[dl], '\0');
		free(d);
	}
	unsigned char buf[64];
	for (size_t n = 0; n <= sizeof buf; n++) {
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)(i * 37 + n * 11 + 250);
		char *e = jose_b64url_encode(buf, n);
		assert_int_equal(strlen(e), (n * 8 + 5) / 6);
		assert_int_equal(strspn(e, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
				 strlen(e));
		unsigned char *d;
		size_t dl;
		assert_int_equal(jose_b64url_decode(e, strlen(e), &d, &dl), 0);
		assert_int_equal(dl, n);
		assert_memory_equal(d, buf, n);
		free(d);
		free(e);
	}
}

/* Padding, white space, other alphabets, impossible lengths, stray bits
 * and NUL bytes are refused, leaving *OUT NULL. */
static void test_b64url_strict(void **state)
{
	(void)state;
	static const char *bad[] = {
		"Zg==", "Zg=", "Zm9v\n", "Zm 9v", " Zm9v", "Z", "Zm9vY", "Zh", "Zm9",
		"ab+/", "a/", "Zm9v.", "\xc3\xa9\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		unsigned char *d = (unsigned char *)bad;
		size_t dl = 99;
		if (jose_b64url_decode(bad[i], strlen(bad[i]), &d, &dl) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_null(d);
		assert_int_equal(dl, 0);
	}
	unsigned char *d;
	size_t dl;
	assert_int_equal(jose_b64url_decode("Zm\0v", 4, &d, &dl), -1);
	/* the length given is what counts, not a NUL after it */
	assert_int_equal(jose_b64url_decode("Zm9vYmFy", 4, &d, &dl), 0);
	assert_int_equal(dl, 3);
	assert_memory_equal(d, "foo", 3);
	free(d);
}

/* ---- random strings and PKCE ---- */

#define B64URL_SET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

/* RFC 7636 appendix B, then fresh pairs: 43 characters of the unreserved
 * set, the challenge of each verifier, no two alike. */
static void test_pkce(void **state)
{
	(void)state;
	char v[44], c[44], v2[44], c2[44];
	assert_int_equal(jose_pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", c), 0);
	assert_string_equal(c, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");

	assert_int_equal(jose_pkce_pair(v, c), 0);
	assert_int_equal(jose_pkce_pair(v2, c2), 0);
	assert_int_equal(strlen(v), 43);
	assert_int_equal(strlen(c), 43);
	assert_int_equal(strspn(v, B64URL_SET), 43);
	assert_int_equal(strspn(c, B64URL_SET), 43);
	assert_string_not_equal(v, v2);
	assert_string_not_equal(c, c2);

	unsigned char h[32];
	unsigned hl;
	assert_int_equal(EVP_Digest(v, 43, h, &hl, EVP_sha256(), NULL), 1);
	char *want = jose_b64url_encode(h, hl);
	assert_string_equal(c, want);
	free(want);
	unsigned char *raw;
	size_t rl;
	assert_int_equal(jose_b64url_decode(v, 43, &raw, &rl), 0);
	assert_int_equal(rl, 32);   /* 32 random bytes */
	free(raw);
}

/* A random token is as long as asked, of base64url characters, fresh. */
static void test_random_token(void **state)
{
	(void)state;
	char a[33], b[33], one[2];
	assert_int_equal(jose_random_token(a, sizeof a), 0);
	assert_int_equal(jose_random_token(b, sizeof b), 0);
	assert_int_equal(strlen(a), 32);
	assert_int_equal(strspn(a, B64URL_SET), 32);
	assert_string_not_equal(a, b);
	assert_int_equal(jose_random_token(one, sizeof one), 0);
	assert_int_equal(strlen(one), 1);
	assert_int_equal(jose_random_token(one, 1), -1);
	assert_int_equal(jose_random_token(NULL, 8), -1);
}

/* ---- algorithms ---- */

static void test_alg_names(void **state)
{
	(void)state;
	static const char *names[] = { "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
				       "ES256", "ES384", "ES512", "EdDSA" };
	unsigned all = 0;
	for (size_t i = 0; i < 10; i++) {
		unsigned b = jose_alg_parse(names[i]);
		assert_int_equal(b, 1u << i);
		assert_string_equal(jose_alg_name(b), names[i]);
		all |= b;
	}
	assert_int_equal(all, JOSE_ALG_ALL);
	assert_int_equal(JOSE_ALG_DEFAULT, JOSE_RS256 | JOSE_PS256 | JOSE_ES256 | JOSE_EDDSA);
	static const char *refused[] = { "none", "HS256", "HS512", "rs256", "EDDSA", "Ed25519", "", "RS2560" };
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		assert_int_equal(jose_alg_parse(refused[i]), 0);
	assert_int_equal(jose_alg_parse(NULL), 0);
	assert_string_equal(jose_alg_name(0), "?");
	assert_string_equal(jose_alg_name(JOSE_RS256 | JOSE_RS384), "?");
}

/* Every status has its own text. */
static void test_status_text(void **state)
{
	(void)state;
	for (int i = JOSE_OK; i <= JOSE_INTERNAL; i++) {
		const char *t = jose_status_text((enum jose_status)i);
		assert_true(t[0] && strcmp(t, "?") != 0);
		for (int j = JOSE_OK; j < i; j++)
			assert_string_not_equal(t, jose_status_text((enum jose_status)j));
	}
}

/* ---- key sets ---- */

/* Each kind of key is kept with its kid; private members are ignored. */
static void test_keys_parse(void **state)
{
	(void)state;
	json_t *withd = jwk(ec256, "e1", "ES256");
	json_object_set_new(withd, "d", json_string("bm90IGEgcmVhbCBwcml2YXRlIGtleQ"));
	json_object_set_new(withd, "use", json_string("sig"));
	json_object_set_new(withd, "key_ops", json_pack("[s]", "verify"));
	json_t *set = jwks(6, jwk(rsa, "r1", NULL), withd, jwk(ec384, "e2", NULL),
			   jwk(ec521, NULL, NULL), jwk(ed, "ed", "EdDSA"), jwk(rsa2, "r2", "PS256"));
	char why[256] = "x";
	struct jose_keys *k = jose_keys_parse(set, why, sizeof why);
	assert_non_null(k);
	assert_string_equal(why, "");
	assert_int_equal(jose_keys_count(k), 6);
	assert_true(jose_keys_has_kid(k, "r1"));
	assert_true(jose_keys_has_kid(k, "e1"));
	assert_true(jose_keys_has_kid(k, "ed"));
	assert_true(jose_keys_has_kid(k, "r2"));
	assert_false(jose_keys_has_kid(k, "R1"));
	assert_false(jose_keys_has_kid(k, ""));
	assert_false(jose_keys_has_kid(k, NULL));
	jose_keys_free(k);
	json_decref(set);
	assert_int_equal(jose_keys_count(NULL), 0);
	jose_keys_free(NULL);
}

/* A JWK with MEMBER set to VALUE (JSON text) in PK's JWK. */
static json_t *jwk_with(EVP_PKEY *pk, const char *member, const char *value)
{
	json_t *j = jwk(pk, "k", NULL);
	json_object_set_new(j, member, J(value));
	return j;
}

/* Asserts that a set of JWK alone is refused with a reason holding WANT. */
static void expect_refused_key(json_t *key, const char *want)
{
	json_t *set = jwks(1, key);
	char why[256] = "";
	struct jose_keys *k = jose_keys_parse(set, why, sizeof why);
	if (k || !strstr(why, want))
		fail_msg("set %s, reason \"%s\", wanted \"%s\"", k ? "kept" : "refused", why, want);
	json_decref(set);
}

/* Every key that cannot be used is skipped with a reason; a set of them
 * alone is refused. */
static void test_keys_skipped(void **state)
{
	(void)state;
	expect_refused_key(jwk(rsa1024, "weak", "RS256"), "1024 bits");
	expect_refused_key(J("{\"kty\":\"oct\",\"k\":\"c2VjcmV0\",\"alg\":\"HS256\"}"), "symmetric");
	expect_refused_key(jwk_with(rsa, "use", "\"enc\""), "\"use\"");
	expect_refused_key(jwk_with(rsa, "use", "1"), "\"use\"");
	expect_refused_key(jwk_with(rsa, "key_ops", "[\"encrypt\",\"wrapKey\"]"), "key_ops");
	expect_refused_key(jwk_with(rsa, "alg", "\"RSA-OAEP\""), "\"alg\"");
	expect_refused_key(jwk_with(rsa, "alg", "\"HS256\""), "\"alg\"");
	expect_refused_key(jwk_with(rsa, "alg", "\"ES256\""), "key type");
	expect_refused_key(jwk_with(ec256, "alg", "\"ES384\""), "key type");
	expect_refused_key(jwk_with(ed, "alg", "\"RS256\""), "key type");
	expect_refused_key(jwk_with(rsa, "kid", "7"), "\"kid\"");
	expect_refused_key(jwk_with(rsa, "kty", "\"RSA2\""), "unknown");
	expect_refused_key(jwk_with(rsa, "kty", "null"), "kty");
	expect_refused_key(jwk_with(rsa, "e", "\"AAE\""), "exponent");     /* e = 1 */
	expect_refused_key(jwk_with(rsa, "e", "\"AQAA\""), "exponent");    /* even */
	expect_refused_key(jwk_with(rsa, "n", "\"a+b\""), "\"n\"");
	expect_refused_key(jwk_with(ec256, "crv", "\"P-192\""), "curve");
	expect_refused_key(jwk_with(ed, "crv", "\"Ed448\""), "Ed25519");
	expect_refused_key(jwk_with(ed, "x", "\"AAAA\""), "32 bytes");
	expect_refused_key(jwk_with(ec256, "x", "\"AAAA\""), "32 bytes");
	expect_refused_key(J("[1]"), "not an object");
	/* a point off the curve: y + 1 */
	json_t *off = jwk(ec256, "k", NULL);
	unsigned char *y;
	size_t yl;
	const char *ys = json_string_value(json_object_get(off, "y"));
	assert_int_equal(jose_b64url_decode(ys, strlen(ys), &y, &yl), 0);
	y[yl - 1] ^= 1;
	char *y2 = jose_b64url_encode(y, yl);
	json_object_set_new(off, "y", json_string(y2));
	free(y);
	free(y2);
	expect_refused_key(off, "not on the curve");

	/* mixed: the good key is kept, the first skipped one is named */
	json_t *set = jwks(4, J("{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}"), jwk(rsa1024, "w", NULL),
			   jwk_with(rsa, "use", "\"enc\""), jwk(ec256, "good", NULL));
	char why[256];
	struct jose_keys *k = jose_keys_parse(set, why, sizeof why);
	assert_non_null(k);
	assert_int_equal(jose_keys_count(k), 1);
	assert_true(jose_keys_has_kid(k, "good"));
	assert_false(jose_keys_has_kid(k, "w"));
	assert_non_null(strstr(why, "3 keys skipped; key 0: a symmetric"));
	jose_keys_free(k);
	json_decref(set);
}

/* What is not a JWKS, and an empty one, are refused. */
static void test_keys_not_a_set(void **state)
{
	(void)state;
	static const char *bad[] = { "{}", "[]", "{\"keys\":{}}", "{\"keys\":\"x\"}", "{\"keys\":[]}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *j = J(bad[i]);
		char why[128] = "";
		assert_null(jose_keys_parse(j, why, sizeof why));
		assert_true(why[0] != '\0');
		json_decref(j);
	}
	assert_null(jose_keys_parse(NULL, NULL, 0));
}

/* ---- verification ---- */

/* Every algorithm verifies with a key of its kind, with and without kid. */
static void test_verify_each_alg(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(5, jwk(rsa, "r", NULL), jwk(ec256, "e256", NULL),
				     jwk(ec384, "e384", NULL), jwk(ec521, "e521", NULL), jwk(ed, "ed", NULL));
	static const struct { const char *alg, *kid; } v[] = {
		{ "RS256", "r" }, { "RS384", "r" }, { "RS512", "r" }, { "PS256", "r" },
		{ "PS384", "r" }, { "PS512", "r" }, { "ES256", "e256" }, { "ES384", "e384" },
		{ "ES512", "e521" }, { "EdDSA", "ed" },
	};
	EVP_PKEY *pk[] = { rsa, rsa, rsa, rsa, rsa, rsa, ec256, ec384, ec521, ed };
	for (size_t i = 0; i < 10; i++) {
		char hdr[128];
		snprintf(hdr, sizeof hdr, "{\"alg\":\"%s\",\"kid\":\"%s\",\"typ\":\"at+jwt\"}",
			 v[i].alg, v[i].kid);
		char *t = token(pk[i], v[i].alg, hdr, PAYLOAD);
		expect_ok(k, t, JOSE_ALG_ALL);
		expect_ok(k, t, jose_alg_parse(v[i].alg));
		free(t);
		snprintf(hdr, sizeof hdr, "{\"alg\":\"%s\"}", v[i].alg);
		t = token(pk[i], v[i].alg, hdr, PAYLOAD);
		expect_ok(k, t, JOSE_ALG_ALL);
		free(t);
	}
	jose_keys_free(k);
}

/* "none", with an empty signature or any, is refused whatever is allowed. */
static void test_alg_none(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(1, jwk(rsa, "r", NULL));
	char *h = b64s("{\"alg\":\"none\"}"), *p = b64s(PAYLOAD);
	char *t = join(h, p, "");
	expect(k, t, ~0u, JOSE_ALG_REFUSED);
	free(t);
	t = join(h, p, "AAAA");
	expect(k, t, ~0u, JOSE_ALG_REFUSED);
	free(t);
	free(h);
	h = b64s("{\"alg\":\"None\",\"typ\":\"JWT\"}");
	t = join(h, p, "");
	expect(k, t, ~0u, JOSE_ALG_REFUSED);
	free(t);
	free(h);
	free(p);
	jose_keys_free(k);
}

/* HS256 keyed with the RSA public key's PEM (the key confusion attack) is
 * refused, with and without the RSA key's kid, whatever is allowed. */
static void test_hs256_confusion(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(1, jwk(rsa, "r", NULL));
	BIO *b = BIO_new(BIO_s_mem());
	assert_int_equal(PEM_write_bio_PUBKEY(b, rsa), 1);
	char *pem;
	long pl = BIO_get_mem_data(b, &pem);
	assert_true(pl > 0);
	const char *hdrs[] = { "{\"alg\":\"HS256\",\"kid\":\"r\"}", "{\"alg\":\"HS256\"}" };
	for (int i = 0; i < 2; i++) {
		char *h = b64s(hdrs[i]), *p = b64s(PAYLOAD);
		char in[1024];
		snprintf(in, sizeof in, "%s.%s", h, p);
		unsigned char mac[32];
		size_t ml = 0;
		assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, pem, (size_t)pl,
					  (unsigned char *)in, strlen(in), mac, sizeof mac, &ml));
		char *s = jose_b64url_encode(mac, ml);
		char *t = join(h, p, s);
		expect(k, t, ~0u, JOSE_ALG_REFUSED);
		expect(k, t, JOSE_ALG_ALL, JOSE_ALG_REFUSED);
		free(t);
		free(s);
		free(h);
		free(p);
	}
	BIO_free(b);
	jose_keys_free(k);
}

/* A token T with the character at OFFSET from the start of part PART
 * (0, 1, 2) changed to another base64url character (malloc'd). */
static char *altered(const char *t, int part, size_t offset)
{
	char *a = strdup(t), *p = a;
	for (int i = 0; i < part; i++)
		p = strchr(p, '.') + 1;
	p[offset] = p[offset] == 'A' ? 'B' : 'A';
	return a;
}

/* A changed signature or payload does not verify, for each kind of key;
 * a payload taken from another token signed by the same key neither. */
static void test_altered(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(3, jwk(rsa, "r", NULL), jwk(ec256, "e", NULL), jwk(ed, "ed", NULL));
	const char *algs[] = { "RS256", "PS256", "ES256", "EdDSA" };
	EVP_PKEY *pk[] = { rsa, rsa, ec256, ed };
	for (int i = 0; i < 4; i++) {
		char hdr[64];
		snprintf(hdr, sizeof hdr, "{\"alg\":\"%s\"}", algs[i]);
		char *t = token(pk[i], algs[i], hdr, PAYLOAD);
		expect_ok(k, t, JOSE_ALG_ALL);
		char *a = altered(t, 2, 5);
		expect(k, a, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
		free(a);
		a = altered(t, 1, 10);
		expect(k, a, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
		free(a);
		/* another payload, signed by the same key, spliced in */
		char *t2 = token(pk[i], algs[i], hdr, "{\"sub\":\"admin\",\"exp\":1700000600}");
		char *p2 = strchr(t2, '.') + 1, *s1 = strrchr(t, '.') + 1;
		*strchr(p2, '.') = '\0';
		char *h = strndup(t, (size_t)(strchr(t, '.') - t));
		char *spliced = join(h, p2, s1);
		expect(k, spliced, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
		free(spliced);
		free(h);
		free(t2);
		free(t);
	}
	jose_keys_free(k);
}

/* A kid the set does not have asks for a refetch; a kid that is there but
 * of another kind of key does not verify. */
static void test_unknown_kid(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(2, jwk(rsa, "r", NULL), jwk(ec256, "e", NULL));
	char *t = token(rsa, "RS256", "{\"alg\":\"RS256\",\"kid\":\"rotated-secret-kid\"}", PAYLOAD);
	expect_n(k, t, strlen(t), JOSE_ALG_ALL, JOSE_UNKNOWN_KID, "rotated-secret-kid");
	assert_false(jose_keys_has_kid(k, "rotated-secret-kid"));
	free(t);
	t = token(rsa, "RS256", "{\"alg\":\"RS256\",\"kid\":\"e\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	/* an empty set: no key fits */
	t = token(rsa, "RS256", "{\"alg\":\"RS256\"}", PAYLOAD);
	expect(NULL, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	jose_keys_free(k);
}

/* Without a kid every key of the alg's kind is tried. */
static void test_no_kid_two_keys(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(3, jwk(rsa, "a", NULL), jwk(ec256, NULL, NULL), jwk(rsa2, "b", NULL));
	char *t = token(rsa2, "RS256", "{\"alg\":\"RS256\"}", PAYLOAD);
	expect_ok(k, t, JOSE_ALG_DEFAULT);
	free(t);
	t = token(rsa, "PS256", "{\"alg\":\"PS256\"}", PAYLOAD);
	expect_ok(k, t, JOSE_ALG_DEFAULT);
	free(t);
	t = token(ec256, "ES256", "{\"alg\":\"ES256\"}", PAYLOAD);
	expect_ok(k, t, JOSE_ALG_DEFAULT);
	free(t);
	/* signed by a key not in the set */
	t = token(ec384, "ES384", "{\"alg\":\"ES384\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	/* two keys share a kid: both are tried */
	jose_keys_free(k);
	k = keyset(2, jwk(rsa, "same", NULL), jwk(rsa2, "same", NULL));
	t = token(rsa2, "RS256", "{\"alg\":\"RS256\",\"kid\":\"same\"}", PAYLOAD);
	expect_ok(k, t, JOSE_ALG_DEFAULT);
	free(t);
	jose_keys_free(k);
}

/* An alg outside the mask is refused before any key is tried. */
static void test_alg_not_allowed(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(2, jwk(rsa, "r", NULL), jwk(ec384, "e", NULL));
	char *t = token(rsa, "RS256", "{\"alg\":\"RS256\",\"kid\":\"r\"}", PAYLOAD);
	expect(k, t, JOSE_ES256 | JOSE_EDDSA, JOSE_ALG_REFUSED);
	expect(k, t, 0, JOSE_ALG_REFUSED);
	expect_ok(k, t, JOSE_RS256);
	free(t);
	t = token(rsa, "PS384", "{\"alg\":\"PS384\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_DEFAULT, JOSE_ALG_REFUSED);
	free(t);
	t = token(ec384, "ES384", "{\"alg\":\"ES384\",\"kid\":\"unknown\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_DEFAULT, JOSE_ALG_REFUSED);   /* refused before the kid is looked up */
	free(t);
	jose_keys_free(k);
}

/* A key that declares its alg verifies that alg alone. */
static void test_key_alg_mismatch(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(2, jwk(rsa, "r", "RS256"), jwk(ed, "ed", "EdDSA"));
	char *t = token(rsa, "PS256", "{\"alg\":\"PS256\",\"kid\":\"r\"}", PAYLOAD);
	char why[128];
	json_t *c;
	assert_int_equal(jose_verify(k, t, strlen(t), JOSE_ALG_ALL, &c, why, sizeof why),
			 JOSE_BAD_SIGNATURE);
	assert_non_null(strstr(why, "fits alg PS256"));
	free(t);
	t = token(rsa, "PS256", "{\"alg\":\"PS256\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	t = token(rsa, "RS256", "{\"alg\":\"RS256\",\"kid\":\"r\"}", PAYLOAD);
	expect_ok(k, t, JOSE_ALG_ALL);
	free(t);
	/* the header's alg names an RSA algorithm, the kid an Ed25519 key */
	t = token(rsa, "RS256", "{\"alg\":\"RS256\",\"kid\":\"ed\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	jose_keys_free(k);
}

/* ECDSA in DER (what OpenSSL gives) is not JWS: refused; a P-384
 * signature under ES256 neither. */
static void test_es256_der(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(2, jwk(ec256, "e", NULL), jwk(ec384, "e384", NULL));
	char *t = token_der(ec256, "ES256", "{\"alg\":\"ES256\",\"kid\":\"e\"}", PAYLOAD, true);
	char why[128];
	json_t *c;
	assert_int_equal(jose_verify(k, t, strlen(t), JOSE_ALG_ALL, &c, why, sizeof why),
			 JOSE_BAD_SIGNATURE);
	assert_non_null(strstr(why, "64 bytes (raw r || s)"));
	free(t);
	/* the raw form of the same key verifies */
	t = token(ec256, "ES256", "{\"alg\":\"ES256\",\"kid\":\"e\"}", PAYLOAD);
	expect_ok(k, t, JOSE_ALG_ALL);
	free(t);
	/* a P-384 signature (96 bytes) presented as ES256 */
	t = token(ec384, "ES384", "{\"alg\":\"ES256\"}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	/* r || s all zero, of the right length */
	char *h = b64s("{\"alg\":\"ES256\"}"), *p = b64s(PAYLOAD);
	unsigned char zero[64] = { 0 };
	char *s = jose_b64url_encode(zero, sizeof zero);
	t = join(h, p, s);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	free(s);
	free(h);
	free(p);
	jose_keys_free(k);
}

/* A token of header HDR (JSON text, or raw when it does not start with
 * '{' or '[') and payload PAY, with a junk signature, is MALFORMED. */
static void expect_malformed_parts(const struct jose_keys *k, const char *hdr, const char *pay)
{
	char *h = hdr[0] == '{' || hdr[0] == '[' || hdr[0] == '"' ? b64s(hdr) : strdup(hdr);
	char *p = b64s(pay);
	char *t = join(h, p, "AAAA");
	expect(k, t, JOSE_ALG_ALL, JOSE_MALFORMED);
	free(t);
	free(h);
	free(p);
}

/* What is not a compact JWS of JSON objects, or is too long, is MALFORMED. */
static void test_malformed(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(1, jwk(rsa, "r", NULL));
	char *good = token(rsa, "RS256", "{\"alg\":\"RS256\"}", PAYLOAD);
	expect_ok(k, good, JOSE_ALG_ALL);
	char *two = strndup(good, (size_t)(strrchr(good, '.') - good));
	expect(k, two, JOSE_ALG_ALL, JOSE_MALFORMED);
	size_t gl = strlen(good);
	char *four = malloc(gl + 6);
	snprintf(four, gl + 6, "%s.AAAA", good);
	expect(k, four, JOSE_ALG_ALL, JOSE_MALFORMED);
	char *bad = strdup(good);
	bad[3] = '+';
	expect(k, bad, JOSE_ALG_ALL, JOSE_MALFORMED);
	bad[3] = good[3];
	bad[gl - 1] = '=';
	expect(k, bad, JOSE_ALG_ALL, JOSE_MALFORMED);
	bad[gl - 1] = good[gl - 1];
	expect_n(k, bad, gl + 1, JOSE_ALG_ALL, JOSE_MALFORMED, NULL);   /* its NUL inside */
	bad[gl - 1] = 'B';   /* a second encoding of the signature: stray low bits */
	assert_int_equal(strlen(strrchr(good, '.') + 1), 342);   /* 256 bytes: 4 low bits unused */
	expect(k, bad, JOSE_ALG_ALL, JOSE_MALFORMED);
	bad[gl - 1] = good[gl - 1];
	expect_n(k, "", 0, JOSE_ALG_ALL, JOSE_MALFORMED, NULL);
	expect(k, "..", JOSE_ALG_ALL, JOSE_MALFORMED);
	expect(k, "...", JOSE_ALG_ALL, JOSE_MALFORMED);

	expect_malformed_parts(k, "bm90IGpzb24", PAYLOAD);     /* "not json" */
	expect_malformed_parts(k, "[\"alg\",\"RS256\"]", PAYLOAD);
	expect_malformed_parts(k, "\"RS256\"", PAYLOAD);
	expect_malformed_parts(k, "{\"alg\":\"RS256\",\"alg\":\"RS256\"}", PAYLOAD);
	expect_malformed_parts(k, "{\"typ\":\"JWT\"}", PAYLOAD);
	expect_malformed_parts(k, "{\"alg\":256}", PAYLOAD);
	expect_malformed_parts(k, "{\"alg\":\"RS256\",\"kid\":1}", PAYLOAD);
	expect_malformed_parts(k, "{\"alg\":\"RS256\",\"typ\":[]}", PAYLOAD);
	expect_malformed_parts(k, "{\"alg\":\"RS256\",\"kid\":\"a\\u0000b\"}", PAYLOAD);

	/* 20 KiB: over the cap, however good the rest */
	size_t big = 20 * 1024;
	char *pay = malloc(big + 64);
	snprintf(pay, big + 64, "{\"sub\":\"%0*d\"}", (int)big, 0);
	char *t = token(rsa, "RS256", "{\"alg\":\"RS256\"}", pay);
	assert_true(strlen(t) > JOSE_MAX_TOKEN);
	expect(k, t, JOSE_ALG_ALL, JOSE_MALFORMED);
	free(t);
	free(pay);

	/* a signed payload that is not an object, or not JSON, or has twins */
	const char *pays[] = { "[1,2]", "\"s\"", "nope", "{\"a\":1,\"a\":2}", "" };
	for (int i = 0; i < 5; i++) {
		t = token(rsa, "RS256", "{\"alg\":\"RS256\"}", pays[i]);
		expect(k, t, JOSE_ALG_ALL, JOSE_MALFORMED);
		free(t);
	}
	free(two);
	free(four);
	free(bad);
	free(good);
	jose_keys_free(k);
}

/* "crit" is refused (no extension is understood); "typ" must be JWT or
 * at+jwt, with or without "application/", in any case. */
static void test_crit_and_typ(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(1, jwk(ed, "ed", NULL));
	char *t = token(ed, "EdDSA", "{\"alg\":\"EdDSA\",\"crit\":[\"exp\"],\"exp\":1}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_ALG_REFUSED);
	free(t);
	t = token(ed, "EdDSA", "{\"alg\":\"EdDSA\",\"crit\":[\"b64\"],\"b64\":false}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_ALG_REFUSED);
	free(t);
	t = token(ed, "EdDSA", "{\"alg\":\"EdDSA\",\"crit\":[]}", PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_ALG_REFUSED);
	free(t);
	const char *good[] = { "JWT", "jwt", "at+jwt", "application/at+jwt", "AT+JWT", "application/jwt" };
	for (int i = 0; i < 6; i++) {
		char hdr[96];
		snprintf(hdr, sizeof hdr, "{\"alg\":\"EdDSA\",\"typ\":\"%s\"}", good[i]);
		t = token(ed, "EdDSA", hdr, PAYLOAD);
		expect_ok(k, t, JOSE_ALG_ALL);
		free(t);
	}
	const char *wrong[] = { "dpop+jwt", "secevent+jwt", "JOSE", "", "application/", "at+jwt " };
	for (int i = 0; i < 6; i++) {
		char hdr[96];
		snprintf(hdr, sizeof hdr, "{\"alg\":\"EdDSA\",\"typ\":\"%s\"}", wrong[i]);
		t = token(ed, "EdDSA", hdr, PAYLOAD);
		expect(k, t, JOSE_ALG_ALL, JOSE_WRONG_TYPE);
		free(t);
	}
	/* a key in the header itself is never used */
	json_t *own = jwk(ec256, NULL, NULL);
	char *js = json_dumps(own, JSON_COMPACT), hdr[512];
	snprintf(hdr, sizeof hdr, "{\"alg\":\"ES256\",\"jwk\":%s}", js);
	t = token(ec256, "ES256", hdr, PAYLOAD);
	expect(k, t, JOSE_ALG_ALL, JOSE_BAD_SIGNATURE);
	free(t);
	free(js);
	json_decref(own);
	jose_keys_free(k);
}

/* ---- claims ---- */

/* The status of the claims CLAIMS (JSON text) against E; WHY must be set
 * for anything but JOSE_OK. */
static enum jose_status claims(const char *text, const struct jose_expect *e)
{
	json_t *c = J(text);
	char why[128] = "";
	enum jose_status st = jose_check_claims(c, e, NOW, why, sizeof why);
	assert_true(st == JOSE_OK ? why[0] == '\0' : why[0] != '\0');
	json_decref(c);
	return st;
}

static const char *const issuers[] = { "https://as.example", "https://other.example", NULL };

/* exp, with and without leeway, and when required. */
static void test_claims_exp(void **state)
{
	(void)state;
	struct jose_expect e = { .require_exp = true };
	assert_int_equal(claims("{\"exp\":1700000001}", &e), JOSE_OK);
	assert_int_equal(claims("{\"exp\":1700000000.5}", &e), JOSE_OK);
	assert_int_equal(claims("{\"exp\":1700000000}", &e), JOSE_EXPIRED);   /* exp is the first bad second */
	assert_int_equal(claims("{\"exp\":1699990000}", &e), JOSE_EXPIRED);
	assert_int_equal(claims("{\"exp\":0}", &e), JOSE_EXPIRED);
	e.leeway = 60;
	assert_int_equal(claims("{\"exp\":1699999950}", &e), JOSE_OK);
	assert_int_equal(claims("{\"exp\":1699999940}", &e), JOSE_EXPIRED);
	e.leeway = -100;   /* counts as 0 */
	assert_int_equal(claims("{\"exp\":1699999999}", &e), JOSE_EXPIRED);
	assert_int_equal(claims("{\"sub\":\"u\"}", &e), JOSE_MALFORMED);
	assert_int_equal(claims("{\"exp\":\"1800000000\"}", &e), JOSE_MALFORMED);
	assert_int_equal(claims("{\"exp\":null}", &e), JOSE_MALFORMED);
	e.require_exp = false;
	assert_int_equal(claims("{\"sub\":\"u\"}", &e), JOSE_OK);
	assert_int_equal(claims("{\"exp\":\"1800000000\"}", &e), JOSE_MALFORMED);
	assert_int_equal(claims("{\"exp\":1e300}", &e), JOSE_OK);
	assert_int_equal(claims("{\"exp\":-1e300}", &e), JOSE_EXPIRED);
}

/* nbf and iat in the future, with and without leeway. */
static void test_claims_nbf_iat(void **state)
{
	(void)state;
	struct jose_expect e = { .leeway = 0 };
	assert_int_equal(claims("{\"nbf\":1700000000,\"iat\":1700000000}", &e), JOSE_OK);
	assert_int_equal(claims("{\"nbf\":1700000001}", &e), JOSE_NOT_YET_VALID);
	assert_int_equal(claims("{\"iat\":1700000001}", &e), JOSE_NOT_YET_VALID);
	assert_int_equal(claims("{\"nbf\":true}", &e), JOSE_MALFORMED);
	assert_int_equal(claims("{\"iat\":{}}", &e), JOSE_MALFORMED);
	e.leeway = 30;
	assert_int_equal(claims("{\"nbf\":1700000030,\"iat\":1700000030}", &e), JOSE_OK);
	assert_int_equal(claims("{\"nbf\":1700000031}", &e), JOSE_NOT_YET_VALID);
	assert_int_equal(claims("{\"iat\":1700000031}", &e), JOSE_NOT_YET_VALID);
	/* expired wins over not yet valid: checked first */
	assert_int_equal(claims("{\"exp\":1,\"nbf\":1800000000}", &e), JOSE_EXPIRED);
}

/* aud as a string or an array; the expected audience matched exactly. */
static void test_claims_aud(void **state)
{
	(void)state;
	struct jose_expect e = { .audience = "https://mcp.example/" };
	assert_int_equal(claims("{\"aud\":\"https://mcp.example/\"}", &e), JOSE_OK);
	assert_int_equal(claims("{\"aud\":[\"x\",\"https://mcp.example/\"]}", &e), JOSE_OK);
	assert_int_equal(claims("{\"aud\":\"https://mcp.example\"}", &e), JOSE_WRONG_AUDIENCE);
	assert_int_equal(claims("{\"aud\":\"HTTPS://mcp.example/\"}", &e), JOSE_WRONG_AUDIENCE);
	assert_int_equal(claims("{\"aud\":[\"x\",\"y\"]}", &e), JOSE_WRONG_AUDIENCE);
	assert_int_equal(claims("{\"aud\":[]}", &e), JOSE_WRONG_AUDIENCE);
	assert_int_equal(claims("{\"sub\":\"u\"}", &e), JOSE_WRONG_AUDIENCE);
	assert_int_equal(claims("{\"aud\":7}", &e), JOSE_MALFORMED);
	assert_int_equal(claims("{\"aud\":[\"https://mcp.example/\",7]}", &e), JOSE_MALFORMED);
	e.audience = NULL;
	assert_int_equal(claims("{\"aud\":\"anything\"}", &e), JOSE_OK);
	assert_int_equal(claims("{\"sub\":\"u\"}", &e), JOSE_OK);
}

/* iss among the accepted ones, exactly. */
static void test_claims_iss(void **state)
{
	(void)state;
	struct jose_expect e = { .issuers = issuers };
	assert_int_equal(claims("{\"iss\":\"https://as.example\"}", &e), JOSE_OK);
	assert_int_equal(claims("{\"iss\":\"https://other.example\"}", &e), JOSE_OK);
	assert_int_equal(claims("{\"iss\":\"https://as.example/\"}", &e), JOSE_WRONG_ISSUER);
	assert_int_equal(claims("{\"iss\":\"https://evil.example\"}", &e), JOSE_WRONG_ISSUER);
	assert_int_equal(claims("{\"sub\":\"u\"}", &e), JOSE_WRONG_ISSUER);
	assert_int_equal(claims("{\"iss\":[\"https://as.example\"]}", &e), JOSE_MALFORMED);
	const char *const none[] = { NULL };
	e.issuers = none;
	assert_int_equal(claims("{\"iss\":\"https://as.example\"}", &e), JOSE_WRONG_ISSUER);
	e.issuers = NULL;
	assert_int_equal(claims("{\"iss\":\"https://whoever.example\"}", &e), JOSE_OK);
}

/* A whole RFC 9068 access token: verified, then its claims checked. */
static void test_verify_then_check(void **state)
{
	(void)state;
	struct jose_keys *k = keyset(1, jwk(rsa, "2026-11", "RS256"));
	char *t = token(rsa, "RS256", "{\"alg\":\"RS256\",\"typ\":\"at+jwt\",\"kid\":\"2026-11\"}",
			"{\"iss\":\"https://as.example\",\"aud\":[\"https://mcp.example/\"],"
			"\"sub\":\"u1\",\"client_id\":\"c\",\"iat\":1699999990,\"exp\":1700000290,"
			"\"jti\":\"j1\",\"scope\":\"tools:call\"}");
	json_t *c = expect(k, t, JOSE_ALG_DEFAULT, JOSE_OK);
	struct jose_expect e = { .issuers = issuers, .audience = "https://mcp.example/",
				 .leeway = 30, .require_exp = true };
	char why[64];
	assert_int_equal(jose_check_claims(c, &e, NOW, why, sizeof why), JOSE_OK);
	assert_int_equal(jose_check_claims(c, &e, NOW + 400, why, sizeof why), JOSE_EXPIRED);
	assert_int_equal(jose_check_claims(c, &e, NOW - 100, why, sizeof why), JOSE_NOT_YET_VALID);
	assert_string_equal(json_string_value(json_object_get(c, "scope")), "tools:call");
	json_decref(c);
	free(t);
	jose_keys_free(k);
}

/* ---- keys for every test ---- */

static int setup(void **state)
{
	(void)state;
	rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa2 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa1024 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	ec256 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	ec384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	ec521 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-521");
	ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	return rsa && rsa2 && rsa1024 && ec256 && ec384 && ec521 && ed ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	EVP_PKEY *all[] = { rsa, rsa2, rsa1024, ec256, ec384, ec521, ed };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		EVP_PKEY_free(all[i]);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64url_round_trip),
		cmocka_unit_test(test_b64url_strict),
		cmocka_unit_test(test_pkce),
		cmocka_unit_test(test_random_token),
		cmocka_unit_test(test_alg_names),
		cmocka_unit_test(test_status_text),
		cmocka_unit_test(test_keys_parse),
		cmocka_unit_test(test_keys_skipped),
		cmocka_unit_test(test_keys_not_a_set),
		cmocka_unit_test(test_verify_each_alg),
		cmocka_unit_test(test_alg_none),
		cmocka_unit_test(test_hs256_confusion),
		cmocka_unit_test(test_altered),
		cmocka_unit_test(test_unknown_kid),
		cmocka_unit_test(test_no_kid_two_keys),
		cmocka_unit_test(test_alg_not_allowed),
		cmocka_unit_test(test_key_alg_mismatch),
		cmocka_unit_test(test_es256_der),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_crit_and_typ),
		cmocka_unit_test(test_claims_exp),
		cmocka_unit_test(test_claims_nbf_iat),
		cmocka_unit_test(test_claims_aud),
		cmocka_unit_test(test_claims_iss),
		cmocka_unit_test(test_verify_then_check),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
