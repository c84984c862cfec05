/*
 * test_record.c - unit tests for src/cli/record.c: `--record`, the
 * wiretap that writes each message crossing a peer's edge to a file, with
 * its direction, the backend it is about and secrets redacted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/cli/cli_int.h"
#include "config.h"
#include "fake_chain.h"
#include "middleware.h"
#include "peer.h"
#include "wiretap.h"

#define TWO \
	"{\"mcpServers\": {\"fs\": {\"command\": \"/bin/true\"}," \
	" \"gh\": {\"command\": \"/bin/true\", \"prefix\": \"git\"," \
	"  \"middleware\": [{\"use\": \"log\", \"redact\": {\"keys\": [\"ssn\"]}}]}," \
	" \"off\": {\"command\": \"/bin/true\", \"enabled\": false}}," \
	" \"middleware\": [{\"use\": \"log\", \"redact\": {\"patterns\": [\"sk-[a-z0-9]+\"]}}]}"

struct tmp {
	char dir[64];
	char path[96];
};

static struct cfg *load(const char *text)
{
	struct cfg_errors errs = { 0 };
	struct cfg *c = cfg_load_string(text, "test.json", &errs);
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	assert_non_null(c);
	return c;
}

static void tmp_make(struct tmp *t)
{
	snprintf(t->dir, sizeof t->dir, "/tmp/cli-test-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof t->path, "%s/rec.jsonl", t->dir);
}

static void tmp_remove(struct tmp *t)
{
	unlink(t->path);
	rmdir(t->dir);
}

/* The recording's lines, parsed. */
static json_t *lines_of(const char *path)
{
	json_t *all = json_array();
	char *text = read_all(path);
	assert_non_null(text);
	for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		json_t *m = json_loadb(line, (size_t)(nl - line), 0, NULL);
		assert_non_null(m);
		json_array_append_new(all, m);
	}
	free(text);
	return all;
}

static void tap(const struct peer *p, enum wiretap_dir d, const char *line)
{
	wiretap_line(p, d, line, strlen(line));
}

static const char *field(json_t *lines, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(lines, i), key));
}

/* Directions, the backend told from names, ids and progress tokens, redaction. */
static void test_records_both_edges(void **state)
{
	(void)state;
	struct tmp t;
	tmp_make(&t);
	struct cfg *cfg = load(TWO);
	struct recorder *r = cli_record_start(cfg, t.path);
	assert_non_null(r);
	struct peer client = { .role = PEER_CLIENT, .name = "stdio" };
	struct peer gh = { .role = PEER_BACKEND, .name = "gh" };
	tap(&client, WIRETAP_IN, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
	    "{\"name\":\"git__push\",\"arguments\":{\"password\":\"hunter2\",\"ssn\":\"123\","
	    "\"q\":\"key sk-abc1 here\",\"keep\":\"me\"},\"_meta\":{\"progressToken\":\"tok\"}}}");
	tap(&gh, WIRETAP_OUT, "{\"jsonrpc\":\"2.0\",\"id\":40,\"method\":\"tools/call\",\"params\":{\"name\":\"push\"}}");
	tap(&gh, WIRETAP_IN, "{\"jsonrpc\":\"2.0\",\"id\":40,\"result\":{}}");
	tap(&client, WIRETAP_OUT, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
	    "\"params\":{\"progressToken\":\"tok\",\"progress\":1}}");
	tap(&client, WIRETAP_OUT, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}");
	tap(&client, WIRETAP_IN, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/get\",\"params\":{\"name\":\"fs__p\"}}");
	tap(&client, WIRETAP_IN, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	tap(&client, WIRETAP_IN, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"off__x\"}}");
	tap(&client, WIRETAP_IN, "not json at all");
	cli_record_stop(r);
	assert_null(wiretap_hook);
	tap(&client, WIRETAP_IN, "{}");   /* no tap now: not recorded */

	json_t *l = lines_of(t.path);
	assert_int_equal(json_array_size(l), 9);
	static const char *const dirs[] = { "in", "to-backend", "from-backend", "out", "out", "in", "in",
					    "in", "in" };
	static const char *const backends[] = { "gh", "gh", "gh", "gh", "gh", "fs", NULL, NULL, NULL };
	for (size_t i = 0; i < 9; i++) {
		assert_string_equal(field(l, i, "dir"), dirs[i]);
		if (backends[i])
			assert_string_equal(field(l, i, "backend"), backends[i]);
		else  /* not known: null */
			assert_true(json_is_null(json_object_get(json_array_get(l, i), "backend")));
		const char *ts = field(l, i, "t");
		assert_int_equal(strlen(ts), 27);   /* 2026-01-02T03:04:05.123456Z */
		assert_int_equal(ts[10], 'T');
		assert_int_equal(ts[19], '.');
		assert_int_equal(ts[26], 'Z');
	}
	json_t *args = json_object_get(json_object_get(json_object_get(json_array_get(l, 0), "msg"),
						       "params"), "arguments");
	assert_string_equal(json_string_value(json_object_get(args, "password")), "[REDACTED]"); /* built in */
	assert_string_equal(json_string_value(json_object_get(args, "ssn")), "[REDACTED]");      /* gh's log */
	assert_string_equal(json_string_value(json_object_get(args, "q")), "key [REDACTED] here"); /* top level */
	assert_string_equal(json_string_value(json_object_get(args, "keep")), "me");
	json_t *last = json_array_get(l, 8);
	assert_true(json_is_null(json_object_get(last, "msg")));
	assert_string_equal(json_string_value(json_object_get(last, "raw")), "not json at all");
	json_decref(l);
	cfg_free(cfg);
	tmp_remove(&t);
}

/* One enabled backend owns everything; the file is appended to, not replaced. */
static void test_one_backend_appends(void **state)
{
	(void)state;
	struct tmp t;
	tmp_make(&t);
	FILE *f = fopen(t.path, "w");
	fputs("{\"earlier\":true}\n", f);
	fclose(f);
	struct cfg *cfg = load("{\"mcpServers\": {\"only\": {\"command\": \"/bin/true\"}}}");
	struct recorder *r = cli_record_start(cfg, t.path);
	assert_non_null(r);
	struct peer client = { .role = PEER_CLIENT, .name = "stdio" };
	tap(&client, WIRETAP_IN, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"resources/read\","
	    "\"params\":{\"uri\":\"x://y\",\"authorization\":\"Bearer z\"}}");
	tap(&client, WIRETAP_OUT, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}");
	cli_record_stop(r);
	cli_record_stop(NULL);
	json_t *l = lines_of(t.path);
	assert_int_equal(json_array_size(l), 3);
	assert_true(json_is_true(json_object_get(json_array_get(l, 0), "earlier")));
	assert_string_equal(field(l, 1, "backend"), "only");
	assert_string_equal(field(l, 2, "backend"), "only");
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(
		json_array_get(l, 1), "msg"), "params"), "authorization")), "[REDACTED]");
	json_decref(l);
	cfg_free(cfg);
	tmp_remove(&t);
}

/* A file that cannot be opened: NULL, said why, no tap left set. */
static void test_cannot_open(void **state)
{
	(void)state;
	struct tmp t;
	tmp_make(&t);
	struct cfg *cfg = load("{\"mcpServers\": {\"only\": {\"command\": \"/bin/true\"}}}");
	char bad[128];
	snprintf(bad, sizeof bad, "%s/missing/rec.jsonl", t.dir);
	struct capture cap;
	capture_begin(&cap, t.dir);
	struct recorder *r = cli_record_start(cfg, bad);
	capture_end(&cap);
	assert_null(r);
	assert_null(wiretap_hook);
	assert_non_null(strstr(cap.err, "mcp-chain: --record: cannot open "));
	assert_non_null(strstr(cap.err, "missing/rec.jsonl: No such file or directory\n"));
	unlink(cap.out_path);
	unlink(cap.err_path);
	capture_free(&cap);
	cfg_free(cfg);
	tmp_remove(&t);
}

int main(void)
{
	mw_use_registry(mw_registry);  /* as main(): the "log" modules of the config */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_both_edges),
		cmocka_unit_test(test_one_backend_appends),
		cmocka_unit_test(test_cannot_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
