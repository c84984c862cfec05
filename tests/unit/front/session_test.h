/*
 * session_test.h - the harness shared by the client-side front tests
 * (test_session.c, test_stateless.c): a real chain with one fake backend
 * peer behind it that keeps a copy of every message it is sent and
 * answers initialize as backend.c does; reading those messages and the
 * error replies; and running the default loop a bounded while.
 *
 * The client side differs per test file (a session, or the stateless
 * layer played by hand) and stays in each file.
 *
 * Helpers fail the running cmocka test rather than returning an error.
 * Texts given to them are borrowed.
 */
#ifndef MCPC_SESSION_TEST_H
#define MCPC_SESSION_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "chain.h"
#include "peer.h"

/* ---- the fake backend ---- */

struct sst_fbe {
	struct peer peer;            /* must be first */
	json_t *got;                 /* messages sent to it (copies) */
	int init_calls;
	json_t *init_params;         /* what its initialize op saw (copy) */
	json_t *init_result;         /* result to answer with (owned); NULL: echo
				      * the version asked for */
	json_t *init_error;          /* error to answer with instead (owned) */
	bool init_fail;              /* make the initialize op return -1 */
	bool defer;                  /* answer initialize only in sst_answer_init() */
	unsigned eras;               /* what it says it speaks once initialized
				      * (ERA_BIT_*); 0: the handshake era */
	void (*cb)(void *arg, json_t *response);
	void *cb_arg;
};

/* The one fake backend ("be"), opened by sst_be_open. */
extern struct sst_fbe sst_be;

/* Its ops: messages as trees, and initialize. */
extern const struct peer_ops sst_fbe_ops;

/* The same, and bytes (send_raw) parsed and kept like the trees. */
extern const struct peer_ops sst_fbe_raw_ops;

/*
 * Makes sst_be afresh (sst_fbe_ops, ready when READY) and adds it to the
 * chain C.
 */
void sst_be_open(struct chain *c, bool ready);

/* Takes sst_be out of its chain and frees what it holds. */
void sst_be_close(void);

/* Completes the initialize the backend was asked for (see defer). */
void sst_answer_init(struct sst_fbe *b);

/* The backend sends the message TEXT into the chain. */
void sst_send_b(const char *text);

/* How many messages the backend got. */
size_t sst_n_be(void);

/* Message #I the backend got (borrowed); fails when there is none. */
json_t *sst_be_at(size_t i);

/* The backend answers its request #I with the result RESULT (JSON text). */
void sst_be_respond(size_t i, const char *result);

/* ---- reading JSON ---- */

/* TEXT parsed (any value); a new reference. Fails on bad JSON. */
json_t *sst_json(const char *text);

/* The integer member KEY of M, which must be an integer. */
json_int_t sst_int_at(json_t *m, const char *key);

/* The string member KEY of M (borrowed), or NULL. */
const char *sst_str_at(json_t *m, const char *key);

/* The error code of the response M, which must be an error. */
json_int_t sst_err_code(json_t *m);

/* The error message of the response M (borrowed), or NULL. */
const char *sst_err_message(json_t *m);

/* ---- the loop ---- */

/* Runs the default loop once without waiting (timers due now run). */
void sst_run_once(void);

/* Runs the default loop for SECONDS. */
void sst_run_for(double seconds);

#endif
