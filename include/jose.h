/*
 * jose.h - JOSE verification for OAuth 2.1 access tokens: base64url
 * (RFC 7515 section 2), sets of public signing keys from a JWKS (RFC 7517,
 * RFC 7518 section 6), compact JWS verification with an allow-list of
 * algorithms (RFC 7515, RFC 7518 section 3), the checks of a JWT's time,
 * issuer and audience claims (RFC 7519, RFC 9068), and PKCE (RFC 7636) for
 * the OAuth client.
 *
 * Only asymmetric signatures are ever verified: "none" and HS* are refused
 * whatever the caller allows, and symmetric ("oct") keys never enter a set.
 * Keys come only from the set: a token's "jwk", "jku", "x5u" or "x5c"
 * header is never used. Nothing here logs; a failure fills WHY (a short
 * reason that never holds the token or any part of it) and the caller
 * decides what to write.
 */
#ifndef MCPC_JOSE_H
#define MCPC_JOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <jansson.h>

/* The longest compact token jose_verify takes, in bytes. */
#define JOSE_MAX_TOKEN 16384

/* ---- base64url (no padding, no white space) ---- */

/*
 * Decodes the N bytes at S, in the strict form of RFC 7515 section 2: only
 * the characters A-Z a-z 0-9 - _, no '=' padding, no white space, no
 * impossible length (N % 4 == 1) and no stray bits in the last character
 * (each byte string has exactly one encoding). On success *OUT is a new
 * buffer the caller frees, of *OUTLEN bytes plus a NUL byte after them.
 * Returns 0, or -1 (invalid text, or no memory) with *OUT NULL.
 */
int jose_b64url_decode(const char *s, size_t n, unsigned char **out, size_t *outlen);

/* The N bytes at P in base64url without padding: a new NUL-terminated
 * string the caller frees, or NULL (no memory). */
char *jose_b64url_encode(const void *p, size_t n);

/* ---- random strings and PKCE ---- */

/*
 * Fills OUT (N bytes, N >= 2) with N - 1 random base64url characters and a
 * NUL (6 bits of RAND_bytes entropy each): an OAuth "state" or "nonce".
 * Returns 0, or -1 (N too small, or the generator failed).
 */
int jose_random_token(char *out, size_t n);

/*
 * A PKCE pair (RFC 7636, method S256): VERIFIER gets 43 characters from 32
 * random bytes, CHALLENGE base64url(SHA-256(VERIFIER)), 43 characters;
 * both NUL-terminated. Returns 0, or -1 (nothing usable in either).
 */
int jose_pkce_pair(char verifier[44], char challenge[44]);

/* CHALLENGE (43 characters and a NUL) for VERIFIER (a NUL-terminated
 * string). Returns 0, or -1. */
int jose_pkce_challenge(const char *verifier, char challenge[44]);

/* ---- algorithms ---- */

/* The signature algorithms jose_verify knows, one bit each. */
enum jose_alg {
	JOSE_RS256 = 1u << 0,
	JOSE_RS384 = 1u << 1,
	JOSE_RS512 = 1u << 2,
	JOSE_PS256 = 1u << 3,
	JOSE_PS384 = 1u << 4,
	JOSE_PS512 = 1u << 5,
	JOSE_ES256 = 1u << 6,
	JOSE_ES384 = 1u << 7,
	JOSE_ES512 = 1u << 8,
	JOSE_EDDSA = 1u << 9,   /* Ed25519 only (RFC 8037) */
};

/* Every algorithm above. */
#define JOSE_ALG_ALL 0x3ffu
/* What an authorization server is expected to sign with: RS256 (the one
 * RFC 9068 requires), PS256, ES256 and EdDSA. */
#define JOSE_ALG_DEFAULT (JOSE_RS256 | JOSE_PS256 | JOSE_ES256 | JOSE_EDDSA)

/* The bit of the algorithm called NAME ("RS256", case as in RFC 7518), or
 * 0 for any other name, "none" and HS* included. */
unsigned jose_alg_parse(const char *name);

/* The name of the single algorithm ALG, or "?" when ALG is not one bit of
 * enum jose_alg. Static storage. */
const char *jose_alg_name(unsigned alg);

/* ---- key sets ---- */

/* The usable public keys of a JWKS, each with its kid, type and curve, and
 * the alg it declares. Opaque; immutable once parsed. */
struct jose_keys;

/* The most keys a set keeps; those after them are skipped. */
#define JOSE_MAX_KEYS 64

/*
 * The usable keys of JWKS (borrowed), an object {"keys": [...]}. Keeps
 * RSA keys (n, e; a modulus of 2048 to 16384 bits), EC keys (crv P-256,
 * P-384 or P-521, x and y of the curve's full size, the point checked by
 * OpenSSL) and OKP keys (crv Ed25519, x). Only public members are read:
 * private ones ("d", "p"...) are ignored. Skips, without failing, each
 * key it cannot use: kty "oct" or unknown, an unknown crv, "use" present
 * and not "sig", "key_ops" present without "verify", an "alg" that is not
 * an algorithm above for that key type, a bad or too weak key, keys past
 * JOSE_MAX_KEYS. Returns a new set the caller frees with jose_keys_free,
 * and WHY (N bytes; may be NULL) empty or noting the first key skipped and
 * why, for the log; or NULL with the reason in WHY when JWKS is not a
 * JWKS or no key is usable.
 */
struct jose_keys *jose_keys_parse(const json_t *jwks, char *why, size_t n);

/* Frees K (NULL is fine). */
void jose_keys_free(struct jose_keys *k);

/* The number of keys K kept. */
size_t jose_keys_count(const struct jose_keys *k);

/* True when K holds a key whose kid is KID (compared exactly). */
bool jose_keys_has_kid(const struct jose_keys *k, const char *kid);

/* ---- verification ---- */

enum jose_status {
	JOSE_OK = 0,
	JOSE_MALFORMED,        /* not a compact JWS of JSON objects, too long, a claim of the wrong type */
	JOSE_ALG_REFUSED,      /* "none", HS*, unknown, not allowed, or a "crit" header */
	JOSE_WRONG_TYPE,       /* a "typ" other than JWT or at+jwt */
	JOSE_UNKNOWN_KID,      /* no key with the header's kid: refetch the set, then try again */
	JOSE_BAD_SIGNATURE,    /* no key fits, or the signature does not verify */
	JOSE_EXPIRED,
	JOSE_NOT_YET_VALID,    /* nbf or iat in the future */
	JOSE_WRONG_ISSUER,
	JOSE_WRONG_AUDIENCE,
	JOSE_INTERNAL,         /* no memory, or OpenSSL failed */
};

/* A short name for S ("bad signature"). Static storage. */
const char *jose_status_text(enum jose_status s);

/*
 * Verifies the compact JWS TOK (N bytes, at most JOSE_MAX_TOKEN) with a key
 * of KEYS (borrowed). Its header must be a JSON object with no duplicate
 * member whose "alg" is in ALG_ALLOW (a mask of enum jose_alg; 0 allows
 * nothing; "none" and HS* are never allowed), with no "crit" (no extension
 * is understood), and a "typ", if any, of "JWT" or "at+jwt" (with or
 * without "application/", any case: RFC 9068 section 2.1). With a "kid",
 * the keys of KEYS with that kid are tried (JOSE_UNKNOWN_KID when there
 * is none); without, every key of KEYS that fits the alg. A key fits when
 * its type and curve are the alg's and the alg it declares, if any, is the
 * header's. ES* signatures must be the raw r || s of RFC 7518 section
 * 3.4, exactly twice the coordinate size; PS* use a salt as long as the
 * hash. Only once the signature verifies is the payload parsed: it must
 * be a JSON object with no duplicate member. On JOSE_OK *CLAIMS gets a new
 * reference to it (the caller decrefs); otherwise *CLAIMS is NULL and WHY
 * (WN bytes; may be NULL) says why.
 */
enum jose_status jose_verify(const struct jose_keys *keys, const char *tok, size_t n,
			     unsigned alg_allow, json_t **claims, char *why, size_t wn);

/* What jose_check_claims expects of a token's claims. */
struct jose_expect {
	/* the accepted "iss" values, exact match, NULL-terminated (borrowed);
	 * NULL: not checked; an empty list accepts none */
	const char *const *issuers;
	/* a value "aud" must be (a string) or hold (an array of strings);
	 * NULL: not checked (borrowed) */
	const char *audience;
	long leeway;           /* seconds of clock skew allowed on exp, nbf, iat; < 0 is 0 */
	bool require_exp;      /* a token without "exp" is JOSE_MALFORMED */
};

/*
 * Checks CLAIMS (borrowed, a verified token's payload) against E at NOW:
 * JOSE_MALFORMED when exp, nbf or iat is there and not a number, iss not a
 * string, aud neither a string nor an array of strings, or exp missing
 * and required; then JOSE_WRONG_ISSUER, JOSE_WRONG_AUDIENCE (also when
 * the claim is missing but expected); JOSE_EXPIRED when NOW >= exp +
 * leeway; JOSE_NOT_YET_VALID when nbf or iat > NOW + leeway. WHY (WN
 * bytes; may be NULL) gets the reason of anything but JOSE_OK.
 */
enum jose_status jose_check_claims(const json_t *claims, const struct jose_expect *e,
				   time_t now, char *why, size_t wn);

#endif
