/*
 * test_aggregate.c - unit tests for src/aggregate/aggregate.c: several backends
 * behind one endpoint (namespaced, client-safe names, merged initialize,
 * list caches, resources paging, routing back to each backend's own
 * names), driven through the public API.
 *
 * Each backend is a fake peer: its initialize op answers at once with a
 * canned result (and reports the backend ready to the aggregate, as the app
 * does on BACKEND_EV_READY), its send op records what it gets; the test
 * answers with chain_receive(). The client is a real session (session.c)
 * whose write function records what the client would read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "chain.h"
#include "config.h"
#include "log.h"
#include "middleware.h"
#include "mcpc_version.h"
#include "peer.h"
#include "aggregate.h"
#include "rpc.h"
#include "session.h"

/* ---- fake backends ---- */

/* The chain every test of this file uses (made in main, renewed by teardowns). */
static struct chain *CH;
/* The aggregate under test (made by start(), freed by stop()). */
static struct aggregate *AG;

struct fbe {
	struct peer peer;        /* must be first */
	json_t *got;             /* every message sent to it (copies) */
	json_t *done;            /* ids of the requests the test answered */
	json_t *init_result;     /* owned: what initialize answers */
	int init_calls;
	bool hold_init;          /* initialize is not answered until init_release() */
	void (*held_cb)(void *arg, json_t *response);
	void *held_arg;
	bool manual;             /* pump() leaves its list requests alone */
	json_t *tools, *prompts, *templates;  /* owned: what its lists answer */
	json_t *list_extra;      /* owned or NULL: fields added to its list results */
};

#define MAXB 3
static struct fbe B[MAXB];
static size_t NB;
static struct cfg *C;

static int fbe_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct fbe *b = (struct fbe *)p;
	(void)o;
	json_array_append_new(b->got, json_deep_copy(msg));
	return 0;
}

/* Answers at once, then reports the backend ready, as backend.c and the
 * app do (waiters first, then BACKEND_EV_READY -> aggregate_backend_ready). */
static int fbe_initialize(struct peer *p, json_t *params,
			  void (*cb)(void *arg, json_t *response), void *arg)
{
	struct fbe *b = (struct fbe *)p;
	(void)params;
	b->init_calls++;
	if (b->hold_init) {   /* a backend slow to start, or stuck */
		b->held_cb = cb;
		b->held_arg = arg;
		return 0;
	}
	b->peer.ready = true;
	b->peer.init_result = b->init_result;
	json_t *resp = rpc_result(json_null(), json_incref(b->init_result));
	cb(arg, resp);
	json_decref(resp);
	aggregate_backend_ready(AG, &b->peer);
	return 0;
}

static const struct peer_ops fbe_ops = { .send = fbe_send, .initialize = fbe_initialize };

/* A held backend finally answers initialize and is reported ready. */
static void init_release(struct fbe *b)
{
	b->hold_init = false;
	b->peer.ready = true;
	b->peer.init_result = b->init_result;
	json_t *resp = rpc_result(json_null(), json_incref(b->init_result));
	if (b->held_cb)
		b->held_cb(b->held_arg, resp);
	b->held_cb = NULL;
	json_decref(resp);
	aggregate_backend_ready(AG, &b->peer);
}

static json_t *J(const char *s)
{
	json_error_t e;
	json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
	if (!v)
		fail_msg("bad fixture JSON %s: %s", s, e.text);
	return v;
}

/* Sets a backend's capabilities (JSON text) and instructions (or NULL). */
static void fbe_caps(struct fbe *b, const char *caps, const char *instructions)
{
	json_decref(b->init_result);
	b->init_result = json_pack("{s:s,s:o,s:{s:s,s:s}}", "protocolVersion", "2025-06-18",
				   "capabilities", J(caps), "serverInfo", "name", b->peer.name,
				   "version", "1.0");
	if (instructions)
		json_object_set_new(b->init_result, "instructions", json_string(instructions));
}

/* Sets a backend's tools / prompts / templates lists from JSON text. */
static void set_list(json_t **slot, const char *text)
{
	json_decref(*slot);
	*slot = J(text);
}

/* Tools named by the NULL-terminated NAMES. */
static void set_tools(struct fbe *b, const char *const *names)
{
	json_decref(b->tools);
	b->tools = json_array();
	for (; *names; names++)
		json_array_append_new(b->tools, json_pack("{s:s,s:s,s:{s:s}}", "name", *names,
			"description", "a tool", "inputSchema", "type", "object"));
}

/* ---- the client ---- */

static struct session *S;
static json_t *out;  /* what the client read (copies) */
static int raw_writes;  /* how much of it came by the fast path */

/* What the session writes: a tree, or the fast path's one JSON line in
 * pieces, recorded alike. */
static int rec_write(void *arg, const struct session_out *o)
{
	char buf[65536];
	size_t len = 0;
	assert_ptr_equal(arg, &out);
	if (!o->iov) {
		json_array_append_new(out, json_deep_copy(o->tree));
		return 0;
	}
	for (int i = 0; i < o->n; i++) {
		assert_true(len + o->iov[i].iov_len < sizeof buf);
		memcpy(buf + len, o->iov[i].iov_base, o->iov[i].iov_len);
		len += o->iov[i].iov_len;
	}
	json_error_t e;
	json_t *msg = json_loadb(buf, len, 0, &e);
	if (!msg)
		fail_msg("the fast path wrote invalid JSON: %.*s", (int)len, buf);
	json_array_append_new(out, msg);
	raw_writes++;
	return 0;
}

/* The client sends MSG (stolen) as its bytes: the path the binary takes
 * (session_receive_line, as the stdio front hands on a line). */
static void send_tree(struct session *s, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(msg);
	assert_non_null(text);
	session_receive_line(s, text, strlen(text));
	memset(text, 'X', strlen(text));   /* the front reuses its buffer */
	free(text);
}

static void csend(const char *s)
{
	send_tree(S, J(s));
}

/* The client's response with integer id ID, or fails. */
static json_t *reply_to(json_int_t id)
{
	size_t i;
	json_t *m;
	json_array_foreach(out, i, m) {
		json_t *v = json_object_get(m, "id");
		if (json_is_integer(v) && json_integer_value(v) == id && !json_object_get(m, "method"))
			return m;
	}
	char *d = json_dumps(out, JSON_ENCODE_ANY);
	print_message("client output: %s\n", d);
	free(d);
	fail_msg("no response with id %" JSON_INTEGER_FORMAT " reached the client", id);
	return NULL;
}

/* Number of notifications METHOD the client read. */
static size_t notes(const char *method)
{
	size_t i, n = 0;
	json_t *m;
	json_array_foreach(out, i, m) {
		const char *mm = json_string_value(json_object_get(m, "method"));
		if (mm && strcmp(mm, method) == 0 && !json_object_get(m, "id"))
			n++;
	}
	return n;
}

static json_int_t err_code(json_t *m)
{
	json_t *e = json_object_get(m, "error");
	if (!json_is_object(e)) {
		char *d = json_dumps(m, JSON_ENCODE_ANY);
		print_message("not an error response: %s\n", d);
		free(d);
		fail();
	}
	return json_integer_value(json_object_get(e, "code"));
}

static const char *err_text(json_t *m)
{
	return json_string_value(json_object_get(json_object_get(m, "error"), "message"));
}

static json_t *result_of(json_t *m)
{
	json_t *r = json_object_get(m, "result");
	if (!r) {
		char *d = json_dumps(m, JSON_ENCODE_ANY);
		print_message("not a result: %s\n", d);
		free(d);
		fail();
	}
	return r;
}

static void expect_json(json_t *a, const char *b)
{
	json_t *jb = J(b);
	if (!json_equal(a, jb)) {
		char *sa = json_dumps(a, JSON_SORT_KEYS | JSON_ENCODE_ANY);
		char *sb = json_dumps(jb, JSON_SORT_KEYS | JSON_ENCODE_ANY);
		print_message("got:  %s\nwant: %s\n", sa, sb);
		free(sa);
		free(sb);
		json_decref(jb);
		fail();
	}
	json_decref(jb);
}

/* ---- backend side helpers ---- */

static bool answered(struct fbe *b, json_t *id)
{
	size_t i;
	json_t *v;
	json_array_foreach(b->done, i, v)
		if (json_equal(v, id))
			return true;
	return false;
}

/* The first unanswered request METHOD that B got (borrowed), or NULL. */
static json_t *peek(struct fbe *b, const char *method)
{
	size_t i;
	json_t *m;
	json_array_foreach(b->got, i, m) {
		const char *mm = json_string_value(json_object_get(m, "method"));
		json_t *id = json_object_get(m, "id");
		if (id && mm && strcmp(mm, method) == 0 && !answered(b, id))
			return m;
	}
	return NULL;
}

/* Same, failing when there is none. */
static json_t *must(struct fbe *b, const char *method)
{
	json_t *m = peek(b, method);
	if (!m)
		fail_msg("backend %s got no (unanswered) %s", b->peer.name, method);
	return m;
}

/* Number of messages METHOD (requests and notifications) B got. */
static size_t got_n(struct fbe *b, const char *method)
{
	size_t i, n = 0;
	json_t *m;
	json_array_foreach(b->got, i, m) {
		const char *mm = json_string_value(json_object_get(m, "method"));
		if (mm && strcmp(mm, method) == 0)
			n++;
	}
	return n;
}

/* B answers its request REQ with RESULT (stolen). */
static void answer(struct fbe *b, json_t *req, json_t *result)
{
	json_t *id = json_object_get(req, "id");
	json_array_append(b->done, id);
	json_t *resp = rpc_result(id, result);
	chain_receive(&b->peer, resp);
}

/* B answers its request REQ with an error. */
static void answer_error(struct fbe *b, json_t *req, int code, const char *text)
{
	json_t *id = json_object_get(req, "id");
	json_array_append(b->done, id);
	chain_receive(&b->peer, rpc_error(id, code, text, NULL));
}

/* Runs the loop (zero timers) and answers the list requests of every
 * backend not in manual mode from its canned lists, until quiet. */
static void pump(void)
{
	for (int round = 0; round < 20; round++) {
		bool any = false;
		ev_run(EV_DEFAULT, EVRUN_NOWAIT);
		for (size_t i = 0; i < NB; i++) {
			struct fbe *b = &B[i];
			json_t *req;
			if (b->manual)
				continue;
			while ((req = peek(b, "tools/list"))) {
				json_t *r = json_pack("{s:O}", "tools", b->tools);
				json_object_update(r, b->list_extra);
				answer(b, req, r);
				any = true;
			}
			while ((req = peek(b, "prompts/list"))) {
				json_t *r = json_pack("{s:O}", "prompts", b->prompts);
				json_object_update(r, b->list_extra);
				answer(b, req, r);
				any = true;
			}
			while ((req = peek(b, "resources/templates/list"))) {
				answer(b, req, json_pack("{s:O}", "resourceTemplates", b->templates));
				any = true;
			}
		}
		if (!any && round > 2)
			break;
	}
}

/* ---- set up and tear down ---- */

/* Loads configuration TEXT, sets the aggregate up with a fake backend per
 * entry (capabilities tools, prompts, resources; no lists), and a client. */
static void start(const char *text)
{
	struct cfg_errors errs = { 0 };
	ev_default_loop(0);
	C = cfg_load_string(text, "test.json", &errs);
	if (!C) {
		for (size_t i = 0; i < errs.count; i++)
			print_message("%s\n", errs.lines[i]);
		cfg_errors_release(&errs);
		fail_msg("bad test configuration");
	}
	assert_true(C->nservers <= MAXB);
	assert_int_equal(pipeline_start(C->pipeline), 0);
	chain_set_pipeline(CH, C->pipeline);   /* the global modules, as main.c sets */
	AG = aggregate_new(CH, C);
	assert_non_null(AG);
	chain_set_router(CH, aggregate_router(AG));
	NB = C->nservers;
	for (size_t i = 0; i < NB; i++) {
		struct fbe *b = &B[i];
		memset(b, 0, sizeof *b);
		peer_init(&b->peer, &fbe_ops, PEER_BACKEND, C->servers[i].name);
		b->got = json_array();
		b->done = json_array();
		b->tools = json_array();
		b->prompts = json_array();
		b->templates = json_array();
		fbe_caps(b, "{\"tools\":{},\"prompts\":{},\"resources\":{}}", NULL);
		b->peer.pl = C->servers[i].pipeline;   /* its own modules, as main.c sets */
		assert_int_equal(pipeline_start(b->peer.pl), 0);
		chain_add_peer(CH, &b->peer);
		aggregate_add_backend(AG, &b->peer, &C->servers[i]);
	}
	out = json_array();
	S = session_new(CH, "client", rec_write, &out);
	assert_non_null(S);
	raw_writes = 0;
}

/* Undoes start(). */
static void stop(void)
{
	if (!C)
		return;
	for (size_t i = 0; i < NB; i++)  /* fails what the aggregate still waits for */
		chain_peer_gone(&B[i].peer, "test over");
	session_free(S);
	S = NULL;
	chain_set_router(CH, NULL);
	aggregate_free(AG);
	AG = NULL;
	for (size_t i = 0; i < NB; i++) {
		struct fbe *b = &B[i];
		chain_remove_peer(&b->peer);
		peer_release(&b->peer);
		json_decref(b->got);
		json_decref(b->done);
		json_decref(b->init_result);
		json_decref(b->tools);
		json_decref(b->prompts);
		json_decref(b->templates);
		json_decref(b->list_extra);
		memset(b, 0, sizeof *b);
	}
	NB = 0;
	json_decref(out);
	out = NULL;
	cfg_free(C);
	C = NULL;
	chain_free(CH);
	CH = chain_new();
	assert_int_equal(chain_open_exchanges(CH), 0);
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	stop();
	return 0;
}

/* The client initializes (and sends notifications/initialized). */
static void client_init(void)
{
	csend("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
	      "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	      "\"clientInfo\":{\"name\":\"test-client\",\"version\":\"1\"}}}");
	pump();
	assert_int_equal(session_state(S), SESSION_READY);
	result_of(reply_to(0));
	csend("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	pump();
}

/* The exposed names of the client's tools (or prompts) list, fresh. */
static json_t *list_names(const char *what, json_int_t id)
{
	char buf[200];
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"method\":\"%s/list\"}", id, what);
	csend(buf);
	pump();
	json_t *items = json_object_get(result_of(reply_to(id)), what);
	assert_true(json_is_array(items));
	json_t *names = json_array();
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it)
		json_array_append(names, json_object_get(it, "name"));
	return names;
}

/* True when NAMES holds NAME. */
static bool has_name(json_t *names, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(names, i, v)
		if (strcmp(json_string_value(v), name) == 0)
			return true;
	return false;
}

/* The name in NAMES that starts with HEAD and is not EXCEPT (or NULL). */
static const char *name_with(json_t *names, const char *head, const char *except)
{
	size_t i;
	json_t *v;
	json_array_foreach(names, i, v) {
		const char *s = json_string_value(v);
		if (strncmp(s, head, strlen(head)) == 0 && (!except || strcmp(s, except) != 0))
			return s;
	}
	return NULL;
}

/* ^[a-zA-Z0-9_-]{1,64}$ */
static bool client_safe(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return false;
	return true;
}

/* True when S is "_" and 8 lowercase hex digits. */
static bool hash_suffix(const char *s)
{
	if (strlen(s) != 9 || s[0] != '_')
		return false;
	for (size_t i = 1; i < 9; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The client calls tool NAME with id ID; returns the backend's request
 * (borrowed) at the backend that got it, which is *WHO. */
static json_t *call_tool(json_int_t id, const char *name, struct fbe **who)
{
	json_t *msg = json_pack("{s:s,s:I,s:s,s:{s:s,s:{s:i}}}", "jsonrpc", "2.0", "id", id,
				"method", "tools/call", "params", "name", name,
				"arguments", "x", 7);
	send_tree(S, msg);
	pump();
	json_t *found = NULL;
	*who = NULL;
	for (size_t i = 0; i < NB; i++) {
		json_t *m = peek(&B[i], "tools/call");
		if (m) {
			assert_null(found);  /* exactly one backend got it */
			found = m;
			*who = &B[i];
		}
	}
	return found;
}

/* Calls NAME, checks it reached backend WANT as tool ORIG, answers, and
 * checks the client gets that answer. */
static void expect_routed(json_int_t id, const char *name, struct fbe *want, const char *orig)
{
	struct fbe *who;
	json_t *req = call_tool(id, name, &who);
	if (!req)
		fail_msg("tools/call %s reached no backend", name);
	assert_ptr_equal(who, want);
	json_t *params = json_object_get(req, "params");
	assert_string_equal(json_string_value(json_object_get(params, "name")), orig);
	expect_json(json_object_get(params, "arguments"), "{\"x\":7}");
	answer(who, req, json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", orig));
	json_t *r = result_of(reply_to(id));
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(r, "content"), 0), "text")), orig);
}

/* The backend goes down the way backend.c reports it: not ready, its
 * exchanges failed, then the app's BACKEND_EV_DOWN handler. */
static void be_down(struct fbe *b)
{
	b->peer.ready = false;
	snprintf(b->peer.why_down, sizeof b->peer.why_down, "exited with status 1");
	chain_peer_gone(&b->peer, "exited with status 1");
	aggregate_backend_down(AG, &b->peer);
}

/* The backend is back (restarted and initialized again). */
static void be_up(struct fbe *b)
{
	b->peer.ready = true;
	b->peer.why_down[0] = '\0';
	b->peer.told_initialized = false;   /* a new run, as backend.c says */
	aggregate_backend_ready(AG, &b->peer);
}

/* The backend sends notification METHOD. */
static void be_note(struct fbe *b, const char *method)
{
	chain_receive(&b->peer, rpc_notification(method, NULL));
}

static const char *const CFG3 =
	"{\"separator\":\"-x-\",\"mcpServers\":{"
	"\"alpha\":{\"command\":\"/bin/true\",\"prefix\":\"a\"},"
	"\"beta\":{\"command\":\"/bin/true\"},"
	"\"my.srv\":{\"command\":\"/bin/true\"}}}";

/* ---- names ---- */

/* prefix + custom separator + name; the prefix defaults to the server's name. */
static void test_names_prefix_separator(void **state)
{
	(void)state;
	start(CFG3);
	assert_int_equal(aggregate_backends(AG), 3);
	assert_false(aggregate_transparent(AG));
	set_tools(&B[0], (const char *const[]){ "echo", "add", NULL });
	set_tools(&B[1], (const char *const[]){ "echo", NULL });
	set_tools(&B[2], (const char *const[]){ "ping-me", NULL });
	set_list(&B[0].prompts, "[{\"name\":\"greet\",\"description\":\"hi\"}]");
	client_init();
	int raw_before = raw_writes;
	json_t *names = list_names("tools", 1);
	expect_json(names, "[\"a-x-echo\",\"a-x-add\",\"beta-x-echo\",\"my_srv-x-ping-me\"]");
	json_decref(names);
	assert_int_equal(raw_writes, raw_before + 1);  /* served from the cached text */
	/* other fields are kept as the backend gave them */
	json_t *t = json_array_get(json_object_get(result_of(reply_to(1)), "tools"), 0);
	expect_json(t, "{\"name\":\"a-x-echo\",\"description\":\"a tool\",\"inputSchema\":{\"type\":\"object\"}}");
	names = list_names("prompts", 2);
	expect_json(names, "[\"a-x-greet\"]");
	json_decref(names);
	json_t *p = json_array_get(json_object_get(result_of(reply_to(2)), "prompts"), 0);
	expect_json(p, "{\"name\":\"a-x-greet\",\"description\":\"hi\"}");

	expect_routed(3, "a-x-echo", &B[0], "echo");
	expect_routed(4, "beta-x-echo", &B[1], "echo");
	expect_routed(5, "my_srv-x-ping-me", &B[2], "ping-me");
	/* the backend's own name is not a name the client can call */
	struct fbe *who;
	assert_null(call_tool(6, "echo", &who));
	assert_int_equal(err_code(reply_to(6)), RPC_INVALID_PARAMS);
}

/* Characters outside [A-Za-z0-9_-] become '_'; collisions this makes are
 * resolved, and every name routes back to the backend's original. */
static void test_names_invalid_chars(void **state)
{
	(void)state;
	start(CFG3);
	set_tools(&B[0], (const char *const[]){ "file.read", "do it/now!", "a_b", "a.b", "caf\xc3\xa9", NULL });
	client_init();
	json_t *names = list_names("tools", 1);
	assert_int_equal(json_array_size(names), 5);
	assert_true(has_name(names, "a-x-file_read"));
	assert_true(has_name(names, "a-x-do_it_now_"));
	assert_true(has_name(names, "a-x-a_b"));
	assert_true(has_name(names, "a-x-caf__"));  /* two bytes of UTF-8, two '_' */
	const char *ab = name_with(names, "a-x-a_b_", NULL);  /* "a.b" collides with "a_b" */
	assert_non_null(ab);
	assert_true(hash_suffix(ab + strlen("a-x-a_b")));
	size_t i;
	json_t *v;
	json_array_foreach(names, i, v)
		assert_true(client_safe(json_string_value(v)));
	expect_routed(2, "a-x-file_read", &B[0], "file.read");
	expect_routed(3, "a-x-do_it_now_", &B[0], "do it/now!");
	expect_routed(4, "a-x-a_b", &B[0], "a_b");
	expect_routed(5, ab, &B[0], "a.b");
	expect_routed(6, "a-x-caf__", &B[0], "caf\xc3\xa9");
	json_decref(names);
}

#define LONG_A "this_is_a_very_long_tool_name_that_goes_on_and_on_and_on_beyond_the_limit_A"
#define LONG_B "this_is_a_very_long_tool_name_that_goes_on_and_on_and_on_beyond_the_limit_B"

/* Over 64: the head, cut to 55, plus "_" and 8 hex digits of a hash. */
static void test_names_too_long(void **state)
{
	(void)state;
	start(CFG3);
	set_tools(&B[0], (const char *const[]){ LONG_A, LONG_B, NULL });
	/* exactly 64 in all ("beta-x-" and 57) stays as it is */
	char n57[58];
	memset(n57, 'n', 57);
	n57[57] = '\0';
	set_tools(&B[1], (const char *const[]){ n57, NULL });
	client_init();
	json_t *names = list_names("tools", 1);
	assert_int_equal(json_array_size(names), 3);
	const char *na = json_string_value(json_array_get(names, 0));
	const char *nb = json_string_value(json_array_get(names, 1));
	const char *n64 = json_string_value(json_array_get(names, 2));
	char want64[70];
	snprintf(want64, sizeof want64, "beta-x-%s", n57);
	assert_string_equal(n64, want64);
	assert_int_equal(strlen(n64), 64);
	char full[200];
	snprintf(full, sizeof full, "a-x-%s", LONG_A);
	assert_int_equal(strlen(na), 64);
	assert_int_equal(strlen(nb), 64);
	assert_true(client_safe(na));
	assert_true(client_safe(nb));
	assert_memory_equal(na, full, 55);
	assert_memory_equal(nb, full, 55);  /* same head... */
	assert_true(hash_suffix(na + 55));
	assert_true(hash_suffix(nb + 55));
	assert_string_not_equal(na, nb);    /* ...different hashes */
	char a[65], b[65];
	snprintf(a, sizeof a, "%s", na);
	snprintf(b, sizeof b, "%s", nb);
	json_decref(names);
	expect_routed(2, a, &B[0], LONG_A);
	expect_routed(3, b, &B[0], LONG_B);
	/* the plain (uncut) name is not callable */
	struct fbe *who;
	assert_null(call_tool(4, full, &who));
	assert_int_equal(err_code(reply_to(4)), RPC_INVALID_PARAMS);
}

static const char *const CFG_SAME =
	"{\"mcpServers\":{"
	"\"alpha\":{\"command\":\"/bin/true\",\"prefix\":\"p\"},"
	"\"beta\":{\"command\":\"/bin/true\",\"prefix\":\"p\"}}}";

/* Two backends with one prefix: unique names, each routed to its own. */
static void test_names_same_prefix(void **state)
{
	(void)state;
	start(CFG_SAME);
	set_tools(&B[0], (const char *const[]){ "echo", "only_a", NULL });
	set_tools(&B[1], (const char *const[]){ "echo", "only_b", NULL });
	set_list(&B[0].prompts, "[{\"name\":\"greet\"}]");
	set_list(&B[1].prompts, "[{\"name\":\"greet\"}]");
	client_init();
	json_t *names = list_names("tools", 1);
	assert_int_equal(json_array_size(names), 4);
	assert_string_equal(json_string_value(json_array_get(names, 0)), "p__echo");  /* default "__" */
	assert_string_equal(json_string_value(json_array_get(names, 1)), "p__only_a");
	const char *other = json_string_value(json_array_get(names, 2));
	assert_int_equal(strncmp(other, "p__echo", 7), 0);
	assert_true(hash_suffix(other + 7));
	assert_string_equal(json_string_value(json_array_get(names, 3)), "p__only_b");
	char b_echo[65];
	snprintf(b_echo, sizeof b_echo, "%s", other);
	json_decref(names);
	expect_routed(2, "p__echo", &B[0], "echo");
	expect_routed(3, b_echo, &B[1], "echo");
	expect_routed(4, "p__only_a", &B[0], "only_a");
	expect_routed(5, "p__only_b", &B[1], "only_b");

	/* prompts the same way */
	names = list_names("prompts", 6);
	assert_int_equal(json_array_size(names), 2);
	assert_string_equal(json_string_value(json_array_get(names, 0)), "p__greet");
	const char *bg = json_string_value(json_array_get(names, 1));
	assert_true(hash_suffix(bg + strlen("p__greet")));
	csend("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"prompts/get\",\"params\":{\"name\":\"p__greet\"}}");
	pump();
	assert_non_null(peek(&B[0], "prompts/get"));
	assert_null(peek(&B[1], "prompts/get"));
	json_t *msg = json_pack("{s:s,s:i,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", 8,
				"method", "prompts/get", "params", "name", bg);
	send_tree(S, msg);
	pump();
	json_t *req = must(&B[1], "prompts/get");
	assert_string_equal(json_string_value(json_object_get(json_object_get(req, "params"), "name")), "greet");
	json_decref(names);
}

/* Runs a fixed scenario and returns every exposed tool name. */
static json_t *scenario_names(void)
{
	start("{\"mcpServers\":{"
	      "\"alpha\":{\"command\":\"/bin/true\",\"prefix\":\"p\"},"
	      "\"beta\":{\"command\":\"/bin/true\",\"prefix\":\"p\"},"
	      "\"gamma\":{\"command\":\"/bin/true\",\"prefix\":\"p\"}}}");
	set_tools(&B[0], (const char *const[]){ "echo", "x.y", LONG_A, NULL });
	set_tools(&B[1], (const char *const[]){ "echo", "x_y", LONG_A, NULL });
	set_tools(&B[2], (const char *const[]){ "echo", "x y", LONG_B, NULL });
	client_init();
	json_t *names = list_names("tools", 1);
	stop();
	return names;
}

/* The same configuration and lists give the same names, every time. */
static void test_names_deterministic(void **state)
{
	(void)state;
	json_t *first = scenario_names();
	json_t *second = scenario_names();
	assert_int_equal(json_array_size(first), 9);
	assert_true(json_equal(first, second));
	/* and all different, all client-safe */
	for (size_t i = 0; i < json_array_size(first); i++) {
		const char *s = json_string_value(json_array_get(first, i));
		assert_true(client_safe(s));
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(s, json_string_value(json_array_get(first, j)));
	}
	json_decref(first);
	json_decref(second);
}

/* A list refresh with a nextCursor is followed to its end. */
static void test_tools_list_paged_backend(void **state)
{
	(void)state;
	start(CFG_SAME);
	B[0].manual = true;
	csend("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
	      "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	      "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
	pump();
	/* the aggregate waits for alpha's lists before answering */
	assert_int_equal(session_state(S), SESSION_INITIALIZING);
	json_t *req = must(&B[0], "tools/list");
	expect_json(json_object_get(req, "params"), "{}");
	answer(&B[0], req, J("{\"tools\":[{\"name\":\"one\"}],\"nextCursor\":\"pg2\"}"));
	pump();
	req = must(&B[0], "tools/list");
	expect_json(json_object_get(req, "params"), "{\"cursor\":\"pg2\"}");
	answer(&B[0], req, J("{\"tools\":[{\"name\":\"two\"}]}"));
	answer(&B[0], must(&B[0], "prompts/list"), J("{\"prompts\":[]}"));
	answer(&B[0], must(&B[0], "resources/templates/list"), J("{\"resourceTemplates\":[]}"));
	pump();
	assert_int_equal(session_state(S), SESSION_READY);
	json_t *names = list_names("tools", 1);
	expect_json(names, "[\"p__one\",\"p__two\"]");
	json_decref(names);
	/* our list has no pages of its own */
	csend("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}");
	pump();
	assert_int_equal(err_code(reply_to(2)), RPC_INVALID_PARAMS);
}

/* ---- routing ---- */

/* Unknown tool or prompt names are refused with -32602 by the router. */
static void test_unknown_name(void **state)
{
	(void)state;
	start(CFG3);
	set_tools(&B[0], (const char *const[]){ "echo", NULL });
	client_init();
	struct fbe *who;
	assert_null(call_tool(1, "a-x-nope", &who));
	json_t *r = reply_to(1);
	assert_int_equal(err_code(r), RPC_INVALID_PARAMS);
	assert_non_null(strstr(err_text(r), "a-x-nope"));
	assert_null(call_tool(2, "zzz-x-echo", &who));
	assert_int_equal(err_code(reply_to(2)), RPC_INVALID_PARAMS);
	csend("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{}}");
	pump();
	assert_int_equal(err_code(reply_to(3)), RPC_INVALID_PARAMS);
	csend("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/get\",\"params\":{\"name\":\"a-x-echo\"}}");
	pump();
	assert_int_equal(err_code(reply_to(4)), RPC_INVALID_PARAMS);  /* a tool, not a prompt */
	for (size_t i = 0; i < NB; i++) {
		assert_int_equal(got_n(&B[i], "tools/call"), 0);
		assert_int_equal(got_n(&B[i], "prompts/get"), 0);
	}
}

/* prompts/get goes to the prompt's backend with its own name and the
 * client's arguments; the response comes back with the client's id. */
static void test_prompts_get_routing(void **state)
{
	(void)state;
	start(CFG3);
	set_list(&B[1].prompts, "[{\"name\":\"review.code\",\"arguments\":[{\"name\":\"lang\"}]}]");
	set_list(&B[2].prompts, "[{\"name\":\"summarize\"}]");
	client_init();
	json_t *names = list_names("prompts", 1);
	expect_json(names, "[\"beta-x-review_code\",\"my_srv-x-summarize\"]");
	json_decref(names);
	csend("{\"jsonrpc\":\"2.0\",\"id\":\"p1\",\"method\":\"prompts/get\","
	      "\"params\":{\"name\":\"beta-x-review_code\",\"arguments\":{\"lang\":\"c\"}}}");
	pump();
	assert_null(peek(&B[0], "prompts/get"));
	assert_null(peek(&B[2], "prompts/get"));
	json_t *req = must(&B[1], "prompts/get");
	expect_json(json_object_get(req, "params"), "{\"name\":\"review.code\",\"arguments\":{\"lang\":\"c\"}}");
	answer(&B[1], req, J("{\"messages\":[]}"));
	json_t *last = json_array_get(out, json_array_size(out) - 1);
	expect_json(last, "{\"jsonrpc\":\"2.0\",\"id\":\"p1\",\"result\":{\"messages\":[]}}");

	/* completion for a prompt argument goes the same way */
	csend("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"completion/complete\",\"params\":"
	      "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"my_srv-x-summarize\"},"
	      "\"argument\":{\"name\":\"a\",\"value\":\"b\"}}}");
	pump();
	req = must(&B[2], "completion/complete");
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		json_object_get(req, "params"), "ref"), "name")), "summarize");
	answer(&B[2], req, J("{\"completion\":{\"values\":[\"x\"]}}"));
	result_of(reply_to(2));
	csend("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"completion/complete\",\"params\":"
	      "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"nope\"},\"argument\":{\"name\":\"a\",\"value\":\"b\"}}}");
	pump();
	assert_int_equal(err_code(reply_to(3)), RPC_INVALID_PARAMS);
}

static const char *const CFG_RES =
	"{\"status\":false,\"mcpServers\":{"
	"\"alpha\":{\"command\":\"/bin/true\"},"
	"\"beta\":{\"command\":\"/bin/true\"},"
	"\"gamma\":{\"command\":\"/bin/true\"}}}";

/* Sends resources/list with id ID and CURSOR (or NULL). */
static void list_resources(json_int_t id, const char *cursor)
{
	json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
	send_tree(S, json_pack("{s:s,s:I,s:s,s:o}", "jsonrpc", "2.0", "id", id,
				     "method", "resources/list", "params", params));
	pump();
}

/* resources/list pages through every backend with resources behind an
 * opaque cursor; the backends' own cursors never reach the client. */
static void test_resources_paging(void **state)
{
	(void)state;
	start(CFG_RES);
	fbe_caps(&B[1], "{\"tools\":{}}", NULL);  /* beta has no resources: skipped */
	client_init();

	list_resources(1, NULL);
	json_t *req = must(&B[0], "resources/list");
	expect_json(json_object_get(req, "params"), "{}");
	answer(&B[0], req, J("{\"resources\":[{\"uri\":\"mem://a/1\",\"name\":\"a1\"}],"
			     "\"nextCursor\":\"alpha-page-2\"}"));
	json_t *r = result_of(reply_to(1));
	expect_json(json_object_get(r, "resources"), "[{\"uri\":\"mem://a/1\",\"name\":\"a1\"}]");
	const char *c1 = json_string_value(json_object_get(r, "nextCursor"));
	assert_non_null(c1);
	assert_null(strstr(c1, "alpha-page-2"));  /* opaque */
	char cur[1300];
	snprintf(cur, sizeof cur, "%s", c1);

	list_resources(2, cur);
	req = must(&B[0], "resources/list");
	expect_json(json_object_get(req, "params"), "{\"cursor\":\"alpha-page-2\"}");
	answer(&B[0], req, J("{\"resources\":[{\"uri\":\"mem://a/2\",\"name\":\"a2\"}]}"));
	r = result_of(reply_to(2));
	expect_json(json_object_get(r, "resources"), "[{\"uri\":\"mem://a/2\",\"name\":\"a2\"}]");
	const char *c2 = json_string_value(json_object_get(r, "nextCursor"));
	assert_non_null(c2);  /* gamma comes next */
	snprintf(cur, sizeof cur, "%s", c2);

	list_resources(3, cur);
	assert_int_equal(got_n(&B[1], "resources/list"), 0);
	req = must(&B[2], "resources/list");
	expect_json(json_object_get(req, "params"), "{}");
	answer(&B[2], req, J("{\"resources\":[{\"uri\":\"mem://g/1\",\"name\":\"g1\"}]}"));
	r = result_of(reply_to(3));
	expect_json(r, "{\"resources\":[{\"uri\":\"mem://g/1\",\"name\":\"g1\"}]}");  /* the end */

	/* the cursor is a replayable bookmark */
	list_resources(4, cur);
	req = must(&B[2], "resources/list");
	answer(&B[2], req, J("{\"resources\":[]}"));
	expect_json(result_of(reply_to(4)), "{\"resources\":[]}");

	/* invalid cursors: -32602, no backend asked */
	size_t before = got_n(&B[0], "resources/list") + got_n(&B[2], "resources/list");
	const char *bad[] = { "zz", "abc", "alpha-page-2", "3939393a", "393a", "", NULL };
	for (json_int_t i = 0; bad[i]; i++) {
		list_resources(10 + i, bad[i]);
		json_t *e = reply_to(10 + i);
		if (strcmp(bad[i], "") == 0 && json_object_get(e, "result"))
			continue;  /* an empty cursor may count as none */
		if (!json_object_get(e, "error"))
			fail_msg("cursor \"%s\" was accepted", bad[i]);
		assert_int_equal(err_code(e), RPC_INVALID_PARAMS);
	}
	size_t after = got_n(&B[0], "resources/list") + got_n(&B[2], "resources/list");
	assert_true(after - before <= 1);  /* at most the empty cursor's fresh start */
	json_t *pending = peek(&B[0], "resources/list");
	if (pending)
		answer(&B[0], pending, J("{\"resources\":[]}"));
}

/* A failing backend is skipped; the status resource leads the first page
 * when it is on (the default with several backends). */
static void test_resources_status_and_failure(void **state)
{
	(void)state;
	start(CFG_SAME);
	client_init();
	list_resources(1, NULL);
	answer_error(&B[0], must(&B[0], "resources/list"), RPC_INTERNAL_ERROR, "boom");
	pump();
	answer(&B[1], must(&B[1], "resources/list"), J("{\"resources\":[{\"uri\":\"mem://b\",\"name\":\"b\"}]}"));
	json_t *r = result_of(reply_to(1));
	json_t *items = json_object_get(r, "resources");
	assert_int_equal(json_array_size(items), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "uri")),
			    "mcp-chain://status");
	assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "uri")),
			    "mem://b");
	assert_null(json_object_get(r, "nextCursor"));
	/* the status resource is the router's own to read */
	csend("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{\"uri\":\"mcp-chain://status\"}}");
	pump();
	r = result_of(reply_to(2));
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(r, "contents"), 0), "uri")), "mcp-chain://status");
	assert_int_equal(got_n(&B[0], "resources/read") + got_n(&B[1], "resources/read"), 0);
	/* it sends no resources/updated: subscribing is refused, not answered {} */
	csend("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"mcp-chain://status\"}}");
	pump();
	assert_int_equal(err_code(reply_to(3)), RPC_INVALID_PARAMS);
	assert_int_equal(got_n(&B[0], "resources/subscribe") + got_n(&B[1], "resources/subscribe"), 0);
}

/* Sends resources/read of URI with id ID; returns the backend that got it. */
static struct fbe *read_goes_to(json_int_t id, const char *uri)
{
	send_tree(S, json_pack("{s:s,s:I,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", id,
				     "method", "resources/read", "params", "uri", uri));
	pump();
	struct fbe *who = NULL;
	for (size_t i = 0; i < NB; i++) {
		json_t *req = peek(&B[i], "resources/read");
		if (!req)
			continue;
		assert_null(who);
		who = &B[i];
		assert_string_equal(json_string_value(json_object_get(json_object_get(req, "params"), "uri")), uri);
		answer(who, req, json_pack("{s:[{s:s,s:s}]}", "contents", "uri", uri, "text", who->peer.name));
	}
	if (who)
		assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(
			result_of(reply_to(id)), "contents"), 0), "text")), who->peer.name);
	return who;
}

/* resources/read goes to the backend that listed the URI, else to the
 * owner of a matching template, else to the first with resources. */
static void test_resources_read_routing(void **state)
{
	(void)state;
	start(CFG_RES);
	fbe_caps(&B[0], "{\"tools\":{}}", NULL);  /* alpha: no resources */
	set_list(&B[2].templates, "[{\"uriTemplate\":\"db://{table}/rows\",\"name\":\"rows\"}]");
	client_init();
	/* nobody listed anything yet: gamma's template still finds it */
	assert_ptr_equal(read_goes_to(1, "db://users/rows"), &B[2]);
	assert_ptr_equal(read_goes_to(2, "mem://shared"), &B[1]);  /* first with resources */

	list_resources(3, NULL);
	answer(&B[1], must(&B[1], "resources/list"), J("{\"resources\":[{\"uri\":\"mem://b/1\",\"name\":\"b1\"}]}"));
	const char *c = json_string_value(json_object_get(result_of(reply_to(3)), "nextCursor"));
	assert_non_null(c);
	char cur[1300];
	snprintf(cur, sizeof cur, "%s", c);
	list_resources(4, cur);
	answer(&B[2], must(&B[2], "resources/list"), J("{\"resources\":["
		"{\"uri\":\"mem://g/1\",\"name\":\"g1\"},{\"uri\":\"mem://b/1\",\"name\":\"dup\"}]}"));
	result_of(reply_to(4));

	assert_ptr_equal(read_goes_to(5, "mem://g/1"), &B[2]);
	assert_ptr_equal(read_goes_to(6, "mem://b/1"), &B[1]);  /* first lister keeps it */
	assert_ptr_equal(read_goes_to(7, "db://orders/rows"), &B[2]);
	assert_ptr_equal(read_goes_to(8, "other://x"), &B[1]);
	/* subscriptions follow the same owner */
	csend("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"mem://g/1\"}}");
	pump();
	json_t *req = must(&B[2], "resources/subscribe");
	answer(&B[2], req, json_object());
	result_of(reply_to(9));
	/* completion of a resource template argument: its owner */
	csend("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"completion/complete\",\"params\":"
	      "{\"ref\":{\"type\":\"ref/resource\",\"uri\":\"db://{table}/rows\"},"
	      "\"argument\":{\"name\":\"table\",\"value\":\"u\"}}}");
	pump();
	/* the template itself matches its own pattern */
	req = must(&B[2], "completion/complete");
	answer(&B[2], req, J("{\"completion\":{\"values\":[\"users\"]}}"));
	result_of(reply_to(10));
}

/* ---- initialize ---- */

/* The aggregate answers initialize once with the union of the backends'
 * capabilities, its own serverInfo and every backend's instructions. */
static void test_merged_initialize(void **state)
{
	(void)state;
	start(CFG3);
	fbe_caps(&B[0], "{\"tools\":{\"listChanged\":false},\"prompts\":{},"
		 "\"resources\":{\"subscribe\":true},\"experimental\":{\"x\":{\"a\":1}}}", "Use alpha.");
	fbe_caps(&B[1], "{\"tools\":{},\"resources\":{\"listChanged\":true},\"logging\":{},"
		 "\"experimental\":{\"y\":{}}}", "Use beta.\nCarefully.");
	fbe_caps(&B[2], "{\"completions\":{}}", NULL);
	csend("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
	      "{\"protocolVersion\":\"2025-03-26\",\"capabilities\":{\"roots\":{}},"
	      "\"clientInfo\":{\"name\":\"test-client\",\"version\":\"1\"}}}");
	pump();
	for (size_t i = 0; i < NB; i++)
		assert_int_equal(B[i].init_calls, 1);
	json_t *r = result_of(reply_to(0));
	assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), "2025-03-26");
	expect_json(json_object_get(r, "serverInfo"), "{\"name\":\"mcp-chain\",\"version\":\"" MCPC_VERSION "\"}");
	expect_json(json_object_get(r, "capabilities"),
		    "{\"tools\":{\"listChanged\":true},\"prompts\":{\"listChanged\":true},"
		    "\"resources\":{\"subscribe\":true,\"listChanged\":true},\"logging\":{},"
		    "\"completions\":{},\"experimental\":{\"x\":{\"a\":1},\"y\":{}}}");
	assert_string_equal(json_string_value(json_object_get(r, "instructions")),
			    "## alpha\nUse alpha.\n\n## beta\nUse beta.\nCarefully.");
	assert_int_equal(session_state(S), SESSION_READY);
	/* notifications/initialized goes to each backend, once */
	csend("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	pump();
	for (size_t i = 0; i < NB; i++)
		assert_int_equal(got_n(&B[i], "notifications/initialized"), 1);
	/* a ping is the aggregate's to answer */
	csend("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	pump();
	expect_json(reply_to(1), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
	for (size_t i = 0; i < NB; i++)
		assert_int_equal(got_n(&B[i], "ping"), 0);
}

/*
 * A later session is told the revision it asked for when it is older than
 * the one the aggregate answered the first (a 2025-03-26 client keeps its
 * batches), and that one when it asks a newer one; the first is unchanged.
 */
static void test_later_session_gets_asked_version(void **state)
{
	(void)state;
	start(CFG3);
	client_init();
	assert_string_equal(json_string_value(json_object_get(result_of(reply_to(0)),
							      "protocolVersion")), "2025-06-18");
	static const struct { const char *asked, *want; } cases[] = {
		{ "2025-03-26", "2025-03-26" }, { "2024-11-05", "2024-11-05" },
		{ "2025-11-25", "2025-06-18" }, { "2025-06-18", "2025-06-18" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct session *s2 = session_new(CH, "client2", rec_write, &out);
		char buf[300];
		json_int_t id = 50 + (json_int_t)i;
		snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
			 ",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\","
			 "\"capabilities\":{},\"clientInfo\":{\"name\":\"later\",\"version\":\"1\"}}}",
			 id, cases[i].asked);
		send_tree(s2, J(buf));
		pump();
		json_t *r = result_of(reply_to(id));
		assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")),
				    cases[i].want);
		expect_json(json_object_get(r, "serverInfo"),
			    "{\"name\":\"mcp-chain\",\"version\":\"" MCPC_VERSION "\"}");
		assert_int_equal(session_state(s2), SESSION_READY);
		session_free(s2);
	}
	for (size_t i = 0; i < NB; i++)
		assert_int_equal(B[i].init_calls, 1);   /* the backends: once, for the first */
}

/* With one backend the router is transparent: names and lists pass as they are. */
static void test_single_backend_transparent(void **state)
{
	(void)state;
	start("{\"mcpServers\":{\"only\":{\"command\":\"/bin/true\",\"prefix\":\"o\"}}}");
	assert_true(aggregate_transparent(AG));
	assert_ptr_equal(chain_init_target(session_peer(S)), &B[0].peer);
	set_tools(&B[0], (const char *const[]){ "file.read", NULL });
	client_init();
	json_t *r = result_of(reply_to(0));
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")), "only");
	size_t lists = got_n(&B[0], "tools/list");
	csend("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	pump();  /* answers it from B[0]'s canned list */
	assert_int_equal(got_n(&B[0], "tools/list"), lists + 1);  /* forwarded, not cached */
	expect_json(json_object_get(result_of(reply_to(1)), "tools"),
		    "[{\"name\":\"file.read\",\"description\":\"a tool\",\"inputSchema\":{\"type\":\"object\"}}]");
	struct fbe *who;
	json_t *req = call_tool(2, "file.read", &who);
	assert_ptr_equal(who, &B[0]);
	assert_string_equal(json_string_value(json_object_get(json_object_get(req, "params"), "name")), "file.read");
}

/* ---- backends going down, lists changing ---- */

/* A down backend's tools leave the list but keep their names: a call by
 * that name fails, and no other backend is given the name. */
static void test_backend_down_keeps_names(void **state)
{
	(void)state;
	start(CFG_SAME);
	set_tools(&B[0], (const char *const[]){ "echo", NULL });
	set_tools(&B[1], (const char *const[]){ "echo", "other", NULL });
	client_init();
	json_t *names = list_names("tools", 1);
	assert_string_equal(json_string_value(json_array_get(names, 0)), "p__echo");
	char b_echo[65];
	snprintf(b_echo, sizeof b_echo, "%s", json_string_value(json_array_get(names, 1)));
	json_decref(names);

	size_t before = notes("notifications/tools/list_changed");
	be_down(&B[0]);
	pump();
	assert_int_equal(notes("notifications/tools/list_changed"), before + 1);
	names = list_names("tools", 2);
	assert_int_equal(json_array_size(names), 2);
	assert_false(has_name(names, "p__echo"));
	assert_true(has_name(names, b_echo));
	json_decref(names);

	/* the name is alpha's: not routed to beta */
	struct fbe *who;
	assert_null(call_tool(3, "p__echo", &who));
	json_t *e = reply_to(3);
	assert_int_equal(err_code(e), RPC_BACKEND_GONE);
	assert_non_null(strstr(err_text(e), "alpha"));

	/* beta's lists change: "echo" still does not get alpha's name */
	be_note(&B[1], "notifications/tools/list_changed");
	pump();
	names = list_names("tools", 4);
	assert_false(has_name(names, "p__echo"));
	assert_true(has_name(names, b_echo));
	json_decref(names);
	expect_routed(5, b_echo, &B[1], "echo");

	/* alpha is back: its name with it, and the client is told */
	before = notes("notifications/tools/list_changed");
	be_up(&B[0]);
	pump();
	assert_true(notes("notifications/tools/list_changed") > before);
	names = list_names("tools", 6);
	assert_true(has_name(names, "p__echo"));
	assert_true(has_name(names, b_echo));
	json_decref(names);
	expect_routed(7, "p__echo", &B[0], "echo");
	/* a new run gets its own notifications/initialized */
	assert_int_equal(got_n(&B[0], "notifications/initialized"), 2);
}

/*
 * FIXED BUG (src/aggregate/aggregate.c, on_list_page): a list refresh that failed (here:
 * the backend goes down while it is in flight, and chain_peer_gone fails
 * it before aggregate_backend_down runs, which is backend.c's order) replaced
 * the backend's list with what the refresh gathered - nothing - although
 * it logged "keeping what was listed". The down backend's names were then no
 * longer reserved, and another backend's tool took its name: the client
 * calling "p__echo" reached a different backend than the one it listed.
 */
static void test_backend_down_during_refresh_keeps_names(void **state)
{
	(void)state;
	start(CFG_SAME);
	set_tools(&B[0], (const char *const[]){ "echo", NULL });
	set_tools(&B[1], (const char *const[]){ "echo", NULL });
	client_init();
	json_t *names = list_names("tools", 1);
	expect_json(json_array_get(names, 0), "\"p__echo\"");
	char b_echo[65];
	snprintf(b_echo, sizeof b_echo, "%s", json_string_value(json_array_get(names, 1)));
	json_decref(names);

	B[0].manual = true;
	be_note(&B[0], "notifications/tools/list_changed");  /* refresh in flight */
	must(&B[0], "tools/list");
	be_down(&B[0]);
	be_note(&B[1], "notifications/tools/list_changed");
	pump();
	names = list_names("tools", 2);
	bool stolen = has_name(names, "p__echo"), kept = has_name(names, b_echo);
	json_decref(names);
	assert_false(stolen);  /* before the fix: beta's echo was listed as "p__echo", alpha's name */
	assert_true(kept);
}

/*
 * FIXED BUG (src/aggregate/aggregate.c, on_list_page): the same root cause without a
 * crash. A refresh answered with an error logged "tools/list failed;
 * keeping what was listed" but replaced the backend's list with the
 * (empty) pages gathered, so its tools vanished until the next
 * list_changed.
 */
static void test_failed_refresh_keeps_list(void **state)
{
	(void)state;
	start(CFG_SAME);
	set_tools(&B[0], (const char *const[]){ "echo", NULL });
	client_init();
	B[0].manual = true;
	be_note(&B[0], "notifications/tools/list_changed");
	answer_error(&B[0], must(&B[0], "tools/list"), RPC_INTERNAL_ERROR, "busy");
	pump();
	json_t *names = list_names("tools", 1);
	bool kept = has_name(names, "p__echo");
	json_decref(names);
	assert_true(kept);  /* before the fix: the list was empty */
}

/* list_changed from a backend: that backend's list is fetched again, the
 * client is told, and the new names are served. */
static void test_list_changed_refetch(void **state)
{
	(void)state;
	start(CFG3);
	set_tools(&B[0], (const char *const[]){ "echo", NULL });
	set_tools(&B[1], (const char *const[]){ "old", NULL });
	set_list(&B[1].prompts, "[{\"name\":\"p1\"}]");
	client_init();
	json_t *names = list_names("tools", 1);
	expect_json(names, "[\"a-x-echo\",\"beta-x-old\"]");
	json_decref(names);
	size_t a_lists = got_n(&B[0], "tools/list"), b_lists = got_n(&B[1], "tools/list");
	size_t b_prompts = got_n(&B[1], "prompts/list");
	assert_int_equal(notes("notifications/tools/list_changed"), 0);

	set_tools(&B[1], (const char *const[]){ "new1", "new2", NULL });
	B[1].manual = true;
	be_note(&B[1], "notifications/tools/list_changed");
	pump();
	assert_int_equal(got_n(&B[1], "tools/list"), b_lists + 1);
	assert_int_equal(got_n(&B[0], "tools/list"), a_lists);    /* only that backend */
	assert_int_equal(got_n(&B[1], "prompts/list"), b_prompts); /* only that list */
	/* the backend's own notification does not reach the client as is */
	assert_int_equal(notes("notifications/tools/list_changed"), 0);
	/* while the refresh runs the old list is served */
	names = list_names("tools", 2);
	expect_json(names, "[\"a-x-echo\",\"beta-x-old\"]");
	json_decref(names);
	B[1].manual = false;
	pump();
	assert_int_equal(notes("notifications/tools/list_changed"), 1);
	names = list_names("tools", 3);
	expect_json(names, "[\"a-x-echo\",\"beta-x-new1\",\"beta-x-new2\"]");
	json_decref(names);
	expect_routed(4, "beta-x-new2", &B[1], "new2");
	struct fbe *who;
	assert_null(call_tool(5, "beta-x-old", &who));
	assert_int_equal(err_code(reply_to(5)), RPC_INVALID_PARAMS);

	/* prompts the same way */
	set_list(&B[1].prompts, "[{\"name\":\"p2\"}]");
	be_note(&B[1], "notifications/prompts/list_changed");
	pump();
	assert_int_equal(notes("notifications/prompts/list_changed"), 1);
	names = list_names("prompts", 6);
	expect_json(names, "[\"beta-x-p2\"]");
	json_decref(names);
	/* resources/list_changed is passed on to the client */
	be_note(&B[2], "notifications/resources/list_changed");
	pump();
	assert_int_equal(notes("notifications/resources/list_changed"), 1);
}

/* One list_changed round trip at backend B, with the test's own records
 * cleared so that only the router's memory can grow. */
static void list_changed_cycle(struct fbe *b)
{
	be_note(b, "notifications/tools/list_changed");
	pump();
	json_array_clear(b->got);
	json_array_clear(b->done);
	json_array_clear(out);
}

/*
 * FIXED BUG (src/aggregate/aggregate.c, clear_maps/rebuild): every rebuild of a list
 * (each list_changed, backend down or ready) allocated a new mapping and
 * a copy of the original name for every tool and prompt of every backend
 * and linked them into R.maps; clear_maps() only dropped the hash map, so
 * the old mappings stayed until aggregate_free. A backend that sent
 * list_changed often made mcp-chain grow without bound (here ~10 tools:
 * several hundred bytes per notification). Measured with mallinfo2, so
 * not under ASan.
 */
static void test_list_changed_memory_bounded(void **state)
{
	(void)state;
#ifdef __SANITIZE_ADDRESS__
	skip();
#endif
	start(CFG_SAME);
	set_tools(&B[0], (const char *const[]){ "t0", "t1", "t2", "t3", "t4", "t5", "t6",
						"t7", "t8", "t9", NULL });
	client_init();
	for (int i = 0; i < 50; i++)  /* warm up: buffers reach their size */
		list_changed_cycle(&B[0]);
	size_t before = mallinfo2().uordblks;
	for (int i = 0; i < 500; i++)
		list_changed_cycle(&B[0]);
	size_t after = mallinfo2().uordblks;
	long grown = (long)after - (long)before;
	print_message("heap grew by %ld bytes over 500 list_changed\n", grown);
	assert_true(grown < 500 * 16);  /* before the fix: ~ 500 * 10 * (mapping + name) */
}

/* ---- a stuck backend, a per-backend policy, lists before any backend ---- */

static const char *const CFG_STUCK =
	"{\"mcpServers\":{"
	"\"fast\":{\"command\":\"/bin/true\"},"
	"\"slow\":{\"command\":\"/bin/true\"}}}";

/*
 * A backend that does not answer initialize does not hold the client's:
 * the aggregate answers after the join bound (initJoinMs, 5 s by default,
 * under Codex's 10 s) with the backends that are ready, not after
 * initTimeoutMs (60 s). When the slow one is ready later it joins: its
 * tools are listed and the client is told with list_changed.
 */
static void test_stuck_backend_joins_late(void **state)
{
	(void)state;
	start(CFG_STUCK);
	B[1].hold_init = true;
	set_tools(&B[0], (const char *const[]){ "echo", NULL });
	set_tools(&B[1], (const char *const[]){ "late", NULL });
	fbe_caps(&B[0], "{\"tools\":{}}", NULL);
	fbe_caps(&B[1], "{\"tools\":{},\"resources\":{}}", NULL);
	csend("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
	      "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	      "\"clientInfo\":{\"name\":\"test-client\",\"version\":\"1\"}}}");
	double t0 = ev_time();
	pump();
	while (session_state(S) != SESSION_READY && ev_time() - t0 < 9.0) {
		ev_run(EV_DEFAULT, EVRUN_ONCE);   /* the join bound is a timer */
		pump();
	}
	double took = ev_time() - t0;
	assert_int_equal(session_state(S), SESSION_READY);
	if (took > CFG_DEFAULT_INIT_JOIN + 1.0)
		fail_msg("initialize answered after %.1f s (join bound %.0f s)", took, CFG_DEFAULT_INIT_JOIN);
	/* every list is promised: the one still starting may bring any */
	json_t *caps = json_object_get(result_of(reply_to(0)), "capabilities");
	expect_json(caps, "{\"tools\":{\"listChanged\":true},\"prompts\":{\"listChanged\":true},"
		    "\"resources\":{\"listChanged\":true}}");
	assert_int_equal(B[1].init_calls, 1);
	csend("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	pump();
	assert_int_equal(got_n(&B[1], "notifications/initialized"), 0);  /* not ready yet */
	json_t *names = list_names("tools", 1);
	expect_json(names, "[\"fast__echo\"]");
	json_decref(names);
	size_t tools_changed = notes("notifications/tools/list_changed");
	size_t res_changed = notes("notifications/resources/list_changed");

	init_release(&B[1]);   /* the slow one is ready at last */
	pump();
	assert_int_equal(got_n(&B[1], "notifications/initialized"), 1);
	assert_int_equal(notes("notifications/tools/list_changed"), tools_changed + 1);
	assert_int_equal(notes("notifications/resources/list_changed"), res_changed + 1);
	names = list_names("tools", 2);
	expect_json(names, "[\"fast__echo\",\"slow__late\"]");
	json_decref(names);
	expect_routed(3, "slow__late", &B[1], "late");
}

/* A backend that answers within the bound is waited for: no join later. */
static void test_slow_backend_within_bound(void **state)
{
	(void)state;
	start("{\"initJoinMs\":60000,\"mcpServers\":{"
	      "\"fast\":{\"command\":\"/bin/true\"},\"slow\":{\"command\":\"/bin/true\"}}}");
	B[1].hold_init = true;
	set_tools(&B[1], (const char *const[]){ "late", NULL });
	csend("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
	      "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	      "\"clientInfo\":{\"name\":\"test-client\",\"version\":\"1\"}}}");
	pump();
	assert_int_not_equal(session_state(S), SESSION_READY);
	init_release(&B[1]);
	pump();
	assert_int_equal(session_state(S), SESSION_READY);
	csend("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	pump();
	assert_int_equal(notes("notifications/tools/list_changed"), 0);
	json_t *names = list_names("tools", 1);
	expect_json(names, "[\"slow__late\"]");
	json_decref(names);
}

/*
 * A tool denied by one backend's own policy is refused the way the global
 * policy refuses it: a tool result with isError that the model can read,
 * not "-32602 Unknown tool" (the aggregate never listed the name, since
 * the backend's filtered list lacks it).
 */
static void test_backend_policy_deny_is_tool_error(void **state)
{
	(void)state;
	start("{\"middleware\":[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"open__gone\"]}]}],"
	      "\"mcpServers\":{"
	      "\"locked\":{\"command\":\"/bin/true\",\"middleware\":"
	      "[{\"use\":\"policy\",\"rules\":[{\"deny\":[\"secret\"]}]}]},"
	      "\"open\":{\"command\":\"/bin/true\"}}}");
	set_tools(&B[0], (const char *const[]){ "secret", "fine", NULL });
	set_tools(&B[1], (const char *const[]){ "gone", NULL });
	client_init();
	json_t *names = list_names("tools", 1);
	expect_json(names, "[\"locked__fine\"]");
	json_decref(names);
	struct fbe *who;
	assert_null(call_tool(2, "locked__secret", &who));   /* per-backend deny */
	assert_null(call_tool(3, "open__gone", &who));       /* global deny */
	json_t *own = result_of(reply_to(2)), *global = result_of(reply_to(3));
	assert_true(json_is_true(json_object_get(global, "isError")));
	assert_true(json_is_true(json_object_get(own, "isError")));
	const char *t = json_string_value(json_object_get(json_array_get(
		json_object_get(own, "content"), 0), "text"));
	assert_non_null(t);
	assert_non_null(strstr(t, "secret"));
	/* a name of no backend is still unknown */
	assert_null(call_tool(4, "nobody__x", &who));
	assert_int_equal(err_code(reply_to(4)), RPC_INVALID_PARAMS);
	for (size_t i = 0; i < NB; i++)
		assert_int_equal(got_n(&B[i], "tools/call"), 0);
}

/*
 * Lists asked before any backend has listed anything (no backend has
 * tools, prompts or resources): empty answers. The empty arrays were made
 * and set with a reference kept (json_object_set), so LeakSanitizer
 * reported them at exit (FIXED: _set_new; finish_page steals ITEMS).
 */
static void test_lists_before_any_backend(void **state)
{
	(void)state;
	start(CFG_STUCK);
	fbe_caps(&B[0], "{}", NULL);
	fbe_caps(&B[1], "{}", NULL);
	client_init();
	csend("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	csend("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/list\"}");
	csend("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/templates/list\"}");
	pump();
	expect_json(result_of(reply_to(1)), "{\"tools\":[]}");
	expect_json(result_of(reply_to(2)), "{\"prompts\":[]}");
	expect_json(result_of(reply_to(3)), "{\"resourceTemplates\":[]}");
}

/* ---- tasks ---- */

#define TASK_CAPS "{\"tools\":{},\"tasks\":{\"list\":{},\"cancel\":{}," \
	"\"requests\":{\"tools\":{\"call\":{}}}}}"

/* A Task object with id ID and STATUS (new). */
static json_t *task_obj(const char *id, const char *status)
{
	return json_pack("{s:s,s:s,s:i,s:s,s:s}", "taskId", id, "status", status, "ttl", 60000,
			 "createdAt", "2026-11-24T00:00:00Z", "lastUpdatedAt", "2026-11-24T00:00:00Z");
}

/* The one unanswered request METHOD that reached a backend; *WHO gets it. */
static json_t *reached(const char *method, struct fbe **who)
{
	json_t *found = NULL;
	*who = NULL;
	for (size_t i = 0; i < NB; i++) {
		json_t *m = peek(&B[i], method);
		if (m) {
			assert_null(found);  /* exactly one backend got it */
			found = m;
			*who = &B[i];
		}
	}
	return found;
}

/* The client asks METHOD about task TID with id ID. */
static void task_req(json_int_t id, const char *method, const char *tid)
{
	send_tree(S, json_pack("{s:s,s:I,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", id,
				     "method", method, "params", "taskId", tid));
	pump();
}

/* A tools/call with params.task to exposed tool NAME; the backend that got
 * it (checked to be WANT, with its own name) answers task ORIG: the client
 * gets the exposed id EXPOSED. */
static void create_task(json_int_t id, const char *name, struct fbe *want, const char *orig,
			const char *exposed)
{
	struct fbe *who;
	send_tree(S, json_pack("{s:s,s:I,s:s,s:{s:s,s:{},s:{s:i}}}", "jsonrpc", "2.0",
				     "id", id, "method", "tools/call", "params", "name", name,
				     "arguments", "task", "ttl", 60000));
	pump();
	json_t *req = reached("tools/call", &who);
	assert_non_null(req);
	assert_ptr_equal(who, want);
	json_t *params = json_object_get(req, "params");
	assert_string_equal(json_string_value(json_object_get(params, "name")), "slow");
	expect_json(json_object_get(params, "task"), "{\"ttl\":60000}");
	answer(who, req, json_pack("{s:o}", "task", task_obj(orig, "working")));
	json_t *task = json_object_get(result_of(reply_to(id)), "task");
	assert_string_equal(json_string_value(json_object_get(task, "taskId")), exposed);
	assert_string_equal(json_string_value(json_object_get(task, "status")), "working");
}

/* Two backends that both call their task "t1": the client sees two ids,
 * each routed back to the backend that made it, with the backend's own id;
 * answers, task-related _meta and status notifications carry exposed ids;
 * an id of no backend is -32602; the merged initialize offers tasks. */
static void test_tasks_routed_by_id(void **state)
{
	(void)state;
	start(CFG3);
	fbe_caps(&B[0], TASK_CAPS, NULL);
	fbe_caps(&B[1], TASK_CAPS, NULL);
	fbe_caps(&B[2], "{\"tools\":{}}", NULL);
	set_tools(&B[0], (const char *const[]){ "slow", NULL });
	set_tools(&B[1], (const char *const[]){ "slow", NULL });
	client_init();
	expect_json(json_object_get(json_object_get(result_of(reply_to(0)), "capabilities"), "tasks"),
		    "{\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}");
	create_task(1, "a-x-slow", &B[0], "t1", "a-x-t1");
	create_task(2, "beta-x-slow", &B[1], "t1", "beta-x-t1");

	struct fbe *who;
	task_req(3, "tasks/get", "beta-x-t1");
	json_t *req = reached("tasks/get", &who);
	assert_ptr_equal(who, &B[1]);
	assert_string_equal(json_string_value(json_object_get(json_object_get(req, "params"),
							      "taskId")), "t1");
	answer(who, req, task_obj("t1", "input_required"));
	json_t *r = result_of(reply_to(3));
	assert_string_equal(json_string_value(json_object_get(r, "taskId")), "beta-x-t1");
	assert_string_equal(json_string_value(json_object_get(r, "status")), "input_required");

	task_req(4, "tasks/cancel", "a-x-t1");
	req = reached("tasks/cancel", &who);
	assert_ptr_equal(who, &B[0]);
	assert_string_equal(json_string_value(json_object_get(json_object_get(req, "params"),
							      "taskId")), "t1");
	answer(who, req, task_obj("t1", "cancelled"));
	assert_string_equal(json_string_value(json_object_get(result_of(reply_to(4)), "taskId")),
			    "a-x-t1");
	/* its entry went with the terminal status; its head still routes it */
	task_req(5, "tasks/get", "a-x-t1");
	req = reached("tasks/get", &who);
	assert_ptr_equal(who, &B[0]);
	answer_error(who, req, RPC_INVALID_PARAMS, "Task not found");
	assert_int_equal(err_code(reply_to(5)), RPC_INVALID_PARAMS);

	/* an id no backend made: answered here, reaching none */
	task_req(6, "tasks/get", "nobody-t1");
	assert_int_equal(err_code(reply_to(6)), RPC_INVALID_PARAMS);
	assert_non_null(strstr(err_text(reply_to(6)), "nobody-t1"));
	assert_null(reached("tasks/get", &who));
	csend("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/result\",\"params\":{}}");
	pump();
	assert_int_equal(err_code(reply_to(7)), RPC_INVALID_PARAMS);

	/* the result, with its related-task _meta exposed */
	task_req(8, "tasks/result", "beta-x-t1");
	req = reached("tasks/result", &who);
	assert_ptr_equal(who, &B[1]);
	answer(who, req, J("{\"content\":[{\"type\":\"text\",\"text\":\"done\"}],"
			   "\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"t1\"}}}"));
	expect_json(result_of(reply_to(8)), "{\"content\":[{\"type\":\"text\",\"text\":\"done\"}],"
		    "\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"beta-x-t1\"}}}");

	/* a status notification names the exposed id */
	json_t *params = task_obj("t2", "working");
	chain_receive(&B[0].peer, rpc_notification("notifications/tasks/status", params));
	pump();
	assert_int_equal(notes("notifications/tasks/status"), 1);
	size_t i;
	json_t *m;
	json_array_foreach(out, i, m)
		if (json_is_string(json_object_get(m, "method")) &&
		    strcmp(json_string_value(json_object_get(m, "method")),
			   "notifications/tasks/status") == 0)
			assert_string_equal(json_string_value(json_object_get(json_object_get(m, "params"),
				"taskId")), "a-x-t2");

	/* a task-augmented call to an unknown tool reaches nobody */
	send_tree(S, J("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
			     "{\"name\":\"nope\",\"task\":{}}}"));
	pump();
	assert_int_equal(err_code(reply_to(9)), RPC_INVALID_PARAMS);
	assert_null(reached("tools/call", &who));
}

/* tasks/list pages across the backends that list tasks, one page per
 * backend behind an opaque cursor, every id exposed. */
static void test_tasks_list_paged(void **state)
{
	(void)state;
	start(CFG3);
	fbe_caps(&B[0], TASK_CAPS, NULL);
	fbe_caps(&B[1], "{\"tools\":{}}", NULL);   /* no tasks: skipped */
	fbe_caps(&B[2], TASK_CAPS, NULL);
	client_init();
	csend("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/list\"}");
	pump();
	struct fbe *who;
	json_t *req = reached("tasks/list", &who);
	assert_ptr_equal(who, &B[0]);
	answer(who, req, json_pack("{s:[o,o]}", "tasks", task_obj("t1", "working"),
				   task_obj("t2", "completed")));
	json_t *r = result_of(reply_to(1));
	json_t *tasks = json_object_get(r, "tasks");
	assert_int_equal(json_array_size(tasks), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(tasks, 0), "taskId")),
			    "a-x-t1");
	assert_string_equal(json_string_value(json_object_get(json_array_get(tasks, 1), "taskId")),
			    "a-x-t2");
	const char *cur = json_string_value(json_object_get(r, "nextCursor"));
	assert_non_null(cur);
	json_t *next = json_pack("{s:s,s:i,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", 2,
				 "method", "tasks/list", "params", "cursor", cur);
	send_tree(S, next);
	pump();
	req = reached("tasks/list", &who);
	assert_ptr_equal(who, &B[2]);
	assert_null(json_object_get(json_object_get(req, "params"), "cursor"));
	answer(who, req, json_pack("{s:[o]}", "tasks", task_obj("t1", "working")));
	r = result_of(reply_to(2));
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(r, "tasks"), 0), "taskId")), "my.srv-x-t1");
	assert_null(json_object_get(r, "nextCursor"));
	/* the listed live task routes to its backend */
	task_req(3, "tasks/get", "my.srv-x-t1");
	req = reached("tasks/get", &who);
	assert_ptr_equal(who, &B[2]);
}

/* With one backend, tasks pass through unchanged (ids included). */
static void test_tasks_single_backend_unchanged(void **state)
{
	(void)state;
	start("{\"mcpServers\":{\"only\":{\"command\":\"/bin/true\"}}}");
	fbe_caps(&B[0], TASK_CAPS, NULL);
	client_init();
	send_tree(S, J("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
			     "{\"name\":\"slow\",\"task\":{\"ttl\":5}}}"));
	pump();
	json_t *req = must(&B[0], "tools/call");
	expect_json(json_object_get(req, "params"), "{\"name\":\"slow\",\"task\":{\"ttl\":5}}");
	answer(&B[0], req, json_pack("{s:o}", "task", task_obj("t1", "working")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		result_of(reply_to(1)), "task"), "taskId")), "t1");
	task_req(2, "tasks/get", "t1");
	req = must(&B[0], "tasks/get");
	assert_string_equal(json_string_value(json_object_get(json_object_get(req, "params"),
							      "taskId")), "t1");
	chain_receive(&B[0].peer, rpc_notification("notifications/tasks/status",
						   task_obj("t1", "completed")));
	pump();
	assert_int_equal(notes("notifications/tasks/status"), 1);
}

/* ---- caching hints ---- */

/* The merged list's hints: the smallest ttlMs, private when any is; a
 * backend that says nothing counts as 0 and private; none: no hints. */
static void test_list_hints_merged(void **state)
{
	(void)state;
	start("{\"mcpServers\":{\"a\":{\"command\":\"/bin/true\"},\"b\":{\"command\":\"/bin/true\"}}}");
	set_tools(&B[0], (const char *const[]){ "x", NULL });
	set_tools(&B[1], (const char *const[]){ "y", NULL });
	B[0].list_extra = J("{\"ttlMs\":60000,\"cacheScope\":\"public\"}");
	B[1].list_extra = J("{\"ttlMs\":30000,\"cacheScope\":\"public\"}");
	client_init();
	int raw = raw_writes;
	size_t i;
	json_t *m;
	json_decref(list_names("tools", 1));
	assert_int_equal(raw_writes, raw + 1);  /* the cached text carries them too */
	json_t *r = result_of(reply_to(1));
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 30000);
	assert_string_equal(json_string_value(json_object_get(r, "cacheScope")), "public");
	/* the tree path (a string id) says the same */
	csend("{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/list\"}");
	pump();
	json_array_foreach(out, i, m)
		if (json_is_string(json_object_get(m, "id")))
			r = result_of(m);
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 30000);
	assert_string_equal(json_string_value(json_object_get(r, "cacheScope")), "public");

	json_decref(B[1].list_extra);
	B[1].list_extra = J("{\"cacheScope\":\"private\"}");
	be_note(&B[1], "notifications/tools/list_changed");
	pump();
	json_decref(list_names("tools", 3));
	r = result_of(reply_to(3));
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 0);  /* none counts 0 */
	assert_string_equal(json_string_value(json_object_get(r, "cacheScope")), "private");

	json_decref(B[1].list_extra);
	B[1].list_extra = NULL;
	be_note(&B[1], "notifications/tools/list_changed");
	pump();
	json_decref(list_names("tools", 4));
	r = result_of(reply_to(4));
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 0);
	assert_string_equal(json_string_value(json_object_get(r, "cacheScope")), "private");

	/* neither says anything: neither does the merged list */
	json_decref(B[0].list_extra);
	B[0].list_extra = NULL;
	be_note(&B[0], "notifications/tools/list_changed");
	pump();
	json_decref(list_names("tools", 5));
	r = result_of(reply_to(5));
	assert_null(json_object_get(r, "ttlMs"));
	assert_null(json_object_get(r, "cacheScope"));
}

/* A backend's cached list is fetched again once its ttlMs ran out, before
 * the client's list is answered; a list still fresh is not. */
static void test_list_ttl_expires(void **state)
{
	(void)state;
	start("{\"mcpServers\":{\"a\":{\"command\":\"/bin/true\"},\"b\":{\"command\":\"/bin/true\"}}}");
	set_tools(&B[0], (const char *const[]){ "x", NULL });
	set_tools(&B[1], (const char *const[]){ "y", NULL });
	B[0].list_extra = J("{\"ttlMs\":50}");
	B[1].list_extra = J("{\"ttlMs\":600000}");
	client_init();
	size_t a0 = got_n(&B[0], "tools/list"), b0 = got_n(&B[1], "tools/list");
	json_t *names = list_names("tools", 1);   /* fresh: from the cache */
	expect_json(names, "[\"a__x\",\"b__y\"]");
	json_decref(names);
	assert_int_equal(got_n(&B[0], "tools/list"), a0);
	set_tools(&B[0], (const char *const[]){ "x", "z", NULL });  /* no list_changed */
	usleep(80 * 1000);
	ev_now_update(EV_DEFAULT);
	B[0].manual = true;   /* hold its answer: the client's list waits */
	csend("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	pump();
	assert_int_equal(got_n(&B[0], "tools/list"), a0 + 1);
	assert_int_equal(got_n(&B[1], "tools/list"), b0);       /* still fresh */
	json_t *m;
	size_t i;
	json_array_foreach(out, i, m)
		assert_false(json_integer_value(json_object_get(m, "id")) == 2);
	B[0].manual = false;
	pump();
	json_t *r = result_of(reply_to(2));
	assert_int_equal(json_array_size(json_object_get(r, "tools")), 3);
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 50);
	assert_int_equal(notes("notifications/tools/list_changed"), 0);
	/* a backend that goes down while its list is fetched still lets it end */
	usleep(80 * 1000);
	ev_now_update(EV_DEFAULT);
	B[0].manual = true;
	csend("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	pump();
	be_down(&B[0]);
	pump();
	expect_json(json_object_get(result_of(reply_to(3)), "tools"),
		    "[{\"name\":\"b__y\",\"description\":\"a tool\",\"inputSchema\":{\"type\":\"object\"}}]");
}

/* A resources page carries its backend's hints; resources/read passes
 * the backend's answer, hints and all, unchanged. */
static void test_resource_hints_pass(void **state)
{
	(void)state;
	start("{\"status\":false,\"mcpServers\":{\"a\":{\"command\":\"/bin/true\"},"
	      "\"b\":{\"command\":\"/bin/true\"}}}");
	client_init();
	csend("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}");
	pump();
	json_t *req = must(&B[0], "resources/list");
	answer(&B[0], req, J("{\"resources\":[{\"uri\":\"file:///a\",\"name\":\"a\"}],"
			     "\"ttlMs\":1234,\"cacheScope\":\"public\"}"));
	json_t *r = result_of(reply_to(1));
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 1234);
	assert_string_equal(json_string_value(json_object_get(r, "cacheScope")), "public");
	csend("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":"
	      "{\"uri\":\"file:///a\"}}");
	pump();
	req = must(&B[0], "resources/read");
	answer(&B[0], req, J("{\"contents\":[{\"uri\":\"file:///a\",\"text\":\"x\"}],"
			     "\"ttlMs\":77,\"cacheScope\":\"private\"}"));
	expect_json(result_of(reply_to(2)), "{\"contents\":[{\"uri\":\"file:///a\",\"text\":\"x\"}],"
		    "\"ttlMs\":77,\"cacheScope\":\"private\"}");
}

int main(void)
{
	CH = chain_new();
	mw_use_registry(mw_registry);   /* per-backend modules (policy) */
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_stuck_backend_joins_late),
		T(test_slow_backend_within_bound),
		T(test_backend_policy_deny_is_tool_error),
		T(test_lists_before_any_backend),
		T(test_names_prefix_separator),
		T(test_names_invalid_chars),
		T(test_names_too_long),
		T(test_names_same_prefix),
		T(test_names_deterministic),
		T(test_tools_list_paged_backend),
		T(test_unknown_name),
		T(test_prompts_get_routing),
		T(test_resources_paging),
		T(test_resources_status_and_failure),
		T(test_resources_read_routing),
		T(test_merged_initialize),
		T(test_later_session_gets_asked_version),
		T(test_single_backend_transparent),
		T(test_backend_down_keeps_names),
		T(test_list_changed_refetch),
		/* regressions of bugs these tests found (fixed) */
		T(test_backend_down_during_refresh_keeps_names),
		T(test_failed_refresh_keeps_list),
		T(test_list_changed_memory_bounded),
		T(test_tasks_routed_by_id),
		T(test_tasks_list_paged),
		T(test_tasks_single_backend_unchanged),
		T(test_list_hints_merged),
		T(test_list_ttl_expires),
		T(test_resource_hints_pass),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
