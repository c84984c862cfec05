/*
 * test_curl_ev.c - unit tests for src/external/curl_ev.c, libcurl's multi
 * interface on the libev default loop: transfers run side by side and each
 * is reported done once, from the loop, with its result; a transfer
 * removed midway is never reported and its connection is closed; libcurl's
 * timeouts fire through the one ev_timer; calls from inside libcurl's
 * callbacks are refused; the multi handle can be released and set up
 * again.
 *
 * The peer is the scripted HTTP server of http_stub.c on the same loop.
 * libcurl must load: a machine without it fails here instead of skipping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "curl_ev.h"
#include "ext_test.h"
#include "http_stub.h"
#include "log.h"

/* One test transfer. */
struct xf {
	struct curl_ev_xfer base;   /* first member */
	int done;                   /* times DONE was called */
	CURLcode rc;
	bool active_in_done;        /* base.active when DONE was called */
	bool busy_in_done;          /* curl_ev_busy() there */
	bool busy_in_write;         /* curl_ev_busy() inside the write callback */
	int add_in_write;           /* what curl_ev_add returned there (1: not tried) */
	struct xf *then;            /* started from inside DONE */
	char body[256];
	size_t len;
	double done_at;
};

static int port;
static struct stub_conn *held[8];  /* requests the handler left unanswered */
static int nheld;

/* Requests to /now are answered at once with their path; others are held. */
static void handler(struct stub_conn *c, const struct stub_req *r, void *arg)
{
	(void)arg;
	if (strncmp(r->path, "/now", 4) == 0) {
		stub_reply(c, 200, "text/plain", NULL, r->path);
		return;
	}
	assert_true(nheld < 8);
	held[nheld++] = c;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
	struct xf *x = arg;
	size_t len = size * n;
	x->busy_in_write = curl_ev_busy();
	if (x->add_in_write == 0 && x->then)
		x->add_in_write = curl_ev_add(&x->then->base);
	if (x->len + len < sizeof x->body) {
		memcpy(x->body + x->len, data, len);
		x->len += len;
	}
	return len;
}

static void on_done(struct curl_ev_xfer *base, CURLcode rc)
{
	struct xf *x = (struct xf *)base;
	x->done++;
	x->rc = rc;
	x->active_in_done = base->active;
	x->busy_in_done = curl_ev_busy();
	x->done_at = ev_time();
	if (x->then && x->add_in_write != 0)
		assert_int_equal(curl_ev_add(&x->then->base), 0);
}

/* A transfer of PATH on the stub (not started). */
static void xf_init(struct xf *x, const char *path)
{
	char url[128];
	memset(x, 0, sizeof *x);
	x->add_in_write = 1;
	x->base.easy = curl_easy_init();
	x->base.done = on_done;
	assert_non_null(x->base.easy);
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(x->base.easy, CURLOPT_URL, url);
	curl_easy_setopt(x->base.easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->base.easy, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(x->base.easy, CURLOPT_WRITEDATA, x);
}

static void xf_release(struct xf *x)
{
	curl_ev_remove(&x->base);
	curl_easy_cleanup(x->base.easy);
}

static bool all_done(const void *arg)
{
	const struct xf *const *xs = arg;
	for (; *xs; xs++)
		if (!(*xs)->done)
			return false;
	return true;
}

static bool held_n(const void *arg)
{
	return nheld >= *(const int *)arg;
}

static int setup(void **state)
{
	(void)state;
	assert_int_equal(curl_ev_setup(), 0);
	nheld = 0;
	port = stub_start(handler, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	stub_stop();
	assert_int_equal(curl_ev_count(), 0);
	return 0;
}

/* libcurl loads and the multi handle is made once: a second setup is a no-op. */
static void test_setup(void **state)
{
	(void)state;
	assert_int_equal(curl_ev_setup(), 0);
	assert_int_equal(curl_ev_count(), 0);
	assert_false(curl_ev_busy());
}

/* Three transfers run at once; answered in reverse order, each is done
 * once with its own body, inactive and out of the count by then, and DONE
 * is not called from inside libcurl. */
static void test_parallel(void **state)
{
	(void)state;
	struct xf a, b, c;
	xf_init(&a, "/a");
	xf_init(&b, "/b");
	xf_init(&c, "/c");
	assert_int_equal(curl_ev_add(&a.base), 0);
	assert_int_equal(curl_ev_add(&b.base), 0);
	assert_int_equal(curl_ev_add(&c.base), 0);
	assert_true(a.base.active && b.base.active && c.base.active);
	assert_int_equal(curl_ev_count(), 3);
	int three = 3;
	assert_true(ext_run_until(held_n, &three, 5.0));  /* all three reached the server */
	for (int i = nheld - 1; i >= 0; i--) {
		const struct stub_req *r = NULL;
		for (size_t k = 0; k < stub_count(); k++)
			if (stub_get(k)->conn == held[i])
				r = stub_get(k);
		assert_non_null(r);
		stub_reply(held[i], 200, "text/plain", NULL, r->path);
	}
	const struct xf *xs[] = { &a, &b, &c, NULL };
	assert_true(ext_run_until(all_done, xs, 5.0));
	const struct xf *each[] = { &a, &b, &c };
	const char *want[] = { "/a", "/b", "/c" };
	for (int i = 0; i < 3; i++) {
		assert_int_equal(each[i]->done, 1);
		assert_int_equal(each[i]->rc, CURLE_OK);
		assert_false(each[i]->active_in_done);
		assert_false(each[i]->busy_in_done);
		assert_true(each[i]->busy_in_write);
		assert_int_equal(each[i]->len, 2);
		assert_memory_equal(each[i]->body, want[i], 2);
	}
	assert_int_equal(curl_ev_count(), 0);
	ext_run_for(0.02);
	assert_int_equal(a.done + b.done + c.done, 3);  /* never twice */
	xf_release(&a);
	xf_release(&b);
	xf_release(&c);
}

/* A transfer removed while its request waits is never reported; its
 * connection is closed; removing it again changes nothing; the other
 * transfer still completes. */
static void test_remove(void **state)
{
	(void)state;
	struct xf a, b;
	xf_init(&a, "/held");
	xf_init(&b, "/now");
	assert_int_equal(curl_ev_add(&a.base), 0);
	int one = 1;
	assert_true(ext_run_until(held_n, &one, 5.0));
	assert_int_equal(curl_ev_add(&b.base), 0);
	assert_int_equal(curl_ev_count(), 2);
	curl_ev_remove(&a.base);
	assert_false(a.base.active);
	assert_int_equal(curl_ev_count(), 1);
	curl_ev_remove(&a.base);
	assert_int_equal(curl_ev_count(), 1);
	const struct xf *xs[] = { &b, NULL };
	assert_true(ext_run_until(all_done, xs, 5.0));
	assert_int_equal(b.rc, CURLE_OK);
	assert_memory_equal(b.body, "/now", 4);
	ext_run_until(NULL, NULL, 0.05);
	assert_false(stub_open(held[0]));  /* the client hung up */
	assert_int_equal(a.done, 0);
	xf_release(&a);
	xf_release(&b);
}

/* libcurl's own timeout fires through the loop's timer: a request the
 * server never answers ends with CURLE_OPERATION_TIMEDOUT after about its
 * CURLOPT_TIMEOUT_MS, not sooner and not much later. */
static void test_timeout(void **state)
{
	(void)state;
	struct xf a;
	xf_init(&a, "/never");
	curl_easy_setopt(a.base.easy, CURLOPT_TIMEOUT_MS, 150L);
	double t0 = ev_time();
	unsigned turns0 = ev_iteration(EV_DEFAULT);
	assert_int_equal(curl_ev_add(&a.base), 0);
	const struct xf *xs[] = { &a, NULL };
	assert_true(ext_run_until(all_done, xs, 5.0));
	assert_int_equal(a.rc, CURLE_OPERATION_TIMEDOUT);
	/* the wait was slept, not spun: a timer armed for 0 s (whole seconds
	 * from an integer division) would turn the loop thousands of times */
	unsigned turns = ev_iteration(EV_DEFAULT) - turns0;
	if (getenv("DBG"))
		print_message("loop turns while waiting: %u\n", turns);
	assert_true(turns < 300);
	assert_true(a.done_at - t0 >= 0.14);
	assert_true(a.done_at - t0 < 2.0);
	assert_int_equal(nheld, 1);  /* the request did reach the server */
	xf_release(&a);
}

/* A port nothing listens on: done with CURLE_COULDNT_CONNECT. */
static void test_refused(void **state)
{
	(void)state;
	struct xf a;
	char url[64];
	xf_init(&a, "/");
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", stub_dead_port());
	curl_easy_setopt(a.base.easy, CURLOPT_URL, url);
	assert_int_equal(curl_ev_add(&a.base), 0);
	const struct xf *xs[] = { &a, NULL };
	assert_true(ext_run_until(all_done, xs, 5.0));
	assert_int_equal(a.rc, CURLE_COULDNT_CONNECT);
	assert_int_equal(a.done, 1);
	xf_release(&a);
}

/* curl_ev_add is refused inside a libcurl callback (the write callback),
 * and allowed from DONE, which runs from the loop: a transfer started
 * there completes too. */
static void test_add_inside_callbacks(void **state)
{
	(void)state;
	struct xf a, b, c, d;
	xf_init(&a, "/now-a");
	xf_init(&b, "/now-b");
	a.then = &b;
	a.add_in_write = 0;  /* try from the write callback first */
	assert_int_equal(curl_ev_add(&a.base), 0);
	const struct xf *xs[] = { &a, &b, NULL };
	assert_true(ext_run_until(all_done, xs, 5.0));
	assert_int_equal(a.add_in_write, -1);
	assert_int_equal(b.rc, CURLE_OK);
	assert_memory_equal(b.body, "/now-b", 6);

	xf_init(&c, "/now-c");  /* from DONE only */
	xf_init(&d, "/now-d");
	c.then = &d;
	assert_int_equal(curl_ev_add(&c.base), 0);
	const struct xf *ys[] = { &c, &d, NULL };
	assert_true(ext_run_until(all_done, ys, 5.0));
	assert_int_equal(d.rc, CURLE_OK);
	assert_memory_equal(d.body, "/now-d", 6);
	assert_int_equal(curl_ev_count(), 0);
	xf_release(&a);
	xf_release(&b);
	xf_release(&c);
	xf_release(&d);
}

/* Released with a transfer still added (it is warned about and dropped),
 * the multi handle is set up again on the next add, which works. */
static void test_release_and_again(void **state)
{
	(void)state;
	struct xf a, b;
	xf_init(&a, "/held");
	assert_int_equal(curl_ev_add(&a.base), 0);
	int one = 1;
	assert_true(ext_run_until(held_n, &one, 5.0));
	curl_ev_release();
	assert_int_equal(curl_ev_count(), 0);
	a.base.active = false;  /* the multi handle that had it is gone */
	xf_init(&b, "/now");
	assert_int_equal(curl_ev_add(&b.base), 0);  /* sets up again */
	const struct xf *xs[] = { &b, NULL };
	assert_true(ext_run_until(all_done, xs, 5.0));
	assert_int_equal(b.rc, CURLE_OK);
	assert_int_equal(a.done, 0);
	xf_release(&a);
	xf_release(&b);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	log_open_file("/dev/null");
	ev_default_loop(0);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_setup),
		T(test_parallel),
		T(test_remove),
		T(test_timeout),
		T(test_refused),
		T(test_add_inside_callbacks),
		T(test_release_and_again),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_ev_release();
	return rc;
}
