/*
 * test_stdio.c - unit tests for src/front/stdio.c, the stdio front, on
 * socket pairs in place of stdin and stdout (stdio_front_new_fds): flow
 * control. A client that writes and never reads must not make the
 * replies mcp-chain makes itself (-32700 to unparsable lines here) queue
 * without bound: reading stops above WRITER_HIGH_WATER, and once the
 * client reads again every line is answered, exactly once, and the end
 * of input comes after the last one. The chain pausing the client (a
 * backend's input full) stops reading too. A client that stops reading
 * for good ends its session after the stall time (stdio_front_set_stall),
 * unless it keeps reading, however slowly.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>
#include <ev.h>

#include "chain.h"
#include "front.h"
#include "log.h"
#include "peer.h"
#include "writer.h"

/* The chain every test of this file uses (made in main, renewed by teardowns). */
static struct chain *C;

#define CHUNK_LINES 512

static int cin[2], cout[2];      /* [0]: the test's end, [1]: the front's */
static struct stdio_front *F;
static bool closed;
static const char *closed_why;
static size_t replies, parse_errors, peak_queued;
static char partial[4096];        /* a reply cut by a read */
static size_t partial_len;
static size_t pending, at;        /* write_lines: bytes of its chunk still to write, and where */

static void on_closed(struct stdio_front *f, const char *reason, void *arg)
{
	(void)f;
	(void)arg;
	closed = true;
	closed_why = reason;
}

/* Small socket buffers, so that a client that does not read is felt soon. */
static void small_buffers(int fd)
{
	int n = 16384;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	writer_setup();
	log_set_level(LOG_ERROR);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, cin) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, cout) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		small_buffers(cin[i]);
		small_buffers(cout[i]);
	}
	closed = false;
	closed_why = NULL;
	replies = parse_errors = peak_queued = partial_len = pending = at = 0;
	F = stdio_front_new_fds(C, cin[1], cout[0], 1 << 20, on_closed, NULL);
	return F ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	stdio_front_free(F);
	F = NULL;
	for (int i = 0; i < 2; i++) {
		close(cin[i]);
		close(cout[i]);
	}
	chain_free(C);
	C = chain_new();
	return 0;
}

/* One loop iteration that does not wait; notes the largest queue. */
static void spin(void)
{
	ev_run(EV_DEFAULT, EVRUN_NOWAIT);
	size_t q = stdio_front_queued(F);
	if (q > peak_queued)
		peak_queued = q;
}

/* Reads what the front wrote, counting whole reply lines. */
static size_t read_replies(void)
{
	char buf[65536];
	size_t got = 0;
	ssize_t n;
	while ((n = read(cout[1], buf, sizeof buf)) > 0) {
		got += (size_t)n;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n') {
				if (partial_len < sizeof partial - 1)
					partial[partial_len++] = buf[i];
				continue;
			}
			partial[partial_len] = '\0';
			replies++;
			if (strstr(partial, "\"code\":-32700") && strstr(partial, "\"id\":null"))
				parse_errors++;
			partial_len = 0;
		}
	}
	return got;
}

/*
 * Writes up to LINES more "{" lines, as many as the front takes; returns
 * how many whole lines went (a line cut by a short write is finished).
 */
static size_t write_lines(size_t lines)
{
	static char chunk[CHUNK_LINES * 2];
	size_t sent = 0;
	if (!chunk[0])
		for (size_t i = 0; i < CHUNK_LINES; i++)
			memcpy(chunk + 2 * i, "{\n", 2);
	for (;;) {
		if (!pending) {
			if (lines - sent == 0)
				return sent;
			size_t k = lines - sent < CHUNK_LINES ? lines - sent : CHUNK_LINES;
			pending = 2 * k;
			at = 0;
		}
		ssize_t n = write(cin[0], chunk + at, pending);
		if (n <= 0)
			return sent;
		sent += ((size_t)n + (at & 1)) / 2;  /* lines whose "\n" went */
		at += (size_t)n;
		pending -= (size_t)n;
	}
}

/* A client that writes and does not read stalls the front's input; then all is answered. */
/* A backend whose initialize never answers. */
static int never_send(struct peer *p, json_t *m, const struct peer_out *o)
{
	(void)p;
	(void)m;
	(void)o;
	return 0;
}

static int never_initialize(struct peer *p, json_t *params,
			    void (*cb)(void *arg, json_t *response), void *arg)
{
	(void)p;
	(void)params;
	(void)cb;
	(void)arg;
	return 0;
}

static const struct peer_ops never_ops = { .send = never_send, .initialize = never_initialize };

/* Freed while the client's initialize waits for the backend: the client
 * still gets its answer (an error), written before the front goes. */
static void test_free_answers_pending_initialize(void **state)
{
	(void)state;
	struct peer be;
	peer_init(&be, &never_ops, PEER_BACKEND, "be");
	chain_add_peer(C, &be);
	const char *init = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
		"\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n";
	assert_int_equal(write(cin[0], init, strlen(init)), (ssize_t)strlen(init));
	for (int i = 0; i < 20; i++)
		spin();
	stdio_front_free(F);
	F = NULL;
	char buf[4096];
	ssize_t n = read(cout[1], buf, sizeof buf - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "\"id\":1"));
	assert_non_null(strstr(buf, "\"error\""));
	chain_remove_peer(&be);
	peer_release(&be);
}

static void test_unread_stdout_stops_input(void **state)
{
	(void)state;
	const size_t total = 150000;   /* 300 kB in, about 20 MB of replies */
	size_t sent = 0;
	int stalled = 0;
	for (int i = 0; i < 200000 && sent < total && stalled < 200; i++) {
		size_t k = write_lines(total - sent);
		sent += k;
		stalled = k ? 0 : stalled + 1;
		spin();
	}
	/* the front stopped reading: the client's writes block, the queue is bounded */
	assert_true(stalled >= 200);
	assert_true(sent < total);
	assert_true(peak_queued > WRITER_HIGH_WATER / 2);
	assert_true(peak_queued <= WRITER_HIGH_WATER + 4096);
	assert_int_equal(replies, 0);
	/* the client reads again: the rest goes in, every line gets its -32700 */
	for (int i = 0; i < 10000000 && (sent < total || replies < total); i++) {
		sent += write_lines(total - sent);
		spin();
		read_replies();
		assert_true(stdio_front_queued(F) <= WRITER_HIGH_WATER + 4096);
	}
	assert_int_equal(sent, total);
	assert_int_equal(replies, total);
	assert_int_equal(parse_errors, total);
	assert_false(closed);
	/* end of input after the last line */
	shutdown(cin[0], SHUT_WR);
	for (int i = 0; i < 1000 && !closed; i++)
		spin();
	assert_true(closed);
	assert_string_equal(closed_why, "end of input");
	read_replies();
	assert_int_equal(replies, total);
}

/*
 * The end of input arrives while stdout is full: the lines read before it
 * are still answered, then the end is reported, not before.
 */
static void test_eof_while_full_answers_everything(void **state)
{
	(void)state;
	size_t sent = 0;
	int stalled = 0;
	for (int i = 0; i < 200000 && stalled < 200; i++) {
		size_t k = write_lines(1000000);
		sent += k;
		stalled = k ? 0 : stalled + 1;
		spin();
	}
	assert_true(stalled >= 200);
	shutdown(cin[0], SHUT_WR);
	for (int i = 0; i < 200; i++)
		spin();
	assert_false(closed);   /* lines still wait: no end yet */
	for (int i = 0; i < 10000000 && !(closed && replies == sent); i++) {
		spin();
		read_replies();
	}
	assert_true(closed);
	assert_int_equal(replies, sent);
	assert_int_equal(parse_errors, sent);
}

/* ---- a client that stopped reading ---- */

static void on_alarm(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

/*
 * Runs the loop for SECONDS (or until the front closes), reading up to
 * READ_BYTES of the replies every 50 ms when READ_BYTES is not 0.
 */
static void run_for(double seconds, size_t read_bytes)
{
	bool done = false;
	ev_timer alarm;
	ev_timer_init(&alarm, on_alarm, seconds, 0.);
	alarm.data = &done;
	ev_timer_start(EV_DEFAULT, &alarm);
	while (!done && !closed) {
		bool tick = false;
		ev_timer t;
		ev_timer_init(&t, on_alarm, 0.05, 0.);
		t.data = &tick;
		ev_timer_start(EV_DEFAULT, &t);
		while (!tick && !done && !closed)
			ev_run(EV_DEFAULT, EVRUN_ONCE);
		ev_timer_stop(EV_DEFAULT, &t);
		if (read_bytes) {
			char buf[4096];
			size_t left = read_bytes;
			ssize_t n;
			while (left && (n = read(cout[1], buf, left < sizeof buf ? left : sizeof buf)) > 0)
				left -= (size_t)n;
		}
	}
	ev_timer_stop(EV_DEFAULT, &alarm);
}

/* Writes lines, reading nothing, until the front stops taking them. */
static void fill_until_stalled(void)
{
	int stalled = 0;
	for (int i = 0; i < 200000 && stalled < 200; i++) {
		stalled = write_lines(1000000) ? 0 : stalled + 1;
		spin();
	}
	assert_true(stalled >= 200);
	assert_true(stdio_front_queued(F) > WRITER_HIGH_WATER);
}

/* Stdout full and nothing read for the stall time: the session ends, the queue goes. */
static void test_stalled_reader_ends_session(void **state)
{
	(void)state;
	fill_until_stalled();
	stdio_front_set_stall(F, 0.6);   /* set while full (a reload): counts from now */
	run_for(0.2, 0);
	assert_false(closed);   /* not before the stall time */
	run_for(2.0, 0);
	assert_true(closed);
	assert_string_equal(closed_why, "client stopped reading");
	assert_int_equal(stdio_front_queued(F), 0);
	/* later replies are dropped, not queued */
	write_lines(10);
	for (int i = 0; i < 100; i++)
		spin();
	assert_int_equal(stdio_front_queued(F), 0);
}

/* A client that reads, however slowly, is not dropped; once it stops, it is. */
static void test_slow_reader_is_kept(void **state)
{
	(void)state;
	fill_until_stalled();
	stdio_front_set_stall(F, 0.5);
	run_for(1.5, 32768);  /* at most 1 MB in all: never drains 4 MiB, but progresses */
	assert_false(closed);
	assert_true(stdio_front_queued(F) > WRITER_HIGH_WATER / 2);
	run_for(2.0, 0);
	assert_true(closed);
	assert_string_equal(closed_why, "client stopped reading");
}

/* With no stall time (0) the front waits as long as it takes. */
static void test_no_stall_time_waits(void **state)
{
	(void)state;
	stdio_front_set_stall(F, 0);
	fill_until_stalled();
	run_for(0.6, 0);
	assert_false(closed);
	assert_true(stdio_front_queued(F) > WRITER_HIGH_WATER);
}

/* ---- the chain pausing the client ---- */

static int fake_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	(void)p;
	(void)msg;
	(void)o;
	return 0;
}

static const struct peer_ops fake_ops = { .send = fake_send };

/* A backend whose input is full pauses the client; reading resumes with it. */
static void test_chain_pause_stops_input(void **state)
{
	(void)state;
	struct peer be;
	peer_init(&be, &fake_ops, PEER_BACKEND, "be");
	chain_add_peer(C, &be);
	write_lines(10);
	for (int i = 0; i < 100 && replies < 10; i++) {
		spin();
		read_replies();
	}
	assert_int_equal(replies, 10);
	chain_congestion(&be, true);   /* the backend's queue is over its mark */
	assert_int_equal(write_lines(20), 20);
	for (int i = 0; i < 100; i++) {
		spin();
		read_replies();
	}
	assert_int_equal(replies, 10);   /* nothing read while paused */
	chain_congestion(&be, false);
	for (int i = 0; i < 100 && replies < 30; i++) {
		spin();
		read_replies();
	}
	assert_int_equal(replies, 30);
	assert_int_equal(parse_errors, 30);
	chain_remove_peer(&be);
	peer_release(&be);
}

int main(void)
{
	C = chain_new();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_free_answers_pending_initialize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unread_stdout_stops_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eof_while_full_answers_everything, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chain_pause_stops_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stalled_reader_ends_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_reader_is_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_stall_time_waits, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
