/*
 * fuzz_jscan.c - libFuzzer target for src/core/jscan.c, differential
 * against jansson: whatever jscan_message() accepts, json_loadb() with the
 * flags rpc_parse() uses accepts too, and every member the scanner
 * reports (id, method, token, request id, name, uri, _meta, result,
 * isError) is what jansson finds. Declining is always allowed. The
 * walkers (jscan_member*, jscan_items) are checked on accepted messages
 * against jansson, and run on raw bytes for memory safety alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jscan.h"
#include "rpc.h"

#define RPC_FLAGS (JSON_ALLOW_NUL | JSON_DECODE_ANY)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Reports a disagreement with the input and aborts (libFuzzer keeps it). */
#define CHECK(cond) do { if (!(cond)) disagree(#cond, __LINE__); } while (0)

static const uint8_t *cur;
static size_t cur_n;

static void disagree(const char *what, int line)
{
	fprintf(stderr, "fuzz_jscan: line %d: %s fails on %zu bytes: ", line, what, cur_n);
	for (size_t i = 0; i < cur_n && i < 512; i++)
		fprintf(stderr, cur[i] >= 0x20 && cur[i] < 0x7F && cur[i] != '\\' ? "%c" : "\\x%02x",
			cur[i]);
	fputc('\n', stderr);
	abort();
}

/* jansson's value for the span S (raw JSON text), or NULL when absent. */
static json_t *load_span(struct jspan s)
{
	if (!s.p)
		return NULL;
	json_error_t e;
	json_t *v = json_loadb(s.p, s.n, RPC_FLAGS, &e);
	CHECK(v != NULL);
	return v;
}

/* The span S (contents of a string, escapes as they are) decoded by jansson. */
static json_t *load_string_span(struct jspan s)
{
	char *t = malloc(s.n + 2);
	t[0] = '"';
	memcpy(t + 1, s.p, s.n);
	t[s.n + 1] = '"';
	json_t *v = json_loadb(t, s.n + 2, RPC_FLAGS, NULL);
	free(t);
	CHECK(json_is_string(v));
	return v;
}

/* Span S parses to exactly WANT (absent when WANT is NULL). */
static void same_value(struct jspan s, json_t *want)
{
	json_t *v = load_span(s);
	CHECK((v == NULL) == (want == NULL));
	CHECK(!v || json_equal(v, want));
	json_decref(v);
}

/* A string member's span: present exactly when WANT is a string, and equal. */
static void same_string(struct jspan s, json_t *want)
{
	CHECK((s.p != NULL) == json_is_string(want));
	if (!s.p)
		return;
	json_t *v = load_string_span(s);
	CHECK(json_equal(v, want));
	json_decref(v);
}

/* jscan_member and jscan_member_start/after on OBJ (a checked object) vs jansson's J. */
static void walk_members(struct jspan obj, json_t *j, const char *const *keys)
{
	for (; *keys; keys++) {
		struct jspan v = { NULL, 0 };
		int r = jscan_member(obj, *keys, &v);
		CHECK(r >= -1 && r <= 1);
		if (r == -1)
			continue;   /* an escaped key: the caller parses */
		json_t *want = json_object_get(j, *keys);
		CHECK((r == 1) == (want != NULL));
		if (r == 1)
			same_value(v, want);
		const char *at = NULL;
		int s = jscan_member_start(obj, *keys, &at);
		CHECK(s == r);
		if (s == 1) {
			CHECK(at <= v.p);
			/* the last occurrence has none after it */
			CHECK(jscan_member_after(obj, v.p + v.n, *keys) == 0);
		}
	}
}

static void walk(struct jspan obj, json_t *m, int depth);

/* jscan_items over ARR (a checked array) vs jansson's J, with member "name". */
static void walk_items(struct jspan arr, json_t *j, int depth)
{
	struct jscan_items it;
	struct jspan item, fv;
	CHECK(jscan_items_begin(&it, arr) == json_is_array(j));
	if (!json_is_array(j))
		return;
	size_t i = 0;
	int r;
	while ((r = jscan_items_next(&it, &item, "name", &fv)) == 1) {
		json_t *want = json_array_get(j, i++);
		CHECK(want != NULL);
		same_value(item, want);
		same_value(fv, json_is_object(want) ? json_object_get(want, "name") : NULL);
		if (json_is_object(want) && !it.escaped)
			walk(item, want, depth + 1);   /* the elements' own members */
	}
	CHECK(r == 0 || it.escaped);
	if (r == 0) {
		CHECK(i == json_array_size(j));
		CHECK(*it.p == ']');
	}
}

/* The walkers on every container member of an accepted message. */
static void walk(struct jspan obj, json_t *m, int depth)
{
	static const char *const keys[] = { "jsonrpc", "id", "method", "params", "result",
		"error", "name", "uri", "_meta", "progressToken", "arguments", "content",
		"tools", "isError", "requestId", "", "a", NULL };
	walk_members(obj, m, keys);
	if (depth > 3)
		return;
	const char *k;
	json_t *v;
	json_object_foreach(m, k, v) {
		struct jspan s;
		if (!json_is_object(v) && !json_is_array(v))
			continue;
		if (jscan_member(obj, k, &s) != 1)
			continue;
		if (json_is_object(v))
			walk(s, v, depth + 1);
		else
			walk_items(s, v, depth + 1);
	}
}

/* Checks an accepted message against jansson. */
static void differential(const uint8_t *data, size_t size, const struct jscan *js)
{
	json_error_t e;
	json_t *m = json_loadb((const char *)data, size, RPC_FLAGS, &e);
	CHECK(m != NULL);   /* accepted by the scanner: valid for jansson */
	CHECK(json_is_object(m));
	struct rpc_info info;
	enum rpc_kind kind = rpc_classify(m, &info);
	CHECK(kind == (js->method.p ? (js->id.p ? RPC_REQUEST : RPC_NOTIFICATION) : RPC_RESPONSE));
	json_t *id = json_object_get(m, "id"), *params = json_object_get(m, "params"),
		*meta = json_object_get(params, "_meta"), *result = json_object_get(m, "result");
	CHECK(js->has_jsonrpc);
	CHECK(js->has_params == (params != NULL));
	CHECK(js->has_result == (result != NULL));
	CHECK(js->has_error == (json_object_get(m, "error") != NULL));
	same_value(js->id, id);
	if (id) {
		unsigned char a[RPC_KEY_MAX], b[RPC_KEY_MAX];
		size_t na = rpc_id_key(id, a), nb;
		CHECK(js->id_is_string == json_is_string(id));
		if (js->id_is_string) {
			nb = rpc_id_key_string(js->id.p + 1, js->id.n - 2, b);
		} else {
			CHECK(json_is_integer(id) && json_integer_value(id) == js->id_int);
			nb = rpc_id_key_int(js->id_int, b);
		}
		CHECK(na == nb && memcmp(a, b, na) == 0);
		nb = rpc_id_key_text(js->id.p, js->id.n, b);
		CHECK(na == nb && memcmp(a, b, na) == 0);
	}
	json_t *method = json_object_get(m, "method");
	CHECK((js->method.p != NULL) == (method != NULL));
	if (method)
		CHECK(json_string_length(method) == js->method.n &&
		      memcmp(json_string_value(method), js->method.p, js->method.n) == 0);
	json_t *tok = method && strcmp(json_string_value(method), "notifications/progress") == 0 ?
		json_object_get(params, "progressToken") :
		id ? json_object_get(meta, "progressToken") : NULL;
	same_value(js->token, tok);
	same_value(js->request_id, json_object_get(params, "requestId"));
	same_string(js->name, json_object_get(params, "name"));
	same_string(js->uri, json_object_get(params, "uri"));
	same_value(js->meta, json_is_object(meta) ? meta : NULL);
	same_value(js->result, json_is_object(result) ? result : NULL);
	CHECK(js->is_error == json_is_true(json_object_get(result, "isError")));
	walk((struct jspan){ (const char *)data, size }, m, 0);
	json_decref(m);
}

/* The walkers on bytes nobody checked: in bounds, whatever they return. */
static void walk_raw(const uint8_t *data, size_t size)
{
	struct jspan all = { (const char *)data, size }, v;
	const char *at;
	(void)jscan_member(all, "id", &v);
	if (jscan_member_start(all, "params", &at) == 1)
		(void)jscan_member_after(all, at, "params");
	struct jscan_items it;
	struct jspan item, fv;
	if (jscan_items_begin(&it, all))
		for (int i = 0; i < 10000 && jscan_items_next(&it, &item, "name", &fv) == 1; i++)
			;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	json_object_seed(1);   /* deterministic hashing: reproducible runs */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jscan js;
	cur = data;
	cur_n = size;
	if (jscan_message((const char *)data, size, &js))
		differential(data, size, &js);
	walk_raw(data, size);
	return 0;
}
