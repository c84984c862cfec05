/*
 * test_quic.c - unit tests for src/core/quic.c: our client against our
 * server on 127.0.0.1 (port 0), both on libev's default loop, with a fresh
 * ECDSA P-256 self-signed certificate made by openssl at the start:
 * handshake, a bidi echo, 16 MiB server to client on a uni stream (flow
 * control and the writable callback), datagrams both ways and the size
 * limit, the certificate pin (right, wrong) and a CA file, a stream abort,
 * a connection close, the idle timeout, max_conns, and freeing a server
 * with open connections.
 *
 * With an argument "serve", the program is a tiny server for a manual
 * interop check instead (gtlsclient): it listens on 127.0.0.1:4433 with
 * the certificate and key named by the next two arguments, for 20 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "log.h"
#include "quic.h"
#include "tmpdir_test.h"

#define BULK (16u * 1024 * 1024)
#define BULK_HIGH (1024 * 1024)   /* the server keeps at most this queued */

static char cert_path[256], key_path[256], other_path[256];
static uint8_t pin[32];

/* What one end of a connection saw. */
struct side {
	struct quic_conn *c;
	int ready, closed, writable, resets, dgrams, stream_closes;
	char why[256];
	uint8_t *rx;
	size_t rxlen, rxcap;
	bool fin;
	int64_t rx_sid;
	uint64_t reset_code;
	bool reset_was_reset;
	uint8_t dg[2048];
	size_t dglen;
	/* server behaviours */
	bool echo;           /* echo bidi streams back (with FIN) */
	bool echo_dgrams;
	bool abort_on_data;  /* abort the stream at its first bytes */
	bool stop_on_data;   /* stop reading the stream at its first bytes */
	bool bulk;           /* send BULK bytes on a uni stream once ready */
	int64_t bulk_sid;
	size_t bulk_sent;
	bool verify_bulk;    /* client: check the pattern as it comes */
	bool bulk_bad;
};

#define NSRV 4
static struct side srv[NSRV];
static int nsrv;
static struct side srv_template;
static bool refuse_all;  /* the accept function says no */
static struct quic_endpoint *free_on_close;  /* a server closed() frees it */

/* The pattern byte at offset I of the bulk transfer. */
static uint8_t pat(size_t i)
{
	return (uint8_t)((i * 131u) ^ (i >> 11));
}

static void reset_sides(void)
{
	for (int i = 0; i < NSRV; i++) {
		free(srv[i].rx);
		memset(&srv[i], 0, sizeof srv[i]);
	}
	nsrv = 0;
	memset(&srv_template, 0, sizeof srv_template);
}

static void side_release(struct side *s)
{
	free(s->rx);
	s->rx = NULL;
}

/* Keeps the bulk transfer's queue topped up to BULK_HIGH. */
static void bulk_pump(struct side *s)
{
	static uint8_t buf[64 * 1024];
	while (s->bulk_sent < BULK && quic_stream_queued(s->c, s->bulk_sid) < BULK_HIGH) {
		size_t n = BULK - s->bulk_sent < sizeof buf ? BULK - s->bulk_sent : sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = pat(s->bulk_sent + i);
		bool fin = s->bulk_sent + n == BULK;
		assert_int_equal(quic_stream_write(s->c, s->bulk_sid, buf, n, fin), 0);
		s->bulk_sent += n;
	}
}

static void on_ready(void *arg, struct quic_conn *c)
{
	struct side *s = arg;
	s->c = c;
	s->ready++;
	if (s->bulk) {
		assert_int_equal(quic_stream_open(c, false, &s->bulk_sid), 0);
		bulk_pump(s);
	}
}

static void on_data(void *arg, struct quic_conn *c, int64_t sid, const uint8_t *data, size_t len,
		    bool fin)
{
	struct side *s = arg;
	s->rx_sid = sid;
	if (s->verify_bulk) {
		for (size_t i = 0; i < len; i++)
			if (data[i] != pat(s->rxlen + i))
				s->bulk_bad = true;
		s->rxlen += len;
	} else if (len) {
		if (s->rxlen + len > s->rxcap) {
			s->rxcap = (s->rxlen + len) * 2;
			s->rx = realloc(s->rx, s->rxcap);
			assert_non_null(s->rx);
		}
		memcpy(s->rx + s->rxlen, data, len);
		s->rxlen += len;
	}
	if (fin)
		s->fin = true;
	if (s->stop_on_data && len) {
		quic_stream_stop_reading(c, sid, 9);
		s->stop_on_data = false;
	}
	if (s->abort_on_data && len) {
		quic_stream_abort(c, sid, 7);
		s->abort_on_data = false;
	}
	if (s->echo && fin)
		assert_int_equal(quic_stream_write(c, sid, s->rx, s->rxlen, true), 0);
}

static void on_reset(void *arg, struct quic_conn *c, int64_t sid, uint64_t code, bool reset)
{
	struct side *s = arg;
	(void)c;
	(void)sid;
	s->resets++;
	s->reset_code = code;
	s->reset_was_reset = reset;
}

static void on_stream_close(void *arg, struct quic_conn *c, int64_t sid)
{
	struct side *s = arg;
	(void)c;
	(void)sid;
	s->stream_closes++;
}

static void on_writable(void *arg, struct quic_conn *c, int64_t sid)
{
	struct side *s = arg;
	(void)c;
	s->writable++;
	if (s->bulk && sid == s->bulk_sid)
		bulk_pump(s);
}

static void on_dgram(void *arg, struct quic_conn *c, const uint8_t *data, size_t len)
{
	struct side *s = arg;
	s->dgrams++;
	s->dglen = len < sizeof s->dg ? len : sizeof s->dg;
	memcpy(s->dg, data, s->dglen);
	if (s->echo_dgrams)
		quic_datagram_send(c, data, len);
}

static void on_closed(void *arg, struct quic_conn *c, const char *why)
{
	struct side *s = arg;
	(void)c;
	s->closed++;
	s->c = NULL;
	snprintf(s->why, sizeof s->why, "%s", why);
	if (free_on_close && s >= srv && s < srv + NSRV) {
		struct quic_endpoint *e = free_on_close;
		free_on_close = NULL;
		quic_endpoint_free(e, 5);  /* from inside its own callback */
	}
}

static const struct quic_conn_ops ops = {
	.ready = on_ready,
	.stream_data = on_data,
	.stream_reset = on_reset,
	.stream_close = on_stream_close,
	.writable = on_writable,
	.datagram = on_dgram,
	.closed = on_closed,
};

/* The server's accept: a side from the pool, set up as the template. */
static const struct quic_conn_ops *on_accept(void *arg, struct quic_conn *c, void **conn_arg)
{
	(void)arg;
	if (refuse_all)
		return NULL;
	assert_true(nsrv < NSRV);
	struct side *s = &srv[nsrv++];
	*s = srv_template;
	s->c = c;
	*conn_arg = s;
	return &ops;
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Runs the loop until *FLAG (an int) is at least N, or CAP seconds. */
static bool run_until(const int *flag, int n, double cap)
{
	ev_timer tick;
	ev_timer_init(&tick, on_tick, 0.05, 0.05);
	ev_timer_start(EV_DEFAULT, &tick);
	double end = ev_time() + cap;
	while (*flag < n && ev_time() < end)
		ev_run(EV_DEFAULT, EVRUN_ONCE);
	ev_timer_stop(EV_DEFAULT, &tick);
	return *flag >= n;
}

/* Runs the loop for about T seconds. */
static void run_for(double t)
{
	int never = 0;
	run_until(&never, 1, t);
}

static struct quic_server_opts server_opts(void)
{
	struct quic_server_opts o = {
		.cert_file = cert_path,
		.key_file = key_path,
		.alpn = "h3",
		.idle_timeout = 30,
		.max_conns = 8,
		.max_streams_bidi = 16,
		.max_streams_uni = 16,
		.max_datagram = 65535,
	};
	return o;
}

static struct quic_endpoint *server_start(const struct quic_server_opts *o)
{
	char why[256] = "";
	struct quic_endpoint *e = quic_server_new("127.0.0.1", 0, o, on_accept, NULL, why,
						  sizeof why);
	if (!e)
		fail_msg("quic_server_new: %s", why);
	assert_true(quic_endpoint_port(e) > 0);
	return e;
}

static struct quic_client_opts client_opts(int port)
{
	struct quic_client_opts o = {
		.host = "127.0.0.1",
		.port = port,
		.alpn = "h3",
		.pin = pin,
		.idle_timeout = 30,
		.max_datagram = 65535,
		.max_streams_bidi = 16,
		.max_streams_uni = 16,
	};
	return o;
}

static struct quic_conn *client_start(const struct quic_client_opts *o, struct side *s)
{
	char why[256] = "";
	struct quic_conn *c = quic_client_connect(o, &ops, s, why, sizeof why);
	if (!c)
		fail_msg("quic_client_connect: %s", why);
	s->c = c;
	return c;
}

/* Closes the client of S and waits for both ends' closed(). */
static void close_both(struct side *cl, struct side *sv)
{
	if (cl->c)
		quic_conn_close(cl->c, 0, "test over");
	assert_true(run_until(&cl->closed, 1, 10));
	if (sv)
		assert_true(run_until(&sv->closed, 1, 10));
}

/* Handshake, ready on both sides, a bidi stream echoed, a clean close. */
static void test_echo(void **state)
{
	(void)state;
	reset_sides();
	srv_template.echo = true;
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side cl = { 0 };
	struct quic_conn *c = client_start(&co, &cl);
	assert_true(run_until(&cl.ready, 1, 10));
	assert_true(run_until(&srv[0].ready, 1, 10));
	assert_int_equal(nsrv, 1);
	assert_non_null(strstr(quic_conn_peer(srv[0].c), "127.0.0.1:"));
	char expect[32];
	snprintf(expect, sizeof expect, "127.0.0.1:%d", quic_endpoint_port(e));
	assert_string_equal(quic_conn_peer(c), expect);

	int64_t sid;
	assert_int_equal(quic_stream_open(c, true, &sid), 0);
	assert_int_equal(quic_stream_write(c, sid, (const uint8_t *)"hello, ", 7, false), 0);
	assert_int_equal(quic_stream_write(c, sid, (const uint8_t *)"quic", 4, true), 0);
	assert_int_equal(quic_stream_write(c, sid, (const uint8_t *)"x", 1, false), -1);
	int fin = 0;
	double end = ev_time() + 10;
	while (!cl.fin && ev_time() < end)
		run_until(&fin, 1, 0.05);
	assert_true(cl.fin);
	assert_int_equal(cl.rxlen, 11);
	assert_memory_equal(cl.rx, "hello, quic", 11);
	assert_int_equal(cl.rx_sid, sid);
	/* both directions ended and acknowledged: the stream is forgotten */
	assert_true(run_until(&cl.stream_closes, 1, 10));
	assert_true(run_until(&srv[0].stream_closes, 1, 10));
	assert_int_equal(quic_stream_queued(c, sid), 0);

	close_both(&cl, &srv[0]);
	assert_string_equal(cl.why, "closed: test over");
	assert_non_null(strstr(srv[0].why, "test over"));
	assert_non_null(strstr(srv[0].why, "peer closed"));
	side_release(&cl);
	quic_endpoint_free(e, 0);
}

/* 16 MiB server to client on a uni stream: flow control windows of 4 and
 * 16 MiB must be extended, and the server refills on writable(). */
static void test_bulk(void **state)
{
	(void)state;
	reset_sides();
	srv_template.bulk = true;
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side cl = { .verify_bulk = true };
	client_start(&co, &cl);
	int fin = 0;
	double end = ev_time() + 60;
	while (!cl.fin && !cl.closed && ev_time() < end)
		run_until(&fin, 1, 0.05);
	assert_true(cl.fin);
	assert_int_equal(cl.rxlen, BULK);
	assert_false(cl.bulk_bad);
	assert_int_equal(srv[0].bulk_sent, BULK);
	assert_true(srv[0].writable > 0);
	/* the last bytes are acknowledged: nothing stays queued */
	assert_true(run_until(&srv[0].stream_closes, 1, 10));
	assert_int_equal(quic_stream_queued(srv[0].c, srv[0].bulk_sid), 0);
	close_both(&cl, &srv[0]);
	quic_endpoint_free(e, 0);
}

/* Datagrams both ways (the server echoes), and the limits: larger than
 * the peer takes is refused, and a server offering none takes none. */
static void test_datagrams(void **state)
{
	(void)state;
	reset_sides();
	srv_template.echo_dgrams = true;
	struct quic_server_opts so = server_opts();
	so.max_datagram = 200;
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side cl = { 0 };
	struct quic_conn *c = client_start(&co, &cl);
	assert_true(run_until(&cl.ready, 1, 10));
	assert_true(run_until(&srv[0].ready, 1, 10));

	size_t max = quic_datagram_max(c);
	assert_true(max > 100 && max <= 200);
	assert_true(quic_datagram_max(srv[0].c) > 1000);  /* the client offers 65535 */
	uint8_t big[2000];
	memset(big, 'd', sizeof big);
	assert_int_equal(quic_datagram_send(c, big, max + 1), -1);
	assert_int_equal(quic_datagram_send(c, big, sizeof big), -1);
	/* datagrams may be lost, even here: send until one comes back */
	for (int i = 0; i < 20 && cl.dgrams == 0; i++) {
		assert_int_equal(quic_datagram_send(c, (const uint8_t *)"ping", 4), 0);
		run_until(&cl.dgrams, 1, 0.5);
	}
	assert_true(srv[0].dgrams >= 1);
	assert_true(cl.dgrams >= 1);
	assert_int_equal(cl.dglen, 4);
	assert_memory_equal(cl.dg, "ping", 4);
	/* the largest allowed goes through too */
	int before = srv[0].dgrams;
	for (int i = 0; i < 20 && srv[0].dgrams == before; i++) {
		assert_int_equal(quic_datagram_send(c, big, max), 0);
		run_until(&srv[0].dgrams, before + 1, 0.5);
	}
	assert_int_equal(srv[0].dglen, max);
	close_both(&cl, &srv[0]);
	quic_endpoint_free(e, 0);

	/* a server that takes no datagrams */
	reset_sides();
	so.max_datagram = 0;
	e = server_start(&so);
	co = client_opts(quic_endpoint_port(e));
	struct side cl2 = { 0 };
	c = client_start(&co, &cl2);
	assert_true(run_until(&cl2.ready, 1, 10));
	assert_int_equal(quic_datagram_max(c), 0);
	assert_int_equal(quic_datagram_send(c, (const uint8_t *)"x", 1), -1);
	close_both(&cl2, NULL);
	quic_endpoint_free(e, 0);
}

/* The pin: a wrong one ends the handshake with a reason; no pin with the
 * certificate as the CA file connects. */
static void test_pin(void **state)
{
	(void)state;
	reset_sides();
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	uint8_t wrong[32];
	memcpy(wrong, pin, sizeof wrong);
	wrong[31] ^= 1;
	co.pin = wrong;
	struct side cl = { 0 };
	client_start(&co, &cl);
	assert_true(run_until(&cl.closed, 1, 10));
	assert_int_equal(cl.ready, 0);
	assert_non_null(strstr(cl.why, "pin"));
	/* the server saw the handshake fail (if it got as far as a connection) */
	for (int i = 0; i < nsrv; i++) {
		assert_true(run_until(&srv[i].closed, 1, 10));
		assert_int_equal(srv[i].ready, 0);
	}

	co.pin = NULL;
	co.ca_file = cert_path;
	struct side cl2 = { 0 };
	client_start(&co, &cl2);
	assert_true(run_until(&cl2.ready, 1, 10));
	close_both(&cl2, NULL);

	/* a CA file that does not sign it */
	co.ca_file = other_path;
	struct side cl3 = { 0 };
	client_start(&co, &cl3);
	assert_true(run_until(&cl3.closed, 1, 10));
	assert_int_equal(cl3.ready, 0);
	assert_non_null(strstr(cl3.why, "certificate"));
	quic_endpoint_free(e, 0);
}

/* quic_stream_abort reaches the peer as stream_reset with the code. */
static void test_abort(void **state)
{
	(void)state;
	reset_sides();
	srv_template.abort_on_data = true;
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side cl = { 0 };
	struct quic_conn *c = client_start(&co, &cl);
	assert_true(run_until(&cl.ready, 1, 10));
	int64_t sid;
	assert_int_equal(quic_stream_open(c, true, &sid), 0);
	assert_int_equal(quic_stream_write(c, sid, (const uint8_t *)"abc", 3, false), 0);
	assert_true(run_until(&cl.resets, 1, 10));
	assert_int_equal(cl.reset_code, 7);
	assert_true(cl.reset_was_reset);
	assert_true(run_until(&srv[0].stream_closes, 1, 10));
	/* the connection lives on */
	int64_t sid2;
	assert_int_equal(quic_stream_open(c, true, &sid2), 0);
	assert_true(sid2 != sid);
	close_both(&cl, &srv[0]);
	quic_endpoint_free(e, 0);
}

/* The peer stops reading: our writes on the stream fail from then on
 * (ngtcp2 0.12 tells no STOP_SENDING; it answers with RESET_STREAM). */
static void test_stop_reading(void **state)
{
	(void)state;
	reset_sides();
	srv_template.stop_on_data = true;
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side cl = { 0 };
	struct quic_conn *c = client_start(&co, &cl);
	assert_true(run_until(&cl.ready, 1, 10));
	int64_t sid;
	assert_int_equal(quic_stream_open(c, true, &sid), 0);
	uint8_t chunk[1000];
	memset(chunk, 's', sizeof chunk);
	int refused = 0;
	double end = ev_time() + 10;
	while (!refused && ev_time() < end) {
		if (quic_stream_write(c, sid, chunk, sizeof chunk, false) != 0)
			refused = 1;
		run_for(0.02);
	}
	assert_true(refused);
	assert_true(srv[0].rxlen > 0);
	/* the connection lives on */
	int64_t sid2;
	assert_int_equal(quic_stream_open(c, true, &sid2), 0);
	assert_int_equal(quic_stream_write(c, sid2, chunk, 10, true), 0);
	close_both(&cl, &srv[0]);
	quic_endpoint_free(e, 0);
}

/* The server closes: the client's closed() tells its code and reason. */
static void test_close(void **state)
{
	(void)state;
	reset_sides();
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side cl = { 0 };
	client_start(&co, &cl);
	assert_true(run_until(&srv[0].ready, 1, 10));
	quic_conn_close(srv[0].c, 42, "all done");
	assert_true(run_until(&cl.closed, 1, 10));
	assert_non_null(strstr(cl.why, "all done"));
	assert_non_null(strstr(cl.why, "0x2a"));
	assert_true(run_until(&srv[0].closed, 1, 10));
	assert_string_equal(srv[0].why, "closed: all done");
	quic_endpoint_free(e, 0);
}

/* Nothing said for longer than the idle timeout: both ends close. */
static void test_idle(void **state)
{
	(void)state;
	reset_sides();
	struct quic_server_opts so = server_opts();
	so.idle_timeout = 0.6;
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	co.idle_timeout = 0.6;
	struct side cl = { 0 };
	client_start(&co, &cl);
	assert_true(run_until(&cl.ready, 1, 10));
	assert_true(run_until(&cl.closed, 1, 20));
	assert_true(run_until(&srv[0].closed, 1, 20));
	assert_string_equal(cl.why, "idle timeout");
	assert_string_equal(srv[0].why, "idle timeout");
	quic_endpoint_free(e, 0);
}

/* max_conns: the connection beyond it is refused, the others go on. */
static void test_max_conns(void **state)
{
	(void)state;
	reset_sides();
	struct quic_server_opts so = server_opts();
	so.max_conns = 1;
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side a = { 0 }, b = { 0 };
	client_start(&co, &a);
	assert_true(run_until(&a.ready, 1, 10));
	client_start(&co, &b);
	assert_true(run_until(&b.closed, 1, 10));
	assert_int_equal(b.ready, 0);
	assert_non_null(strstr(b.why, "too many connections"));
	assert_int_equal(nsrv, 1);
	assert_int_equal(a.closed, 0);
	close_both(&a, &srv[0]);
	quic_endpoint_free(e, 0);
}

/* Freeing a server with open connections closes them all: the server's
 * closed() runs for each at once, the clients hear it. */
static void test_endpoint_free(void **state)
{
	(void)state;
	reset_sides();
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side a = { 0 }, b = { 0 };
	struct quic_conn *ca = client_start(&co, &a);
	client_start(&co, &b);
	assert_true(run_until(&a.ready, 1, 10));
	assert_true(run_until(&b.ready, 1, 10));
	assert_true(run_until(&nsrv, 2, 10));
	assert_true(run_until(&srv[1].ready, 1, 10));
	/* some stream bytes in flight too */
	int64_t sid;
	assert_int_equal(quic_stream_open(ca, true, &sid), 0);
	assert_int_equal(quic_stream_write(ca, sid, (const uint8_t *)"data", 4, false), 0);
	run_for(0.1);
	quic_endpoint_free(e, 99);
	assert_int_equal(srv[0].closed, 1);
	assert_int_equal(srv[1].closed, 1);
	assert_true(run_until(&a.closed, 1, 10));
	assert_true(run_until(&b.closed, 1, 10));
	assert_non_null(strstr(a.why, "0x63"));
	side_release(&a);
}

/* A server's closed() that frees its own endpoint: the other connection
 * is closed too, and nothing is touched after (ASan). */
static void test_free_from_closed(void **state)
{
	(void)state;
	reset_sides();
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	struct quic_client_opts co = client_opts(quic_endpoint_port(e));
	struct side a = { 0 }, b = { 0 };
	struct quic_conn *ca = client_start(&co, &a);
	client_start(&co, &b);
	assert_true(run_until(&a.ready, 1, 10));
	assert_true(run_until(&b.ready, 1, 10));
	assert_true(run_until(&nsrv, 2, 10));
	free_on_close = e;
	quic_conn_close(ca, 0, "first goes");
	assert_true(run_until(&a.closed, 1, 10));
	assert_true(run_until(&b.closed, 1, 10));
	assert_null(free_on_close);
	assert_int_equal(srv[0].closed + srv[1].closed, 2);
	assert_non_null(strstr(b.why, "0x5"));
}

/* A client to a port where nothing listens ends at once, with a reason. */
static void test_refused(void **state)
{
	(void)state;
	reset_sides();
	/* a port that was free a moment ago */
	struct quic_server_opts so = server_opts();
	struct quic_endpoint *e = server_start(&so);
	int port = quic_endpoint_port(e);
	quic_endpoint_free(e, 0);
	struct quic_client_opts co = client_opts(port);
	struct side cl = { 0 };
	client_start(&co, &cl);
	assert_true(run_until(&cl.closed, 1, 10));
	assert_int_equal(cl.ready, 0);
	assert_non_null(strstr(cl.why, "refused"));

	/* the accept function refuses: the client hears it, nothing is kept */
	refuse_all = true;
	e = server_start(&so);
	co = client_opts(quic_endpoint_port(e));
	struct side cl2 = { 0 };
	client_start(&co, &cl2);
	assert_true(run_until(&cl2.closed, 1, 10));
	refuse_all = false;
	assert_int_equal(cl2.ready, 0);
	assert_non_null(strstr(cl2.why, "refused"));
	assert_int_equal(nsrv, 0);
	quic_endpoint_free(e, 0);
}

/* Makes the certificate and key, and the pin of the certificate. */
static int setup(void **state)
{
	if (tmpd_setup(state) != 0)
		return -1;
	tmpd_path(cert_path, sizeof cert_path, "cert.pem");
	tmpd_path(key_path, sizeof key_path, "key.pem");
	tmpd_path(other_path, sizeof other_path, "other.pem");
	char pin_path[256], other_key[256], cmd[2048];
	tmpd_path(other_key, sizeof other_key, "other-key.pem");
	tmpd_path(pin_path, sizeof pin_path, "pin");
	snprintf(cmd, sizeof cmd,
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 10 "
		 "-nodes -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 "
		 "-keyout %s -out %s 2>/dev/null && "
		 "openssl x509 -in %s -outform der | openssl dgst -sha256 -binary > %s && "
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 10 "
		 "-nodes -subj /CN=other -keyout %s -out %s 2>/dev/null",
		 key_path, cert_path, cert_path, pin_path, other_key, other_path);
	if (system(cmd) != 0)
		return -1;
	FILE *f = fopen(pin_path, "rb");
	if (!f)
		return -1;
	size_t n = fread(pin, 1, sizeof pin, f);
	fclose(f);
	return n == sizeof pin ? 0 : -1;
}

static int teardown(void **state)
{
	reset_sides();
	return tmpd_teardown(state);
}

/* The manual interop server: accepts, logs, 20 s. */
static int serve(const char *cert, const char *key)
{
	log_set_level(LOG_DEBUG);
	snprintf(cert_path, sizeof cert_path, "%s", cert);
	snprintf(key_path, sizeof key_path, "%s", key);
	struct quic_server_opts so = server_opts();
	char why[256];
	struct quic_endpoint *e = quic_server_new("127.0.0.1", 4433, &so, on_accept, NULL, why,
						  sizeof why);
	if (!e) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	run_for(20);
	quic_endpoint_free(e, 0);
	reset_sides();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "serve") == 0)
		return serve(argv[2], argv[3]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo),
		cmocka_unit_test(test_bulk),
		cmocka_unit_test(test_datagrams),
		cmocka_unit_test(test_pin),
		cmocka_unit_test(test_abort),
		cmocka_unit_test(test_stop_reading),
		cmocka_unit_test(test_close),
		cmocka_unit_test(test_idle),
		cmocka_unit_test(test_max_conns),
		cmocka_unit_test(test_endpoint_free),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_free_from_closed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
