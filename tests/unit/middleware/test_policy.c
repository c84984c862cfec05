/*
 * test_mw_policy.c - unit tests for src/middleware/policy.c (the glob
 * helper has its own, test_glob.c).
 *
 * Most tests walk messages through a pipeline built from JSON, as the
 * chain would; the "ask" tests run the real chain between fake peers, so
 * that the question to the client and its answer travel for real.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <cmocka.h>

#include "mw_test.h"
#include <ev.h>

#include "chain.h"
#include "config.h"
#include "log.h"
#include "middleware.h"
#include "peer.h"
#include "rpc.h"

/* ---- helpers ---- */

/* Walks the client request METHOD/PARAMS (stolen) from CLIENT through PL. */
/* The chain every test of this file uses (made in main, renewed by teardowns). */
static struct chain *C;

static json_t *request(struct mwt_run *r, struct pipeline *pl, const char *client,
		       const char *method, json_t *params)
{
	return mwt_walk(r, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = method,
		.client = client, .msg = rpc_request(9, method, params) });
}

/* Walks the response with RESULT (stolen) back to the client. */
static json_t *respond(struct mwt_run *r, json_t *result)
{
	return mwt_respond(r, &(struct mwt_msg){
		.msg = rpc_result(json_object_get(r->got, "id"), result) });
}

/* Verdict of a tools/call of TOOL by CLIENT through PL. */
static enum mw_verdict call_verdict(struct pipeline *pl, const char *client, const char *tool)
{
	struct mwt_run r;
	request(&r, pl, client, "tools/call", json_pack("{s:s,s:{}}", "name", tool, "arguments"));
	enum mw_verdict v = r.verdict;
	mwt_run_release(&r);
	return v;
}

/* The text of the first content item of a tool result response. */
static const char *result_text(json_t *resp)
{
	json_t *c = json_array_get(json_object_get(json_object_get(resp, "result"), "content"), 0);
	return json_string_value(json_object_get(c, "text"));
}

/* The names (field FIELD) in the array KEY of a list result, space separated. */
static void names_of(json_t *resp, const char *key, const char *field, char *out, size_t n)
{
	json_t *e;
	size_t i, l = 0;
	out[0] = '\0';
	json_array_foreach(json_object_get(json_object_get(resp, "result"), key), i, e) {
		const char *v = json_string_value(json_object_get(e, field));
		l += (size_t)snprintf(out + l, n - l, "%s%s", i ? " " : "", v ? v : "-");
	}
}

/* ---- options ---- */

/* Every bad option is reported at its path; good ones build. */
static void test_option_errors(void **state)
{
	(void)state;
	mwt_expect_error("[{\"use\":\"policy\"}]", "t.json: /middleware/0/rules: missing or not an array");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":{}}]", "/middleware/0/rules: missing");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[],\"bogus\":1}]", "/middleware/0/bogus: unknown option");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[5]}]", "/middleware/0/rules/0: a rule is an object");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{}]}]", "/middleware/0/rules/0: a rule needs");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"clients\":[\"a\"]}]}]", "/rules/0: a rule needs");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"alow\":[]}]}]",
			 "/middleware/0/rules/0/alow: unknown option");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"a\",1]}]}]",
			 "/middleware/0/rules/0/deny/1: must be a string");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"a[\"]}]}]",
			 "/middleware/0/rules/0/deny/0: unterminated [...]");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"allow\":[\"\"]}]}]",
			 "/rules/0/allow/0: empty pattern");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"ask\":{}}]}]",
			 "/rules/0/ask: must be a pattern or an array of patterns");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"ask\":\"x\\\\\"}]}]", "/rules/0/ask: trailing backslash");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"clients\":[]}]}]",
			 "/rules/0/clients: empty");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"clients\":[7]}]}]",
			 "/rules/0/clients/0: must be a string");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"on\":\"tool\"}]}]",
			 "/rules/0/on: must be \"tools\", \"prompts\", \"resources\"");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"on\":[\"tools\",3]}]}]",
			 "/rules/0/on: must be");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"on\":[]}]}]", "/rules/0/on: empty");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[],\"askMessage\":3}]", "/askMessage: must be a non-empty string");
	mwt_expect_error("[{\"use\":\"policy\",\"rules\":[],\"askMessage\":\"\"}]", "/askMessage: must be");

	/* every problem is reported, not just the first */
	struct cfg_errors errs = { 0 };
	assert_null(mwt_build("[{\"use\":\"policy\",\"rules\":[{\"deny\":1},{\"x\":1,\"allow\":[\"[\"]}],\"y\":2}]", &errs));
	assert_int_equal(errs.count, 4);
	cfg_errors_release(&errs);

	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\"},"
		"{\"allow\":[],\"ask\":[\"b\"],\"clients\":\"c*\",\"on\":[\"tools\",\"prompts\",\"resources\"]}],"
		"\"askMessage\":\"ok {name}?\"}]");
	assert_int_equal(pipeline_size(pl), 1);
	pipeline_unref(pl);
	pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[]}]");
	pipeline_unref(pl);
}

/* ---- deciding ---- */

/* A denied tool is refused with an isError tool result; others pass untouched. */
static void test_deny_refuses_call(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"delete_*\",\"write_file\"]}]}]");
	struct mwt_run r;
	json_t *out = request(&r, pl, "cli", "tools/call",
			      json_pack("{s:s,s:{s:i}}", "name", "delete_all", "arguments", "x", 1));
	assert_int_equal(r.verdict, MW_REPLY);
	assert_int_equal(json_integer_value(json_object_get(out, "id")), 9);
	json_t *res = json_object_get(out, "result");
	assert_non_null(res);
	assert_null(json_object_get(out, "error"));
	assert_true(json_is_true(json_object_get(res, "isError")));
	assert_non_null(strstr(result_text(out), "\"delete_all\" is not allowed"));
	assert_non_null(strstr(result_text(out), "policy"));
	mwt_run_release(&r);

	/* an allowed call goes on untouched */
	out = request(&r, pl, "cli", "tools/call", json_pack("{s:s,s:{s:i}}", "name", "read_file", "arguments", "x", 1));
	assert_int_equal(r.verdict, MW_PASS);
	json_t *want = rpc_request(9, "tools/call", json_pack("{s:s,s:{s:i}}", "name", "read_file", "arguments", "x", 1));
	assert_true(json_equal(out, want));
	json_decref(want);
	mwt_run_release(&r);
	assert_int_equal(call_verdict(pl, NULL, "write_file"), MW_REPLY);
	assert_int_equal(call_verdict(pl, NULL, "write_file2"), MW_PASS);
	assert_int_equal(call_verdict(pl, NULL, "delete_"), MW_REPLY);
	/* a call without a name is the backend's problem */
	request(&r, pl, NULL, "tools/call", json_object());
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Deny wins over allow and ask, whatever the rule order. */
static void test_deny_wins(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":["
		"{\"allow\":[\"*\"]},{\"ask\":[\"delete_x\"]},{\"deny\":[\"delete_*\"]}]}]");
	assert_int_equal(call_verdict(pl, "c", "delete_x"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "c", "delete_y"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "c", "read"), MW_PASS);
	pipeline_unref(pl);
}

/* With allow lists only allowed (or ask) names pass; lists add up. */
static void test_allow_list(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":["
		"{\"allow\":[\"read_*\",\"list_?ir\"]},{\"allow\":\"stat\"}]}]");
	assert_int_equal(call_verdict(pl, "c", "read_file"), MW_PASS);
	assert_int_equal(call_verdict(pl, "c", "list_dir"), MW_PASS);
	assert_int_equal(call_verdict(pl, "c", "stat"), MW_PASS);     /* lists add up */
	assert_int_equal(call_verdict(pl, "c", "write_file"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "c", "list_dirs"), MW_REPLY);
	pipeline_unref(pl);

	/* an empty allow list allows nothing; an ask pattern counts as allowed */
	pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"allow\":[]},{\"ask\":\"move_file\"}]}]");
	assert_int_equal(call_verdict(pl, "c", "read_file"), MW_REPLY);
	struct mwt_run r;
	/* outside the chain there is no client to ask: refused, and it says why */
	json_t *out = request(&r, pl, "c", "tools/call", json_pack("{s:s}", "name", "move_file"));
	assert_int_equal(r.verdict, MW_REPLY);
	assert_non_null(strstr(result_text(out), "elicitation unavailable"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Rules limited to clients apply to those clients only. */
static void test_client_limited(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":["
		"{\"allow\":[\"read_*\"],\"clients\":[\"claude-*\",\"cursor\"]},"
		"{\"deny\":[\"shell\"],\"clients\":\"untrusted\"}]}]");
	assert_int_equal(call_verdict(pl, "claude-code", "read_file"), MW_PASS);
	assert_int_equal(call_verdict(pl, "claude-code", "write_file"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "cursor", "write_file"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "cursor2", "write_file"), MW_PASS);
	assert_int_equal(call_verdict(pl, "untrusted", "write_file"), MW_PASS);
	assert_int_equal(call_verdict(pl, "untrusted", "shell"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "claude-code", "shell"), MW_REPLY);  /* not allowed */
	/* a client without an identity matches no client-limited rule */
	assert_int_equal(call_verdict(pl, NULL, "write_file"), MW_PASS);
	assert_int_equal(call_verdict(pl, NULL, "shell"), MW_PASS);
	pipeline_unref(pl);
}

/* The verdict on a call of TOOL with the token TOKEN in _meta, through PL. */
static enum mw_verdict call_with_token(struct pipeline *pl, const char *token, const char *tool)
{
	struct mwt_run r;
	request(&r, pl, "self-declared", "tools/call", json_pack("{s:s,s:{},s:{s:s}}",
		"name", tool, "arguments", "_meta", "io.mcp-chain/token", token));
	enum mw_verdict v = r.verdict;
	mwt_run_release(&r);
	return v;
}

/* Rules limited to roles apply to principals with one of them (auth gives the roles). */
static void test_role_limited(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("["
		"{\"use\":\"auth\",\"env\":false,\"tokens\":["
		"{\"sha256\":\"df6adb0b23fa33235f4aee6a0d62c118b00d71c07c81be87067b4f5892e66dbc\","
		"\"principal\":\"alice\",\"roles\":[\"admin\",\"dev\"]},"
		"{\"sha256\":\"5ca4a69350b4fcad3e869cfe723ad0892f1394ded157e9114798ca33bfab4c7f\","
		"\"principal\":\"bob\",\"roles\":[\"dev\"]},"
		"{\"sha256\":\"7b6f314146b7f4acac6db4d7c268a745a86adb201e9344935519e80b85643934\","
		"\"principal\":\"carol\"}]},"
		"{\"use\":\"policy\",\"rules\":["
		"{\"allow\":[\"read_*\"],\"roles\":[\"dev\",\"ops\"]},"
		"{\"allow\":[\"*\"],\"roles\":\"adm*\"},"
		"{\"deny\":[\"shell\"],\"roles\":[\"dev\"],\"clients\":[\"bob\"]}]}]");
	assert_int_equal(pipeline_start(pl), 0);
	/* alice (admin, dev): everything is allowed */
	assert_int_equal(call_with_token(pl, "tok-admin", "write_file"), MW_PASS);
	assert_int_equal(call_with_token(pl, "tok-admin", "shell"), MW_PASS);
	/* bob (dev): read_* only, and shell denied by the rule for bob as a dev */
	assert_int_equal(call_with_token(pl, "tok-dev", "read_file"), MW_PASS);
	assert_int_equal(call_with_token(pl, "tok-dev", "write_file"), MW_REPLY);
	assert_int_equal(call_with_token(pl, "tok-dev", "shell"), MW_REPLY);
	/* carol has no roles: no role-limited rule applies to her */
	assert_int_equal(call_with_token(pl, "tok-none", "write_file"), MW_PASS);
	pipeline_unref(pl);
	struct cfg_errors e = { 0 };
	assert_null(mwt_build("[{\"use\":\"policy\",\"rules\":[{\"deny\":\"a\",\"roles\":[]}]}]", &e));
	assert_true(mwt_has_error(&e, "/rules/0/roles: empty"));
	cfg_errors_release(&e);
}

/* Walks METHOD with PARAMS (stolen) and returns the verdict, checking the error code. */
static enum mw_verdict other_verdict(struct pipeline *pl, const char *method, json_t *params)
{
	struct mwt_run r;
	json_t *out = request(&r, pl, "c", method, params);
	enum mw_verdict v = r.verdict;
	if (v == MW_REPLY) {
		json_t *err = json_object_get(out, "error");
		assert_non_null(err);
		assert_int_equal(json_integer_value(json_object_get(err, "code")), RPC_INVALID_PARAMS);
		assert_non_null(strstr(json_string_value(json_object_get(err, "message")), "not allowed"));
		assert_int_equal(json_integer_value(json_object_get(out, "id")), 9);
	}
	mwt_run_release(&r);
	return v;
}

/* Prompts and resources: refused with a JSON-RPC error, per "on". */
static void test_prompts_and_resources(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":["
		"{\"deny\":[\"secret*\"]},"
		"{\"deny\":[\"admin_*\"],\"on\":\"prompts\"},"
		"{\"deny\":[\"file:///etc/*\"],\"on\":[\"resources\"]}]}]");
	/* rules are about tools unless "on" says otherwise */
	assert_int_equal(other_verdict(pl, "prompts/get", json_pack("{s:s}", "name", "secret_p")), MW_PASS);
	assert_int_equal(other_verdict(pl, "prompts/get", json_pack("{s:s}", "name", "admin_x")), MW_REPLY);
	assert_int_equal(other_verdict(pl, "prompts/get", json_pack("{s:s}", "name", "greet")), MW_PASS);
	assert_int_equal(other_verdict(pl, "resources/read", json_pack("{s:s}", "uri", "file:///etc/passwd")), MW_REPLY);
	assert_int_equal(other_verdict(pl, "resources/read", json_pack("{s:s}", "uri", "file:///tmp/x")), MW_PASS);
	assert_int_equal(other_verdict(pl, "resources/subscribe", json_pack("{s:s}", "uri", "file:///etc/x")), MW_REPLY);
	assert_int_equal(other_verdict(pl, "resources/unsubscribe", json_pack("{s:s}", "uri", "file:///etc/x")), MW_PASS);
	assert_int_equal(other_verdict(pl, "completion/complete",
		json_pack("{s:{s:s,s:s}}", "ref", "type", "ref/prompt", "name", "admin_x")), MW_REPLY);
	assert_int_equal(other_verdict(pl, "completion/complete",
		json_pack("{s:{s:s,s:s}}", "ref", "type", "ref/resource", "uri", "file:///etc/{x}")), MW_REPLY);
	assert_int_equal(other_verdict(pl, "completion/complete",
		json_pack("{s:{s:s,s:s}}", "ref", "type", "ref/prompt", "name", "greet")), MW_PASS);
	assert_int_equal(call_verdict(pl, "c", "secret_tool"), MW_REPLY);
	assert_int_equal(call_verdict(pl, "c", "admin_x"), MW_PASS);
	pipeline_unref(pl);
}

/* ---- lists ---- */

/* Denied names leave every kind of list; the rest stays as it was. */
static void test_list_filtering(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":["
		"{\"deny\":[\"delete_*\"]},{\"ask\":[\"move\"]},"
		"{\"allow\":[\"greet\"],\"on\":\"prompts\"},"
		"{\"deny\":[\"fixture://b\",\"fixture://item/*\"],\"on\":\"resources\"},"
		"{\"deny\":[\"read\"],\"clients\":[\"bad\"]}]}]");
	struct mwt_run r;
	char names[256];
	request(&r, pl, "good", "tools/list", NULL);
	json_t *out = respond(&r, mwt_json("{\"tools\":[{\"name\":\"delete_a\"},{\"name\":\"read\"},"
		"{\"name\":\"move\"},{\"description\":\"nameless\"},{\"name\":\"delete_b\"},"
		"{\"name\":\"write\"}],\"nextCursor\":\"c2\"}"));
	names_of(out, "tools", "name", names, sizeof names);
	assert_string_equal(names, "read move - write");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "result"), "nextCursor")), "c2");
	mwt_run_release(&r);

	/* per client */
	request(&r, pl, "bad", "tools/list", NULL);
	out = respond(&r, mwt_json("{\"tools\":[{\"name\":\"read\"},{\"name\":\"write\"}]}"));
	names_of(out, "tools", "name", names, sizeof names);
	assert_string_equal(names, "write");
	mwt_run_release(&r);

	/* nothing denied: the very same array stays */
	request(&r, pl, "good", "tools/list", NULL);
	json_t *res = mwt_json("{\"tools\":[{\"name\":\"read\"},{\"name\":\"write\"}]}");
	json_t *arr = json_object_get(res, "tools");
	out = respond(&r, res);
	assert_ptr_equal(json_object_get(json_object_get(out, "result"), "tools"), arr);
	mwt_run_release(&r);

	request(&r, pl, "good", "prompts/list", NULL);
	out = respond(&r, mwt_json("{\"prompts\":[{\"name\":\"greet\"},{\"name\":\"other\"}]}"));
	names_of(out, "prompts", "name", names, sizeof names);
	assert_string_equal(names, "greet");
	mwt_run_release(&r);

	request(&r, pl, "good", "resources/list", NULL);
	out = respond(&r, mwt_json("{\"resources\":[{\"uri\":\"fixture://a\"},{\"uri\":\"fixture://b\"}]}"));
	names_of(out, "resources", "uri", names, sizeof names);
	assert_string_equal(names, "fixture://a");
	mwt_run_release(&r);

	request(&r, pl, "good", "resources/templates/list", NULL);
	out = respond(&r, mwt_json("{\"resourceTemplates\":[{\"uriTemplate\":\"fixture://item/{id}\"},"
				   "{\"uriTemplate\":\"other://{x}\"}]}"));
	names_of(out, "resourceTemplates", "uriTemplate", names, sizeof names);
	assert_string_equal(names, "other://{x}");
	mwt_run_release(&r);

	/* an error response or an odd result passes */
	request(&r, pl, "good", "tools/list", NULL);
	mwt_back(&r, &(struct mwt_msg){
		.msg = rpc_error(json_object_get(r.got, "id"), -32603, "boom", NULL) });
	assert_non_null(json_object_get(r.got, "error"));
	mwt_run_release(&r);
	request(&r, pl, "good", "tools/list", NULL);
	out = respond(&r, mwt_json("{\"tools\":7}"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "result"), "tools")), 7);
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Messages the policy has no say about pass untouched. */
static void test_untouched(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"allow\":[]},"
		"{\"allow\":[],\"on\":[\"prompts\",\"resources\"]}]}]");
	struct mwt_run r;
	/* a backend's request to the client */
	mwt_forward(&r, pl, &(struct mwt_msg){ .dir = MW_TO_CLIENT, .kind = RPC_REQUEST,
		.method = "tools/call",
		.msg = rpc_request(1, "tools/call", json_pack("{s:s}", "name", "x")) });
	assert_int_equal(r.verdict, MW_PASS);
	json_t *resp = respond(&r, mwt_json("{\"tools\":[{\"name\":\"x\"}]}"));
	assert_int_equal(json_array_size(json_object_get(json_object_get(resp, "result"), "tools")), 1);
	mwt_run_release(&r);
	/* a notification */
	mwt_forward(&r, pl, &(struct mwt_msg){ .kind = RPC_NOTIFICATION,
		.method = "notifications/initialized",
		.msg = rpc_notification("notifications/initialized", NULL) });
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	/* other methods */
	request(&r, pl, "c", "ping", NULL);
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	request(&r, pl, "c", "logging/setLevel", json_pack("{s:s}", "level", "info"));
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* ---- what the module reads (messages walked unparsed) ---- */

/*
 * Walks TEXT, a request from CLIENT about NAME (as the chain finds it in
 * params.name or params.uri), unparsed through PL. Returns what done got:
 * NULL when nobody read it.
 */
static json_t *request_raw(struct mwt_run *r, struct pipeline *pl, const char *client,
			   const char *method, const char *name, const char *text)
{
	return mwt_walk(r, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = method,
		.client = client, .name = name, .text = text, .raw = true });
}

/* Walks the response TEXT unparsed back; returns what done got. */
static json_t *respond_raw(struct mwt_run *r, const char *text)
{
	return mwt_respond(r, &(struct mwt_msg){ .text = text, .raw = true });
}

/* The reply to TEXT walked unparsed equals the reply to it walked parsed (but for the id). */
static void expect_same_refusal(struct pipeline *pl, const char *method, const char *name,
				const char *text)
{
	struct mwt_run raw, parsed;
	json_t *a = request_raw(&raw, pl, "c", method, name, text);
	assert_int_equal(raw.verdict, MW_REPLY);
	json_t *req = mwt_json(text);
	json_t *params = json_incref(json_object_get(req, "params"));
	json_t *b = request(&parsed, pl, "c", method, params);
	json_decref(req);
	assert_int_equal(parsed.verdict, MW_REPLY);
	/* the chain puts the requester's id on a module's reply; the rest must match */
	mwt_expect_same_but_id(a, b);
	mwt_run_release(&raw);
	mwt_run_release(&parsed);
}

/*
 * Filters the list response TEXT (to a METHOD request from "c") both ways:
 * as bytes and as a parsed tree. Both must give the same message, and the
 * bytes must be the list with the denied entries taken out and nothing else
 * changed. Returns the names left (KEY's FIELD), space-separated, in OUT.
 */
static void expect_same_list(struct pipeline *pl, const char *method, const char *key,
			     const char *field, const char *text, char *out, size_t n)
{
	struct mwt_run raw, parsed;
	char req[160];
	snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"%s\"}", method);
	assert_null(request_raw(&raw, pl, "c", method, NULL, req));
	json_t *a = respond_raw(&raw, text);  /* read only when the bytes are unusual */
	a = a ? json_incref(a) : raw.went_on ? mwt_went_on(&raw) : mwt_json(text);
	request(&parsed, pl, "c", method, NULL);
	json_t *b = mwt_respond(&parsed, &(struct mwt_msg){ .text = text });
	mwt_expect_same_list(&raw, a, b, "9");
	if (raw.went_on)
		assert_int_equal(json_integer_value(json_object_get(a, "id")), 9);
	names_of(a, key, field, out, n);
	json_decref(a);
	mwt_run_release(&raw);
	mwt_run_release(&parsed);
}

/* Lists filtered as bytes give what filtering the parsed list gives. */
static void test_lists_as_bytes(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":["
		"{\"deny\":[\"delete_*\",\"file:///secret/*\",\"x*\"],\"on\":[\"tools\",\"prompts\",\"resources\"]}]}]");
	char names[256];
#define LIST(k, entries, tail) "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"" k "\":[" entries "]" tail "}}"
	static const struct {
		const char *method, *key, *field, *text;
		const char *names;  /* left after filtering; NULL: not checked */
	} cases[] = {
		{ "tools/list", "tools", "name",
			LIST("tools", "{\"name\":\"delete_a\"},{\"name\":\"read\"},{\"name\":\"delete_b\"}", ""),
			"read" },
		/* the first and the last dropped, white space anywhere, the id after the result */
		{ "tools/list", "tools", "name",
			"{ \"jsonrpc\" : \"2.0\", \"result\" : { \"tools\" : [ {\"name\":\"xa\"} ,\n"
			" {\"name\":\"a\", \"description\":\"keeps [its] {brackets}, and \\\"quotes\\\"\"} , "
			"{\"name\":\"b\"},{\"name\":\"xb\"} ] , \"nextCursor\" : \"c2\" } , \"id\" : 9 }",
			"a b" },
		/* every entry dropped; none dropped (then the bytes are left alone) */
		{ "tools/list", "tools", "name",
			LIST("tools", "{\"name\":\"x1\"},{\"name\":\"x2\"}", ",\"nextCursor\":\"n\""),
			"" },
		{ "tools/list", "tools", "name",
			LIST("tools", "{\"name\":\"a\"},{\"name\":\"b\"}", ""),
			"a b" },
		{ "tools/list", "tools", "name",
			LIST("tools", "", ""),
			"" },
		/* a name with escapes is decided on what it says */
		{ "tools/list", "tools", "name",
			LIST("tools", "{\"name\":\"delete\\u005fall\"},{\"name\":\"caf\\u00e9\"},{\"name\":\"\\\"q\"}", ""),
			"caf\xc3\xa9 \"q" },
		/* entries that are not objects, or have no name, or a name that is not a string, stay */
		{ "tools/list", "tools", "name",
			LIST("tools", "1,\"xa\",null,{},{\"name\":7},[{\"name\":\"xa\"}],{\"name\":\"xb\"}", ""),
			"- - - - - -" },
		/* a repeated name: the last counts, as in the parsed tree */
		{ "tools/list", "tools", "name",
			LIST("tools", "{\"name\":\"ok\",\"name\":\"xa\"},{\"name\":\"xa\",\"name\":\"ok\"}", ""),
			"ok" },
		/* prompts by name, resources by uri, templates by uriTemplate */
		{ "prompts/list", "prompts", "name",
			LIST("prompts", "{\"name\":\"delete_p\"},{\"name\":\"p\"}", ""),
			"p" },
		{ "resources/list", "resources", "uri",
			LIST("resources", "{\"uri\":\"file:///secret/k\",\"name\":\"k\"},{\"uri\":\"file:///pub\"}", ""),
			"file:///pub" },
		{ "resources/templates/list", "resourceTemplates", "uriTemplate",
			LIST("resourceTemplates", "{\"uriTemplate\":\"file:///secret/{k}\"},{\"uriTemplate\":\"db://{t}\"}", ""),
			"db://{t}" },
		/* a repeated list: the last counts, as in the parsed tree */
		{ "tools/list", "tools", "name",
			"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[{\"name\":\"a\"}],\"tools\":[{\"name\":\"xa\"},{\"name\":\"b\"}]}}",
			"b" },
		{ "tools/list", "tools", "name",
			"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[{\"name\":\"xa\"},{\"name\":\"b\"}],\"n\":1,\"tools\":[]}}",
			"" },
		/* members before and after the list, nested lists of the same name inside entries */
		{ "tools/list", "tools", "name",
			"{\"jsonrpc\":\"2.0\",\"result\":{\"_meta\":{\"tools\":[1]},\"tools\":[{\"name\":\"xa\",\"tools\":[{\"name\":\"a\"}]},"
			"{\"name\":\"b\",\"x\":\"]}\\\"[{\"}],\"nextCursor\":\"]\"},\"id\":9}",
			"b" },
		/* unusual bytes (an escaped key) or a list that is not one: the tree decides */
		{ "tools/list", "tools", "name",
			LIST("tools", "{\"n\\u0061me\":\"xa\"},{\"name\":\"b\"}", ""),
			"b" },
		{ "tools/list", "tools", "name",
			"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":{\"name\":\"xa\"}}}",
			NULL },
	};
#undef LIST
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		expect_same_list(pl, cases[i].method, cases[i].key, cases[i].field, cases[i].text,
				 names, sizeof names);
		if (cases[i].names)
			assert_string_equal(names, cases[i].names);
	}
	pipeline_unref(pl);
}

/*
 * Names longer than the list edit's stack buffer (255 bytes) are decided
 * on the whole name, plain and escaped, as a parsed list decides them.
 */
static void test_list_long_names(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"*_z\"]}]}]");
	char a[301], b[301], text[1200], names[1400];
	memset(a, 'k', 300);
	a[300] = '\0';
	memcpy(b, a, 301);
	b[298] = '_';   /* "kkk..._z": denied only when read to its end */
	b[299] = 'z';
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":["
		 "{\"name\":\"%s\"},{\"name\":\"%s\"},{\"name\":\"%.200s\\u005fz\"},"
		 "{\"name\":\"%.255s\"}]}}", a, b, a, a);
	expect_same_list(pl, "tools/list", "tools", "name", text, names, sizeof names);
	char want[600];
	snprintf(want, sizeof want, "%s %.255s", a, a);
	assert_string_equal(names, want);
	pipeline_unref(pl);
}

#define RAW_REQ(method, params) "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"" method "\"," \
	"\"params\":" params "}"

/* An allowed use is decided on ctx->name alone: the request is never parsed. */
static void test_reads_allowed_unread(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"delete_*\"]},"
		"{\"deny\":[\"admin\"],\"on\":\"prompts\"},{\"deny\":[\"file:///etc/*\"],\"on\":\"resources\"}]}]");
	struct mwt_run r;
	assert_null(request_raw(&r, pl, "c", "tools/call", "read_file",
		RAW_REQ("tools/call", "{\"name\":\"read_file\",\"arguments\":{\"x\":1}}")));
	assert_int_equal(r.verdict, MW_PASS);
	/* its response is no list: unread too */
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":[]}}"));
	mwt_run_release(&r);
	assert_null(request_raw(&r, pl, "c", "prompts/get", "greet",
		RAW_REQ("prompts/get", "{\"name\":\"greet\"}")));
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	assert_null(request_raw(&r, pl, "c", "resources/read", "file:///tmp/x",
		RAW_REQ("resources/read", "{\"uri\":\"file:///tmp/x\"}")));
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	assert_null(request_raw(&r, pl, "c", "ping", NULL, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}"));
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* A denied use is refused without parsing, with the same refusal as the parsed path. */
static void test_reads_denied_same_refusal(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"delete_*\"]},"
		"{\"deny\":[\"admin\"],\"on\":\"prompts\"},{\"deny\":[\"file:///etc/*\"],\"on\":\"resources\"}]}]");
	struct mwt_run r;
	json_t *out = request_raw(&r, pl, "c", "tools/call", "delete_all",
		RAW_REQ("tools/call", "{\"name\":\"delete_all\",\"arguments\":{\"x\":1}}"));
	assert_int_equal(r.verdict, MW_REPLY);
	assert_true(json_is_true(json_object_get(json_object_get(out, "result"), "isError")));
	assert_non_null(strstr(result_text(out), "\"delete_all\" is not allowed"));
	mwt_run_release(&r);
	expect_same_refusal(pl, "tools/call", "delete_all",
		RAW_REQ("tools/call", "{\"name\":\"delete_all\",\"arguments\":{\"x\":1}}"));
	expect_same_refusal(pl, "prompts/get", "admin", RAW_REQ("prompts/get", "{\"name\":\"admin\"}"));
	expect_same_refusal(pl, "resources/read", "file:///etc/passwd",
		RAW_REQ("resources/read", "{\"uri\":\"file:///etc/passwd\"}"));
	expect_same_refusal(pl, "resources/subscribe", "file:///etc/x",
		RAW_REQ("resources/subscribe", "{\"uri\":\"file:///etc/x\"}"));
	pipeline_unref(pl);
}

/* Lists, questions and completion are read; lists come back filtered. */
static void test_reads_lists_ask_completion(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_build_ok("[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"delete_*\"]},"
					   "{\"ask\":[\"move_*\"]}]}]");
	struct mwt_run r;
	char names[128];
	/* tools/list: neither the request nor its response is parsed; the list is filtered as bytes */
	assert_null(request_raw(&r, pl, "c", "tools/list", NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}"));
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":"
		"[{\"name\":\"delete_a\"},{\"name\":\"read\"},{\"name\":\"move\"}],\"nextCursor\":\"n\"}}"));
	json_t *out = mwt_went_on(&r);
	assert_non_null(out);
	names_of(out, "tools", "name", names, sizeof names);
	assert_string_equal(names, "read move");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "result"), "nextCursor")), "n");
	json_decref(out);
	mwt_run_release(&r);
	/* a list of a kind no rule is about is not read */
	assert_null(request_raw(&r, pl, "c", "prompts/list", NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"prompts/list\"}"));
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"prompts\":[{\"name\":\"delete_a\"}]}}"));
	mwt_run_release(&r);
	/* ask: read (its arguments go into the question); outside the chain, refused */
	out = request_raw(&r, pl, "c", "tools/call", "move_file",
		RAW_REQ("tools/call", "{\"name\":\"move_file\",\"arguments\":{\"to\":\"b\"}}"));
	assert_int_equal(r.verdict, MW_REPLY);
	assert_non_null(strstr(result_text(out), "elicitation unavailable"));
	mwt_run_release(&r);
	/* completion: its subject is deeper, so it is read, allowed or not */
	out = request_raw(&r, pl, "c", "completion/complete", NULL,
		RAW_REQ("completion/complete", "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"p\"},"
			"\"argument\":{\"name\":\"a\",\"value\":\"v\"}}"));
	assert_int_equal(r.verdict, MW_PASS);
	assert_non_null(out);
	json_t *ref = json_object_get(json_object_get(out, "params"), "ref");
	assert_string_equal(json_string_value(json_object_get(ref, "name")), "p");
	mwt_run_release(&r);
	/* a backend's request to the client and notifications are not read */
	mwt_forward(&r, pl, &(struct mwt_msg){ .dir = MW_TO_CLIENT, .kind = RPC_REQUEST,
		.method = "tools/call", .name = "delete_x",
		.text = RAW_REQ("tools/call", "{\"name\":\"delete_x\"}"), .raw = true });
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.got);
	mwt_run_release(&r);
	mwt_forward(&r, pl, &(struct mwt_msg){ .kind = RPC_NOTIFICATION,
		.method = "notifications/roots/list_changed",
		.text = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}",
		.raw = true });
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.got);
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* ---- ask, through the real chain between fake peers ---- */

struct fake {
	struct peer peer;   /* must be first */
	json_t *got;        /* every message sent to the peer, copied */
};

/* Records a copy of what the chain sends the peer. */
static int fake_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct fake *f = (struct fake *)p;
	(void)o;
	json_array_append_new(f->got, json_deep_copy(msg));
	return 0;
}

static const struct peer_ops fake_ops = { .send = fake_send };
static struct fake client, backend;

/* Prepares and registers a ready fake peer. */
static void fake_init(struct fake *f, enum peer_role role, const char *name)
{
	memset(f, 0, sizeof *f);
	peer_init(&f->peer, &fake_ops, role, name);
	f->got = json_array();
	f->peer.ready = true;
	chain_add_peer(C, &f->peer);
}

/* Unregisters and frees a fake peer. */
static void fake_release(struct fake *f)
{
	chain_remove_peer(&f->peer);
	peer_release(&f->peer);
	json_decref(f->got);
	f->got = NULL;
}

/* The last message F got, or NULL. */
static json_t *last(const struct fake *f)
{
	size_t n = json_array_size(f->got);
	return n ? json_array_get(f->got, n - 1) : NULL;
}

/* A ready backend and a client named claude-code. */
static int chain_setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	fake_init(&backend, PEER_BACKEND, "be");
	fake_init(&client, PEER_CLIENT, "client");
	client.peer.principal = "claude-code";
	return 0;
}

/* Everything freed, no exchange left open. */
static int chain_teardown(void **state)
{
	(void)state;
	chain_set_pipeline(C, NULL);
	fake_release(&client);
	fake_release(&backend);
	chain_free(C);
	C = chain_new();
	assert_int_equal(chain_open_exchanges(C), 0);
	return 0;
}

/* Installs the ask policy as the global pipeline. */
static void use_ask_policy(const char *extra)
{
	char text[512];
	snprintf(text, sizeof text, "[{\"use\":\"policy\",\"rules\":[{\"ask\":[\"move_*\"]},"
		 "{\"deny\":[\"rm\"]}]%s}]", extra);
	struct pipeline *pl = mwt_build_ok(text);
	chain_set_pipeline(C, pl);
	pipeline_unref(pl);
}

/* Sends the client's call of move_file; returns the question the client got. */
static json_t *call_and_get_question(void)
{
	chain_receive(&client.peer, mwt_json("{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"tools/call\","
		"\"params\":{\"name\":\"move_file\",\"arguments\":{\"from\":\"a\",\"to\":\"b\"}}}"));
	json_t *q = last(&client);
	assert_non_null(q);
	assert_string_equal(json_string_value(json_object_get(q, "method")), "elicitation/create");
	assert_true(json_is_integer(json_object_get(q, "id")));
	assert_int_equal(json_array_size(backend.got), 0);   /* held while the user decides */
	return q;
}

/* The client answers question Q with RESULT (a JSON object text). */
static void answer(json_t *q, const char *result)
{
	char text[512];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",%s}",
		 json_integer_value(json_object_get(q, "id")), result);
	chain_receive(&client.peer, mwt_json(text));
}

/* The user accepts: the held call goes on to the backend. */
static void test_ask_accept(void **state)
{
	(void)state;
	use_ask_policy("");
	json_t *q = call_and_get_question();
	json_t *params = json_object_get(q, "params");
	const char *text = json_string_value(json_object_get(params, "message"));
	assert_non_null(strstr(text, "claude-code"));
	assert_non_null(strstr(text, "\"move_file\""));
	assert_non_null(strstr(text, "{\"from\":\"a\",\"to\":\"b\"}"));
	json_t *schema = json_object_get(params, "requestedSchema");
	assert_string_equal(json_string_value(json_object_get(schema, "type")), "object");
	assert_true(json_is_object(json_object_get(schema, "properties")));

	answer(q, "\"result\":{\"action\":\"accept\",\"content\":{}}");
	json_t *fwd = last(&backend);
	assert_non_null(fwd);
	assert_string_equal(json_string_value(json_object_get(fwd, "method")), "tools/call");
	assert_string_equal(json_string_value(json_object_get(json_object_get(fwd, "params"), "name")), "move_file");
	/* the backend's answer reaches the client under its own id */
	char resp[200];
	snprintf(resp, sizeof resp, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"result\":{\"content\":[]}}", json_integer_value(json_object_get(fwd, "id")));
	chain_receive(&backend.peer, mwt_json(resp));
	assert_string_equal(json_string_value(json_object_get(last(&client), "id")), "c1");
	assert_non_null(json_object_get(last(&client), "result"));
}

/* Answers the question with RESULT and returns the text of the refusal. */
static const char *refused_with(const char *result)
{
	json_t *q = call_and_get_question();
	answer(q, result);
	assert_int_equal(json_array_size(backend.got), 0);
	json_t *r = last(&client);
	assert_string_equal(json_string_value(json_object_get(r, "id")), "c1");
	assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
	return result_text(r);
}

/* Decline, cancel and a bad answer refuse; the question can be customised. */
static void test_ask_decline_cancel(void **state)
{
	(void)state;
	use_ask_policy(",\"askMessage\":\"May {client} use {kind} {name}?\"");
	const char *t = refused_with("\"result\":{\"action\":\"decline\"}");
	assert_non_null(strstr(t, "declined"));
	assert_non_null(strstr(t, "\"move_file\""));
	assert_non_null(strstr(t, "not called"));
	t = refused_with("\"result\":{\"action\":\"cancel\"}");
	assert_non_null(strstr(t, "cancelled"));
	t = refused_with("\"result\":{}");
	assert_non_null(strstr(t, "no valid answer"));
	t = refused_with("\"result\":{\"action\":\"maybe\"}");
	assert_non_null(strstr(t, "no valid answer"));
	/* the custom question */
	json_t *q = json_array_get(client.got, 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(q, "params"), "message")),
			    "May claude-code use tool move_file?");
}

/* A client without elicitation: refused, saying why. */
static void test_ask_no_elicitation(void **state)
{
	(void)state;
	use_ask_policy("");
	const char *t = refused_with("\"error\":{\"code\":-32601,\"message\":\"Method not found\"}");
	assert_non_null(strstr(t, "elicitation unavailable"));
	assert_non_null(strstr(t, "Method not found"));
	assert_non_null(strstr(t, "-32601"));
	/* denied names are refused before anyone is asked */
	size_t n = json_array_size(client.got);
	chain_receive(&client.peer, mwt_json("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"rm\"}}"));
	assert_int_equal(json_array_size(client.got), n + 1);
	assert_true(json_is_true(json_object_get(json_object_get(last(&client), "result"), "isError")));
}

/* The client goes away while the user is asked: nothing leaks or hangs. */
static void test_ask_client_gone(void **state)
{
	(void)state;
	use_ask_policy("");
	call_and_get_question();
	chain_peer_gone(&client.peer, "closed");
	assert_int_equal(json_array_size(backend.got), 0);
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* The client cancels its call while the user is asked. */
static void test_ask_cancelled(void **state)
{
	(void)state;
	use_ask_policy("");
	json_t *q = call_and_get_question();
	assert_int_equal(chain_open_exchanges(C), 2);         /* the call and the question */
	chain_receive(&client.peer, mwt_json("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
		"\"params\":{\"requestId\":\"c1\"}}"));
	/* the call ended at once (on_cancel), and the question was withdrawn at the client */
	assert_int_equal(chain_open_exchanges(C), 0);
	json_t *c = last(&client);
	assert_string_equal(json_string_value(json_object_get(c, "method")), "notifications/cancelled");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "params"), "requestId")),
			 json_integer_value(json_object_get(q, "id")));
	size_t n = json_array_size(client.got);
	answer(q, "\"result\":{\"action\":\"accept\"}");   /* too late: dropped */
	assert_int_equal(json_array_size(backend.got), 0);   /* abandoned: never sent */
	assert_int_equal(json_array_size(client.got), n);    /* and never answered */
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* ---- ask on a request that came in as bytes ---- */

static json_t *raw_got;   /* texts the peers got as bytes, in order */

/* Records what the chain sends a peer as bytes. */
static int fake_send_raw(struct peer *p, const struct iovec *iov, int n, const struct peer_out *o)
{
	char text[2048];
	size_t len = 0;
	(void)p;
	(void)o;
	for (int i = 0; i < n; i++) {
		assert_true(len + iov[i].iov_len < sizeof text);
		memcpy(text + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	text[len] = '\0';
	json_array_append_new(raw_got, json_string(text));
	return 0;
}

static const struct peer_ops fake_raw_ops = { .send = fake_send, .send_raw = fake_send_raw };

/* Feeds TEXT from F the way a transport does; true when it is JSON. */
static bool feed(struct fake *f, const char *text)
{
	size_t n = strlen(text);
	char *line = strdup(text);
	assert_non_null(line);
	json_t *err = NULL;
	bool ok = chain_receive_line(&f->peer, line, n, &err);
	json_decref(err);
	memset(line, 'X', n);   /* the transport reuses its buffer */
	free(line);
	return ok;
}

/* The ask policy reads a request that came in as bytes; an allowed one goes as bytes. */
static void test_ask_on_raw_request(void **state)
{
	(void)state;
	use_ask_policy("");
	raw_got = json_array();
	client.peer.ops = backend.peer.ops = &fake_raw_ops;
	/* an allowed call is not read: the backend gets the bytes */
	assert_true(feed(&client, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\","
			 "\"params\":{\"name\":\"read\",\"arguments\":{\"n\":1.50}}}"));
	assert_int_equal(json_array_size(raw_got), 1);
	assert_int_equal(json_array_size(backend.got), 0);
	assert_non_null(strstr(json_string_value(json_array_get(raw_got, 0)), "{\"n\":1.50}"));
	/* a denied call is refused, never sent */
	assert_true(feed(&client, "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"tools/call\","
			 "\"params\":{\"name\":\"rm\"}}"));
	assert_string_equal(json_string_value(json_object_get(last(&client), "id")), "d");
	assert_true(json_is_true(json_object_get(json_object_get(last(&client), "result"), "isError")));
	/* ask: read, so the question quotes its arguments */
	assert_true(feed(&client, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"tools/call\","
			 "\"params\":{\"name\":\"move_file\",\"arguments\":{\"from\":\"a\",\"to\":\"b\"}}}"));
	json_t *q = last(&client);
	assert_string_equal(json_string_value(json_object_get(q, "method")), "elicitation/create");
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(q, "params"), "message")),
			       "{\"from\":\"a\",\"to\":\"b\"}"));
	answer(q, "\"result\":{\"action\":\"accept\",\"content\":{}}");
	/* accepted: it goes on as the tree the module read */
	assert_int_equal(json_array_size(raw_got), 1);
	json_t *fwd = last(&backend);
	assert_non_null(fwd);
	assert_string_equal(json_string_value(json_object_get(json_object_get(fwd, "params"), "name")),
			    "move_file");
	char resp[200];
	snprintf(resp, sizeof resp, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"result\":{\"content\":[]}}", json_integer_value(json_object_get(fwd, "id")));
	chain_receive(&backend.peer, mwt_json(resp));
	assert_string_equal(json_string_value(json_object_get(last(&client), "id")), "c1");
	/* the first call's response still comes back */
	json_t *first = mwt_json(json_string_value(json_array_get(raw_got, 0)));
	snprintf(resp, sizeof resp, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"result\":{}}", json_integer_value(json_object_get(first, "id")));
	json_decref(first);
	assert_true(feed(&backend, resp));   /* unread: back to the client as bytes */
	assert_int_equal(json_array_size(raw_got), 2);
	assert_string_equal(json_string_value(json_array_get(raw_got, 1)),
			    "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}");
	json_decref(raw_got);
	raw_got = NULL;
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* Runs the tests. */
int main(void)
{
	C = chain_new();
	log_set_level(LOG_ERROR);
#define C(name) cmocka_unit_test_setup_teardown(name, chain_setup, chain_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_option_errors),
		cmocka_unit_test(test_deny_refuses_call),
		cmocka_unit_test(test_deny_wins),
		cmocka_unit_test(test_allow_list),
		cmocka_unit_test(test_client_limited),
		cmocka_unit_test(test_role_limited),
		cmocka_unit_test(test_prompts_and_resources),
		cmocka_unit_test(test_list_filtering),
		cmocka_unit_test(test_untouched),
		cmocka_unit_test(test_reads_allowed_unread),
		cmocka_unit_test(test_reads_denied_same_refusal),
		cmocka_unit_test(test_reads_lists_ask_completion),
		cmocka_unit_test(test_lists_as_bytes),
		cmocka_unit_test(test_list_long_names),
		C(test_ask_accept),
		C(test_ask_decline_cancel),
		C(test_ask_no_elicitation),
		C(test_ask_client_gone),
		C(test_ask_cancelled),
		C(test_ask_on_raw_request),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
