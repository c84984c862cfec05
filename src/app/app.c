/*
 * app.c - the running mcp-chain: made from a configuration, served by one
 * front, stopped in order.
 *
 * Shutdown: at the end of input the front stops reading and requests
 * still open are given up to the grace period to finish; then (or at once
 * on a broken stdout) the session is closed, each backend's stdin is
 * closed, and after the grace period its process group gets SIGTERM, then
 * SIGKILL. The loop ends once every child is reaped and stdout is
 * flushed.
 *
 * SIGINT or SIGTERM is passed on at once to every backend's process group,
 * as the server would get it run directly, and the stop begins (SIGKILL
 * follows after the grace period). A second one kills the groups and
 * exits (status 128 + the signal): clients such as Claude Code send
 * SIGINT, SIGTERM and SIGKILL half a second apart. A watchdog process
 * (proc.h) kills the groups if we die without stopping them.
 *
 * A single backend that ends on its own with status 0 ends mcp-chain as
 * the server's end of output would end a client's session: pending
 * requests get an error, stdout is closed, exit status 0.
 */
#include "app.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "aggregate.h"
#include "chain.h"
#include "curl_ev.h"
#include "front.h"
#include "flow_front.h"
#include "http_front.h"
#include "middleware.h"
#include "mw_log.h"
#include "peer.h"
#include "proc.h"
#include "redis.h"
#include "session.h"
#include "writer.h"

bool app_shared_entry(const struct app *a, const struct cfg_server *s)
{
	return s->enabled && (!a->listening || s->scope == CFG_SCOPE_SHARED);
}

/* Number of client requests still open. */
static size_t open_client_requests(struct app *a)
{
	if (a->http || a->flow)
		return (a->http && http_front_busy(a->http)) || flow_front_busy(a->flow);
	return a->front && session_busy(stdio_front_session(a->front));
}

/*
 * Enters phase P (APP_DRAINING or APP_STOPPING), where on_step moves the
 * shutdown on before each sleep. The watcher runs only from then: while
 * running, a prepare watcher would cost every loop iteration a callback
 * for nothing.
 */
static void enter_phase(struct app *a, enum app_phase p)
{
	a->phase = p;
	if (!ev_is_active(&a->step))
		ev_prepare_start(EV_DEFAULT, &a->step);
}

/*
 * --listen: the first SIGTERM/SIGINT drains (no new connection; open
 * requests get up to the grace period, their backends untouched), then
 * the stop as at the end of input.
 */
static void begin_drain_http(struct app *a, const char *why)
{
	double delay = a->cfg->listen.drain_delay;
	if (delay > 0 && !ev_is_active(&a->drain_wait) && !a->drain_why) {
		/* /readyz says 503 at once; everything is served meanwhile */
		a->drain_why = why;
		if (a->http)
			http_front_unready(a->http);
		log_info("shutting down: %s: draining in %.1f s (listen.drainDelayMs), for the "
			 "load balancer to send new sessions elsewhere", why, delay);
		ev_timer_set(&a->drain_wait, delay, 0.);
		ev_timer_start(EV_DEFAULT, &a->drain_wait);
		return;
	}
	log_info("shutting down: %s: finishing open requests", why);
	if (a->http)
		http_front_drain(a->http);
	flow_front_drain(a->flow);
	enter_phase(a, APP_DRAINING);
	ev_timer_set(&a->deadline, a->cfg->grace, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* listen.drainDelayMs passed: the drain itself. */
static void on_drain_wait(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct app *a = w->data;
	(void)loop;
	(void)revents;
	if (a->phase == APP_RUNNING && (a->http || a->flow))
		begin_drain_http(a, a->drain_why);
}

/* Closes the session and starts stopping the backends; logs WHY at LEVEL. */
void app_begin_stop(struct app *a, const char *why, enum log_level level)
{
	if (a->phase == APP_STOPPING)
		return;
	log_msg(level, "shutting down: %s", why);
	enter_phase(a, APP_STOPPING);
	if (a->front) {
		stdio_front_stop_reading(a->front);
		session_close(stdio_front_session(a->front), "mcp-chain is shutting down");
	}
	if (a->http)
		http_front_stop(a->http, "mcp-chain is shutting down");
	flow_front_stop(a->flow, "mcp-chain is shutting down");
	/* every session chain the front did not give back (the one 2026-07-28
	 * calls share, one whose session is still being made): stopping now */
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		app_release_session_chain(a, sc->chain, sc->serial);
	for (size_t i = 0; i < a->nbackends; i++)
		backend_stop(a->backends[i], a->cfg->grace);
	ev_timer_stop(EV_DEFAULT, &a->deadline);
	ev_timer_set(&a->deadline, 3 * a->cfg->grace + 1.0, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* Begins the stop for an event of its own (logged at info). */
static void begin_stop(struct app *a, const char *why)
{
	app_begin_stop(a, why, LOG_INFO);
}

/* True while a backend has anything running, sessions' own included. */
bool app_any_running(const struct app *a)
{
	for (size_t i = 0; i < a->nbackends; i++)
		if (backend_running(a->backends[i]))
			return true;
	for (size_t i = 0; i < a->nretired; i++)
		if (backend_running(a->retired[i]))
			return true;
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		for (size_t i = 0; i < sc->nbackends; i++)
			if (backend_running(sc->backends[i]))
				return true;
	return false;
}

/* Frees ended sessions' chains from before the loop sleeps (on_step), until
 * none is left: never from inside their backends' callbacks. */
void app_schedule_sweep(struct app *a)
{
	if (!ev_is_active(&a->step))
		ev_prepare_start(EV_DEFAULT, &a->step);
}

/*
 * Before the loop sleeps, after the iteration's callbacks: advance the
 * shutdown when it can, and free ended sessions' chains. (An ev_check would run before those callbacks, so
 * the answer to the last open request would leave the loop asleep until
 * the grace period's deadline.)
 */
static void on_step(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct app *a = w->data;
	(void)revents;
	if (a->phase == APP_DRAINING && open_client_requests(a) == 0)  /* the front logged it */
		app_begin_stop(a, "end of input and no request open", LOG_DEBUG);
	app_sweep_session_chains(a, false);
	if (a->phase == APP_RUNNING && !app_sweep_pending(a))
		ev_prepare_stop(loop, w);   /* running: only while ended sessions are freed */
	if (a->phase == APP_STOPPING && !app_any_running(a)) {
		writer_flush_all();
		if (!a->front || stdio_front_queued(a->front) == 0)
			ev_break(loop, EVBREAK_ALL);
	}
}

/* A deadline passed: move on whatever is still open. */
static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct app *a = w->data;
	(void)revents;
	if (a->phase == APP_DRAINING) {
		begin_stop(a, "grace period over with requests still open");
		return;
	}
	log_warn("shutdown took too long; exiting");
	ev_break(loop, EVBREAK_ALL);
}

/* The client went away (end of input, or stdout broke). */
static void on_front_closed(struct stdio_front *f, const char *reason, void *arg)
{
	struct app *a = arg;
	(void)f;
	if (strcmp(reason, "end of input") != 0 || a->phase != APP_RUNNING) {
		begin_stop(a, reason);
		return;
	}
	enter_phase(a, APP_DRAINING);
	ev_timer_set(&a->deadline, a->cfg->grace, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* Passes SIG on to every backend's process group. */
void app_signal_backends(struct app *a, int sig)
{
	for (size_t i = 0; i < a->nbackends; i++)
		backend_signal(a->backends[i], sig);
	for (size_t i = 0; i < a->nretired; i++)
		backend_signal(a->retired[i], sig);
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		for (size_t i = 0; i < sc->nbackends; i++)
			backend_signal(sc->backends[i], sig);
}

/* SIGTERM / SIGINT: pass it on and stop; a second one: kill and exit. */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct app *a = w->data;
	const char *name = w->signum == SIGTERM ? "SIGTERM" : "SIGINT";
	(void)revents;
	if (w->signum == SIGHUP) {
		mw_log_reopen_all();  /* logrotate */
		app_reload(a);
		return;
	}
	if (a->signals++ == 0 && (a->http || a->flow) && a->phase == APP_RUNNING) {
		begin_drain_http(a, name);
		return;
	}
	if (a->signals == 1) {
		app_signal_backends(a, w->signum);
		begin_stop(a, name);
		return;
	}
	log_warn("a second signal (%s): killing the backends and exiting", name);
	app_signal_backends(a, SIGKILL);
	a->forced = w->signum;
	ev_break(loop, EVBREAK_ALL);
}

void app_backend_event(struct aggregate *agg, struct backend *b, enum backend_event ev)
{
	if (ev == BACKEND_EV_READY)
		aggregate_backend_ready(agg, backend_peer(b));
	else if (ev == BACKEND_EV_DOWN || ev == BACKEND_EV_FAILED || ev == BACKEND_EV_ENDED)
		aggregate_backend_down(agg, backend_peer(b));
}

/* A backend of the process-wide chain changed state: keep the router's
 * view current; with one backend, its clean end ends mcp-chain. */
static void on_backend_event(struct backend *b, enum backend_event ev, void *arg)
{
	struct app *a = arg;
	app_backend_event(a->agg, b, ev);
	app_sessions_shared_event(a, b, ev);
	/* the process-wide chain serves the clients unless sessions have
	 * chains of their own (which reach this backend linked in) */
	bool own_chains = a->listening && cfg_has_session_scope(a->cfg);
	if (ev == BACKEND_EV_ENDED && aggregate_transparent(a->agg) && !own_chains)
		app_begin_stop(a, "the backend ended on its own", LOG_DEBUG);  /* the backend logged it */
}

/* Sets up signal watchers that keep the loop alive only with other work. */
static void watch_signals(struct app *a)
{
	signal(SIGPIPE, SIG_IGN);
	ev_signal_init(&a->sigterm, on_signal, SIGTERM);
	ev_signal_init(&a->sigint, on_signal, SIGINT);
	ev_signal_init(&a->sighup, on_signal, SIGHUP);
	a->sigterm.data = a->sigint.data = a->sighup.data = a;
	ev_signal_start(EV_DEFAULT, &a->sigterm);
	ev_signal_start(EV_DEFAULT, &a->sigint);
	ev_signal_start(EV_DEFAULT, &a->sighup);
}

/* Creates a backend for entry S of C and registers it (not started). */
struct backend *app_add_backend(struct app *a, struct cfg *c, struct cfg_server *s)
{
	struct backend **v = realloc(a->backends, (a->nbackends + 1) * sizeof *v);
	if (!v)
		return NULL;
	a->backends = v;
	struct backend *b = backend_new(a->chain, c, s, on_backend_event, a);
	if (!b)
		return NULL;
	a->backends[a->nbackends++] = b;
	backend_peer(b)->pl = s->pipeline;
	backend_peer(b)->timeout = s->timeout;
	aggregate_add_backend(a->agg, backend_peer(b), s);
	return b;
}

int app_chain_new(const struct cfg *cfg, struct chain **c, struct aggregate **agg,
		  json_t *(*status_fn)(void *arg), void *arg)
{
	if (!(*c = chain_new()) || !(*agg = aggregate_new(*c, cfg)))
		return -1;
	chain_set_pipeline(*c, cfg->pipeline);
	chain_set_max_open(*c, cfg->max_open);
	chain_set_router(*c, aggregate_router(*agg));
	aggregate_set_status(*agg, status_fn, arg);
	return 0;
}

/* --listen: the HTTP front on SPEC ("-": the "listen" section as it is). */
static int start_http(struct app *a, const char *spec)
{
	if (strcmp(spec, "-") != 0 && cfg_listen_parse(&a->cfg->listen, spec) < 0) {
		log_error("--listen %s: expected ADDR:PORT, [V6]:PORT or PORT (numeric addresses)", spec);
		return -1;
	}
	a->http = http_front_new(a->chain, &a->cfg->listen, a->cfg->max_message);
	if (!a->http)
		return -1;
	http_front_set_ready(a->http, app_all_ready, a);
	http_front_set_session_chains(a->http, app_session_chain, app_release_session_chain, a);
	http_front_set_input_ttl(a->http, a->cfg->input_ttl);
	if (a->cfg->cluster.set)
		http_front_set_cluster(a->http, (const unsigned char (*)[32])a->cfg->cluster.keys,
				       a->cfg->cluster.nkeys, a->cfg->cluster.instance,
				       a->cfg->cluster.session_max_age,
				       a->cfg->cluster.sessions_closed);
	if (a->cfg->cluster.set) {
		http_front_set_peers(a->http, a->cfg->cluster.peer_tags, a->cfg->cluster.peer_urls,
				     a->cfg->cluster.rs_closed);
	}
	http_front_offer_stateless(a->http, a->cfg->offer_stateless);
	http_front_set_metrics(a->http, app_write_metrics, a);
	if (app_ui_start(a) < 0)
		return -1;
	return app_login_start(a);
}

/* Makes the shared store the configuration's "redis" describes; 0 or -1. */
static int app_store_new(struct app *a)
{
	const struct cfg_redis *c = &a->cfg->redis;
	struct redis_opts o = {
		.host = c->host, .port = c->port, .password = c->password, .db = c->db,
		.prefix = c->prefix, .timeout = c->timeout, .connect_timeout = c->connect_timeout,
	};
	a->redis = redis_new(&o);
	if (!a->redis)
		return log_fail("redis: out of memory");
	redis_set_default(a->redis);
	return 0;
}

struct app *app_new(struct cfg *cfg, const char *level_flag, bool listening)
{
	struct app *a = calloc(1, sizeof *a);
	if (!a) {
		cfg_free(cfg);
		return NULL;
	}
	a->cfg = cfg;
	a->first = cfg;
	a->level_flag = level_flag;
	a->listening = listening;
	watch_signals(a);
	ev_prepare_init(&a->step, on_step);   /* started by enter_phase */
	a->step.data = a;
	ev_init(&a->deadline, on_deadline);
	a->deadline.data = a;
	ev_init(&a->drain_wait, on_drain_wait);
	a->drain_wait.data = a;
	if (!listening && cfg_has_per_principal(cfg)) {
		log_error("%s: an upstream has \"oauth\": {\"perPrincipal\": true}: it needs --listen "
			  "(each HTTP session's principal signs in for itself)", cfg->path);
		goto fail;
	}
	if (cfg->redis.set && app_store_new(a) < 0)
		goto fail;
	app_telemetry_start(a);
	if (pipeline_start(cfg->pipeline) < 0 ||
	    app_chain_new(cfg, &a->chain, &a->agg, app_describe_backends, a) < 0)
		goto fail;
	for (size_t i = 0; i < cfg->nservers; i++) {
		struct cfg_server *s = &cfg->servers[i];
		if (!s->enabled)
			continue;
		if (pipeline_start(s->pipeline) < 0)
			goto fail;
		if (app_shared_entry(a, s) && !app_add_backend(a, cfg, s))
			goto fail;
	}
	return a;
fail:
	app_free(a);
	return NULL;
}

/* --flow: the MCP-Flow front on SPEC ("-": the "flow" section as it is). */
static int start_flow(struct app *a, const char *spec)
{
	struct cfg_flow *fc = &a->cfg->flow;
	if (strcmp(spec, "-") != 0 && cfg_flow_parse(fc, spec) < 0) {
		log_error("--flow %s: expected ADDR:PORT, [V6]:PORT or PORT (numeric addresses)", spec);
		return -1;
	}
	a->flow = flow_front_new(a->chain, fc, a->cfg->max_message);
	if (!a->flow)
		return -1;
	flow_front_set_session_chains(a->flow, app_session_chain, app_release_session_chain, a);
	flow_front_set_input_ttl(a->flow, a->cfg->input_ttl);
	flow_front_offer_stateless(a->flow, a->cfg->offer_stateless);
	return 0;
}

int app_open_front(struct app *a, const char *listen, const char *flow)
{
	if (flow && start_flow(a, flow) < 0)
		return -1;
	if (listen)
		return start_http(a, listen);
	if (flow)
		return 0;
	a->front = stdio_front_new(a->chain, a->cfg->max_message, on_front_closed, a);
	if (!a->front)
		return -1;
	stdio_front_set_stall(a->front, a->cfg->client_stall);
	session_set_input_ttl(stdio_front_session(a->front), a->cfg->input_ttl);
	session_offer_stateless(stdio_front_session(a->front), a->cfg->offer_stateless);
	return app_single_start(a);
}

int app_run(struct app *a)
{
	for (size_t i = 0; i < a->nbackends; i++)  /* all start at once */
		backend_start(a->backends[i]);
	ev_run(EV_DEFAULT, 0);
	if (!a->forced)
		app_telemetry_stop(a);
	return a->forced ? 128 + a->forced : 0;
}

void app_free(struct app *a)
{
	struct ev_loop *loop = EV_DEFAULT;
	if (!a)
		return;
	ev_prepare_stop(loop, &a->step);
	ev_timer_stop(loop, &a->deadline);
	ev_timer_stop(loop, &a->drain_wait);
	ev_signal_stop(loop, &a->sigterm);
	ev_signal_stop(loop, &a->sigint);
	ev_signal_stop(loop, &a->sighup);
	stdio_front_free(a->front);
	app_login_free(a);
	app_single_free(a);
	app_ui_stop(a);
	http_front_free(a->http);   /* releases the sessions' own chains */
	flow_front_free(a->flow);
	app_sweep_session_chains(a, true);
	for (size_t i = 0; i < a->nbackends; i++)  /* before the aggregate: its */
		backend_free(a->backends[i]);      /* list requests end here */
	for (size_t i = 0; i < a->nretired; i++)
		backend_free(a->retired[i]);
	free(a->retired);
	if (a->chain)
		chain_set_router(a->chain, NULL);
	aggregate_free(a->agg);
	free(a->backends);
	chain_free(a->chain);
	for (size_t i = 0; i < a->nold; i++)
		cfg_free(a->old[i]);
	free(a->old);
	cfg_free(a->cfg);
	redis_free(a->redis);   /* after its users, the modules */
	app_telemetry_free(a);
	free(a);
}
