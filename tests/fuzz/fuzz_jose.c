/*
 * fuzz_jose.c - libFuzzer target for src/core/jose.c (JWT access token
 * verification). Byte 0 picks what the rest is:
 *   '0' (mod 4 == 0) base64url text: what decodes encodes back to the same
 *       text (one encoding for each byte string), and the bytes themselves
 *       encode to text that decodes back to them;
 *   '1' a JWKS: parsed into a set of 1 to JOSE_MAX_KEYS keys, or refused
 *       with a reason;
 *   '2' a compact token, verified with a fixed set (an RSA, a P-256 and an
 *       Ed25519 key; the seeds in corpus/jose are signed by them): claims
 *       exactly on JOSE_OK, a reason otherwise that holds no long part of
 *       the token, and a token that verifies still does with only its own
 *       alg allowed and is refused with none;
 *   '3' claims: checked at a fixed time, where more leeway never turns a
 *       good token bad and an expired one stays expired later.
 * FUZZ_VERBOSE=1 prints each token's status (to check the seeds verify).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jose.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_jose: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* The public keys the seeds are signed with (their private halves are gone). */
static const char fixed_jwks[] =
	"{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r\",\"n\":\"us9fJ1NCaQGTfyQ9A7nSvZUyHpPiAJtK_otQ3CiA6qW"
	"V1oK7YCYNYjsuy7SaUj_OoF7HXsPiah6anJCbDSefSICAvdGJFv255PWGNeJqlb1X3ZqEkrFzapYOFun"
	"4samSfQgJdbdNPpnlQ6uG9VrZpeNqPgJ0t4uc9XV2GZ0CwQiASht4Zl46hKXED_OJCKPv7oBT0kVx9tP"
	"SImfJYz-LjoE_zS7rNm0Y65vCrwWC6WUMjJOs65di9Rn0Ke_qO59uzR1Mo-R5eL3Sz8WyhCq0N_5dH8i"
	"ueD6Hpl8gHpjeUD64qZ1eKB-7USPgEKX556vJIaxfzh2Twl8ARs-lj-96Dw\",\"e\":\"AQAB\"},{\"kty\":"
	"\"EC\",\"kid\":\"e\",\"crv\":\"P-256\",\"x\":\"G0PUZAZCf-tHyBhcTf3-yP2rh93reTsmaMOhlQz1E3I\",\""
	"y\":\"vmQa68l6xb1s8_R9QnoDl9UwOzoRdFX2HCp1oeJ4ZZE\",\"alg\":\"ES256\"},{\"kty\":\"OKP\",\"ki"
	"d\":\"ed\",\"crv\":\"Ed25519\",\"x\":\"cgdLDw0Vr02FhX9fTMeZUl8O9Y8xCGg2yEMHCdlHTMs\",\"use\":"
	"\"sig\"}]}";

#define NOW 1700000000

static struct jose_keys *keys;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	json_t *j = json_loads(fixed_jwks, 0, NULL);
	char why[200];
	keys = jose_keys_parse(j, why, sizeof why);
	CHECK(keys && jose_keys_count(keys) == 3 && why[0] == '\0');
	json_decref(j);
	return 0;
}

/* S (N bytes) as base64url: decoded, it encodes back to S; and the bytes
 * of S encode to text that decodes back to them. */
static void b64url(const char *s, size_t n)
{
	unsigned char *d = (unsigned char *)"x";
	size_t dl = 7;
	if (jose_b64url_decode(s, n, &d, &dl) == 0) {
		CHECK(dl == n * 3 / 4);
		char *e = jose_b64url_encode(d, dl);
		CHECK(e && strlen(e) == n && memcmp(e, s, n) == 0);
		free(e);
		free(d);
	} else {
		CHECK(d == NULL && dl == 0);
	}
	char *e = jose_b64url_encode(s, n);
	CHECK(e);
	CHECK(jose_b64url_decode(e, strlen(e), &d, &dl) == 0);
	CHECK(dl == n && memcmp(d, s, n) == 0);
	free(d);
	free(e);
}

/* The JSON text S (N bytes) as a JWKS. */
static void jwks(const char *s, size_t n)
{
	json_t *j = json_loadb(s, n, 0, NULL);
	char why[200] = "x";
	struct jose_keys *k = jose_keys_parse(j, why, sizeof why);
	size_t c = jose_keys_count(k);
	CHECK(k ? c >= 1 && c <= JOSE_MAX_KEYS : why[0] != '\0');
	CHECK(!jose_keys_has_kid(k, NULL));
	jose_keys_free(k);
	json_decref(j);
}

/* True when WHY holds a dot-separated part of TOK (N bytes) of 16 bytes or
 * more (no reason has a run of 16 base64url characters of its own). */
static bool leaks_part(const char *why, const char *tok, size_t n)
{
	const char *p = tok, *end = tok + n;
	while (p < end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t len = (size_t)((dot ? dot : end) - p);
		if (len >= 16 && memmem(why, strlen(why), p, len))
			return true;
		p += len + 1;
	}
	return false;
}

/* The bytes TOK (N) as a token. */
static void token(const char *tok, size_t n)
{
	json_t *claims = (json_t *)&claims;
	char why[200] = "";
	enum jose_status st = jose_verify(keys, tok, n, JOSE_ALG_ALL, &claims, why, sizeof why);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_jose: token: %s%s%s\n", jose_status_text(st), why[0] ? ": " : "", why);
	CHECK(st >= JOSE_OK && st <= JOSE_INTERNAL && st != JOSE_INTERNAL);
	CHECK(st != JOSE_EXPIRED && st != JOSE_NOT_YET_VALID && st != JOSE_WRONG_ISSUER &&
	      st != JOSE_WRONG_AUDIENCE);
	if (st != JOSE_OK) {
		CHECK(claims == NULL && why[0] != '\0' && !leaks_part(why, tok, n));
		return;
	}
	CHECK(json_is_object(claims));
	/* the alg it verified with: the header's, read here the simple way */
	unsigned char *h;
	size_t hl;
	CHECK(jose_b64url_decode(tok, (size_t)((const char *)memchr(tok, '.', n) - tok), &h, &hl) == 0);
	json_t *hdr = json_loadb((const char *)h, hl, 0, NULL);
	unsigned alg = jose_alg_parse(json_string_value(json_object_get(hdr, "alg")));
	CHECK(alg != 0);
	json_t *again = NULL;
	CHECK(jose_verify(keys, tok, n, alg, &again, NULL, 0) == JOSE_OK && json_equal(again, claims));
	json_decref(again);
	CHECK(jose_verify(keys, tok, n, JOSE_ALG_ALL & ~alg, &again, why, sizeof why) == JOSE_ALG_REFUSED);
	CHECK(again == NULL);
	const char *const iss[] = { "https://as.example", NULL };
	struct jose_expect e = { .issuers = iss, .audience = "mcp", .leeway = 60, .require_exp = true };
	st = jose_check_claims(claims, &e, NOW, why, sizeof why);
	CHECK(st != JOSE_OK || json_object_get(claims, "exp"));
	json_decref(hdr);
	free(h);
	json_decref(claims);
}

/* The JSON text S (N bytes) as claims. */
static void claims(const char *s, size_t n)
{
	json_t *c = json_loadb(s, n, JSON_DECODE_ANY, NULL);
	const char *const iss[] = { "https://as.example", "b", NULL };
	struct jose_expect e = { .issuers = iss, .audience = "mcp", .leeway = 0 };
	char why[200] = "";
	if (!c)
		return;
	enum jose_status st = jose_check_claims(c, &e, NOW, why, sizeof why);
	CHECK(st == JOSE_OK ? why[0] == '\0' : why[0] != '\0');
	CHECK(st != JOSE_ALG_REFUSED && st != JOSE_BAD_SIGNATURE && st != JOSE_UNKNOWN_KID &&
	      st != JOSE_WRONG_TYPE && st != JOSE_INTERNAL);
	e.leeway = 60;
	enum jose_status lenient = jose_check_claims(c, &e, NOW, NULL, 0);
	CHECK(st != JOSE_OK || lenient == JOSE_OK);
	e.leeway = 0;
	if (st == JOSE_EXPIRED)
		CHECK(jose_check_claims(c, &e, NOW + 1000, NULL, 0) == JOSE_EXPIRED);
	if (st == JOSE_OK && !json_object_get(c, "exp"))
		CHECK(jose_check_claims(c, &e, NOW + 1000000000L, NULL, 0) != JOSE_EXPIRED);
	json_decref(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	switch (data[0] % 4) {
	case 0: b64url(s, n); break;
	case 1: jwks(s, n); break;
	case 2: token(s, n); break;
	default: claims(s, n); break;
	}
	return 0;
}
