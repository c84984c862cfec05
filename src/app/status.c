/*
 * status.c - what mcp-chain says about itself: the status resource
 * (mcp-chain://status), /readyz and /metrics.
 */
#include "app.h"

#include <stdio.h>

#include "chain.h"
#include "mcpc_version.h"
#include "peer.h"
#include "redis.h"
#include "trace.h"

/* Describes the N backends V for the status resource. */
json_t *app_describe(struct backend *const *v, size_t n)
{
	json_t *out = json_object();
	double now = ev_now(EV_DEFAULT);
	for (size_t i = 0; i < n; i++) {
		struct backend *b = v[i];
		const struct backend_stats *st = backend_stats(b);
		struct peer *p = backend_peer(b);
		json_t *d = json_pack("{s:s,s:s,s:I,s:I,s:I}", "state",
			backend_state_name(backend_state(b)), "command", backend_cfg(b)->command,
			"restarts", (json_int_t)st->restarts, "requests", (json_int_t)st->requests,
			"errors", (json_int_t)p->answered[1]);   /* msg_outcome 1: a JSON-RPC error */
		json_object_set_new(d, "protocol", json_string(backend_protocol(b)));
		if (st->started_at)
			json_object_set_new(d, "uptimeSeconds", json_real(now - st->started_at));
		if (p->why_down[0] && backend_state(b) != BACKEND_READY)
			json_object_set_new(d, "reason", json_string(p->why_down));
		json_object_set_new(out, p->name, d);
	}
	return json_pack("{s:s,s:o}", "version", MCPC_VERSION, "backends", out);
}


/* Describes every backend of the process-wide chain. */
json_t *app_describe_backends(void *arg)
{
	struct app *a = arg;
	return app_describe(a->backends, a->nbackends);
}

/* /readyz: true when every backend is ready or gone. */
bool app_all_ready(void *arg)
{
	struct app *a = arg;
	for (size_t i = 0; i < a->nbackends; i++)
		if (backend_state(a->backends[i]) != BACKEND_READY &&
		    backend_state(a->backends[i]) != BACKEND_GONE)
			return false;
	return true;
}

/* Appends V as a Prometheus label value (backslash, quote, newline escaped). */
static void prom_label(struct buf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			buf_printf(b, "\\n");
		else
			buf_append(b, v, 1);
	}
}

/* One line NAME{backend="B"} VALUE. */
static void prom_backend(struct buf *b, const char *name, const char *backend,
			 const char *extra, unsigned long long v)
{
	buf_printf(b, "%s{backend=\"", name);
	prom_label(b, backend);
	buf_printf(b, "\"%s} %llu\n", extra ? extra : "", v);
}

/* /metrics beyond the front's own: the chain's counters and each backend's
 * state and counters (all kept where they happen: chain.c, backend.c). */
void app_write_metrics(struct buf *b, void *arg)
{
	struct app *a = arg;
	const struct chain_stats *st = chain_stats(a->chain);
	buf_printf(b, "# HELP mcp_chain_requests_total JSON-RPC requests started, by who sent them.\n"
		   "# TYPE mcp_chain_requests_total counter\n"
		   "mcp_chain_requests_total{from=\"client\"} %llu\n"
		   "mcp_chain_requests_total{from=\"backend\"} %llu\n"
		   "# HELP mcp_chain_responses_total Responses from the responder, by outcome.\n"
		   "# TYPE mcp_chain_responses_total counter\n"
		   "mcp_chain_responses_total{outcome=\"ok\"} %llu\n"
		   "mcp_chain_responses_total{outcome=\"error\"} %llu\n"
		   "mcp_chain_responses_total{outcome=\"tool_error\"} %llu\n"
		   "# HELP mcp_chain_errors_total Requests mcp-chain itself answered with an error, by kind.\n"
		   "# TYPE mcp_chain_errors_total counter\n"
		   "mcp_chain_errors_total{kind=\"over_limit\"} %llu\n"
		   "mcp_chain_errors_total{kind=\"responder_gone\"} %llu\n"
		   "# HELP mcp_chain_cancelled_total Requests cancelled by their requester.\n"
		   "# TYPE mcp_chain_cancelled_total counter\n"
		   "mcp_chain_cancelled_total %llu\n"
		   "# HELP mcp_chain_requests_open Exchanges open now.\n"
		   "# TYPE mcp_chain_requests_open gauge\n"
		   "mcp_chain_requests_open %zu\n",
		   st->requests[0], st->requests[1], st->responses[0], st->responses[1],
		   st->responses[2], st->refused_over_limit, st->responder_gone, st->cancelled,
		   chain_open_exchanges(a->chain));
	struct trace_stats ts;
	trace_stats(a->tracer, &ts);
	buf_printf(b, "# HELP mcp_chain_trace_spans_exported_total Spans a collector took.\n"
		   "# TYPE mcp_chain_trace_spans_exported_total counter\n"
		   "mcp_chain_trace_spans_exported_total %llu\n"
		   "# HELP mcp_chain_trace_spans_dropped_total Spans dropped: the export queue was full.\n"
		   "# TYPE mcp_chain_trace_spans_dropped_total counter\n"
		   "mcp_chain_trace_spans_dropped_total %llu\n"
		   "# HELP mcp_chain_trace_exports_failed_total Span exports that failed.\n"
		   "# TYPE mcp_chain_trace_exports_failed_total counter\n"
		   "mcp_chain_trace_exports_failed_total %llu\n",
		   ts.exported, ts.dropped, ts.failed);
	buf_printf(b, "# HELP mcp_chain_backend_up 1 when the backend is ready.\n"
		   "# TYPE mcp_chain_backend_up gauge\n");
	for (size_t i = 0; i < a->nbackends; i++)
		prom_backend(b, "mcp_chain_backend_up", backend_peer(a->backends[i])->name, NULL,
			     backend_state(a->backends[i]) == BACKEND_READY);
	buf_printf(b, "# HELP mcp_chain_backend_state The backend's state (the one labelled is 1).\n"
		   "# TYPE mcp_chain_backend_state gauge\n");
	for (size_t i = 0; i < a->nbackends; i++) {
		char extra[64];
		snprintf(extra, sizeof extra, ",state=\"%s\"",
			 backend_state_name(backend_state(a->backends[i])));
		prom_backend(b, "mcp_chain_backend_state", backend_peer(a->backends[i])->name, extra, 1);
	}
	static const char *const outcomes[] = { "ok", "error", "tool_error" };
	buf_printf(b, "# HELP mcp_chain_backend_responses_total Responses the backend sent, by outcome.\n"
		   "# TYPE mcp_chain_backend_responses_total counter\n");
	for (size_t i = 0; i < a->nbackends; i++) {
		const struct peer *p = backend_peer(a->backends[i]);
		for (size_t k = 0; k < 3; k++) {
			char extra[64];
			snprintf(extra, sizeof extra, ",outcome=\"%s\"", outcomes[k]);
			prom_backend(b, "mcp_chain_backend_responses_total", p->name, extra, p->answered[k]);
		}
	}
	static const char *const counters[][2] = {
		{ "mcp_chain_backend_restarts_total", "Restarts of the backend." },
		{ "mcp_chain_backend_requests_total", "Requests sent to the backend." },
	};
	for (size_t k = 0; k < 2; k++) {
		buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", counters[k][0], counters[k][1],
			   counters[k][0]);
		for (size_t i = 0; i < a->nbackends; i++) {
			const struct backend_stats *bs = backend_stats(a->backends[i]);
			unsigned long long v = k == 0 ? bs->restarts : bs->requests;
			prom_backend(b, counters[k][0], backend_peer(a->backends[i])->name, NULL, v);
		}
	}
	if (a->redis)
		redis_metrics(a->redis, b);
}

