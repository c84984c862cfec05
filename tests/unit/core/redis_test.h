/*
 * redis_test.h - a real redis-server for the tests of the shared store
 * (test_redis, the limit module's shared rules): started on a free
 * loopback port, stopped by its PID, and the default loop run until a
 * flag is set.
 */
#ifndef MCPC_REDIS_TEST_H
#define MCPC_REDIS_TEST_H

#include <stdbool.h>
#include <sys/types.h>

/* A free TCP port on 127.0.0.1 (bound once, then let go). */
unsigned rdt_free_port(void);

/* Starts redis-server on PORT and waits until it accepts; returns its PID
 * (the test fails when it cannot). */
pid_t rdt_start(unsigned port);

/* Stops the server PID (SIGTERM, then reaps it). */
void rdt_stop(pid_t pid);

/* Runs the default loop until *FLAG is nonzero or SECONDS pass; returns
 * whether *FLAG became nonzero. */
bool rdt_run_until(const int *flag, double seconds);

/* Runs the default loop for SECONDS. */
void rdt_run_for(double seconds);

#endif
