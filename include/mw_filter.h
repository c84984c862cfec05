/*
 * mw_filter.h - the "filter" middleware module: an external program,
 * started once and kept running, decides about each message. It reads
 * one JSON line per message on its stdin and answers one JSON line on its
 * stdout: pass (possibly with a changed message), reply, or drop.
 * Protocol, options and failure modes: docs/middleware/filter.md.
 */
#ifndef MCPC_MW_FILTER_H
#define MCPC_MW_FILTER_H

#include "middleware.h"

/* JSON-RPC error code of a request the filter dropped. */
#define MW_FILTER_REFUSED -32013

/* JSON-RPC error code of a request refused because the filter is down,
 * hung or answered nonsense, with "failure": "closed". */
#define MW_FILTER_UNAVAILABLE -32014

/*
 * Creates the module from its entry OPTS (borrowed). Returns NULL after
 * at least one mw_error when the options are wrong. The program is
 * started by the module's start hook, not here.
 */
struct mw_module *mw_filter_create(json_t *opts, struct mw_build *b);

#endif
