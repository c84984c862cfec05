/*
 * reload.c - SIGHUP: the configuration file applied again to a running
 * mcp-chain, or the running one kept when the new one cannot be.
 */
#include "app.h"

#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "chain.h"
#include "front.h"
#include "http_front.h"
#include "middleware.h"
#include "session.h"

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
/* True when two entries would start the same process or connection. */
bool app_same_launch(const struct cfg_server *x, const struct cfg_server *y)
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
		if (app_shared_entry(a, &c->servers[i]) && strcmp(c->servers[i].name, name) == 0)
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
	if (a->listening && cfg_has_session_scope(n) != cfg_has_session_scope(a->cfg)) {
		log_error("reload: going between session-scoped and shared backends changes where "
			  "every session's backends run; restart mcp-chain for that");
		cfg_free(n);
		return NULL;
	}
	size_t enabled = 0;
	for (size_t i = 0; i < n->nservers; i++)
		enabled += app_shared_entry(a, &n->servers[i]);
	bool own_chains = a->listening && cfg_has_session_scope(n);  /* no client of ours */
	if (enabled && !own_chains && (enabled > 1) != (aggregate_backends(a->agg) > 1)) {
		log_error("reload: going between one backend and several changes what the client "
			  "was told at initialize; restart mcp-chain for that");
		cfg_free(n);
		return NULL;
	}
	if (!cfg_redis_equal(&n->redis, &a->first->redis))
		log_warn("reload: the \"redis\" section changed: that needs a restart "
			 "(the shared store keeps the settings mcp-chain started with)");
	if (start_pipelines(n) < 0) {
		log_error("reload: a middleware module could not start");
		cfg_free(n);
		return NULL;
	}
	return n;
}

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
void app_sweep_retired(struct app *a)
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

/* Keeps, replaces or stops each running backend for configuration N. */
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
		if (e && app_same_launch(backend_cfg(b), e)) {
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
		app_sessions_drop_shared(a, b);
		backend_peer(b)->pl = NULL;  /* exchanges in flight hold their own reference */
		backend_stop(b, n->grace);
	}
	retire_stopped(a);
	for (size_t i = 0; i < n->nservers; i++) {
		if (!app_shared_entry(a, &n->servers[i]) || (kept && kept[i]))
			continue;
		struct backend *b = app_add_backend(a, n, &n->servers[i]);
		if (!b)
			continue;
		if (donor)
			backend_adopt_init_params(b, donor);
		log_info("reload: starting %s", n->servers[i].name);
		app_sessions_add_shared(a, b);
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
		bool used = a->old[i] == a->first;   /* --record reads it */
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
void app_reload(struct app *a)
{
	if (a->phase != APP_RUNNING)
		return;
	log_info("reload: reading %s", a->cfg->path);
	app_sweep_retired(a);
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
		session_offer_stateless(stdio_front_session(a->front), n->offer_stateless);
	}
	if (a->http) {  /* for the sessions that start afterwards */
		http_front_set_input_ttl(a->http, n->input_ttl);
		http_front_offer_stateless(a->http, n->offer_stateless);
	}
	app_telemetry_reload(a, n);
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

