/*
 * test_pipesz.c - unit tests for src/core/pipesz.c (growing a pipe to fit
 * what is about to cross it).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "pipesz.h"

/* A pipe of 4096 bytes grows to the power of two that holds what is asked,
 * is left alone for less, and stops at the ceiling. */
static void test_grows_by_powers_of_two(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
	size_t cap = 0;
	assert_false(pipesz_fit(p[1], 1000, &cap));       /* learns the size, keeps it */
	assert_int_equal(cap, 4096);
	assert_int_equal(fcntl(p[1], F_GETPIPE_SZ), 4096);
	assert_true(pipesz_fit(p[1], 100000, &cap));      /* 4096 -> 131072 */
	assert_int_equal(cap, 131072);
	assert_int_equal(fcntl(p[0], F_GETPIPE_SZ), 131072);   /* one pipe: both ends */
	assert_false(pipesz_fit(p[1], 131072, &cap));     /* held already */
	assert_true(pipesz_fit(p[0], 5u << 20, &cap));    /* past the ceiling: the ceiling */
	assert_int_equal(cap, PIPESZ_MAX);
	assert_int_equal(fcntl(p[1], F_GETPIPE_SZ), (int)PIPESZ_MAX);
	assert_false(pipesz_fit(p[1], 8u << 20, &cap));   /* as large as it gets */
	close(p[0]);
	close(p[1]);
}

/* Not a pipe: nothing changes, and it is not asked again. */
static void test_not_a_pipe(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	int sndbuf = 0;
	socklen_t len = sizeof sndbuf;
	assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &len), 0);
	size_t cap = 0;
	assert_false(pipesz_fit(sv[0], 1u << 20, &cap));
	assert_int_equal(cap, PIPESZ_MAX);
	int after = 0;
	assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &after, &len), 0);
	assert_int_equal(after, sndbuf);
	close(sv[0]);
	close(sv[1]);
	/* a closed descriptor likewise */
	cap = 0;
	assert_false(pipesz_fit(sv[0], 1u << 20, &cap));
	assert_int_equal(cap, PIPESZ_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows_by_powers_of_two),
		cmocka_unit_test(test_not_a_pipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
