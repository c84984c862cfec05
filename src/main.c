/*
 * main.c - mcp-chain: command line, start-up and orderly shutdown.
 *
 * Shutdown: at the end of input the front stops reading and requests
 * still open are given up to the grace period to finish; then (or at once
 * on SIGTERM/SIGINT or a broken stdout) the session is closed, each
 * backend's stdin is closed, and after the grace period its process group
 * gets SIGTERM, then SIGKILL. The process exits 0 once every child is
 * reaped and stdout is flushed.
 */
#include <getopt.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "front.h"
#include "log.h"
#include "mw_log.h"
#include "router.h"
#include "mcpc_version.h"
#include "session.h"
#include "writer.h"

enum phase { RUNNING, DRAINING, STOPPING };

struct app {
	struct cfg *cfg;
	struct backend **backends;
	size_t nbackends;
	struct stdio_front *front;
	enum phase phase;
	ev_signal sigterm, sigint, sighup;
	ev_check check;
	ev_timer deadline;
};

static const char usage[] =
	"usage: mcp-chain --config FILE [--log-level LEVEL] [--log-file FILE]\n"
	"       mcp-chain check FILE\n"
	"       mcp-chain audit verify FILE\n"
	"       mcp-chain --version | --help\n"
	"\n"
	"Runs an MCP server on stdio that forwards to the backend(s) in FILE\n"
	"(Claude's \"mcpServers\" format), through the configured middleware.\n"
	"\n"
	"  -c, --config FILE      configuration file (or $MCP_CHAIN_CONFIG)\n"
	"  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
	"                         (or $MCP_CHAIN_LOG; overrides \"logLevel\")\n"
	"      --log-file FILE    append logs to FILE instead of stderr\n"
	"  -V, --version          print the version\n"
	"  -h, --help             print this help\n"
	"\n"
	"check FILE validates a configuration and exits 0 (valid) or 1.\n"
	"audit verify FILE checks a \"chain\": true audit log; exits 0 (intact),\n"
	"1 (names the first broken line) or 2 (unreadable).\n";

/* Prints every configuration error. */
static void print_errors(struct cfg_errors *errs)
{
	for (size_t i = 0; i < errs->count; i++)
		fprintf(stderr, "%s\n", errs->lines[i]);
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
	fprintf(stderr, "%s: ok\n", path);
	cfg_free(c);
	return 0;
}

/* Number of client requests still open. */
static size_t open_client_requests(struct app *a)
{
	return a->front ? session_peer(stdio_front_session(a->front))->received.count : 0;
}

/* Closes the session and starts stopping the backend. */
static void begin_stop(struct app *a, const char *why)
{
	if (a->phase == STOPPING)
		return;
	log_info("shutting down: %s", why);
	a->phase = STOPPING;
	stdio_front_stop_reading(a->front);
	session_close(stdio_front_session(a->front), "mcp-chain is shutting down");
	for (size_t i = 0; i < a->nbackends; i++)
		backend_stop(a->backends[i], a->cfg->grace);
	ev_timer_stop(EV_DEFAULT, &a->deadline);
	ev_timer_set(&a->deadline, 3 * a->cfg->grace + 1.0, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* True while a backend has anything running. */
static bool any_running(struct app *a)
{
	for (size_t i = 0; i < a->nbackends; i++)
		if (backend_running(a->backends[i]))
			return true;
	return false;
}

/* After each loop iteration: advance the shutdown when it can. */
static void on_check(struct ev_loop *loop, ev_check *w, int revents)
{
	struct app *a = w->data;
	(void)revents;
	if (a->phase == DRAINING && open_client_requests(a) == 0)
		begin_stop(a, "end of input and no request open");
	if (a->phase == STOPPING && !any_running(a)) {
		writer_flush_all();
		if (stdio_front_queued(a->front) == 0)
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
	a->phase = DRAINING;
	ev_timer_set(&a->deadline, a->cfg->grace, 0.);
	ev_timer_start(EV_DEFAULT, &a->deadline);
}

/* SIGTERM / SIGINT. */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct app *a = w->data;
	(void)loop;
	(void)revents;
	if (w->signum == SIGHUP) {
		/* reopen audit files (logrotate); configuration reload is not built yet */
		mw_log_reopen_all();
		return;
	}
	begin_stop(a, w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* A backend changed state: keep the router's view current. */
static void on_backend_event(struct backend *b, enum backend_event ev, void *arg)
{
	struct app *a = arg;
	if (ev == BACKEND_EV_READY)
		router_backend_ready(backend_peer(b));
	else if (ev == BACKEND_EV_DOWN || ev == BACKEND_EV_FAILED)
		router_backend_down(backend_peer(b));
	if (ev == BACKEND_EV_FAILED && a->phase == RUNNING)
		log_warn("%s: given up; its requests will be answered with errors",
			 backend_peer(b)->name);
}

/* Describes every backend for the status resource. */
static json_t *describe_backends(void *arg)
{
	struct app *a = arg;
	json_t *out = json_object();
	double now = ev_now(EV_DEFAULT);
	for (size_t i = 0; i < a->nbackends; i++) {
		struct backend *b = a->backends[i];
		const struct backend_stats *st = backend_stats(b);
		struct peer *p = backend_peer(b);
		json_t *d = json_pack("{s:s,s:s,s:I,s:I,s:I}", "state",
			backend_state_name(backend_state(b)), "command", backend_cfg(b)->command,
			"restarts", (json_int_t)st->restarts, "requests", (json_int_t)st->requests,
			"errors", (json_int_t)st->errors);
		if (st->started_at)
			json_object_set_new(d, "uptimeSeconds", json_real(now - st->started_at));
		if (p->why_down[0] && backend_state(b) != BACKEND_READY)
			json_object_set_new(d, "reason", json_string(p->why_down));
		json_object_set_new(out, p->name, d);
	}
	return json_pack("{s:s,s:o}", "version", MCPC_VERSION, "backends", out);
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

/* Runs the proxy until shutdown. */
static int run(struct cfg *cfg)
{
	struct app a = { .cfg = cfg };
	struct ev_loop *loop = EV_DEFAULT;
	writer_setup();
	watch_signals(&a);
	if (pipeline_start(cfg->pipeline) < 0)
		return 1;
	chain_set_pipeline(cfg->pipeline);
	router_setup(cfg);
	router_set_status(describe_backends, &a);
	a.backends = calloc(cfg->nservers + 1, sizeof *a.backends);
	for (size_t i = 0; a.backends && i < cfg->nservers; i++) {
		struct cfg_server *s = &cfg->servers[i];
		if (!s->enabled)
			continue;
		if (pipeline_start(s->pipeline) < 0)
			return 1;
		struct backend *b = backend_new(cfg, s, on_backend_event, &a);
		if (!b)
			continue;
		a.backends[a.nbackends++] = b;
		backend_peer(b)->pl = s->pipeline;
		backend_peer(b)->timeout = s->timeout;
		router_add_backend(backend_peer(b), s);
	}
	for (size_t i = 0; i < a.nbackends; i++)  /* all start at once */
		backend_start(a.backends[i]);
	a.front = stdio_front_new(cfg->max_message, on_front_closed, &a);
	if (!a.front)
		return 1;
	ev_check_init(&a.check, on_check);
	a.check.data = &a;
	ev_check_start(loop, &a.check);
	ev_init(&a.deadline, on_deadline);
	a.deadline.data = &a;
	ev_run(loop, 0);
	ev_check_stop(loop, &a.check);
	ev_timer_stop(loop, &a.deadline);
	stdio_front_free(a.front);
	router_release();
	for (size_t i = 0; i < a.nbackends; i++)
		backend_free(a.backends[i]);
	free(a.backends);
	chain_release();
	ev_signal_stop(loop, &a.sigterm);
	ev_signal_stop(loop, &a.sigint);
	ev_signal_stop(loop, &a.sighup);
	log_info("exited");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-file", required_argument, NULL, 'f' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = getenv("MCP_CHAIN_CONFIG"), *level = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "+c:l:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'l': level = optarg; break;
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
	print_errors(&errs);
	cfg_errors_release(&errs);
	if (!cfg)
		return 1;
	if (set_log_level(level, cfg) < 0) {
		cfg_free(cfg);
		return 2;
	}
	int rc = run(cfg);
	cfg_free(cfg);
	return rc;
}
