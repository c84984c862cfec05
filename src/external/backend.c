/*
 * backend.c - what every backend transport shares: the chain peer, the
 * handshake (initialize, or server/discover with a 2026-07-28 server, the
 * era chosen by "protocol"), the start-up bound and supervision (restart
 * with exponential backoff, crash-loop detection). A backend that speaks
 * the stateless era has every message pass be_era.c on its way.
 */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "be_era.h"
#include "chain.h"
#include "era.h"
#include "log.h"
#include "observe.h"
#include "rpc.h"

struct init_waiter {
	void (*cb)(void *arg, json_t *response);
	void *arg;
	const char *asked;   /* the revision it asked for (static), or NULL */
	struct init_waiter *next;
};

struct backend {
	struct peer peer;
	const struct cfg *top;
	const struct cfg_server *cfg;
	enum backend_state state;
	const struct be_transport_ops *ops;
	void *t;                  /* transport state */
	json_t *init_params;      /* owned: what the backend is initialized with */
	json_t *init_result;      /* owned: its answer (translated from
				   * server/discover's in the stateless era) */
	enum era era;             /* what it speaks, or is being probed with */
	bool tried_init;          /* this handshake sent initialize already */
	bool legacy_known;        /* a stdio server refused server/discover, or
				   * exited while asked it: never again */
	struct be_era *x;         /* owned: the stateless era's translation */
	struct init_waiter *waiters;
	ev_timer init_timer;
	ev_timer restart_timer;
	double delay;             /* next restart delay */
	double window_start;      /* first failure of the current window */
	unsigned window_fails;
	struct backend_stats stats;
	backend_event_fn on_event;
	void *arg;
	unsigned char principal[32];   /* whose credentials, when HAS_PRINCIPAL */
	bool has_principal;
};

static const char *const state_names[] = {
	"stopped", "started", "initializing", "ready", "restarting", "failed",
	"stopping", "gone", "ended",
};

/* What a down means for supervision. */
enum down_kind {
	DOWN_CRASH,        /* unexpected: restart with backoff, or give up */
	DOWN_START_FAILED, /* the start failed; counts as a quick failure */
	DOWN_PERMANENT,    /* cannot ever start as configured: give up now */
	DOWN_CLEAN,        /* ended on its own with status 0: not restarted */
	DOWN_IDLE,         /* stopped on purpose while nothing ran */
};

static void went_down(struct backend *b, const char *reason, enum down_kind kind);

static void handshake(struct backend *b);

/* Name of a state, for logs and the status report. */
const char *backend_state_name(enum backend_state s)
{
	return state_names[s];
}

/* Tells the observers that B is WHAT ("up", "down", "restarting",
 * "stopped", "failed"), saying DETAIL (may be NULL). */
static void note(struct backend *b, const char *what, const char *detail)
{
	struct obs_event e = {
		.kind = OBS_BACKEND, .what = what, .source = b->peer.name,
		.backend = b->peer.name, .detail = detail,
	};
	observe_note(&e);
}

/* Moves to state S, logging the change; up, stopped and given up are
 * told to the observers (down and restarting where their reason is). */
static void set_state(struct backend *b, enum backend_state s)
{
	if (b->state == s)
		return;
	log_debug("%s: %s -> %s", b->peer.name, state_names[b->state], state_names[s]);
	b->state = s;
	b->peer.ready = s == BACKEND_READY;
	if (s == BACKEND_READY)
		note(b, "up", backend_protocol(b));
	else if (s == BACKEND_GONE)
		note(b, "stopped", b->peer.why_down[0] ? b->peer.why_down : NULL);
	else if (s == BACKEND_FAILED)
		note(b, "failed", b->peer.why_down);
}

/* Tells the owner. */
static void emit(struct backend *b, enum backend_event ev)
{
	if (b->on_event)
		b->on_event(b, ev, b->arg);
}

/* The peer's send operation. */
static int peer_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct backend *b = (struct backend *)p;
	if (b->state != BACKEND_STARTED && b->state != BACKEND_INITIALIZING &&
	    b->state != BACKEND_READY)
		return -1;
	if (o->kind == PEER_OUT_REQUEST)
		b->stats.requests++;
	if (b->era == ERA_STATELESS)
		return be_era_send(b->x, msg);
	return b->ops->send(b, msg);
}

/* The peer's raw send operation (a message still as its bytes). */
static int peer_send_raw(struct peer *p, const struct iovec *iov, int n,
			 const struct peer_out *o)
{
	struct backend *b = (struct backend *)p;
	if (b->state != BACKEND_READY)
		return -1;
	if (o->kind == PEER_OUT_REQUEST)
		b->stats.requests++;
	return b->ops->send_raw(b, iov, n);
}

/* The handshake revision PARAMS (borrowed) ask for (static), or NULL. */
static const char *asked_in(json_t *params)
{
	return era_handshake_version(json_string_value(json_object_get(params, "protocolVersion")));
}

/*
 * The handshake's answer RESP (borrowed) as a client that asked for ASKED
 * gets it (a new reference). One that asked what the handshake asked (its
 * own request, or the same) gets it as it came; another is told the
 * revision it asked for, where the backend speaks it (era_result_for): a
 * shared backend's later sessions are not held to the first one's.
 */
static json_t *answer_for(const struct backend *b, json_t *resp, const char *asked)
{
	json_t *result = json_object_get(resp, "result");
	if (!result || !asked || asked == asked_in(b->init_params))
		return json_incref(resp);
	json_t *r = json_copy(resp);
	if (r)
		json_object_set_new(r, "result", era_result_for(result, asked));
	return r ? r : json_incref(resp);
}

/* Calls every waiter with the handshake's outcome. */
static void wake_waiters(struct backend *b, json_t *resp)
{
	struct init_waiter *w = b->waiters;
	b->waiters = NULL;
	while (w) {
		struct init_waiter *next = w->next;
		json_t *r = answer_for(b, resp, w->asked);
		w->cb(w->arg, r);
		json_decref(r);
		free(w);
		w = next;
	}
}

static const struct peer_ops backend_ops, backend_raw_ops;
static void send_initialize(struct backend *b);
static void send_discover(struct backend *b);

/* Speaks ERA from now on: a stateless backend takes trees only. */
static void set_era(struct backend *b, enum era era)
{
	b->era = era;
	b->peer.ops = era != ERA_STATELESS && b->ops->send_raw ? &backend_raw_ops : &backend_ops;
}

/* The handshake failed with MSG (an error, or no result): waiters learn it. */
static void handshake_failed(struct backend *b, json_t *msg, const char *what)
{
	if (b->state == BACKEND_INITIALIZING) {
		set_state(b, BACKEND_STARTED);
		json_t *e = json_object_get(msg, "error");
		snprintf(b->peer.why_down, sizeof b->peer.why_down, "%s failed: %s", what,
			 json_string_value(json_object_get(e, "message")) ?: "no result");
		log_warn("%s: %s", b->peer.name, b->peer.why_down);
	}
	wake_waiters(b, msg);
}

/* The handshake is done with RESULT (stolen) as the initialize result. */
static void handshake_done(struct backend *b, json_t *result, json_t *resp)
{
	json_decref(b->init_result);
	b->init_result = result;
	b->peer.init_result = b->init_result;
	b->peer.told_initialized = false;   /* a new run: its own initialized */
	b->peer.eras = b->era == ERA_STATELESS ? ERA_BIT_STATELESS : ERA_BIT_HANDSHAKE;
	set_state(b, BACKEND_READY);
	const char *v = json_string_value(json_object_get(result, "protocolVersion"));
	json_t *si = json_object_get(result, "serverInfo");
	log_info("%s: ready: %s %s, protocol %s", b->peer.name,
		 json_string_value(json_object_get(si, "name")) ?: "?",
		 json_string_value(json_object_get(si, "version")) ?: "?",
		 b->era == ERA_STATELESS ? ERA_STATELESS_VERSION " (stateless era: its "
		 "clients see the handshake era)" : v ? v : "?");
	wake_waiters(b, resp);
	emit(b, BACKEND_EV_READY);
}

/* The backend answered server/discover: ready, or fall back to initialize. */
static void on_discover_response(struct exchange *ex, json_t *msg, void *arg)
{
	struct backend *b = arg;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	if (result && (b->state == BACKEND_INITIALIZING || b->state == BACKEND_STARTED)) {
		ev_timer_stop(EV_DEFAULT, &b->init_timer);
		json_t *r = be_era_init_result(result, b->init_params, b->peer.name);
		json_t *resp = rpc_result(json_null(), json_incref(r));
		handshake_done(b, r, resp);
		json_decref(resp);
		if (b->state == BACKEND_READY)
			be_era_ready(b->x, json_object_get(result, "capabilities"));
		return;
	}
	if (b->state == BACKEND_INITIALIZING && b->cfg->protocol == CFG_PROTO_AUTO &&
	    !b->tried_init) {
		b->legacy_known = true;
		json_t *e = json_object_get(msg, "error");
		log_info("%s: no server/discover (%s): speaking the handshake era", b->peer.name,
			 json_string_value(json_object_get(e, "message")) ?: "no result");
		send_initialize(b);
		return;
	}
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	handshake_failed(b, msg, "server/discover");
}

/* The backend answered our initialize. */
static void on_init_response(struct exchange *ex, json_t *msg, void *arg)
{
	struct backend *b = arg;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	if (!result && b->state == BACKEND_INITIALIZING && b->cfg->protocol == CFG_PROTO_AUTO &&
	    b->era != ERA_STATELESS && be_era_refuses_initialize(msg)) {
		json_t *e = json_object_get(msg, "error");
		log_info("%s: refuses initialize (%s): a 2026-07-28 server; asking server/discover",
			 b->peer.name, json_string_value(json_object_get(e, "message")) ?: "?");
		send_discover(b);
		return;
	}
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	/* a late answer (after the timeout) still makes the backend usable */
	if (result && (b->state == BACKEND_INITIALIZING || b->state == BACKEND_STARTED)) {
		handshake_done(b, json_incref(result), msg);
		return;
	}
	handshake_failed(b, msg, "initialize");
}

/* The backend did not answer initialize in time: fail the waiting clients. */
static void on_init_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct backend *b = w->data;
	(void)loop;
	(void)revents;
	if (b->state != BACKEND_INITIALIZING)
		return;
	set_state(b, BACKEND_STARTED);
	snprintf(b->peer.why_down, sizeof b->peer.why_down,
		 "did not answer %s within %g s",
		 b->era == ERA_STATELESS ? "server/discover" : "initialize", b->top->init_timeout);
	log_error("%s: %s", b->peer.name, b->peer.why_down);
	json_t *err = rpc_errorf(json_null(), RPC_BACKEND_GONE, "backend %s %s",
				 b->peer.name, b->peer.why_down);
	wake_waiters(b, err);
	json_decref(err);
}

/* A handshake request could not be sent. */
static void handshake_unsent(struct backend *b)
{
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	set_state(b, BACKEND_STARTED);
	json_t *err = rpc_errorf(json_null(), RPC_INTERNAL_ERROR, "out of memory");
	wake_waiters(b, err);
	json_decref(err);
}

/* Sends initialize with the stored parameters. */
static void send_initialize(struct backend *b)
{
	set_era(b, ERA_HANDSHAKE);
	b->tried_init = true;
	json_t *params = json_deep_copy(b->init_params);
	if (params && !asked_in(params))   /* a 2026-07-28 client's: our newest revision */
		json_object_set_new(params, "protocolVersion", json_string(era_handshake_versions[0]));
	if (chain_call(&b->peer, "initialize", params, on_init_response, b) < 0)
		handshake_unsent(b);
}

/* Sends server/discover (the era's _meta is added on the way, be_era.c). */
static void send_discover(struct backend *b)
{
	set_era(b, ERA_STATELESS);
	if (chain_call(&b->peer, "server/discover", json_object(), on_discover_response, b) < 0)
		handshake_unsent(b);
}

/*
 * The handshake, in the era "protocol" says. With "auto", a stdio server
 * gets what the client that starts it began with: initialize after the
 * client's initialize (some legacy servers exit on an unknown first
 * request, and a client of the handshake era would never have sent them
 * one), server/discover after a 2026-07-28 client's probe (what that
 * client sends such a server directly). A 2026-only server refuses
 * initialize (-32022), and then server/discover follows; a legacy one
 * refuses server/discover (-32601), and then initialize follows. An HTTP
 * server is probed with server/discover first.
 */
static void handshake(struct backend *b)
{
	const struct cfg_server *c = b->cfg;
	set_state(b, BACKEND_INITIALIZING);
	ev_timer_set(&b->init_timer, b->top->init_timeout, 0.);
	ev_timer_start(EV_DEFAULT, &b->init_timer);
	b->tried_init = false;
	if (c->protocol == CFG_PROTO_STATELESS ||
	    (c->protocol == CFG_PROTO_AUTO &&
	     (c->transport == CFG_HTTP || (!asked_in(b->init_params) && !b->legacy_known))))
		send_discover(b);
	else
		send_initialize(b);
}

/* The peer's initialize operation. */
static int peer_initialize(struct peer *p, json_t *params,
			   void (*cb)(void *arg, json_t *response), void *arg)
{
	struct backend *b = (struct backend *)p;
	if (b->state == BACKEND_READY && b->init_result) {
		json_t *resp = rpc_result(json_null(), json_incref(b->init_result));
		json_t *r = answer_for(b, resp, asked_in(params));
		cb(arg, r);
		json_decref(r);
		json_decref(resp);
		return 0;
	}
	if (b->state != BACKEND_STARTED && b->state != BACKEND_INITIALIZING)
		return -1;
	struct init_waiter *w = calloc(1, sizeof *w);
	if (!w)
		return -1;
	w->cb = cb;
	w->arg = arg;
	w->asked = asked_in(params);
	w->next = b->waiters;
	b->waiters = w;
	if (b->state == BACKEND_INITIALIZING)
		return 0;
	json_decref(b->init_params);
	b->init_params = json_deep_copy(params);
	handshake(b);
	return 0;
}

/* Drops the waiters registered with ARG. */
static void peer_forget_initialize(struct peer *p, void *arg)
{
	struct backend *b = (struct backend *)p;
	for (struct init_waiter **pp = &b->waiters; *pp;) {
		struct init_waiter *w = *pp;
		if (w->arg == arg) {
			*pp = w->next;
			free(w);
		} else {
			pp = &w->next;
		}
	}
}

/* The peer's pause operation: flow control. */
static void peer_pause(struct peer *p, bool paused)
{
	struct backend *b = (struct backend *)p;
	if (b->ops->pause)
		b->ops->pause(b, paused);
}

static const struct peer_ops backend_ops = {
	.send = peer_send,
	.initialize = peer_initialize,
	.forget_initialize = peer_forget_initialize,
	.pause = peer_pause,
};

static const struct peer_ops backend_raw_ops = {
	.send = peer_send,
	.initialize = peer_initialize,
	.forget_initialize = peer_forget_initialize,
	.pause = peer_pause,
	.send_raw = peer_send_raw,
};

static void on_restart_timer(struct ev_loop *loop, ev_timer *w, int revents);

/* The transports to pick from (backend_use_transports). */
static const struct be_transport_def *transports;

void backend_use_transports(const struct be_transport_def *defs)
{
	transports = defs;
}

/* The transport for entries of type T, or NULL. */
static const struct be_transport_ops *transport_for(enum cfg_transport t)
{
	for (const struct be_transport_def *d = transports; d && d->ops; d++)
		if (d->transport == t)
			return d->ops;
	return NULL;
}

/* New backend. */
struct backend *backend_new(struct chain *chain, const struct cfg *top,
			    const struct cfg_server *cfg, backend_event_fn on_event, void *arg)
{
	const struct be_transport_ops *ops = transport_for(cfg->transport);
	if (!ops) {
		log_error("%s: no transport serves this type of entry", cfg->name);
		return NULL;
	}
	struct backend *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->top = top;
	b->cfg = cfg;
	b->ops = ops;
	b->on_event = on_event;
	b->arg = arg;
	b->delay = cfg->restart_delay;
	b->era = ERA_UNKNOWN;
	b->x = be_era_new(b);
	if (!b->x) {
		free(b);
		return NULL;
	}
	peer_init(&b->peer, b->ops->send_raw ? &backend_raw_ops : &backend_ops,
		  PEER_BACKEND, cfg->name);
	ev_init(&b->init_timer, on_init_timeout);
	b->init_timer.data = b;
	ev_init(&b->restart_timer, on_restart_timer);
	b->restart_timer.data = b;
	chain_add_peer(chain, &b->peer);
	return b;
}

/* Starts the transport (and re-initializes after a restart). */
int backend_start(struct backend *b)
{
	b->peer.why_down[0] = '\0';
	int rc = b->ops->start(b);
	if (rc < 0) {
		went_down(b, b->peer.why_down[0] ? b->peer.why_down : "cannot start",
			  rc == BE_START_PERMANENT ? DOWN_PERMANENT : DOWN_START_FAILED);
		return -1;
	}
	b->stats.started_at = ev_now(EV_DEFAULT);
	set_state(b, BACKEND_STARTED);
	if (b->init_params)
		handshake(b);
	return 0;
}

/* Restart time. */
static void on_restart_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct backend *b = w->data;
	(void)loop;
	(void)revents;
	if (b->state != BACKEND_RESTARTING)
		return;
	b->stats.restarts++;
	log_debug("%s: restarting (restart %u)", b->peer.name, b->stats.restarts);
	backend_start(b);
}

/* Down for good: one line says why and what follows. */
static void give_up(struct backend *b, const char *what)
{
	set_state(b, BACKEND_FAILED);
	log_error("%s: %s; %s", b->peer.name, b->peer.why_down, what);
	emit(b, BACKEND_EV_FAILED);
}

/*
 * Decides between a restart (with backoff) and giving up, and says so in
 * one line. A start that failed never opens a new window: otherwise a
 * backoff longer than the window would retry a broken start for ever.
 */
static void supervise(struct backend *b, const char *reason, double uptime, bool start_failed)
{
	double now = ev_now(EV_DEFAULT);
	const struct cfg_server *c = b->cfg;
	if (uptime > c->restart_window)
		b->delay = c->restart_delay;  /* it ran well for a while */
	if (now - b->window_start > c->restart_window && !(start_failed && b->window_fails > 0)) {
		b->window_start = now;
		b->window_fails = 0;
	}
	b->window_fails++;
	if (!c->restart) {
		give_up(b, "not restarted (\"restart\": false)");
		return;
	}
	if (b->window_fails > c->restart_limit) {
		/* the reason is cut if need be: "(last: ..." stays readable */
		snprintf(b->peer.why_down, sizeof b->peer.why_down,
			 "crash loop: down %u times within %g s (last: %.120s)",
			 b->window_fails, c->restart_window, reason);
		give_up(b, "given up: its requests are answered with an error");
		return;
	}
	set_state(b, BACKEND_RESTARTING);
	log_warn("%s: %s; restarting in %g s", b->peer.name, reason, b->delay);
	char in[48];
	snprintf(in, sizeof in, "in %g s", b->delay);
	note(b, "restarting", in);
	ev_timer_set(&b->restart_timer, b->delay, 0.);
	ev_timer_start(EV_DEFAULT, &b->restart_timer);
	b->delay = b->delay * 2 > c->restart_max_delay ? c->restart_max_delay : b->delay * 2;
}

/* The transport is down: fail what waits on it, then supervise by KIND. */
static void went_down(struct backend *b, const char *reason, enum down_kind kind)
{
	bool expected = b->state == BACKEND_STOPPING || b->state == BACKEND_GONE;
	if (b->state == BACKEND_INITIALIZING && b->era == ERA_STATELESS && !b->tried_init &&
	    b->cfg->protocol == CFG_PROTO_AUTO && b->cfg->transport == CFG_STDIO)
		b->legacy_known = true;   /* it died of the probe: initialize next time */
	char why[sizeof b->peer.why_down];
	double uptime = b->stats.started_at ? ev_now(EV_DEFAULT) - b->stats.started_at : 0;
	snprintf(why, sizeof why, "%s", reason);  /* REASON may be why_down itself */
	reason = why;
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	if (kind != DOWN_IDLE)  /* stopping what had already ended keeps its reason */
		snprintf(b->peer.why_down, sizeof b->peer.why_down, "%s", why);
	b->stats.started_at = 0;
	b->peer.ready = false;
	be_era_reset(b->x);
	json_t *err = rpc_errorf(json_null(), RPC_BACKEND_GONE, "backend %s: %s",
				 b->peer.name, reason);
	wake_waiters(b, err);
	json_decref(err);
	chain_peer_gone(&b->peer, reason);
	if (!expected)
		note(b, "down", reason);
	if (expected) {
		if (kind == DOWN_IDLE)
			log_debug("%s: stopped (%s)", b->peer.name, reason);
		else
			log_info("%s: stopped (%s)", b->peer.name, reason);
		set_state(b, BACKEND_GONE);
		emit(b, BACKEND_EV_GONE);
		return;
	}
	if (kind == DOWN_CLEAN) {
		log_info("%s: ended on its own (%s); not restarted", b->peer.name, reason);
		set_state(b, BACKEND_ENDED);
		emit(b, BACKEND_EV_ENDED);
		return;
	}
	emit(b, BACKEND_EV_DOWN);
	if (kind == DOWN_PERMANENT)
		give_up(b, "not restarted: correct the configuration and reload (SIGHUP)");
	else
		supervise(b, reason, uptime, kind == DOWN_START_FAILED);
}

/* The transport is down. */
void backend_down(struct backend *b, const char *reason)
{
	went_down(b, reason, DOWN_CRASH);
}

/* The transport ended on its own, cleanly. */
void backend_ended(struct backend *b, const char *reason)
{
	went_down(b, reason, DOWN_CLEAN);
}

/* Hands a received message to the chain. */
void backend_deliver(struct backend *b, json_t *msg, size_t bytes)
{
	if (b->era == ERA_STATELESS && !(msg = be_era_receive(b->x, msg)))
		return;
	b->peer.rx_bytes = bytes;
	chain_receive(&b->peer, msg);
}

/* Hands a received line to the chain; false when it is not JSON. */
bool backend_deliver_line(struct backend *b, const char *line, size_t len)
{
	if (b->era == ERA_STATELESS) {
		/* every message of this era is read (be_era.c) */
		json_t *msg = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
		if (!json_is_object(msg)) {
			json_decref(msg);
			return false;  /* not JSON, or a batch: the transport sees to it */
		}
		backend_deliver(b, msg, len);
		return true;
	}
	json_t *err = NULL;
	bool ok = chain_receive_line(&b->peer, line, len, &err);
	json_decref(err);
	return ok;
}

/* Stops on purpose. */
void backend_stop(struct backend *b, double grace)
{
	ev_timer_stop(EV_DEFAULT, &b->restart_timer);
	if (b->state == BACKEND_GONE || b->state == BACKEND_STOPPING)
		return;
	bool running = b->ops->running(b);
	set_state(b, BACKEND_STOPPING);
	if (running)
		b->ops->stop(b, grace);
	else
		went_down(b, "stopped", DOWN_IDLE);
}

/* Passes a signal on. */
void backend_signal(struct backend *b, int sig)
{
	if (b->ops->signal)
		b->ops->signal(b, sig);
}

/* True while the transport has anything running. */
bool backend_running(const struct backend *b)
{
	return b->ops->running((struct backend *)b);
}

/* Accessors. */
enum backend_state backend_state(const struct backend *b) { return b->state; }
struct peer *backend_peer(struct backend *b) { return &b->peer; }
const struct cfg_server *backend_cfg(const struct backend *b) { return b->cfg; }
const struct cfg *backend_top(const struct backend *b) { return b->top; }
json_t *backend_init_result(const struct backend *b) { return b->init_result; }
const struct backend_stats *backend_stats(const struct backend *b) { return &b->stats; }
void *backend_transport(struct backend *b) { return b->t; }
void backend_set_transport(struct backend *b, void *t) { b->t = t; }
json_t *backend_init_params(const struct backend *b) { return b->init_params; }
enum era backend_era(const struct backend *b) { return b->era; }

/* The protocol the backend speaks, for the status report. */
const char *backend_protocol(const struct backend *b)
{
	if (b->era == ERA_STATELESS && b->state == BACKEND_READY)
		return ERA_STATELESS_VERSION;
	const char *v = json_string_value(json_object_get(b->init_result, "protocolVersion"));
	return b->era == ERA_HANDSHAKE && v ? v : "unknown";
}

/* Sends MSG (borrowed) through the transport as it is. */
int backend_send_transport(struct backend *b, json_t *msg)
{
	return b->ops->send(b, msg);
}

/* Points a kept backend at its entry in a new configuration. */
void backend_set_cfg(struct backend *b, const struct cfg *top, const struct cfg_server *cfg)
{
	b->top = top;
	b->cfg = cfg;
	b->peer.name = cfg->name;
}

/* Copies the client parameters another backend was initialized with. */
void backend_adopt_init_params(struct backend *b, const struct backend *from)
{
	if (!from->init_params || b->init_params)
		return;
	b->init_params = json_deep_copy(from->init_params);
}

/* Frees a backend. */
void backend_set_principal(struct backend *b, const unsigned char subject[32])
{
	memcpy(b->principal, subject, 32);
	b->has_principal = true;
}

const unsigned char *backend_principal(const struct backend *b)
{
	return b->has_principal ? b->principal : NULL;
}

void backend_credentials_changed(struct backend *b)
{
	if (b->ops->credentials_changed)
		b->ops->credentials_changed(b);
}

void backend_free(struct backend *b)
{
	if (!b)
		return;
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	ev_timer_stop(EV_DEFAULT, &b->restart_timer);
	if (b->state != BACKEND_GONE) {
		b->state = BACKEND_GONE;
		chain_peer_gone(&b->peer, "shutting down");
	}
	if (b->ops->destroy)
		b->ops->destroy(b);
	json_t *err = rpc_errorf(json_null(), RPC_BACKEND_GONE, "shutting down");
	wake_waiters(b, err);
	json_decref(err);
	json_decref(b->init_params);
	json_decref(b->init_result);
	be_era_free(b->x);
	chain_remove_peer(&b->peer);
	peer_release(&b->peer);
	explicit_bzero(b->principal, sizeof b->principal);
	free(b);
}
