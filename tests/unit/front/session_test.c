/*
 * session_test.c - the harness shared by the client-side front tests (see
 * session_test.h): a fake backend peer on a real chain, readers for what
 * it got and for error replies, and a bounded run of the default loop.
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
#include <ev.h>

#include "session_test.h"
#include "era.h"

#include "rpc.h"

struct sst_fbe sst_be;

/* ---- the fake backend ---- */

/* Keeps a copy of MSG. */
static int fbe_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct sst_fbe *b = (struct sst_fbe *)p;
	(void)o;
	json_array_append_new(b->got, json_deep_copy(msg));
	return 0;
}

/* The result the fake backend answers initialize with. */
static json_t *init_result_for(struct sst_fbe *b)
{
	if (b->init_result)
		return json_deep_copy(b->init_result);
	json_t *v = json_object_get(b->init_params, "protocolVersion");
	if (!era_handshake_supported(json_string_value(v)))   /* a 2026-07-28 client's: */
		v = json_string(era_handshake_versions[0]);   /* backend.c's newest */
	else
		json_incref(v);
	return json_pack("{s:o,s:{s:{s:b}},s:{s:s,s:s},s:s,s:{s:s}}",
			 "protocolVersion", v,
			 "capabilities", "tools", "listChanged", 1,
			 "serverInfo", "name", "fake", "version", "1.0",
			 "instructions", "be nice",
			 "_meta", "vendor", "x");
}

/* Completes the initialize handshake, as backend.c does. */
void sst_answer_init(struct sst_fbe *b)
{
	json_t *resp;
	if (b->init_error) {
		resp = json_pack("{s:s,s:n,s:O}", "jsonrpc", "2.0", "id", "error", b->init_error);
	} else {
		resp = rpc_result(json_null(), init_result_for(b));
		b->peer.ready = true;
		b->peer.eras = b->eras ? b->eras : ERA_BIT_HANDSHAKE;
	}
	void (*cb)(void *, json_t *) = b->cb;
	b->cb = NULL;
	cb(b->cb_arg, resp);
	json_decref(resp);
}

/* Records the initialize asked for, and answers it unless told to wait. */
static int fbe_initialize(struct peer *p, json_t *params,
			  void (*cb)(void *arg, json_t *response), void *arg)
{
	struct sst_fbe *b = (struct sst_fbe *)p;
	b->init_calls++;
	json_decref(b->init_params);
	b->init_params = json_deep_copy(params);
	if (b->init_fail)
		return -1;
	b->cb = cb;
	b->cb_arg = arg;
	if (!b->defer)
		sst_answer_init(b);
	return 0;
}

/* Bytes sent to the fake backend: parsed and kept like the rest. */
static int fbe_send_raw(struct peer *p, const struct iovec *iov, int n, const struct peer_out *o)
{
	struct sst_fbe *b = (struct sst_fbe *)p;
	char line[4096];
	size_t len = 0;
	(void)o;
	for (int i = 0; i < n; i++) {
		assert_true(len + iov[i].iov_len < sizeof line);
		memcpy(line + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	json_t *m = json_loadb(line, len, 0, NULL);
	assert_non_null(m);
	json_array_append_new(b->got, m);
	return 0;
}

const struct peer_ops sst_fbe_ops = { .send = fbe_send, .initialize = fbe_initialize };
const struct peer_ops sst_fbe_raw_ops = { .send = fbe_send, .send_raw = fbe_send_raw,
					  .initialize = fbe_initialize };

/* Makes the fake backend afresh and adds it to C. */
void sst_be_open(struct chain *c, bool ready)
{
	memset(&sst_be, 0, sizeof sst_be);
	peer_init(&sst_be.peer, &sst_fbe_ops, PEER_BACKEND, "be");
	sst_be.peer.ready = ready;
	sst_be.got = json_array();
	chain_add_peer(c, &sst_be.peer);
}

/* Takes the fake backend out of its chain and frees what it holds. */
void sst_be_close(void)
{
	chain_remove_peer(&sst_be.peer);
	peer_release(&sst_be.peer);
	json_decref(sst_be.got);
	json_decref(sst_be.init_params);
	json_decref(sst_be.init_result);
	json_decref(sst_be.init_error);
	memset(&sst_be, 0, sizeof sst_be);
}

/* The backend sends TEXT. */
void sst_send_b(const char *text)
{
	chain_receive(&sst_be.peer, sst_json(text));
}

/* How many messages the backend got. */
size_t sst_n_be(void)
{
	return json_array_size(sst_be.got);
}

/* Message #I the backend got (borrowed). */
json_t *sst_be_at(size_t i)
{
	json_t *m = json_array_get(sst_be.got, i);
	if (!m)
		fail_msg("the backend got only %zu messages, wanted #%zu", sst_n_be(), i);
	return m;
}

/* The backend answers its request #I with RESULT. */
void sst_be_respond(size_t i, const char *result)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",\"result\":%s}",
		 sst_int_at(sst_be_at(i), "id"), result);
	sst_send_b(buf);
}

/* ---- reading JSON ---- */

/* TEXT parsed (a new reference), failing the test on bad JSON. */
json_t *sst_json(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
	if (!v)
		fail_msg("bad fixture JSON %s: %s", text, e.text);
	return v;
}

/* The integer member KEY of M. */
json_int_t sst_int_at(json_t *m, const char *key)
{
	json_t *v = json_object_get(m, key);
	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* The string member KEY of M (borrowed), or NULL. */
const char *sst_str_at(json_t *m, const char *key)
{
	return json_string_value(json_object_get(m, key));
}

/* The error code of the error response M. */
json_int_t sst_err_code(json_t *m)
{
	json_t *e = json_object_get(m, "error");
	if (!json_is_object(e)) {
		char *d = json_dumps(m, JSON_ENCODE_ANY);
		print_message("not an error response: %s\n", d);
		free(d);
		fail();
	}
	return sst_int_at(e, "code");
}

/* The error message of the response M (borrowed), or NULL. */
const char *sst_err_message(json_t *m)
{
	return sst_str_at(json_object_get(m, "error"), "message");
}

/* ---- the loop ---- */

/* Runs the loop until the timers due now have run. */
void sst_run_once(void)
{
	ev_run(EV_DEFAULT, EVRUN_NOWAIT);
}

/* Ends the bounded run. */
static void stop_loop(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop for SECONDS (a bounded wait for timers of the code under test). */
void sst_run_for(double seconds)
{
	ev_timer t;
	ev_timer_init(&t, stop_loop, seconds, 0.);
	ev_timer_start(EV_DEFAULT, &t);
	ev_run(EV_DEFAULT, 0);
	ev_timer_stop(EV_DEFAULT, &t);
}
