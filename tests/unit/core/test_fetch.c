/*
 * test_fetch.c - unit tests for src/core/fetch.c: one bounded HTTP request
 * on the loop, against the scripted server of the external tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "curl_ev.h"
#include "ext_test.h"
#include "fetch.h"
#include "http_stub.h"

struct got {
	int calls;
	bool ok;
	long status;
	char body[256];
	size_t len;
	long max_age;
	char www[128];
	char error[256];
};

static int port;
static struct stub_conn *silent;   /* a request left unanswered */

/* The server: the path says what to answer. */
static void handler(struct stub_conn *c, const struct stub_req *r, void *arg)
{
	(void)arg;
	if (strcmp(r->path, "/jwks") == 0)
		stub_reply(c, 200, "application/json", "Cache-Control: public, Max-Age=300\r\n",
			   "{\"keys\":[]}");
	else if (strcmp(r->path, "/nostore") == 0)
		stub_reply(c, 200, "application/json", "Cache-Control: no-store\r\n", "{}");
	else if (strcmp(r->path, "/token") == 0)
		stub_reply(c, 200, "application/json", NULL, r->body);   /* echoes the form */
	else if (strcmp(r->path, "/denied") == 0)
		stub_reply(c, 401, "text/plain",
			   "WWW-Authenticate: Bearer resource_metadata=\"http://x/.well-known/r\"\r\n",
			   "no");
	else if (strcmp(r->path, "/big") == 0) {
		static char big[4096];
		memset(big, 'x', sizeof big - 1);
		stub_reply(c, 200, "text/plain", NULL, big);
	} else if (strcmp(r->path, "/silent") == 0)
		silent = c;
	else
		stub_reply(c, 404, "text/plain", NULL, "not found");
}

static void on_done(void *arg, const struct fetch_res *res)
{
	struct got *g = arg;
	g->calls++;
	g->ok = res->ok;
	g->status = res->status;
	g->max_age = res->max_age;
	if (res->ok) {
		assert_non_null(res->body);
		assert_int_equal(res->body[res->body_len], 0);
		g->len = res->body_len;
		snprintf(g->body, sizeof g->body, "%s", res->body);
		snprintf(g->www, sizeof g->www, "%s", res->www_authenticate ? res->www_authenticate : "");
	} else {
		assert_non_null(res->error);
		snprintf(g->error, sizeof g->error, "%s", res->error);
	}
}

static bool called(const void *arg)
{
	return ((const struct got *)arg)->calls > 0;
}

/* GETs PATH (options in RQ, URL filled in) and runs the loop until done. */
static void get(struct fetch_req *rq, const char *path, struct got *g)
{
	char url[128], why[200];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	rq->url = url;
	memset(g, 0, sizeof *g);
	struct fetch *f = fetch_start(rq, on_done, g, why, sizeof why);
	assert_non_null(f);
	assert_true(ext_run_until(called, g, 5.0));
	assert_int_equal(g->calls, 1);
}

static int setup(void **state)
{
	(void)state;
	silent = NULL;
	port = stub_start(handler, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	stub_stop();
	assert_int_equal(fetch_count(), 0);
	assert_int_equal(curl_ev_count(), 0);
	return 0;
}

/* A GET: status, body, Cache-Control's max-age (any case), no-store as 0. */
static void test_get(void **state)
{
	(void)state;
	struct fetch_req rq = { 0 };
	struct got g;
	get(&rq, "/jwks", &g);
	assert_true(g.ok);
	assert_int_equal(g.status, 200);
	assert_string_equal(g.body, "{\"keys\":[]}");
	assert_int_equal(g.max_age, 300);
	get(&rq, "/nostore", &g);
	assert_int_equal(g.max_age, 0);
	get(&rq, "/elsewhere", &g);
	assert_true(g.ok);
	assert_int_equal(g.status, 404);
	assert_int_equal(g.max_age, -1);
}

/* A POST carries its body and content type; a 401's challenge is reported. */
static void test_post_and_challenge(void **state)
{
	(void)state;
	struct fetch_req rq = { .body = "grant_type=refresh_token&x=1", .body_len = 28 };
	const char *hdrs[] = { "Accept: application/json", NULL };
	rq.headers = hdrs;
	struct got g;
	get(&rq, "/token", &g);
	assert_int_equal(g.status, 200);
	assert_string_equal(g.body, "grant_type=refresh_token&x=1");
	const struct stub_req *r = stub_get(stub_count() - 1);
	assert_string_equal(r->method, "POST");
	assert_string_equal(stub_header(r, "Content-Type"), "application/x-www-form-urlencoded");
	assert_string_equal(stub_header(r, "Accept"), "application/json");
	struct fetch_req plain = { 0 };
	get(&plain, "/denied", &g);
	assert_int_equal(g.status, 401);
	assert_string_equal(g.www, "Bearer resource_metadata=\"http://x/.well-known/r\"");
}

/* Bounded: an answer over max_body fails; a server that never answers
 * times out; a dead port fails; all with a reason. */
static void test_limits(void **state)
{
	(void)state;
	struct fetch_req rq = { .max_body = 1000 };
	struct got g;
	get(&rq, "/big", &g);
	assert_false(g.ok);
	assert_string_equal(g.error, "the answer is too long");
	struct fetch_req slow = { .timeout_ms = 200 };
	get(&slow, "/silent", &g);
	assert_false(g.ok);
	assert_true(strlen(g.error) > 0);
	char url[64], why[200];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", stub_dead_port());
	struct fetch_req dead = { .url = url };
	memset(&g, 0, sizeof g);
	assert_non_null(fetch_start(&dead, on_done, &g, why, sizeof why));
	assert_true(ext_run_until(called, &g, 5.0));
	assert_false(g.ok);
}

/* Refused before anything is sent: not http(s), plain http off loopback,
 * credentials in the URL; cancel stops a request without a report. */
static void test_refused_and_cancel(void **state)
{
	(void)state;
	char why[200];
	struct got g = { 0 };
	struct fetch_req rq = { .url = "file:///etc/passwd" };
	assert_null(fetch_start(&rq, on_done, &g, why, sizeof why));
	assert_string_equal(why, "not an http(s) URL");
	rq.url = "http://example.com/jwks";
	assert_null(fetch_start(&rq, on_done, &g, why, sizeof why));
	assert_non_null(strstr(why, "loopback"));
	assert_false(fetch_url_safe("http://user:pw@127.0.0.1/x"));
	assert_true(fetch_url_safe("http://localhost:8080/x"));
	assert_true(fetch_url_safe("http://[::1]:8080/x"));
	assert_true(fetch_url_safe("https://example.com/x"));
	assert_false(fetch_url_safe("http://127.0.0.1.example.com/x"));
	assert_false(fetch_url_safe("ftp://127.0.0.1/x"));
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/silent", port);
	rq.url = url;
	struct fetch *f = fetch_start(&rq, on_done, &g, why, sizeof why);
	assert_non_null(f);
	assert_int_equal(fetch_count(), 1);
	ext_run_for(0.1);
	fetch_cancel(f);
	assert_int_equal(fetch_count(), 0);
	ext_run_for(0.05);
	assert_int_equal(g.calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_post_and_challenge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_and_cancel, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_ev_release();
	return rc;
}
