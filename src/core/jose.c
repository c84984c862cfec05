/*
 * jose.c - JOSE verification for OAuth 2.1 access tokens: strict
 * base64url, public keys built from a JWKS with OpenSSL 3's EVP API
 * (OSSL_PARAM_BLD and EVP_PKEY_fromdata: no deprecated RSA_* or EC_KEY_*),
 * compact JWS verification, the claim checks of RFC 7519 and RFC 9068,
 * and PKCE for the OAuth client.
 *
 * It fails closed: a token is good only when every step says so, and each
 * step that cannot run (no memory, OpenSSL refusing a key) refuses. The
 * payload of a token is parsed only after its signature verified, so an
 * attacker's JSON meets the parser only through the header (a few members).
 * One file: the three parts (encoding, keys, tokens) share the algorithm
 * table and are about 800 lines together.
 */
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED

#include "jose.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

/* Fills WHY (WN bytes; may be NULL) and returns S: fail in one step. */
__attribute__((format(printf, 4, 5)))
static enum jose_status fail(char *why, size_t wn, enum jose_status s, const char *fmt, ...)
{
	if (why && wn) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, wn, fmt, ap);
		va_end(ap);
	}
	return s;
}

/* ---- base64url ---- */

static const char b64url_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The value of base64url digit C, or -1. */
static int b64url_digit(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/* Decodes strictly; see jose.h. */
int jose_b64url_decode(const char *s, size_t n, unsigned char **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	if (n % 4 == 1)
		return -1;   /* 6 bits cannot end a byte */
	unsigned char *o = malloc(n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0) + 1);
	unsigned acc = 0, bits = 0;
	size_t j = 0;
	if (!o)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int d = b64url_digit((unsigned char)s[i]);
		if (d < 0) {
			free(o);
			return -1;
		}
		acc = ((acc << 6) | (unsigned)d) & 0xfff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[j++] = (unsigned char)(acc >> bits);
		}
	}
	if (acc & ((1u << bits) - 1)) {
		free(o);   /* stray bits: a second encoding of the same bytes */
		return -1;
	}
	o[j] = '\0';
	*out = o;
	*outlen = j;
	return 0;
}

/* Writes the N bytes at P in base64url at DST (no NUL); returns the length. */
static size_t b64url_put(char *dst, const unsigned char *p, size_t n)
{
	size_t j = 0, i = 0;
	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		dst[j++] = b64url_chars[v >> 18];
		dst[j++] = b64url_chars[(v >> 12) & 63];
		dst[j++] = b64url_chars[(v >> 6) & 63];
		dst[j++] = b64url_chars[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		dst[j++] = b64url_chars[v >> 18];
		dst[j++] = b64url_chars[(v >> 12) & 63];
		if (i + 1 < n)
			dst[j++] = b64url_chars[(v >> 6) & 63];
	}
	return j;
}

/* Encodes; see jose.h. */
char *jose_b64url_encode(const void *p, size_t n)
{
	char *s = malloc(n / 3 * 4 + 4);
	if (s)
		s[b64url_put(s, p, n)] = '\0';
	return s;
}

/* ---- random strings and PKCE ---- */

/* N - 1 random base64url characters: 64 divides 256, so each is uniform. */
int jose_random_token(char *out, size_t n)
{
	if (!out || n < 2 || n - 1 > INT_MAX || RAND_bytes((unsigned char *)out, (int)(n - 1)) != 1)
		return -1;
	for (size_t i = 0; i < n - 1; i++)
		out[i] = b64url_chars[(unsigned char)out[i] & 63];
	out[n - 1] = '\0';
	return 0;
}

/* The S256 challenge of VERIFIER. */
int jose_pkce_challenge(const char *verifier, char challenge[44])
{
	unsigned char h[32];
	unsigned int hl = 0;
	if (EVP_Digest(verifier, strlen(verifier), h, &hl, EVP_sha256(), NULL) != 1 || hl != 32)
		return -1;
	challenge[b64url_put(challenge, h, hl)] = '\0';
	return 0;
}

/* A verifier from 32 random bytes and its challenge. */
int jose_pkce_pair(char verifier[44], char challenge[44])
{
	unsigned char r[32];
	verifier[0] = challenge[0] = '\0';
	if (RAND_bytes(r, sizeof r) != 1)
		return -1;
	verifier[b64url_put(verifier, r, sizeof r)] = '\0';
	OPENSSL_cleanse(r, sizeof r);
	if (jose_pkce_challenge(verifier, challenge) < 0) {
		verifier[0] = '\0';
		return -1;
	}
	return 0;
}

/* ---- algorithms ---- */

enum key_kind { KIND_RSA, KIND_EC, KIND_OKP };

static const struct alg_info {
	const char *name;
	unsigned bit;
	const char *md;          /* the digest's OpenSSL name; NULL for EdDSA */
	enum key_kind kind;
	bool pss;
	int nid;                 /* the curve (EC, OKP) */
	size_t coord;            /* bytes of a coordinate (EC) */
} algs[] = {
	{ "RS256", JOSE_RS256, "SHA256", KIND_RSA, false, 0, 0 },
	{ "RS384", JOSE_RS384, "SHA384", KIND_RSA, false, 0, 0 },
	{ "RS512", JOSE_RS512, "SHA512", KIND_RSA, false, 0, 0 },
	{ "PS256", JOSE_PS256, "SHA256", KIND_RSA, true, 0, 0 },
	{ "PS384", JOSE_PS384, "SHA384", KIND_RSA, true, 0, 0 },
	{ "PS512", JOSE_PS512, "SHA512", KIND_RSA, true, 0, 0 },
	{ "ES256", JOSE_ES256, "SHA256", KIND_EC, false, NID_X9_62_prime256v1, 32 },
	{ "ES384", JOSE_ES384, "SHA384", KIND_EC, false, NID_secp384r1, 48 },
	{ "ES512", JOSE_ES512, "SHA512", KIND_EC, false, NID_secp521r1, 66 },
	{ "EdDSA", JOSE_EDDSA, NULL, KIND_OKP, false, NID_ED25519, 0 },
};
#define NALGS (sizeof algs / sizeof algs[0])

/* The entry of the algorithm called NAME, or NULL. */
static const struct alg_info *alg_by_name(const char *name)
{
	for (size_t i = 0; i < NALGS; i++)
		if (strcmp(algs[i].name, name) == 0)
			return &algs[i];
	return NULL;
}

/* The algorithm's bit, or 0. */
unsigned jose_alg_parse(const char *name)
{
	const struct alg_info *a = name ? alg_by_name(name) : NULL;
	return a ? a->bit : 0;
}

/* The algorithm's name, or "?". */
const char *jose_alg_name(unsigned alg)
{
	for (size_t i = 0; i < NALGS; i++)
		if (algs[i].bit == alg)
			return algs[i].name;
	return "?";
}

/* The algorithms a key of KIND on the curve NID can verify. */
static unsigned kind_algs(enum key_kind kind, int nid)
{
	unsigned m = 0;
	for (size_t i = 0; i < NALGS; i++)
		if (algs[i].kind == kind && (kind == KIND_RSA || algs[i].nid == nid))
			m |= algs[i].bit;
	return m;
}

/* ---- keys ---- */

struct jose_key {
	char *kid;               /* NULL: none */
	enum key_kind kind;      /* kty */
	int nid;                 /* crv (EC, OKP); 0 for RSA */
	unsigned alg;            /* its declared alg; 0: none */
	unsigned fits;           /* what it may verify: its type's algorithms, or just alg */
	EVP_PKEY *pk;
};

struct jose_keys {
	struct jose_key *k;
	size_t n;
};

/* Frees the set. */
void jose_keys_free(struct jose_keys *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++) {
		free(k->k[i].kid);
		EVP_PKEY_free(k->k[i].pk);
	}
	free(k->k);
	free(k);
}

size_t jose_keys_count(const struct jose_keys *k)
{
	return k ? k->n : 0;
}

bool jose_keys_has_kid(const struct jose_keys *k, const char *kid)
{
	for (size_t i = 0; k && kid && i < k->n; i++)
		if (k->k[i].kid && strcmp(k->k[i].kid, kid) == 0)
			return true;
	return false;
}

/* The base64url member NAME of JWK decoded into *OUT (freed by the
 * caller), of *LEN bytes. Returns 0, or -1 with WHY. */
static int member_bytes(const json_t *jwk, const char *name, unsigned char **out, size_t *len,
			char *why, size_t wn)
{
	json_t *v = json_object_get(jwk, name);
	if (!json_is_string(v) ||
	    jose_b64url_decode(json_string_value(v), json_string_length(v), out, len) < 0) {
		fail(why, wn, JOSE_MALFORMED, "\"%s\" is not a base64url string", name);
		return -1;
	}
	return 0;
}

/* A public key of TYPE ("RSA", "EC", "ED25519") from PARAMS, or NULL. */
static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *c = params ? EVP_PKEY_CTX_new_from_name(NULL, type, NULL) : NULL;
	EVP_PKEY *pk = NULL;
	if (c && (EVP_PKEY_fromdata_init(c) != 1 ||
		  EVP_PKEY_fromdata(c, &pk, EVP_PKEY_PUBLIC_KEY, params) != 1)) {
		EVP_PKEY_free(pk);
		pk = NULL;
	}
	EVP_PKEY_CTX_free(c);
	OSSL_PARAM_free(params);
	return pk;
}

/* The RSA public key (n, e) of JWK, or NULL with WHY. */
static EVP_PKEY *rsa_key(const json_t *jwk, char *why, size_t wn)
{
	unsigned char *nb = NULL, *eb = NULL;
	size_t nl, el;
	EVP_PKEY *pk = NULL;
	BIGNUM *n = NULL, *e = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	if (member_bytes(jwk, "n", &nb, &nl, why, wn) < 0 || member_bytes(jwk, "e", &eb, &el, why, wn) < 0)
		goto out;
	n = BN_bin2bn(nb, (int)(nl > 4096 ? 4096 : nl), NULL);   /* longer is refused below */
	e = BN_bin2bn(eb, (int)(el > 16 ? 16 : el), NULL);
	if (!n || !e) {
		fail(why, wn, JOSE_INTERNAL, "out of memory");
		goto out;
	}
	if (nl > 4096 || BN_num_bits(n) > 16384 || BN_num_bits(n) < 2048) {
		fail(why, wn, JOSE_MALFORMED, "RSA modulus of %d bits (2048 to 16384 taken)",
		     nl > 4096 ? (int)(nl * 8) : BN_num_bits(n));
		goto out;
	}
	if (el > 16 || BN_num_bits(e) > 64 || !BN_is_odd(e) || BN_is_one(e)) {
		fail(why, wn, JOSE_MALFORMED, "RSA exponent is not an odd number from 3 to 2^64");
		goto out;
	}
	bld = OSSL_PARAM_BLD_new();
	if (bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) == 1)
		pk = from_params("RSA", bld);
	if (!pk)
		fail(why, wn, JOSE_INTERNAL, "OpenSSL refused the RSA key");
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(n);
	BN_free(e);
	free(nb);
	free(eb);
	return pk;
}

/* The curves of EC keys: the JWK name, OpenSSL's, the NID, coordinate size. */
static const struct curve {
	const char *jwk, *ossl;
	int nid;
	size_t coord;
} curves[] = {
	{ "P-256", "prime256v1", NID_X9_62_prime256v1, 32 },
	{ "P-384", "secp384r1", NID_secp384r1, 48 },
	{ "P-521", "secp521r1", NID_secp521r1, 66 },
};

/* True when OpenSSL finds PK a valid public key (for EC: on the curve). */
static bool public_ok(EVP_PKEY *pk)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL);
	bool ok = c && EVP_PKEY_public_check(c) == 1;
	EVP_PKEY_CTX_free(c);
	return ok;
}

/* The EC public key (crv, x, y) of JWK, its curve in *NID, or NULL with WHY. */
static EVP_PKEY *ec_key(const json_t *jwk, int *nid, char *why, size_t wn)
{
	const char *crv = json_string_value(json_object_get(jwk, "crv"));
	const struct curve *cv = NULL;
	for (size_t i = 0; crv && i < sizeof curves / sizeof curves[0]; i++)
		if (strcmp(crv, curves[i].jwk) == 0)
			cv = &curves[i];
	if (!cv) {
		fail(why, wn, JOSE_MALFORMED, "EC key on an unknown curve");
		return NULL;
	}
	unsigned char *x = NULL, *y = NULL, pub[1 + 2 * 66];
	size_t xl, yl;
	EVP_PKEY *pk = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	if (member_bytes(jwk, "x", &x, &xl, why, wn) < 0 || member_bytes(jwk, "y", &y, &yl, why, wn) < 0)
		goto out;
	if (xl != cv->coord || yl != cv->coord) {
		fail(why, wn, JOSE_MALFORMED, "EC coordinates are not %zu bytes", cv->coord);
		goto out;
	}
	pub[0] = 0x04;   /* uncompressed point */
	memcpy(pub + 1, x, xl);
	memcpy(pub + 1 + xl, y, yl);
	bld = OSSL_PARAM_BLD_new();
	if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, cv->ossl, 0) == 1 &&
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, 1 + xl + yl) == 1)
		pk = from_params("EC", bld);
	if (pk && !public_ok(pk)) {
		EVP_PKEY_free(pk);
		pk = NULL;
	}
	if (!pk)
		fail(why, wn, JOSE_MALFORMED, "EC point is not on the curve %s", cv->jwk);
	*nid = cv->nid;
out:
	OSSL_PARAM_BLD_free(bld);
	free(x);
	free(y);
	return pk;
}

/* The Ed25519 public key (crv, x) of JWK, or NULL with WHY. */
static EVP_PKEY *okp_key(const json_t *jwk, char *why, size_t wn)
{
	const char *crv = json_string_value(json_object_get(jwk, "crv"));
	unsigned char *x = NULL;
	size_t xl;
	EVP_PKEY *pk = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	if (!crv || strcmp(crv, "Ed25519") != 0) {
		fail(why, wn, JOSE_MALFORMED, "OKP key on a curve other than Ed25519");
		return NULL;
	}
	if (member_bytes(jwk, "x", &x, &xl, why, wn) < 0)
		return NULL;
	if (xl != 32) {
		fail(why, wn, JOSE_MALFORMED, "Ed25519 key is not 32 bytes");
		goto out;
	}
	bld = OSSL_PARAM_BLD_new();
	if (bld && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, x, xl) == 1)
		pk = from_params("ED25519", bld);
	if (!pk)
		fail(why, wn, JOSE_INTERNAL, "OpenSSL refused the Ed25519 key");
out:
	OSSL_PARAM_BLD_free(bld);
	free(x);
	return pk;
}

/* True when the member "key_ops" of JWK is absent or holds "verify". */
static bool ops_verify(const json_t *jwk)
{
	json_t *ops = json_object_get(jwk, "key_ops"), *op;
	size_t i;
	if (!ops)
		return true;
	json_array_foreach(ops, i, op)
		if (json_is_string(op) && strcmp(json_string_value(op), "verify") == 0)
			return true;
	return false;
}

/* Checks what JWK says of its use (use, key_ops, alg, kid); *ALG gets the
 * declared alg's bit. Returns 0, or -1 with WHY. */
static int check_use(const json_t *jwk, unsigned *alg, char *why, size_t wn)
{
	json_t *use = json_object_get(jwk, "use"), *a = json_object_get(jwk, "alg");
	json_t *kid = json_object_get(jwk, "kid");
	*alg = 0;
	if (use && (!json_is_string(use) || strcmp(json_string_value(use), "sig") != 0))
		return fail(why, wn, JOSE_MALFORMED, "\"use\" is not \"sig\""), -1;
	if (!ops_verify(jwk))
		return fail(why, wn, JOSE_MALFORMED, "\"key_ops\" without \"verify\""), -1;
	if (kid && !json_is_string(kid))
		return fail(why, wn, JOSE_MALFORMED, "\"kid\" is not a string"), -1;
	if (a && !(*alg = jose_alg_parse(json_string_value(a))))
		return fail(why, wn, JOSE_MALFORMED, "\"alg\" is not a signature algorithm verified here"), -1;
	return 0;
}

/* Builds K from JWK. Returns 0, or -1 with WHY (nothing to free). */
static int parse_key(const json_t *jwk, struct jose_key *k, char *why, size_t wn)
{
	const char *kty = json_string_value(json_object_get(jwk, "kty"));
	memset(k, 0, sizeof *k);
	if (!json_is_object(jwk))
		return fail(why, wn, JOSE_MALFORMED, "not an object"), -1;
	if (!kty)
		return fail(why, wn, JOSE_MALFORMED, "no \"kty\""), -1;
	if (strcmp(kty, "oct") == 0)
		return fail(why, wn, JOSE_MALFORMED, "a symmetric (oct) key is never used"), -1;
	if (check_use(jwk, &k->alg, why, wn) < 0)
		return -1;
	if (strcmp(kty, "RSA") == 0) {
		k->kind = KIND_RSA;
		k->pk = rsa_key(jwk, why, wn);
	} else if (strcmp(kty, "EC") == 0) {
		k->kind = KIND_EC;
		k->pk = ec_key(jwk, &k->nid, why, wn);
	} else if (strcmp(kty, "OKP") == 0) {
		k->kind = KIND_OKP;
		k->nid = NID_ED25519;
		k->pk = okp_key(jwk, why, wn);
	} else {
		return fail(why, wn, JOSE_MALFORMED, "unknown \"kty\""), -1;
	}
	if (!k->pk)
		return -1;
	k->fits = kind_algs(k->kind, k->nid) & (k->alg ? k->alg : JOSE_ALG_ALL);
	json_t *kid = json_object_get(jwk, "kid");
	if (!k->fits || (kid && !(k->kid = strdup(json_string_value(kid))))) {
		fail(why, wn, JOSE_MALFORMED, k->fits ? "out of memory"
						      : "its \"alg\" is not for its key type");
		EVP_PKEY_free(k->pk);
		k->pk = NULL;
		return -1;
	}
	return 0;
}

/* Parses the set; see jose.h. */
struct jose_keys *jose_keys_parse(const json_t *jwks, char *why, size_t n)
{
	json_t *arr = json_object_get(jwks, "keys"), *jwk;
	char first[200] = "", r[160];
	size_t i, skipped = 0;
	if (why && n)
		why[0] = '\0';
	if (!json_is_array(arr))
		return fail(why, n, JOSE_MALFORMED, "not a JWKS: no \"keys\" array"), NULL;
	struct jose_keys *ks = calloc(1, sizeof *ks);
	size_t cap = json_array_size(arr) < JOSE_MAX_KEYS ? json_array_size(arr) : JOSE_MAX_KEYS;
	if (!ks || !(ks->k = calloc(cap + 1, sizeof *ks->k))) {
		free(ks);
		return fail(why, n, JOSE_INTERNAL, "out of memory"), NULL;
	}
	json_array_foreach(arr, i, jwk) {
		if (ks->n < JOSE_MAX_KEYS && parse_key(jwk, &ks->k[ks->n], r, sizeof r) == 0) {
			ks->n++;
			continue;
		}
		if (ks->n >= JOSE_MAX_KEYS)
			snprintf(r, sizeof r, "more than %d keys", JOSE_MAX_KEYS);
		if (skipped++ == 0)
			snprintf(first, sizeof first, "key %zu: %s", i, r);
	}
	ERR_clear_error();   /* what OpenSSL said of refused keys is in R */
	if (ks->n == 0) {
		jose_keys_free(ks);
		if (!skipped)
			return fail(why, n, JOSE_MALFORMED, "no usable signing key: the set is empty"), NULL;
		return fail(why, n, JOSE_MALFORMED, "no usable signing key (%zu skipped; %s)",
			    skipped, first), NULL;
	}
	if (skipped)
		fail(why, n, JOSE_OK, "%zu key%s skipped; %s", skipped, skipped > 1 ? "s" : "", first);
	return ks;
}

/* ---- verification ---- */

const char *jose_status_text(enum jose_status s)
{
	switch (s) {
	case JOSE_OK: return "ok";
	case JOSE_MALFORMED: return "malformed token";
	case JOSE_ALG_REFUSED: return "algorithm refused";
	case JOSE_WRONG_TYPE: return "wrong token type";
	case JOSE_UNKNOWN_KID: return "unknown key id";
	case JOSE_BAD_SIGNATURE: return "bad signature";
	case JOSE_EXPIRED: return "expired";
	case JOSE_NOT_YET_VALID: return "not yet valid";
	case JOSE_WRONG_ISSUER: return "wrong issuer";
	case JOSE_WRONG_AUDIENCE: return "wrong audience";
	case JOSE_INTERNAL: return "internal error";
	}
	return "?";
}

/* True for a "typ" of RFC 9068 or RFC 7519: [application/](at+jwt|JWT). */
static bool typ_ok(const char *t)
{
	if (strncasecmp(t, "application/", 12) == 0)
		t += 12;
	return strcasecmp(t, "at+jwt") == 0 || strcasecmp(t, "JWT") == 0;
}

/* Checks the header HDR: *ALG gets its algorithm, *KID its kid (borrowed
 * from HDR; NULL: none). */
static enum jose_status check_header(const json_t *hdr, unsigned allow, const struct alg_info **alg,
				     const char **kid, char *why, size_t wn)
{
	json_t *a = json_object_get(hdr, "alg"), *typ = json_object_get(hdr, "typ");
	json_t *k = json_object_get(hdr, "kid");
	if (!json_is_string(a))
		return fail(why, wn, JOSE_MALFORMED, "header has no \"alg\" string");
	const char *name = json_string_value(a);
	if (strcmp(name, "none") == 0)
		return fail(why, wn, JOSE_ALG_REFUSED, "alg \"none\" is never accepted");
	if (strncmp(name, "HS", 2) == 0)
		return fail(why, wn, JOSE_ALG_REFUSED, "symmetric (HS*) algs are never accepted");
	if (!(*alg = alg_by_name(name)))
		return fail(why, wn, JOSE_ALG_REFUSED, "alg not supported");
	if (!((*alg)->bit & allow))
		return fail(why, wn, JOSE_ALG_REFUSED, "alg %s not allowed", (*alg)->name);
	if (json_object_get(hdr, "crit"))
		return fail(why, wn, JOSE_ALG_REFUSED, "\"crit\" header: no extension is understood");
	if (typ && !json_is_string(typ))
		return fail(why, wn, JOSE_MALFORMED, "\"typ\" is not a string");
	if (typ && !typ_ok(json_string_value(typ)))
		return fail(why, wn, JOSE_WRONG_TYPE, "\"typ\" is neither at+jwt nor JWT");
	if (k && !json_is_string(k))
		return fail(why, wn, JOSE_MALFORMED, "\"kid\" is not a string");
	*kid = json_string_value(k);
	return JOSE_OK;
}

/* The DER form of the raw ECDSA signature R || S (coordinates of C bytes):
 * a new buffer (OPENSSL_free) of *LEN bytes, or NULL. */
static unsigned char *ecdsa_der(const unsigned char *sig, size_t c, size_t *len)
{
	ECDSA_SIG *es = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(sig, (int)c, NULL), *s = BN_bin2bn(sig + c, (int)c, NULL);
	unsigned char *der = NULL;
	if (!es || !r || !s || ECDSA_SIG_set0(es, r, s) != 1) {
		BN_free(r);
		BN_free(s);
		ECDSA_SIG_free(es);
		return NULL;
	}
	int n = i2d_ECDSA_SIG(es, &der);
	ECDSA_SIG_free(es);
	if (n <= 0)
		return NULL;
	*len = (size_t)n;
	return der;
}

/* The signature length ALG needs with PK. */
static size_t sig_len(const struct alg_info *a, EVP_PKEY *pk)
{
	if (a->kind == KIND_EC)
		return 2 * a->coord;
	return a->kind == KIND_OKP ? 64 : (size_t)EVP_PKEY_get_size(pk);
}

/* True when SIG (SL bytes, of the right length) is PK's ALG signature of IN. */
static bool verify_one(EVP_PKEY *pk, const struct alg_info *a, const char *in, size_t inl,
		       const unsigned char *sig, size_t sl)
{
	unsigned char *der = NULL;
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pc = NULL;
	if (a->kind == KIND_EC) {
		if (!(der = ecdsa_der(sig, a->coord, &sl))) {
			EVP_MD_CTX_free(m);
			return false;
		}
		sig = der;
	}
	bool ok = m && EVP_DigestVerifyInit_ex(m, &pc, a->md, NULL, NULL, pk, NULL) == 1;
	if (ok && a->pss)
		ok = EVP_PKEY_CTX_set_rsa_padding(pc, RSA_PKCS1_PSS_PADDING) == 1 &&
		     EVP_PKEY_CTX_set_rsa_pss_saltlen(pc, RSA_PSS_SALTLEN_DIGEST) == 1;
	ok = ok && EVP_DigestVerify(m, sig, sl, (const unsigned char *)in, inl) == 1;
	EVP_MD_CTX_free(m);
	OPENSSL_free(der);
	return ok;
}

/* Tries the keys of KS that may have signed IN (KID's, or all) with ALG. */
static enum jose_status verify_with_keys(const struct jose_keys *ks, const struct alg_info *a,
					 const char *kid, const char *in, size_t inl,
					 const unsigned char *sig, size_t sl, char *why, size_t wn)
{
	bool named = false, fits = false, length = false;
	for (size_t i = 0; ks && i < ks->n; i++) {
		const struct jose_key *k = &ks->k[i];
		if (kid && (!k->kid || strcmp(k->kid, kid) != 0))
			continue;
		named = true;
		if (!(k->fits & a->bit))
			continue;
		fits = true;
		if (sl != sig_len(a, k->pk))
			continue;
		length = true;
		if (verify_one(k->pk, a, in, inl, sig, sl))
			return JOSE_OK;
	}
	if (kid && !named)
		return fail(why, wn, JOSE_UNKNOWN_KID, "no key has the token's kid");
	if (!fits)
		return fail(why, wn, JOSE_BAD_SIGNATURE, "no key %sfits alg %s",
			    kid ? "with the token's kid " : "", a->name);
	if (!length && a->kind == KIND_RSA)
		return fail(why, wn, JOSE_BAD_SIGNATURE, "%s signature is not the modulus' size", a->name);
	if (!length)
		return fail(why, wn, JOSE_BAD_SIGNATURE, "%s signature is not %zu bytes%s", a->name,
			    sig_len(a, NULL), a->kind == KIND_EC ? " (raw r || s)" : "");
	return fail(why, wn, JOSE_BAD_SIGNATURE, "signature does not verify");
}

/* The base64url part S (N bytes) decoded as a JSON object (new
 * reference), or NULL. */
static json_t *part_object(const char *s, size_t n)
{
	unsigned char *b;
	size_t bl;
	if (jose_b64url_decode(s, n, &b, &bl) < 0)
		return NULL;
	json_t *j = json_loadb((const char *)b, bl, JSON_REJECT_DUPLICATES, NULL);
	free(b);
	if (j && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* True when S (N bytes) is in the strict base64url form. */
static bool b64url_valid(const char *s, size_t n)
{
	if (n % 4 == 1)
		return false;
	for (size_t i = 0; i < n; i++)
		if (b64url_digit((unsigned char)s[i]) < 0)
			return false;
	return n == 0 || (b64url_digit((unsigned char)s[n - 1]) & (n % 4 == 2 ? 15 : n % 4 == 3 ? 3 : 0)) == 0;
}

/* Verifies a compact JWS; see jose.h. */
enum jose_status jose_verify(const struct jose_keys *keys, const char *tok, size_t n,
			     unsigned alg_allow, json_t **claims, char *why, size_t wn)
{
	*claims = NULL;
	if (n == 0)
		return fail(why, wn, JOSE_MALFORMED, "empty token");
	if (n > JOSE_MAX_TOKEN)
		return fail(why, wn, JOSE_MALFORMED, "token longer than %d bytes", JOSE_MAX_TOKEN);
	const char *d1 = memchr(tok, '.', n);
	const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - tok)) : NULL;
	if (!d2 || memchr(d2 + 1, '.', n - (size_t)(d2 + 1 - tok)))
		return fail(why, wn, JOSE_MALFORMED, "not three dot-separated parts");
	size_t hl = (size_t)(d1 - tok), pl = (size_t)(d2 - d1 - 1), sl = n - (size_t)(d2 + 1 - tok);
	if (!b64url_valid(tok, hl) || !b64url_valid(d1 + 1, pl) || !b64url_valid(d2 + 1, sl))
		return fail(why, wn, JOSE_MALFORMED, "a part is not base64url");
	json_t *hdr = part_object(tok, hl);
	if (!hdr)
		return fail(why, wn, JOSE_MALFORMED, "header is not a JSON object");
	const struct alg_info *a = NULL;
	const char *kid = NULL;
	unsigned char *sig = NULL;
	size_t siglen = 0;
	enum jose_status st = check_header(hdr, alg_allow, &a, &kid, why, wn);
	if (st == JOSE_OK && jose_b64url_decode(d2 + 1, sl, &sig, &siglen) < 0)
		st = fail(why, wn, JOSE_INTERNAL, "out of memory");
	if (st == JOSE_OK)
		st = verify_with_keys(keys, a, kid, tok, (size_t)(d2 - tok), sig, siglen, why, wn);
	json_decref(hdr);
	free(sig);
	ERR_clear_error();   /* a failed verification leaves OpenSSL errors queued: not ours to leave */
	if (st != JOSE_OK)
		return st;
	if (!(*claims = part_object(d1 + 1, pl)))
		return fail(why, wn, JOSE_MALFORMED, "payload is not a JSON object");
	return JOSE_OK;
}

/* ---- claims ---- */

/* The number claim NAME of C in *V (*HAS: present). Returns 0, or -1 when
 * it is there and not a number. */
static int number_claim(const json_t *c, const char *name, double *v, bool *has)
{
	json_t *j = json_object_get(c, name);
	*has = j != NULL;
	*v = json_number_value(j);
	return !j || json_is_number(j) ? 0 : -1;
}

/* True when ISS is one of the NULL-terminated LIST. */
static bool issuer_ok(const char *iss, const char *const *list)
{
	for (; iss && *list; list++)
		if (strcmp(*list, iss) == 0)
			return true;
	return false;
}

/* 1 when AUD (a string or an array of strings) names WANT, 0 when not, -1
 * when it is neither. */
static int audience_ok(const json_t *aud, const char *want)
{
	size_t i;
	json_t *a;
	int found = 0;
	if (json_is_string(aud))
		return strcmp(json_string_value(aud), want) == 0;
	if (!json_is_array(aud))
		return -1;
	json_array_foreach(aud, i, a) {
		if (!json_is_string(a))
			return -1;
		if (strcmp(json_string_value(a), want) == 0)
			found = 1;
	}
	return found;
}

/* Checks the claims; see jose.h. */
enum jose_status jose_check_claims(const json_t *claims, const struct jose_expect *e,
				   time_t now, char *why, size_t wn)
{
	double exp, nbf, iat, t = (double)now, lw = e->leeway > 0 ? (double)e->leeway : 0;
	bool has_exp, has_nbf, has_iat;
	json_t *iss = json_object_get(claims, "iss"), *aud = json_object_get(claims, "aud");
	if (!json_is_object(claims))
		return fail(why, wn, JOSE_MALFORMED, "claims are not an object");
	if (number_claim(claims, "exp", &exp, &has_exp) < 0 ||
	    number_claim(claims, "nbf", &nbf, &has_nbf) < 0 ||
	    number_claim(claims, "iat", &iat, &has_iat) < 0)
		return fail(why, wn, JOSE_MALFORMED, "exp, nbf or iat is not a number");
	if (iss && !json_is_string(iss))
		return fail(why, wn, JOSE_MALFORMED, "\"iss\" is not a string");
	if (aud && audience_ok(aud, "") < 0)
		return fail(why, wn, JOSE_MALFORMED, "\"aud\" is neither a string nor strings");
	if (!has_exp && e->require_exp)
		return fail(why, wn, JOSE_MALFORMED, "no \"exp\" claim");
	if (e->issuers && !issuer_ok(json_string_value(iss), e->issuers))
		return fail(why, wn, JOSE_WRONG_ISSUER, iss ? "issuer not accepted" : "no \"iss\" claim");
	if (e->audience && (!aud || audience_ok(aud, e->audience) != 1))
		return fail(why, wn, JOSE_WRONG_AUDIENCE, aud ? "not for this audience" : "no \"aud\" claim");
	if (has_exp && t >= exp + lw)
		return fail(why, wn, JOSE_EXPIRED, "expired %.0f s ago", t - exp);
	if (has_nbf && nbf > t + lw)
		return fail(why, wn, JOSE_NOT_YET_VALID, "not valid for %.0f s (nbf)", nbf - t);
	if (has_iat && iat > t + lw)
		return fail(why, wn, JOSE_NOT_YET_VALID, "issued %.0f s in the future (iat)", iat - t);
	return JOSE_OK;
}
