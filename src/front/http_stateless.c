/*
 * http_stateless.c - a POST of the 2026-07-28 era (no Mcp-Session-Id):
 * its standard and Mcp-Param-* headers checked against its body, what
 * the era answers with an HTTP status of its own, and the stateless
 * session that serves its call (a new one, the one whose call a retry
 * continues, or the one holding a backend's requests for such a client).
 */
#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "era.h"
#include "hmap.h"
#include "http_int.h"
#include "msg.h"
#include "param_headers.h"
#include "rpc.h"
#include "session.h"
#include "stateless.h"

/* Replies STATUS with the error response E (stolen). */
static int reply_json_error(struct hreq *r, struct hc_conn *c, unsigned status,
					json_t *e)
{
	char *s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	int rc = http_stream_reply(r, c, status, JSON_TYPE, s ? s : "", s ? strlen(s) : 0, NULL);
	free(s);
	return rc;
}

/* The value of header C:NAME, decoded from the "=?base64?...?=" form
 * (malloc'd), or NULL when absent or badly encoded (*BAD set). */
static char *header_value(struct hc_conn *c, const char *name, bool *bad)
{
	const char *v = hf_header(c, name);
	*bad = false;
	if (!v)
		return NULL;
	while (*v == ' ' || *v == '\t')   /* whitespace around a field value is not part of it */
		v++;
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	if (n < 11 || strncmp(v, "=?base64?", 9) != 0 || strncmp(v + n - 2, "?=", 2) != 0)
		return strndup(v, n);
	size_t len = n - 11;
	unsigned char *out = malloc(len / 4 * 3 + 4);
	int got = out && len % 4 == 0 ? EVP_DecodeBlock(out, (const unsigned char *)v + 9, (int)len) : -1;
	if (got < 0) {
		free(out);
		*bad = true;
		return NULL;
	}
	while (len >= 1 && v[9 + len - 1] == '=' && got > 0) {   /* padding decodes to zeros */
		got--;
		len--;
	}
	out[got] = '\0';
	return (char *)out;
}

/*
 * The standard headers of a 2026-07-28 request, and the Mcp-Param-* ones of
 * a tools/call, checked against its body:
 * NULL, or why they disagree (answered 400, -32020).
 */
static char *param_header(void *c, const char *name, bool *bad)
{
	return header_value(c, name, bad);
}

static const char *check_stateless_headers(struct http_front *f, struct hc_conn *c,
					   json_t *body, const char *method, char *why, size_t n)
{
	json_t *params = json_object_get(body, "params");
	const char *bv = era_request_version(params);
	const char *hv = hf_header(c, VERSION_HEADER);
	bool bad;
	if (!hv)
		return "the MCP-Protocol-Version header is required";
	if (bv && strcmp(bv, hv) != 0) {
		snprintf(why, n, "the MCP-Protocol-Version header says %.40s but the request's _meta says %.40s",
			 hv, bv);
		return why;
	}
	char *hm = header_value(c, "Mcp-Method", &bad);
	if (!hm || strcmp(hm, method) != 0) {
		snprintf(why, n, hm ? "the Mcp-Method header says %.60s but the body's method is %.60s"
				    : "the Mcp-Method header is required (the body's method is %.60s%.0s)",
			 hm ? hm : method, method);
		free(hm);
		return why;
	}
	free(hm);
	const char *key = strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ? "name"
		: strcmp(method, "resources/read") == 0 ? "uri" : NULL;
	const char *want = key ? json_string_value(json_object_get(params, key)) : NULL;
	if (!want)
		return NULL;
	char *hn = header_value(c, "Mcp-Name", &bad);
	const char *err = NULL;
	if (bad)
		err = "the Mcp-Name header's Base64 form cannot be decoded";
	else if (!hn)
		err = "the Mcp-Name header is required for this method";
	else if (strcmp(hn, want) != 0)
		err = "the Mcp-Name header does not match the body";
	free(hn);
	if (!err && strcmp(method, "tools/call") == 0)   /* the arguments it marks x-mcp-header */
		err = param_check(&f->params, want, json_object_get(params, "arguments"), param_header,
				  c, why, n);
	return err;
}

struct holding {
	const char *caps;
	struct hsess *found;
};

static void find_holding(void *value, void *arg)
{
	struct hsess *hs = value;
	struct holding *h = arg;
	if (!h->found && hs->stateless && hs->caps && strcmp(hs->caps, h->caps) == 0 &&
	    session_holds_requests(hs->s) && !session_busy(hs->s))
		h->found = hs;
}

/*
 * The stateless session that holds a backend's requests no call carried,
 * for the next call of a client that declares CAPS (the calls such
 * clients make share those backends): that call goes to it, to be asked
 * them first. NULL when none.
 */
static struct hsess *holding_session(struct http_front *f, const char *caps)
{
	struct holding h = { caps, NULL };
	hmap_each(&f->sessions, find_holding, &h);
	return h.found;
}

/*
 * A POST without a session that is of the 2026-07-28 era (a request whose
 * _meta or MCP-Protocol-Version header says so, or server/discover): true,
 * with the reply in *RC. Each such request gets a session of its own for
 * the life of its call; a retry after input_required goes to the session
 * whose call it continues.
 */
bool http_stateless_post(struct http_front *f, struct hreq *r, bool is_discover, int *rc)
{
	struct hc_conn *c = r->conn;
	const char *hv = hf_header(c, VERSION_HEADER);
	json_t *body = r->scanned ? msg_tree(&r->msg) : NULL;   /* read once: the session reads it so */
	json_t *params = json_object_get(body, "params");
	const char *method = json_string_value(json_object_get(body, "method"));
	if (!json_is_object(body) ||
	    !(is_discover || era_request_version(params) || era_of_version(hv) == ERA_STATELESS)) {
		return false;
	}
	char why[200];
	json_t *id = json_object_get(body, "id");
	const char *bad = id && method ? check_stateless_headers(f, c, body, method, why, sizeof why) : NULL;
	if (bad) {
		*rc = reply_json_error(r, c, 400, rpc_error(id, -32020, bad, NULL));
		return true;
	}
	/* what the session would answer in-band, answered with the era's HTTP status */
	int code;
	const char *wrong = id && method ? era_check_envelope(params, &code) : NULL;
	if (id && method && era_stateless_removed(method)) {
		*rc = reply_json_error(r, c, 404, rpc_errorf(id, RPC_METHOD_NOT_FOUND,
			"Method not found: %s is not part of protocol " ERA_STATELESS_VERSION, method));
		return true;
	}
	if (wrong) {
		*rc = reply_json_error(r, c, 400, code == RPC_UNSUPPORTED_VERSION ?
			era_unsupported_error(id, era_request_version(params)) : rpc_error(id, code, wrong, NULL));
		return true;
	}
	if (id && method && strcmp(method, "tools/call") == 0 && http_probe_hold(f, r, params)) {
		/* held until the marks its headers follow are known */
		*rc = 0;
		return true;
	}
	struct hsess *hs = NULL;
	uint64_t inst;
	const char *state = json_string_value(json_object_get(params, "requestState"));
	if (stateless_state_instance(state, &inst))
		hs = hmap_get(&f->instances, &inst, sizeof inst);
	if (state && f->sealing.nkeys && http_cluster_retry(f, r, state, id, hs != NULL, rc))
		return true;   /* held by another instance, used already, or being recorded */
	char *caps = hs ? NULL : http_sess_caps_key(params);
	if (!hs && caps)
		hs = holding_session(f, caps);
	if (!hs) {
		char refused[300] = "";
		if (!f->stopped && caps)
			hs = http_sess_new(f, caps, NULL, NULL, refused, sizeof refused);
		free(caps);
		caps = NULL;
		if (!hs && refused[0]) {
			/* no chain for a client without a session: it may fall back to one */
			*rc = http_stream_reply_error(r, c, 400, RPC_UNSUPPORTED_VERSION, refused);
			return true;
		}
		if (!hs) {
			*rc = http_stream_reply_error(r, c, 503, -32000,
					  "Service Unavailable: cannot serve a request now");
			return true;
		}
		hs->stateless = true;
		if (f->input_ttl > 0)
			session_set_input_ttl(hs->s, f->input_ttl);
		hs->idle.repeat = 0.5;   /* it ends soon after its call */
		ev_timer_again(EV_DEFAULT, &hs->idle);
	}
	free(caps);
	*rc = hf_post_to_session(r, hs, false);
	if (!hs->instance && (hs->instance = session_instance(hs->s)) &&
	    hmap_put(&f->instances, &hs->instance, sizeof hs->instance, hs) < 0)
		hs->instance = 0;
	return true;
}
