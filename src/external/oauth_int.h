/*
 * oauth_int.h - internals of the OAuth client shared by oauth_discover.c
 * (challenge, well-known URLs, discovery) and oauth_client.c (the flow,
 * registration, authorization request, token endpoint).
 */
#ifndef MCPC_OAUTH_INT_H
#define MCPC_OAUTH_INT_H

#include <jansson.h>

#include "buf.h"
#include "fetch.h"
#include "oauth_client.h"

#define OAUTH_FETCH_MAX (256u << 10)   /* bytes of a metadata or token answer */
#define OAUTH_TIMEOUT_MS 15000L

struct oauth_flow {
	char *name, *url;
	const struct cfg_oauth *o;     /* borrowed; never NULL (defaults) */
	bool allow_http;
	struct oauth_meta meta;
	struct oauth_tokens tok;
	struct oauth_challenge ch;
	char *extra_scope;             /* a step-up's scope */
	struct fetch *fetch;           /* the request under way */
	oauth_done_fn done;
	void *arg;
	int step;
	char *urls[4];                 /* candidates of the step, NULL-terminated */
	int ui;                        /* the one being tried */
	char tried[600];               /* what was tried, for the error */
	char state[44], verifier[44], challenge[44];
	char err[600];
};

/* Ends the running step: DONE(ARG, ERR) (ERR may be NULL). */
void oauth_flow_finish(struct oauth_flow *f, const char *err);

/* Like oauth_flow_finish with a formatted error. */
void oauth_flow_failf(struct oauth_flow *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Starts a fetch for F; its answer goes to CB. 0, or -1 (F finished with the error). */
int oauth_fetch(struct oauth_flow *f, const struct fetch_req *rq, fetch_done_fn cb);

/* The answer's body as a JSON object (new reference), or NULL. */
json_t *oauth_json_body(const struct fetch_res *res);

/* Copies into OUT (N bytes) a short printable excerpt of S (control
 * characters replaced), for an error text. */
void oauth_excerpt(char *out, size_t n, const char *s);

/* Frees the step's candidate URLs. */
void oauth_urls_clear(struct oauth_flow *f);

/* Replaces *DST with a copy of SRC (NULL allowed); 0 or -1. */
int oauth_set(char **dst, const char *src);

#endif
