/*
 * http_check.c - the HTTP front's header checks (see http_check.h): Host
 * and Origin against the loopback names, our port and the configured
 * extras; Accept lists with their q parameters; the JSON Content-Type.
 */
#include "http_check.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const loopback_names[] = { "localhost", "127.0.0.1", "[::1]", NULL };

/* True when [S, S+N) equals the NUL-terminated T, ignoring case. */
static bool span_ieq(const char *s, size_t n, const char *t)
{
	return strlen(t) == n && strncasecmp(s, t, n) == 0;
}

/* Splits "name[:port]" (name may be "[v6]"); *PORT is -1 without one. */
static bool split_host(const char *h, size_t *name_len, long *port)
{
	const char *colon = h[0] == '[' ? strchr(h, ']') : h;
	if (!colon)
		return false;
	colon = strchr(colon, ':');
	*port = -1;
	*name_len = colon ? (size_t)(colon - h) : strlen(h);
	if (!colon)
		return *name_len > 0;
	char *end;
	if (!colon[1])
		return false;
	*port = strtol(colon + 1, &end, 10);
	return *end == '\0' && *port >= 0 && *port <= 65535 && *name_len > 0;
}

/* True when HOST names us. */
bool http_check_host(const char *host, unsigned port, char *const *extra)
{
	size_t n;
	long p;
	if (!host || !split_host(host, &n, &p))
		return false;
	for (size_t i = 0; extra && extra[i]; i++) {
		if (strcasecmp(extra[i], host) == 0)
			return true;
		size_t en;
		long ep;
		if (split_host(extra[i], &en, &ep) && ep < 0 && span_ieq(host, n, extra[i]))
			return true;  /* an entry without a port: any port */
	}
	if (p >= 0 && (unsigned long)p != port)
		return false;
	for (size_t i = 0; loopback_names[i]; i++)
		if (span_ieq(host, n, loopback_names[i]))
			return true;
	return false;
}

/* True when ORIGIN may call us. */
bool http_check_origin(const char *origin, unsigned port, char *const *extra)
{
	if (!origin)
		return true;
	for (size_t i = 0; extra && extra[i]; i++)
		if (strcasecmp(extra[i], origin) == 0)
			return true;
	const char *rest;
	if (strncasecmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	else
		return false;
	size_t n;
	long p;
	if (strchr(rest, '/') || !split_host(rest, &n, &p) || p < 0 || (unsigned long)p != port)
		return false;
	for (size_t i = 0; loopback_names[i]; i++)
		if (span_ieq(rest, n, loopback_names[i]))
			return true;
	return false;
}

/* Skips spaces and tabs. */
static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* True when the parameters [P, END) of a media range give q=0. */
static bool q_zero(const char *p, const char *end)
{
	while (p < end) {
		p = skip_ws(p);
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			double q = strtod(p + 2, NULL);
			return q <= 0.0;
		}
		const char *semi = memchr(p, ';', (size_t)(end - p));
		p = semi ? semi + 1 : end;
	}
	return false;
}

/* True when ACCEPT lists TYPE. */
bool http_check_accepts(const char *accept, const char *type)
{
	const char *p = accept;
	while (p && *p) {
		const char *comma = strchr(p, ',');
		const char *end = comma ? comma : p + strlen(p);
		const char *s = skip_ws(p);
		const char *semi = memchr(s, ';', (size_t)(end - s));
		const char *tend = semi ? semi : end;
		while (tend > s && (tend[-1] == ' ' || tend[-1] == '\t'))
			tend--;
		if (span_ieq(s, (size_t)(tend - s), type) && !(semi && q_zero(semi + 1, end)))
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

/* True for application/json, with or without parameters. */
bool http_check_json_type(const char *ct)
{
	if (!ct)
		return false;
	const char *s = skip_ws(ct);
	size_t n = strcspn(s, "; \t");
	return span_ieq(s, n, "application/json");
}
