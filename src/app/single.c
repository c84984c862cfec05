/*
 * single.c - a single-user upstream's sign-in asked of the stdio client
 * (docs/oauth-upstreams.md, "Signing in from the client").
 *
 * A single-user HTTP upstream without a usable token, whose client declared
 * URL-mode elicitation, stays up and answers its requests with -32042. The
 * URL in it is the authorization server's own: on the first such request
 * the upstream asks here (oauth_set_single_login), a loopback login starts
 * (loopback.c: discovery, a listener on 127.0.0.1, registration), and the
 * request waits until the URL is known. Once the browser comes back, the
 * tokens are in the plain store -- the file `mcp-chain auth login` writes --
 * and the upstream's backends are told (backend_credentials_changed): they
 * sign in in place. The listener closes after the callback or 10 minutes.
 */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "backend.h"
#include "log.h"
#include "oauth_client.h"

#define SINGLE_TTL 600.0   /* seconds a login waits for the browser */

/* Someone waiting for the URL. */
struct waiter {
	oauth_url_fn ready;
	void *arg;
	struct waiter *next;
};

/* One login under way, for one upstream. */
struct single {
	struct app_single *as;
	char *name;
	struct loopback_login *l;
	char *url;                /* the authorization URL, once known */
	struct waiter *waiters;
	bool done;                /* to free at the next sweep */
	struct single *next;
};

struct app_single {
	struct app *a;
	struct single *logins;
	ev_timer sweep;           /* frees the logins that ended */
};

/* The enabled entry NAME of A's configuration with single-user "oauth". */
static const struct cfg_server *entry(struct app *a, const char *name)
{
	for (size_t i = 0; i < a->cfg->nservers; i++) {
		const struct cfg_server *s = &a->cfg->servers[i];
		if (s->enabled && s->url && s->oauth && !s->oauth->per_principal &&
		    strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

/* Tells the waiters of G the URL or ERR. */
static void wake(struct single *g, const char *url, const char *err)
{
	struct waiter *w = g->waiters;
	g->waiters = NULL;
	while (w) {
		struct waiter *next = w->next;
		w->ready(w->arg, url, err);
		free(w);
		w = next;
	}
}

static void on_url(void *arg, struct loopback_login *l, const char *url)
{
	struct single *g = arg;
	(void)l;
	free(g->url);
	g->url = strdup(url);
	log_info("%s: sign-in asked of the client (URL elicitation)", g->name);
	wake(g, g->url, g->url ? NULL : "out of memory");
}

static void on_done(void *arg, struct loopback_login *l, const char *err)
{
	struct single *g = arg;
	struct app *a = g->as->a;
	(void)l;
	if (err)
		log_warn("%s: sign-in: %s", g->name, err);
	else
		log_info("%s: signed in", g->name);
	wake(g, NULL, err ? err : "signed in already: try again");
	g->done = true;
	if (!ev_is_active(&g->as->sweep)) {
		ev_timer_set(&g->as->sweep, 0., 0.);
		ev_timer_start(EV_DEFAULT, &g->as->sweep);
	}
	/* signed in: sign in in place; failed: the next request starts anew */
	for (size_t i = 0; i < a->nbackends; i++)
		if (strcmp(backend_cfg(a->backends[i])->name, g->name) == 0)
			backend_credentials_changed(a->backends[i]);
}

static const struct loopback_ops single_ops = { on_url, on_done };

static void single_free(struct single *g)
{
	loopback_login_free(g->l);
	wake(g, NULL, "stopped");
	free(g->url);
	free(g->name);
	free(g);
}

/* Frees the logins that ended. */
static void on_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct app_single *as = w->data;
	(void)loop;
	(void)revents;
	for (struct single **p = &as->logins; *p;) {
		struct single *g = *p;
		if (g->done) {
			*p = g->next;
			single_free(g);
		} else {
			p = &g->next;
		}
	}
}

static int start(void *arg, const char *name, oauth_url_fn ready, void *ready_arg)
{
	struct app_single *as = arg;
	struct single *g;
	for (g = as->logins; g && (g->done || strcmp(g->name, name) != 0); g = g->next)
		;
	if (g && g->url) {
		ready(ready_arg, g->url, NULL);
		return 0;
	}
	struct waiter *w = calloc(1, sizeof *w);
	if (!w)
		return -1;
	w->ready = ready;
	w->arg = ready_arg;
	if (!g) {
		const struct cfg_server *s = entry(as->a, name);
		g = s ? calloc(1, sizeof *g) : NULL;
		if (g)
			g->name = strdup(name);
		if (!g || !g->name) {
			free(g);
			free(w);
			return -1;
		}
		g->as = as;
		g->next = as->logins;
		as->logins = g;
		g->waiters = w;
		g->l = loopback_login_start(s, NULL, SINGLE_TTL, &single_ops, g);
		if (!g->l) {
			g->waiters = NULL;
			free(w);
			g->done = true;
			return -1;
		}
		return 0;
	}
	w->next = g->waiters;
	g->waiters = w;
	return 0;
}

static void cancel(void *arg, void *ready_arg)
{
	struct app_single *as = arg;
	for (struct single *g = as->logins; g; g = g->next)
		for (struct waiter **p = &g->waiters; *p;) {
			struct waiter *w = *p;
			if (w->arg == ready_arg) {
				*p = w->next;
				free(w);
			} else {
				p = &w->next;
			}
		}
}

int app_single_start(struct app *a)
{
	struct app_single *as = calloc(1, sizeof *as);
	if (!as)
		return -1;
	as->a = a;
	ev_timer_init(&as->sweep, on_sweep, 0., 0.);
	as->sweep.data = as;
	a->single = as;
	struct oauth_single_login h = { start, cancel, as };
	oauth_set_single_login(&h);
	return 0;
}

void app_single_free(struct app *a)
{
	struct app_single *as = a->single;
	if (!as)
		return;
	oauth_set_single_login(NULL);
	ev_timer_stop(EV_DEFAULT, &as->sweep);
	while (as->logins) {
		struct single *g = as->logins;
		as->logins = g->next;
		g->waiters = NULL;   /* the backends are gone or going */
		single_free(g);
	}
	free(as);
	a->single = NULL;
}
