/*
 * trace.c - OpenTelemetry traces (trace.h): W3C Trace Context, spans, a
 * bounded queue of ended spans, and their export as OTLP/HTTP JSON
 * (ExportTraceServiceRequest) through fetch.h, on the loop.
 *
 * The export body is written by hand into a buffer rather than built as a
 * jansson tree: at sampling 1.0 every request makes two spans, and a tree
 * of some thirty values per span cost more than the span itself.
 */
#include "trace.h"

#include <ev.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "chain.h"
#include "curl_ev.h"
#include "fetch.h"
#include "log.h"
#include "mcpc_version.h"
#include "observe.h"

#define MAX_ATTRS 24      /* per span: more are ignored */
#define MAX_EVENTS 16     /* per span: more are ignored */
#define EVENT_ATTRS 3

/* Appends the string literal S to buffer B. */
#define PUT(b, s) buf_append((b), "" s, sizeof s - 1)   /* "" s: literals only */

enum attr_type { ATTR_STR, ATTR_INT, ATTR_BOOL };

struct attr {
	const char *key;     /* static: callers pass literals */
	enum attr_type type;
	union {
		char *s;     /* owned */
		long long i;
		bool b;
	} v;
};

struct sevent {
	char *name;          /* owned */
	uint64_t time;
	const char *key[EVENT_ATTRS];  /* static */
	char *val[EVENT_ATTRS];        /* owned */
};

struct span {
	struct trace_ctx ctx;
	uint8_t parent_id[8];
	bool has_parent;
	bool error;
	enum span_kind kind;
	uint8_t nattrs, nevents;
	char trace_hex[33];
	char *name;          /* owned */
	char *status_msg;    /* owned, or NULL */
	uint64_t start, end;
	struct sevent *events;   /* owned array of MAX_EVENTS, made on the first */
	uint16_t pool_used;
	/* Last: span_start clears what is above, and nothing below. */
	struct attr attrs[MAX_ATTRS];
	char pool[512];          /* attribute values, while they fit (no malloc) */
};

struct tracer {
	char *endpoint;
	char **headers;       /* owned "Name: value" lines, NULL-terminated */
	char *service;
	double ratio;
	size_t batch, qsize;
	double interval, timeout;
	struct span **q;      /* ring of QSIZE */
	size_t head, count;
	struct fetch *inflight;
	size_t inflight_n;    /* spans in the export in flight */
	ev_timer tick;
	struct trace_stats st;
};

struct tracer *trace_current;

/* ---- W3C Trace Context ---- */

/* The value of a lowercase hex digit, or -1. */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Reads N bytes of lowercase hex at S into OUT; -1 unless all are hex. */
static int unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int h = hexval(s[2 * i]), l = hexval(s[2 * i + 1]);
		if (h < 0 || l < 0)
			return -1;
		out[i] = (uint8_t)(h << 4 | l);
	}
	return 0;
}

/* True when N bytes at P are all zero. */
static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int trace_parent_parse(const char *s, size_t n, struct trace_ctx *out)
{
	uint8_t version, tid[16], sid[8], flags;
	if (!s || n < TRACE_PARENT_LEN || unhex(s, &version, 1) < 0 || version == 0xff)
		return -1;
	/* version 00 is exactly 55 bytes; a later one may add "-..." fields */
	if (version == 0 ? n != TRACE_PARENT_LEN : (n > TRACE_PARENT_LEN && s[TRACE_PARENT_LEN] != '-'))
		return -1;
	if (s[2] != '-' || s[35] != '-' || s[52] != '-' ||
	    unhex(s + 3, tid, 16) < 0 || unhex(s + 36, sid, 8) < 0 || unhex(s + 53, &flags, 1) < 0 ||
	    all_zero(tid, 16) || all_zero(sid, 8))
		return -1;
	memcpy(out->trace_id, tid, 16);
	memcpy(out->span_id, sid, 8);
	out->flags = version == 0 ? flags : (flags & 1);
	return 0;
}

void trace_hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

void trace_parent_format(const struct trace_ctx *c, char *out)
{
	memcpy(out, "00-", 3);
	trace_hex(c->trace_id, 16, out + 3);
	out[35] = '-';
	trace_hex(c->span_id, 8, out + 36);
	out[52] = '-';
	trace_hex(&c->flags, 1, out + 53);
}

void trace_state_set(struct trace_ctx *c, const char *s, size_t n)
{
	c->state[0] = '\0';
	if (!s || n == 0 || n > TRACE_STATE_MAX)
		return;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return;
	memcpy(c->state, s, n);
	c->state[n] = '\0';
}

/* ---- ids and sampling ---- */

static uint64_t rng[4];
static bool rng_seeded;

/* Next value of xoshiro256** (seeded once from OpenSSL's generator). */
static uint64_t rng_next(void)
{
	if (!rng_seeded) {
		if (RAND_bytes((unsigned char *)rng, sizeof rng) != 1) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			rng[0] = (uint64_t)ts.tv_nsec ^ 0x9e3779b97f4a7c15ULL;
			rng[1] = (uint64_t)ts.tv_sec;
			rng[2] = (uint64_t)(uintptr_t)&ts;
			rng[3] = 0x2545f4914f6cdd1dULL;
		}
		rng_seeded = true;
	}
	uint64_t r = rng[1] * 5;
	r = (r << 7 | r >> 57) * 9;
	uint64_t t = rng[1] << 17;
	rng[2] ^= rng[0];
	rng[3] ^= rng[1];
	rng[1] ^= rng[2];
	rng[0] ^= rng[3];
	rng[2] ^= t;
	rng[3] = rng[3] << 45 | rng[3] >> 19;
	return r;
}

/* N random bytes, never all zero. */
static void random_id(uint8_t *out, size_t n)
{
	do {
		for (size_t i = 0; i < n; i += 8) {
			uint64_t r = rng_next();
			memcpy(out + i, &r, n - i < 8 ? n - i : 8);
		}
	} while (all_zero(out, n));
}

bool trace_should_sample(const struct trace_ctx *parent, double ratio)
{
	if (parent)
		return parent->flags & 1;
	if (ratio >= 1.0)
		return true;
	if (ratio <= 0.0)
		return false;
	return (double)(rng_next() >> 11) * 0x1.0p-53 < ratio;
}

/* Unix time in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- spans ---- */

struct span *span_start(const char *name, enum span_kind kind, const struct trace_ctx *parent)
{
	struct tracer *t = trace_current;
	if (!t || !trace_should_sample(parent, t->ratio))
		return NULL;
	struct span *s = malloc(sizeof *s);
	if (!s)
		return NULL;
	memset(s, 0, offsetof(struct span, ctx.state));
	memset(&s->has_parent, 0, offsetof(struct span, attrs) - offsetof(struct span, has_parent));
	s->ctx.state[0] = '\0';
	if (name && !(s->name = strdup(name))) {
		free(s);
		return NULL;
	}
	s->kind = kind;
	if (parent) {
		memcpy(s->ctx.trace_id, parent->trace_id, 16);
		memcpy(s->parent_id, parent->span_id, 8);
		s->has_parent = true;
		memcpy(s->ctx.state, parent->state, strlen(parent->state) + 1);
	} else {
		random_id(s->ctx.trace_id, 16);
	}
	random_id(s->ctx.span_id, 8);
	s->ctx.flags = 1;
	trace_hex(s->ctx.trace_id, 16, s->trace_hex);
	s->start = now_ns();
	return s;
}

const struct trace_ctx *span_ctx(const struct span *s) { return &s->ctx; }
const char *span_trace_hex(const struct span *s) { return s ? s->trace_hex : NULL; }
bool span_failed(const struct span *s) { return s && s->error; }

void span_rename(struct span *s, const char *name)
{
	char *n = s && name ? strdup(name) : NULL;
	if (!n)
		return;
	free(s->name);
	s->name = n;
}

/* True when P is a copy in S's pool (not to be freed). */
static bool in_pool(const struct span *s, const char *p)
{
	return p >= s->pool && p < s->pool + sizeof s->pool;
}

/* Frees attribute A's string unless S's pool holds it. */
static void attr_release(struct span *s, struct attr *a)
{
	if (a->type == ATTR_STR && !in_pool(s, a->v.s))
		free(a->v.s);
}

/* A NUL-terminated copy of V (N bytes): in S's pool while it has room. */
static char *span_copy(struct span *s, const char *v, size_t n)
{
	if (n < sizeof s->pool - s->pool_used) {
		char *p = s->pool + s->pool_used;
		memcpy(p, v, n);
		p[n] = '\0';
		s->pool_used += (uint16_t)(n + 1);
		return p;
	}
	return strndup(v, n);
}

/* The next attribute slot of S for KEY: KEY's own when set already. */
static struct attr *attr_slot(struct span *s, const char *key)
{
	for (uint8_t i = 0; i < s->nattrs; i++)
		if (strcmp(s->attrs[i].key, key) == 0) {
			attr_release(s, &s->attrs[i]);
			s->attrs[i].type = ATTR_INT;
			return &s->attrs[i];
		}
	if (s->nattrs == MAX_ATTRS)
		return NULL;
	struct attr *a = &s->attrs[s->nattrs++];
	a->key = key;
	a->type = ATTR_INT;   /* nothing to free until a string is set */
	a->v.i = 0;
	return a;
}

void span_attr_strn(struct span *s, const char *key, const char *v, size_t n)
{
	if (!s || !v)
		return;
	struct attr *a = attr_slot(s, key);
	char *copy = a ? span_copy(s, v, n) : NULL;
	if (!copy) {
		if (a)
			a->v.i = 0;   /* ATTR_INT: nothing to free */
		return;
	}
	a->key = key;
	a->type = ATTR_STR;
	a->v.s = copy;
}

void span_attr_str(struct span *s, const char *key, const char *v)
{
	if (v)
		span_attr_strn(s, key, v, strlen(v));
}

void span_attr_int(struct span *s, const char *key, long long v)
{
	struct attr *a = s ? attr_slot(s, key) : NULL;
	if (!a)
		return;
	a->key = key;
	a->type = ATTR_INT;
	a->v.i = v;
}

void span_attr_bool(struct span *s, const char *key, bool v)
{
	struct attr *a = s ? attr_slot(s, key) : NULL;
	if (!a)
		return;
	a->key = key;
	a->type = ATTR_BOOL;
	a->v.b = v;
}

void span_event(struct span *s, const char *name, const char *k1, const char *v1,
		const char *k2, const char *v2, const char *k3, const char *v3)
{
	if (!s || s->nevents == MAX_EVENTS)
		return;
	if (!s->events && !(s->events = calloc(MAX_EVENTS, sizeof *s->events)))
		return;
	struct sevent *e = &s->events[s->nevents];
	memset(e, 0, sizeof *e);
	if (!(e->name = strdup(name)))
		return;
	e->time = now_ns();
	const char *k[] = { k1, k2, k3 }, *v[] = { v1, v2, v3 };
	for (int i = 0, j = 0; i < EVENT_ATTRS; i++)
		if (k[i] && v[i] && (e->val[j] = strdup(v[i])))
			e->key[j++] = k[i];
	s->nevents++;
}

void span_error(struct span *s, const char *message)
{
	if (!s)
		return;
	s->error = true;
	free(s->status_msg);
	s->status_msg = message ? strdup(message) : NULL;
}

void span_discard(struct span *s)
{
	if (!s)
		return;
	for (uint8_t i = 0; i < s->nattrs; i++)
		attr_release(s, &s->attrs[i]);
	for (uint8_t i = 0; i < s->nevents; i++) {
		free(s->events[i].name);
		for (int j = 0; j < EVENT_ATTRS; j++)
			free(s->events[i].val[j]);
	}
	free(s->events);
	free(s->name);
	free(s->status_msg);
	free(s);
}

static void export_batch(struct tracer *t);

void span_end(struct span *s)
{
	struct tracer *t = trace_current;
	if (!s)
		return;
	s->end = now_ns();
	if (!t || t->count == t->qsize) {
		if (t)
			t->st.dropped++;
		span_discard(s);
		return;
	}
	t->q[(t->head + t->count++) % t->qsize] = s;
	if (t->count >= t->batch && !t->inflight)
		export_batch(t);
}

/* ---- the OTLP/HTTP JSON body ---- */

/* Appends S (N bytes) as a JSON string. */
static void put_str(struct buf *b, const char *s, size_t n)
{
	PUT(b, "\"");
	size_t from = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		buf_append(b, s + from, i - from);
		char esc[8];
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof esc, "\\%c", c);
		else
			snprintf(esc, sizeof esc, "\\u%04x", c);
		buf_append(b, esc, strlen(esc));
		from = i + 1;
	}
	buf_append(b, s + from, n - from);
	PUT(b, "\"");
}

/* Appends V in decimal (a NEG one with a minus). */
static void put_dec(struct buf *b, unsigned long long v, bool neg)
{
	char t[24];
	int i = sizeof t;
	do
		t[--i] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	if (neg)
		t[--i] = '-';
	buf_append(b, t + i, sizeof t - (size_t)i);
}

/* Appends S, a C string, as a JSON string. */
static void put_cstr(struct buf *b, const char *s)
{
	put_str(b, s, strlen(s));
}

/* Appends one {"key":..., "value":{...}} of a string value. */
static void put_kv_str(struct buf *b, const char *key, const char *v)
{
	PUT(b, "{\"key\":");
	put_cstr(b, key);
	PUT(b, ",\"value\":{\"stringValue\":");
	put_cstr(b, v);
	PUT(b, "}}");
}

/* Appends attribute A. */
static void put_attr(struct buf *b, const struct attr *a)
{
	if (a->type == ATTR_STR) {
		put_kv_str(b, a->key, a->v.s);
		return;
	}
	PUT(b, "{\"key\":");
	put_cstr(b, a->key);
	if (a->type == ATTR_INT) {
		PUT(b, ",\"value\":{\"intValue\":\"");
		put_dec(b, a->v.i < 0 ? 0ULL - (unsigned long long)a->v.i : (unsigned long long)a->v.i,
			a->v.i < 0);
		PUT(b, "\"}}");
	} else if (a->v.b) {
		PUT(b, ",\"value\":{\"boolValue\":true}}");
	} else {
		PUT(b, ",\"value\":{\"boolValue\":false}}");
	}
}

/* Appends span S. */
static void put_span(struct buf *b, const struct span *s)
{
	char sid[17], pid[17];
	trace_hex(s->ctx.span_id, 8, sid);
	PUT(b, "{\"traceId\":\"");
	buf_append(b, s->trace_hex, 32);
	PUT(b, "\",\"spanId\":\"");
	buf_append(b, sid, 16);
	PUT(b, "\",");
	if (s->has_parent) {
		trace_hex(s->parent_id, 8, pid);
		PUT(b, "\"parentSpanId\":\"");
		buf_append(b, pid, 16);
		PUT(b, "\",");
	}
	if (s->ctx.state[0]) {
		PUT(b, "\"traceState\":");
		put_cstr(b, s->ctx.state);
		PUT(b, ",");
	}
	PUT(b, "\"name\":");
	put_cstr(b, s->name ? s->name : "");
	if (s->kind == SPAN_SERVER)
		PUT(b, ",\"kind\":2");
	else
		PUT(b, ",\"kind\":3");
	PUT(b, ",\"startTimeUnixNano\":\"");
	put_dec(b, s->start, false);
	PUT(b, "\",\"endTimeUnixNano\":\"");
	put_dec(b, s->end, false);
	PUT(b, "\",\"attributes\":[");
	for (uint8_t i = 0; i < s->nattrs; i++) {
		if (i)
			PUT(b, ",");
		put_attr(b, &s->attrs[i]);
	}
	PUT(b, "],\"events\":[");
	for (uint8_t i = 0; i < s->nevents; i++) {
		const struct sevent *e = &s->events[i];
		if (i)
			PUT(b, ",");
		PUT(b, "{\"timeUnixNano\":\"");
		put_dec(b, e->time, false);
		PUT(b, "\",\"name\":");
		put_cstr(b, e->name);
		PUT(b, ",\"attributes\":[");
		for (int j = 0; j < EVENT_ATTRS && e->key[j]; j++) {
			if (j)
				PUT(b, ",");
			put_kv_str(b, e->key[j], e->val[j]);
		}
		PUT(b, "]}");
	}
	PUT(b, "],\"status\":{");
	if (s->error) {
		PUT(b, "\"code\":2");
		if (s->status_msg) {
			PUT(b, ",\"message\":");
			put_cstr(b, s->status_msg);
		}
	}
	PUT(b, "}}");
}

/* ---- export ---- */

/* The export in flight ended. */
static void export_done(void *arg, const struct fetch_res *res)
{
	struct tracer *t = arg;
	t->inflight = NULL;
	if (res->ok && res->status >= 200 && res->status < 300) {
		t->st.exported += t->inflight_n;
	} else {
		t->st.failed++;
		if (res->ok)
			log_debug("telemetry: export of %zu spans failed: status %ld", t->inflight_n,
				  res->status);
		else
			log_debug("telemetry: export of %zu spans failed: %s", t->inflight_n, res->error);
	}
	t->inflight_n = 0;
	if (t->count >= t->batch)
		export_batch(t);
}

/* Sends up to a batch of the queued spans (one export in flight at most). */
static void export_batch(struct tracer *t)
{
	if (t->inflight || t->count == 0)
		return;
	struct buf b = BUF_INIT;
	size_t n = t->count < t->batch ? t->count : t->batch;
	buf_reserve(&b, 256 + n * 1024);   /* about what a span takes: few reallocs */
	PUT(&b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
	put_kv_str(&b, "service.name", t->service);
	buf_printf(&b, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"mcp-chain\",\"version\":\"%s\"},"
		   "\"spans\":[", MCPC_VERSION);
	for (size_t i = 0; i < n; i++) {
		struct span *s = t->q[t->head];
		t->head = (t->head + 1) % t->qsize;
		t->count--;
		if (i)
			PUT(&b, ",");
		put_span(&b, s);
		span_discard(s);
	}
	PUT(&b, "]}]}]}");
	char why[200];
	struct fetch_req rq = {
		.url = t->endpoint, .headers = (const char *const *)t->headers,
		.body = b.data, .body_len = b.len, .content_type = "application/json",
		.timeout_ms = (long)(t->timeout * 1000), .max_body = 64 * 1024, .allow_http = true,
	};
	t->inflight = b.data ? fetch_start(&rq, export_done, t, why, sizeof why) : NULL;
	buf_release(&b);
	if (t->inflight) {
		t->inflight_n = n;
	} else {
		t->st.failed++;
		log_debug("telemetry: export of %zu spans not sent: %s", n, b.data ? why : "no memory");
	}
}

/* Every exportInterval: what waits goes. */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	export_batch(w->data);
}

/* ---- module decisions as span events ---- */

/* An event of observe.h: a module's decision becomes an event of its request's server span. */
static void on_observe(void *arg, const struct obs_event *e)
{
	(void)arg;
	struct span *s = e->kind == OBS_DECISION && e->ex ? chain_request_span(e->ex) : NULL;
	if (!s || !e->what)
		return;
	char name[64], code[16];
	snprintf(name, sizeof name, "mcp_chain.%s", e->what);
	snprintf(code, sizeof code, "%d", e->code);
	span_event(s, name, "mcp_chain.module", e->source, "rpc.response.status_code",
		   e->code ? code : NULL, "mcp_chain.detail", e->detail);
}

/* ---- the tracer ---- */

struct tracer *tracer_new(const struct cfg_telemetry *c, char *why, size_t n)
{
	if (!c->endpoint || strncmp(c->endpoint, "http", 4) != 0) {
		snprintf(why, n, "telemetry: the endpoint must be an http(s) URL");
		return NULL;
	}
	if (curl_ev_setup() < 0) {   /* now, not on the first export in the middle of traffic */
		snprintf(why, n, "telemetry: libcurl cannot be loaded");
		return NULL;
	}
	struct tracer *t = calloc(1, sizeof *t);
	size_t nh = 0;
	while (c->headers && c->headers[nh])
		nh++;
	if (t) {
		t->qsize = c->queue_size ? c->queue_size : 4096;
		t->batch = c->batch_size ? c->batch_size : 512;
		if (t->batch > t->qsize)
			t->batch = t->qsize;
		t->q = calloc(t->qsize, sizeof *t->q);
		t->headers = calloc(nh + 1, sizeof *t->headers);
		t->endpoint = strdup(c->endpoint);
		t->service = strdup(c->service_name ? c->service_name : "mcp-chain");
	}
	bool ok = t && t->q && t->headers && t->endpoint && t->service;
	for (size_t i = 0; ok && i < nh; i++)
		ok = (t->headers[i] = strdup(c->headers[i])) != NULL;
	if (!ok) {
		tracer_free(t);
		snprintf(why, n, "telemetry: out of memory");
		return NULL;
	}
	t->ratio = c->sampling;
	t->interval = c->export_interval > 0 ? c->export_interval : 1.0;
	t->timeout = c->export_timeout > 0 ? c->export_timeout : 5.0;
	ev_timer_init(&t->tick, on_tick, t->interval, t->interval);
	t->tick.data = t;
	ev_timer_start(EV_DEFAULT, &t->tick);
	ev_unref(EV_DEFAULT);   /* the tick alone keeps no loop running */
	return t;
}

void trace_use(struct tracer *t)
{
	if (t && !trace_current)
		observe_listen(on_observe, NULL);
	else if (!t && trace_current)
		observe_unlisten(on_observe, NULL);
	trace_current = t;
}

/* True when T has nothing left to send (ext loops poll it). */
static bool flushed(const struct tracer *t)
{
	return !t->inflight && t->count == 0;
}

/* The flush's deadline: wakes the loop (nothing else to do). */
static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

void tracer_flush(struct tracer *t, double wait)
{
	if (!t)
		return;
	bool over = false;
	ev_tstamp end = ev_time() + wait;   /* also by the clock: a watcher that
					     * breaks every iteration skips timers */
	ev_timer deadline;
	ev_timer_init(&deadline, on_deadline, wait, 0.);
	deadline.data = &over;
	ev_timer_start(EV_DEFAULT, &deadline);
	while (!flushed(t) && !over && ev_time() < end) {
		if (!t->inflight)
			export_batch(t);
		if (!t->inflight)
			break;   /* it could not be sent (counted failed) */
		ev_run(EV_DEFAULT, EVRUN_ONCE);
	}
	ev_timer_stop(EV_DEFAULT, &deadline);
}

void tracer_free(struct tracer *t)
{
	if (!t)
		return;
	if (trace_current == t)
		trace_use(NULL);
	if (ev_is_active(&t->tick)) {
		ev_ref(EV_DEFAULT);
		ev_timer_stop(EV_DEFAULT, &t->tick);
	}
	fetch_cancel(t->inflight);
	for (size_t i = 0; t->q && i < t->count; i++)
		span_discard(t->q[(t->head + i) % t->qsize]);
	free(t->q);
	for (size_t i = 0; t->headers && t->headers[i]; i++)
		free(t->headers[i]);
	free(t->headers);
	free(t->endpoint);
	free(t->service);
	free(t);
}

void trace_stats(const struct tracer *t, struct trace_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!t)
		return;
	*out = t->st;
	out->queued = t->count;
}
