/*
 * http_check.h - the header checks of the HTTP front: whether a request's
 * Host and Origin name this server (DNS rebinding, cross-site calls), and
 * what its Accept and Content-Type headers say. Pure functions over the
 * header text, unit tested (tests/unit/front/test_http_check.c) and fuzzed
 * (fuzz_http).
 */
#ifndef MCPC_HTTP_CHECK_H
#define MCPC_HTTP_CHECK_H

#include <stdbool.h>

/*
 * True when the Host header HOST names this server: localhost, 127.0.0.1
 * or [::1], with PORT or without a port, or one of EXTRA (NULL-terminated,
 * may be NULL; an entry without a port matches any port). A missing Host
 * (HTTP/1.0) is refused: NULL gives false.
 */
bool http_check_host(const char *host, unsigned port, char *const *extra);

/*
 * True when the Origin header ORIGIN may call us: absent (NULL: not a
 * browser), http(s)://localhost, 127.0.0.1 or [::1] with PORT, or exactly
 * one of EXTRA (NULL-terminated, may be NULL). "null" is refused.
 */
bool http_check_origin(const char *origin, unsigned port, char *const *extra);

/* True when the Accept header ACCEPT lists TYPE (exactly, q > 0). */
bool http_check_accepts(const char *accept, const char *type);

/* True when the Content-Type CT is application/json (parameters ignored). */
bool http_check_json_type(const char *ct);

#endif
