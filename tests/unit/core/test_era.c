/*
 * test_era.c - unit tests for src/core/era.c (the two protocol eras:
 * revision lists, _meta access, the envelope check, the unsupported
 * version error, mcp-chain's own _meta keys).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "era.h"
#include "rpc.h"

static json_t *parse(const char *text)
{
	json_error_t err;
	json_t *v = json_loads(text, 0, &err);
	if (!v)
		fail_msg("bad test JSON: %s (%s)", text, err.text);
	return v;
}

/* Every revision belongs to exactly one era; anything else to none. */
static void test_versions_and_eras(void **state)
{
	(void)state;
	static const char *const handshake[] = { "2024-11-05", "2025-03-26", "2025-06-18",
						 "2025-11-25" };
	for (size_t i = 0; i < sizeof handshake / sizeof *handshake; i++) {
		assert_true(era_handshake_supported(handshake[i]));
		assert_false(era_stateless_supported(handshake[i]));
		assert_int_equal(era_of_version(handshake[i]), ERA_HANDSHAKE);
	}
	assert_true(era_stateless_supported("2026-07-28"));
	assert_false(era_handshake_supported("2026-07-28"));
	assert_int_equal(era_of_version("2026-07-28"), ERA_STATELESS);
	static const char *const unknown[] = { "", "2024-10-07", "2025-11-25 ", "2026-07-2",
					       "2026-07-28x", "latest", "DRAFT-2026-v1" };
	for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
		assert_false(era_handshake_supported(unknown[i]));
		assert_false(era_stateless_supported(unknown[i]));
		assert_int_equal(era_of_version(unknown[i]), ERA_UNKNOWN);
	}
	assert_int_equal(era_of_version(NULL), ERA_UNKNOWN);
	/* the lists are newest first */
	assert_string_equal(era_handshake_versions[0], "2025-11-25");
	for (size_t i = 1; era_handshake_versions[i]; i++)
		assert_true(strcmp(era_handshake_versions[i - 1], era_handshake_versions[i]) > 0);
}

/* The static entry for each handshake revision; NULL for anything else. */
static void test_handshake_version(void **state)
{
	(void)state;
	for (size_t i = 0; era_handshake_versions[i]; i++) {
		char copy[32];
		strcpy(copy, era_handshake_versions[i]);
		assert_ptr_equal(era_handshake_version(copy), era_handshake_versions[i]);
	}
	assert_null(era_handshake_version(NULL));
	assert_null(era_handshake_version("2026-07-28"));
	assert_null(era_handshake_version("2025-06-1"));
}

/*
 * Another client's answer: the revision asked when it is a handshake one
 * older than the answer's; else the answer as it is (the same reference).
 */
static void test_result_for(void **state)
{
	(void)state;
	json_t *res = parse("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},"
			    "\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}");
	static const struct { const char *asked, *want; } cases[] = {
		{ "2025-03-26", "2025-03-26" }, { "2024-11-05", "2024-11-05" },
		{ "2025-06-18", "2025-06-18" }, { "2025-11-25", "2025-06-18" },
		{ "2026-07-28", "2025-06-18" }, { "2024-10-07", "2025-06-18" },
		{ "x", "2025-06-18" }, { NULL, "2025-06-18" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		json_t *r = era_result_for(res, cases[i].asked);
		assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")),
				    cases[i].want);
		if (strcmp(cases[i].want, "2025-06-18") == 0)
			assert_ptr_equal(r, res);
		assert_ptr_equal(json_object_get(r, "capabilities"), json_object_get(res, "capabilities"));
		json_decref(r);
	}
	assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), "2025-06-18");
	json_decref(res);
	/* an answer naming no handshake revision is left alone */
	res = parse("{\"protocolVersion\":\"2026-07-28\",\"capabilities\":{}}");
	json_t *r = era_result_for(res, "2025-03-26");
	assert_ptr_equal(r, res);
	json_decref(r);
	json_decref(res);
}

/* The supported list: the stateless revision first, then the handshake ones. */
static void test_all_versions(void **state)
{
	(void)state;
	json_t *a = era_all_versions();
	json_t *want = parse("[\"2026-07-28\",\"2025-11-25\",\"2025-06-18\",\"2025-03-26\","
			     "\"2024-11-05\"]");
	assert_true(json_equal(a, want));
	json_decref(a);
	json_decref(want);
}

/* params._meta[key], whatever the shape of params and _meta. */
static void test_meta_lookup(void **state)
{
	(void)state;
	json_t *p = parse("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
			  "\"k\":{\"x\":1}}}");
	assert_string_equal(era_request_version(p), "2026-07-28");
	assert_int_equal(json_integer_value(json_object_get(era_meta(p, "k"), "x")), 1);
	assert_null(era_meta(p, "absent"));
	json_decref(p);

	static const char *const shapes[] = {
		"{}", "{\"_meta\":null}", "{\"_meta\":[]}", "{\"_meta\":\"2026-07-28\"}", "[]", "7",
		"{\"meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}",
	};
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
		json_t *v = json_loads(shapes[i], JSON_DECODE_ANY, NULL);
		assert_non_null(v);
		assert_null(era_meta(v, ERA_META_VERSION));
		assert_null(era_request_version(v));
		json_decref(v);
	}
	assert_null(era_meta(NULL, ERA_META_VERSION));
	/* a version that is not a string is no version */
	p = parse("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":20260728}}");
	assert_null(era_request_version(p));
	json_decref(p);
}

/* What era_check_envelope says of PARAMS, and the code it sets. */
static const char *check(const char *params, int *code)
{
	json_t *p = json_loads(params, JSON_DECODE_ANY, NULL);
	assert_non_null(p);
	*code = 0;
	const char *why = era_check_envelope(p, code);
	json_decref(p);
	return why;
}

/* A stateless request states its version (a supported string) and its capabilities. */
static void test_envelope(void **state)
{
	(void)state;
	int code;
	assert_null(check("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
			  "\"io.modelcontextprotocol/clientCapabilities\":{}}}", &code));

	const char *why = check("{\"name\":\"x\"}", &code);
	assert_non_null(why);
	assert_int_equal(code, RPC_INVALID_PARAMS);
	assert_non_null(strstr(why, ERA_META_VERSION));

	why = check("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":1,"
		    "\"io.modelcontextprotocol/clientCapabilities\":{}}}", &code);
	assert_int_equal(code, RPC_INVALID_PARAMS);
	assert_non_null(strstr(why, "must be a string"));

	/* a handshake-era revision is not spoken on a stateless request */
	why = check("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2025-06-18\","
		    "\"io.modelcontextprotocol/clientCapabilities\":{}}}", &code);
	assert_non_null(why);
	assert_int_equal(code, RPC_UNSUPPORTED_VERSION);

	why = check("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}", &code);
	assert_int_equal(code, RPC_INVALID_PARAMS);
	assert_non_null(strstr(why, ERA_META_CLIENT_CAPS));

	why = check("{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
		    "\"io.modelcontextprotocol/clientCapabilities\":true}}", &code);
	assert_int_equal(code, RPC_INVALID_PARAMS);
	assert_non_null(strstr(why, ERA_META_CLIENT_CAPS));

	assert_non_null(check("null", &code));
	assert_int_equal(code, RPC_INVALID_PARAMS);
}

/* The unsupported-version error: its code, its data, the id it answers. */
static void test_unsupported_error(void **state)
{
	(void)state;
	json_t *id = json_integer(41);
	json_t *e = era_unsupported_error(id, "1999-01-01");
	assert_true(json_equal(json_object_get(e, "id"), id));
	json_t *err = json_object_get(e, "error");
	assert_int_equal(json_integer_value(json_object_get(err, "code")), RPC_UNSUPPORTED_VERSION);
	const char *msg = json_string_value(json_object_get(err, "message"));
	assert_non_null(strstr(msg, "1999-01-01"));
	assert_non_null(strstr(msg, "2026-07-28"));
	json_t *data = json_object_get(err, "data");
	assert_string_equal(json_string_value(json_object_get(data, "requested")), "1999-01-01");
	json_t *all = era_all_versions();
	assert_true(json_equal(json_object_get(data, "supported"), all));
	json_decref(all);
	json_decref(e);

	/* no version asked for: "requested" is null; a long one is cut in the message */
	e = era_unsupported_error(id, NULL);
	err = json_object_get(e, "error");
	assert_true(json_is_null(json_object_get(json_object_get(err, "data"), "requested")));
	assert_non_null(strstr(json_string_value(json_object_get(err, "message")), "(none)"));
	json_decref(e);
	char longv[300];
	memset(longv, 'v', sizeof longv - 1);
	longv[sizeof longv - 1] = '\0';
	e = era_unsupported_error(id, longv);
	err = json_object_get(e, "error");
	assert_true(strlen(json_string_value(json_object_get(err, "message"))) < 160);
	assert_string_equal(json_string_value(json_object_get(json_object_get(err, "data"),
							      "requested")), longv);
	json_decref(e);
	json_decref(id);
}

/* The methods the stateless era removed. */
static void test_removed_methods(void **state)
{
	(void)state;
	static const char *const removed[] = { "initialize", "ping", "logging/setLevel",
					       "resources/subscribe", "resources/unsubscribe" };
	for (size_t i = 0; i < sizeof removed / sizeof *removed; i++)
		assert_true(era_stateless_removed(removed[i]));
	static const char *const kept[] = { "tools/call", "tools/list", "server/discover",
					    "subscriptions/listen", "initialized", "pings", "" };
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
		assert_false(era_stateless_removed(kept[i]));
	assert_false(era_stateless_removed(NULL));
}

/* mcp-chain's own keys come off a request before a client sees it; others stay. */
static void test_strip_own_meta(void **state)
{
	(void)state;
	json_t *m = parse("{\"method\":\"elicitation/create\",\"params\":{\"message\":\"m\","
			  "\"_meta\":{\"io.mcp-chain/inputKey\":\"k1\","
			  "\"io.mcp-chain/relatedRequest\":7,\"other\":1}}}");
	assert_true(era_strip_own_meta(m));
	json_t *want = parse("{\"method\":\"elicitation/create\",\"params\":{\"message\":\"m\","
			     "\"_meta\":{\"other\":1}}}");
	assert_true(json_equal(m, want));
	json_decref(want);
	/* nothing of ours left: false, unchanged */
	assert_false(era_strip_own_meta(m));
	json_decref(m);

	/* only ours: _meta goes with them */
	m = parse("{\"params\":{\"_meta\":{\"io.mcp-chain/relatedRequest\":7}}}");
	assert_true(era_strip_own_meta(m));
	want = parse("{\"params\":{}}");
	assert_true(json_equal(m, want));
	json_decref(want);
	json_decref(m);

	/* an empty _meta that was the client's stays */
	m = parse("{\"params\":{\"_meta\":{}}}");
	assert_false(era_strip_own_meta(m));
	assert_non_null(json_object_get(json_object_get(m, "params"), "_meta"));
	json_decref(m);

	static const char *const none[] = { "{}", "{\"params\":null}", "{\"params\":{\"_meta\":5}}" };
	for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
		m = parse(none[i]);
		assert_false(era_strip_own_meta(m));
		json_decref(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions_and_eras),
		cmocka_unit_test(test_all_versions),
		cmocka_unit_test(test_meta_lookup),
		cmocka_unit_test(test_envelope),
		cmocka_unit_test(test_unsupported_error),
		cmocka_unit_test(test_handshake_version),
		cmocka_unit_test(test_result_for),
		cmocka_unit_test(test_removed_methods),
		cmocka_unit_test(test_strip_own_meta),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
