/*
 * ext_test.c - helpers shared by the unit tests of src/external/ (see
 * ext_test.h).
 */
#include "ext_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "curl_ev.h"
#include "log.h"

static int cl_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct ext_client *c = (struct ext_client *)p;
	(void)o;
	json_array_append_new(c->got, json_deep_copy(msg));
	return 0;
}

static const struct peer_ops cl_ops = { .send = cl_send };

void ext_client_init(struct ext_client *c, struct chain *ch)
{
	memset(c, 0, sizeof *c);
	peer_init(&c->peer, &cl_ops, PEER_CLIENT, "client");
	c->peer.ready = true;
	c->got = json_array();
	chain_add_peer(ch, &c->peer);
}

void ext_client_release(struct ext_client *c)
{
	chain_remove_peer(&c->peer);
	peer_release(&c->peer);
	json_decref(c->got);
	c->got = NULL;
}

json_t *ext_client_msg(const struct ext_client *c, size_t i)
{
	json_t *m = json_array_get(c->got, i);
	if (!m)
		fail_msg("the client got %zu messages, none at %zu", json_array_size(c->got), i);
	return m;
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/*
 * One guard timer for the whole CAP, set from the loop's cached time, can
 * fire before the wall-clock bound is reached and leave the next ev_run
 * waiting for libev's longest block (about 60 s): a short timer is armed
 * for every iteration instead.
 */
bool ext_run_until(bool (*done)(const void *arg), const void *arg, double cap)
{
	double end = ev_time() + cap;
	while (!(done && done(arg)) && ev_time() < end) {
		ev_timer tick;
		ev_now_update(EV_DEFAULT);
		ev_timer_init(&tick, on_tick, 0.005, 0.);
		ev_timer_start(EV_DEFAULT, &tick);
		ev_run(EV_DEFAULT, EVRUN_ONCE);
		ev_timer_stop(EV_DEFAULT, &tick);
	}
	return done && done(arg);
}

void ext_run_for(double seconds)
{
	ext_run_until(NULL, NULL, seconds);
}

void ext_spin(int turns)
{
	for (int i = 0; i < turns; i++) {
		ev_timer tick;
		ev_timer_init(&tick, on_tick, 0.001, 0.);
		ev_timer_start(EV_DEFAULT, &tick);
		ev_run(EV_DEFAULT, EVRUN_ONCE);
		ev_timer_stop(EV_DEFAULT, &tick);
	}
}

struct got_arg {
	const struct ext_client *c;
	size_t n;
};

static bool got_at_least(const void *arg)
{
	const struct got_arg *a = arg;
	return json_array_size(a->c->got) >= a->n;
}

void ext_wait_got(struct ext_client *c, size_t n, double cap)
{
	struct got_arg a = { c, n };
	if (!ext_run_until(got_at_least, &a, cap)) {
		char *t = json_dumps(c->got, JSON_COMPACT);
		print_message("got: %s\n", t);
		free(t);
		fail_msg("the client got %zu messages, not %zu, within %g s",
			 json_array_size(c->got), n, cap);
	}
}

struct state_arg {
	const struct backend *b;
	enum backend_state s;
};

static bool in_state(const void *arg)
{
	const struct state_arg *a = arg;
	return backend_state(a->b) == a->s;
}

void ext_wait_state(struct backend *b, enum backend_state s, double cap)
{
	struct state_arg a = { b, s };
	if (!ext_run_until(in_state, &a, cap))
		fail_msg("state %s not reached within %g s (state %s)", backend_state_name(s), cap,
			 backend_state_name(backend_state(b)));
}

json_t *ext_json(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
	if (!j)
		fail_msg("bad test JSON (%s): %s", e.text, text);
	return j;
}

struct cfg *ext_cfg(const char *text)
{
	struct cfg_errors errs = { 0 };
	struct cfg *c = cfg_load_string(text, "test.json", &errs);
	if (!c) {
		for (size_t i = 0; i < errs.count; i++)
			print_message("%s\n", errs.lines[i]);
		cfg_errors_release(&errs);
		fail_msg("bad test configuration");
	}
	return c;
}

struct cfg *ext_cfgf(const char *fmt, ...)
{
	char *text;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	struct cfg *c = ext_cfg(text);
	free(text);
	return c;
}

int ext_curl_main(const char *name, const struct CMUnitTest *tests, size_t n)
{
	log_set_level(getenv("DBG") ? LOG_DEBUG : LOG_ERROR);
	if (!getenv("DBG"))
		log_open_file("/dev/null");   /* failures are logged on purpose */
	ev_default_loop(0);
	backend_use_transports(be_transports);
	if (curl_ev_setup() < 0) {   /* no libcurl: fail, do not skip */
		fprintf(stderr, "libcurl cannot be loaded\n");
		return 1;
	}
	int rc = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
	curl_ev_release();
	return rc;
}
