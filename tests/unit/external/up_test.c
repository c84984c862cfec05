/*
 * up_test.c - the world of a test of an HTTP upstream transport.
 */
#include "up_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ev.h>

#include "curl_ev.h"
#include "peer.h"

struct ext_up U;

static void on_init(void *arg, json_t *resp)
{
	(void)arg;
	json_array_append_new(U.init_answers, json_deep_copy(resp));
}

bool up_init_answered(const void *arg)
{
	(void)arg;
	return json_array_size(U.init_answers) > 0;
}

bool up_not_running(const void *arg)
{
	(void)arg;
	return !backend_running(U.be);
}

void up_setup(stub_fn handler)
{
	memset(&U, 0, sizeof U);
	U.ch = chain_new();
	assert_non_null(U.ch);
	ext_client_init(&U.cl, U.ch);
	U.init_answers = json_array();
	U.port = stub_start(handler, NULL);
}

void up_teardown(double grace)
{
	if (U.be) {
		enum backend_state s = backend_state(U.be);
		if (s != BACKEND_FAILED && s != BACKEND_GONE) {
			backend_stop(U.be, grace);
			ext_run_until(up_not_running, NULL, 3.0);
		}
		backend_free(U.be);
	}
	stub_stop();
	cfg_free(U.cfg);
	json_decref(U.init_answers);
	ext_client_release(&U.cl);
	chain_free(U.ch);
	memset(&U, 0, sizeof U);
	assert_int_equal(curl_ev_count(), 0);
}

void up_make(struct cfg *cfg)
{
	U.cfg = cfg;
	U.be = backend_new(U.ch, U.cfg, &U.cfg->servers[0], NULL, NULL);
	assert_non_null(U.be);
	assert_int_equal(backend_start(U.be), 0);
}

void up_ask_initialize(const char *params)
{
	struct peer *p = backend_peer(U.be);
	json_t *j = ext_json(params);
	assert_int_equal(p->ops->initialize(p, j, on_init, NULL), 0);
	json_decref(j);
}
