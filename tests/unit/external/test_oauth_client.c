/*
 * test_oauth_client.c - unit tests for src/external/oauth_client.c and
 * oauth_discover.c against the scripted HTTP server: the well-known URLs,
 * the challenge, discovery's order and its refusals (resource, issuer,
 * S256), the redirect's state and iss, the token endpoint's errors and a
 * refresh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "curl_ev.h"
#include "ext_test.h"
#include "http_stub.h"
#include "oauth_client.h"

/* What the scripted servers answer. */
static struct {
	int port;
	bool challenge;        /* /mcp answers 401 with resource_metadata and scope */
	bool prm_path;         /* the path-form PRM exists (else 404, root answers) */
	const char *prm_resource;   /* NULL: the upstream URL */
	const char *as_issuer;      /* NULL: the right one */
	bool no_s256, iss_param;
	int token_status;
	const char *token_body;
} sc;

static char base[64], mcp_url[96], issuer[96];

static void handler(struct stub_conn *c, const struct stub_req *r, void *arg)
{
	char body[1024];
	(void)arg;
	if (strcmp(r->path, "/mcp") == 0) {
		snprintf(body, sizeof body, "WWW-Authenticate: Bearer error=\"invalid_token\", "
			 "resource_metadata=\"%s/prm\", scope=\"files:read files:write\"\r\n", base);
		stub_reply(c, 401, "text/plain", sc.challenge ? body :
			   "WWW-Authenticate: Bearer realm=\"x\"\r\n", "no");
	} else if (strcmp(r->path, "/prm") == 0 ||
		   (strcmp(r->path, "/.well-known/oauth-protected-resource/mcp") == 0 && sc.prm_path) ||
		   strcmp(r->path, "/.well-known/oauth-protected-resource") == 0) {
		snprintf(body, sizeof body, "{\"resource\":\"%s\",\"authorization_servers\":[\"%s\"],"
			 "\"scopes_supported\":[\"a\",\"b\"]}", sc.prm_resource ? sc.prm_resource : mcp_url,
			 issuer);
		stub_reply(c, 200, "application/json", NULL, body);
	} else if (strcmp(r->path, "/tenant/.well-known/openid-configuration") == 0) {
		snprintf(body, sizeof body, "{\"issuer\":\"%s\",\"authorization_endpoint\":\"%s/authorize\","
			 "\"token_endpoint\":\"%s/token\",\"registration_endpoint\":\"%s/reg\","
			 "\"code_challenge_methods_supported\":[%s],"
			 "\"authorization_response_iss_parameter_supported\":%s}",
			 sc.as_issuer ? sc.as_issuer : issuer, base, base, base,
			 sc.no_s256 ? "\"plain\"" : "\"plain\",\"S256\"", sc.iss_param ? "true" : "false");
		stub_reply(c, 200, "application/json", NULL, body);
	} else if (strcmp(r->path, "/token") == 0) {
		stub_reply(c, sc.token_status, "application/json", NULL, sc.token_body);
	} else if (strcmp(r->path, "/reg") == 0) {
		stub_reply(c, 201, "application/json", NULL, "{\"client_id\":\"dyn-1\"}");
	} else {
		stub_reply(c, 404, "text/plain", NULL, "not found");
	}
}

static int setup(void **state)
{
	(void)state;
	memset(&sc, 0, sizeof sc);
	sc.port = stub_start(handler, NULL);
	snprintf(base, sizeof base, "http://127.0.0.1:%d", sc.port);
	snprintf(mcp_url, sizeof mcp_url, "%s/mcp", base);
	snprintf(issuer, sizeof issuer, "%s/tenant", base);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	stub_stop();
	return 0;
}

struct done {
	int calls;
	char err[700];
};

static void on_done(void *arg, const char *err)
{
	struct done *d = arg;
	d->calls++;
	snprintf(d->err, sizeof d->err, "%s", err ? err : "");
}

static bool finished(const void *arg)
{
	return ((const struct done *)arg)->calls > 0;
}

/* Runs discovery on a new flow; returns it, with the outcome in D. */
static struct oauth_flow *discover(const struct cfg_oauth *o, struct done *d)
{
	char why[200];
	struct oauth_flow *f = oauth_flow_new("up", mcp_url, o, false);
	assert_non_null(f);
	memset(d, 0, sizeof *d);
	assert_int_equal(oauth_discover(f, NULL, on_done, d, why, sizeof why), 0);
	assert_true(ext_run_until(finished, d, 5));
	assert_int_equal(d->calls, 1);
	return f;
}

/* The paths the server was asked for, space-separated. */
static const char *paths(void)
{
	static char out[2048];
	out[0] = 0;
	for (size_t i = 0; i < stub_count(); i++)
		snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "",
			 stub_get(i)->path);
	return out;
}

static void test_helpers(void **state)
{
	(void)state;
	char *u[4];
	assert_int_equal(oauth_prm_urls("https://h.example/api/mcp/", u), 0);
	assert_string_equal(u[0], "https://h.example/.well-known/oauth-protected-resource/api/mcp");
	assert_string_equal(u[1], "https://h.example/.well-known/oauth-protected-resource");
	free(u[0]);
	free(u[1]);
	assert_int_equal(oauth_prm_urls("https://h.example", u), 0);
	assert_string_equal(u[0], "https://h.example/.well-known/oauth-protected-resource");
	assert_null(u[1]);
	free(u[0]);
	assert_int_equal(oauth_as_urls("https://as.example/t1/", u), 0);
	assert_string_equal(u[0], "https://as.example/.well-known/oauth-authorization-server/t1");
	assert_string_equal(u[1], "https://as.example/.well-known/openid-configuration/t1");
	assert_string_equal(u[2], "https://as.example/t1/.well-known/openid-configuration");
	assert_null(u[3]);
	for (int i = 0; i < 3; i++)
		free(u[i]);
	assert_int_equal(oauth_as_urls("https://as.example", u), 0);
	assert_string_equal(u[0], "https://as.example/.well-known/oauth-authorization-server");
	assert_string_equal(u[1], "https://as.example/.well-known/openid-configuration");
	assert_null(u[2]);
	free(u[0]);
	free(u[1]);
	assert_int_equal(oauth_as_urls("ftp://x", u), -1);

	assert_true(oauth_resource_covers("https://h.example/api", "https://h.example/api/mcp"));
	assert_true(oauth_resource_covers("https://h.example/mcp", "https://h.example/mcp"));
	assert_true(oauth_resource_covers("https://h.example", "https://h.example/mcp"));
	assert_false(oauth_resource_covers("https://h.example/api", "https://h.example/api2"));
	assert_false(oauth_resource_covers("https://h.example/mcp/", "https://h.example/mcp"));
	assert_false(oauth_resource_covers("https://other.example/mcp", "https://h.example/mcp"));
	assert_false(oauth_resource_covers("http://h.example/mcp", "https://h.example/mcp"));

	char *c = oauth_canonical_url("HTTPS://H.Example:8443/Path#frag");
	assert_string_equal(c, "https://h.example:8443/Path");
	free(c);

	struct oauth_challenge ch;
	assert_int_equal(oauth_challenge_parse("Basic realm=\"a\", Bearer error=\"insufficient_scope\", "
					       "scope=\"a b\", resource_metadata=\"https://x/y\"", &ch), 0);
	assert_string_equal(ch.error, "insufficient_scope");
	assert_string_equal(ch.scope, "a b");
	assert_string_equal(ch.resource_metadata, "https://x/y");
	oauth_challenge_release(&ch);
	assert_int_equal(oauth_challenge_parse("Basic realm=\"scope\"", &ch), -1);
	assert_null(ch.scope);
	assert_int_equal(oauth_challenge_parse("Bearer", &ch), 0);
	oauth_challenge_release(&ch);
}

/* No resource_metadata: PRM path form (404), root; then the issuer's
 * three candidates in the spec's order. */
static void test_discovery_order(void **state)
{
	(void)state;
	struct done d;
	struct oauth_flow *f = discover(NULL, &d);
	assert_string_equal(d.err, "");
	assert_string_equal(paths(), "/mcp /.well-known/oauth-protected-resource/mcp "
			    "/.well-known/oauth-protected-resource "
			    "/.well-known/oauth-authorization-server/tenant "
			    "/.well-known/openid-configuration/tenant "
			    "/tenant/.well-known/openid-configuration");
	const struct oauth_meta *m = oauth_flow_meta(f);
	assert_string_equal(m->issuer, issuer);
	assert_string_equal(m->scope, "a b");    /* the PRM's scopes_supported */
	assert_string_equal(m->resource, mcp_url);
	assert_non_null(m->registration_endpoint);
	oauth_flow_free(f);
}

/* The challenge's resource_metadata and scope win; "resource": false. */
static void test_challenge_first(void **state)
{
	(void)state;
	struct done d;
	struct cfg_oauth o = { .resource = false };
	sc.challenge = true;
	sc.prm_path = true;
	struct oauth_flow *f = discover(&o, &d);
	assert_string_equal(d.err, "");
	assert_non_null(strstr(paths(), "/mcp /prm /.well-known/oauth-authorization-server/tenant"));
	assert_string_equal(oauth_flow_meta(f)->scope, "files:read files:write");
	assert_null(oauth_flow_meta(f)->resource);
	oauth_flow_free(f);
}

static void test_refusals(void **state)
{
	(void)state;
	struct done d;
	sc.prm_resource = "http://127.0.0.1:1/elsewhere";
	oauth_flow_free(discover(NULL, &d));
	assert_non_null(strstr(d.err, "does not cover"));

	sc.prm_resource = NULL;
	sc.as_issuer = "http://127.0.0.1:1/tenant";
	oauth_flow_free(discover(NULL, &d));
	assert_non_null(strstr(d.err, "must match exactly"));

	sc.as_issuer = NULL;
	sc.no_s256 = true;
	oauth_flow_free(discover(NULL, &d));
	assert_non_null(strstr(d.err, "does not list S256"));
}

/* The value of KEY in URL's query (static). */
static const char *qv(const char *url, const char *key)
{
	static char v[200];
	char k[64];
	snprintf(k, sizeof k, "%s=", key);
	const char *p = strstr(url, k);
	if (!p)
		return NULL;
	p += strlen(k);
	snprintf(v, sizeof v, "%.*s", (int)strcspn(p, "&"), p);
	return v;
}

/* Pre-registered client, then the redirect's state and iss. */
static void test_redirect(void **state)
{
	(void)state;
	struct done d;
	char why[600], q[400];
	struct cfg_oauth o = { .resource = true, .client_id = "pre-1" };
	sc.iss_param = true;
	struct oauth_flow *f = discover(&o, &d);
	assert_string_equal(d.err, "");
	memset(&d, 0, sizeof d);
	assert_int_equal(oauth_register(f, "http://127.0.0.1:5/callback", NULL, on_done, &d, why,
					sizeof why), 0);
	assert_int_equal(d.calls, 1);
	assert_string_equal(oauth_flow_tokens(f)->client_id, "pre-1");
	char *url = oauth_authorize_url(f);
	assert_non_null(url);
	assert_string_equal(qv(url, "client_id"), "pre-1");
	assert_string_equal(qv(url, "code_challenge_method"), "S256");
	assert_int_equal(strlen(qv(url, "code_challenge")), 43);
	assert_non_null(strstr(url, "resource=http%3A%2F%2F127.0.0.1"));
	assert_non_null(strstr(url, "redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcallback"));
	char st[64];
	snprintf(st, sizeof st, "%s", qv(url, "state"));
	free(url);

	assert_null(oauth_redirect_check(f, "code=c1&state=forged", why, sizeof why));
	assert_non_null(strstr(why, "state does not match"));
	snprintf(q, sizeof q, "code=c1&state=%s&iss=http%%3A%%2F%%2Fevil.example", st);
	assert_null(oauth_redirect_check(f, q, why, sizeof why));
	assert_non_null(strstr(why, "mix-up"));
	snprintf(q, sizeof q, "code=c1&state=%s", st);
	assert_null(oauth_redirect_check(f, q, why, sizeof why));
	assert_non_null(strstr(why, "has no iss"));
	snprintf(q, sizeof q, "state=%s&iss=%s&error=access_denied&error_description=no+way", st, issuer);
	assert_null(oauth_redirect_check(f, q, why, sizeof why));
	assert_non_null(strstr(why, "access_denied: no way"));
	snprintf(q, sizeof q, "code=c%%2F1&state=%s&iss=%s", st, issuer);
	char *code = oauth_redirect_check(f, q, why, sizeof why);
	assert_non_null(code);
	assert_string_equal(code, "c/1");

	/* the token endpoint refuses: its error and description, never the code */
	sc.token_status = 400;
	sc.token_body = "{\"error\":\"invalid_grant\",\"error_description\":\"code expired\"}";
	memset(&d, 0, sizeof d);
	size_t before = stub_count();
	assert_int_equal(oauth_exchange(f, code, on_done, &d, why, sizeof why), 0);
	assert_true(ext_run_until(finished, &d, 5));
	assert_non_null(strstr(d.err, "invalid_grant: code expired"));
	assert_null(strstr(d.err, "c/1"));
	const struct stub_req *r = stub_get(before);
	assert_non_null(strstr(r->body, "grant_type=authorization_code"));
	assert_non_null(strstr(r->body, "code_verifier="));
	assert_non_null(strstr(r->body, "client_id=pre-1"));
	assert_non_null(strstr(r->body, "resource=http%3A%2F%2F127.0.0.1"));
	free(code);
	oauth_flow_free(f);
}

/* Dynamic registration, a stored registration used again, and a refresh. */
static void test_register_and_refresh(void **state)
{
	(void)state;
	struct done d;
	char why[600];
	struct oauth_flow *f = discover(NULL, &d);
	memset(&d, 0, sizeof d);
	assert_int_equal(oauth_register(f, "http://127.0.0.1:5/callback", NULL, on_done, &d, why,
					sizeof why), 0);
	assert_true(ext_run_until(finished, &d, 5));
	assert_string_equal(d.err, "");
	struct oauth_tokens *t = oauth_flow_tokens(f);
	assert_string_equal(t->client_id, "dyn-1");
	assert_true(t->registered);
	const struct stub_req *reg = stub_get(stub_count() - 1);
	assert_non_null(strstr(reg->body, "\"token_endpoint_auth_method\":\"none\""));
	assert_non_null(strstr(reg->body, "\"refresh_token\""));

	/* a second flow with the same issuer and redirect: no new registration */
	struct oauth_flow *g = discover(NULL, &d);
	size_t n = stub_count();
	memset(&d, 0, sizeof d);
	assert_int_equal(oauth_register(g, "http://127.0.0.1:5/callback", t, on_done, &d, why,
					sizeof why), 0);
	assert_int_equal(d.calls, 1);
	assert_int_equal(stub_count(), n);
	assert_string_equal(oauth_flow_tokens(g)->client_id, "dyn-1");
	oauth_flow_free(g);

	t->refresh_token = strdup("rt-1");
	sc.token_status = 200;
	sc.token_body = "{\"access_token\":\"at-2\",\"token_type\":\"bearer\",\"expires_in\":60}";
	memset(&d, 0, sizeof d);
	struct oauth_refresh *r = oauth_refresh_start(t, false, on_done, &d, why, sizeof why);
	assert_non_null(r);
	assert_true(ext_run_until(finished, &d, 5));
	assert_string_equal(d.err, "");
	assert_string_equal(t->access_token, "at-2");
	assert_string_equal(t->refresh_token, "rt-1");   /* kept: none came back */
	assert_true(oauth_tokens_fresh(t, (double)time(NULL), 30));
	assert_false(oauth_tokens_fresh(t, (double)time(NULL), 90));
	const struct stub_req *rq = stub_get(stub_count() - 1);
	assert_non_null(strstr(rq->body, "grant_type=refresh_token&refresh_token=rt-1"));

	sc.token_status = 400;
	sc.token_body = "{\"error\":\"invalid_grant\"}";
	memset(&d, 0, sizeof d);
	r = oauth_refresh_start(t, false, on_done, &d, why, sizeof why);
	assert_true(ext_run_until(finished, &d, 5));
	assert_non_null(strstr(d.err, "refused"));
	assert_non_null(strstr(d.err, "invalid_grant"));
	assert_null(strstr(d.err, "rt-1"));
	oauth_flow_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_helpers),
		cmocka_unit_test_setup_teardown(test_discovery_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_challenge_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_redirect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_register_and_refresh, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_ev_release();
	return rc;
}
