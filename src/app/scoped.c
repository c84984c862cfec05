/*
 * scoped.c - sessions' own backends (--listen, "scope": "session"): a
 * chain per HTTP session, bounded, and the one 2026-07-28 calls share.
 */
#include "app.h"
#include "http_front.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "chain.h"
#include "middleware.h"
#include "peer.h"

/* A session's backend changed state: keep its aggregate's view current. */
static void on_session_backend_event(struct backend *b, enum backend_event ev, void *arg)
{
	struct schain *sc = arg;
	app_backend_event(sc->agg, b, ev);
}

/* Describes a session's backends, its own and the shared ones, for its
 * status resource. */
static json_t *describe_session_backends(void *arg)
{
	struct schain *sc = arg;
	return app_describe(sc->all, sc->nall);
}

/* Appends B to SC's list of every backend it reaches; 0 or -1. */
static int schain_list(struct schain *sc, struct backend *b)
{
	struct backend **v = realloc(sc->all, (sc->nall + 1) * sizeof *v);
	if (!v)
		return -1;
	sc->all = v;
	sc->all[sc->nall++] = b;
	return 0;
}

/*
 * SC's aggregate takes in the app's shared backend B, for SC's entry S:
 * B is linked to SC's chain (its notifications reach the session, what
 * the session asks of it ends when SC lets go). 0, or -1 out of memory.
 */
static int schain_share(struct schain *sc, struct backend *b, const struct cfg_server *s)
{
	struct peer *p = backend_peer(b);
	struct backend **v = realloc(sc->shared, (sc->nshared + 1) * sizeof *v);
	if (!v)
		return -1;
	sc->shared = v;
	if (schain_list(sc, b) < 0 || chain_link_peer(sc->chain, p) < 0)
		return -1;
	sc->shared[sc->nshared++] = b;
	aggregate_add_backend(sc->agg, p, s);
	if (backend_state(b) == BACKEND_READY)   /* no event will say so */
		aggregate_backend_ready(sc->agg, p);
	return 0;
}

/* SC lets go of shared backend B: out of its aggregate (its names leave
 * the session's lists), unlinked from its chain (open requests end). */
static void schain_unshare(struct schain *sc, struct backend *b)
{
	size_t i = 0;
	while (i < sc->nshared && sc->shared[i] != b)
		i++;
	if (i == sc->nshared)
		return;
	memmove(sc->shared + i, sc->shared + i + 1, (--sc->nshared - i) * sizeof *sc->shared);
	for (size_t j = 0; j < sc->nall; j++) {
		if (sc->all[j] == b) {
			memmove(sc->all + j, sc->all + j + 1, (--sc->nall - j) * sizeof *sc->all);
			break;
		}
	}
	aggregate_remove_backend(sc->agg, backend_peer(b));
	chain_unlink_peer(sc->chain, backend_peer(b));
}

/* SC lets go of every shared backend. */
static void schain_unshare_all(struct schain *sc)
{
	while (sc->nshared)
		schain_unshare(sc, sc->shared[sc->nshared - 1]);
}

/* SC's configuration's shared entry named NAME, or NULL. */
static const struct cfg_server *shared_entry(const struct schain *sc, const char *name)
{
	for (size_t i = 0; i < sc->cfg->nservers; i++) {
		const struct cfg_server *s = &sc->cfg->servers[i];
		if (s->enabled && s->scope == CFG_SCOPE_SHARED && strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

void app_sessions_drop_shared(struct app *a, struct backend *b)
{
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		schain_unshare(sc, b);
}

void app_sessions_add_shared(struct app *a, struct backend *b)
{
	for (struct schain *sc = a->schains; sc; sc = sc->next) {
		const struct cfg_server *s = sc->released ? NULL : shared_entry(sc, backend_peer(b)->name);
		if (s && schain_share(sc, b, s) < 0)
			log_warn("http: session #%u: out of memory taking in %s", sc->serial,
				 backend_peer(b)->name);
	}
}

void app_sessions_shared_event(struct app *a, struct backend *b, enum backend_event ev)
{
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		if (!sc->released)
			app_backend_event(sc->agg, b, ev);   /* nothing where B is not in it */
}

/* Child processes running now, of every backend. */
size_t app_processes_running(const struct app *a)
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

/* Sessions whose backends of their own are live (not released). */
static size_t scoped_live(const struct app *a)
{
	size_t live = 0;
	for (const struct schain *sc = a->schains; sc; sc = sc->next)
		live += !sc->released;
	return live;
}

/*
 * Whether a session may start its own backends now: NEED child processes
 * against listen.maxScopedSessions, maxProcesses and maxStartsPerSecond
 * (a token bucket, so a burst of sessions cannot become a spawn storm).
 * 0, or -1 with the bound named in WHY (N bytes) and logged.
 */
int app_within_bounds(struct app *a, unsigned serial, size_t need, char *why, size_t n)
{
	const struct cfg_listen *l = &a->cfg->listen;
	size_t live = scoped_live(a);
	if (live >= l->max_scoped_sessions && a->http && http_front_make_room(a->http))
		live = scoped_live(a);   /* the idlest of them with nothing open made room */
	double now = ev_now(EV_DEFAULT);
	a->tokens += (now - a->tokens_at) * l->max_starts;
	a->tokens_at = now;
	if (a->tokens > l->max_starts)
		a->tokens = l->max_starts;
	size_t running = app_processes_running(a);
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
	schain_unshare_all(sc);   /* what its aggregate asked of them ends here */
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
	free(sc->shared);
	free(sc->all);
	free(sc->caps);
	free(sc);
}

/* True while a released session chain waits to be freed. */
bool app_sweep_pending(const struct app *a)
{
	for (const struct schain *sc = a->schains; sc; sc = sc->next)
		if (sc->released)
			return true;
	return false;
}

/* Frees the released session chains whose backends are all down (ALL:
 * every one, the loop being over). At a safe point: from on_step. */
void app_sweep_session_chains(struct app *a, bool all)
{
	for (struct schain **pp = &a->schains; *pp;) {
		struct schain *sc = *pp;
		bool down = all || sc->released;
		for (size_t i = 0; i < sc->nbackends && down; i++)
			down = backend_state(sc->backends[i]) == BACKEND_GONE &&
			       !backend_running(sc->backends[i]);
		/* and nothing of its chain still on its way (a request a module
		 * holds, bound for a shared backend, ends on its own later) */
		down = down && (all || chain_open_exchanges(sc->chain) == 0);
		if (!down) {
			pp = &sc->next;
			continue;
		}
		*pp = sc->next;
		if (sc->released)
			log_debug("http: session #%u: its backends are down", sc->serial);
		schain_free(sc);
	}
}

/* Adds SC's backend for entry S (not started), acting for SUBJECT (or
 * NULL) when S keeps tokens per principal; 0 or -1. */
static int schain_add(struct schain *sc, struct cfg_server *s, const unsigned char *subject)
{
	struct backend *b = backend_new(sc->chain, sc->cfg, s, on_session_backend_event, sc);
	if (!b)
		return -1;
	if (s->oauth && s->oauth->per_principal && subject && !sc->caps)
		backend_set_principal(b, subject);
	sc->backends[sc->nbackends] = b;
	sc->pls[sc->nbackends++] = pipeline_ref(s->pipeline);
	if (schain_list(sc, b) < 0)
		return -1;
	backend_peer(b)->pl = s->pipeline;
	backend_peer(b)->timeout = s->timeout;
	aggregate_add_backend(sc->agg, backend_peer(b), s);
	return 0;
}

/* The app's shared backend (in service) for entry S, or NULL. */
static struct backend *shared_backend(struct app *a, const struct cfg_server *s)
{
	for (size_t i = 0; i < a->nbackends; i++)
		if (strcmp(backend_peer(a->backends[i])->name, s->name) == 0)
			return a->backends[i];
	return NULL;
}

/*
 * The HTTP front's factory (http_chain_make_fn): the process-wide chain
 * when the configuration has no session-scoped server, else a chain of
 * the session's own, its backends started now (they initialize with the
 * session's initialize), with the shared ones linked in (configuration
 * order, so names are those the entries give). A 2026-07-28 client has no
 * session: the calls that declare the same capabilities (CAPS) share one
 * such chain, made at the first and kept until shutdown (a chain per call
 * would start processes per request, and a notification of one call's
 * backend would never reach the stream that listens). A set of backends
 * per capability set: each is initialized with what its clients declare,
 * so a server offers every client what that client's capabilities earn;
 * they count against listen.maxScopedSessions like sessions.
 */
struct chain *app_session_chain(void *arg, unsigned serial, const char *caps,
				const unsigned char *subject, char *why, size_t n)
{
	struct app *a = arg;
	struct cfg *cfg = a->cfg;
	if (!cfg_has_session_scope(cfg))
		return a->chain;
	for (struct schain *sc = caps ? a->schains : NULL; sc; sc = sc->next)
		if (sc->caps && !sc->released && strcmp(sc->caps, caps) == 0)
			return sc->chain;  /* the backends of these capabilities */
	if (a->phase != APP_RUNNING) {
		snprintf(why, n, "Service Unavailable: mcp-chain is shutting down");
		return NULL;
	}
	size_t count = 0, procs = 0;
	for (size_t i = 0; i < cfg->nservers; i++) {
		const struct cfg_server *s = &cfg->servers[i];
		bool own = s->enabled && s->scope == CFG_SCOPE_SESSION;
		count += own;
		procs += own && s->transport == CFG_STDIO;
	}
	if (app_within_bounds(a, serial, procs, why, n) < 0)
		return NULL;
	struct schain *sc = calloc(1, sizeof *sc);
	if (!sc || !(sc->backends = calloc(count + 1, sizeof *sc->backends)) ||
	    !(sc->pls = calloc(count + 1, sizeof *sc->pls)) ||
	    (caps && !(sc->caps = strdup(caps))) ||
	    app_chain_new(cfg, &sc->chain, &sc->agg, describe_session_backends, sc) < 0)
		goto fail;
	sc->a = a;
	sc->cfg = cfg;
	sc->serial = serial;
	for (size_t i = 0; i < cfg->nservers; i++) {
		struct cfg_server *s = &cfg->servers[i];
		if (!s->enabled)
			continue;
		if (s->scope == CFG_SCOPE_SESSION) {
			if (schain_add(sc, s, subject) < 0)
				goto fail;
			continue;
		}
		struct backend *b = shared_backend(a, s);
		if (b && schain_share(sc, b, s) < 0)
			goto fail;
	}
	sc->next = a->schains;
	a->schains = sc;
	if (caps) {
		log_info("http: starting %zu backend(s) for 2026-07-28 calls declaring "
			 "capabilities %.200s", sc->nbackends, caps);
	} else {
		log_info("http: session #%u: starting %zu backend(s) of its own%s", serial,
			 sc->nbackends, sc->nshared ? ", with the shared ones" : "");
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
void app_release_session_chain(void *arg, struct chain *c, unsigned serial)
{
	struct app *a = arg;
	(void)serial;
	for (struct schain *sc = a->schains; sc; sc = sc->next) {
		if (sc->chain != c || sc->released || (sc->caps && a->phase == APP_RUNNING))
			continue;   /* the stateless calls' chain outlives each call */
		sc->released = true;
		log_debug("http: session #%u: stopping its backends", sc->serial);
		schain_unshare_all(sc);
		app_schedule_sweep(a);   /* freed once they are down */
		for (size_t i = 0; i < sc->nbackends; i++)
			backend_stop(sc->backends[i], sc->cfg->grace);
		return;
	}
}

