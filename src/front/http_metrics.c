/*
 * http_metrics.c - the HTTP front's /metrics: the requests it answered,
 * counted by method and outcome with their durations as they end, and the
 * Prometheus text of those, of its sessions and connections, and of the
 * rest of mcp-chain (http_front_set_metrics).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "hmap.h"
#include "http_conn.h"
#include "http_int.h"
#include "http_stats.h"
#include "msg.h"
#include "rpc.h"

/* ---- counting ---- */

/* The monotonic clock, in seconds (request durations). */
double http_metrics_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The place of request ID among R's requests, or -1. */
static int req_slot(const struct hreq *r, const struct msg_val *id)
{
	unsigned char k[RPC_KEY_MAX], k2[RPC_KEY_MAX];
	size_t n = id->n ? msg_val_key(id, k) : 0;
	for (size_t i = 0; n && i < r->nids; i++)
		if (msg_val_key(&r->ids[i], k2) == n && memcmp(k, k2, n) == 0)
			return (int)i;
	return -1;
}

/* Counts the answer to R's request ID (OUTCOME: msg_outcome's) by method,
 * and how long it took since its POST. */
void http_metrics_count_answer(struct hreq *r, const struct msg_val *id, int outcome)
{
	int i = req_slot(r, id);
	unsigned m = i >= 0 && r->methods ? r->methods[i] : HTTP_STATS_NMETHODS - 1;
	static const enum req_outcome outcomes[] = { REQ_OK, REQ_ERROR, REQ_TOOL_ERROR };
	double took = http_metrics_now() - r->t0;
	struct http_front *f = r->f;
	f->outcomes[m][outcomes[outcome >= 0 && outcome <= 2 ? outcome : 1]]++;
	f->latency[m][http_stats_latency_bucket(took)]++;
	f->latency_sum[m] += took;
}

/* ---- /metrics ---- */

void http_front_set_metrics(struct http_front *f, void (*fn)(struct buf *out, void *arg),
			    void *arg)
{
	f->metrics = fn;
	f->metrics_arg = arg;
}

/* Counts the sessions of each transport (a hmap_each callback). */
static void count_legacy(void *value, void *arg)
{
	if (((struct hsess *)value)->legacy)
		(*(size_t *)arg)++;
}

/* True when requests with method M were counted. */
static bool method_seen(const struct http_front *f, unsigned m)
{
	for (unsigned o = 0; o < REQ_NOUTCOMES; o++)
		if (f->outcomes[m][o])
			return true;
	return false;
}

/* Requests by method and outcome, and the latency histogram (methods
 * never seen are left out; a seen one has every outcome and bucket). */
static void request_metrics(struct http_front *f, struct buf *b)
{
	static const char *const outcome[REQ_NOUTCOMES] = { "ok", "error", "tool_error", "given_up" };
	buf_printf(b, "# HELP mcp_chain_http_requests_total Streamable HTTP requests by method and "
		   "how they ended: ok, error (JSON-RPC), tool_error (isError), given_up (the client "
		   "left and did not resume, or the session ended first).\n"
		   "# TYPE mcp_chain_http_requests_total counter\n");
	for (unsigned m = 0; m < HTTP_STATS_NMETHODS; m++)
		for (unsigned o = 0; method_seen(f, m) && o < REQ_NOUTCOMES; o++)
			buf_printf(b, "mcp_chain_http_requests_total{method=\"%s\",outcome=\"%s\"} %llu\n",
				   http_stats_methods[m], outcome[o], f->outcomes[m][o]);
	buf_printf(b, "# HELP mcp_chain_http_request_duration_seconds Time from a request's POST "
		   "to its answer, by method.\n"
		   "# TYPE mcp_chain_http_request_duration_seconds histogram\n");
	for (unsigned m = 0; m < HTTP_STATS_NMETHODS; m++) {
		if (!method_seen(f, m))
			continue;
		unsigned long long n = 0;
		for (unsigned i = 0; i <= HTTP_STATS_NBUCKETS; i++) {
			n += f->latency[m][i];
			if (i < HTTP_STATS_NBUCKETS)
				buf_printf(b, "mcp_chain_http_request_duration_seconds_bucket{method=\"%s\","
					   "le=\"%g\"} %llu\n", http_stats_methods[m], http_stats_latency_bounds[i], n);
		}
		buf_printf(b, "mcp_chain_http_request_duration_seconds_bucket{method=\"%s\",le=\"+Inf\"} "
			   "%llu\nmcp_chain_http_request_duration_seconds_sum{method=\"%s\"} %.9g\n"
			   "mcp_chain_http_request_duration_seconds_count{method=\"%s\"} %llu\n",
			   http_stats_methods[m], n, http_stats_methods[m], f->latency_sum[m], http_stats_methods[m], n);
	}
}

/* The front's own lines: sessions, connections, responses by status, bytes. */
static void front_metrics(struct http_front *f, struct buf *b)
{
	size_t legacy = 0;
	hmap_each(&f->sessions, count_legacy, &legacy);
	buf_printf(b, "# HELP mcp_chain_http_sessions Client sessions open, by transport.\n"
		   "# TYPE mcp_chain_http_sessions gauge\n"
		   "mcp_chain_http_sessions{transport=\"streamable\"} %zu\n"
		   "mcp_chain_http_sessions{transport=\"sse\"} %zu\n"
		   "# HELP mcp_chain_http_sessions_started_total Client sessions started.\n"
		   "# TYPE mcp_chain_http_sessions_started_total counter\n"
		   "mcp_chain_http_sessions_started_total %u\n"
		   "# HELP mcp_chain_http_connections HTTP connections open.\n"
		   "# TYPE mcp_chain_http_connections gauge\n"
		   "mcp_chain_http_connections %u\n"
		   "# HELP mcp_chain_http_responses_total HTTP responses, by status.\n"
		   "# TYPE mcp_chain_http_responses_total counter\n",
		   f->sessions.count - legacy, legacy, f->serial, hc_server_conns(f->hs));
	for (unsigned s = 100; s < 600; s++)
		if (hc_server_responses(f->hs, s))
			buf_printf(b, "mcp_chain_http_responses_total{code=\"%u\"} %llu\n", s,
				   hc_server_responses(f->hs, s));
	buf_printf(b, "# HELP mcp_chain_http_received_bytes_total Request bodies received.\n"
		   "# TYPE mcp_chain_http_received_bytes_total counter\n"
		   "mcp_chain_http_received_bytes_total %llu\n"
		   "# HELP mcp_chain_http_sent_bytes_total Response bodies sent.\n"
		   "# TYPE mcp_chain_http_sent_bytes_total counter\n"
		   "mcp_chain_http_sent_bytes_total %llu\n", hc_server_bytes_in(f->hs),
		   hc_server_bytes_out(f->hs));
	request_metrics(f, b);
}

int http_metrics_serve(struct http_front *f, struct hc_conn *c)
{
	enum req_kind kind;
	const char *why = NULL;
	char awhy[300], chal[1024];
	unsigned status = hf_check_headers(f, c, "GET", &kind, &why);
	if (status)
		return http_stream_reply_error(NULL, c, status, -32000, why);
	status = http_auth_check(f, c, NULL, NULL, NULL, NULL, awhy, chal, sizeof chal);
	if (status)
		return http_auth_refuse(NULL, c, status, awhy, chal);
	struct buf b = BUF_INIT;
	front_metrics(f, &b);
	if (f->metrics)
		f->metrics(&b, f->metrics_arg);
	int rc = http_stream_reply(NULL, c, 200, "text/plain; version=0.0.4; charset=utf-8",
				   b.data ? b.data : "", buf_pending(&b), NULL);
	buf_release(&b);
	return rc;
}

/* ---- the live page's traffic ---- */

/* The requests counted so far, by method, as the live page reads them. */
json_t *http_front_traffic(const struct http_front *f)
{
	static const char *const outcome[REQ_NOUTCOMES] = { "ok", "error", "tool_error", "given_up" };
	json_t *out = json_object(), *bounds = json_array();
	for (unsigned i = 0; i < HTTP_STATS_NBUCKETS; i++)
		json_array_append_new(bounds, json_real(http_stats_latency_bounds[i]));
	json_object_set_new(out, "latency_bounds", bounds);
	for (unsigned m = 0; m < HTTP_STATS_NMETHODS; m++) {
		if (!method_seen(f, m))
			continue;
		json_t *d = json_object(), *buckets = json_array();
		for (unsigned o = 0; o < REQ_NOUTCOMES; o++)
			json_object_set_new(d, outcome[o], json_integer((json_int_t)f->outcomes[m][o]));
		for (unsigned i = 0; i <= HTTP_STATS_NBUCKETS; i++)
			json_array_append_new(buckets, json_integer((json_int_t)f->latency[m][i]));
		json_object_set_new(d, "seconds", json_real(f->latency_sum[m]));
		json_object_set_new(d, "buckets", buckets);
		json_object_set_new(out, http_stats_methods[m], d);
	}
	return out;
}
