/*
 * http_sid.h - the session ids of the HTTP front (Mcp-Session-Id, and the
 * legacy transport's sessionId), and the check that a client's id has a
 * shape of ours before it is looked up. Unit tested
 * (tests/unit/front/test_http_sid.c).
 *
 * Two kinds:
 *   - random: 128 bits from the kernel's CSPRNG as lowercase hex, known
 *     only to the instance that made it;
 *   - sealed ("cluster"): "TAG.BOX", TAG the issuing instance's tag (which
 *     a load balancer may route on), BOX what the session needs to be
 *     continued by any instance holding the key list: an AES-256-GCM box
 *     (seal.h) in base64url, sealed with the first key, opened with any.
 *     Visible ASCII, as the transport requires.
 */
#ifndef MCPC_HTTP_SID_H
#define MCPC_HTTP_SID_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Length of a random session id's text: 128 random bits as hex. */
#define HTTP_SID_LEN 32

/* Longest sealed id accepted (what a client's initialize declares beyond
 * that makes a random id instead). */
#define HTTP_SID_MAX 4096

/* Writes a new random session id (HTTP_SID_LEN hex digits and a NUL)
 * from the kernel's CSPRNG; returns 0 or -1. */
int http_sid_new(char out[HTTP_SID_LEN + 1]);

/* True when S has the shape of one of our session ids (either kind). */
bool http_sid_valid(const char *s);

/* The keys sealed ids are made and opened with (borrowed). */
struct http_sid_keys {
	const unsigned char (*keys)[32];   /* keys[0] seals; all open */
	size_t nkeys;
	const char *tag;                   /* this instance's */
	double max_age;                    /* seconds an id is honoured */
};

/*
 * A sealed id carrying STATE (borrowed; an object) and when it was made
 * (NOW, seconds since the epoch): a new string, or NULL (no memory, or
 * longer than HTTP_SID_MAX).
 */
char *http_sid_seal(const struct http_sid_keys *k, json_t *state, double now);

/*
 * Opens a sealed id SID: its STATE (new reference), or NULL with *WHY
 * (static text): not sealed by these keys (forged, altered, another
 * deployment's) or expired.
 */
json_t *http_sid_open(const struct http_sid_keys *k, const char *sid, double now,
		      const char **why);

/* True when SID is sealed (has a tag); its tag's length into *TAGLEN. */
bool http_sid_sealed(const char *sid, size_t *taglen);

#endif
