/*
 * redis.h - a shared store for several mcp-chain instances: one Redis
 * connection on the loop (hiredis with its libev adapter), asynchronous,
 * reconnecting with backoff, every command bounded by a timeout.
 *
 * Nothing here blocks the loop. A command given while the connection is
 * down, or not answered within the timeout, ends with REDIS_DOWN (or
 * REDIS_TIMEOUT) and its user decides, as its configuration says, whether
 * that fails open or closed. The callback is never called from inside
 * redis_cmd: always later, from the loop.
 *
 * One store per process (the configuration's "redis" section), set by the
 * wiring with redis_set_default and found by its users (the HTTP front,
 * the limit module) with redis_default: a connection, not a client.
 */
#ifndef MCPC_REDIS_H
#define MCPC_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

/* What the configuration's "redis" section says (all strings copied). */
struct redis_opts {
	const char *host;          /* default 127.0.0.1 */
	unsigned port;             /* default 6379 */
	const char *password;      /* AUTH; NULL: none. Never logged. */
	unsigned db;               /* SELECT; default 0 */
	const char *prefix;        /* every key's prefix; default "mcp-chain:" */
	double timeout;            /* seconds a command may take; default 0.25 */
	double connect_timeout;    /* seconds a connect may take; default 1 */
};

enum redis_status {
	REDIS_OK,       /* REPLY holds Redis's answer (which may be an error reply) */
	REDIS_DOWN,     /* not connected, or the connection broke before an answer */
	REDIS_TIMEOUT,  /* no answer within the timeout */
};

enum redis_type {
	REDIS_NIL,
	REDIS_INT,
	REDIS_STR,      /* a bulk or status string */
	REDIS_ERR,      /* an error reply: STR holds its text */
	REDIS_ARR,
};

/* One answer (borrowed by the callback, for the call). */
struct redis_reply {
	enum redis_type type;
	long long integer;
	const char *str;               /* REDIS_STR, REDIS_ERR: NUL-terminated */
	size_t len;
	size_t n;                      /* REDIS_ARR: elements */
	const struct redis_reply *elem;/* REDIS_ARR: N elements */
};

/*
 * REPLY is NULL unless STATUS is REDIS_OK. (hiredis's headers define
 * REDIS_OK and REDIS_ERR as macros too: include this header first, and
 * see redis.c for using both.)
 */
typedef void (*redis_cb)(void *arg, enum redis_status status, const struct redis_reply *reply);

struct redis;
struct redis_op;

/* Connects (asynchronously) as O says; NULL out of memory. */
struct redis *redis_new(const struct redis_opts *o);

/*
 * Closes. The callbacks of commands still pending are NOT called (not
 * even later): free the store after its users, which forget their ops
 * as they go. Not from inside one of its callbacks.
 */
void redis_free(struct redis *r);

/* The process's store, or NULL when none is configured. */
struct redis *redis_default(void);
void redis_set_default(struct redis *r);

/* True while connected (and authenticated, the database selected). */
bool redis_up(const struct redis *r);

/* The configured key prefix. */
const char *redis_prefix(const struct redis *r);

/*
 * Sends one command of ARGC arguments (ARGV[i] of LENS[i] bytes; LENS
 * NULL: NUL-terminated strings; all copied). CB (may be NULL) gets its
 * end once, later. Returns a handle for redis_forget (valid until CB is
 * called or the op forgotten), or NULL out of memory (CB is then never
 * called). A command that cannot be formatted ends with REDIS_DOWN.
 */
struct redis_op *redis_cmd(struct redis *r, redis_cb cb, void *arg, int argc,
			   const char *const *argv, const size_t *lens);

/*
 * Runs the Lua SCRIPT (borrowed: a static string) with KEYS and ARGS, by
 * EVALSHA, loading it (EVAL) when Redis does not know it yet. As redis_cmd.
 */
struct redis_op *redis_eval(struct redis *r, const char *script, redis_cb cb, void *arg,
			    int nkeys, const char *const *keys, int nargs,
			    const char *const *args);

/* Its callback will not be called (its caller is going away). */
void redis_forget(struct redis_op *op);

/*
 * Appends Prometheus lines: mcp_chain_redis_up, and the counters
 * mcp_chain_redis_commands_total, _errors_total{why="down|timeout|reply"},
 * _reconnects_total, and each user's fallbacks (redis_count_fallback).
 */
void redis_metrics(const struct redis *r, struct buf *out);

/*
 * Counts (for /metrics: mcp_chain_redis_fallbacks_total{use=USE,
 * outcome="open|closed"}) and logs once per outage that USE ("limit",
 * "sessions", "requestState"; a static string) went on without Redis
 * (OPEN true) or refused (false).
 */
void redis_count_fallback(struct redis *r, const char *use, bool open);

#endif
