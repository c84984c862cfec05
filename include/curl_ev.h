/*
 * curl_ev.h - libcurl's multi interface driven by the libev default loop:
 * one process-wide CURLM, an ev_io per socket libcurl asks to watch and
 * one ev_timer for libcurl's timeouts. No blocking call, no thread of ours.
 *
 * A transfer embeds struct curl_ev_xfer (as its first member, if it likes
 * to cast back) and hands it to curl_ev_add; when libcurl reports the
 * transfer done, the easy handle is removed from the multi and DONE is
 * called from the loop, never from inside a libcurl callback, so it may
 * add, remove and clean up transfers (its own included).
 *
 * libcurl forbids most multi calls from inside its callbacks (write,
 * header...): curl_ev_add and curl_ev_remove must not be called there;
 * curl_ev_busy tells.
 */
#ifndef MCPC_CURL_EV_H
#define MCPC_CURL_EV_H

#include <stdbool.h>
#include <stddef.h>

#include "curl_dl.h"

struct curl_ev_xfer;

/* The transfer ended with RC (CURLE_OK, or why it failed). */
typedef void (*curl_ev_done_fn)(struct curl_ev_xfer *x, CURLcode rc);

struct curl_ev_xfer {
	CURL *easy;            /* owned by the embedding transfer */
	curl_ev_done_fn done;
	bool active;           /* in the multi handle */
};

/* Initializes libcurl (once) and the multi handle; 0 or -1. */
int curl_ev_setup(void);

/*
 * Starts X (borrowed: it must stay valid until DONE or curl_ev_remove);
 * sets X->easy's CURLOPT_PRIVATE. Returns 0 or -1.
 */
int curl_ev_add(struct curl_ev_xfer *x);

/* Aborts X if it is active, without calling DONE; X->easy stays the caller's. */
void curl_ev_remove(struct curl_ev_xfer *x);

/* True while libcurl runs (its callbacks may be on the stack). */
bool curl_ev_busy(void);

/* Transfers in the multi handle. */
size_t curl_ev_count(void);

/*
 * At exit, after every transfer was removed: frees the multi handle, the
 * watchers and libcurl's global state.
 */
void curl_ev_release(void);

#endif
