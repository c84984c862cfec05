/*
 * router.h - which backend a client's message goes to, and the
 * aggregation of several backends behind one endpoint.
 *
 * With one backend the router is transparent: every message goes to it
 * unchanged, names included. With two or more it namespaces tools and
 * prompts ("prefix" + "separator" + name, made safe for Claude clients:
 * ^[a-zA-Z0-9_-]{1,64}$, shortened with a stable hash when needed,
 * collisions resolved deterministically), answers initialize with the
 * union of the backends' capabilities, serves tools/list and prompts/list
 * from caches refreshed on each backend's list_changed, pages
 * resources/list and resources/templates/list across backends behind an
 * opaque cursor, and routes calls, reads, subscriptions and completions
 * to the owning backend with its own names. It does this as a peer of its
 * own (the "aggregate"), so responses pass back through the middleware.
 */
#ifndef MCPC_ROUTER_H
#define MCPC_ROUTER_H

#include <jansson.h>
#include <stdbool.h>

#include "config.h"
#include "peer.h"

struct chain;

/* Sets the router up for CHAIN and configuration CFG (both borrowed; must outlive it). */
void router_setup(struct chain *chain, const struct cfg *cfg);

/* Adds a backend peer, in configuration order, with its entry. */
void router_add_backend(struct peer *backend, const struct cfg_server *entry);

/* Reports a backend (re)initialized or down, for caches and list_changed. */
void router_backend_ready(struct peer *backend);
void router_backend_down(struct peer *backend);

/* The peer whose initialize the front calls: the backend, or the aggregate. */
struct peer *router_init_target(struct peer *client);

/*
 * Chooses where a client request goes, rewriting MSG (borrowed) to the
 * backend's own names. Returns the peer, or NULL with CODE and ERR set.
 */
struct peer *router_route_request(struct peer *client, json_t *msg, const char *method,
				  int *code, char *err, size_t errlen);

/*
 * Handles a client notification the router must act on (initialized,
 * roots/list_changed with several backends). Returns true when consumed
 * (MSG stolen); false: the chain sends it to router_route_request's pick.
 */
bool router_client_notification(struct peer *client, json_t *msg, const char *method);

/* Same for a backend notification (list_changed). */
bool router_backend_notification(struct peer *backend, json_t *msg, const char *method);

/* True when the router changes nothing (one backend): the fast path may
 * forward bytes as they came. */
bool router_transparent(void);

/* Reload: takes a backend out; NEW options; a kept backend's new entry. */
void router_remove_backend(struct peer *backend);
void router_reconfigure(const struct cfg *cfg);
void router_update_backend(struct peer *backend, const struct cfg_server *entry);

/* Tells clients to list tools, prompts and resources again. */
void router_lists_changed(void);

/* Number of backends in use. */
size_t router_backends(void);

/* Installs the function that describes backends for the status resource. */
void router_set_status(json_t *(*status_fn)(void *arg), void *arg);

/* Frees router state. */
void router_release(void);

#endif
