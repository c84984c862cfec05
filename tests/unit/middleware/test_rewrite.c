/*
 * test_rewrite.c - unit tests for src/middleware/rewrite.c: options,
 * renaming both ways, hiding, fixed and default arguments, schema edits.
 * Messages are walked through a pipeline built from JSON, as the chain
 * would walk them. Result patterns and the size cap (rewrite_result.c):
 * test_rewrite_result.c.
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

#include "mw_test.h"

#include "config.h"
#include "log.h"
#include "middleware.h"
#include "rpc.h"

/* ---- options ---- */

/* Every bad option is reported at its path; good ones build. */
static void test_option_errors(void **state)
{
	(void)state;
	mwt_expect_error("[{\"use\":\"rewrite\",\"tool\":{}}]", "t.json: /middleware/0/tool: unknown option");
	mwt_expect_module_error("rewrite", "\"tools\":[]", "/middleware/0/tools: must be an object");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":1}", "/middleware/0/tools/a: must be an object");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"renam\":\"b\"}}", "/middleware/0/tools/a/renam: unknown option");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a/b~c\":{\"x\":1}}", "/tools/a~1b~0c/x: unknown option");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"rename\":\"\"}}", "/tools/a/rename: must be a non-empty string");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"rename\":3}}", "/tools/a/rename: must be");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"title\":\"\"}}", "/tools/a/title: must be a non-empty string");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"description\":null}}", "/tools/a/description: must be a string");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"hide\":1}}", "/tools/a/hide: must be true or false");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"fixed\":[1]}}", "/tools/a/fixed: must be an object");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"defaults\":\"x\"}}", "/tools/a/defaults: must be an object");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"fixed\":{\"k\":1},\"defaults\":{\"k\":2}}}",
			     "/tools/a/defaults/k: is also a fixed argument");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"rename\":\"a\"}}", "/tools/a/rename: is the tool's own name");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"rename\":\"b\"},\"b\":{\"title\":\"B\"}}",
			     "/tools/a/rename: \"b\" is another tool's name");
	mwt_expect_module_error("rewrite", "\"tools\":{\"a\":{\"rename\":\"c\"},\"b\":{\"rename\":\"c\"}}",
			     "/tools/b/rename: \"c\" is also the new name of another tool");

	/* every problem is reported */
	struct cfg_errors errs = { 0 };
	assert_null(mwt_build("[{\"use\":\"rewrite\",\"tools\":{\"a\":{\"hide\":0,\"rename\":1}},"
			  "\"results\":[{\"pattern\":\"(\"}],\"maxResultBytes\":-1}]", &errs));
	assert_int_equal(errs.count, 4);
	cfg_errors_release(&errs);

	/* valid: replacement references, renames that swap, an empty module */
	struct pipeline *pl = mwt_start_ok("[{\"use\":\"rewrite\","
		"\"tools\":{\"a\":{\"rename\":\"b\"},\"b\":{\"rename\":\"a\"},\"c\":{\"rename\":\"d\",\"hide\":true},"
		"\"e\":{}},"
		"\"results\":[{\"pattern\":\"(?<user>\\\\w+)@(\\\\w+)\",\"replace\":\"$1 ${2} $user ${user} $$ $0\"},"
		"{\"pattern\":\"x\"}],\"maxResultBytes\":1}]");
	pipeline_unref(pl);
	pl = mwt_start_ok("[{\"use\":\"rewrite\"}]");
	pipeline_unref(pl);
}

/* ---- tools/list and tools/call ---- */

static const char list_result[] =
	"{\"tools\":["
	"{\"name\":\"read_file\",\"description\":\"Read a file\",\"annotations\":{\"title\":\"Read\"},"
	" \"inputSchema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
	"  \"encoding\":{\"type\":\"string\"},\"limit\":{\"type\":\"integer\"}},"
	"  \"required\":[\"path\",\"encoding\",\"limit\"]}},"
	"{\"name\":\"fs_read\",\"description\":\"the backend's own tool of that name\"},"
	"{\"name\":\"debug\"},"
	"{\"name\":\"write_file\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"mode\":{}},"
	"  \"required\":[\"mode\"]}},"
	"{\"name\":\"other\"}],\"nextCursor\":\"n\"}";

static const char tools_module[] =
	"[{\"use\":\"rewrite\",\"tools\":{"
	"\"read_file\":{\"rename\":\"fs_read\",\"title\":\"Read a file\",\"description\":\"Reads.\","
	"  \"fixed\":{\"encoding\":\"utf8\"},\"defaults\":{\"limit\":100}},"
	"\"debug\":{\"hide\":true},"
	"\"write_file\":{\"fixed\":{\"mode\":\"0600\"}}}}]";

/* tools/list: renamed, retitled, described, hidden, schemas edited. */
static void test_list_rewritten(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(tools_module);
	struct mwt_run r;
	mwt_request(&r, pl, "tools/list", NULL);
	json_t *out = mwt_respond_result(&r, mwt_json(list_result));
	json_t *tools = mwt_at(out, "result.tools");
	/* hidden, and shadowed by the rename: left out */
	assert_int_equal(json_array_size(tools), 3);
	assert_string_equal(mwt_str_at(tools, "0.name"), "fs_read");
	assert_string_equal(mwt_str_at(tools, "0.title"), "Read a file");
	assert_string_equal(mwt_str_at(tools, "0.annotations.title"), "Read a file");
	assert_string_equal(mwt_str_at(tools, "0.description"), "Reads.");
	/* fixed: gone from the schema; defaults: optional, and shown */
	mwt_expect_json(tools, "0.inputSchema",
			"{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
			"\"limit\":{\"type\":\"integer\",\"default\":100}},\"required\":[\"path\"]}");
	/* an empty "required" goes */
	mwt_expect_json(tools, "1", "{\"name\":\"write_file\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}}}");
	mwt_expect_json(tools, "2", "{\"name\":\"other\"}");
	assert_string_equal(mwt_str_at(out, "result.nextCursor"), "n");
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* tools/call: new name routed to the real one; old and hidden names unknown. */
static void test_call_renamed(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(tools_module);
	struct mwt_run r;
	/* the new name goes to the backend under the real one */
	json_t *out = mwt_request(&r, pl, "tools/call", json_pack("{s:s,s:{s:s}}", "name", "fs_read",
							      "arguments", "path", "/x"));
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(mwt_str_at(out, "params.name"), "read_file");
	assert_string_equal(r.ctx.name, "read_file");   /* modules behind see the real name */
	mwt_expect_json(out, "params.arguments", "{\"path\":\"/x\",\"encoding\":\"utf8\",\"limit\":100}");
	mwt_respond_result(&r, mwt_json("{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}"));
	assert_string_equal(r.ctx.name, "fs_read");      /* and those before, the client's */
	mwt_run_release(&r);

	/* the old name, and a hidden tool, are unknown */
	const char *unknown[] = { "read_file", "debug" };
	for (int i = 0; i < 2; i++) {
		out = mwt_request(&r, pl, "tools/call", json_pack("{s:s}", "name", unknown[i]));
		assert_int_equal(r.verdict, MW_REPLY);
		assert_int_equal(json_integer_value(mwt_at(out, "error.code")), RPC_INVALID_PARAMS);
		assert_non_null(strstr(mwt_str_at(out, "error.message"), "Unknown tool"));
		assert_non_null(strstr(mwt_str_at(out, "error.message"), unknown[i]));
		assert_int_equal(json_integer_value(mwt_at(out, "id")), 9);
		mwt_run_release(&r);
	}
	/* tools without an entry pass untouched */
	out = mwt_request(&r, pl, "tools/call", json_pack("{s:s,s:{s:i}}", "name", "other", "arguments", "a", 1));
	assert_int_equal(r.verdict, MW_PASS);
	mwt_expect_json(out, "params", "{\"name\":\"other\",\"arguments\":{\"a\":1}}");
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Fixed arguments override, defaults fill gaps, in copies. */
static void test_fixed_and_defaults(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(tools_module);
	struct mwt_run r;
	/* fixed overrides, defaults only fill gaps */
	json_t *out = mwt_request(&r, pl, "tools/call", mwt_json("{\"name\":\"fs_read\",\"arguments\":"
		"{\"path\":\"p\",\"encoding\":\"latin1\",\"limit\":5}}"));
	mwt_expect_json(out, "params.arguments", "{\"path\":\"p\",\"encoding\":\"utf8\",\"limit\":5}");
	mwt_run_release(&r);
	/* no arguments, or arguments that are not an object */
	out = mwt_request(&r, pl, "tools/call", mwt_json("{\"name\":\"fs_read\"}"));
	mwt_expect_json(out, "params.arguments", "{\"encoding\":\"utf8\",\"limit\":100}");
	mwt_run_release(&r);
	out = mwt_request(&r, pl, "tools/call", mwt_json("{\"name\":\"write_file\",\"arguments\":[1],\"_meta\":{\"k\":1}}"));
	mwt_expect_json(out, "params", "{\"name\":\"write_file\",\"arguments\":{\"mode\":\"0600\"},\"_meta\":{\"k\":1}}");
	/* what reaches the backend is a copy: the module's options stay as they were */
	json_object_set_new(mwt_at(out, "params.arguments"), "mode", json_string("0777"));
	mwt_run_release(&r);
	out = mwt_request(&r, pl, "tools/call", mwt_json("{\"name\":\"write_file\"}"));
	mwt_expect_json(out, "params.arguments", "{\"mode\":\"0600\"}");
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Renames that swap two names route each to the other. */
static void test_swap(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok("[{\"use\":\"rewrite\",\"tools\":{\"a\":{\"rename\":\"b\"},"
					   "\"b\":{\"rename\":\"a\"}}}]");
	struct mwt_run r;
	json_t *out = mwt_request(&r, pl, "tools/call", mwt_json("{\"name\":\"a\"}"));
	assert_string_equal(mwt_str_at(out, "params.name"), "b");
	mwt_run_release(&r);
	mwt_request(&r, pl, "tools/list", NULL);
	out = mwt_respond_result(&r, mwt_json("{\"tools\":[{\"name\":\"a\"},{\"name\":\"b\"}]}"));
	mwt_expect_json(out, "result.tools", "[{\"name\":\"b\"},{\"name\":\"a\"}]");
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Messages the module does not care about pass untouched. */
static void test_untouched(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(tools_module);
	struct mwt_run r;
	/* a backend's request to the client */
	mwt_forward(&r, pl, &(struct mwt_msg){ .dir = MW_TO_CLIENT, .kind = RPC_REQUEST,
		.method = "tools/call",
		.msg = rpc_request(1, "tools/call", json_pack("{s:s}", "name", "fs_read")) });
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(mwt_str_at(r.got, "params.name"), "fs_read");
	json_t *out = mwt_respond_result(&r, mwt_json("{\"tools\":[{\"name\":\"debug\"}]}"));
	assert_int_equal(json_array_size(mwt_at(out, "result.tools")), 1);
	mwt_run_release(&r);
	out = mwt_request(&r, pl, "prompts/get", json_pack("{s:s}", "name", "fs_read"));
	assert_string_equal(mwt_str_at(out, "params.name"), "fs_read");
	mwt_run_release(&r);
	mwt_request(&r, pl, "tools/list", NULL);
	out = mwt_respond_msg(&r, rpc_error(json_object_get(r.got, "id"), -1, "x", NULL), 0);
	assert_non_null(json_object_get(out, "error"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* ---- what the module reads (messages walked unparsed) ---- */

/* Walks TEXT, a client request about NAME (ctx->name), unparsed through PL. */
static json_t *request_raw(struct mwt_run *r, struct pipeline *pl, const char *method,
			   const char *name, const char *text)
{
	return mwt_walk(r, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = method,
		.name = name, .text = text, .raw = true });
}

/* Walks the response TEXT unparsed back; returns what done got (NULL: unread). */
static json_t *respond_raw(struct mwt_run *r, const char *text)
{
	return mwt_respond(r, &(struct mwt_msg){ .text = text, .raw = true,
		.bytes = strlen(text) });
}

#define RW_CALL(params) "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":" params "}"

static const char reads_module[] =
	"[{\"use\":\"rewrite\",\"tools\":{"
	"\"read_file\":{\"rename\":\"fs_read\"},"
	"\"debug\":{\"hide\":true},"
	"\"write_file\":{\"fixed\":{\"mode\":\"0600\"}},"
	"\"list\":{\"defaults\":{\"limit\":10}},"
	"\"pretty\":{\"title\":\"Pretty\",\"description\":\"Only shown differently.\"}}}]";

/*
 * Rewrites the tools/list response TEXT both ways, as bytes and as a parsed
 * tree: both must give the same message.
 */
static void expect_same_list(struct pipeline *pl, const char *text)
{
	struct mwt_run raw, parsed;
	assert_null(request_raw(&raw, pl, "tools/list", NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}"));
	json_t *a = respond_raw(&raw, text);  /* read only when the bytes are unusual */
	a = a ? json_incref(a) : raw.went_on ? mwt_went_on(&raw) : mwt_json(text);
	mwt_request(&parsed, pl, "tools/list", NULL);
	json_t *b = mwt_respond(&parsed, &(struct mwt_msg){ .text = text });
	mwt_expect_same_list(&raw, a, b, "9");
	json_decref(a);
	mwt_run_release(&raw);
	mwt_run_release(&parsed);
}

/* tools/list edited as bytes gives what editing the tree gives. */
static void test_list_as_bytes(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(reads_module);
#define TOOLS(entries) "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[" entries "],\"nextCursor\":\"c\"}}"
	/* renamed, hidden, a fixed argument out of the schema, a default shown, described */
	expect_same_list(pl, TOOLS(
		"{\"name\":\"read_file\",\"inputSchema\":{\"type\":\"object\"}},"
		"{\"name\":\"debug\"},"
		"{\"name\":\"write_file\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
		"{\"mode\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"}},\"required\":[\"mode\",\"path\"]}},"
		"{\"name\":\"list\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"limit\":{\"type\":\"integer\"}}}},"
		"{\"name\":\"pretty\",\"annotations\":{\"title\":\"old\"}},"
		"{\"name\":\"untouched\",\"description\":\"x\"}"));
	/* a backend tool named as another's new name is shadowed */
	expect_same_list(pl, TOOLS("{\"name\":\"fs_read\"},{\"name\":\"read_file\"}"));
	/* nothing to change, nothing at all, entries that are not tools */
	expect_same_list(pl, TOOLS("{\"name\":\"a\"},{\"name\":\"b\"}"));
	expect_same_list(pl, TOOLS(""));
	expect_same_list(pl, TOOLS("7,null,{\"name\":3},{\"name\":\"debug\"},[]"));
	/* escapes in a name; white space; an escaped key falls back to the tree */
	expect_same_list(pl, TOOLS("{\"name\":\"read\\u005ffile\"} , {\"name\":\"de\\u0062ug\"}"));
	expect_same_list(pl, TOOLS("{\"n\\u0061me\":\"debug\"},{\"name\":\"pretty\"}"));
#undef TOOLS
	pipeline_unref(pl);
}

/* Calls of tools the module does not map are not parsed, nor are their results. */
static void test_reads_unmapped_unread(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(reads_module);
	struct mwt_run r;
	assert_null(request_raw(&r, pl, "tools/call", "other",
				RW_CALL("{\"name\":\"other\",\"arguments\":{\"a\":1}}")));
	assert_int_equal(r.verdict, MW_PASS);
	assert_string_equal(r.ctx.name, "other");
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":[]}}"));
	mwt_run_release(&r);
	/* an entry that only changes how the tool is listed: its calls are not read */
	assert_null(request_raw(&r, pl, "tools/call", "pretty", RW_CALL("{\"name\":\"pretty\"}")));
	assert_int_equal(r.verdict, MW_PASS);
	mwt_run_release(&r);
	/* other methods */
	assert_null(request_raw(&r, pl, "prompts/get", "fs_read",
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"prompts/get\","
				"\"params\":{\"name\":\"fs_read\"}}"));
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"messages\":[]}}"));
	mwt_run_release(&r);
	pipeline_unref(pl);
	/* a module without tools reads no call */
	pl = mwt_start_ok("[{\"use\":\"rewrite\",\"maxResultBytes\":100}]");
	assert_null(request_raw(&r, pl, "tools/call", "debug", RW_CALL("{\"name\":\"debug\"}")));
	/* nor a tools/list result */
	mwt_run_release(&r);
	assert_null(request_raw(&r, pl, "tools/list", NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}"));
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[]}}"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Calls the module maps are read and mapped. */
static void test_reads_mapped_calls(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(reads_module);
	struct mwt_run r;
	/* renamed: goes on under the real name, and its result is not read */
	json_t *out = request_raw(&r, pl, "tools/call", "fs_read",
				  RW_CALL("{\"name\":\"fs_read\",\"arguments\":{\"path\":\"/x\"}}"));
	assert_int_equal(r.verdict, MW_PASS);
	assert_non_null(out);
	mwt_expect_json(out, "params", "{\"name\":\"read_file\",\"arguments\":{\"path\":\"/x\"}}");
	assert_string_equal(r.ctx.name, "read_file");
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":[]}}"));
	assert_string_equal(r.ctx.name, "fs_read");   /* back to the client's name */
	mwt_run_release(&r);
	/* fixed arguments */
	out = request_raw(&r, pl, "tools/call", "write_file",
			  RW_CALL("{\"name\":\"write_file\",\"arguments\":{\"mode\":\"0777\",\"p\":1}}"));
	assert_non_null(out);
	mwt_expect_json(out, "params.arguments", "{\"mode\":\"0600\",\"p\":1}");
	mwt_run_release(&r);
	/* defaults */
	out = request_raw(&r, pl, "tools/call", "list", RW_CALL("{\"name\":\"list\"}"));
	assert_non_null(out);
	mwt_expect_json(out, "params.arguments", "{\"limit\":10}");
	mwt_run_release(&r);
	/* hidden, and the old name of a renamed tool: read, and unknown */
	const char *unknown[][2] = {
		{ "debug", RW_CALL("{\"name\":\"debug\"}") },
		{ "read_file", RW_CALL("{\"name\":\"read_file\"}") },
	};
	for (int i = 0; i < 2; i++) {
		out = request_raw(&r, pl, "tools/call", unknown[i][0], unknown[i][1]);
		assert_int_equal(r.verdict, MW_REPLY);
		assert_int_equal(json_integer_value(mwt_at(out, "error.code")), RPC_INVALID_PARAMS);
		assert_non_null(strstr(mwt_str_at(out, "error.message"), unknown[i][0]));
		assert_int_equal(json_integer_value(mwt_at(out, "id")), 9);  /* it read the message */
		mwt_run_release(&r);
	}
	pipeline_unref(pl);
}

/* tools/list results are read and rewritten; call results only with result rules. */
static void test_reads_results(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(reads_module);
	struct mwt_run r;
	assert_null(request_raw(&r, pl, "tools/list", NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}"));
	/* tools/list results are edited as bytes: only the entries changed are parsed */
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":["
		"{\"name\":\"read_file\"},{\"name\":\"debug\"},{\"name\":\"pretty\"},{\"name\":\"x\"}]}}"));
	json_t *out = mwt_went_on(&r);
	assert_non_null(out);
	mwt_expect_json(out, "result.tools", "[{\"name\":\"fs_read\"},{\"name\":\"pretty\",\"title\":\"Pretty\","
			"\"description\":\"Only shown differently.\"},{\"name\":\"x\"}]");
	json_decref(out);
	mwt_run_release(&r);
	pipeline_unref(pl);

	/* with result rules, a call's result is read (the call itself is not) */
	pl = mwt_start_ok("[{\"use\":\"rewrite\",\"results\":[{\"pattern\":"
			  "\"[\\\\w.+-]+@[\\\\w-]+(\\\\.[\\\\w-]+)+\",\"replace\":\"[email]\"}]}]");
	assert_null(request_raw(&r, pl, "tools/call", "t", RW_CALL("{\"name\":\"t\"}")));
	out = respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":"
			  "[{\"type\":\"text\",\"text\":\"to a@b.cd\"}]}}");
	assert_non_null(out);
	assert_string_equal(mwt_str_at(out, "result.content.0.text"), "to [email]");
	mwt_run_release(&r);
	/* but not a tools/list result, which it has nothing to do with */
	assert_null(request_raw(&r, pl, "tools/list", NULL,
				"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}"));
	assert_null(respond_raw(&r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[]}}"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Runs the tests. */
int main(void)
{
	log_set_level(LOG_ERROR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_option_errors),
		cmocka_unit_test(test_list_rewritten),
		cmocka_unit_test(test_call_renamed),
		cmocka_unit_test(test_fixed_and_defaults),
		cmocka_unit_test(test_swap),
		cmocka_unit_test(test_untouched),
		cmocka_unit_test(test_reads_unmapped_unread),
		cmocka_unit_test(test_reads_mapped_calls),
		cmocka_unit_test(test_reads_results),
		cmocka_unit_test(test_list_as_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
