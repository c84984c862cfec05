/*
 * http_cluster.c - the HTTP front as one of several instances of a
 * service ("cluster"): sessions whose id any instance can continue.
 *
 * A new session's id is sealed (http_sid.h) with what continuing it
 * needs: the params of its client's initialize (protocol version asked,
 * capabilities, clientInfo) and whom its bearer token stood for. A
 * request naming an id this instance does not hold, sealed with the
 * deployment's keys and not expired, makes the session here: its chain
 * is made as for a new one (session-scoped backends start for it), the
 * backends are initialized with that client's params, and the session
 * goes on without a new initialize (session_resume).
 *
 * What a session changes afterwards and keeps (its log level, its
 * subscriptions) and its end by DELETE are kept in Redis when the store is
 * configured (redis.h), under PREFIX "sess:" HASH, so that another
 * instance asks it again and refuses a deleted session. Without Redis a
 * moved session has its backends' defaults, and a deleted id is refused
 * only by the instance that saw the DELETE.
 */
#include <ev.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <strings.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch.h"
#include "http_conn.h"
#include "http_int.h"
#include "http_parse.h"
#include "log.h"
#include "msg.h"
#include "redis.h"
#include "rpc.h"
#include "session.h"
#include "stateless.h"

#define GONE_MAX 65536   /* deleted ids remembered here (beyond: Redis's) */

/* Seconds since the epoch (sealed ids outlive the process). */
static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void http_front_set_cluster(struct http_front *f, const unsigned char (*keys)[32], size_t n,
			    const char *tag, double max_age, bool store_closed)
{
	f->store_closed = store_closed;
	free(f->keys);
	free(f->tag);
	f->keys = NULL;
	f->tag = NULL;
	memset(&f->sealing, 0, sizeof f->sealing);
	if (n == 0 || !tag)
		return;
	f->keys = malloc(n * 32);
	f->tag = strdup(tag);
	if (!f->keys || !f->tag) {
		free(f->keys);
		free(f->tag);
		f->keys = NULL;
		f->tag = NULL;
		log_error("http: out of memory: session ids stay random");
		return;
	}
	memcpy(f->keys, keys, n * 32);
	f->sealing.keys = (const unsigned char (*)[32])f->keys;
	f->sealing.nkeys = n;
	f->sealing.tag = f->tag;
	f->sealing.max_age = max_age;
	/* requestStates too: verified by every instance, naming this one */
	stateless_use_keys(keys, n, tag);
}

void http_cluster_free(struct http_front *f)
{
	size_t n;
	void **all = hmap_drain(&f->gone, &n);
	for (size_t i = 0; i < n; i++)
		free(all[i]);
	free(all);
	hmap_release(&f->gone);
	if (f->keys)
		OPENSSL_cleanse(f->keys, f->sealing.nkeys * 32);
	free(f->keys);
	free(f->tag);
	http_cluster_free_peers(f);
}

/* Hex of the 32 bytes at B into OUT (65 bytes). */
static void hex32(const unsigned char *b, char *out)
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* The store's key of SID's session (and SUFFIX), into OUT (N bytes). */
static void store_key(const struct redis *rd, const char *sid, const char *suffix, char *out,
		      size_t n)
{
	unsigned char d[32];
	char h[65];
	unsigned len = 0;
	EVP_Digest(sid, strlen(sid), d, &len, EVP_sha256(), NULL);
	hex32(d, h);
	snprintf(out, n, "%ssess:%.32s%s", redis_prefix(rd), h, suffix);
}

char *http_cluster_sid(struct http_front *f, struct hreq *r)
{
	if (!f->sealing.nkeys)
		return NULL;
	json_t *params = json_object_get(msg_tree(&r->msg), "params");
	json_t *p = json_object();
	static const char *const keep[] = { "protocolVersion", "capabilities", "clientInfo", NULL };
	for (size_t i = 0; keep[i]; i++) {
		json_t *v = json_object_get(params, keep[i]);
		if (v)
			json_object_set(p, keep[i], v);
	}
	json_t *st = json_pack("{s:o}", "p", p);
	unsigned char who[32];
	if (st && http_auth_subject(r, who)) {
		char h[65];
		hex32(who, h);
		json_object_set_new(st, "s", json_string(h));
	}
	char *sid = st ? http_sid_seal(&f->sealing, st, wall_now()) : NULL;
	json_decref(st);
	if (!sid)
		log_warn("http: a new session's id is random, not sealed (its initialize declares "
			 "more than a session id carries): only this instance can continue it");
	return sid;
}

/* Remembers that SID was deleted, until it would have expired anyway. */
static void remember_gone(struct http_front *f, const char *sid)
{
	if (hmap_get(&f->gone, sid, strlen(sid)))
		return;
	if (f->gone.count >= GONE_MAX) {
		log_warn("http: %d deleted session ids remembered: the next are refused only "
			 "where Redis says so", GONE_MAX);
		return;
	}
	char *k = strdup(sid);
	if (k && hmap_put(&f->gone, k, strlen(k), k) < 0)
		free(k);
}

/* The Redis answer of a session being continued: what it held. */
static void on_held(void *arg, enum redis_status status, const struct redis_reply *rep)
{
	struct hsess *hs = arg;
	struct http_front *f = hs->f;
	struct redis *rd = redis_default();
	char why[300];
	hs->resume_op = NULL;
	json_t *params = hs->resume_params;
	hs->resume_params = NULL;
	json_t *replay = json_array();
	if (status != REDIS_OK || !rep || rep->type != REDIS_ARR || rep->n != 2) {
		bool open = !f->store_closed;
		if (rd)
			redis_count_fallback(rd, "sessions", open);
		if (!open) {
			json_decref(params);
			json_decref(replay);
			http_sess_end(hs, "Redis cannot say what the session held (cluster.onStoreDown: "
				      "closed)");
			return;
		}
	} else {
		const struct redis_reply *h = &rep->elem[0], *subs = &rep->elem[1];
		for (size_t i = 0; h->type == REDIS_ARR && i + 1 < h->n; i += 2) {
			const char *field = h->elem[i].str, *val = h->elem[i + 1].str;
			if (!field || !val)
				continue;
			if (strcmp(field, "gone") == 0) {
				remember_gone(f, hs->sid);
				json_decref(params);
				json_decref(replay);
				http_sess_end(hs, "deleted by its client (on another instance)");
				return;
			}
			if (strcmp(field, "level") == 0)
				json_array_append_new(replay, json_pack("{s:s,s:{s:s}}", "method",
					"logging/setLevel", "params", "level", val));
		}
		for (size_t i = 0; subs->type == REDIS_ARR && i < subs->n; i++)
			if (subs->elem[i].str)
				json_array_append_new(replay, json_pack("{s:s,s:{s:s}}", "method",
					"resources/subscribe", "params", "uri", subs->elem[i].str));
	}
	if (session_resume(hs->s, params, replay, why, sizeof why) < 0)
		log_warn("http: session #%u cannot be continued: %s", hs->serial, why);
	json_decref(params);
	json_decref(replay);
}

static const char HELD_SCRIPT[] =
	"return {redis.call('HGETALL', KEYS[1]), redis.call('SMEMBERS', KEYS[2])}";

unsigned http_cluster_resume(struct http_front *f, struct hc_conn *c, const char *sid,
			     struct hsess **out, const char **why)
{
	*out = NULL;
	*why = "Session not found";
	if (!f->sealing.nkeys || !http_sid_sealed(sid, NULL))
		return 404;
	if (hmap_get(&f->gone, sid, strlen(sid))) {
		*why = "Session not found: its client deleted it";
		return 404;
	}
	const char *bad;
	json_t *st = http_sid_open(&f->sealing, sid, wall_now(), &bad);
	if (!st) {
		log_info("http: a session id refused: %s", bad);
		return 404;
	}
	if (f->draining || f->stopped) {
		json_decref(st);
		*why = "Service Unavailable: mcp-chain is shutting down";
		return 503;
	}
	const char *s = json_string_value(json_object_get(st, "s"));
	unsigned char who[32], bound[32];
	struct hreq *r = hc_ctx(c);
	if (s) {
		for (int i = 0; i < 32; i++) {
			unsigned x = 0;
			if (sscanf(s + 2 * i, "%2x", &x) != 1)
				x = 0;
			bound[i] = (unsigned char)x;
		}
		if (http_auth_subject(r, who) && CRYPTO_memcmp(who, bound, 32) != 0) {
			json_decref(st);
			*why = "Unauthorized: this session belongs to another bearer token (another "
			       "principal)";
			return 401;
		}
	}
	char refused[300] = "";
	struct hsess *hs = http_sess_open(f, c, sid, refused, sizeof refused);
	if (!hs) {
		json_decref(st);
		log_warn("http: cannot continue a session here: %s", refused[0] ? refused :
			 "out of memory");
		*why = "Service Unavailable: cannot continue the session here now";
		return 503;
	}
	if (s) {
		memcpy(hs->cred, bound, 32);
		hs->has_cred = true;
	}
	hs->resumed = true;
	log_info("http: session #%u continued here (made by instance \"%.*s\")", hs->serial,
		 (int)(strchr(sid, '.') - sid), sid);
	json_t *params = json_incref(json_object_get(st, "p"));
	json_decref(st);
	session_resume_hold(hs->s);
	struct redis *rd = redis_default();
	if (rd) {
		char k1[200], k2[200];
		store_key(rd, sid, "", k1, sizeof k1);
		store_key(rd, sid, ":subs", k2, sizeof k2);
		const char *keys[] = { k1, k2 };
		hs->resume_params = params;
		hs->resume_op = redis_eval(rd, HELD_SCRIPT, on_held, hs, 2, keys, 0, NULL);
		if (!hs->resume_op)   /* out of memory: on as without the store */
			on_held(hs, REDIS_DOWN, NULL);
	} else {
		char w[300];
		if (session_resume(hs->s, params, NULL, w, sizeof w) < 0)
			log_warn("http: session #%u cannot be continued: %s", hs->serial, w);
		json_decref(params);
	}
	*out = hs;
	return 0;
}

/* Sends a command whose answer nobody waits for (failures are counted by
 * the store). */
static void fire(struct redis *rd, int argc, const char *const *argv)
{
	redis_cmd(rd, NULL, NULL, argc, argv, NULL);
}

void http_cluster_note(struct hsess *hs, struct msg *m)
{
	struct redis *rd = redis_default();
	const char *method = msg_method(m);
	if (!rd || !hs->f->sealing.nkeys || !method || !http_sid_sealed(hs->sid, NULL) ||
	    (strcmp(method, "logging/setLevel") && strcmp(method, "resources/subscribe") &&
	     strcmp(method, "resources/unsubscribe")))
		return;
	json_t *params = json_object_get(msg_tree(m), "params");
	char k[200], ttl[32];
	snprintf(ttl, sizeof ttl, "%.0f", hs->f->sealing.max_age);
	if (strcmp(method, "logging/setLevel") == 0) {
		const char *level = json_string_value(json_object_get(params, "level"));
		if (!level)
			return;
		store_key(rd, hs->sid, "", k, sizeof k);
		fire(rd, 4, (const char *[]){ "HSET", k, "level", level });
	} else {
		const char *uri = json_string_value(json_object_get(params, "uri"));
		if (!uri)
			return;
		store_key(rd, hs->sid, ":subs", k, sizeof k);
		fire(rd, 3, (const char *[]){ method[10] == 's' ? "SADD" : "SREM", k, uri });
	}
	fire(rd, 3, (const char *[]){ "EXPIRE", k, ttl });
}

bool http_cluster_delete(struct http_front *f, const char *sid)
{
	const char *bad;
	if (!f->sealing.nkeys || !http_sid_sealed(sid, NULL))
		return false;
	json_t *st = http_sid_open(&f->sealing, sid, wall_now(), &bad);
	if (!st)
		return false;
	json_decref(st);
	remember_gone(f, sid);
	struct redis *rd = redis_default();
	if (rd) {
		char k[200], ttl[32];
		store_key(rd, sid, "", k, sizeof k);
		snprintf(ttl, sizeof ttl, "%.0f", f->sealing.max_age);
		fire(rd, 4, (const char *[]){ "HSET", k, "gone", "1" });
		fire(rd, 3, (const char *[]){ "EXPIRE", k, ttl });
	}
	return true;
}

void http_cluster_forget(struct hsess *hs)
{
	if (hs->resume_op)
		redis_forget(hs->resume_op);
	hs->resume_op = NULL;
	json_decref(hs->resume_params);
	hs->resume_params = NULL;
}

/* ---- 2026-07-28 retries ---- */

#define FORWARDED_HEADER "Mcp-Chain-Forwarded"

void http_front_set_peers(struct http_front *f, char *const *tags, char *const *urls,
			  bool rs_closed)
{
	size_t n = 0;
	while (tags && tags[n])
		n++;
	f->rs_closed = rs_closed;
	f->peer_tags = calloc(n + 1, sizeof *f->peer_tags);
	f->peer_urls = calloc(n + 1, sizeof *f->peer_urls);
	for (size_t i = 0; f->peer_tags && f->peer_urls && i < n; i++) {
		f->peer_tags[i] = strdup(tags[i]);
		f->peer_urls[i] = strdup(urls[i]);
	}
}

/* Frees a NULL-terminated vector. */
static void strv_release(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void http_cluster_free_peers(struct http_front *f)
{
	strv_release(f->peer_tags);
	strv_release(f->peer_urls);
	f->peer_tags = f->peer_urls = NULL;
}

/* Answers R with a JSON-RPC error for ID (borrowed) and STATUS. */
static int refuse(struct hreq *r, unsigned status, json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int refuse(struct hreq *r, unsigned status, json_t *id, int code, const char *fmt, ...)
{
	char text[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	json_t *e = rpc_error(id, code, text, NULL);
	char *s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	int rc = r->conn ? http_stream_reply(r, r->conn, status, JSON_TYPE, s ? s : "",
					     s ? strlen(s) : 0, NULL) : 0;
	free(s);
	return rc;
}

/* The holding instance answered (or not): its answer is R's. */
static void on_forwarded(void *arg, const struct fetch_res *res)
{
	struct hreq *r = arg;
	r->fwd = NULL;
	if (r->conn && res->ok) {
		http_stream_reply(r, r->conn, (unsigned)res->status,
				  res->content_type ? res->content_type : JSON_TYPE,
				  res->body, res->body_len, NULL);
	} else if (r->conn) {
		json_t *id = r->nids == 1 ? msg_val_json(&r->ids[0]) : NULL;
		refuse(r, 503, id, -32000, "the instance that holds the call this retry continues "
		       "did not answer (%s): the call is lost with it; start it again", res->error);
		json_decref(id);
	}
	if (r->conn)
		hc_resume(r->conn);
	http_stream_unref(r);
}

/* Forwards R to the instance tagged TAG: 0 (held), or -1. */
static int forward(struct http_front *f, struct hreq *r, const char *tag, json_t *id)
{
	const char *base = NULL;
	for (size_t i = 0; f->peer_tags && f->peer_tags[i]; i++)
		if (strcmp(f->peer_tags[i], tag) == 0)
			base = f->peer_urls[i];
	if (!base)
		return refuse(r, 400, id, RPC_INVALID_PARAMS, "requestState refused: the call it "
			      "continues is held by instance \"%s\", which this instance cannot reach "
			      "(not in cluster.instances)", tag);
	if (hf_header(r->conn, FORWARDED_HEADER))
		return refuse(r, 400, id, RPC_INVALID_PARAMS, "requestState refused: the call it "
			      "continues is held by instance \"%s\" (forwarded once already)", tag);
	/* the request as it came: its headers (the hop's own aside), its body */
	const char *hdrs[HP_MAX_HEADERS + 2];
	char *own[HP_MAX_HEADERS + 2];
	size_t nh = 0, no = 0;
	const char *name, *value;
	size_t nl;
	for (size_t i = 0; hc_header_at(r->conn, i, &name, &nl, &value) && nh < HP_MAX_HEADERS; i++) {
		static const char *const skip[] = { "host", "content-length", "connection",
			"transfer-encoding", "keep-alive", "expect", "te", "upgrade", "content-type",
			FORWARDED_HEADER, NULL };
		bool hop = false;
		for (size_t k = 0; skip[k]; k++)
			hop |= strlen(skip[k]) == nl && strncasecmp(name, skip[k], nl) == 0;
		if (hop)
			continue;
		size_t len = nl + strlen(value) + 3;
		char *h = malloc(len);
		if (!h)
			continue;
		snprintf(h, len, "%.*s: %s", (int)nl, name, value);
		hdrs[nh++] = own[no++] = h;
	}
	char fw[64];
	snprintf(fw, sizeof fw, FORWARDED_HEADER ": %s", f->tag);
	hdrs[nh++] = fw;
	hdrs[nh] = NULL;
	char url[1024], why[300];
	snprintf(url, sizeof url, "%s%s", base, f->path);
	size_t blen = buf_pending(&r->body);
	struct fetch_req rq = {
		.url = url,
		.headers = hdrs,
		.body = blen ? r->body.data : "",
		.body_len = blen,
		.content_type = "application/json",
		.timeout_ms = (long)((f->input_ttl > 0 ? f->input_ttl : 300) * 1000),
		.max_body = f->max_message,
		.allow_http = true,
	};
	r->refs++;
	r->fwd = fetch_start(&rq, on_forwarded, r, why, sizeof why);
	for (size_t i = 0; i < no; i++)
		free(own[i]);
	if (!r->fwd) {
		r->refs--;
		return refuse(r, 503, id, -32000, "the instance that holds the call this retry "
			      "continues (\"%s\") cannot be reached: %s", tag, why);
	}
	log_debug("http: a 2026-07-28 retry forwarded to instance \"%s\", which holds its call",
		  tag);
	return 0;
}

/* Redis answered whether R's requestState was used already. */
static void on_recorded(void *arg, enum redis_status status, const struct redis_reply *rep)
{
	struct hreq *r = arg;
	r->rs_op = NULL;
	if (status == REDIS_OK && rep->type == REDIS_NIL) {
		r->rs = RS_UNCHECKED + 100;   /* used: refused when taken again */
	} else if (status == REDIS_OK && rep->type != REDIS_ERR) {
		r->rs = RS_FIRST;
	} else {
		struct redis *rd = redis_default();
		if (rd)
			redis_count_fallback(rd, "requestState", !r->f->rs_closed);
		r->rs = r->f->rs_closed ? RS_UNCHECKED + 101 : RS_FIRST;
	}
	if (r->conn)
		hc_resume(r->conn);   /* taken again (on_resume) */
	http_stream_unref(r);
}

/* Records R's STATE as used in the store: true when R is answered or held
 * meanwhile (*RC), false when it may go on (recorded first, or the store
 * down and failing open). */
static bool record_once(struct http_front *f, struct redis *rd, struct hreq *r,
			const char *state, json_t *id, int *rc)
{
	if (r->rs == RS_UNCHECKED) {
		unsigned char d[32];
		char h[65], key[200], ttl[32];
		unsigned len = 0;
		EVP_Digest(state, strlen(state), d, &len, EVP_sha256(), NULL);
		hex32(d, h);
		snprintf(key, sizeof key, "%srs:%s", redis_prefix(rd), h);
		snprintf(ttl, sizeof ttl, "%.0f", (f->input_ttl > 0 ? f->input_ttl : 300) * 2);
		r->rs = RS_CHECKING;
		r->refs++;
		r->rs_op = redis_cmd(rd, on_recorded, r, 6,
				     (const char *[]){ "SET", key, "1", "NX", "EX", ttl }, NULL);
		if (r->rs_op) {
			*rc = 0;   /* held: on_recorded takes it again */
			return true;
		}
		r->refs--;     /* out of memory: as when the store is down */
		r->rs = f->rs_closed ? RS_UNCHECKED + 101 : RS_FIRST;
	}
	if (r->rs == RS_UNCHECKED + 100) {
		*rc = refuse(r, 400, id, RPC_INVALID_PARAMS, "requestState refused: it was already "
			     "used (a retry is accepted once, on any instance)");
		return true;
	}
	if (r->rs == RS_UNCHECKED + 101) {
		*rc = refuse(r, 503, id, -32000, "Service Unavailable: the single use of a "
			     "requestState cannot be checked now (Redis is down; "
			     "cluster.onStoreDown.requestState: closed)");
		return true;
	}
	return false;
}

bool http_cluster_retry(struct http_front *f, struct hreq *r, const char *state, json_t *id,
			bool held_here, int *rc)
{
	char tag[40];
	/* a backend's own state is its own to check (it may well repeat one
	 * for another call); ours are accepted once across the instances */
	if (!stateless_state_holder(state, tag, sizeof tag))
		return false;
	struct redis *rd = redis_default();
	if (rd && !hf_header(r->conn, FORWARDED_HEADER) && record_once(f, rd, r, state, id, rc))
		return true;
	if (held_here || !tag[0] || !f->tag || strcmp(tag, f->tag) == 0)
		return false;   /* ours to continue, or to say the call has ended */
	*rc = forward(f, r, tag, id);
	return true;
}

void http_cluster_req_end(struct hreq *r)
{
	if (r->fwd) {
		fetch_cancel(r->fwd);
		r->fwd = NULL;
		r->refs--;   /* on_forwarded's, which will not come */
	}
	if (r->rs_op) {
		redis_forget(r->rs_op);
		r->rs_op = NULL;
		r->refs--;
	}
}
