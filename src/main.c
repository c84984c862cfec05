/*
 * main.c - mcp-chain: command line, start-up and orderly shutdown.
 *
 * Shutdown: at the end of input the front stops reading and requests
 * still open are given up to the grace period to finish; then (or at once
 * on a broken stdout) the session is closed, each backend's stdin is
 * closed, and after the grace period its process group gets SIGTERM, then
 * SIGKILL. The process exits 0 once every child is reaped and stdout is
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
#include <getopt.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>

#include <ev.h>

#include "aggregate.h"
#include "backend.h"
#include "buf.h"
#include "chain.h"
#include "cli.h"
#include "config.h"
#include "front.h"
#include "http_front.h"
#include "curl_ev.h"
#include "log.h"
#include "middleware.h"
#include "mw_log.h"
#include "mcpc_version.h"
#include "proc.h"
#include "session.h"
#include "writer.h"

enum phase { RUNNING, DRAINING, STOPPING };

struct app;

/*
 * A session's own chain (--listen with session-scoped servers): the
 * session's backends and an aggregate over them, made when the session is
 * created and released when it ends (http_front_set_session_chains). Its
 * backends start at once and are initialized by the session's initialize,
 * with that client's parameters; released, they are stopped as at
 * shutdown, and the whole is freed (sweep_session_chains) once every one
 * is down. It keeps its configuration and pipelines alive meanwhile, so a
 * reload leaves a running session as it was.
 */
struct schain {
	struct app *a;
	struct cfg *cfg;           /* borrowed: kept by struct app while used */
	struct chain *chain;       /* owned */
	struct aggregate *agg;     /* owned: the chain's router */
	struct backend **backends; /* owned */
	struct pipeline **pls;     /* a reference to each backend's pipeline */
	size_t nbackends;
	unsigned serial;           /* the session's number, for logs */
	bool released;             /* its session ended: stopping */
	bool stateless;            /* the one every 2026-07-28 call shares */
	struct schain *next;
};

struct app {
	struct cfg *cfg;
	struct cfg **old;          /* configurations replaced by a reload: kept
				    * while a backend (one being stopped, say)
				    * points into them */
	size_t nold;
	const char *level_flag;    /* --log-level or $MCP_CHAIN_LOG, if given */
	struct backend **backends; /* in service (the configuration's) */
	size_t nbackends;
	struct backend **retired;  /* replaced or removed by a reload: being
				    * stopped, freed at a later reload once down
				    * (not in the status view or /metrics) */
	size_t nretired;
	struct stdio_front *front;
	struct http_front *http;   /* --listen: the HTTP front instead of stdio */
	struct chain *chain;
	struct aggregate *agg;     /* the chain's router: one backend or several */
	bool listening;            /* --listen: scopes apply (cfg_server.scope) */
	struct schain *schains;    /* sessions' own chains, live and released */
	struct schain *stateless_sc; /* the chain 2026-07-28 calls share, once made */
	double tokens, tokens_at;  /* maxStartsPerSecond: a token bucket */
	enum phase phase;
	int signals;               /* SIGINT/SIGTERM received */
	int forced;                /* the signal that forced the exit, or 0 */
	ev_signal sigterm, sigint, sighup;
	ev_prepare step;           /* advances the shutdown before the loop sleeps */
	ev_timer deadline;
};

static const char usage[] =
	"usage: mcp-chain --config FILE [--listen ADDR:PORT] [--log-level LEVEL] [--log-file FILE]\n"
	"       mcp-chain check FILE\n"
	"       mcp-chain audit verify FILE\n"
	"       mcp-chain list|call|read|prompt [-c FILE] ...   (docs/cli.md)\n"
	"       mcp-chain --direct [-c FILE]\n"
	"       mcp-chain replay FILE | --config FILE --record OUT\n"
	"       mcp-chain --version | --help\n"
	"\n"
	"Runs an MCP server on stdio that forwards to the backend(s) in FILE\n"
	"(Claude's \"mcpServers\" format), through the configured middleware.\n"
	"\n"
	"  -c, --config FILE      configuration file (or $MCP_CHAIN_CONFIG)\n"
	"      --listen ADDR:PORT serve Streamable HTTP on ADDR:PORT (\"[::1]:PORT\",\n"
	"                         PORT, or \"-\" for the \"listen\" section) instead of\n"
	"                         stdio; port 0 takes a free port (logged)\n"
	"  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
	"                         (or $MCP_CHAIN_LOG; overrides \"logLevel\")\n"
	"      --log-file FILE    append logs to FILE instead of stderr\n"
	"  -V, --version          print the version\n"
	"  -h, --help             print this help\n"
	"\n"
	"check FILE validates a configuration and exits 0 (valid) or 1.\n"
	"audit verify FILE checks a \"chain\": true audit log; exits 0 (intact),\n"
	"1 (names the first broken line) or 2 (unreadable).\n"
	"\n"
	"From the shell (each starts the chain on FILE as its MCP client):\n"
	"  list [--json]                    backends, tools, prompts, resources\n"
	"  call NAME [ARGS] [--json]        call a tool; ARGS: {...} or key=value...\n"
	"  read URI                         read a resource\n"
	"  prompt NAME [ARGS]               get a prompt\n"
	"  --direct                         JSON-RPC on stdio: methods are tool names\n"
	"  --record OUT                     also write every message to OUT (redacted)\n"
	"  replay OUT                       serve a recording as an MCP server\n"
	"  (--timeout SECONDS, -v shows the chain's log; exit codes in docs/cli.md)\n";

/* True when entry S runs in the process-wide chain: always on stdio (one
 * session, so scope changes nothing); with --listen only when shared. */
static bool shared_entry(const struct app *a, const struct cfg_server *s)
{
	return s->enabled && (!a->listening || s->scope == CFG_SCOPE_SHARED);
}

/* Prints every configuration error. */
static void print_errors(struct cfg_errors *errs)
{
	for (size_t i = 0; i < errs->count; i++)
		fprintf(stderr, "%s\n", errs->lines[i]);
}

/* With several backends: names each one's tools will carry, and clashes. */
static void report_prefixes(const struct cfg *c)
{
	const struct cfg_server *on[64];
	size_t n = 0;
	for (size_t i = 0; i < c->nservers && n < 64; i++)
		if (c->servers[i].enabled)
			on[n++] = &c->servers[i];
	if (n < 2)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *pi = on[i]->prefix ? on[i]->prefix : on[i]->name;
		fprintf(stderr, "%s: server \"%s\": tools and prompts exposed as %s%sNAME\n",
			c->path, on[i]->name, pi, c->separator);
		for (size_t j = i + 1; j < n; j++) {
			const char *pj = on[j]->prefix ? on[j]->prefix : on[j]->name;
			if (strcmp(pi, pj) == 0)
				fprintf(stderr, "%s: warning: servers \"%s\" and \"%s\" share the prefix \"%s\": "
					"a name both have is exposed once plain (for \"%s\") and once with "
					"a hash suffix; set \"prefix\" to keep names readable\n",
					c->path, on[i]->name, on[j]->name, pi, on[i]->name);
		}
	}
}

/* "mcp-chain check FILE". */
static int cmd_check(const char *path)
{
	struct cfg_errors errs = { 0 };
	struct cfg *c = cfg_load(path, &errs);
	print_errors(&errs);
	cfg_errors_release(&errs);
	if (!c)
		return 1;
	for (size_t i = 0; i < c->nservers; i++) {
		struct cfg_server *s = &c->servers[i];
		fprintf(stderr, "%s: server \"%s\"%s: %s", path, s->name,
			s->enabled ? "" : " (disabled)", s->command);
		for (size_t j = 1; s->argv && s->argv[j]; j++)
			fprintf(stderr, " %s", s->argv[j]);
		fprintf(stderr, "\n");
	}
	report_prefixes(c);
	fprintf(stderr, "%s: ok\n", path);
	cfg_free(c);
	return 0;
}

/* Number of client requests still open. */
static size_t open_client_requests(struct app *a)
{
	if (a->http)
		return http_front_busy(a->http);
	return a->front && session_busy(stdio_front_session(a->front));
}

/*
 * Enters phase P (DRAINING or STOPPING), where on_step moves the shutdown
 * on before each sleep. The watcher runs only from then: while running,
 * a prepare watcher would cost every loop iteration a callback for nothing.
 */
static void enter_phase(struct app *a, enum phase p)
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
	log_info("shutting down: %s: finishing open requests", why);
	http_front_drain(a->http);
	enter_phase(a, DRAINING);
	ev_timer_set(&a->deadline, a->cfg->grace, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* Closes the session and starts stopping the backends; logs WHY at LEVEL. */
static void begin_stop_at(struct app *a, const char *why, enum log_level level)
{
	if (a->phase == STOPPING)
		return;
	log_msg(level, "shutting down: %s", why);
	enter_phase(a, STOPPING);
	if (a->front) {
		stdio_front_stop_reading(a->front);
		session_close(stdio_front_session(a->front), "mcp-chain is shutting down");
	}
	if (a->http)
		http_front_stop(a->http, "mcp-chain is shutting down");
	if (a->stateless_sc && !a->stateless_sc->released) {
		a->stateless_sc->released = true;
		for (size_t i = 0; i < a->stateless_sc->nbackends; i++)
			backend_stop(a->stateless_sc->backends[i], a->cfg->grace);
	}
	for (size_t i = 0; i < a->nbackends; i++)
		backend_stop(a->backends[i], a->cfg->grace);
	ev_timer_stop(EV_DEFAULT, &a->deadline);
	ev_timer_set(&a->deadline, 3 * a->cfg->grace + 1.0, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* Begins the stop for an event of its own (logged at info). */
static void begin_stop(struct app *a, const char *why)
{
	begin_stop_at(a, why, LOG_INFO);
}

/* True while a backend has anything running, sessions' own included. */
static bool any_running(struct app *a)
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

static void sweep_session_chains(struct app *a, bool all);

/*
 * Before the loop sleeps, after the iteration's callbacks: advance the
 * shutdown when it can. (An ev_check would run before those callbacks, so
 * the answer to the last open request would leave the loop asleep until
 * the grace period's deadline.)
 */
static void on_step(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct app *a = w->data;
	(void)revents;
	if (a->phase == DRAINING && open_client_requests(a) == 0)  /* the front logged it */
		begin_stop_at(a, "end of input and no request open", LOG_DEBUG);
	sweep_session_chains(a, false);
	if (a->phase == STOPPING && !any_running(a)) {
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
	if (a->phase == DRAINING) {
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
	if (strcmp(reason, "end of input") != 0 || a->phase != RUNNING) {
		begin_stop(a, reason);
		return;
	}
	enter_phase(a, DRAINING);
	ev_timer_set(&a->deadline, a->cfg->grace, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* True when two optional strings are equal. */
static bool same_str(const char *x, const char *y)
{
	return (!x && !y) || (x && y && strcmp(x, y) == 0);
}

/* True when two NULL-terminated string vectors are equal. */
static bool same_strv(char *const *x, char *const *y)
{
	size_t i = 0;
	for (; x && y && x[i] && y[i]; i++)
		if (strcmp(x[i], y[i]) != 0)
			return false;
	return (!x || !x[i]) && (!y || !y[i]);
}

/* True when an entry would start the same process or connection. */
static bool same_launch(const struct cfg_server *x, const struct cfg_server *y)
{
	return x->transport == y->transport && x->protocol == y->protocol &&
	       same_str(x->command, y->command) &&
	       same_str(x->url, y->url) && same_str(x->cwd, y->cwd) &&
	       same_strv(x->argv, y->argv) && same_strv(x->env, y->env) &&
	       same_strv(x->headers, y->headers);
}

/* The entry of the process-wide chain named NAME in C, or NULL. */
static struct cfg_server *entry_named(struct app *a, struct cfg *c, const char *name)
{
	for (size_t i = 0; i < c->nservers; i++)
		if (shared_entry(a, &c->servers[i]) && strcmp(c->servers[i].name, name) == 0)
			return &c->servers[i];
	return NULL;
}

/* Starts every pipeline of N; returns 0 or -1. */
static int start_pipelines(struct cfg *n)
{
	if (pipeline_start(n->pipeline) < 0)
		return -1;
	for (size_t i = 0; i < n->nservers; i++)
		if (n->servers[i].enabled && pipeline_start(n->servers[i].pipeline) < 0)
			return -1;
	return 0;
}

/* Loads the configuration again; returns it, or NULL (logged) to keep ours. */
static struct cfg *load_for_reload(struct app *a)
{
	struct cfg_errors errs = { 0 };
	struct cfg *n = cfg_load(a->cfg->path, &errs);
	for (size_t i = 0; i < errs.count; i++)
		log_error("reload: %s", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!n)
		return NULL;
	if (a->listening && cfg_check_scopes(n, &errs) < 0) {
		for (size_t i = 0; i < errs.count; i++)
			log_error("reload: %s", errs.lines[i]);
		cfg_errors_release(&errs);
		cfg_free(n);
		return NULL;
	}
	if (a->listening && cfg_has_session_scope(n) != cfg_has_session_scope(a->cfg)) {
		log_error("reload: going between session-scoped and shared backends changes where "
			  "every session's backends run; restart mcp-chain for that");
		cfg_free(n);
		return NULL;
	}
	size_t enabled = 0;
	for (size_t i = 0; i < n->nservers; i++)
		enabled += shared_entry(a, &n->servers[i]);
	if (enabled && (enabled > 1) != (aggregate_backends(a->agg) > 1)) {
		log_error("reload: going between one backend and several changes what the client "
			  "was told at initialize; restart mcp-chain for that");
		cfg_free(n);
		return NULL;
	}
	if (start_pipelines(n) < 0) {
		log_error("reload: a middleware module could not start");
		cfg_free(n);
		return NULL;
	}
	return n;
}

static struct backend *add_backend(struct app *a, struct cfg *c, struct cfg_server *s);

/* Keeps, replaces or stops each running backend for configuration N. */
/* Moves the backends a reload stopped (or that were gone already) out of
 * service, into a->retired. */
static void retire_stopped(struct app *a)
{
	size_t k = 0;
	for (size_t i = 0; i < a->nbackends; i++) {
		struct backend *b = a->backends[i];
		enum backend_state st = backend_state(b);
		if (st != BACKEND_GONE && st != BACKEND_STOPPING) {
			a->backends[k++] = b;
			continue;
		}
		struct backend **v = realloc(a->retired, (a->nretired + 1) * sizeof *v);
		if (!v) {
			a->backends[k++] = b;   /* stays listed (and freed at exit) */
			continue;
		}
		a->retired = v;
		a->retired[a->nretired++] = b;
	}
	a->nbackends = k;
}

/* Frees the retired backends that are down with nothing left running
 * (their exchanges ended when they went down); the rest wait. */
static void sweep_retired(struct app *a)
{
	size_t k = 0;
	for (size_t i = 0; i < a->nretired; i++) {
		struct backend *b = a->retired[i];
		if (backend_state(b) == BACKEND_GONE && !backend_running(b))
			backend_free(b);
		else
			a->retired[k++] = b;
	}
	a->nretired = k;
}

static void reconcile_backends(struct app *a, struct cfg *n)
{
	size_t before = a->nbackends;
	bool *kept = calloc(n->nservers + 1, sizeof *kept);
	struct backend *donor = NULL;
	for (size_t i = 0; i < before; i++) {
		struct backend *b = a->backends[i];
		if (backend_state(b) == BACKEND_GONE || backend_state(b) == BACKEND_STOPPING)
			continue;
		donor = donor ? donor : b;
		struct cfg_server *e = entry_named(a, n, backend_peer(b)->name);
		if (e && same_launch(backend_cfg(b), e)) {
			backend_set_cfg(b, n, e);
			backend_peer(b)->pl = e->pipeline;
			backend_peer(b)->timeout = e->timeout;
			aggregate_update_backend(a->agg, backend_peer(b), e);
			if (kept)
				kept[e - n->servers] = true;
			continue;
		}
		log_info("reload: %s %s", backend_peer(b)->name, e ? "changed: replacing it" : "removed");
		aggregate_remove_backend(a->agg, backend_peer(b));
		backend_peer(b)->pl = NULL;  /* exchanges in flight hold their own reference */
		backend_stop(b, n->grace);
	}
	retire_stopped(a);
	for (size_t i = 0; i < n->nservers; i++) {
		if (!shared_entry(a, &n->servers[i]) || (kept && kept[i]))
			continue;
		struct backend *b = add_backend(a, n, &n->servers[i]);
		if (!b)
			continue;
		if (donor)
			backend_adopt_init_params(b, donor);
		log_info("reload: starting %s", n->servers[i].name);
		backend_start(b);
	}
	free(kept);
}

/* Drops an old configuration's pipelines: their modules (an external
 * filter, open files) end once requests in flight let go of them. */
static void release_pipelines(struct cfg *c)
{
	pipeline_unref(c->pipeline);
	c->pipeline = NULL;
	for (size_t i = 0; i < c->nservers; i++) {
		pipeline_unref(c->servers[i].pipeline);
		c->servers[i].pipeline = NULL;
	}
}

/*
 * Frees the replaced configurations no backend points into any more; the
 * others wait for a later reload. (Kept for ever, each reload cost its
 * configuration: about 2.5 kB a SIGHUP for a one-backend file.)
 */
static void free_unused_configs(struct app *a)
{
	size_t k = 0;
	for (size_t i = 0; i < a->nold; i++) {
		bool used = false;
		for (size_t j = 0; j < a->nbackends && !used; j++)
			used = backend_top(a->backends[j]) == a->old[i];
		for (size_t j = 0; j < a->nretired && !used; j++)
			used = backend_top(a->retired[j]) == a->old[i];
		for (struct schain *sc = a->schains; sc && !used; sc = sc->next)
			used = sc->cfg == a->old[i];
		if (used)
			a->old[k++] = a->old[i];
		else
			cfg_free(a->old[i]);
	}
	a->nold = k;
}

/* SIGHUP: apply the configuration file again, or keep the running one. */
static void reload(struct app *a)
{
	if (a->phase != RUNNING)
		return;
	log_info("reload: reading %s", a->cfg->path);
	sweep_retired(a);
	struct cfg *n = load_for_reload(a);
	struct cfg **old = n ? realloc(a->old, (a->nold + 1) * sizeof *old) : NULL;
	if (!old) {
		if (n)
			cfg_free(n);
		log_error("reload: keeping the running configuration");
		return;
	}
	a->old = old;
	a->old[a->nold++] = a->cfg;
	chain_set_pipeline(a->chain, n->pipeline);  /* requests in flight keep the old one */
	chain_set_max_open(a->chain, n->max_open);
	if (a->front) {
		stdio_front_set_stall(a->front, n->client_stall);
		session_set_input_ttl(stdio_front_session(a->front), n->input_ttl);
	}
	aggregate_reconfigure(a->agg, n);
	reconcile_backends(a, n);
	aggregate_reconfigure(a->agg, n);  /* names with the kept backends' new prefixes */
	aggregate_lists_changed(a->agg);
	release_pipelines(a->old[a->nold - 1]);
	a->cfg = n;
	free_unused_configs(a);
	if (!a->level_flag)
		log_set_level(n->has_log_level ? n->log_level : LOG_INFO);
	log_info("reload: done (%zu backends)", aggregate_backends(a->agg));
}

/* Passes SIG on to every backend's process group. */
static void signal_backends(struct app *a, int sig)
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
		reload(a);
		return;
	}
	if (a->signals++ == 0 && a->http && a->phase == RUNNING) {
		begin_drain_http(a, name);
		return;
	}
	if (a->signals == 1) {
		signal_backends(a, w->signum);
		begin_stop(a, name);
		return;
	}
	log_warn("a second signal (%s): killing the backends and exiting", name);
	signal_backends(a, SIGKILL);
	a->forced = w->signum;
	ev_break(loop, EVBREAK_ALL);
}

/* A backend changed state: keep the router's view current. */
static void on_backend_event(struct backend *b, enum backend_event ev, void *arg)
{
	struct app *a = arg;
	if (ev == BACKEND_EV_READY)
		aggregate_backend_ready(a->agg, backend_peer(b));
	else if (ev == BACKEND_EV_DOWN || ev == BACKEND_EV_FAILED || ev == BACKEND_EV_ENDED)
		aggregate_backend_down(a->agg, backend_peer(b));
	if (ev == BACKEND_EV_ENDED && aggregate_transparent(a->agg))  /* the backend logged it */
		begin_stop_at(a, "the backend ended on its own", LOG_DEBUG);
}

/* Describes the N backends V for the status resource. */
static json_t *describe(struct backend **v, size_t n)
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
			"errors", (json_int_t)st->errors);
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
static json_t *describe_backends(void *arg)
{
	struct app *a = arg;
	return describe(a->backends, a->nbackends);
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

/* Applies the log level: flag, then environment, then config. */
static int set_log_level(const char *flag, const struct cfg *c)
{
	const char *env = getenv("MCP_CHAIN_LOG");
	const char *s = flag ? flag : env;
	enum log_level l;
	if (s && log_parse_level(s, &l) < 0) {
		fprintf(stderr, "mcp-chain: unknown log level \"%s\" (error, warn, info, debug)\n", s);
		return -1;
	}
	if (s)
		log_set_level(l);
	else if (c && c->has_log_level)
		log_set_level(c->log_level);
	return 0;
}

/* Creates a backend for entry S of C and registers it (not started). */
static struct backend *add_backend(struct app *a, struct cfg *c, struct cfg_server *s)
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

/* /readyz: true when every backend is ready. */
static bool all_ready(void *arg)
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
static void write_metrics(struct buf *b, void *arg)
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
}

/* ---- sessions' own backends (--listen, "scope": "session") ---- */

/* A session's backend changed state: keep its aggregate's view current. */
static void on_session_backend_event(struct backend *b, enum backend_event ev, void *arg)
{
	struct schain *sc = arg;
	if (ev == BACKEND_EV_READY)
		aggregate_backend_ready(sc->agg, backend_peer(b));
	else if (ev == BACKEND_EV_DOWN || ev == BACKEND_EV_FAILED || ev == BACKEND_EV_ENDED)
		aggregate_backend_down(sc->agg, backend_peer(b));
}

/* Describes a session's own backends for its status resource. */
static json_t *describe_session_backends(void *arg)
{
	struct schain *sc = arg;
	return describe(sc->backends, sc->nbackends);
}

/* Child processes running now, of every backend. */
static size_t processes_running(struct app *a)
{
	size_t n = 0;
	for (size_t i = 0; i < a->nbackends; i++)
		n += backend_cfg(a->backends[i])->transport == CFG_STDIO &&
		     backend_running(a->backends[i]);
	for (size_t i = 0; i < a->nretired; i++)
		n += backend_cfg(a->retired[i])->transport == CFG_STDIO &&
		     backend_running(a->retired[i]);
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		for (size_t i = 0; i < sc->nbackends; i++)
			n += backend_cfg(sc->backends[i])->transport == CFG_STDIO &&
			     backend_running(sc->backends[i]);
	return n;
}

/*
 * Whether a session may start its own backends now: NEED child processes
 * against listen.maxScopedSessions, maxProcesses and maxStartsPerSecond
 * (a token bucket, so a burst of sessions cannot become a spawn storm).
 * 0, or -1 with the bound named in WHY (N bytes) and logged.
 */
static int within_bounds(struct app *a, unsigned serial, size_t need, char *why, size_t n)
{
	const struct cfg_listen *l = &a->cfg->listen;
	size_t live = 0;
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		live += !sc->released;
	double now = ev_now(EV_DEFAULT);
	a->tokens += (now - a->tokens_at) * l->max_starts;
	a->tokens_at = now;
	if (a->tokens > l->max_starts)
		a->tokens = l->max_starts;
	size_t running = processes_running(a);
	double cost = (double)(need < l->max_starts ? need : l->max_starts);
	if (live >= l->max_scoped_sessions)
		snprintf(why, n, "Service Unavailable: %zu sessions already have backends of their "
			 "own (listen.maxScopedSessions is %u); try again when one ends", live,
			 l->max_scoped_sessions);
	else if (running + need > l->max_processes)
		snprintf(why, n, "Service Unavailable: %zu backend processes are running and this "
			 "session needs %zu more (listen.maxProcesses is %u); try again when a "
			 "session ends", running, need, l->max_processes);
	else if (a->tokens < cost)
		snprintf(why, n, "Service Unavailable: backend processes are being started too fast "
			 "(listen.maxStartsPerSecond is %u); try again in a second", l->max_starts);
	else {
		a->tokens -= cost;
		return 0;
	}
	log_warn("http: session #%u refused: %s", serial, why + strlen("Service Unavailable: "));
	return -1;
}

/* Frees SC (its backends down, or the loop over). */
static void schain_free(struct schain *sc)
{
	for (size_t i = 0; i < sc->nbackends; i++)  /* before the aggregate: its */
		backend_free(sc->backends[i]);      /* list requests end here */
	for (size_t i = 0; i < sc->nbackends; i++)
		pipeline_unref(sc->pls[i]);
	if (sc->chain)
		chain_set_router(sc->chain, NULL);
	aggregate_free(sc->agg);
	chain_free(sc->chain);
	free(sc->backends);
	free(sc->pls);
	free(sc);
}

/* Frees the released session chains whose backends are all down (ALL:
 * every one, the loop being over). At a safe point: from on_step. */
static void sweep_session_chains(struct app *a, bool all)
{
	for (struct schain **pp = &a->schains; *pp;) {
		struct schain *sc = *pp;
		bool down = all || sc->released;
		for (size_t i = 0; i < sc->nbackends && down; i++)
			down = backend_state(sc->backends[i]) == BACKEND_GONE &&
			       !backend_running(sc->backends[i]);
		if (!down) {
			pp = &sc->next;
			continue;
		}
		*pp = sc->next;
		if (sc == a->stateless_sc)
			a->stateless_sc = NULL;
		if (sc->released)
			log_debug("http: session #%u: its backends are down", sc->serial);
		schain_free(sc);
	}
}

/* Adds SC's backend for entry S (not started); 0 or -1. */
static int schain_add(struct schain *sc, struct cfg_server *s)
{
	struct backend *b = backend_new(sc->chain, sc->cfg, s, on_session_backend_event, sc);
	if (!b)
		return -1;
	sc->backends[sc->nbackends] = b;
	sc->pls[sc->nbackends++] = pipeline_ref(s->pipeline);
	backend_peer(b)->pl = s->pipeline;
	backend_peer(b)->timeout = s->timeout;
	aggregate_add_backend(sc->agg, backend_peer(b), s);
	return 0;
}

/*
 * The HTTP front's factory (http_chain_make_fn): the process-wide chain
 * when the configuration has no session-scoped server, else a chain of
 * the session's own, its backends started now (they initialize with the
 * session's initialize). A 2026-07-28 client has no session: its calls
 * share one such chain, made at the first and kept until shutdown (a
 * chain per call would start processes per request, and a notification
 * of one call's backend would never reach the stream that listens).
 */
static struct chain *make_session_chain(void *arg, unsigned serial, bool stateless,
				       char *why, size_t n)
{
	struct app *a = arg;
	struct cfg *cfg = a->cfg;
	if (!cfg_has_session_scope(cfg))
		return a->chain;
	if (stateless && a->stateless_sc && !a->stateless_sc->released)
		return a->stateless_sc->chain;  /* one set of backends for every such call */
	if (a->phase != RUNNING) {
		snprintf(why, n, "Service Unavailable: mcp-chain is shutting down");
		return NULL;
	}
	size_t count = 0, procs = 0;
	for (size_t i = 0; i < cfg->nservers; i++) {
		count += cfg->servers[i].enabled;
		procs += cfg->servers[i].enabled && cfg->servers[i].transport == CFG_STDIO;
	}
	if (within_bounds(a, serial, procs, why, n) < 0)
		return NULL;
	struct schain *sc = calloc(1, sizeof *sc);
	if (!sc || !(sc->backends = calloc(count + 1, sizeof *sc->backends)) ||
	    !(sc->pls = calloc(count + 1, sizeof *sc->pls)) || !(sc->chain = chain_new()) ||
	    !(sc->agg = aggregate_new(sc->chain, cfg)))
		goto fail;
	sc->a = a;
	sc->cfg = cfg;
	sc->serial = serial;
	chain_set_pipeline(sc->chain, cfg->pipeline);
	chain_set_max_open(sc->chain, cfg->max_open);
	chain_set_router(sc->chain, aggregate_router(sc->agg));
	aggregate_set_status(sc->agg, describe_session_backends, sc);
	for (size_t i = 0; i < cfg->nservers; i++)
		if (cfg->servers[i].enabled && schain_add(sc, &cfg->servers[i]) < 0)
			goto fail;
	sc->next = a->schains;
	a->schains = sc;
	if (stateless) {
		/* 2026-07-28 has no sessions: its calls share one set of backends
		 * (a set per call would spawn per request and lose every
		 * notification), kept until shutdown */
		sc->stateless = true;
		a->stateless_sc = sc;
		log_info("http: starting %zu backend(s) for 2026-07-28 calls", sc->nbackends);
	} else {
		log_info("http: session #%u: starting %zu backend(s) of its own", serial,
			 sc->nbackends);
	}
	for (size_t i = 0; i < sc->nbackends; i++)
		backend_start(sc->backends[i]);
	return sc->chain;
fail:
	if (sc)
		schain_free(sc);
	snprintf(why, n, "Service Unavailable: out of memory");
	return NULL;
}

/* The HTTP front gives a session's chain back: its own backends stop. */
static void release_session_chain(void *arg, struct chain *c, unsigned serial)
{
	struct app *a = arg;
	(void)serial;
	for (struct schain *sc = a->schains; sc; sc = sc->next) {
		if (sc->chain != c || sc->released || (sc->stateless && a->phase == RUNNING))
			continue;   /* the stateless calls' chain outlives each call */
		sc->released = true;
		log_debug("http: session #%u: stopping its backends", sc->serial);
		for (size_t i = 0; i < sc->nbackends; i++)
			backend_stop(sc->backends[i], sc->cfg->grace);
		return;
	}
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
	http_front_set_ready(a->http, all_ready, a);
	http_front_set_session_chains(a->http, make_session_chain, release_session_chain, a);
	http_front_set_input_ttl(a->http, a->cfg->input_ttl);
	http_front_set_metrics(a->http, write_metrics, a);
	return 0;
}

/* Runs the proxy until shutdown. */
static int run(struct cfg **cfgp, const char *level_flag, const char *listen)
{
	struct cfg *cfg = *cfgp;
	struct app a = { .cfg = cfg, .level_flag = level_flag, .listening = listen != NULL };
	struct ev_loop *loop = EV_DEFAULT;
	int rc = 0;
	proc_watchdog_start();  /* before any child: the filter module's too */
	writer_setup();
	watch_signals(&a);
	if (pipeline_start(cfg->pipeline) < 0 || !(a.chain = chain_new())) {
		rc = 1;
		goto out;
	}
	chain_set_pipeline(a.chain, cfg->pipeline);
	chain_set_max_open(a.chain, cfg->max_open);
	if (!(a.agg = aggregate_new(a.chain, cfg))) {
		rc = 1;
		goto out;
	}
	chain_set_router(a.chain, aggregate_router(a.agg));
	aggregate_set_status(a.agg, describe_backends, &a);
	for (size_t i = 0; i < cfg->nservers; i++) {
		struct cfg_server *s = &cfg->servers[i];
		if (!s->enabled)
			continue;
		if (pipeline_start(s->pipeline) < 0) {
			rc = 1;
			goto out;
		}
		if (shared_entry(&a, s))
			add_backend(&a, cfg, s);
	}
	/* the front first: a port in use ends here, before any process starts */
	if (listen ? start_http(&a, listen) < 0 :
	    !(a.front = stdio_front_new(a.chain, cfg->max_message, on_front_closed, &a))) {
		rc = 1;   /* said why; what was made is freed below */
		goto out;
	}
	for (size_t i = 0; i < a.nbackends; i++)  /* all start at once */
		backend_start(a.backends[i]);
	if (a.front) {
		stdio_front_set_stall(a.front, cfg->client_stall);
		session_set_input_ttl(stdio_front_session(a.front), cfg->input_ttl);
	}
	ev_prepare_init(&a.step, on_step);   /* started by enter_phase */
	a.step.data = &a;
	ev_init(&a.deadline, on_deadline);
	a.deadline.data = &a;
	ev_run(loop, 0);
out:
	ev_prepare_stop(loop, &a.step);
	ev_timer_stop(loop, &a.deadline);
	stdio_front_free(a.front);
	http_front_free(a.http);   /* releases the sessions' own chains */
	sweep_session_chains(&a, true);
	for (size_t i = 0; i < a.nbackends; i++)  /* before the aggregate: its */
		backend_free(a.backends[i]);      /* list requests end here */
	for (size_t i = 0; i < a.nretired; i++)
		backend_free(a.retired[i]);
	free(a.retired);
	if (a.chain)
		chain_set_router(a.chain, NULL);
	aggregate_free(a.agg);
	free(a.backends);
	curl_ev_release();
	chain_free(a.chain);
	for (size_t i = 0; i < a.nold; i++)
		cfg_free(a.old[i]);
	free(a.old);
	*cfgp = a.cfg;  /* the one in force at the end, for the caller to free */
	ev_signal_stop(loop, &a.sigterm);
	ev_signal_stop(loop, &a.sigint);
	ev_signal_stop(loop, &a.sighup);
	/* the watchdog kills what is left of our groups at the end of its pipe
	 * and exits: wait for it, so that nothing of ours outlives us (the loop
	 * is over; it only reads a pipe and signals, so this ends at once) */
	pid_t wd = proc_watchdog_stop();
	while (wd > 0 && waitpid(wd, NULL, 0) < 0 && errno == EINTR)
		;
	log_debug("exited");
	return rc ? rc : a.forced ? 128 + a.forced : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-file", required_argument, NULL, 'f' },
		{ "record", required_argument, NULL, 'r' },
		{ "listen", required_argument, NULL, 'L' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = getenv("MCP_CHAIN_CONFIG"), *level = NULL, *record = NULL;
	const char *listen = NULL;
	int c;
	mw_use_registry(mw_registry);
	/* The shell commands (src/cli/): a client of the chain, not the chain. */
	if (cli_wanted(argc, argv))
		return cli_main(argc, argv);

	while ((c = getopt_long(argc, argv, "+c:l:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'l': level = optarg; break;
		case 'r': record = optarg; break;
		case 'L': listen = optarg; break;
		case 'f':
			if (log_open_file(optarg) < 0) {
				fprintf(stderr, "mcp-chain: cannot open log file %s\n", optarg);
				return 1;
			}
			break;
		case 'V': fputs("mcp-chain " MCPC_VERSION "\n", stdout); return 0;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc && strcmp(argv[optind], "audit") == 0) {
		if (optind + 2 >= argc || strcmp(argv[optind + 1], "verify") != 0) {
			fputs("usage: mcp-chain audit verify FILE\n", stderr);
			return 2;
		}
		int rc = audit_verify(argv[optind + 2], stdout);
		return rc < 0 ? 2 : rc;  /* 0 intact, 1 broken, 2 unreadable */
	}
	if (optind < argc && strcmp(argv[optind], "check") == 0) {
		const char *file = optind + 1 < argc ? argv[optind + 1] : config;
		if (!file) {
			fputs("usage: mcp-chain check FILE\n", stderr);
			return 2;
		}
		return cmd_check(file);
	}
	if (optind < argc || !config) {
		fputs(optind < argc ? "mcp-chain: unexpected argument\n" :
		      "mcp-chain: no configuration given (use --config FILE)\n", stderr);
		fputs(usage, stderr);
		return 2;
	}
	if (set_log_level(level, NULL) < 0)
		return 2;
	struct cfg_errors errs = { 0 };
	struct cfg *cfg = cfg_load(config, &errs);
	if (cfg && listen && cfg_check_scopes(cfg, &errs) < 0) {
		cfg_free(cfg);
		cfg = NULL;
	}
	print_errors(&errs);
	cfg_errors_release(&errs);
	if (!cfg)
		return 1;
	if (set_log_level(level, cfg) < 0) {
		cfg_free(cfg);
		return 2;
	}
	const char *lf = level ? level : getenv("MCP_CHAIN_LOG");
	/* the recorder reads the first configuration (kept by run() until it
	 * returns, reloads or not) */
	struct recorder *rec = record ? cli_record_start(cfg, record) : NULL;
	if (record && !rec) {
		cfg_free(cfg);
		return 1;
	}
	int rc = run(&cfg, lf, listen);
	cli_record_stop(rec);
	cfg_free(cfg);
	return rc;
}
