/*
 * fuzz_chain.c - libFuzzer target for the chain (src/core/chain.c with
 * msg.c and pipeline.c): a session script of client and backend lines
 * runs three times, with no module, with a module that reads nothing and
 * with one that reads everything, and must put the same bytes on the wire
 * each time (one path, whatever the representation); at the end both
 * peers go away and no exchange may stay open.
 *
 * The input is lines. "c LINE" is a line from the client, "b LINE" one
 * from the backend; "r N" makes the backend answer the N-th request it
 * got (modulo their number) with an empty result, "p N" send progress for
 * it, "x N" cancel, from the client, the N-th request the client sent.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <jansson.h>

#include "chain.h"
#include "middleware.h"
#include "peer.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_chain: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

struct fake {
	struct peer peer;   /* must be first */
	json_t *wire;       /* every line written to it */
	json_t *got;        /* the same, parsed (null when not JSON) */
};

/* Records a line written to F. */
static void wrote(struct fake *f, const char *text, size_t len)
{
	json_array_append_new(f->wire, json_stringn_nocheck(text, len));
	json_t *m = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
	json_array_append_new(f->got, m ? m : json_null());
}

static int fake_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	(void)o;
	char *text = json_dumps(msg, JSON_COMPACT);
	CHECK(text);
	wrote((struct fake *)p, text, strlen(text));
	free(text);
	return 0;
}

static int fake_send_raw(struct peer *p, const struct iovec *iov, int n, const struct peer_out *o)
{
	(void)o;
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	char *text = malloc(len + 1), *q = text;
	CHECK(text);
	for (int i = 0; i < n; i++) {
		memcpy(q, iov[i].iov_base, iov[i].iov_len);
		q += iov[i].iov_len;
	}
	wrote((struct fake *)p, text, len);
	free(text);
	return 0;
}

static const struct peer_ops fake_ops = { .send = fake_send, .send_raw = fake_send_raw };

/* A module that passes everything, reading it or not. */
struct passer {
	struct mw_module base;
	bool reads;
};

static bool passer_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	(void)ctx;
	return ((struct passer *)m)->reads;
}

static enum mw_verdict passer_pass(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	(void)m;
	(void)ctx;
	(void)msg;
	return MW_PASS;
}

static void passer_destroy(struct mw_module *m)
{
	(void)m;
}

static const struct mw_module_ops passer_ops = {
	.name = "passer", .reads = passer_reads, .on_message = passer_pass,
	.on_response = passer_pass, .destroy = passer_destroy,
};

/* The id of the N-th message F got that is a request, as JSON text, or NULL. */
static char *nth_request_id(struct fake *f, long n)
{
	size_t count = 0, i;
	json_t *m;
	json_array_foreach(f->got, i, m)
		if (json_object_get(m, "method") && json_object_get(m, "id"))
			count++;
	if (!count)
		return NULL;
	size_t want = (size_t)(n % (long)count), k = 0;
	json_array_foreach(f->got, i, m) {
		if (json_object_get(m, "method") && json_object_get(m, "id") && k++ == want)
			return json_dumps(json_object_get(m, "id"), JSON_ENCODE_ANY | JSON_COMPACT);
	}
	return NULL;
}

/* Feeds LINE (copied, the copy then spoilt, as a transport reuses its buffer) from F. */
static void feed(struct fake *f, const char *line, size_t len)
{
	char *copy = malloc(len + 1);
	json_t *err = NULL;
	CHECK(copy);
	memcpy(copy, line, len);
	chain_receive_line(&f->peer, copy, len, &err);
	json_decref(err);
	memset(copy, 'X', len);
	free(copy);
}

/* Runs the script [DATA, DATA+SIZE) in MODE; returns what both peers got. */
static json_t *run(const char *data, size_t size, int mode, json_t *client_sent)
{
	struct chain *c = chain_new();
	struct fake client = { 0 }, backend = { 0 };
	struct passer pm = { { &passer_ops }, mode == 2 };
	peer_init(&client.peer, &fake_ops, PEER_CLIENT, "client");
	peer_init(&backend.peer, &fake_ops, PEER_BACKEND, "backend");
	client.peer.ready = backend.peer.ready = true;
	client.wire = json_array();
	client.got = json_array();
	backend.wire = json_array();
	backend.got = json_array();
	chain_add_peer(c, &backend.peer);
	chain_add_peer(c, &client.peer);
	if (mode) {
		struct pipeline *pl = pipeline_new();
		CHECK(pipeline_add(pl, &pm.base) == 0);
		chain_set_pipeline(c, pl);
		pipeline_unref(pl);
	}
	size_t seen_c = 0;   /* client lines so far: the ones 'x' may pick from */
	for (const char *p = data, *end = data + size; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (len >= 2 && p[1] == ' ') {
			const char *arg = p + 2;
			size_t alen = len - 2;
			long n = 0;   /* the argument's digits (the data is not NUL-terminated) */
			for (size_t k = 0; k < alen && k < 6 && arg[k] >= '0' && arg[k] <= '9'; k++)
				n = n * 10 + (arg[k] - '0');
			char buf[256];
			char *id;
			switch (p[0]) {
			case 'c':
				feed(&client, arg, alen);
				if (mode == 0)
					json_array_append_new(client_sent, json_stringn_nocheck(arg, alen));
				seen_c++;
				break;
			case 'b':
				feed(&backend, arg, alen);
				break;
			case 'r':
			case 'p':
				if ((id = nth_request_id(&backend, n < 0 ? -n : n))) {
					if (p[0] == 'r')
						snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", id);
					else
						snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":"
							 "\"notifications/progress\",\"params\":{\"progressToken\":%s,"
							 "\"progress\":1}}", id);
					feed(&backend, buf, strlen(buf));
					free(id);
				}
				break;
			case 'x': {
				size_t k = seen_c;
				json_t *sent = k ? json_loads(json_string_value(json_array_get(client_sent,
						(size_t)((n < 0 ? -n : n) % (long)k))), JSON_ALLOW_NUL, NULL) : NULL;
				json_t *rid = json_object_get(sent, "id");
				char *t = rid ? json_dumps(rid, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
				if (t) {
					snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":"
						 "\"notifications/cancelled\",\"params\":{\"requestId\":%s}}", t);
					feed(&client, buf, strlen(buf));
				}
				free(t);
				json_decref(sent);
				break;
			}
			default:
				break;
			}
		}
		p = nl ? nl + 1 : end;
	}
	chain_peer_gone(&backend.peer, "gone");
	chain_peer_gone(&client.peer, "gone");
	CHECK(chain_open_exchanges(c) == 0);
	json_t *w = json_pack("{s:o,s:o}", "client", client.wire, "backend", backend.wire);
	json_decref(client.got);
	json_decref(backend.got);
	chain_set_pipeline(c, NULL);
	chain_remove_peer(&client.peer);
	chain_remove_peer(&backend.peer);
	peer_release(&client.peer);
	peer_release(&backend.peer);
	chain_free(c);
	return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool loop;
	if (!loop) {
		ev_default_loop(0);
		loop = true;
	}
	json_t *sent[3], *w[3];
	for (int mode = 0; mode < 3; mode++) {
		sent[mode] = json_array();
		w[mode] = run((const char *)data, size, mode, sent[0]);
	}
	for (int mode = 1; mode < 3; mode++) {
		if (!json_equal(w[0], w[mode])) {
			char *a = json_dumps(w[0], 0), *b = json_dumps(w[mode], 0);
			fprintf(stderr, "fuzz_chain: mode %d differs\nnone: %s\nmode %d: %s\n", mode, a,
				mode, b);
			abort();
		}
	}
	for (int mode = 0; mode < 3; mode++) {
		json_decref(w[mode]);
		json_decref(sent[mode]);
	}
	return 0;
}
