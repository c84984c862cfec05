/*
 * observe.h - what happens in a running mcp-chain, told once to whoever
 * listens: the live page's event list (/ui), the traces (trace.h) and the
 * tests. The core owns it; fronts, backends and modules report here
 * without knowing who listens, and listeners register without knowing who
 * reports.
 *
 * An event is told synchronously to every listener, then kept in a ring
 * of the latest OBSERVE_KEEP (the page shows them on load). Without a
 * listener, observe_note costs a copy into the ring: it is called on
 * decisions, state changes and errors, never per forwarded message.
 */
#ifndef MCPC_OBSERVE_H
#define MCPC_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

struct exchange;

enum obs_kind {
	OBS_DECISION,  /* a module decided something about a message */
	OBS_BACKEND,   /* a backend's state changed (up, down, restarting) */
	OBS_ERROR,     /* a client's request ended with a JSON-RPC error */
	OBS_SESSION,   /* a client session began or ended */
};

/*
 * One event. Every string is borrowed for the call only (a listener that
 * keeps one copies it); any may be NULL. The ring keeps copies, bounded.
 */
struct obs_event {
	enum obs_kind kind;
	double time;             /* wall clock, seconds since the epoch (set by
				  * observe_note when 0) */
	uint64_t serial;         /* set by observe_note: 1, 2, ... */
	const char *what;        /* OBS_DECISION: "denied", "asked", "limited",
				  * "rewritten", "answered", "dropped";
				  * OBS_BACKEND: "up", "down", "restarting", "stopped",
				  * "failed" (given up);
				  * OBS_ERROR: "error"; OBS_SESSION: "opened", "closed" */
	const char *source;      /* the module ("policy"), backend or front that tells */
	const char *method;      /* the request's method, when about one */
	const char *name;        /* its tool or prompt name, or resource URI */
	const char *client;      /* the principal or clientInfo.name */
	const char *backend;     /* the backend the request went to, if routed */
	const char *detail;      /* a human sentence: the reason, the error message */
	int code;                /* a JSON-RPC error code, else 0 */
	struct exchange *ex;     /* the request it is about (borrowed; the core's
				  * opaque exchange: trace.h attaches the event
				  * to its span), else NULL */
};

/* The events kept for a late listener (the ring's size). */
#define OBSERVE_KEEP 200

/*
 * Tells E to every listener and keeps a copy. E's TIME and SERIAL are set
 * when 0. Safe to call from a listener: the nested event is kept at once and
 * told to every listener after the event in hand was told to all.
 */
void observe_note(const struct obs_event *e);

/*
 * A listener: FN(ARG, E) for every event from now on, until
 * observe_unlisten(FN, ARG). Returns 0, or -1 when out of memory.
 */
typedef void (*observe_fn)(void *arg, const struct obs_event *e);
int observe_listen(observe_fn fn, void *arg);
void observe_unlisten(observe_fn fn, void *arg);

/*
 * The kept events, oldest first: FN(ARG, E) for each (E's strings live
 * until the next observe_note).
 */
void observe_each(observe_fn fn, void *arg);

/* Frees the ring and the listeners (at exit, for leak checkers). */
void observe_reset(void);

#endif
