/*
 * http_sid.h - the session ids of the HTTP front (Mcp-Session-Id, and the
 * legacy transport's sessionId): 128 bits from the kernel's CSPRNG as
 * lowercase hex, and the check that a client's id has that shape before it
 * is looked up. Unit tested (tests/unit/front/test_http_sid.c).
 */
#ifndef MCPC_HTTP_SID_H
#define MCPC_HTTP_SID_H

#include <stdbool.h>

/* Length of a session id's text: 128 random bits as hex. */
#define HTTP_SID_LEN 32

/* Writes a new session id (HTTP_SID_LEN hex digits and a NUL) from the
 * kernel's CSPRNG; returns 0 or -1. */
int http_sid_new(char out[HTTP_SID_LEN + 1]);

/* True when S has the shape of one of our session ids. */
bool http_sid_valid(const char *s);

#endif
