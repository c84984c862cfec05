/*
 * test_trace.c - unit tests for src/core/trace.c: W3C traceparent parsing
 * and formatting, the sampling decision, the bounded queue and its drop
 * count, and the OTLP/HTTP JSON an export sends (to the scripted HTTP
 * server of the external tests).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "curl_ev.h"
#include "ext_test.h"
#include "fetch.h"
#include "http_stub.h"
#include "log.h"
#include "trace.h"

#define VALID "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static int port;

/* The collector: /v1/traces answers 200, /silent never. */
static void handler(struct stub_conn *c, const struct stub_req *r, void *arg)
{
	(void)arg;
	if (strcmp(r->path, "/v1/traces") == 0)
		stub_reply(c, 200, "application/json", NULL, "{}");
	else if (strcmp(r->path, "/fail") == 0)
		stub_reply(c, 500, "text/plain", NULL, "no");
}

static int setup(void **state)
{
	(void)state;
	port = stub_start(handler, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	stub_stop();
	assert_int_equal(fetch_count(), 0);
	return 0;
}

/* Parses S; 0 or -1. */
static int parse(const char *s, struct trace_ctx *c)
{
	return trace_parent_parse(s, strlen(s), c);
}

/* A valid traceparent round-trips; every invalid form is refused. */
static void test_traceparent(void **state)
{
	(void)state;
	struct trace_ctx c = { .state = "" };
	char out[TRACE_PARENT_LEN + 1];
	assert_int_equal(parse(VALID, &c), 0);
	assert_int_equal(c.flags, 1);
	assert_int_equal(c.trace_id[0], 0x4b);
	assert_int_equal(c.span_id[7], 0xb7);
	trace_parent_format(&c, out);
	assert_string_equal(out, VALID);
	assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c), 0);
	assert_int_equal(c.flags, 0);
	/* a later version: its first four fields, more after a dash */
	assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-xyz", &c), 0);
	assert_int_equal(c.flags, 1);
	const char *bad[] = {
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",       /* short */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",     /* 00 with more */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",      /* version ff */
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",      /* uppercase */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",      /* zero trace */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",      /* zero span */
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",      /* not hex */
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",      /* separators */
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
		"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",     /* later, no dash */
		NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		struct trace_ctx d;
		if (parse(bad[i], &d) == 0)
			fail_msg("accepted: %s", bad[i]);
	}
	assert_int_equal(trace_parent_parse(NULL, 0, &c), -1);
	/* tracestate: kept when printable and short enough */
	trace_state_set(&c, "congo=t61rcWkgMzE", 17);
	assert_string_equal(c.state, "congo=t61rcWkgMzE");
	trace_state_set(&c, "a=\n", 3);
	assert_string_equal(c.state, "");
	char *longs = malloc(TRACE_STATE_MAX + 2);
	memset(longs, 'a', TRACE_STATE_MAX + 1);
	longs[TRACE_STATE_MAX + 1] = '\0';
	trace_state_set(&c, longs, TRACE_STATE_MAX + 1);
	assert_string_equal(c.state, "");
	free(longs);
}

/* The sampling decision: a parent's flag is followed; ratio 0 and 1. */
static void test_sampling(void **state)
{
	(void)state;
	struct trace_ctx c;
	assert_int_equal(parse(VALID, &c), 0);
	assert_true(trace_should_sample(&c, 0.0));
	c.flags = 0;
	assert_false(trace_should_sample(&c, 1.0));
	int yes = 0;
	for (int i = 0; i < 1000; i++) {
		assert_true(trace_should_sample(NULL, 1.0));
		assert_false(trace_should_sample(NULL, 0.0));
		yes += trace_should_sample(NULL, 0.5);
	}
	assert_true(yes > 350 && yes < 650);
}

/* A tracer exporting to PATH of the stub. */
static struct tracer *tracer_at(const char *path, unsigned batch, unsigned queue)
{
	char url[128], why[200];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	char *hdrs[] = { "X-Tenant: t1", NULL };
	struct cfg_telemetry t = { .set = true, .endpoint = url, .headers = hdrs,
		.service_name = "svc-test", .sampling = 1.0, .batch_size = batch,
		.queue_size = queue, .export_interval = 60, .export_timeout = 5 };
	struct tracer *tr = tracer_new(&t, why, sizeof why);
	assert_non_null(tr);
	trace_use(tr);
	return tr;
}

/* Spans under an unsampled parent, or without a tracer, are not made. */
static void test_unsampled(void **state)
{
	(void)state;
	assert_null(span_start("x", SPAN_SERVER, NULL));
	struct tracer *tr = tracer_at("/v1/traces", 8, 8);
	struct trace_ctx c = { .state = "" };
	assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c), 0);
	assert_null(span_start("x", SPAN_SERVER, &c));
	struct span *s = span_start("x", SPAN_SERVER, NULL);
	assert_non_null(s);
	assert_int_equal(strlen(span_trace_hex(s)), 32);
	span_discard(s);
	tracer_free(tr);
	assert_false(trace_active());
}

/* One more span than the queue holds is dropped and counted, while an
 * export waits for a collector that does not answer. */
static void test_queue_bound(void **state)
{
	(void)state;
	struct tracer *tr = tracer_at("/silent", 4, 4);
	struct trace_stats st;
	for (int i = 0; i < 4; i++)    /* a full batch: the export starts */
		span_end(span_start("a", SPAN_SERVER, NULL));
	trace_stats(tr, &st);
	assert_int_equal(st.queued, 0);
	assert_int_equal(fetch_count(), 1);
	for (int i = 0; i < 10; i++)   /* the export is in flight: 4 wait, 6 go */
		span_end(span_start("b", SPAN_CLIENT, NULL));
	trace_stats(tr, &st);
	assert_int_equal(st.queued, 4);
	assert_int_equal(st.dropped, 6);
	assert_int_equal(fetch_count(), 1);   /* one export in flight at most */
	assert_int_equal(st.exported, 0);
	tracer_free(tr);                      /* cancels it, frees what waits */
	assert_int_equal(fetch_count(), 0);
}

/* A failed export (500) is counted; the spans are not retried. */
static void test_failed_export(void **state)
{
	(void)state;
	struct tracer *tr = tracer_at("/fail", 2, 8);
	span_end(span_start("a", SPAN_SERVER, NULL));
	tracer_flush(tr, 5.0);
	struct trace_stats st;
	trace_stats(tr, &st);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.exported, 0);
	assert_int_equal(st.queued, 0);
	tracer_free(tr);
}

/* The attribute KEY of A (an OTLP attribute array) or NULL. */
static json_t *attr(json_t *a, const char *key)
{
	size_t i;
	json_t *kv;
	json_array_foreach(a, i, kv)
		if (strcmp(json_string_value(json_object_get(kv, "key")), key) == 0)
			return json_object_get(kv, "value");
	return NULL;
}

/* An export is ExportTraceServiceRequest JSON, with the configured headers. */
static void test_otlp_json(void **state)
{
	(void)state;
	struct tracer *tr = tracer_at("/v1/traces", 16, 16);
	struct trace_ctx parent = { .state = "" };
	assert_int_equal(parse(VALID, &parent), 0);
	trace_state_set(&parent, "k=v", 3);
	struct span *srv = span_start("tools/call echo", SPAN_SERVER, &parent);
	assert_non_null(srv);
	span_attr_str(srv, "mcp.method.name", "tools/call");
	span_attr_int(srv, "n", 42);
	span_attr_bool(srv, "b", true);
	span_attr_str(srv, "quoted", "a \"q\"\n");
	span_event(srv, "mcp_chain.denied", "mcp_chain.module", "policy", NULL, NULL,
		   "mcp_chain.detail", "no");
	span_error(srv, "refused");
	struct span *cli = span_start("tools/call echo", SPAN_CLIENT, span_ctx(srv));
	span_end(cli);
	span_end(srv);
	tracer_flush(tr, 5.0);
	struct trace_stats st;
	trace_stats(tr, &st);
	assert_int_equal(st.exported, 2);
	assert_int_equal(stub_count(), 1);
	const struct stub_req *r = stub_get(0);
	assert_string_equal(r->method, "POST");
	assert_string_equal(stub_header(r, "Content-Type"), "application/json");
	assert_string_equal(stub_header(r, "X-Tenant"), "t1");
	json_error_t e;
	json_t *body = json_loads(r->body, 0, &e);
	assert_non_null(body);
	json_t *rs = json_array_get(json_object_get(body, "resourceSpans"), 0);
	json_t *res = json_object_get(json_object_get(rs, "resource"), "attributes");
	assert_string_equal(json_string_value(json_object_get(attr(res, "service.name"),
								"stringValue")), "svc-test");
	json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(ss, "scope"), "name")),
			    "mcp-chain");
	assert_non_null(json_object_get(json_object_get(ss, "scope"), "version"));
	json_t *spans = json_object_get(ss, "spans");
	assert_int_equal(json_array_size(spans), 2);
	json_t *c = json_array_get(spans, 0), *s = json_array_get(spans, 1);
	/* the client span first (it ended first), child of the server span */
	assert_int_equal(json_integer_value(json_object_get(c, "kind")), 3);
	assert_int_equal(json_integer_value(json_object_get(s, "kind")), 2);
	assert_string_equal(json_string_value(json_object_get(s, "traceId")),
			    "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_string_equal(json_string_value(json_object_get(c, "traceId")),
			    "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_string_equal(json_string_value(json_object_get(s, "parentSpanId")),
			    "00f067aa0ba902b7");
	assert_string_equal(json_string_value(json_object_get(c, "parentSpanId")),
			    json_string_value(json_object_get(s, "spanId")));
	assert_int_equal(strlen(json_string_value(json_object_get(s, "spanId"))), 16);
	assert_string_equal(json_string_value(json_object_get(s, "traceState")), "k=v");
	assert_string_equal(json_string_value(json_object_get(s, "name")), "tools/call echo");
	const char *t0 = json_string_value(json_object_get(s, "startTimeUnixNano"));
	const char *t1 = json_string_value(json_object_get(s, "endTimeUnixNano"));
	assert_non_null(t0);
	assert_non_null(t1);
	assert_true(strtoull(t1, NULL, 10) >= strtoull(t0, NULL, 10));
	json_t *a = json_object_get(s, "attributes");
	assert_string_equal(json_string_value(json_object_get(attr(a, "mcp.method.name"),
								"stringValue")), "tools/call");
	assert_string_equal(json_string_value(json_object_get(attr(a, "n"), "intValue")), "42");
	assert_true(json_is_true(json_object_get(attr(a, "b"), "boolValue")));
	assert_string_equal(json_string_value(json_object_get(attr(a, "quoted"), "stringValue")),
			    "a \"q\"\n");
	json_t *ev = json_array_get(json_object_get(s, "events"), 0);
	assert_string_equal(json_string_value(json_object_get(ev, "name")), "mcp_chain.denied");
	assert_non_null(json_object_get(ev, "timeUnixNano"));
	json_t *ea = json_object_get(ev, "attributes");
	assert_int_equal(json_array_size(ea), 2);
	assert_string_equal(json_string_value(json_object_get(attr(ea, "mcp_chain.module"),
								"stringValue")), "policy");
	json_t *status = json_object_get(s, "status");
	assert_int_equal(json_integer_value(json_object_get(status, "code")), 2);
	assert_string_equal(json_string_value(json_object_get(status, "message")), "refused");
	assert_int_equal(json_object_size(json_object_get(c, "status")), 0);
	json_decref(body);
	tracer_free(tr);
}

/* Log lines end with the trace id while one is set (last test: the log
 * stays in its file). */
static void test_log_trace_id(void **state)
{
	(void)state;
	char path[] = "/tmp/test_trace_logXXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(log_open_file(path), 0);
	log_set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
	log_info("a line with a trace");
	log_set_trace_id(NULL);
	log_info("a line without");
	char text[1024] = "";
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(text, 1, sizeof text - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(path);
	assert_non_null(strstr(text, "a line with a trace trace_id=4bf92f3577b34da6a3ce929d0e0e4736\n"));
	assert_non_null(strstr(text, "a line without\n"));
	assert_null(strstr(strstr(text, "a line without"), "trace_id"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_traceparent),
		cmocka_unit_test(test_sampling),
		cmocka_unit_test_setup_teardown(test_unsampled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_export, setup, teardown),
		cmocka_unit_test_setup_teardown(test_otlp_json, setup, teardown),
		cmocka_unit_test(test_log_trace_id),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_ev_release();
	return rc;
}
