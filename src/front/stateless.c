/*
 * stateless.c - a 2026-07-28 client session's needs beyond the handshake
 * era: resultType, input_required round trips, requestState, listens.
 * See stateless.h.
 */
#include "stateless.h"

#include <ev.h>
#include <inttypes.h>
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "chain.h"
#include "era.h"
#include "log.h"
#include "rpc.h"

#define ROUND_ID_PREFIX "mcpc-round-"
#define SUB_ID_PREFIX "mcpc-sub-"
#define MAC_LEN 32

/* A client call waiting for the client's answers to its input requests. */
struct round {
	struct round *next;
	struct stateless *st;
	uint64_t serial;        /* the call's id at the chain: ROUND_ID_PREFIX serial */
	uint64_t gen;           /* the requestState this round accepts */
	char method[64];        /* the call's method: a retry must repeat it */
	json_t *asked;          /* input request key -> the backend request's id at us */
	json_t *fresh;          /* backend requests not yet put to the client */
	json_t *held;           /* the call's response, come while waiting */
	json_t *client_id;      /* the id the client last used for the call */
	bool pre;               /* a call not sent yet: the round asks what the
				 * backends asked outside any call first, and
				 * the retry is then sent as this call; false:
				 * the call is open at the backend */
	ev_timer expiry;
	ev_timer gather;        /* asks once every request of this turn came in */
};

/* A subscriptions/listen stream. */
struct listen {
	struct listen *next;
	json_t *id;             /* the listen request's id */
	bool tools, prompts, resources;
	json_t *uris;           /* array of subscribed resource URIs */
};

struct stateless {
	struct peer *client;
	stateless_write_fn write;
	void *arg;
	double ttl;
	uint64_t instance;      /* binds requestState to this session */
	uint64_t next_serial;
	struct round *rounds;
	json_t *pending;        /* backend requests no call carried: asked on
				 * the client's next call that may be asked */
	struct listen *listens;
	int log_level;          /* the level the client's requests last asked for; -1: none */
};

/* requestState's MAC keys: [0] signs, all verify. One random key of the
 * process's own, or (cluster) derived from the deployment's key list, so
 * that every instance verifies what any made. */
#define MAC_KEYS_MAX 8
static unsigned char mac_keys[MAC_KEYS_MAX][32];
static size_t n_mac_keys;
static char mac_tag[33] = "-";   /* the instance tag states carry; "-": none */
#define mac_key (mac_keys[0])

/* ---- requestState ---- */

static int ensure_key(void)
{
	size_t got = 0;
	while (n_mac_keys == 0 && got < sizeof mac_key) {
		ssize_t n = getrandom(mac_key + got, sizeof mac_key - got, 0);
		if (n < 0)
			return -1;
		got += (size_t)n;
		n_mac_keys = got == sizeof mac_key;
	}
	return 0;
}

void stateless_use_keys(const unsigned char (*keys)[32], size_t n, const char *tag)
{
	static const char label[] = "mcp-chain requestState v1";
	n_mac_keys = 0;
	for (size_t i = 0; i < n && i < MAC_KEYS_MAX; i++) {
		unsigned int len = 32;
		HMAC(EVP_sha256(), keys[i], 32, (const unsigned char *)label, sizeof label - 1,
		     mac_keys[i], &len);
		n_mac_keys++;
	}
	snprintf(mac_tag, sizeof mac_tag, "%s", tag && *tag ? tag : "-");
}

static void hex(const unsigned char *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static int unhex(const char *s, size_t n, unsigned char *out)
{
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (x < 0)
				return -1;
			v = v * 16 + x;
		}
		out[i] = (unsigned char)v;
	}
	return 0;
}

static void mac_of_with(const unsigned char *key, const char *text, size_t n,
			unsigned char out[MAC_LEN])
{
	unsigned int len = MAC_LEN;
	HMAC(EVP_sha256(), key, 32, (const unsigned char *)text, n, out, &len);
}

static void mac_of(const char *text, size_t n, unsigned char out[MAC_LEN])
{
	mac_of_with(mac_key, text, n, out);
}

/* True when MAC is the MAC of TEXT (N bytes) under one of the keys. */
static bool mac_verifies(const char *text, size_t n, const unsigned char mac[MAC_LEN])
{
	bool ok = false;
	for (size_t i = 0; i < n_mac_keys; i++) {
		unsigned char want[MAC_LEN];
		mac_of_with(mac_keys[i], text, n, want);
		ok |= CRYPTO_memcmp(mac, want, MAC_LEN) == 0;
	}
	return ok;
}

/*
 * The state handed to the client for round R: "v1.<instance>.<serial>.
 * <gen>.<expiry>.<tag>.<method>.<mac>", the MAC over everything before it;
 * TAG the instance that holds the call ("-": none configured).
 */
static char *state_make(const struct round *r)
{
	char body[256], mac_hex[2 * MAC_LEN + 1];
	unsigned char mac[MAC_LEN];
	uint64_t expiry = (uint64_t)((ev_now(EV_DEFAULT) + r->st->ttl) * 1000.);
	int n = snprintf(body, sizeof body, "v1.%016" PRIx64 ".%" PRIu64 ".%" PRIu64 ".%" PRIu64
			 ".%s.%s", r->st->instance, r->serial, r->gen, expiry, mac_tag, r->method);
	if (n < 0 || (size_t)n >= sizeof body)
		return NULL;
	mac_of(body, (size_t)n, mac);
	hex(mac, MAC_LEN, mac_hex);
	size_t len = (size_t)n + 1 + 2 * MAC_LEN + 1;
	char *s = malloc(len);
	if (s)
		snprintf(s, len, "%s.%s", body, mac_hex);
	return s;
}

/*
 * Checks STATE for a retry of METHOD; the round it names, or NULL with
 * *WHY saying what is wrong with it.
 */
static struct round *state_check(struct stateless *st, const char *state, const char *method,
				 const char **why)
{
	const char *dot = state ? strrchr(state, '.') : NULL;
	unsigned char mac[MAC_LEN];
	if (!dot || strlen(dot + 1) != 2 * MAC_LEN || unhex(dot + 1, MAC_LEN, mac) < 0 ||
	    strncmp(state, "v1.", 3) != 0) {
		*why = "it is not a requestState mcp-chain made";
		return NULL;
	}
	if (!mac_verifies(state, (size_t)(dot - state), mac)) {
		*why = "its signature does not match (forged or altered)";
		return NULL;
	}
	uint64_t instance, serial, gen, expiry;
	int used = 0;
	if (sscanf(state, "v1.%16" SCNx64 ".%" SCNu64 ".%" SCNu64 ".%" SCNu64 ".%n", &instance, &serial,
		   &gen, &expiry, &used) != 4 || used <= 0) {
		*why = "it cannot be read";
		return NULL;
	}
	if (instance != st->instance) {
		*why = "it belongs to another session";
		return NULL;
	}
	const char *tagdot = strchr(state + used, '.');
	if (!tagdot || tagdot > dot) {
		*why = "it cannot be read";
		return NULL;
	}
	used = (int)(tagdot + 1 - state);
	if ((size_t)(dot - (state + used)) != strlen(method) ||
	    strncmp(state + used, method, strlen(method)) != 0) {
		*why = "it was issued for another method";
		return NULL;
	}
	if ((double)expiry < ev_now(EV_DEFAULT) * 1000.) {
		*why = "it has expired";
		return NULL;
	}
	for (struct round *r = st->rounds; r; r = r->next) {
		if (r->serial != serial)
			continue;
		if (r->gen != gen) {
			*why = "it was already used (a retry is accepted once)";
			return NULL;
		}
		return r;
	}
	*why = "the call it continues has ended (expired, cancelled or already answered)";
	return NULL;
}

/*
 * True when a retry carrying STATE (NULL: none) continues a round of the
 * backend's own: the servers behind speak 2026-07-28 (their input_required
 * results reach the client as they came) and STATE is not one mcp-chain
 * made. A state of ours is checked, whatever is behind.
 */
static bool backend_owns_rounds(struct stateless *st, const char *state)
{
	const char *dot = state ? strrchr(state, '.') : NULL;
	if (dot && strncmp(state, "v1.", 3) == 0 && strlen(dot + 1) == 2 * MAC_LEN)
		return false;
	struct peer *t = chain_init_target(st->client);
	return t && (t->eras & ERA_BIT_STATELESS);
}

/* ---- writing ---- */

static int write_msg(struct stateless *st, json_t *msg)
{
	return st->write(st->arg, msg, NULL);
}

static int send_response(struct stateless *st, json_t *msg, const char *asked);

/* Hands the chain a response from the client to the backend request ID. */
static void answer_backend(struct stateless *st, json_t *id, json_t *result, const char *error)
{
	json_t *r = result ? rpc_result(id, json_incref(result))
			   : rpc_error(id, RPC_INVALID_REQUEST, error, NULL);
	chain_receive(st->client, r);
}

/* ---- rounds ---- */

static void round_expired(struct ev_loop *loop, ev_timer *w, int revents);

/* The text of round R's id at the chain. */
static void round_id_text(const struct round *r, char *buf, size_t n)
{
	snprintf(buf, n, "\"" ROUND_ID_PREFIX "%" PRIu64 "\"", r->serial);
}

/* Answers every backend request R still holds with an error saying WHY. */
static void round_refuse_all(struct round *r, const char *why)
{
	const char *key;
	json_t *id;
	size_t i;
	json_object_foreach(r->asked, key, id)
		answer_backend(r->st, id, NULL, why);
	json_object_clear(r->asked);
	json_array_foreach(r->fresh, i, id)
		answer_backend(r->st, json_object_get(id, "id"), NULL, why);
	json_array_clear(r->fresh);
}

static void round_free(struct round *r)
{
	for (struct round **pp = &r->st->rounds; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	ev_timer_stop(EV_DEFAULT, &r->expiry);
	ev_timer_stop(EV_DEFAULT, &r->gather);
	json_decref(r->asked);
	json_decref(r->fresh);
	json_decref(r->held);
	json_decref(r->client_id);
	free(r);
}

/* Sends the client, as the answer to its request CLIENT_ID, an
 * input_required result with R's fresh requests. */
static void round_ask(struct round *r, json_t *client_id)
{
	json_t *requests = json_object();
	size_t i;
	json_t *q;
	json_array_foreach(r->fresh, i, q) {
		json_t *id = json_object_get(q, "id");
		json_t *params = json_deep_copy(json_object_get(q, "params"));
		json_t *meta = json_object_get(params, "_meta");
		/* a 2026-07-28 backend's own key, when it has one and it is free */
		const char *own = json_string_value(json_object_get(meta, ERA_META_INPUT_KEY));
		char key[128];
		if (own && strlen(own) < sizeof key && !json_object_get(r->asked, own))
			snprintf(key, sizeof key, "%s", own);
		else
			snprintf(key, sizeof key, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
		json_t *one = json_pack("{s:O}", "method", json_object_get(q, "method"));
		json_t *wrap = json_pack("{s:O}", "params", params);   /* to strip our keys */
		era_strip_own_meta(wrap);
		json_decref(params);
		params = json_incref(json_object_get(wrap, "params"));
		json_decref(wrap);
		if (params)
			json_object_set_new(one, "params", params);
		json_object_set_new(requests, key, one);
		json_object_set(r->asked, key, id);
	}
	json_array_clear(r->fresh);
	r->gen++;
	char *state = state_make(r);
	json_t *result = json_pack("{s:s,s:o}", "resultType", "input_required", "inputRequests",
				   requests);
	if (state)
		json_object_set_new(result, "requestState", json_string(state));
	free(state);
	json_t *resp = rpc_result(client_id, result);
	write_msg(r->st, resp);
	json_decref(resp);
	ev_timer_stop(EV_DEFAULT, &r->expiry);
	ev_timer_set(&r->expiry, r->st->ttl, 0.);
	ev_timer_start(EV_DEFAULT, &r->expiry);
}

/* The call is no longer wanted: cancels it at the backend and ends R. */
static void round_cancel(struct round *r, const char *why)
{
	char idtext[64];
	round_refuse_all(r, why);
	if (!r->held && !r->pre) {
		round_id_text(r, idtext, sizeof idtext);
		json_t *rid = json_loads(idtext, JSON_DECODE_ANY, NULL);
		json_t *c = rpc_notification("notifications/cancelled",
					     json_pack("{s:o,s:s}", "requestId", rid, "reason", why));
		struct stateless *st = r->st;
		round_free(r);
		chain_receive(st->client, c);
		return;
	}
	round_free(r);
}

/* The requests a backend sent together are in: one input_required for them. */
static void round_gathered(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct round *r = w->data;
	(void)loop;
	(void)revents;
	if (json_array_size(r->fresh) > 0)
		round_ask(r, r->client_id);
}

static void round_expired(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct round *r = w->data;
	(void)loop;
	(void)revents;
	log_info("%s: a call waiting for the client's input (%s) expired", r->st->client->name,
		 r->method);
	round_cancel(r, "the client did not answer the input requests in time");
}

static struct round *round_of_exchange(struct stateless *st, struct exchange *ex)
{
	const struct msg_val *id = chain_request_id(ex);
	const char *t = msg_val_text(id);
	size_t n = strlen("\"" ROUND_ID_PREFIX);
	if (id->n <= n || strncmp(t, "\"" ROUND_ID_PREFIX, n) != 0)
		return NULL;
	uint64_t serial = strtoull(t + n, NULL, 10);
	for (struct round *r = st->rounds; r; r = r->next)
		if (r->serial == serial)
			return r;
	return NULL;
}

/* True for the client requests whose answer may be input_required. */
static bool may_ask(const char *method)
{
	return method && (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ||
			  strcmp(method, "resources/read") == 0);
}

#define PENDING_MAX 16

/*
 * REQ (borrowed), a backend's request that no call of this client
 * carries (roots/list after initialized, say): kept for the client's next
 * call that may be asked, which asks it first. The oldest is refused
 * when too many wait.
 */
static void pending_add(struct stateless *st, json_t *req)
{
	if (!st->pending && !(st->pending = json_array())) {
		answer_backend(st, json_object_get(req, "id"), NULL, "out of memory");
		return;
	}
	if (json_array_size(st->pending) >= PENDING_MAX) {
		answer_backend(st, json_object_get(json_array_get(st->pending, 0), "id"), NULL,
			       "too many requests wait for the client's next call");
		json_array_remove(st->pending, 0);
	}
	json_array_append(st->pending, req);
	log_debug("%s: \"%s\" waits for the client's next call", st->client->name,
		  json_string_value(json_object_get(req, "method")));
}

/* A backend's request to the client (REQ, with our id; O what the chain
 * said of it): into a round. */
static void backend_request(struct stateless *st, json_t *req, const struct peer_out *o)
{
	json_t *id = json_object_get(req, "id");
	const char *method = json_string_value(json_object_get(req, "method"));
	if (strcmp(method, "ping") == 0) {   /* no ping in this era: the proxy answers */
		json_t *empty = json_object();
		answer_backend(st, id, empty, NULL);
		json_decref(empty);
		return;
	}
	/* the call it belongs to: the chain's answer (chain.c, request_about) */
	struct exchange *ex = o->about;
	if ((!ex && !o->several) || (ex && !may_ask(chain_request_method(ex)))) {
		/* outside any call the client could be asked in: on its next one */
		pending_add(st, req);
		return;
	}
	if (!ex) {
		char why[300];
		snprintf(why, sizeof why, "\"%s\" refused: the client speaks protocol %s, where a "
			 "server asks for input only as part of a call, and several calls are open "
			 "at this server, so nothing tells which one it is for",
			 method, ERA_STATELESS_VERSION);
		log_warn("%s: %s", st->client->name, why);
		answer_backend(st, id, NULL, why);
		return;
	}
	struct round *r = round_of_exchange(st, ex);
	if (r) {   /* asked with this turn's others, or with the next round */
		json_array_append(r->fresh, req);
		return;
	}
	r = calloc(1, sizeof *r);
	if (!r) {
		answer_backend(st, id, NULL, "out of memory");
		return;
	}
	r->st = st;
	r->serial = ++st->next_serial;
	snprintf(r->method, sizeof r->method, "%s", chain_request_method(ex));
	r->asked = json_object();
	r->fresh = json_array();
	r->client_id = msg_val_json(chain_request_id(ex));
	ev_init(&r->expiry, round_expired);
	r->expiry.data = r;
	ev_init(&r->gather, round_gathered);
	r->gather.data = r;
	char idtext[64];
	round_id_text(r, idtext, sizeof idtext);
	struct msg_val v = { .n = 0 };
	if (msg_val_set(&v, idtext, strlen(idtext)) < 0 || chain_rebind_request(ex, &v, NULL) < 0) {
		msg_val_release(&v);
		json_decref(r->client_id);
		json_decref(r->asked);
		json_decref(r->fresh);
		free(r);
		answer_backend(st, id, NULL, "mcp-chain could not hold the call open");
		return;
	}
	msg_val_release(&v);
	r->next = st->rounds;
	st->rounds = r;
	json_array_append(r->fresh, req);
	/* a backend asks for several inputs at once (one input_required of its
	 * own, or requests sent back to back): the client gets them together,
	 * once this loop iteration is over */
	ev_timer_set(&r->gather, 0., 0.);
	ev_timer_start(EV_DEFAULT, &r->gather);
}

/* A response to one of our own ids: a held call or a subscription. */
static bool own_response(struct stateless *st, json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "id"));
	if (!id)
		return false;
	if (strncmp(id, SUB_ID_PREFIX, strlen(SUB_ID_PREFIX)) == 0) {
		json_t *err = json_object_get(msg, "error");
		if (err)
			log_warn("%s: subscribing for a listen stream failed: %s", st->client->name,
				 json_string_value(json_object_get(err, "message")));
		return true;
	}
	if (strncmp(id, ROUND_ID_PREFIX, strlen(ROUND_ID_PREFIX)) != 0)
		return false;
	uint64_t serial = strtoull(id + strlen(ROUND_ID_PREFIX), NULL, 10);
	for (struct round *r = st->rounds; r; r = r->next) {
		if (r->serial == serial) {
			json_decref(r->held);
			r->held = json_deep_copy(msg);
			/* what the client was not asked yet: on its next call;
			 * what it was asked: answered by its retry, which then
			 * gets this response (or refused when the round expires) */
			size_t i;
			json_t *q;
			json_array_foreach(r->fresh, i, q)
				pending_add(st, q);
			json_array_clear(r->fresh);
			return true;
		}
	}
	return true;   /* a round that ended: nobody waits for it */
}

/*
 * The client's call REQ (borrowed) while backend requests wait (pending):
 * a round asks them first, and the client's retry is then sent on as the
 * call. True when the client was asked.
 */
static bool pre_round(struct stateless *st, json_t *req)
{
	json_t *id = json_object_get(req, "id");
	const char *method = json_string_value(json_object_get(req, "method"));
	if (!id || !may_ask(method) || json_array_size(st->pending) == 0)
		return false;
	struct round *r = calloc(1, sizeof *r);
	if (!r || !(r->asked = json_object())) {
		free(r);
		return false;
	}
	r->st = st;
	r->serial = ++st->next_serial;
	r->pre = true;
	snprintf(r->method, sizeof r->method, "%s", method);
	r->fresh = st->pending;
	st->pending = NULL;
	r->client_id = json_incref(id);
	ev_init(&r->expiry, round_expired);
	r->expiry.data = r;
	ev_init(&r->gather, round_gathered);
	r->gather.data = r;
	r->next = st->rounds;
	st->rounds = r;
	log_debug("%s: \"%s\" asks first what the servers asked outside any call",
		  st->client->name, method);
	round_ask(r, id);
	return true;
}

/* A retry: the client answers a round's requests. False when REQ (its
 * round's answers taken off) is to go on as the call itself. */
static bool retry(struct stateless *st, json_t *req, json_t *params)
{
	json_t *id = json_object_get(req, "id");
	const char *method = json_string_value(json_object_get(req, "method"));
	const char *state = json_string_value(json_object_get(params, "requestState"));
	const char *why = NULL;
	struct round *r = state ? state_check(st, state, method, &why) : NULL;
	if (!r) {
		if (!state)
			why = "inputResponses came without the requestState of the call they answer";
		log_warn("%s: a retry of \"%s\" refused: %s", st->client->name, method, why);
		json_t *e = rpc_errorf(id, RPC_INVALID_PARAMS, "requestState refused: %s", why);
		write_msg(st, e);
		json_decref(e);
		return true;
	}
	r->gen++;   /* this state is spent */
	json_t *responses = json_object_get(params, "inputResponses");
	const char *key;
	json_t *bid;
	json_object_foreach(r->asked, key, bid) {
		json_t *res = json_object_get(responses, key);
		answer_backend(st, bid, json_is_object(res) ? res : NULL,
			       "the client's retry did not answer this request");
	}
	json_object_clear(r->asked);
	json_decref(r->client_id);
	r->client_id = json_incref(id);
	if (r->held) {   /* the call ended meanwhile: its response answers the retry */
		json_t *resp = r->held;
		r->held = NULL;
		json_object_set(resp, "id", id);
		round_refuse_all(r, "the call has ended");
		send_response(st, resp, r->method);
		round_free(r);
		json_decref(resp);
		return true;
	}
	if (json_array_size(r->fresh) > 0) {   /* more questions came meanwhile */
		round_ask(r, id);
		return true;
	}
	if (r->pre) {   /* answered: the call itself goes on, as a call */
		round_free(r);
		json_object_del(params, "inputResponses");
		json_object_del(params, "requestState");
		return false;
	}
	/* the call goes on under the retry's id */
	char idtext[64], *dumped = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
	round_id_text(r, idtext, sizeof idtext);
	struct msg_val from = { .n = 0 }, to = { .n = 0 };
	struct exchange *ex = NULL;
	if (dumped && msg_val_set(&from, idtext, strlen(idtext)) == 0)
		ex = chain_find_request(st->client, &from);
	/* its progress goes with the retry's token, or nowhere */
	json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
	char *tokdump = tok && (json_is_string(tok) || json_is_integer(tok))
		? json_dumps(tok, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	struct msg_val tv = { .n = 0 };
	if (tokdump && msg_val_set(&tv, tokdump, strlen(tokdump)) < 0)
		msg_val_release(&tv);
	free(tokdump);
	int rc = ex && msg_val_set(&to, dumped, strlen(dumped)) == 0 ? chain_rebind_request(ex, &to, &tv) : -1;
	msg_val_release(&from);
	msg_val_release(&to);
	msg_val_release(&tv);
	free(dumped);
	round_free(r);
	if (rc < 0) {
		json_t *e = rpc_errorf(id, RPC_INVALID_REQUEST,
			"the call cannot continue under this id (the id is in use, or the call ended)");
		write_msg(st, e);
		json_decref(e);
	}
	return true;
}

/* ---- listens ---- */

static bool want(json_t *filter, const char *key)
{
	return json_is_true(json_object_get(filter, key));
}

/* Subscribes (or unsubscribes) URI at the backend through the chain. */
static void backend_subscribe(struct stateless *st, const char *uri, bool on)
{
	char id[48];
	snprintf(id, sizeof id, SUB_ID_PREFIX "%" PRIu64, ++st->next_serial);
	json_t *req = json_pack("{s:s,s:s,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", id, "method",
				on ? "resources/subscribe" : "resources/unsubscribe", "params", "uri", uri);
	chain_receive(st->client, req);
}

/* True when another listen than SKIP subscribes URI. */
static bool uri_wanted(struct stateless *st, const char *uri, const struct listen *skip)
{
	for (struct listen *l = st->listens; l; l = l->next) {
		size_t i;
		json_t *u;
		if (l == skip)
			continue;
		json_array_foreach(l->uris, i, u)
			if (strcmp(json_string_value(u), uri) == 0)
				return true;
	}
	return false;
}

static void listen_open(struct stateless *st, json_t *req, json_t *params)
{
	json_t *id = json_object_get(req, "id");
	json_t *filter = json_object_get(params, "notifications");
	if (!json_is_object(filter)) {
		json_t *e = rpc_error(id, RPC_INVALID_PARAMS,
			"subscriptions/listen needs params.notifications (the notifications wanted)", NULL);
		write_msg(st, e);
		json_decref(e);
		return;
	}
	struct listen *l = calloc(1, sizeof *l);
	if (!l)
		return;
	l->id = json_incref(id);
	l->tools = want(filter, "toolsListChanged");
	l->prompts = want(filter, "promptsListChanged");
	l->resources = want(filter, "resourcesListChanged");
	l->uris = json_array();
	json_t *uris = json_object_get(filter, "resourceSubscriptions");
	size_t i;
	json_t *u;
	json_array_foreach(uris, i, u) {
		if (!json_is_string(u))
			continue;
		if (!uri_wanted(st, json_string_value(u), NULL))
			backend_subscribe(st, json_string_value(u), true);
		json_array_append(l->uris, u);
	}
	l->next = st->listens;
	st->listens = l;
	json_t *agreed = json_object();
	if (l->tools)
		json_object_set_new(agreed, "toolsListChanged", json_true());
	if (l->prompts)
		json_object_set_new(agreed, "promptsListChanged", json_true());
	if (l->resources)
		json_object_set_new(agreed, "resourcesListChanged", json_true());
	if (json_array_size(l->uris))
		json_object_set(agreed, "resourceSubscriptions", l->uris);
	json_t *ack = rpc_notification("notifications/subscriptions/acknowledged",
		json_pack("{s:o,s:{s:O}}", "notifications", agreed, "_meta", ERA_META_SUBSCRIPTION, id));
	write_msg(st, ack);
	json_decref(ack);
}

static void listen_free(struct stateless *st, struct listen *l, bool unsubscribe)
{
	size_t i;
	json_t *u;
	if (unsubscribe)
		json_array_foreach(l->uris, i, u)
			if (!uri_wanted(st, json_string_value(u), l))
				backend_subscribe(st, json_string_value(u), false);
	json_decref(l->id);
	json_decref(l->uris);
	free(l);
}

/* Sends NOTE to every listen that asked for it; true when it is of a listen's kind. */
static bool to_listens(struct stateless *st, const char *method, json_t *note)
{
	bool tools = strcmp(method, "notifications/tools/list_changed") == 0;
	bool prompts = strcmp(method, "notifications/prompts/list_changed") == 0;
	bool resources = strcmp(method, "notifications/resources/list_changed") == 0;
	bool updated = strcmp(method, "notifications/resources/updated") == 0;
	if (!tools && !prompts && !resources && !updated)
		return false;
	const char *uri = json_string_value(json_object_get(json_object_get(note, "params"), "uri"));
	for (struct listen *l = st->listens; l; l = l->next) {
		bool yes = (tools && l->tools) || (prompts && l->prompts) || (resources && l->resources);
		if (updated && uri) {
			size_t i;
			json_t *u;
			json_array_foreach(l->uris, i, u)
				yes = yes || strcmp(json_string_value(u), uri) == 0;
		}
		if (!yes)
			continue;
		json_t *copy = json_deep_copy(note);
		json_t *params = json_object_get(copy, "params");
		if (!json_is_object(params)) {
			params = json_object();
			json_object_set_new(copy, "params", params);
		}
		json_t *meta = json_object_get(params, "_meta");
		if (!json_is_object(meta)) {
			meta = json_object();
			json_object_set_new(params, "_meta", meta);
		}
		json_object_set(meta, ERA_META_SUBSCRIPTION, l->id);
		write_msg(st, copy);
		json_decref(copy);
	}
	return true;
}

/* ---- log messages ---- */

/* The rank of a syslog-style level name (debug 0 .. emergency 7), or -1. */
static int level_rank(const char *level)
{
	static const char *const names[] = { "debug", "info", "notice", "warning", "error",
		"critical", "alert", "emergency", NULL };
	for (int i = 0; level && names[i]; i++)
		if (strcmp(level, names[i]) == 0)
			return i;
	return -1;
}

/*
 * A request's _meta log level: the client wants log messages from that
 * level on. The backend hears logging/setLevel when it changes (its level
 * is one for every request; mcp-chain filters per client).
 */
static void note_log_level(struct stateless *st, json_t *params)
{
	const char *level = json_string_value(era_meta(params, ERA_META_LOG_LEVEL));
	int rank = level_rank(level);
	if (rank < 0 || rank == st->log_level)
		return;
	st->log_level = rank;
	char id[48];
	snprintf(id, sizeof id, SUB_ID_PREFIX "%" PRIu64, ++st->next_serial);
	json_t *req = json_pack("{s:s,s:s,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", id, "method",
				"logging/setLevel", "params", "level", level);
	chain_receive(st->client, req);
}

/* True when the client asked for log messages of NOTE's level. */
static bool log_wanted(const struct stateless *st, json_t *note)
{
	const char *level = json_string_value(json_object_get(json_object_get(note, "params"), "level"));
	return st->log_level >= 0 && level_rank(level) >= st->log_level;
}

/* ---- the interface ---- */

struct stateless *stateless_new(struct peer *client, stateless_write_fn write, void *arg,
				double round_ttl)
{
	struct stateless *st = calloc(1, sizeof *st);
	if (!st || ensure_key() < 0) {
		free(st);
		return NULL;
	}
	st->client = client;
	st->write = write;
	st->arg = arg;
	st->ttl = round_ttl > 0 ? round_ttl : 300.;
	st->log_level = -1;
	if (getrandom(&st->instance, sizeof st->instance, 0) != sizeof st->instance)
		st->instance = (uint64_t)(uintptr_t)st ^ (uint64_t)(ev_now(EV_DEFAULT) * 1e6);
	/* it may answer a backend's request (a ping) before the send returns */
	client->answers_inline = true;
	return st;
}

void stateless_free(struct stateless *st)
{
	if (!st)
		return;
	while (st->rounds)
		round_free(st->rounds);
	json_decref(st->pending);   /* the chain ends those requests with the client */
	while (st->listens) {
		struct listen *l = st->listens;
		st->listens = l->next;
		listen_free(st, l, false);
	}
	free(st);
}

bool stateless_holds_requests(const struct stateless *st)
{
	return json_array_size(st->pending) > 0;
}

bool stateless_request(struct stateless *st, json_t *req)
{
	const char *method = json_string_value(json_object_get(req, "method"));
	json_t *params = json_object_get(req, "params");
	note_log_level(st, params);
	if (method && strcmp(method, "subscriptions/listen") == 0) {
		listen_open(st, req, params);
		return true;
	}
	if (json_object_get(params, "requestState") || json_object_get(params, "inputResponses")) {
		if (backend_owns_rounds(st, json_string_value(json_object_get(params, "requestState"))))
			return false;   /* the backend's own round: it reads its own state */
		return retry(st, req, params);
	}
	return pre_round(st, req);
}

bool stateless_notification(struct stateless *st, json_t *note)
{
	const char *method = json_string_value(json_object_get(note, "method"));
	if (!method || strcmp(method, "notifications/cancelled") != 0)
		return false;
	json_t *rid = json_object_get(json_object_get(note, "params"), "requestId");
	for (struct listen **pp = &st->listens; *pp; pp = &(*pp)->next) {
		if (json_equal((*pp)->id, rid)) {
			struct listen *l = *pp;
			*pp = l->next;
			listen_free(st, l, true);
			return true;
		}
	}
	for (struct round *r = st->rounds; r; r = r->next) {
		if (json_equal(r->client_id, rid)) {
			round_cancel(r, "cancelled by the client");
			return true;
		}
	}
	return false;
}

/* True for the methods whose results are cacheable in the stateless era. */
bool stateless_cacheable(const char *method)
{
	static const char *const m[] = { "tools/list", "prompts/list", "resources/list",
		"resources/templates/list", "resources/read", "server/discover", NULL };
	for (size_t i = 0; method && m[i]; i++)
		if (strcmp(method, m[i]) == 0)
			return true;
	return false;
}

/* Completes RESULT (an object, changed in place) for a client of the era. */
void stateless_stamp(json_t *result, const char *method)
{
	if (!json_object_get(result, "resultType"))
		json_object_set_new(result, "resultType", json_string("complete"));
	if (!stateless_cacheable(method))
		return;
	json_t *ttl = json_object_get(result, "ttlMs");
	if (!json_is_integer(ttl) || json_integer_value(ttl) < 0)
		json_object_set_new(result, "ttlMs", json_integer(0));
	const char *scope = json_string_value(json_object_get(result, "cacheScope"));
	if (!scope || (strcmp(scope, "public") != 0 && strcmp(scope, "private") != 0))
		json_object_set_new(result, "cacheScope", json_string("private"));
}

int stateless_send(struct stateless *st, json_t *msg, const struct peer_out *o)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *asked = o->kind == PEER_OUT_RESPONSE && o->about ?
		chain_request_method(o->about) : NULL;
	if (method && json_object_get(msg, "id")) {
		backend_request(st, msg, o);
		return 0;
	}
	if (method) {
		if (strcmp(method, "notifications/cancelled") == 0) {
			/* a backend withdrew a request: the client never saw it as one */
			json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
			for (struct round *r = st->rounds; r; r = r->next) {
				const char *key;
				json_t *v;
				json_object_foreach(r->asked, key, v)
					if (json_equal(v, rid)) {
						json_object_del(r->asked, key);
						break;
					}
			}
			return 0;
		}
		if (to_listens(st, method, msg))
			return 0;
		if (strcmp(method, "notifications/message") == 0 && !log_wanted(st, msg))
			return 0;   /* not asked for: the era sends none unless asked */
		return st->write(st->arg, msg, o);
	}
	if (own_response(st, msg))
		return 0;
	return send_response(st, msg, asked);
}

/* A response for the client to its request for ASKED (NULL: unknown),
 * completed for the era. */
static int send_response(struct stateless *st, json_t *msg, const char *asked)
{
	json_t *result = json_object_get(msg, "result");
	if (json_is_object(result)) {
		json_t *copy = json_copy(msg);
		json_t *r2 = json_copy(result);
		stateless_stamp(r2, asked);
		json_object_set_new(copy, "result", r2);
		int rc = write_msg(st, copy);
		json_decref(copy);
		return rc;
	}
	return write_msg(st, msg);
}

bool stateless_state_holder(const char *state, char *tag, size_t n)
{
	const char *dot = state ? strrchr(state, '.') : NULL;
	unsigned char mac[MAC_LEN];
	uint64_t instance, serial, gen, expiry;
	int used = 0;
	if (!dot || strncmp(state, "v1.", 3) != 0 || strlen(dot + 1) != 2 * MAC_LEN ||
	    unhex(dot + 1, MAC_LEN, mac) < 0 || ensure_key() < 0 ||
	    !mac_verifies(state, (size_t)(dot - state), mac) ||
	    sscanf(state, "v1.%16" SCNx64 ".%" SCNu64 ".%" SCNu64 ".%" SCNu64 ".%n", &instance,
		   &serial, &gen, &expiry, &used) != 4 || used <= 0)
		return false;
	const char *t = state + used, *end = strchr(t, '.');
	if (!end || end > dot || (size_t)(end - t) >= n)
		return false;
	memcpy(tag, t, (size_t)(end - t));
	tag[end - t] = '\0';
	if (strcmp(tag, "-") == 0)
		tag[0] = '\0';
	return true;
}

bool stateless_state_instance(const char *state, uint64_t *instance)
{
	return state && sscanf(state, "v1.%16" SCNx64 ".", instance) == 1;
}

uint64_t stateless_instance(const struct stateless *st)
{
	return st->instance;
}
