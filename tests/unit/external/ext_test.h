/*
 * ext_test.h - helpers shared by the unit tests of src/external/: a fake
 * ready client that records what reaches it through the chain (a
 * backend's notifications go to every ready client, its responses to the
 * client that asked), configurations loaded from JSON text, and the
 * default loop run with a bound.
 *
 * Every helper fails the running cmocka test rather than returning an
 * error.
 */
#ifndef MCPC_EXT_TEST_H
#define MCPC_EXT_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "peer.h"

/* A fake client: every message sent to it is appended (a copy) to GOT. */
struct ext_client {
	struct peer peer;   /* first member */
	json_t *got;        /* owned array */
};

/* Makes C a ready client of chain CH (added to it). */
void ext_client_init(struct ext_client *c, struct chain *ch);

/* Removes C from its chain and frees what it got. */
void ext_client_release(struct ext_client *c);

/* Message I that C got (borrowed); fails the test when there is none. */
json_t *ext_client_msg(const struct ext_client *c, size_t i);

/* Runs the loop until C got N messages or CAP seconds passed; fails the
 * test (printing what it got) in the second case. */
void ext_wait_got(struct ext_client *c, size_t n, double cap);

/*
 * Runs the default loop until DONE(ARG) holds or CAP seconds of wall time
 * passed; true when DONE held. Each iteration is bounded by a short timer,
 * so the loop never blocks for long on nothing.
 */
bool ext_run_until(bool (*done)(const void *arg), const void *arg, double cap);

/* Runs the loop for SECONDS (to see that nothing happens). */
void ext_run_for(double seconds);

/* Runs the loop for TURNS iterations, each bounded by 1 ms. */
void ext_spin(int turns);

/* Runs the loop until B is in state S; fails the test after CAP seconds. */
void ext_wait_state(struct backend *b, enum backend_state s, double cap);

/* TEXT parsed as JSON; a new reference. */
json_t *ext_json(const char *text);

/* A configuration from TEXT (printing its errors and failing when it has
 * some); the caller frees it with cfg_free. */
struct cfg *ext_cfg(const char *text);

/* A printf-formatted ext_cfg. */
struct cfg *ext_cfgf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct CMUnitTest;

/*
 * The main of a test file that needs libcurl: logs to /dev/null (to stderr
 * at debug level with DBG set), backends on mcp-chain's transports
 * (be_transports), fails when libcurl cannot be loaded (never skips), runs
 * TESTS (N of them) as group NAME, releases libcurl.
 */
int ext_curl_main(const char *name, const struct CMUnitTest *tests, size_t n);

#endif
