/*
 * test_framer.c - unit tests for src/core/framer.c (newline framing with a
 * size bound).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "framer.h"
#include "rpc.h"

static struct framer *live;   /* released by the teardown if a test fails */

/* framer_init, remembering F for the teardown. */
static void init(struct framer *f, size_t max)
{
	framer_init(f, max);
	live = f;
}

/* framer_release, forgetting F. */
static void release(struct framer *f)
{
	framer_release(f);
	if (live == f)
		live = NULL;
}

static int teardown(void **state)
{
	(void)state;
	if (live)
		framer_release(live);
	live = NULL;
	return 0;
}

/* Pushes a NUL-terminated string. */
static void push(struct framer *f, const char *s)
{
	assert_int_equal(framer_push(f, s, strlen(s)), 0);
}

/* Expects the next frame to be the line EXPECT. */
static void expect_line(struct framer *f, const char *expect)
{
	const char *line = NULL;
	size_t len = 0, total = 0;
	assert_int_equal(framer_next(f, &line, &len, &total), FRAME_LINE);
	assert_int_equal(len, strlen(expect));
	assert_int_equal(total, len);
	assert_memory_equal(line, expect, len);
}

/* Expects no complete frame. */
static void expect_none(struct framer *f)
{
	const char *line = NULL;
	size_t len = 0, total = 0;
	assert_int_equal(framer_next(f, &line, &len, &total), FRAME_NONE);
}

/* A line delivered one byte at a time comes out once, whole. */
static void test_split_byte_by_byte(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	const char *msg = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	(void)state;
	init(&f, 1024);
	for (size_t i = 0; i + 1 < strlen(msg); i++) {
		assert_int_equal(framer_push(&f, msg + i, 1), 0);
		expect_none(&f);
		assert_int_equal(framer_pending(&f), i + 1);
	}
	assert_int_equal(framer_push(&f, "\n", 1), 0);
	expect_line(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 0);
	release(&f);
}

/* Several messages in one push come out one by one, in order. */
static void test_many_per_push(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	(void)state;
	init(&f, 1024);
	push(&f, "a\nbb\nccc\n{\"x\":1}\n");
	expect_line(&f, "a");
	expect_line(&f, "bb");
	expect_line(&f, "ccc");
	expect_line(&f, "{\"x\":1}");
	expect_none(&f);
	release(&f);
}

/* A partial last line waits for its newline, then is joined. */
static void test_partial_last_line(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	(void)state;
	init(&f, 1024);
	push(&f, "first\nsec");
	expect_line(&f, "first");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 3);
	push(&f, "ond");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 6);
	push(&f, "\nthird\n");
	expect_line(&f, "second");
	expect_line(&f, "third");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 0);
	release(&f);
}

/* "\r\n" endings are stripped like "\n", also when split between pushes. */
static void test_crlf(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	(void)state;
	init(&f, 1024);
	push(&f, "abc\r\ndef\r");
	expect_line(&f, "abc");
	expect_none(&f);
	push(&f, "\n");
	expect_line(&f, "def");
	/* a lone '\r' inside a line is kept */
	push(&f, "a\rb\n");
	expect_line(&f, "a\rb");
	expect_none(&f);
	release(&f);
}

/* Empty and whitespace-only lines are skipped. */
static void test_blank_lines_skipped(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	(void)state;
	init(&f, 1024);
	push(&f, "\n\n   \n\t\t\n\r\n \t \r\nx\n\n");
	expect_line(&f, "x");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 0);
	release(&f);
}

/* A line of exactly the bound passes; one byte more is oversize. */
static void test_line_at_max_and_one_over(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	const char *line;
	size_t len, total;
	(void)state;
	init(&f, 8);
	push(&f, "12345678\n");
	expect_line(&f, "12345678");
	push(&f, "12345678\r\n");              /* CRLF not counted */
	expect_line(&f, "12345678");
	push(&f, "123456789\nnext\n");
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 9);
	assert_int_equal(len, 9);
	assert_memory_equal(line, "123456789", 9);
	expect_line(&f, "next");
	expect_none(&f);
	release(&f);
}

/* The same, with the line arriving before its newline. */
static void test_line_at_max_and_one_over_streamed(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	const char *line;
	size_t len, total;
	(void)state;
	init(&f, 8);
	push(&f, "12345678");
	expect_none(&f);
	push(&f, "\n");
	expect_line(&f, "12345678");
	push(&f, "12345678");
	expect_none(&f);
	push(&f, "9");                          /* now over the bound */
	expect_none(&f);
	push(&f, "abc");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 12);
	push(&f, "\nok\n");
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 12);
	assert_memory_equal(line, "123456789", 9);
	expect_line(&f, "ok");
	expect_none(&f);
	release(&f);
}

/*
 * BUG (framer.c, framer_next): a CRLF line of exactly the bound is accepted
 * when "\r\n" arrives together, but reported as FRAME_OVERSIZE when the read
 * boundary falls between '\r' and '\n': the pending bytes (max + the '\r')
 * exceed the bound before the '\n' is seen and discarding starts.
 */
static void test_crlf_line_at_max_split_before_lf(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	(void)state;
	init(&f, 8);
	push(&f, "12345678\r");
	expect_none(&f);
	push(&f, "\n");
	expect_line(&f, "12345678");
	release(&f);
}

/*
 * BUG (framer.c, finish_discard): an oversize line that streams in reports
 * a total that counts its trailing '\r', while the same line arriving whole
 * reports it without (test_line_at_max_and_one_over). Both should be 9.
 */
static void test_oversize_crlf_total_consistent(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	const char *line;
	size_t len, total;
	(void)state;
	init(&f, 8);
	push(&f, "123456789\r\n");
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 9);
	push(&f, "123456789");
	expect_none(&f);
	push(&f, "\r\n");
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 9);
	release(&f);
}

/*
 * An oversized line streamed in many chunks is reported once, with its
 * full length and its first FRAMER_PREFIX bytes, and never buffered whole;
 * the line after it comes out intact.
 */
static void test_oversize_streamed(void **state)
{
	const size_t max = 4096, size = 200000, chunk = 1000;
	static struct framer f;   /* static: the teardown may release it */
	const char *line;
	size_t len, total;
	static char big[200001];
	(void)state;
	const char *head = "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"pad\":\"";
	memset(big, 'a', size);
	memcpy(big, head, strlen(head));
	memcpy(big + size - 3, "\"}}", 3);
	for (size_t i = 0; i < size; i++)     /* vary the bytes so the prefix is checkable */
		if (i >= strlen(head) && i < size - 3)
			big[i] = (char)('a' + i % 26);

	init(&f, max);
	int reports = 0;
	for (size_t off = 0; off < size; off += chunk) {
		assert_int_equal(framer_push(&f, big + off, chunk), 0);
		enum frame_kind k;
		while ((k = framer_next(&f, &line, &len, &total)) != FRAME_NONE)
			reports++;
		/* memory stays bounded by the bound plus one chunk */
		assert_true(f.b.cap <= 2 * (max + 65536));
	}
	assert_int_equal(reports, 0);
	assert_int_equal(framer_pending(&f), size);
	push(&f, "\n{\"jsonrpc\":\"2.0\",\"id\":43,\"method\":\"ping\"}\n");
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, size);
	assert_int_equal(len, FRAMER_PREFIX);
	assert_memory_equal(line, big, FRAMER_PREFIX);
	/* the prefix is enough to address an error to the request */
	json_t *id = rpc_scan_id(line, len);
	assert_non_null(id);
	assert_int_equal(json_integer_value(id), 42);
	json_decref(id);
	expect_line(&f, "{\"jsonrpc\":\"2.0\",\"id\":43,\"method\":\"ping\"}");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 0);
	release(&f);
}

/* Two oversize lines in a row are each reported once. */
static void test_two_oversize_in_a_row(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	const char *line;
	size_t len, total;
	(void)state;
	init(&f, 4);
	push(&f, "aaaaaa");
	expect_none(&f);
	push(&f, "a\nbbbbbbbbbb\nc\n");
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 7);
	assert_memory_equal(line, "aaaaaa", 6);
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 10);
	assert_int_equal(len, 10);
	assert_memory_equal(line, "bbbbbbbbbb", 10);
	expect_line(&f, "c");
	expect_none(&f);
	release(&f);
}

/* framer_reserve/framer_commit, as a read(2) loop uses them. */
static void test_reserve_commit(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	size_t avail = 0;
	(void)state;
	init(&f, 1024);
	char *dst = framer_reserve(&f, &avail);
	assert_non_null(dst);
	assert_true(avail >= 16);
	memcpy(dst, "hello\nwor", 9);
	framer_commit(&f, 9);
	expect_line(&f, "hello");
	expect_none(&f);
	assert_int_equal(framer_pending(&f), 3);
	dst = framer_reserve(&f, &avail);
	assert_non_null(dst);
	assert_true(avail >= 16);
	memcpy(dst, "ld\r\n\nlast\n", 10);
	framer_commit(&f, 10);
	expect_line(&f, "world");
	expect_line(&f, "last");
	expect_none(&f);
	/* a committed oversize line is discarded like a pushed one */
	release(&f);
	init(&f, 4);
	dst = framer_reserve(&f, &avail);
	memcpy(dst, "123456", 6);
	framer_commit(&f, 6);
	expect_none(&f);
	dst = framer_reserve(&f, &avail);
	memcpy(dst, "78\nok\n", 6);
	framer_commit(&f, 6);
	const char *line;
	size_t len, total;
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_OVERSIZE);
	assert_int_equal(total, 8);
	expect_line(&f, "ok");
	release(&f);
}

/* A NUL byte inside a line is data, not a terminator. */
static void test_embedded_nul(void **state)
{
	static struct framer f;   /* static: the teardown may release it */
	const char *line;
	size_t len, total;
	(void)state;
	init(&f, 64);
	assert_int_equal(framer_push(&f, "a\0b\n", 4), 0);
	assert_int_equal(framer_next(&f, &line, &len, &total), FRAME_LINE);
	assert_int_equal(len, 3);
	assert_memory_equal(line, "a\0b", 3);
	release(&f);
}

/* framer_read: lines from a descriptor, EAGAIN when empty, the last line completed at the end. */
static void test_read_fd(void **state)
{
	(void)state;
	int fds[2];
	struct framer f;
	const char *line;
	size_t n, total;
	bool full = true;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
	framer_init(&f, 1024);
	assert_int_equal(framer_read(&f, fds[0], &full), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(write(fds[1], "one\ntw", 6), 6);
	assert_int_equal(framer_read(&f, fds[0], &full), 6);
	assert_false(full);   /* room was left: nothing more now */
	assert_int_equal(framer_next(&f, &line, &n, &total), FRAME_LINE);
	assert_int_equal(n, 3);
	assert_memory_equal(line, "one", 3);
	assert_int_equal(framer_next(&f, &line, &n, &total), FRAME_NONE);
	assert_int_equal(write(fds[1], "o", 1), 1);
	close(fds[1]);
	assert_int_equal(framer_read(&f, fds[0], NULL), 1);
	assert_int_equal(framer_read(&f, fds[0], NULL), 0);   /* end: "two" completed */
	assert_int_equal(framer_next(&f, &line, &n, &total), FRAME_LINE);
	assert_int_equal(n, 3);
	assert_memory_equal(line, "two", 3);
	assert_int_equal(framer_next(&f, &line, &n, &total), FRAME_NONE);
	close(fds[0]);
	assert_int_equal(framer_read(&f, fds[0], NULL), -1);   /* a closed descriptor: the error */
	assert_int_equal(errno, EBADF);
	framer_release(&f);
}

/*
 * A read of a whole default pipe-full or more (the writer may be blocked
 * with more) grows the pipe to four times what was read, so that a large
 * message crosses in few writes; reads of less leave it alone.
 */
static void test_read_grows_full_pipe(void **state)
{
	(void)state;
	int fds[2];
	struct framer f;
	static char fill[65536];
	memset(fill, 'x', sizeof fill);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(fds[1], F_SETPIPE_SZ, 65536), 65536);
	framer_init(&f, 1 << 22);
	assert_int_equal(write(fds[1], fill, 1000), 1000);
	assert_int_equal(framer_read(&f, fds[0], NULL), 1000);
	assert_int_equal(fcntl(fds[0], F_GETPIPE_SZ), 65536);
	assert_int_equal(write(fds[1], fill, sizeof fill), (ssize_t)sizeof fill);   /* full */
	assert_int_equal(framer_read(&f, fds[0], NULL), (ssize_t)sizeof fill);
	assert_int_equal(fcntl(fds[0], F_GETPIPE_SZ), 1 << 18);
	for (int i = 0; i < 4; i++)
		assert_int_equal(write(fds[1], fill, sizeof fill), (ssize_t)sizeof fill);
	ssize_t got = 0, n;
	while ((n = framer_read(&f, fds[0], NULL)) > 0)
		got += n;
	assert_int_equal(got, 4 * (ssize_t)sizeof fill);
	assert_true(fcntl(fds[0], F_GETPIPE_SZ) > 1 << 18);   /* reads past 64 KiB: more */
	assert_true(fcntl(fds[0], F_GETPIPE_SZ) <= 1 << 20);
	assert_int_equal(framer_pending(&f), 1000 + 5 * sizeof fill);
	close(fds[0]);
	close(fds[1]);
	framer_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_fd),
		cmocka_unit_test(test_read_grows_full_pipe),
		cmocka_unit_test_teardown(test_split_byte_by_byte, teardown),
		cmocka_unit_test_teardown(test_many_per_push, teardown),
		cmocka_unit_test_teardown(test_partial_last_line, teardown),
		cmocka_unit_test_teardown(test_crlf, teardown),
		cmocka_unit_test_teardown(test_blank_lines_skipped, teardown),
		cmocka_unit_test_teardown(test_line_at_max_and_one_over, teardown),
		cmocka_unit_test_teardown(test_line_at_max_and_one_over_streamed, teardown),
		cmocka_unit_test_teardown(test_crlf_line_at_max_split_before_lf, teardown),
		cmocka_unit_test_teardown(test_oversize_crlf_total_consistent, teardown),
		cmocka_unit_test_teardown(test_oversize_streamed, teardown),
		cmocka_unit_test_teardown(test_two_oversize_in_a_row, teardown),
		cmocka_unit_test_teardown(test_reserve_commit, teardown),
		cmocka_unit_test_teardown(test_embedded_nul, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
