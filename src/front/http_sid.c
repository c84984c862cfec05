/*
 * http_sid.c - the HTTP front's session ids (see http_sid.h): random ones
 * from getrandom(2), sealed ones with seal.h; both checked for their
 * shape.
 */
#include "http_sid.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "seal.h"

/* What a sealed id's box is bound to: another use of the same keys
 * (another kind of box) cannot be passed off as a session. */
static const char AAD[] = "mcp-chain session id v1";

static const char TAG_CHARS[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

/* A new session id from getrandom(2). */
int http_sid_new(char out[HTTP_SID_LEN + 1])
{
	unsigned char r[HTTP_SID_LEN / 2];
	size_t got = 0;
	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	out[HTTP_SID_LEN] = '\0';
	return 0;
}

bool http_sid_sealed(const char *sid, size_t *taglen)
{
	size_t n = sid ? strlen(sid) : 0;
	size_t t = sid ? strspn(sid, TAG_CHARS) : 0;
	if (n > HTTP_SID_MAX || t < 1 || t > 32 || sid[t] != '.' || t + 1 >= n ||
	    strspn(sid + t + 1, TAG_CHARS) != n - t - 1)
		return false;
	if (taglen)
		*taglen = t;
	return true;
}

/* True for HTTP_SID_LEN lowercase hex digits, or a sealed id's shape. */
bool http_sid_valid(const char *s)
{
	if (!s)
		return false;
	if (strlen(s) == HTTP_SID_LEN && strspn(s, "0123456789abcdef") == HTTP_SID_LEN)
		return true;
	return http_sid_sealed(s, NULL);
}

char *http_sid_seal(const struct http_sid_keys *k, json_t *state, double now)
{
	json_t *st = json_copy(state);
	if (!st || k->nkeys == 0 || !k->tag)
		return NULL;
	json_object_set_new(st, "t", json_integer((json_int_t)floor(now)));
	char *plain = json_dumps(st, JSON_COMPACT);
	json_decref(st);
	if (!plain)
		return NULL;
	char *box = seal_text(k->keys[0], AAD, sizeof AAD - 1, plain, strlen(plain));
	free(plain);
	if (!box)
		return NULL;
	size_t tl = strlen(k->tag), bl = strlen(box);
	char *sid = tl + 1 + bl <= HTTP_SID_MAX ? malloc(tl + 1 + bl + 1) : NULL;
	if (sid) {
		memcpy(sid, k->tag, tl);
		sid[tl] = '.';
		memcpy(sid + tl + 1, box, bl + 1);
	}
	free(box);
	return sid;
}

json_t *http_sid_open(const struct http_sid_keys *k, const char *sid, double now,
		      const char **why)
{
	size_t tl;
	if (!http_sid_sealed(sid, &tl)) {
		*why = "not a session id of mcp-chain";
		return NULL;
	}
	unsigned char *plain = NULL;
	size_t n = 0;
	for (size_t i = 0; i < k->nkeys && !plain; i++)
		if (unseal_text(k->keys[i], AAD, sizeof AAD - 1, sid + tl + 1, &plain, &n) < 0)
			plain = NULL;
	if (!plain) {
		*why = "not sealed with this deployment's keys (forged, altered, or another's)";
		return NULL;
	}
	json_t *st = json_loadb((const char *)plain, n, 0, NULL);
	free(plain);
	json_t *t = json_object_get(st, "t");
	if (!json_is_object(st) || !json_is_integer(t)) {
		json_decref(st);
		*why = "its contents cannot be read";
		return NULL;
	}
	double made = (double)json_integer_value(t);
	if (made + k->max_age < now || made > now + 300) {
		json_decref(st);
		*why = "it has expired";
		return NULL;
	}
	return st;
}
