/*
 * fuzz_rpc.c - libFuzzer target for src/core/rpc.c: rpc_parse and
 * rpc_classify on any line, rpc_scan_id / rpc_scan_has_method on any
 * head, and rpc_id_key on every number or string in it (and
 * rpc_id_key_text on its text, and on the whole input), checked against
 * a reference: two ids have equal keys exactly when they name the same
 * request (equal strings; numbers of equal value, compared exactly in
 * long double, which holds every int64_t and every double).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_rpc: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

#define MAX_IDS 64

/* Whether A and B (strings or numbers) name the same request. */
static bool same_request(json_t *a, json_t *b)
{
	if (json_is_string(a) || json_is_string(b))
		return json_is_string(a) && json_is_string(b) && json_equal(a, b);
	long double x = json_is_integer(a) ? (long double)json_integer_value(a) :
		(long double)json_real_value(a);
	long double y = json_is_integer(b) ? (long double)json_integer_value(b) :
		(long double)json_real_value(b);
	return x == y;
}

/* Collects the strings and numbers in V (depth first) into IDS. */
static void collect(json_t *v, json_t **ids, size_t *n, int depth)
{
	if (*n >= MAX_IDS || depth > 32)
		return;
	if (json_is_string(v) || json_is_number(v)) {
		ids[(*n)++] = v;
	} else if (json_is_object(v)) {
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x)
			collect(x, ids, n, depth + 1);
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
			collect(x, ids, n, depth + 1);
	}
}

/* Keys of every pair of ids: equal exactly for the same request. */
static void check_keys(json_t **ids, size_t n)
{
	static unsigned char k[MAX_IDS][RPC_KEY_MAX];
	size_t kn[MAX_IDS];
	for (size_t i = 0; i < n; i++) {
		kn[i] = rpc_id_key(ids[i], k[i]);
		if (json_is_number(ids[i]))
			CHECK(kn[i] == 9);
		else
			CHECK(kn[i] == (json_string_length(ids[i]) < RPC_KEY_MAX ?
					json_string_length(ids[i]) + 1 : 0));
		char *text = json_dumps(ids[i], JSON_ENCODE_ANY | JSON_COMPACT);
		unsigned char t[RPC_KEY_MAX];
		CHECK(text);
		CHECK(rpc_id_key_text(text, strlen(text), t) == kn[i] && memcmp(t, k[i], kn[i]) == 0);
		free(text);
		json_t *copy = json_deep_copy(ids[i]);
		unsigned char c[RPC_KEY_MAX];
		CHECK(rpc_id_key(copy, c) == kn[i] && memcmp(c, k[i], kn[i]) == 0);
		json_decref(copy);
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			if (!kn[i] || !kn[j])
				continue;
			bool eq = kn[i] == kn[j] && memcmp(k[i], k[j], kn[i]) == 0;
			CHECK(eq == same_request(ids[i], ids[j]));
		}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	json_object_seed(1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	json_t *err = NULL, *msg = rpc_parse(p, size, &err);
	CHECK((msg == NULL) != (err == NULL));
	if (err) {
		/* the -32700 reply must be a valid response itself */
		struct rpc_info info;
		CHECK(rpc_classify(err, &info) == RPC_RESPONSE);
		char *s = json_dumps(err, JSON_COMPACT);
		CHECK(s);
		free(s);
		json_decref(err);
	} else {
		struct rpc_info info;
		enum rpc_kind kind = rpc_classify(msg, &info);
		CHECK(kind >= RPC_INVALID && kind <= RPC_RESPONSE);
		if (kind == RPC_REQUEST || kind == RPC_NOTIFICATION)
			CHECK(info.method != NULL);
		if (kind == RPC_REQUEST || kind == RPC_RESPONSE)
			CHECK(info.id != NULL);
		if (kind == RPC_INVALID)
			CHECK(info.code == RPC_INVALID_REQUEST && info.reason);
		if (info.id) {
			json_t *e = rpc_error(info.id, RPC_INTERNAL_ERROR, "x", NULL);
			CHECK(e && json_equal(json_object_get(e, "id"), info.id));
			json_decref(e);
		}
		(void)rpc_progress_token(msg);
		json_t *ids[MAX_IDS];
		size_t n = 0;
		collect(msg, ids, &n, 0);
		check_keys(ids, n);
		json_decref(msg);
	}
	/* the whole input as an id's text: the key of what jansson reads there */
	if (size < 4096) {
		unsigned char a[RPC_KEY_MAX], b[RPC_KEY_MAX];
		json_t *v = json_loadb(p, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		size_t na = v ? rpc_id_key(v, a) : 0, nb = rpc_id_key_text(p, size, b);
		CHECK(na == nb && memcmp(a, b, na) == 0);
		json_decref(v);
	}
	json_t *id = rpc_scan_id(p, size);
	if (id) {
		CHECK(json_is_string(id) || json_is_integer(id));
		json_decref(id);
	}
	(void)rpc_scan_has_method(p, size);
	return 0;
}
