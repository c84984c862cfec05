/*
 * test_wiretap.c - unit tests for src/core/wiretap.c: with no tap set
 * nothing is called; set, it gets lines, joined pieces and serialized
 * trees, with their peer and direction; unset again, nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "peer.h"
#include "wiretap.h"

static char seen[256];
static int calls;
static const struct peer *seen_peer;
static enum wiretap_dir seen_dir;

static void tap(void *arg, const struct peer *p, enum wiretap_dir dir, const char *line, size_t len)
{
	assert_ptr_equal(arg, &calls);
	calls++;
	seen_peer = p;
	seen_dir = dir;
	snprintf(seen, sizeof seen, "%.*s", (int)len, line);
}

static void test_wiretap(void **state)
{
	(void)state;
	struct peer p;
	memset(&p, 0, sizeof p);
	wiretap_line(&p, WIRETAP_IN, "x", 1);
	assert_int_equal(calls, 0);                 /* no tap: nothing */

	wiretap_set(tap, &calls);
	wiretap_line(&p, WIRETAP_IN, "{\"a\":1}", 7);
	assert_int_equal(calls, 1);
	assert_ptr_equal(seen_peer, &p);
	assert_int_equal(seen_dir, WIRETAP_IN);
	assert_string_equal(seen, "{\"a\":1}");

	struct iovec iov[3] = { { "{\"id\":", 6 }, { "42", 2 }, { "}", 1 } };
	wiretap_iov(&p, WIRETAP_OUT, iov, 3);
	assert_int_equal(calls, 2);
	assert_int_equal(seen_dir, WIRETAP_OUT);
	assert_string_equal(seen, "{\"id\":42}");   /* the pieces as one line */

	json_t *m = json_pack("{s:s,s:i}", "jsonrpc", "2.0", "id", 3);
	wiretap_json(&p, WIRETAP_OUT, m);
	json_decref(m);
	assert_int_equal(calls, 3);
	assert_string_equal(seen, "{\"jsonrpc\":\"2.0\",\"id\":3}");   /* compact, as written */

	wiretap_set(NULL, NULL);
	wiretap_line(&p, WIRETAP_IN, "y", 1);
	assert_int_equal(calls, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_wiretap) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
