/*
 * test_mw_auth.c - unit tests for the "auth" middleware module
 * (src/middleware/auth.c): option validation with key paths, tokens in
 * _meta (checked, stripped, principal and roles set), refusals, public
 * methods, notifications, the environment credential (taken and removed
 * at start) and the principal put back on the response.
 *
 * The module is driven directly through pipelines built from JSON.
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
#include <ev.h>

#include "config.h"
#include "middleware.h"
#include "mw_auth.h"

/* Hex SHA-256 of "secret-alice" and "secret-bob", computed with sha256sum. */
static char h_alice[65], h_bob[65];

/* ---- helpers ---- */

/* Hex SHA-256 of S into OUT (65 bytes), with the same tool a user would use. */
static void hash_hex(const char *s, char *out)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "printf %%s '%s' | sha256sum", s);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, 65, p));
	pclose(p);
	assert_int_equal(strlen(out), 64);
}

/* A started pipeline with one auth module whose extra options are OPTS. */
static struct pipeline *auth_with(const char *opts)
{
	return mwt_start_okf("[{\"use\":\"auth\",\"tokens\":["
		"{\"sha256\":\"%s\",\"principal\":\"alice\",\"roles\":[\"admin\",\"dev\"]},"
		"{\"sha256\":\"%s\",\"principal\":\"bob\"}]%s%s}]",
		h_alice, h_bob, *opts ? "," : "", opts);
}

/* Walks the message TEXT from the client through PL; returns the verdict. */
static enum mw_verdict walk(struct mwt_run *x, struct pipeline *pl, const char *text)
{
	mwt_walk(x, pl, &(struct mwt_msg){ .client = "self-declared", .text = text });
	return x->verdict;
}

#define CALL(meta) "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"," \
	"\"params\":{\"name\":\"echo\"" meta "}}"

/* ---- options ---- */

/* Valid combinations are accepted, and nothing is read before start. */
static void test_options_valid(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_buildf(&e, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		"\"principal\":\"a\"}]},{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		"\"principal\":\"a\",\"roles\":[]}],\"metaKey\":\"k\",\"env\":false,"
		"\"public\":[\"ping\",\"tools/list\"]},{\"use\":\"auth\",\"tokens\":[{"
		"\"sha256\":\"%s\",\"principal\":\"b\"}],\"env\":\"MY_TOKEN_2\",\"public\":[]}]",
		h_alice, h_alice, h_bob);
	assert_non_null(pl);
	assert_int_equal(e.count, 0);
	assert_int_equal(pipeline_size(pl), 3);
	pipeline_unref(pl);
	cfg_errors_release(&e);
}

/* Each wrong option is reported at its own path. */
static void test_options_errors(void **state)
{
	char text[1024];
	(void)state;
	mwt_expect_error("[{\"use\":\"auth\"}]", "t.json: /middleware/0/tokens: missing");
	mwt_expect_error("[{\"use\":\"auth\",\"tokens\":[]}]", "/middleware/0/tokens: missing or not a non-empty");
	mwt_expect_error("[{\"use\":\"auth\",\"tokens\":[3]}]", "/middleware/0/tokens/0: a token is an object");
	mwt_expect_error("[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"abc\",\"principal\":\"a\"}]}]",
			 "/middleware/0/tokens/0/sha256: missing or not 64 hex digits");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%.63sg\","
		 "\"principal\":\"a\"}]}]", h_alice);
	mwt_expect_error(text, "/tokens/0/sha256: missing or not 64 hex");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\"}]}]", h_alice);
	mwt_expect_error(text, "/middleware/0/tokens/0/principal: missing");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\",\"roles\":\"admin\"}]}]", h_alice);
	mwt_expect_error(text, "/middleware/0/tokens/0/roles: must be an array");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\",\"roles\":[\"x\",\"\"]}]}]", h_alice);
	mwt_expect_error(text, "/middleware/0/tokens/0/roles/1: must be a non-empty string");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\",\"role\":[]}]}]", h_alice);
	mwt_expect_error(text, "/middleware/0/tokens/0/role: unknown option");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\"},{\"sha256\":\"%s\",\"principal\":\"b\"}]}]", h_alice, h_alice);
	mwt_expect_error(text, "/middleware/0/tokens/1/sha256: the same hash as /tokens/0");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\"}],\"metaKey\":\"\"}]", h_alice);
	mwt_expect_error(text, "/middleware/0/metaKey: must be a non-empty string");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\"}],\"env\":\"1BAD-NAME\"}]", h_alice);
	mwt_expect_error(text, "/middleware/0/env: must be an environment variable name");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\"}],\"env\":true}]", h_alice);
	mwt_expect_error(text, "/middleware/0/env: must be");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\"}],\"public\":[\"[oops\"]}]", h_alice);
	mwt_expect_error(text, "/middleware/0/public/0: unterminated");
	snprintf(text, sizeof text, "[{\"use\":\"auth\",\"tokens\":[{\"sha256\":\"%s\","
		 "\"principal\":\"a\"}],\"token\":\"x\"}]", h_alice);
	mwt_expect_error(text, "/middleware/0/token: unknown option");
}

/* ---- tokens in _meta ---- */

/* A good token names the principal, carries roles, and is stripped. */
static void test_meta_token(void **state)
{
	(void)state;
	struct pipeline *pl = auth_with("\"env\":false");
	struct mwt_run x;
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"secret-alice\","
					  "\"progressToken\":5}")), MW_PASS);
	assert_string_equal(x.ctx.client, "alice");
	assert_int_equal(json_array_size(x.ctx.roles), 2);
	json_t *meta = json_object_get(json_object_get(x.got, "params"), "_meta");
	assert_null(json_object_get(meta, "io.mcp-chain/token"));
	assert_int_equal(json_integer_value(json_object_get(meta, "progressToken")), 5);
	char *dump = json_dumps(x.got, 0);
	assert_null(strstr(dump, "secret-alice"));
	free(dump);
	mwt_run_release(&x);
	/* the only member: _meta goes away entirely */
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"secret-bob\"}")),
			 MW_PASS);
	assert_string_equal(x.ctx.client, "bob");
	assert_null(json_object_get(json_object_get(x.got, "params"), "_meta"));
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* Missing, wrong and malformed tokens are refused with a clear error. */
static void test_refusals(void **state)
{
	(void)state;
	struct pipeline *pl = auth_with("\"env\":false");
	struct mwt_run x;
	assert_int_equal(walk(&x, pl, CALL("")), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_AUTH_UNAUTHENTICATED);
	assert_non_null(strstr(mwt_error_message(&x), "params._meta[\"io.mcp-chain/token\"]"));
	assert_int_equal(json_integer_value(json_object_get(x.got, "id")), 1);
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"nope\"}")),
			 MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&x), "matches no configured token"));
	assert_null(strstr(mwt_error_message(&x), "nope"));
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":42}")), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_AUTH_UNAUTHENTICATED);
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"\"}")), MW_REPLY);
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* The modules' answer about a transport's token TOK (N bytes). */
static struct mw_cred_check check(struct pipeline *pl, const char *tok, size_t n)
{
	struct mw_cred_check chk = { .token = tok, .len = n };
	pipeline_check_credential(pl, &chk, NULL);
	return chk;
}

/*
 * A transport's bearer token (ctx->credential, from an HTTP session):
 * names the principal without being in the message; an unknown one is
 * refused; a _meta token goes first. check_credential answers the front.
 */
static void test_transport_credential(void **state)
{
	(void)state;
	struct pipeline *pl = auth_with("\"env\":false");
	struct mwt_run x;
	mwt_walk(&x, pl, &(struct mwt_msg){ .client = "self-declared", .credential = "secret-bob",
					    .text = CALL("") });
	assert_int_equal(x.verdict, MW_PASS);
	assert_string_equal(x.ctx.client, "bob");
	mwt_run_release(&x);
	mwt_walk(&x, pl, &(struct mwt_msg){ .credential = "secret-bob",
		.text = CALL(",\"_meta\":{\"io.mcp-chain/token\":\"secret-alice\"}") });
	assert_string_equal(x.ctx.client, "alice");
	mwt_run_release(&x);
	mwt_walk(&x, pl, &(struct mwt_msg){ .credential = "guess", .text = CALL("") });
	assert_int_equal(x.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_AUTH_UNAUTHENTICATED);
	assert_non_null(strstr(mwt_error_message(&x), "bearer token"));
	assert_null(strstr(mwt_error_message(&x), "guess"));
	mwt_run_release(&x);
	assert_int_equal(check(pl, "secret-alice", 12).result, MW_CRED_OK);
	struct mw_cred_check a1 = check(pl, "secret-alice", 12);
	assert_true(a1.has_subject);
	struct mw_cred_check bad = check(pl, "secret-alicX", 12);
	assert_int_equal(bad.result, MW_CRED_INVALID);
	assert_string_equal(bad.error, "invalid_token");
	assert_null(strstr(bad.why, "secret"));
	assert_int_equal(check(pl, "secret-alice", 11).result, MW_CRED_INVALID);
	struct mw_cred_check none_given = check(pl, NULL, 0);
	assert_int_equal(none_given.result, MW_CRED_INVALID);
	assert_null(none_given.error);   /* RFC 6750: no error code when none was presented */
	assert_null(pipeline_resource_metadata(pl));   /* static tokens: no OAuth metadata */
	pipeline_unref(pl);
	/* no module that checks credentials: no opinion */
	struct pipeline *none = mwt_start_okf("[]");
	assert_int_equal(check(none, NULL, 0).result, MW_CRED_NONE);
	pipeline_unref(none);
}

/* Public methods and bare notifications pass without a principal. */
static void test_public_and_notifications(void **state)
{
	(void)state;
	struct pipeline *pl = auth_with("\"env\":false,\"metaKey\":\"tok\",\"public\":[\"ping\",\"tools/l*\"]");
	struct mwt_run x;
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"), MW_PASS);
	assert_null(x.ctx.client);   /* a self-declared name is no principal */
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}"),
			 MW_PASS);
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/list\"}"),
			 MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&x), "params._meta[\"tok\"]"));
	mwt_run_release(&x);
	/* a public method with a token still gets its principal */
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\","
			      "\"params\":{\"_meta\":{\"tok\":\"secret-bob\"}}}"), MW_PASS);
	assert_string_equal(x.ctx.client, "bob");
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}"),
			 MW_PASS);
	assert_null(x.ctx.client);
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\","
			      "\"params\":{\"_meta\":{\"tok\":\"bad\"}}}"), MW_DROP);
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\","
			      "\"params\":{\"_meta\":{\"tok\":\"secret-alice\"}}}"), MW_PASS);
	assert_string_equal(x.ctx.client, "alice");
	assert_null(json_object_get(json_object_get(x.got, "params"), "_meta"));
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* Messages towards the client are not touched. */
static void test_to_client(void **state)
{
	(void)state;
	struct pipeline *pl = auth_with("\"env\":false");
	struct mwt_run x;
	mwt_forward(&x, pl, &(struct mwt_msg){ .dir = MW_TO_CLIENT, .kind = RPC_REQUEST,
		.method = "sampling/createMessage", .client = "c",
		.text = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"sampling/createMessage\","
			"\"params\":{\"_meta\":{\"io.mcp-chain/token\":\"x\"}}}" });
	assert_int_equal(x.verdict, MW_PASS);
	assert_string_equal(x.ctx.client, "c");
	assert_non_null(json_object_get(json_object_get(json_object_get(x.got, "params"), "_meta"),
					"io.mcp-chain/token"));
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* Walks TEXT unparsed from the client through PL; returns the verdict. */
static enum mw_verdict walk_raw(struct mwt_run *x, struct pipeline *pl, const char *text)
{
	mwt_walk(x, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = "tools/call",
		.client = "self-declared", .text = text, .raw = true });
	return x->verdict;
}

/* A message whose _meta cannot hold the token is not parsed; one that may is. */
static void test_reads_only_tokens(void **state)
{
	(void)state;
	setenv("T_AUTH_ENV_RAW", "secret-bob", 1);
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_buildf(&e, "[{\"use\":\"auth\",\"env\":\"T_AUTH_ENV_RAW\","
		"\"tokens\":[{\"sha256\":\"%s\",\"principal\":\"alice\"},"
		"{\"sha256\":\"%s\",\"principal\":\"bob\",\"roles\":[\"ci\"]}]}]", h_alice, h_bob);
	assert_non_null(pl);
	assert_int_equal(pipeline_start(pl), 0);
	struct mwt_run x;
	/* no _meta, or one without the key: passes unread, as the env principal */
	assert_int_equal(walk_raw(&x, pl, CALL("")), MW_PASS);
	assert_null(x.got);
	assert_string_equal(x.ctx.client, "bob");
	assert_int_equal(json_array_size(x.ctx.roles), 1);
	mwt_run_release(&x);
	assert_int_equal(walk_raw(&x, pl, CALL(",\"_meta\":{\"progressToken\":7}")), MW_PASS);
	assert_null(x.got);
	mwt_run_release(&x);
	/* a value that looks like the key: parsed to be sure, nothing to strip */
	assert_int_equal(walk_raw(&x, pl, CALL(",\"_meta\":{\"progressToken\":\"io.mcp-chain/token\"}")),
			 MW_PASS);
	assert_non_null(x.got);
	assert_string_equal(x.ctx.client, "bob");
	mwt_run_release(&x);
	/* the key is there: parsed, checked and stripped */
	assert_int_equal(walk_raw(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"secret-alice\"}")),
			 MW_PASS);
	assert_non_null(x.got);
	assert_string_equal(x.ctx.client, "alice");
	assert_null(json_object_get(json_object_get(x.got, "params"), "_meta"));
	mwt_run_release(&x);
	pipeline_unref(pl);
	cfg_errors_release(&e);
}

/* Without any credential an unparsed request is still refused, with a reply. */
static void test_unread_refused(void **state)
{
	(void)state;
	struct pipeline *pl = auth_with("\"env\":false");
	struct mwt_run x;
	assert_int_equal(walk_raw(&x, pl, CALL("")), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_AUTH_UNAUTHENTICATED);
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* ---- the environment credential ---- */

/* The variable is taken at start (and gone after); it names the principal. */
static void test_env_token(void **state)
{
	(void)state;
	setenv("T_AUTH_ENV_OK", "secret-bob", 1);
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_buildf(&e, "[{\"use\":\"auth\",\"env\":\"T_AUTH_ENV_OK\",\"tokens\":["
		"{\"sha256\":\"%s\",\"principal\":\"alice\"},{\"sha256\":\"%s\",\"principal\":\"bob\"}]}]",
		h_alice, h_bob);
	assert_non_null(pl);
	assert_non_null(getenv("T_AUTH_ENV_OK"));   /* create() reads nothing */
	assert_int_equal(pipeline_start(pl), 0);
	assert_null(getenv("T_AUTH_ENV_OK"));
	struct mwt_run x;
	assert_int_equal(walk(&x, pl, CALL("")), MW_PASS);
	assert_string_equal(x.ctx.client, "bob");
	mwt_run_release(&x);
	/* a token in _meta wins over the environment's */
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"secret-alice\"}")),
			 MW_PASS);
	assert_string_equal(x.ctx.client, "alice");
	mwt_run_release(&x);
	/* a second module reading the same variable gets the same credential */
	struct pipeline *pl2 = mwt_buildf(&e, "[{\"use\":\"auth\",\"env\":\"T_AUTH_ENV_OK\",\"tokens\":["
		"{\"sha256\":\"%s\",\"principal\":\"robert\"}]}]", h_bob);
	assert_int_equal(pipeline_start(pl2), 0);
	assert_int_equal(walk(&x, pl2, CALL("")), MW_PASS);
	assert_string_equal(x.ctx.client, "robert");
	mwt_run_release(&x);
	pipeline_unref(pl2);
	pipeline_unref(pl);
	cfg_errors_release(&e);
}

/* A variable matching no token refuses what has no token of its own. */
static void test_env_token_bad(void **state)
{
	(void)state;
	setenv("T_AUTH_ENV_BAD", "not-a-known-token", 1);
	struct pipeline *pl = auth_with("\"env\":\"T_AUTH_ENV_BAD\"");
	assert_null(getenv("T_AUTH_ENV_BAD"));
	struct mwt_run x;
	assert_int_equal(walk(&x, pl, CALL("")), MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&x), "$T_AUTH_ENV_BAD matches no configured token"));
	assert_null(strstr(mwt_error_message(&x), "not-a-known-token"));
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, CALL(",\"_meta\":{\"io.mcp-chain/token\":\"secret-alice\"}")),
			 MW_PASS);
	mwt_run_release(&x);
	assert_int_equal(walk(&x, pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"), MW_PASS);
	mwt_run_release(&x);
	pipeline_unref(pl);
	/* unset: the message names the variable to set */
	pl = auth_with("\"env\":\"T_AUTH_ENV_UNSET\"");
	assert_int_equal(walk(&x, pl, CALL("")), MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&x), "$T_AUTH_ENV_UNSET set"));
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* Runs the tests. */
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_valid),
		cmocka_unit_test(test_options_errors),
		cmocka_unit_test(test_meta_token),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_transport_credential),
		cmocka_unit_test(test_public_and_notifications),
		cmocka_unit_test(test_to_client),
		cmocka_unit_test(test_reads_only_tokens),
		cmocka_unit_test(test_unread_refused),
		cmocka_unit_test(test_env_token),
		cmocka_unit_test(test_env_token_bad),
	};
	hash_hex("secret-alice", h_alice);
	hash_hex("secret-bob", h_bob);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
