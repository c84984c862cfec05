/*
 * jwt_cost.c - what the auth module's credential check costs, per check:
 * a cold OAuth validation (a token seen for the first time: hash, issuer,
 * signature, claims, principal; RS256 and ES256), a warm one (the same
 * token again: its answer cached by hash), and a static token (hash and
 * constant-time compare), through the module as the HTTP front asks it
 * (pipeline_check_credential). The keys come from a JWKS file, so nothing
 * is fetched. Prints one JSON line.
 *   mcp-bench-jwt [N]      (N tokens per kind, default 2000)
 *   mcp-bench-jwt --emit DIR
 *                          writes DIR/jwks.json, DIR/jwt (an RS256 access token
 *                          for https://bench.invalid/mcp, valid for a day) and
 *                          DIR/static with DIR/static.sha256, for bench/run.sh's
 *                          HTTP runs with tokens
 */
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfg_errors.h"
#include "jose.h"
#include "middleware.h"

#define RESOURCE "https://bench.invalid/mcp"
#define ISSUER "https://issuer.invalid"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static char *b64(const void *p, size_t n)
{
	char *s = jose_b64url_encode(p, n);
	if (!s)
		abort();
	return s;
}

/* The big-endian bytes of BN parameter NAME of K, base64url. */
static char *bn_b64(EVP_PKEY *k, const char *name)
{
	BIGNUM *bn = NULL;
	if (!EVP_PKEY_get_bn_param(k, name, &bn))
		abort();
	int n = BN_num_bytes(bn);
	unsigned char *buf = malloc((size_t)n);
	BN_bn2bin(bn, buf);
	char *s = b64(buf, (size_t)n);
	free(buf);
	BN_free(bn);
	return s;
}

/* A P-256 coordinate (32 bytes, left-padded). */
static char *coord_b64(EVP_PKEY *k, const char *name)
{
	BIGNUM *bn = NULL;
	unsigned char buf[32];
	if (!EVP_PKEY_get_bn_param(k, name, &bn) || BN_bn2binpad(bn, buf, 32) != 32)
		abort();
	BN_free(bn);
	return b64(buf, 32);
}

/* A compact JWS of CLAIMS signed by K as ALG with KID. */
static char *sign(EVP_PKEY *k, const char *alg, const char *kid, json_t *claims)
{
	char hdr[128];
	snprintf(hdr, sizeof hdr, "{\"alg\":\"%s\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}", alg, kid);
	char *payload = json_dumps(claims, JSON_COMPACT);
	char *h = b64(hdr, strlen(hdr)), *p = b64(payload, strlen(payload));
	size_t in_len = strlen(h) + 1 + strlen(p);
	char *in = malloc(in_len + 1);
	snprintf(in, in_len + 1, "%s.%s", h, p);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t sl = 0;
	unsigned char sig[1024];
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k) != 1 ||
	    EVP_DigestSign(md, NULL, &sl, (unsigned char *)in, in_len) != 1 || sl > sizeof sig ||
	    EVP_DigestSign(md, sig, &sl, (unsigned char *)in, in_len) != 1)
		abort();
	EVP_MD_CTX_free(md);
	unsigned char raw[64];
	const unsigned char *sp = sig;
	size_t rl = sl;
	if (strcmp(alg, "ES256") == 0) {   /* DER -> r || s */
		ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &sp, (long)sl);
		const BIGNUM *r, *s;
		ECDSA_SIG_get0(es, &r, &s);
		BN_bn2binpad(r, raw, 32);
		BN_bn2binpad(s, raw + 32, 32);
		ECDSA_SIG_free(es);
		sp = raw;
		rl = 64;
	} else {
		sp = sig;
	}
	char *sg = b64(sp, rl);
	size_t tl = in_len + 1 + strlen(sg) + 1;
	char *tok = malloc(tl);
	snprintf(tok, tl, "%s.%s", in, sg);
	free(payload); free(h); free(p); free(in); free(sg);
	return tok;
}

/* N tokens signed by K as ALG, each with its own sub. */
static char **tokens(EVP_PKEY *k, const char *alg, const char *kid, int n)
{
	char **v = calloc((size_t)n, sizeof *v);
	for (int i = 0; i < n; i++) {
		char sub[32];
		snprintf(sub, sizeof sub, "user-%d", i);
		json_t *c = json_pack("{s:s,s:s,s:s,s:I,s:I,s:s,s:s}", "iss", ISSUER, "aud", RESOURCE,
				      "sub", sub, "iat", (json_int_t)time(NULL),
				      "exp", (json_int_t)time(NULL) + 3600, "scope", "mcp:read mcp:call",
				      "client_id", "bench");
		v[i] = sign(k, alg, kid, c);
		json_decref(c);
	}
	return v;
}

/* Microseconds per check of each of the N tokens in V; aborts unless every one is OK. */
static double check_all(struct pipeline *pl, char **v, int n)
{
	double t0 = now_us();
	for (int i = 0; i < n; i++) {
		struct mw_cred_check chk = { .token = v[i], .len = strlen(v[i]), .resource = RESOURCE };
		pipeline_check_credential(pl, &chk, NULL);
		if (chk.result != MW_CRED_OK) {
			fprintf(stderr, "mcp-bench-jwt: token %d refused: %s\n", i, chk.why);
			exit(1);
		}
	}
	return (now_us() - t0) / n;
}

/* Writes TEXT to DIR/NAME; aborts on failure. */
static void put(const char *dir, const char *name, const char *text)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "mcp-bench-jwt: cannot write %s\n", path);
		exit(1);
	}
}

/* --emit DIR: the files bench/run.sh's HTTP runs with tokens use. */
static int emit(const char *dir)
{
	EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	char *nn = bn_b64(rsa, OSSL_PKEY_PARAM_RSA_N), *e = bn_b64(rsa, OSSL_PKEY_PARAM_RSA_E);
	char jwks[2048];
	snprintf(jwks, sizeof jwks, "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r1\",\"use\":\"sig\","
		 "\"n\":\"%s\",\"e\":\"%s\"}]}\n", nn, e);
	put(dir, "jwks.json", jwks);
	json_t *c = json_pack("{s:s,s:s,s:s,s:I,s:I,s:s}", "iss", ISSUER, "aud", RESOURCE,
			      "sub", "bench-user", "iat", (json_int_t)time(NULL),
			      "exp", (json_int_t)time(NULL) + 86400, "scope", "mcp:read mcp:call");
	char *tok = sign(rsa, "RS256", "r1", c);
	put(dir, "jwt", tok);
	const char *st = "static-bench-token-0123456789abcdef-0123456789abcdef-0123456789abcdef";
	unsigned char h[32];
	char hex[65];
	SHA256((const unsigned char *)st, strlen(st), h);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	put(dir, "static", st);
	put(dir, "static.sha256", hex);
	json_decref(c);
	free(tok); free(nn); free(e);
	EVP_PKEY_free(rsa);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--emit") == 0)
		return emit(argv[2]);
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	if (n < 1)
		n = 1;
	mw_use_registry(mw_registry);
	EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	char *nn = bn_b64(rsa, OSSL_PKEY_PARAM_RSA_N), *e = bn_b64(rsa, OSSL_PKEY_PARAM_RSA_E);
	char *x = coord_b64(ec, OSSL_PKEY_PARAM_EC_PUB_X), *y = coord_b64(ec, OSSL_PKEY_PARAM_EC_PUB_Y);
	char path[] = "/tmp/mcp-bench-jwks-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r1\",\"use\":\"sig\",\"n\":\"%s\",\"e\":\"%s\"},"
		"{\"kty\":\"EC\",\"kid\":\"e1\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}]}", nn, e, x, y);
	fclose(f);
	char cfg[1024];
	const char *static_tok = "static-bench-token-0123456789abcdef";
	unsigned char h[32];
	SHA256((const unsigned char *)static_tok, strlen(static_tok), h);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	snprintf(cfg, sizeof cfg, "[{\"use\":\"auth\",\"env\":false,\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"ci\"}],\"oauth\":{\"issuer\":\"%s\",\"jwksFile\":\"%s\","
		 "\"resource\":\"%s\",\"scopes\":[\"mcp:read\"],\"cacheSize\":%d}}]",
		 hex, ISSUER, path, RESOURCE, 4 * n);
	json_t *arr = json_loads(cfg, 0, NULL);
	struct cfg_errors errs = { 0 };
	struct pipeline *pl = pipeline_build(arr, "bench", "/middleware", &errs);
	json_decref(arr);
	if (!pl || pipeline_start(pl) < 0) {
		fprintf(stderr, "mcp-bench-jwt: the pipeline did not build\n");
		return 1;
	}
	char **rs = tokens(rsa, "RS256", "r1", n), **es = tokens(ec, "ES256", "e1", n);
	double cold_rs = check_all(pl, rs, n), cold_es = check_all(pl, es, n);
	double warm = (check_all(pl, rs, n) + check_all(pl, es, n)) / 2;
	char *st[1] = { (char *)static_tok };
	double t0 = now_us();
	for (int i = 0; i < n; i++)
		check_all(pl, st, 1);
	double stat = (now_us() - t0) / n;
	printf("{\"n\":%d,\"cold_rs256_us\":%.2f,\"cold_es256_us\":%.2f,\"warm_us\":%.3f,"
	       "\"static_us\":%.3f}\n", n, cold_rs, cold_es, warm, stat);
	pipeline_unref(pl);
	unlink(path);
	return 0;
}
