/*
 * up_test.h - the world of a test of an HTTP upstream transport (be_http,
 * be_sse): a real chain with a fake ready client (ext_test.h), the scripted
 * server of http_stub.h, the backend under test, and the answers to the
 * initialize the test asked for. One world per process, U.
 */
#ifndef MCPC_UP_TEST_H
#define MCPC_UP_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "ext_test.h"
#include "http_stub.h"

struct ext_up {
	struct chain *ch;
	struct ext_client cl;
	struct cfg *cfg;          /* up_make's */
	struct backend *be;       /* up_make's */
	json_t *init_answers;     /* owned array: a copy of each answer to up_ask_initialize */
	int port;                 /* the stub's */
};

extern struct ext_up U;

/* A new chain and client, the stub listening with HANDLER. */
void up_setup(stub_fn handler);

/* Stops the backend (a DELETE or the stream's end waits at most GRACE),
 * frees the world, stops the stub; fails the test when a transfer is
 * left behind. */
void up_teardown(double grace);

/* Makes the backend of CFG's first server (CFG stolen: U.cfg) and starts it. */
void up_make(struct cfg *cfg);

/* Asks the backend to initialize with PARAMS (JSON text); the answer comes
 * to U.init_answers. */
void up_ask_initialize(const char *params);

/* ext_run_until conditions: an answer to initialize came; the backend
 * does not run. */
bool up_init_answered(const void *arg);
bool up_not_running(const void *arg);

#endif
