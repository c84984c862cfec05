/*
 * limit.c - the "limit" middleware module: how much, how fast, how long.
 *
 * Each rule picks requests (towards a backend) by method, tool name,
 * backend and client, and counts them per key: the rule as a whole, or
 * each name, backend or client on its own. Per key it keeps
 *   - a concurrency limit: requests in flight are counted from the moment
 *     they pass until their response (or their end without one, through
 *     on_abandon); one over the limit waits in a FIFO queue (the walk is
 *     held, MW_ASYNC) up to "queue" entries and "queueTimeoutMs", beyond
 *     which it is refused with MW_LIMIT_BUSY;
 *   - a token bucket ("rate" per second, "burst" deep) on ev_now: a
 *     request finding it empty is refused at once with MW_LIMIT_RATE;
 *   - a timeout of its own ("timeoutMs"), started when the request
 *     passes, that ends it with mw_abort() unless its response came first.
 * Every rule that matches applies; slots are taken in rule order, so two
 * requests never wait for each other's slots in a cycle.
 *
 * A queued request whose client cancels it (or goes away) leaves the
 * queue at once: the chain tells the module holding its walk (on_cancel),
 * which gives back the slots it already held and frees its message. One
 * that passed and ends without a response gives its slots back through
 * on_abandon.
 *
 * A rule with "shared": true keeps its bucket and its count in the
 * shared store (redis.h) instead, so that several instances together
 * allow what one would: one Lua script per rule and request (TIME for the
 * clock, a hash for the bucket, a sorted set of leases for the requests
 * in flight), the walk held meanwhile. Those rules are asked first, in
 * order, then the local ones; a request over a shared limit is refused
 * at once (no queue across instances). When the store is down or slow,
 * each such rule's "onStoreDown" says whether the request goes on
 * ("open") or is refused ("closed").
 *
 * The per-request work is kept small, as every request to a backend pays
 * it: the method is classified once, each rule tested once, a rule
 * counting as a whole keeps its one counter at hand, and records live in
 * a table of the module's own keyed by the ctx pointer, reused from a
 * spare list rather than allocated each time.
 */
#include "mw_limit.h"

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glob_match.h"
#include "hmap.h"
#include "log.h"
#include "pool.h"
#include "redis.h"
#include "rpc.h"

#define RETRY_ABORT 0.05      /* seconds between attempts to end a request */
#define SWEEP_AT 1024         /* counters per rule before idle ones are swept */
#define SPARE_MAX 256         /* freed records kept for reuse, as the chain keeps exchanges */
#define TABLE_MIN 64          /* slots of the records' table when first made */

enum per { PER_RULE, PER_NAME, PER_BACKEND, PER_CLIENT };

/* What a request's method is to a rule without "methods". */
enum mclass {
	M_OTHER,                   /* not one of the methods that do work */
	M_WORK,                    /* prompts/get, resources/read, completion/complete */
	M_TOOL,                    /* tools/call (which does work too) */
};

struct rec;

/* One key of one rule: slots, queue and bucket. */
struct counter {
	char *key;                 /* owned */
	char *label;               /* owned: for messages, e.g. tool "slow" */
	unsigned inflight;
	struct rec *qhead, *qtail;
	unsigned queued;
	double tokens, stamp;      /* the bucket, refilled lazily */
	struct counter *next;      /* in the rule's list */
};

struct rule {
	char *path;                /* owned: JSON pointer, for messages */
	struct glob_list methods, tools, backends, clients;
	bool has_methods, has_tools, has_backends, has_clients;
	enum per per;
	unsigned concurrency;      /* 0: no concurrency limit */
	unsigned queue;
	double queue_timeout;      /* seconds */
	double rate, burst;        /* rate 0: no rate limit */
	double timeout;            /* seconds; 0: none */
	bool shared;               /* "shared": the limits below live in Redis */
	bool down_closed;          /* "onStoreDown": "closed" */
	unsigned sconcurrency;     /* shared: concurrency (0: none) */
	double srate, sburst;      /* shared: rate (0: none) and burst */
	struct hmap counters;      /* key -> counter */
	struct counter *all;       /* the same counters, for sweeping and freeing */
	size_t ncounters;
	struct counter *last;      /* the counter found last, tried first */
};

struct limit {
	struct mw_module base;     /* must be first */
	struct rule *rules;        /* owned, nrules of them */
	size_t nrules;
	bool has_rate;             /* some rule has a rate limit */
	bool has_shared;           /* some rule is "shared" */
	bool warned_no_store;      /* logged that no store is configured */
	char instance[96];         /* this module's part of lease ids */
	unsigned long long leases; /* lease ids handed out */
	size_t rec_size;           /* bytes of a rec with its per-rule arrays */
	struct rec **slots;        /* ctx pointer -> rec for every tracked exchange,
				    * chained through rec.hnext; nslots a power of 2 */
	size_t nslots, nrecs;
	struct rec *spare;         /* freed recs kept for reuse, linked through
				    * qnext and otherwise poisoned */
	size_t nspare;
};

/* One exchange this module tracks. */
struct rec {
	struct rec *qnext;         /* in a counter's queue, or in the spare list */
	struct rec *hnext;         /* in the module's table */
	struct limit *lm;
	struct mw_ctx *ctx;        /* the chain's, valid until on_response/on_abandon */
	struct mw_walk *walk;      /* held while queued */
	json_t *msg;               /* owned while queued */
	size_t next;               /* the rule whose slot it takes next */
	struct counter *waiting;   /* the counter it queues at, or NULL */
	ev_timer timer;            /* the queue wait, then the request's timeout */
	double timeout;            /* the shortest timeoutMs of its rules, seconds */
	double qwait;              /* while queued: that rule's queueTimeoutMs, seconds */
	bool active;               /* passed on */
	struct redis_op *sop;      /* the shared store's answer awaited, or NULL */
	size_t snext;              /* the shared rule asked (or to ask) next */
	unsigned long long lease;  /* its lease id's number (shared concurrency) */
	struct counter *held[];    /* per rule: the slot it holds, or NULL; then per
				    * rule a bool, whether it applies (rec_match);
				    * then per rule whether it may hold a shared
				    * lease (rec_leased) */
};

enum acq { ACQ_DONE, ACQ_WAIT, ACQ_FULL };

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents);

/* ---- matching and counters ---- */

/*
 * Classifies METHOD, once per request: the methods that do work are what a
 * rule without "methods" is about -- not the lists, which mcp-chain itself
 * also sends with several backends.
 */
static enum mclass classify(enum mcp_method method)
{
	switch (method) {
	case MCP_TOOLS_CALL:
		return M_TOOL;
	case MCP_PROMPTS_GET:
	case MCP_RESOURCES_READ:
	case MCP_COMPLETION_COMPLETE:
		return M_WORK;
	default:
		return M_OTHER;
	}
}

/* True when rule R applies to the request in CTX, whose method is CLS. */
static bool rule_matches(const struct rule *r, const struct mw_ctx *ctx, enum mclass cls)
{
	if (r->has_methods ? !glob_list_match(&r->methods, ctx->method) :
	    r->has_tools ? cls != M_TOOL : cls == M_OTHER)
		return false;
	return (!r->has_tools || glob_list_match(&r->tools, ctx->name)) &&
	       (!r->has_backends || glob_list_match(&r->backends, ctx->backend)) &&
	       (!r->has_clients || glob_list_match(&r->clients, ctx->client));
}

/* What CTX's name is: "tool", "prompt", "resource" or "name". */
static const char *name_kind(const struct mw_ctx *ctx)
{
	if (ctx->method_code == MCP_TOOLS_CALL)
		return "tool";
	if (ctx->method_code == MCP_PROMPTS_GET)
		return "prompt";
	return strncmp(ctx->method, "resources/", 10) == 0 ? "resource" : "name";
}

/* The key CTX is counted under in R. */
static const char *key_of(const struct rule *r, const struct mw_ctx *ctx)
{
	switch (r->per) {
	case PER_NAME:
		return ctx->name ? ctx->name : ctx->method;
	case PER_BACKEND:
		return ctx->backend ? ctx->backend : "";
	case PER_CLIENT:
		return ctx->client ? ctx->client : "";
	case PER_RULE:
		break;
	}
	return "";
}

/* A label for messages about the counter of KEY (CTX's) in R, into LABEL. */
static void label_of(const struct rule *r, const struct mw_ctx *ctx, const char *key,
		     char *label, size_t n)
{
	switch (r->per) {
	case PER_RULE:
		snprintf(label, n, "limit rule %s", r->path);
		break;
	case PER_NAME:
		snprintf(label, n, "%s \"%s\"", ctx->name ? name_kind(ctx) : "method", key);
		break;
	case PER_BACKEND:
		snprintf(label, n, "backend \"%s\"", key);
		break;
	case PER_CLIENT:
		snprintf(label, n, "client \"%s\"", key);
		break;
	}
}

/* Adds the tokens earned since the bucket was last looked at, until NOW. */
static void refill(const struct rule *r, struct counter *c, double now)
{
	if (r->rate <= 0)
		return;
	c->tokens += (now - c->stamp) * r->rate;
	if (c->tokens > r->burst)
		c->tokens = r->burst;
	c->stamp = now;
}

/* True when C holds nothing and forgets nothing by going away. */
static bool counter_idle(const struct rule *r, struct counter *c)
{
	refill(r, c, ev_now(EV_DEFAULT));
	return c->inflight == 0 && !c->qhead && (r->rate <= 0 || c->tokens >= r->burst);
}

/* Frees C (already out of the map and list). */
static void counter_free(struct counter *c)
{
	free(c->key);
	free(c->label);
	free(c);
}

/* Forgets R's idle counters, so that keys seen once do not pile up. */
static void sweep(struct rule *r)
{
	for (struct counter **pc = &r->all; *pc;) {
		struct counter *c = *pc;
		if (!counter_idle(r, c)) {
			pc = &c->next;
			continue;
		}
		*pc = c->next;
		if (c == r->last)
			r->last = NULL;
		hmap_del(&r->counters, c->key, strlen(c->key));
		counter_free(c);
		r->ncounters--;
	}
}

/* R's counter for CTX when it is not R->last: made on first use; NULL when
 * memory ran out. */
static struct counter *counter_find(struct rule *r, const struct mw_ctx *ctx)
{
	char label[300];
	const char *key = key_of(r, ctx);
	if (r->last && strcmp(r->last->key, key) == 0)
		return r->last;
	struct counter *c = hmap_get(&r->counters, key, strlen(key));
	if (c)
		return r->last = c;
	label_of(r, ctx, key, label, sizeof label);
	if (r->ncounters >= SWEEP_AT)
		sweep(r);
	c = calloc(1, sizeof *c);
	if (!c || !(c->key = strdup(key)) || !(c->label = strdup(label)) ||
	    hmap_put(&r->counters, c->key, strlen(key), c) < 0) {
		if (c)
			counter_free(c);
		return NULL;
	}
	c->tokens = r->burst;
	c->stamp = ev_now(EV_DEFAULT);
	c->next = r->all;
	r->all = c;
	r->ncounters++;
	return r->last = c;
}

/*
 * R's counter for CTX, made on first use; NULL when memory ran out. The
 * counter found last is tried first, as keys tend to repeat (one client
 * on stdio, one backend in its own middleware), and a rule counting as a
 * whole has only that one.
 */
static inline struct counter *counter_get(struct rule *r, const struct mw_ctx *ctx)
{
	if (r->last && r->per == PER_RULE)
		return r->last;
	return counter_find(r, ctx);
}

/* ---- refusing ---- */

/* Replaces the request *MSG by an error response; steals DATA. */
static void make_error(json_t **msg, int code, const char *why, json_t *data)
{
	json_t *err = rpc_error(json_object_get(*msg, "id"), code, why, data);
	json_decref(*msg);
	*msg = err;
}

/* Per rule, whether it applies to R's request: the bools after R->held. */
static bool *rec_match(struct rec *r)
{
	return (bool *)&r->held[r->lm->nrules];
}

/* Puts back the token R's request took from the buckets of rules before END. */
static void give_back(struct rec *rc, size_t end)
{
	const bool *match = rec_match(rc);
	for (size_t i = 0; i < end; i++) {
		struct rule *r = &rc->lm->rules[i];
		struct counter *c = r->rate > 0 && match[i] ? counter_get(r, rc->ctx) : NULL;
		if (c)
			c->tokens += 1.0;   /* exact: it held at least 1 before */
	}
}

/*
 * Takes one token from every bucket of the rules R's request matches, or
 * none when one is empty: then returns false with the reason in WHY and
 * the wait in *RETRY seconds. Taken in one pass, given back on a refusal,
 * so that each bucket is looked up once.
 */
static bool take_tokens(struct rec *rc, char *why, size_t n, double *retry)
{
	struct limit *lm = rc->lm;
	const bool *match = rec_match(rc);
	double now = 0;
	for (size_t i = 0; lm->has_rate && i < lm->nrules; i++) {
		struct rule *r = &lm->rules[i];
		struct counter *c = r->rate > 0 && match[i] ? counter_get(r, rc->ctx) : NULL;
		if (!c)
			continue;
		if (now == 0)
			now = ev_now(EV_DEFAULT);
		refill(r, c, now);
		if (c->tokens >= 1.0) {
			c->tokens -= 1.0;
			continue;
		}
		*retry = (1.0 - c->tokens) / r->rate;
		snprintf(why, n, "rate limit for %s reached (%g per second, burst %g); "
			 "retry in %.2f s", c->label, r->rate, r->burst, *retry);
		give_back(rc, i);
		return false;
	}
	return true;
}

/* ---- records ---- */

/*
 * New record for the request in CTX, whose method is CLS and to which rule
 * FIRST is the first to apply: the rules that apply are marked, and its
 * timeout is the shortest of theirs. Not yet registered; NULL when out of
 * memory.
 */
static struct rec *rec_new(struct limit *lm, struct mw_ctx *ctx, enum mclass cls,
			   size_t first)
{
	struct rec *r = lm->spare;
	if (r) {
		lm->spare = r->qnext;
		lm->nspare--;
		POOL_UNPOISON(r, lm->rec_size);
		memset(r, 0, lm->rec_size);
	} else if (!(r = calloc(1, lm->rec_size))) {
		return NULL;
	}
	r->lm = lm;
	r->ctx = ctx;
	ev_init(&r->timer, on_timer);
	r->timer.data = r;
	bool *match = rec_match(r);
	for (size_t i = first; i < lm->nrules; i++) {
		const struct rule *ru = &lm->rules[i];
		match[i] = i == first || rule_matches(ru, ctx, cls);
		if (match[i] && ru->timeout > 0 && (r->timeout == 0 || ru->timeout < r->timeout))
			r->timeout = ru->timeout;
	}
	return r;
}

/* Gives back R, unregistered and holding nothing: kept for reuse or freed. */
static void rec_put(struct rec *r)
{
	struct limit *lm = r->lm;
	if (lm->nspare >= SPARE_MAX) {
		free(r);
		return;
	}
	r->qnext = lm->spare;
	lm->spare = r;
	lm->nspare++;
	POOL_POISON((char *)r + sizeof r->qnext, lm->rec_size - sizeof r->qnext);
}

/* The slot of the records' table for CTX. */
static size_t slot_of(const struct limit *lm, const struct mw_ctx *ctx)
{
	uint64_t h = (uint64_t)(uintptr_t)ctx * 0x9E3779B97F4A7C15ULL;
	return (size_t)(h >> 32) & (lm->nslots - 1);
}

/* Doubles the records' table; returns 0 or -1 (then it stays as it was). */
static int table_grow(struct limit *lm)
{
	size_t n = lm->nslots ? lm->nslots * 2 : TABLE_MIN, old = lm->nslots;
	struct rec **slots = calloc(n, sizeof *slots), **was = lm->slots;
	if (!slots)
		return -1;
	lm->slots = slots;
	lm->nslots = n;
	for (size_t i = 0; i < old; i++) {
		for (struct rec *r = was[i], *next; r; r = next) {
			next = r->hnext;
			r->hnext = slots[slot_of(lm, r->ctx)];
			slots[slot_of(lm, r->ctx)] = r;
		}
	}
	free(was);
	return 0;
}

/* Registers R under its ctx; returns 0 or -1 when out of memory. */
static int rec_register(struct rec *r)
{
	struct limit *lm = r->lm;
	if (lm->nrecs >= lm->nslots && table_grow(lm) < 0 && lm->nslots == 0)
		return -1;   /* a table that cannot grow just gets longer chains */
	size_t i = slot_of(lm, r->ctx);
	r->hnext = lm->slots[i];
	lm->slots[i] = r;
	lm->nrecs++;
	return 0;
}

/* The record registered for CTX, or NULL. */
static struct rec *rec_find(const struct limit *lm, const struct mw_ctx *ctx)
{
	if (lm->nrecs == 0)
		return NULL;
	struct rec *r = lm->slots[slot_of(lm, ctx)];
	while (r && r->ctx != ctx)
		r = r->hnext;
	return r;
}

/* Unregisters and frees R (its slots already given back). */
static void rec_free(struct rec *r)
{
	struct limit *lm = r->lm;
	struct rec **pp = &lm->slots[slot_of(lm, r->ctx)];
	if (ev_is_active(&r->timer))
		ev_timer_stop(EV_DEFAULT, &r->timer);
	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	lm->nrecs--;
	json_decref(r->msg);
	rec_put(r);
}

/* Appends R to C's queue. */
static void enqueue(struct counter *c, struct rec *r)
{
	r->qnext = NULL;
	if (c->qtail)
		c->qtail->qnext = r;
	else
		c->qhead = r;
	c->qtail = r;
	c->queued++;
	r->waiting = c;
}

/* Takes R out of the queue it waits in. */
static void dequeue(struct rec *r)
{
	struct counter *c = r->waiting;
	struct rec **pp = &c->qhead, *prev = NULL;
	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (!*pp)
		return;
	*pp = r->qnext;
	if (c->qtail == r)
		c->qtail = prev;
	c->queued--;
	r->waiting = NULL;
	r->qnext = NULL;
}

/*
 * Takes R's slots from rule R->next on. Returns ACQ_DONE with all taken,
 * ACQ_WAIT with R queued, or ACQ_FULL with the reason in WHY.
 */
static enum acq acquire(struct rec *r, char *why, size_t n)
{
	struct limit *lm = r->lm;
	for (; r->next < lm->nrules; r->next++) {
		struct rule *ru = &lm->rules[r->next];
		if (!ru->concurrency || !rec_match(r)[r->next])
			continue;
		struct counter *c = counter_get(ru, r->ctx);
		if (!c) {
			snprintf(why, n, "out of memory");
			return ACQ_FULL;
		}
		if (c->inflight < ru->concurrency && !c->qhead) {
			c->inflight++;
			r->held[r->next] = c;
			continue;
		}
		if (c->queued < ru->queue) {
			enqueue(c, r);
			r->qwait = ru->queue_timeout;
			ev_timer_set(&r->timer, ru->queue_timeout, 0.);
			ev_timer_start(EV_DEFAULT, &r->timer);
			return ACQ_WAIT;
		}
		snprintf(why, n, "too many concurrent requests for %s: %u running, %u waiting "
			 "(concurrency %u, queue %u)", c->label, c->inflight, c->queued,
			 ru->concurrency, ru->queue);
		return ACQ_FULL;
	}
	return ACQ_DONE;
}

/* R passes on: its timeout starts. */
static void activate(struct rec *r)
{
	r->active = true;
	if (r->timeout > 0) {
		ev_timer_set(&r->timer, r->timeout, 0.);
		ev_timer_start(EV_DEFAULT, &r->timer);
	}
}

static void release(struct rec *r);
static void shared_release(struct rec *r);

/* Ends queued R with an error (CODE, WHY, DATA stolen): gives its slots
 * back, resumes. */
static void refuse_waiter(struct rec *r, int code, const char *why, json_t *data)
{
	struct mw_walk *w = r->walk;
	json_t *msg = r->msg;
	r->msg = NULL;
	log_info("limit: request \"%s\" refused: %s", r->ctx->method, why);
	mw_note(r->ctx, "limited", code, why);
	make_error(&msg, code, why, data);
	release(r);
	rec_free(r);
	mw_resume(w, MW_REPLY, msg);
}

/* Continues R, which just got the slot it waited for. */
static void continue_waiter(struct rec *r)
{
	char why[400];
	switch (acquire(r, why, sizeof why)) {
	case ACQ_WAIT:
		return;
	case ACQ_FULL:
		refuse_waiter(r, MW_LIMIT_BUSY, why, NULL);
		return;
	case ACQ_DONE:
		break;
	}
	struct mw_walk *w = r->walk;
	json_t *msg = r->msg;
	r->walk = NULL;
	r->msg = NULL;
	activate(r);
	mw_resume(w, MW_PASS, msg);
}

/* Lets the requests queued at C through while it has free slots. */
static void wake(struct rule *ru, struct counter *c)
{
	while (c->qhead && c->inflight < ru->concurrency) {
		struct rec *r = c->qhead;
		dequeue(r);
		ev_timer_stop(EV_DEFAULT, &r->timer);
		c->inflight++;
		r->held[r->next++] = c;
		continue_waiter(r);
	}
}

/* Gives back every slot R holds, then lets waiters through. */
static void release(struct rec *r)
{
	struct limit *lm = r->lm;
	if (lm->has_shared)
		shared_release(r);
	for (size_t i = 0; i < lm->nrules; i++)
		if (r->held[i])
			r->held[i]->inflight--;
	for (size_t i = 0; i < lm->nrules; i++) {
		struct counter *c = r->held[i];
		r->held[i] = NULL;
		if (c)
			wake(&lm->rules[i], c);
	}
}

/* The queue wait or the request's own timeout ran out. */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rec *r = w->data;
	char why[400];
	(void)revents;
	if (!r->active) {
		snprintf(why, sizeof why, "%s: waited %g s for a free slot without getting one",
			 r->waiting->label, r->qwait);
		dequeue(r);
		refuse_waiter(r, MW_LIMIT_BUSY, why, NULL);
		return;
	}
	snprintf(why, sizeof why, "request \"%s\"%s%s%s timed out after %g s (limit)",
		 r->ctx->method, r->ctx->name ? " (" : "", r->ctx->name ? r->ctx->name : "",
		 r->ctx->name ? ")" : "", r->timeout);
	if (mw_abort(r->ctx, RPC_REQUEST_TIMEOUT, why) == 0) {
		log_warn("limit: %s", why);  /* R is gone: its response came back */
		return;
	}
	ev_timer_set(w, RETRY_ABORT, 0.);   /* still inside a module: try again soon */
	ev_timer_start(loop, w);
}

/* ---- shared rules (the store) ---- */

/*
 * One shared rule's check, atomic in Redis. KEYS: the bucket (a hash:
 * tokens, stamp), the leases (a sorted set: lease id -> expiry). ARGV:
 * rate per second (0: none), burst, concurrency (0: none), lease id,
 * lease seconds. Answers 1 (taken: a token, and a lease when counted),
 * 0 (too many in flight) or -MS (no token; one comes in MS ms). TIME is
 * Redis's, so the instances' clocks do not matter; both keys expire when
 * idle for a few refill periods or leases.
 */
static const char SHARED_SCRIPT[] =
	"redis.replicate_commands()\n"
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) + tonumber(t[2]) / 1000000\n"
	"local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
	"local conc, life = tonumber(ARGV[3]), tonumber(ARGV[5])\n"
	"if conc > 0 then\n"
	"  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"
	"  if redis.call('ZCARD', KEYS[2]) >= conc then return 0 end\n"
	"end\n"
	"if rate > 0 then\n"
	"  local b = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')\n"
	"  local tokens, stamp = tonumber(b[1]) or burst, tonumber(b[2]) or now\n"
	"  if now > stamp then tokens = math.min(burst, tokens + (now - stamp) * rate) end\n"
	"  if tokens < 1 then return -math.ceil((1 - tokens) / rate * 1000) end\n"
	"  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'stamp', tostring(now))\n"
	"  redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 3000) + 1000)\n"
	"end\n"
	"if conc > 0 then\n"
	"  redis.call('ZADD', KEYS[2], now + life, ARGV[4])\n"
	"  redis.call('PEXPIRE', KEYS[2], math.ceil(life * 1000) + 1000)\n"
	"end\n"
	"return 1\n";

#define LEASE_DEFAULT 300.0   /* seconds a lease lives without the rule's timeoutMs */

enum sstep { SS_DONE, SS_WAIT, SS_REFUSED };

static void on_shared(void *arg, enum redis_status status, const struct redis_reply *reply);

/* Per rule, whether R may hold a lease in the store: after rec_match. */
static bool *rec_leased(struct rec *r)
{
	return rec_match(r) + r->lm->nrules;
}

/* The store's key of KIND ("rate", "inflight") for R's request under rule RU. */
static void shared_key(const struct rec *r, const struct rule *ru, const char *kind,
		       struct redis *st, char *out, size_t n)
{
	snprintf(out, n, "%slimit:%s:%s:%s", redis_prefix(st), ru->path, kind, key_of(ru, r->ctx));
}

/* R's lease id, into OUT. */
static void lease_id(const struct rec *r, char *out, size_t n)
{
	snprintf(out, n, "%s:%llu", r->lm->instance, r->lease);
}

/* Gives back the leases R may hold in the store, and forgets its question. */
static void shared_release(struct rec *r)
{
	struct limit *lm = r->lm;
	struct redis *st = redis_default();
	bool *leased = rec_leased(r);
	char key[1200], id[128];
	if (r->sop) {
		redis_forget(r->sop);
		r->sop = NULL;
	}
	for (size_t i = 0; i < lm->nrules; i++) {
		if (!leased[i])
			continue;
		leased[i] = false;
		if (!st)
			continue;
		shared_key(r, &lm->rules[i], "inflight", st, key, sizeof key);
		lease_id(r, id, sizeof id);
		const char *argv[] = { "ZREM", key, id };
		redis_cmd(st, NULL, NULL, 3, argv, NULL);   /* answer unread: an
							     * unreleased lease expires */
	}
}

/* Rule I cannot be asked (no store, down, slow, a bad answer: WHAT):
 * true when R goes on ("open"), false with WHY when it is refused. */
static bool shared_fallback(struct rec *r, size_t i, const char *what, char *why, size_t n)
{
	const struct rule *ru = &r->lm->rules[i];
	struct redis *st = redis_default();
	if (st)
		redis_count_fallback(st, "limit", !ru->down_closed);
	if (!ru->down_closed)
		return true;
	snprintf(why, n, "limit rule %s: the shared store is unavailable (%s) and its "
		 "\"onStoreDown\" is \"closed\"", ru->path, what);
	return false;
}

/* Asks the store about R's next shared rule; returns SS_WAIT with the
 * question out, SS_DONE when none is left, SS_REFUSED with WHY. */
static enum sstep shared_step(struct rec *r, char *why, size_t n)
{
	struct limit *lm = r->lm;
	struct redis *st = redis_default();
	const bool *match = rec_match(r);
	for (; r->snext < lm->nrules; r->snext++) {
		struct rule *ru = &lm->rules[r->snext];
		if (!ru->shared || !match[r->snext])
			continue;
		if (!st) {
			if (!lm->warned_no_store) {
				log_warn("limit: rule %s is \"shared\" but no \"redis\" store is "
					 "running: applying its \"onStoreDown\"", ru->path);
				lm->warned_no_store = true;
			}
			if (!shared_fallback(r, r->snext, "no store", why, n))
				return SS_REFUSED;
			continue;
		}
		char k1[1200], k2[1200], id[128], rate[32], burst[32], conc[16], life[32];
		shared_key(r, ru, "rate", st, k1, sizeof k1);
		shared_key(r, ru, "inflight", st, k2, sizeof k2);
		lease_id(r, id, sizeof id);
		snprintf(rate, sizeof rate, "%.17g", ru->srate);
		snprintf(burst, sizeof burst, "%.17g", ru->sburst);
		snprintf(conc, sizeof conc, "%u", ru->sconcurrency);
		snprintf(life, sizeof life, "%.3f", ru->timeout > 0 ? ru->timeout : LEASE_DEFAULT);
		const char *keys[] = { k1, k2 }, *args[] = { rate, burst, conc, id, life };
		rec_leased(r)[r->snext] = ru->sconcurrency > 0;   /* may be taken from now on */
		r->sop = redis_eval(st, SHARED_SCRIPT, on_shared, r, 2, keys, 5, args);
		if (r->sop)
			return SS_WAIT;
		if (!shared_fallback(r, r->snext, "out of memory", why, n))
			return SS_REFUSED;
	}
	return SS_DONE;
}

/* Goes on with R, whose shared rules let it through: the local rules, as
 * for a request let out of a queue. */
static void local_after_shared(struct rec *r)
{
	char why[400];
	double retry = 0;
	if (!take_tokens(r, why, sizeof why, &retry)) {
		refuse_waiter(r, MW_LIMIT_RATE, why, json_pack("{s:I}", "retryAfterMs",
			(json_int_t)(retry * 1000) + 1));
		return;
	}
	continue_waiter(r);
}

/* The store's answer about R's shared rule R->snext. */
static void on_shared(void *arg, enum redis_status status, const struct redis_reply *reply)
{
	struct rec *r = arg;
	const struct rule *ru = &r->lm->rules[r->snext];
	char why[600], label[300];
	r->sop = NULL;
	if (status == REDIS_OK && reply->type == REDIS_INT && reply->integer <= 0) {
		rec_leased(r)[r->snext] = false;
		label_of(ru, r->ctx, key_of(ru, r->ctx), label, sizeof label);
		if (reply->integer == 0) {
			snprintf(why, sizeof why, "too many concurrent requests for %s across "
				 "instances (shared concurrency %u)", label, ru->sconcurrency);
			refuse_waiter(r, MW_LIMIT_BUSY, why, NULL);
			return;
		}
		snprintf(why, sizeof why, "rate limit for %s reached across instances (%g per "
			 "second, burst %g); retry in %.2f s", label, ru->srate, ru->sburst,
			 (double)-reply->integer / 1000);
		refuse_waiter(r, MW_LIMIT_RATE, why, json_pack("{s:I}", "retryAfterMs",
			(json_int_t)-reply->integer));
		return;
	}
	if (status != REDIS_OK || reply->type != REDIS_INT) {
		const char *what = status == REDIS_DOWN ? "down" :
				   status == REDIS_TIMEOUT ? "no answer in time" :
				   reply->type == REDIS_ERR ? reply->str : "an unexpected answer";
		if (status == REDIS_OK)
			log_warn("limit: rule %s: the store answered: %s", ru->path, what);
		if (!shared_fallback(r, r->snext, what, why, sizeof why)) {
			refuse_waiter(r, MW_LIMIT_BUSY, why, NULL);
			return;
		}
	}
	r->snext++;
	switch (shared_step(r, why, sizeof why)) {
	case SS_WAIT:
		return;
	case SS_REFUSED:
		refuse_waiter(r, MW_LIMIT_BUSY, why, NULL);
		return;
	case SS_DONE:
		break;
	}
	local_after_shared(r);
}

/* ---- hooks ---- */

/* The first rule that applies to CTX, whose method is CLS; nrules for none. */
static size_t first_match(const struct limit *lm, const struct mw_ctx *ctx, enum mclass cls)
{
	size_t i = 0;
	while (i < lm->nrules && !rule_matches(&lm->rules[i], ctx, cls))
		i++;
	return i;
}

/* Refuses the request *MSG now with CODE and WHY; steals DATA. */
static enum mw_verdict refuse(const struct mw_ctx *ctx, json_t **msg, int code,
			      const char *why, json_t *data)
{
	log_info("limit: request \"%s\" refused: %s", ctx->method, why);
	mw_note((struct mw_ctx *)ctx, "limited", code, why);
	make_error(msg, code, why, data);
	return MW_REPLY;
}

static enum mw_verdict admit(struct rec *r, struct mw_ctx *ctx, json_t **msg);

/* True when a shared rule applies to R's request. */
static bool shared_matches(struct rec *r)
{
	const bool *match = rec_match(r);
	for (size_t i = 0; i < r->lm->nrules; i++)
		if (r->lm->rules[i].shared && match[i])
			return true;
	return false;
}

/* R's request meets shared rules: asks the store, holding the walk, or
 * decides now when it cannot be asked. */
static enum mw_verdict shared_begin(struct limit *lm, struct rec *r, struct mw_ctx *ctx,
				    json_t **msg)
{
	char why[600];
	double retry = 0;
	if (rec_register(r) < 0) {
		rec_put(r);
		return refuse(ctx, msg, RPC_INTERNAL_ERROR, "limit: out of memory", NULL);
	}
	r->lease = ++lm->leases;
	switch (shared_step(r, why, sizeof why)) {
	case SS_WAIT:
		r->walk = mw_walk_hold(ctx);
		r->msg = *msg;
		return MW_ASYNC;
	case SS_REFUSED:
		release(r);
		rec_free(r);
		return refuse(ctx, msg, MW_LIMIT_BUSY, why, NULL);
	case SS_DONE:
		break;
	}
	if (!take_tokens(r, why, sizeof why, &retry)) {
		release(r);
		rec_free(r);
		return refuse(ctx, msg, MW_LIMIT_RATE, why, json_pack("{s:I}", "retryAfterMs",
			(json_int_t)(retry * 1000) + 1));
	}
	return admit(r, ctx, msg);
}

/* Counts, queues or refuses a request towards a backend. */
static enum mw_verdict limit_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct limit *lm = (struct limit *)m;
	char why[400];
	double retry = 0;
	if (ctx->kind != RPC_REQUEST || ctx->dir != MW_TO_BACKEND || !ctx->method)
		return MW_PASS;
	enum mclass cls = classify(ctx->method_code);
	size_t first = first_match(lm, ctx, cls);
	if (first == lm->nrules)
		return MW_PASS;
	struct rec *r = rec_new(lm, ctx, cls, first);
	if (!r)
		return refuse(ctx, msg, RPC_INTERNAL_ERROR, "limit: out of memory", NULL);
	if (lm->has_shared && shared_matches(r))
		return shared_begin(lm, r, ctx, msg);
	if (!take_tokens(r, why, sizeof why, &retry)) {
		rec_put(r);
		return refuse(ctx, msg, MW_LIMIT_RATE, why, json_pack("{s:I}", "retryAfterMs",
			(json_int_t)(retry * 1000) + 1));
	}
	if (rec_register(r) < 0) {
		rec_put(r);
		return refuse(ctx, msg, RPC_INTERNAL_ERROR, "limit: out of memory", NULL);
	}
	return admit(r, ctx, msg);
}

/* Takes R's local slots (R registered, its tokens taken): passes, queues
 * or refuses. */
static enum mw_verdict admit(struct rec *r, struct mw_ctx *ctx, json_t **msg)
{
	char why[400];
	switch (acquire(r, why, sizeof why)) {
	case ACQ_DONE:
		activate(r);
		return MW_PASS;
	case ACQ_WAIT:
		r->walk = mw_walk_hold(ctx);
		r->msg = *msg;
		return MW_ASYNC;
	case ACQ_FULL:
		break;
	}
	release(r);
	rec_free(r);
	return refuse(ctx, msg, MW_LIMIT_BUSY, why, NULL);
}

/* Counting needs only the context: no message is ever read. */
static bool limit_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	(void)m;
	(void)ctx;
	return false;
}

/* The exchange in CTX is over: its slots go to the next in line. */
static void finish(struct limit *lm, struct mw_ctx *ctx)
{
	struct rec *r = rec_find(lm, ctx);
	if (!r)
		return;
	if (r->waiting)
		dequeue(r);
	release(r);
	rec_free(r);
}

/* A response came back. */
static enum mw_verdict limit_on_response(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	(void)msg;
	finish((struct limit *)m, ctx);
	return MW_PASS;
}

/* The request ended without a response (cancelled, or its client left). */
static void limit_on_abandon(struct mw_module *m, struct mw_ctx *ctx)
{
	finish((struct limit *)m, ctx);
}

/* The queued request was cancelled: its place (and message) go at once. */
static void limit_on_cancel(struct mw_module *m, struct mw_ctx *ctx)
{
	finish((struct limit *)m, ctx);
}

/* Frees the records, those left open at destruction and the spare ones. */
static void drop_recs(struct limit *lm)
{
	for (size_t i = 0; i < lm->nslots; i++) {
		for (struct rec *r = lm->slots[i], *next; r; r = next) {
			next = r->hnext;
			ev_timer_stop(EV_DEFAULT, &r->timer);
			redis_forget(r->sop);
			json_decref(r->msg);
			free(r);
		}
	}
	free(lm->slots);
	while (lm->spare) {
		struct rec *r = lm->spare;
		lm->spare = r->qnext;
		POOL_UNPOISON(r, lm->rec_size);
		free(r);
	}
}

/* Frees a rule's contents. */
static void rule_release(struct rule *r)
{
	glob_list_release(&r->methods);
	glob_list_release(&r->tools);
	glob_list_release(&r->backends);
	glob_list_release(&r->clients);
	while (r->all) {
		struct counter *c = r->all;
		r->all = c->next;
		counter_free(c);
	}
	hmap_release(&r->counters);
	free(r->path);
}

/* Frees the module. */
static void limit_destroy(struct mw_module *m)
{
	struct limit *lm = (struct limit *)m;
	drop_recs(lm);
	for (size_t i = 0; lm->rules && i < lm->nrules; i++)
		rule_release(&lm->rules[i]);
	free(lm->rules);
	free(lm);
}

static const struct mw_module_ops limit_ops = {
	.name = "limit",
	.reads = limit_reads,
	.on_message = limit_on_message,
	.on_response = limit_on_response,
	.on_abandon = limit_on_abandon,
	.on_cancel = limit_on_cancel,
	.destroy = limit_destroy,
};

/* ---- options ---- */

/* Parses the pattern list NAME of rule OBJ at KEY into L; true if present. */
static bool parse_list(struct mw_build *b, const char *key, json_t *obj,
		       const char *name, struct glob_list *l)
{
	char k[300];
	json_t *v = json_object_get(obj, name);
	if (!v)
		return false;
	snprintf(k, sizeof k, "%s/%s", key, name);
	if (glob_list_parse(b, k, v, l) == 0 && l->n == 0)
		mw_error(b, k, "empty: leave \"%s\" out to match every one", name);
	return true;
}

/* Reads the integer NAME of OBJ in [MIN, MAX] into *OUT; true if present. */
static bool parse_uint(struct mw_build *b, const char *key, json_t *obj, const char *name,
		       unsigned min, unsigned max, unsigned *out)
{
	char k[300];
	json_t *v = json_object_get(obj, name);
	if (!v)
		return false;
	snprintf(k, sizeof k, "%s/%s", key, name);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		mw_error(b, k, "must be a whole number from %u to %u", min, max);
	else
		*out = (unsigned)json_integer_value(v);
	return true;
}

/* Parses "per" at KEY/per into R. */
static void parse_per(struct mw_build *b, const char *key, json_t *v, struct rule *r)
{
	static const char *const names[] = { "rule", "name", "backend", "client" };
	char k[300];
	for (size_t i = 0; v && i < 4; i++) {
		if (json_is_string(v) && strcmp(json_string_value(v), names[i]) == 0) {
			r->per = (enum per)i;
			return;
		}
	}
	snprintf(k, sizeof k, "%s/per", key);
	if (v)
		mw_error(b, k, "must be \"rule\", \"name\", \"backend\" or \"client\"");
}

/* Parses "rate" and "burst" at KEY into R. */
static void parse_rate(struct mw_build *b, const char *key, json_t *obj, struct rule *r)
{
	char k[300];
	unsigned burst = 0;
	json_t *v = json_object_get(obj, "rate");
	bool has_burst = parse_uint(b, key, obj, "burst", 1, 1000000, &burst);
	snprintf(k, sizeof k, "%s/rate", key);
	if (v && (!json_is_number(v) || json_number_value(v) <= 0 ||
		  json_number_value(v) > 1e6))
		mw_error(b, k, "must be a number of requests per second above 0 (e.g. 0.5, 10)");
	else if (v)
		r->rate = json_number_value(v);
	snprintf(k, sizeof k, "%s/burst", key);
	if (has_burst && !v)
		mw_error(b, k, "only with \"rate\"");
	r->burst = burst ? burst : r->rate <= 1 ? 1 : (double)(unsigned)(r->rate + 0.999999);
}

/* Parses the concurrency options at KEY into R. */
static void parse_concurrency(struct mw_build *b, const char *key, json_t *obj, struct rule *r)
{
	char k[300];
	unsigned qt = 60000;
	bool has_c = parse_uint(b, key, obj, "concurrency", 1, 1000000, &r->concurrency);
	r->queue = 64;
	bool has_q = parse_uint(b, key, obj, "queue", 0, 1000000, &r->queue);
	bool has_qt = parse_uint(b, key, obj, "queueTimeoutMs", 1, 86400000, &qt);
	r->queue_timeout = qt / 1000.0;
	snprintf(k, sizeof k, "%s/%s", key, has_q ? "queue" : "queueTimeoutMs");
	if (!has_c && (has_q || has_qt))
		mw_error(b, k, "only with \"concurrency\"");
}

/* Parses "shared" and "onStoreDown" at KEY into R: a shared rule's limits
 * move to its s* members, which the local path never looks at. */
static void parse_shared(struct mw_build *b, const char *key, json_t *obj, struct rule *r)
{
	char k[300];
	json_t *sh = json_object_get(obj, "shared"), *down = json_object_get(obj, "onStoreDown");
	snprintf(k, sizeof k, "%s/shared", key);
	if (sh && !json_is_boolean(sh))
		mw_error(b, k, "must be true or false");
	r->shared = json_is_true(sh);
	if (r->shared && !b->store)
		mw_error(b, k, "needs the top-level \"redis\" section (the store the "
			 "instances share)");
	snprintf(k, sizeof k, "%s/onStoreDown", key);
	if (down && !r->shared)
		mw_error(b, k, "only with \"shared\": true");
	else if (down && !(json_is_string(down) && (strcmp(json_string_value(down), "open") == 0 ||
						   strcmp(json_string_value(down), "closed") == 0)))
		mw_error(b, k, "must be \"open\" (let requests through while the store is "
			 "unavailable) or \"closed\" (refuse them)");
	else
		r->down_closed = down && strcmp(json_string_value(down), "closed") == 0;
	if (!r->shared)
		return;
	snprintf(k, sizeof k, "%s/%s", key, json_object_get(obj, "queue") ? "queue" :
		 "queueTimeoutMs");
	if (json_object_get(obj, "queue") || json_object_get(obj, "queueTimeoutMs"))
		mw_error(b, k, "not with \"shared\": a request over a shared limit is refused "
			 "at once (there is no queue across instances)");
	r->sconcurrency = r->concurrency;
	r->srate = r->rate;
	r->sburst = r->burst;
	r->concurrency = 0;
	r->rate = 0;
}

/* Parses rule I (V) into R. */
static void parse_rule(struct mw_build *b, size_t i, json_t *v, struct rule *r)
{
	static const char *const keys[] = {
		"methods", "tools", "backends", "clients", "per", "concurrency", "queue",
		"queueTimeoutMs", "rate", "burst", "timeoutMs", "shared", "onStoreDown", NULL,
	};
	char key[64], full[600];
	unsigned tmo = 0;
	snprintf(key, sizeof key, "/rules/%zu", i);
	snprintf(full, sizeof full, "%s%s", b->path, key);
	r->path = strdup(full);
	if (!json_is_object(v)) {
		mw_error(b, key, "a rule is an object with \"concurrency\", \"rate\" or \"timeoutMs\"");
		return;
	}
	mw_check_keys_at(b, key, v, keys);
	r->has_methods = parse_list(b, key, v, "methods", &r->methods);
	r->has_tools = parse_list(b, key, v, "tools", &r->tools);
	r->has_backends = parse_list(b, key, v, "backends", &r->backends);
	r->has_clients = parse_list(b, key, v, "clients", &r->clients);
	parse_per(b, key, json_object_get(v, "per"), r);
	parse_concurrency(b, key, v, r);
	parse_rate(b, key, v, r);
	if (parse_uint(b, key, v, "timeoutMs", 1, 86400000, &tmo))
		r->timeout = tmo / 1000.0;
	if (!r->concurrency && r->rate <= 0 && !json_object_get(v, "timeoutMs"))
		mw_error(b, key, "a rule needs \"concurrency\", \"rate\" or \"timeoutMs\"");
	parse_shared(b, key, v, r);
}

/* Sets LM's part of lease ids: this host, process and module. */
static void lease_prefix(struct limit *lm)
{
	static unsigned modules;
	char host[64] = "";
	if (gethostname(host, sizeof host) < 0)
		host[0] = '\0';
	host[sizeof host - 1] = '\0';
	snprintf(lm->instance, sizeof lm->instance, "%s:%ld:%u", host, (long)getpid(), ++modules);
}

/* Validates the options and makes the module. */
struct mw_module *mw_limit_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = { "rules", NULL };
	int before = b->nerr;
	json_t *rules = json_object_get(opts, "rules"), *v;
	size_t i;
	mw_check_keys(b, opts, keys);
	if (!json_is_array(rules) || json_array_size(rules) == 0) {
		mw_error(b, "/rules", "missing or not a non-empty array of rules");
		return NULL;
	}
	struct limit *lm = calloc(1, sizeof *lm);
	if (lm)
		lm->rules = calloc(json_array_size(rules), sizeof *lm->rules);
	if (!lm || !lm->rules) {
		free(lm);
		mw_error(b, "", "out of memory");
		return NULL;
	}
	lm->base.ops = &limit_ops;
	lease_prefix(lm);
	lm->nrules = json_array_size(rules);
	json_array_foreach(rules, i, v) {
		parse_rule(b, i, v, &lm->rules[i]);
		lm->has_rate |= lm->rules[i].rate > 0;
		lm->has_shared |= lm->rules[i].shared;
	}
	/* per rule: the slot held, whether it applies, and with shared rules
	 * whether it may hold a lease in the store */
	lm->rec_size = sizeof(struct rec) +
		       lm->nrules * (sizeof(struct counter *) + (lm->has_shared ? 2 : 1) * sizeof(bool));
	if (b->nerr > before) {
		limit_destroy(&lm->base);
		return NULL;
	}
	return &lm->base;
}
