/*
 * test_observe.c - unit tests for src/core/observe.c: listeners told in
 * order with serials that count up, copies kept (the caller's strings may
 * change after), the ring's bound (the oldest dropped), unlistening from
 * inside a listener, an event told from inside a listener.
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

#include "observe.h"

/* What a listener saw: the WHAT of each event, space separated. */
struct seen {
	char whats[4096];
	uint64_t last_serial;
	int calls;
	bool unlisten_self;      /* unlisten at the first call */
	bool nest;               /* tell "nested" at the first call */
};

static void on_event(void *arg, const struct obs_event *e)
{
	struct seen *s = arg;
	s->calls++;
	assert_true(e->serial > s->last_serial);
	assert_true(e->time > 0);
	s->last_serial = e->serial;
	strncat(s->whats, e->what ? e->what : "-", sizeof s->whats - strlen(s->whats) - 2);
	strcat(s->whats, " ");
	if (s->unlisten_self && s->calls == 1)
		observe_unlisten(on_event, s);
	if (s->nest && s->calls == 1)
		observe_note(&(struct obs_event){ .kind = OBS_ERROR, .what = "nested" });
}

static int teardown(void **state)
{
	(void)state;
	observe_reset();
	return 0;
}

/* Listeners hear every event in order; unlistened ones hear no more. */
static void test_listeners(void **state)
{
	(void)state;
	struct seen a = { 0 }, b = { 0 };
	assert_int_equal(observe_listen(on_event, &a), 0);
	assert_int_equal(observe_listen(on_event, &b), 0);
	observe_note(&(struct obs_event){ .kind = OBS_DECISION, .what = "denied",
					  .source = "policy", .code = -32600 });
	observe_unlisten(on_event, &b);
	observe_note(&(struct obs_event){ .kind = OBS_BACKEND, .what = "down" });
	assert_string_equal(a.whats, "denied down ");
	assert_string_equal(b.whats, "denied ");
	observe_unlisten(on_event, &a);
	observe_note(&(struct obs_event){ .kind = OBS_BACKEND, .what = "up" });
	assert_int_equal(a.calls, 2);
}

/* The ring keeps copies: the caller's buffers may change afterwards. */
static void collect(void *arg, const struct obs_event *e)
{
	struct seen *s = arg;
	s->calls++;
	strncat(s->whats, e->detail ? e->detail : e->what, sizeof s->whats - strlen(s->whats) - 2);
	strcat(s->whats, " ");
	assert_null(e->ex);   /* a kept event outlives its exchange */
}

static void test_kept_copies(void **state)
{
	(void)state;
	char detail[32] = "first reason";
	observe_note(&(struct obs_event){ .kind = OBS_DECISION, .what = "denied",
					  .detail = detail, .ex = (struct exchange *)detail });
	strcpy(detail, "changed");
	observe_note(&(struct obs_event){ .kind = OBS_ERROR, .what = "error", .method = "tools/call",
					  .name = "echo", .client = "alice", .backend = "b1" });
	struct seen s = { 0 };
	observe_each(collect, &s);
	assert_int_equal(s.calls, 2);
	assert_string_equal(s.whats, "first reason error ");
}

/* Past OBSERVE_KEEP events, the oldest go. */
static void test_ring_bound(void **state)
{
	(void)state;
	char d[32];
	for (int i = 0; i < OBSERVE_KEEP + 5; i++) {
		snprintf(d, sizeof d, "e%d", i);
		observe_note(&(struct obs_event){ .kind = OBS_ERROR, .what = "error", .detail = d });
	}
	struct seen s = { 0 };
	observe_each(collect, &s);
	assert_int_equal(s.calls, OBSERVE_KEEP);
	assert_true(strncmp(s.whats, "e5 e6 ", 6) == 0);
	char last[16];
	snprintf(last, sizeof last, "e%d ", OBSERVE_KEEP + 4);
	assert_non_null(strstr(s.whats, last));
}

/* A listener may unlisten itself, and tell an event of its own, while told. */
static void test_reentry(void **state)
{
	(void)state;
	struct seen self = { .unlisten_self = true }, other = { 0 }, nester = { .nest = true };
	observe_listen(on_event, &nester);
	observe_listen(on_event, &self);
	observe_listen(on_event, &other);
	observe_note(&(struct obs_event){ .kind = OBS_SESSION, .what = "opened" });
	observe_note(&(struct obs_event){ .kind = OBS_SESSION, .what = "closed" });
	/* the nested event is told once the event in hand was told to all */
	assert_string_equal(nester.whats, "opened nested closed ");
	assert_string_equal(self.whats, "opened ");
	assert_string_equal(other.whats, "opened nested closed ");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_listeners, teardown),
		cmocka_unit_test_teardown(test_kept_copies, teardown),
		cmocka_unit_test_teardown(test_ring_bound, teardown),
		cmocka_unit_test_teardown(test_reentry, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
