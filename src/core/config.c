/*
 * config.c - loading and validating the configuration file.
 *
 * Validation walks the document by hand so that every message can name
 * the JSON pointer of the key at fault, and keeps going after an error so
 * that one run reports them all.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names.h"
#include "seal.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>

struct ctx {
	const char *file;
	struct cfg_errors *errs;
	int nerr;
	bool store;               /* a "redis" section: modules may use it */
};

/* Reports an error at a JSON pointer. */
__attribute__((format(printf, 3, 4)))
static void bad(struct ctx *c, const char *path, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cfg_error(c->errs, "%s: %s: %s", c->file, path[0] ? path : "/", msg);
	c->nerr++;
}

/* Appends a pointer segment, escaping "~" and "/" (RFC 6901). */
static void path_join(char *out, size_t n, const char *base, const char *key)
{
	size_t l = (size_t)snprintf(out, n, "%s/", base);
	for (; *key && l + 3 < n; key++) {
		if (*key == '~' || *key == '/') {
			out[l++] = '~';
			out[l++] = *key == '~' ? '0' : '1';
		} else {
			out[l++] = *key;
		}
	}
	out[l < n ? l : n - 1] = '\0';
}

/* Appends a variable's value (or default) to OUT; returns 0 or -1. */
/* Appends N bytes at V to the growing string OUT. */
static int append(char **out, size_t *len, const char *v, size_t n)
{
	char *p = realloc(*out, *len + n + 1);
	if (!p)
		return -1;
	memcpy(p + *len, v, n);
	*len += n;
	p[*len] = '\0';
	*out = p;
	return 0;
}

/* Appends the contents of file PATH (a secret: trailing newlines dropped). */
static int expand_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	char buf[65536];
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	size_t n = fread(buf, 1, sizeof buf, f);
	bool big = n == sizeof buf && fgetc(f) != EOF;
	fclose(f);
	if (big) {
		snprintf(err, errlen, "%s is larger than 64 KiB", path);
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	return append(out, len, buf, n);
}

static int expand_var(const char *name, size_t nlen, char **out, size_t *len,
		      char *err, size_t errlen)
{
	const char *dflt = NULL;
	if (nlen > 5 && memcmp(name, "file:", 5) == 0) {
		char path[4096];
		snprintf(path, sizeof path, "%.*s", (int)(nlen - 5), name + 5);
		return expand_file(path, out, len, err, errlen);
	}
	size_t klen = nlen, dlen = 0;
	for (size_t i = 0; i + 1 < nlen; i++) {
		if (name[i] == ':' && name[i + 1] == '-') {
			klen = i;
			dflt = name + i + 2;
			dlen = nlen - i - 2;
			break;
		}
	}
	char key[256];
	if (klen == 0 || klen >= sizeof key) {
		snprintf(err, errlen, "bad variable name in \"${%.*s}\"", (int)nlen, name);
		return -1;
	}
	memcpy(key, name, klen);
	key[klen] = '\0';
	const char *v = getenv(key);
	size_t vlen = v ? strlen(v) : dlen;
	if (!v && !dflt) {
		snprintf(err, errlen, "environment variable %s is not set (write ${%s:-default} for a default)", key, key);
		return -1;
	}
	char *p = realloc(*out, *len + vlen + 1);
	if (!p)
		return -1;
	memcpy(p + *len, v ? v : dflt, vlen);
	*len += vlen;
	p[*len] = '\0';
	*out = p;
	return 0;
}

/* Expands ${VAR} references. */
char *cfg_expand(const char *s, char *err, size_t errlen)
{
	size_t len = 0;
	char *out = calloc(1, 1);
	while (out && *s) {
		const char *d = strstr(s, "${");
		size_t lit = d ? (size_t)(d - s) : strlen(s);
		char *p = realloc(out, len + lit + 1);
		if (!p)
			break;
		out = p;
		memcpy(out + len, s, lit);
		len += lit;
		out[len] = '\0';
		if (!d)
			return out;
		const char *end = strchr(d + 2, '}');
		if (!end) {
			snprintf(err, errlen, "unterminated \"${\"");
			break;
		}
		if (expand_var(d + 2, (size_t)(end - d - 2), &out, &len, err, errlen) < 0)
			break;
		s = end + 1;
	}
	if (out && !*s)
		return out;
	free(out);
	return NULL;
}

/* Expands a string member, reporting failures at PATH. */
static char *expand_at(struct ctx *c, const char *path, const char *s)
{
	char err[300];
	char *r = cfg_expand(s, err, sizeof err);
	if (!r)
		bad(c, path, "%s", err);
	return r;
}

/* Reads "args": an array of strings. */
static void load_args(struct ctx *c, struct cfg_server *s, json_t *args, const char *path)
{
	size_t n = json_is_array(args) ? json_array_size(args) : 0;
	s->argv = calloc(n + 2, sizeof *s->argv);
	if (!s->argv)
		return;
	s->argv[0] = strdup(s->command ? s->command : "");
	if (args && !json_is_array(args)) {
		bad(c, path, "must be an array of strings");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char p[512], num[24];
		snprintf(num, sizeof num, "%zu", i);
		path_join(p, sizeof p, path, num);
		json_t *a = json_array_get(args, i);
		if (!json_is_string(a)) {
			bad(c, p, "must be a string");
			s->argv[i + 1] = strdup("");  /* no hole: free_strv stops at NULL */
			continue;
		}
		char *v = expand_at(c, p, json_string_value(a));
		s->argv[i + 1] = v ? v : strdup("");
	}
}

/* Reads "env": an object of strings. */
static void load_env(struct ctx *c, struct cfg_server *s, json_t *env, const char *path)
{
	if (!env)
		return;
	if (!json_is_object(env)) {
		bad(c, path, "must be an object of strings");
		return;
	}
	s->env = calloc(json_object_size(env) + 1, sizeof *s->env);
	size_t i = 0;
	const char *k;
	json_t *v;
	json_object_foreach(env, k, v) {
		char p[512];
		path_join(p, sizeof p, path, k);
		if (!json_is_string(v)) {
			bad(c, p, "must be a string");
			continue;
		}
		if (!*k || strchr(k, '=')) {
			bad(c, p, "not a valid environment variable name");
			continue;
		}
		char *val = expand_at(c, p, json_string_value(v));
		if (!val || !s->env)
			continue;
		size_t n = strlen(k) + strlen(val) + 2;
		s->env[i] = malloc(n);
		if (s->env[i])
			snprintf(s->env[i++], n, "%s=%s", k, val);
		free(val);
	}
}

/* Creates (without starting) the modules listed at PATH. */
static void build_pipeline(struct ctx *c, json_t *arr, const char *path,
			   struct pipeline **out)
{
	size_t before = c->errs->count;
	*out = pipeline_build_store(arr, c->file, path, c->errs, c->store);
	if (!*out)
		c->nerr += (int)(c->errs->count - before) ? (int)(c->errs->count - before) : 1;
}

/* Reads an optional string member. */
static char *opt_string(struct ctx *c, json_t *v, const char *path)
{
	if (!v)
		return NULL;
	if (!json_is_string(v)) {
		bad(c, path, "must be a string");
		return NULL;
	}
	return expand_at(c, path, json_string_value(v));
}

static const char *const server_keys[] = {
	"type", "command", "args", "env", "cwd", "enabled", "middleware",
	"disabled", "prefix", "timeout", "restart", "url", "headers", "protocol", "scope",
	"oauth", "certificateHash", "caFile", NULL
};

static void check_keys(struct ctx *c, json_t *obj, const char *path,
		       const char *const *list);
static void opt_bool(struct ctx *c, json_t *v, const char *path, bool *out);

static const char *const restart_keys[] = {
	"enabled", "initialDelayMs", "maxDelayMs", "maxRestarts", "windowMs", NULL
};

/* Reads a number of milliseconds at PATH into *OUT seconds. */
static void opt_ms(struct ctx *c, json_t *v, const char *path, double max, double *out)
{
	if (!v)
		return;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
		bad(c, path, "must be a whole number of milliseconds from 0 to %.0f", max);
	else
		*out = (double)json_integer_value(v) / 1000.0;
}

/* Reads "restart": true, false, or an object of backoff settings. */
static void load_restart(struct ctx *c, struct cfg_server *s, json_t *r, const char *path)
{
	char p[512];
	double limit;
	s->restart = true;
	s->restart_delay = 0.5;
	s->restart_max_delay = 30;
	s->restart_limit = 5;
	s->restart_window = 60;
	if (!r)
		return;
	if (json_is_boolean(r)) {
		s->restart = json_is_true(r);
		return;
	}
	if (!json_is_object(r)) {
		bad(c, path, "must be true, false or an object");
		return;
	}
	check_keys(c, r, path, restart_keys);
	path_join(p, sizeof p, path, "enabled");
	opt_bool(c, json_object_get(r, "enabled"), p, &s->restart);
	path_join(p, sizeof p, path, "initialDelayMs");
	opt_ms(c, json_object_get(r, "initialDelayMs"), p, 3600000, &s->restart_delay);
	path_join(p, sizeof p, path, "maxDelayMs");
	opt_ms(c, json_object_get(r, "maxDelayMs"), p, 3600000, &s->restart_max_delay);
	path_join(p, sizeof p, path, "windowMs");
	opt_ms(c, json_object_get(r, "windowMs"), p, 86400000, &s->restart_window);
	limit = 5;
	path_join(p, sizeof p, path, "maxRestarts");
	json_t *m = json_object_get(r, "maxRestarts");
	if (m && (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) > 1000))
		bad(c, p, "must be an integer from 0 to 1000");
	else if (m)
		limit = (double)json_integer_value(m);
	s->restart_limit = (unsigned)limit;
}

/* True when KEY is in the NULL-terminated LIST. */
static bool known(const char *const *list, const char *key)
{
	for (; *list; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* Reports keys that are not in LIST (typos must not pass silently). */
static void check_keys(struct ctx *c, json_t *obj, const char *path,
		       const char *const *list)
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v) {
		if (known(list, k))
			continue;
		char p[512];
		path_join(p, sizeof p, path, k);
		const char *near = names_nearest(k, list);
		if (near)
			bad(c, p, "unknown key (did you mean \"%s\"?)", near);
		else
			bad(c, p, "unknown key");
	}
}

/* Reads an optional boolean member into *OUT. */
static void opt_bool(struct ctx *c, json_t *v, const char *path, bool *out)
{
	if (!v)
		return;
	if (!json_is_boolean(v))
		bad(c, path, "must be true or false");
	else
		*out = json_is_true(v);
}

/* True for a prefix that keeps names client-safe. */
static bool valid_prefix(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 32)
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '-'))
			return false;
	return true;
}

/* Reads "headers": an object of strings, into "Name: value" lines. */
static void load_headers(struct ctx *c, struct cfg_server *s, json_t *h, const char *path)
{
	if (!h)
		return;
	if (!json_is_object(h)) {
		bad(c, path, "must be an object of strings");
		return;
	}
	s->headers = calloc(json_object_size(h) + 1, sizeof *s->headers);
	size_t i = 0;
	const char *k;
	json_t *v;
	json_object_foreach(h, k, v) {
		char p[512];
		path_join(p, sizeof p, path, k);
		if (!json_is_string(v) || !*k || strpbrk(k, ": \r\n")) {
			bad(c, p, json_is_string(v) ? "not a valid header name" : "must be a string");
			continue;
		}
		char *val = expand_at(c, p, json_string_value(v));
		if (!val || !s->headers)
			continue;
		if (strpbrk(val, "\r\n")) {
			bad(c, p, "a header value cannot contain a line break");
		} else {
			size_t n = strlen(k) + strlen(val) + 3;
			s->headers[i] = malloc(n);
			if (s->headers[i])
				snprintf(s->headers[i++], n, "%s: %s", k, val);
		}
		free(val);
	}
}

static const char *const oauth_keys[] = {
	"clientId", "clientSecret", "clientMetadataUrl", "scopes", "resource", "callbackPort",
	"perPrincipal", NULL
};

static char **opt_strv(struct ctx *c, json_t *v, const char *path);
static void opt_int_at(struct ctx *c, json_t *obj, const char *path, const char *key,
		       double min, double max, double *out);

/* Reads "oauth": true, false, or an object (struct cfg_oauth). */
static void load_oauth(struct ctx *c, struct cfg_server *s, json_t *v, const char *path)
{
	char p[512];
	if (!v || json_is_false(v))
		return;
	if (!json_is_true(v) && !json_is_object(v)) {
		bad(c, path, "must be true, false or an object");
		return;
	}
	struct cfg_oauth *o = s->oauth = calloc(1, sizeof *o);
	if (!o)
		return;
	o->resource = true;
	if (json_is_true(v))
		return;
	check_keys(c, v, path, oauth_keys);
	path_join(p, sizeof p, path, "clientId");
	o->client_id = opt_string(c, json_object_get(v, "clientId"), p);
	path_join(p, sizeof p, path, "clientSecret");
	o->client_secret = opt_string(c, json_object_get(v, "clientSecret"), p);
	if (o->client_secret && !o->client_id)
		bad(c, p, "needs a \"clientId\"");
	path_join(p, sizeof p, path, "clientMetadataUrl");
	o->client_metadata_url = opt_string(c, json_object_get(v, "clientMetadataUrl"), p);
	if (o->client_metadata_url && strncmp(o->client_metadata_url, "https://", 8) != 0)
		bad(c, p, "must be an https:// URL (a Client ID Metadata Document)");
	path_join(p, sizeof p, path, "scopes");
	o->scopes = opt_strv(c, json_object_get(v, "scopes"), p);
	path_join(p, sizeof p, path, "resource");
	json_t *r = json_object_get(v, "resource");
	if (json_is_boolean(r)) {
		o->resource = json_is_true(r);
	} else if (r) {
		o->resource_url = opt_string(c, r, p);
		if (o->resource_url && strncmp(o->resource_url, "http://", 7) &&
		    strncmp(o->resource_url, "https://", 8))
			bad(c, p, "must be true, false or an http(s) URL");
	}
	double port = 0;
	opt_int_at(c, v, path, "callbackPort", 0, 65535, &port);
	o->callback_port = (unsigned)port;
	json_t *pp = json_object_get(v, "perPrincipal");
	path_join(p, sizeof p, path, "perPrincipal");
	if (pp)
		opt_bool(c, pp, p, &o->per_principal);
}

/* Decodes a SHA-256 given as 64 hex digits or base64 (44 characters)
 * into OUT; -1 when it is neither. */
static int decode_hash(const char *t, unsigned char out[32])
{
	size_t n = strlen(t);
	if (n == 64) {
		for (size_t i = 0; i < 32; i++) {
			unsigned v = 0;
			for (size_t k = 0; k < 2; k++) {
				char ch = t[2 * i + k];
				int d = ch >= '0' && ch <= '9' ? ch - '0' :
					ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
					ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
				if (d < 0)
					return -1;
				v = v * 16 + (unsigned)d;
			}
			out[i] = (unsigned char)v;
		}
		return 0;
	}
	unsigned char b[48];
	if (n != 44 || t[43] != '=' || t[42] == '=' ||
	    EVP_DecodeBlock(b, (const unsigned char *)t, 44) != 33)
		return -1;
	memcpy(out, b, 32);
	return 0;
}

/* Reads what an "mcp-flow" entry takes beside its url: an https:// URL to
 * a numeric host or localhost (no DNS on the loop), "certificateHash" and
 * "caFile". */
static void load_flow_entry(struct ctx *c, struct cfg_server *s, json_t *e, const char *path)
{
	char p[512];
	path_join(p, sizeof p, path, "url");
	if (s->url) {
		const char *h = s->url + 8;
		size_t hl = strcspn(h, "/");
		bool v6 = hl > 0 && h[0] == '[';
		const char *colon = v6 ? memchr(h, ']', hl) : memchr(h, ':', hl);
		size_t host_len = colon ? (size_t)(colon - h) + (v6 ? 1 : 0) : hl;
		char host[64] = "";
		unsigned char a[16];
		if (host_len < sizeof host)
			memcpy(host, h, host_len), host[host_len] = 0;
		if (v6 && host_len > 2) {
			memmove(host, host + 1, host_len - 2);
			host[host_len - 2] = 0;
		}
		if (strncmp(s->url, "https://", 8))
			bad(c, p, "an mcp-flow server's url must be https://");
		else if (!colon || (v6 && (host_len >= hl || h[host_len] != ':')))
			bad(c, p, "must name the port (https://HOST:PORT/PATH)");
		else if (strcmp(host, "localhost") && inet_pton(AF_INET, host, a) != 1 &&
			 inet_pton(AF_INET6, host, a) != 1)
			bad(c, p, "the host must be a numeric address or localhost (no DNS lookup on the loop)");
	}
	json_t *hash = json_object_get(e, "certificateHash");
	path_join(p, sizeof p, path, "certificateHash");
	if (hash && (!json_is_string(hash) || decode_hash(json_string_value(hash), s->cert_hash) < 0))
		bad(c, p, "must be the SHA-256 of the certificate's DER: 64 hex digits or base64");
	else if (hash)
		s->has_cert_hash = true;
	path_join(p, sizeof p, path, "caFile");
	s->ca_file = opt_string(c, json_object_get(e, "caFile"), p);
}

/* Reads "type" and "url"; returns the transport. HTTP entries take no
 * command, args, env or cwd. */
static enum cfg_transport load_transport(struct ctx *c, struct cfg_server *s, json_t *e,
					 const char *path)
{
	char p[512];
	json_t *type = json_object_get(e, "type");
	json_t *url = json_object_get(e, "url");
	const char *t = json_string_value(type);
	path_join(p, sizeof p, path, "type");
	if (type && (!t || (strcmp(t, "stdio") && strcmp(t, "http") &&
			    strcmp(t, "streamable-http") && strcmp(t, "sse") &&
			    strcmp(t, "mcp-flow")))) {
		bad(c, p, "must be \"stdio\", \"http\" (Streamable HTTP), \"sse\" (HTTP+SSE) "
			"or \"mcp-flow\" (MCP over WebTransport)");
		return CFG_STDIO;
	}
	bool flow = t && strcmp(t, "mcp-flow") == 0;
	static const char *const flow_only[] = { "certificateHash", "caFile", NULL };
	for (size_t i = 0; !flow && flow_only[i]; i++) {
		if (!json_object_get(e, flow_only[i]))
			continue;
		path_join(p, sizeof p, path, flow_only[i]);
		bad(c, p, "only for an mcp-flow server (\"type\": \"mcp-flow\")");
	}
	if (!url && (!t || strcmp(t, "stdio") == 0))
		return CFG_STDIO;
	s->transport = flow ? CFG_FLOW : t && strcmp(t, "sse") == 0 ? CFG_SSE : CFG_HTTP;
	static const char *const local[] = { "command", "args", "env", "cwd", NULL };
	for (size_t i = 0; local[i]; i++) {
		if (!json_object_get(e, local[i]))
			continue;
		path_join(p, sizeof p, path, local[i]);
		bad(c, p, "not used by an HTTP server (it has a \"url\")");
	}
	path_join(p, sizeof p, path, "url");
	if (!url) {
		bad(c, path, "missing \"url\"");
		return s->transport;
	}
	s->url = opt_string(c, url, p);
	if (s->url && strncmp(s->url, "http://", 7) && strncmp(s->url, "https://", 8))
		bad(c, p, "must be an http:// or https:// URL");
	if (flow) {
		static const char *const http_only[] = { "headers", "oauth", NULL };
		for (size_t i = 0; http_only[i]; i++) {
			if (!json_object_get(e, http_only[i]))
				continue;
			path_join(p, sizeof p, path, http_only[i]);
			bad(c, p, "not used by an mcp-flow server");
		}
		load_flow_entry(c, s, e, path);
	} else {
		path_join(p, sizeof p, path, "headers");
		load_headers(c, s, json_object_get(e, "headers"), p);
		path_join(p, sizeof p, path, "oauth");
		load_oauth(c, s, json_object_get(e, "oauth"), p);
	}
	s->command = strdup(s->url ? s->url : "");
	return s->transport;
}

/* Reads "protocol": the era spoken to the backend (see enum cfg_protocol). */
static void load_protocol(struct ctx *c, struct cfg_server *s, json_t *v, const char *path)
{
	const char *t = json_string_value(v);
	s->protocol = CFG_PROTO_AUTO;
	if (!v)
		return;
	if (t && strcmp(t, "auto") == 0)
		s->protocol = CFG_PROTO_AUTO;
	else if (t && strcmp(t, "handshake") == 0)
		s->protocol = CFG_PROTO_HANDSHAKE;
	else if (t && strcmp(t, "2026-07-28") == 0)
		s->protocol = CFG_PROTO_STATELESS;
	else
		bad(c, path, "must be \"auto\", \"handshake\" or \"2026-07-28\"");
	if (s->transport == CFG_SSE && s->protocol == CFG_PROTO_STATELESS)
		bad(c, path, "the HTTP+SSE transport (\"type\": \"sse\") predates 2026-07-28");
}

/* Reads "scope": session (a child's default) or shared (an upstream's). */
static void load_scope(struct ctx *c, struct cfg_server *s, json_t *v, const char *path)
{
	const char *t = json_string_value(v);
	s->scope = s->transport == CFG_STDIO ? CFG_SCOPE_SESSION : CFG_SCOPE_SHARED;
	if (!v)
		return;
	if (t && strcmp(t, "session") == 0)
		s->scope = CFG_SCOPE_SESSION;
	else if (t && strcmp(t, "shared") == 0)
		s->scope = CFG_SCOPE_SHARED;
	else
		bad(c, path, "must be \"session\" or \"shared\"");
}

/* Reads one mcpServers entry. */
static void load_server(struct ctx *c, struct cfg_server *s, const char *name,
			json_t *e, const char *path)
{
	char p[512];
	s->name = strdup(name);
	s->enabled = true;
	if (!json_is_object(e)) {
		bad(c, path, "must be an object with a \"command\"");
		return;
	}
	check_keys(c, e, path, server_keys);
	if (load_transport(c, s, e, path) != CFG_STDIO)
		goto common;
	path_join(p, sizeof p, path, "oauth");
	if (json_object_get(e, "oauth"))
		bad(c, p, "only for an HTTP server (one with a \"url\")");
	path_join(p, sizeof p, path, "command");
	json_t *cmd = json_object_get(e, "command");
	if (!cmd)
		bad(c, path, "missing \"command\"");
	else if (!json_is_string(cmd) || !json_string_length(cmd))
		bad(c, p, "must be a non-empty string");
	else
		s->command = expand_at(c, p, json_string_value(cmd));
	path_join(p, sizeof p, path, "args");
	load_args(c, s, json_object_get(e, "args"), p);
	path_join(p, sizeof p, path, "env");
	load_env(c, s, json_object_get(e, "env"), p);
	path_join(p, sizeof p, path, "cwd");
	s->cwd = opt_string(c, json_object_get(e, "cwd"), p);
common:
	path_join(p, sizeof p, path, "enabled");
	opt_bool(c, json_object_get(e, "enabled"), p, &s->enabled);
	bool disabled = false;
	path_join(p, sizeof p, path, "disabled");
	opt_bool(c, json_object_get(e, "disabled"), p, &disabled);
	if (disabled)
		s->enabled = false;
	path_join(p, sizeof p, path, "prefix");
	s->prefix = opt_string(c, json_object_get(e, "prefix"), p);
	if (s->prefix && !valid_prefix(s->prefix))
		bad(c, p, "must be 1 to 32 characters of A-Z a-z 0-9 _ -");
	path_join(p, sizeof p, path, "timeout");
	opt_ms(c, json_object_get(e, "timeout"), p, 86400000, &s->timeout);
	path_join(p, sizeof p, path, "restart");
	load_restart(c, s, json_object_get(e, "restart"), p);
	path_join(p, sizeof p, path, "protocol");
	load_protocol(c, s, json_object_get(e, "protocol"), p);
	path_join(p, sizeof p, path, "scope");
	load_scope(c, s, json_object_get(e, "scope"), p);
	path_join(p, sizeof p, path, "middleware");
	s->middleware = json_object_get(e, "middleware");
	if (s->middleware && !json_is_array(s->middleware))
		bad(c, p, "must be an array of modules");
	else
		build_pipeline(c, s->middleware, p, &s->pipeline);
}

/* Reads "mcpServers". */
static void load_servers(struct ctx *c, struct cfg *cfg, json_t *servers)
{
	if (!servers) {
		bad(c, "", "missing \"mcpServers\"");
		return;
	}
	if (!json_is_object(servers)) {
		bad(c, "/mcpServers", "must be an object of named servers");
		return;
	}
	cfg->servers = calloc(json_object_size(servers) + 1, sizeof *cfg->servers);
	const char *k;
	json_t *v;
	json_object_foreach(servers, k, v) {
		char p[512];
		path_join(p, sizeof p, "/mcpServers", k);
		if (!*k)
			bad(c, p, "a server needs a non-empty name");
		load_server(c, &cfg->servers[cfg->nservers++], k, v, p);
	}
	size_t enabled = 0;
	for (size_t i = 0; i < cfg->nservers; i++)
		enabled += cfg->servers[i].enabled;
	if (enabled == 0)
		bad(c, "/mcpServers", "no enabled server: give one entry with a \"command\"");

}

/* Reads a positive integer option into *OUT. */
static void opt_uint(struct ctx *c, json_t *root, const char *key, double min,
		     double max, double *out)
{
	json_t *v = json_object_get(root, key);
	char p[128];
	if (!v)
		return;
	snprintf(p, sizeof p, "/%s", key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		bad(c, p, "must be an integer from %.0f to %.0f", min, max);
	else
		*out = (double)json_integer_value(v);
}

static const char *const top_keys[] = {
	"mcpServers", "maxMessageBytes", "maxOpenRequests", "shutdownGraceMs", "initTimeoutMs",
	"initJoinMs", "clientStallMs", "inputTimeoutMs", "logLevel", "separator", "status",
	"eras", "middleware", "listen", "tokenStore", "cluster", "redis", "telemetry",
	"flow", "$schema", NULL
};

static const char *const listen_keys[] = {
	"address", "port", "path", "ssePath", "messagesPath", "allowedOrigins", "allowedHosts",
	"maxConnections", "connectionTimeoutMs", "sessionIdleMs", "streamBufferBytes",
	"resumeGraceMs", "maxScopedSessions", "maxProcesses", "maxStartsPerSecond",
	"maxBodyBufferBytes", "maxSessions", "maxSessionsPerClient", "maxSessionsPerPrincipal", "publicUrl", "drainDelayMs",
	"ui", NULL
};

/* True when S is a numeric IPv4 or IPv6 address. */
static bool numeric_address(const char *s)
{
	unsigned char a[16];
	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* Parses "HOST:PORT", "[V6]:PORT" or "PORT". */
/* Parses SPEC, "HOST:PORT", "[V6]:PORT" or "PORT", into *ADDRESS (replaced
 * when SPEC names one) and *PORT; 0, or -1 when it is malformed. */
static int parse_host_port(const char *spec, char **address, unsigned *port_out)
{
	char host[64] = "";
	const char *port = spec;
	if (spec[0] == '[') {
		const char *end = strchr(spec, ']');
		if (!end || end[1] != ':' || (size_t)(end - spec - 1) >= sizeof host)
			return -1;
		memcpy(host, spec + 1, (size_t)(end - spec - 1));
		host[end - spec - 1] = '\0';
		port = end + 2;
	} else if (strchr(spec, ':')) {
		const char *colon = strrchr(spec, ':');
		if ((size_t)(colon - spec) >= sizeof host || strchr(spec, ':') != colon)
			return -1;
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		port = colon + 1;
	}
	char *end;
	errno = 0;
	unsigned long p = strtoul(port, &end, 10);
	if (!*port || *end || errno || p > 65535 || !isdigit((unsigned char)*port))
		return -1;
	if (host[0] && !numeric_address(host))
		return -1;
	if (host[0]) {
		char *a = strdup(host);
		if (!a)
			return -1;
		free(*address);
		*address = a;
	}
	*port_out = (unsigned)p;
	return 0;
}

int cfg_listen_parse(struct cfg_listen *l, const char *spec)
{
	return parse_host_port(spec, &l->address, &l->port);
}

int cfg_flow_parse(struct cfg_flow *f, const char *spec)
{
	return parse_host_port(spec, &f->address, &f->port);
}

/* Reads an optional array of strings at PATH into a NULL-terminated vector. */
static char **opt_strv(struct ctx *c, json_t *v, const char *path)
{
	if (!v)
		return NULL;
	if (!json_is_array(v)) {
		bad(c, path, "must be an array of strings");
		return NULL;
	}
	char **out = calloc(json_array_size(v) + 1, sizeof *out);
	size_t i, n = 0;
	json_t *e;
	json_array_foreach(v, i, e) {
		char p[512], num[24];
		snprintf(num, sizeof num, "%zu", i);
		path_join(p, sizeof p, path, num);
		if (!json_is_string(e) || !json_string_length(e))
			bad(c, p, "must be a non-empty string");
		else if (out)
			out[n++] = strdup(json_string_value(e));
	}
	return out;
}

/* Reads an integer member KEY of OBJ (at PATH) from MIN to MAX into *OUT. */
static void opt_int_at(struct ctx *c, json_t *obj, const char *path, const char *key,
		       double min, double max, double *out)
{
	char p[512];
	json_t *v = json_object_get(obj, key);
	if (!v)
		return;
	path_join(p, sizeof p, path, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		bad(c, p, "must be an integer from %.0f to %.0f", min, max);
	else
		*out = (double)json_integer_value(v);
}

/* True when P is a usable endpoint path: "/" and no query, fragment or space. */
static bool endpoint_path(json_t *p)
{
	return json_is_string(p) && json_string_value(p)[0] == '/' &&
	       !strpbrk(json_string_value(p), "?# \t\r\n");
}

/* Reads the path KEY of V into *OUT (owned): a path, or null for none
 * when NULLABLE (the legacy HTTP+SSE endpoints can be turned off). */
static void listen_path(struct ctx *c, json_t *v, const char *key, bool nullable, char **out)
{
	char p[64];
	json_t *j = json_object_get(v, key);
	snprintf(p, sizeof p, "/listen/%s", key);
	if (!j)
		return;
	if (nullable && json_is_null(j)) {
		free(*out);
		*out = NULL;
	} else if (!endpoint_path(j)) {
		bad(c, p, nullable ? "must be a path starting with \"/\", or null" :
				     "must be a path starting with \"/\"");
	} else {
		free(*out);
		*out = strdup(json_string_value(j));
	}
}

/* Reads "listen"; the defaults apply without it (for --listen). */
static void load_listen(struct ctx *c, struct cfg_listen *l, json_t *v)
{
	double port = CFG_DEFAULT_LISTEN_PORT, conns = 256, tmo = 60000, idle = 1800000;
	double sbuf = 8 << 20, scoped = CFG_DEFAULT_MAX_SCOPED_SESSIONS;
	double grace = CFG_DEFAULT_RESUME_GRACE_MS;
	double procs = CFG_DEFAULT_MAX_PROCESSES, starts = CFG_DEFAULT_MAX_STARTS;
	double budget = 0, sessions = 4096, per_client = 1024, per_principal = 256;
	const char *path = "/listen";
	l->address = strdup(CFG_DEFAULT_LISTEN_ADDRESS);
	l->path = strdup(CFG_DEFAULT_LISTEN_PATH);
	l->sse_path = strdup(CFG_DEFAULT_SSE_PATH);
	l->messages_path = strdup(CFG_DEFAULT_MESSAGES_PATH);
	l->ui = true;
	if (v && !json_is_object(v)) {
		bad(c, path, "must be an object");
		v = NULL;
	}
	if (v) {
		l->set = true;
		check_keys(c, v, path, listen_keys);
		json_t *a = json_object_get(v, "address");
		if (a && (!json_is_string(a) || !numeric_address(json_string_value(a)))) {
			bad(c, "/listen/address", "must be a numeric IPv4 or IPv6 address");
		} else if (a) {
			free(l->address);
			l->address = strdup(json_string_value(a));
		}
		listen_path(c, v, "path", false, &l->path);
		listen_path(c, v, "ssePath", true, &l->sse_path);
		listen_path(c, v, "messagesPath", false, &l->messages_path);
		if (l->sse_path && (!strcmp(l->sse_path, l->path) ||
				    !strcmp(l->messages_path, l->path) ||
				    !strcmp(l->sse_path, l->messages_path)))
			bad(c, "/listen/ssePath", "path, ssePath and messagesPath must differ");
		l->origins = opt_strv(c, json_object_get(v, "allowedOrigins"), "/listen/allowedOrigins");
		l->hosts = opt_strv(c, json_object_get(v, "allowedHosts"), "/listen/allowedHosts");
		opt_int_at(c, v, path, "port", 0, 65535, &port);
		opt_int_at(c, v, path, "maxConnections", 1, 65536, &conns);
		opt_int_at(c, v, path, "connectionTimeoutMs", 1000, 86400000, &tmo);
		opt_int_at(c, v, path, "sessionIdleMs", 1000, 604800000, &idle);
		opt_int_at(c, v, path, "streamBufferBytes", 65536, 4294967296.0, &sbuf);
		opt_int_at(c, v, path, "resumeGraceMs", 0, 3600000, &grace);
		opt_int_at(c, v, path, "maxScopedSessions", 1, 65536, &scoped);
		opt_int_at(c, v, path, "maxProcesses", 1, 65536, &procs);
		opt_int_at(c, v, path, "maxStartsPerSecond", 1, 10000, &starts);
		opt_int_at(c, v, path, "maxBodyBufferBytes", 4096, 68719476736.0, &budget);
		opt_int_at(c, v, path, "maxSessions", 1, 1000000, &sessions);
		opt_int_at(c, v, path, "maxSessionsPerClient", 1, 1000000, &per_client);
		opt_int_at(c, v, path, "maxSessionsPerPrincipal", 1, 1000000, &per_principal);
		double drain = 0;
		opt_int_at(c, v, path, "drainDelayMs", 0, 3600000, &drain);
		if (json_object_get(v, "ui"))
			opt_bool(c, json_object_get(v, "ui"), "/listen/ui", &l->ui);
		l->drain_delay = drain / 1000.0;
		json_t *pu = json_object_get(v, "publicUrl");
		if (pu && (!json_is_string(pu) ||
			   (strncmp(json_string_value(pu), "http://", 7) &&
			    strncmp(json_string_value(pu), "https://", 8)) ||
			   strpbrk(json_string_value(pu), "?# \t\r\n")))
			bad(c, "/listen/publicUrl", "must be an http:// or https:// URL (the base "
			    "mcp-chain's clients reach it at, e.g. behind a reverse proxy)");
		else if (pu)
			l->public_url = strdup(json_string_value(pu));
		size_t len = l->public_url ? strlen(l->public_url) : 0;
		if (len && l->public_url[len - 1] == '/')
			l->public_url[len - 1] = '\0';
	}
	l->body_budget = (uint64_t)budget;
	l->max_sessions = (unsigned)sessions;
	l->max_sessions_per_client = (unsigned)per_client;
	l->max_sessions_per_principal = (unsigned)per_principal;
	l->max_scoped_sessions = (unsigned)scoped;
	l->max_processes = (unsigned)procs;
	l->max_starts = (unsigned)starts;
	l->port = (unsigned)port;
	l->max_connections = (unsigned)conns;
	l->conn_timeout = tmo / 1000.0;
	l->session_idle = idle / 1000.0;
	l->stream_buffer = (size_t)sbuf;
	l->resume_grace = grace / 1000.0;
}

/* True when S is an instance tag: [A-Za-z0-9_-]{1,32}. */
static bool instance_tag(const char *s)
{
	size_t n = strlen(s);
	return n >= 1 && n <= 32 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					  "0123456789_-") == n;
}

/* Reads "cluster". */
static void load_cluster(struct ctx *c, struct cfg *cfg, json_t *v)
{
	static const char *const keys[] = { "instance", "keyFile", "sessionMaxAgeMs", "instances",
					    "onStoreDown", NULL };
	struct cfg_cluster *k = &cfg->cluster;
	char why[400];
	k->session_max_age = 86400;
	if (!v)
		return;
	if (!json_is_object(v)) {
		bad(c, "/cluster", "must be an object: {\"instance\": TAG, \"keyFile\": PATH}");
		return;
	}
	k->set = true;
	check_keys(c, v, "/cluster", keys);
	k->instance = opt_string(c, json_object_get(v, "instance"), "/cluster/instance");
	if (!k->instance)
		bad(c, "/cluster/instance", "missing: this instance's tag, which its session ids "
		    "begin with (letters, digits, '-' and '_'; e.g. \"${MCP_CHAIN_INSTANCE}\")");
	else if (!instance_tag(k->instance))
		bad(c, "/cluster/instance", "\"%.40s\" is not a tag: 1 to 32 letters, digits, "
		    "'-' or '_'", k->instance);
	k->key_file = opt_string(c, json_object_get(v, "keyFile"), "/cluster/keyFile");
	if (!k->key_file)
		bad(c, "/cluster/keyFile", "missing: the key list every instance shares "
		    "(openssl rand -hex 32 > PATH; chmod 600 PATH)");
	else if (seal_keys_load(k->key_file, k->keys, CFG_CLUSTER_MAX_KEYS, &k->nkeys, why,
				sizeof why) < 0)
		bad(c, "/cluster/keyFile", "%s", why);
	double age = 86400000;
	opt_int_at(c, v, "/cluster", "sessionMaxAgeMs", 1000, 31536000000.0, &age);
	k->session_max_age = age / 1000.0;
	json_t *sd = json_object_get(v, "onStoreDown");
	static const char *const uses[] = { "sessions", "requestState", NULL };
	bool *outs[] = { &k->sessions_closed, &k->rs_closed };
	if (sd && json_is_object(sd))
		check_keys(c, sd, "/cluster/onStoreDown", uses);
	for (size_t i = 0; sd && uses[i]; i++) {
		json_t *e = json_is_object(sd) ? json_object_get(sd, uses[i]) : sd;
		const char *t = json_string_value(e);
		char p[64];
		snprintf(p, sizeof p, "/cluster/onStoreDown%s%s", json_is_object(sd) ? "/" : "",
			 json_is_object(sd) ? uses[i] : "");
		if (e && (!t || (strcmp(t, "open") && strcmp(t, "closed")))) {
			bad(c, p, "must be \"open\" or \"closed\" (or an object of them: "
			    "{\"sessions\", \"requestState\"})");
			break;
		}
		*outs[i] = t && strcmp(t, "closed") == 0;
	}
	json_t *peers = json_object_get(v, "instances");
	if (peers && !json_is_object(peers)) {
		bad(c, "/cluster/instances", "must be an object: {TAG: \"http://HOST:PORT\"}");
	} else if (peers) {
		size_t n = json_object_size(peers), i = 0;
		const char *tag;
		json_t *u;
		k->peer_tags = calloc(n + 1, sizeof *k->peer_tags);
		k->peer_urls = calloc(n + 1, sizeof *k->peer_urls);
		if (!k->peer_tags || !k->peer_urls)
			return;
		json_object_foreach(peers, tag, u) {
			char p[128];
			snprintf(p, sizeof p, "/cluster/instances/%.40s", tag);
			const char *url = json_string_value(u);
			if (!instance_tag(tag))
				bad(c, p, "is not a tag: 1 to 32 letters, digits, '-' or '_'");
			else if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
				bad(c, p, "must be the instance's http:// or https:// base URL");
			else {
				k->peer_tags[i] = strdup(tag);
				k->peer_urls[i] = strdup(url);
				i++;
			}
		}
	}
}

/* Reads "tokenStore" and checks the perPrincipal upstreams need it. */
static void load_token_store(struct ctx *c, struct cfg *cfg, json_t *v)
{
	static const char *const keys[] = { "keyFile", NULL };
	char p[512], why[400];
	for (size_t i = 0; i < cfg->nservers; i++) {
		const struct cfg_server *s = &cfg->servers[i];
		if (!s->oauth || !s->oauth->per_principal)
			continue;
		snprintf(p, sizeof p, "/mcpServers/%s/oauth/perPrincipal", s->name);
		if (s->scope != CFG_SCOPE_SESSION)
			bad(c, p, "needs \"scope\": \"session\" (each HTTP session's own "
			    "backend, which knows whose tokens to use) and --listen");
	}
	if (v && !json_is_object(v)) {
		bad(c, "/tokenStore", "must be an object: {\"keyFile\": PATH}");
		return;
	}
	if (v) {
		check_keys(c, v, "/tokenStore", keys);
		cfg->token_key_file = opt_string(c, json_object_get(v, "keyFile"), "/tokenStore/keyFile");
		if (!cfg->token_key_file)
			bad(c, "/tokenStore/keyFile", "missing: a file of 32 random bytes "
			    "(head -c32 /dev/urandom > PATH; chmod 600 PATH)");
		else if (seal_key_load(cfg->token_key_file, cfg->token_key, why, sizeof why) < 0)
			bad(c, "/tokenStore/keyFile", "%s", why);
		else
			cfg->has_token_key = true;
	} else if (cfg_has_per_principal(cfg)) {
		bad(c, "/tokenStore", "missing: an upstream is perPrincipal, and its tokens are "
		    "kept sealed with {\"keyFile\": PATH}, a file of 32 random bytes "
		    "(head -c32 /dev/urandom > PATH; chmod 600 PATH)");
	}
}

/* ---- "redis": the shared store ---- */

static const char *const redis_keys[] = {
	"url", "host", "port", "password", "db", "prefix", "timeoutMs", "connectTimeoutMs", NULL
};

/* Parses URL, "redis://[:PASSWORD@]HOST[:PORT][/DB]" (expanded), into R. */
static void redis_url(struct ctx *c, struct cfg_redis *r, const char *url)
{
	const char *p = url + 8, *at, *slash, *colon;
	char *end;
	if (strncmp(url, "redis://", 8) != 0) {
		bad(c, "/redis/url", "must be redis://[:PASSWORD@]HOST[:PORT][/DB]");
		return;
	}
	slash = strchr(p, '/');
	at = strrchr(p, '@');
	if (at && slash && at > slash)
		at = NULL;
	if (at) {
		if (*p != ':' || at == p + 1) {
			bad(c, "/redis/url", "a password is given as redis://:PASSWORD@HOST");
			return;
		}
		r->password = strndup(p + 1, (size_t)(at - p - 1));
		p = at + 1;
	}
	size_t hlen = slash ? (size_t)(slash - p) : strlen(p);
	colon = memchr(p, ':', hlen);
	if ((colon ? colon : p + hlen) == p) {
		bad(c, "/redis/url", "no host in redis://HOST[:PORT][/DB]");
		return;
	}
	r->host = strndup(p, colon ? (size_t)(colon - p) : hlen);
	if (colon) {
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (end != p + hlen || end == colon + 1 || port == 0 || port > 65535)
			bad(c, "/redis/url", "the port must be a number from 1 to 65535");
		r->port = (unsigned)port;
	}
	if (slash && slash[1]) {
		unsigned long db = strtoul(slash + 1, &end, 10);
		if (*end || db > 1000000)
			bad(c, "/redis/url", "the database after the host must be a number");
		r->db = (unsigned)db;
	}
}

/* Reads "redis" (V, may be NULL) into CFG->redis. */
static void load_redis(struct ctx *c, struct cfg *cfg, json_t *v)
{
	struct cfg_redis *r = &cfg->redis;
	double port = 6379, db = 0, tmo = 250, ctmo = 1000;
	if (!v)
		return;
	if (!json_is_object(v)) {
		bad(c, "/redis", "must be an object: {\"host\", \"port\", ...} or {\"url\": "
		    "\"redis://[:PASSWORD@]HOST[:PORT][/DB]\"}");
		return;
	}
	r->set = true;
	c->store = true;
	check_keys(c, v, "/redis", redis_keys);
	char *url = opt_string(c, json_object_get(v, "url"), "/redis/url");
	if (url) {
		for (const char *const *k = redis_keys + 1; k < redis_keys + 5; k++) {
			char p[64];
			snprintf(p, sizeof p, "/redis/%s", *k);
			if (json_object_get(v, *k))
				bad(c, p, "not with \"url\", which says it already");
		}
		r->port = 6379;
		redis_url(c, r, url);
		free(url);
	} else {
		r->host = opt_string(c, json_object_get(v, "host"), "/redis/host");
		r->password = opt_string(c, json_object_get(v, "password"), "/redis/password");
		opt_int_at(c, v, "/redis", "port", 1, 65535, &port);
		opt_int_at(c, v, "/redis", "db", 0, 1000000, &db);
		r->port = (unsigned)port;
		r->db = (unsigned)db;
	}
	if (!r->host)
		r->host = strdup("127.0.0.1");
	if (r->password && !r->password[0]) {
		free(r->password);
		r->password = NULL;
	}
	r->prefix = opt_string(c, json_object_get(v, "prefix"), "/redis/prefix");
	if (!r->prefix)
		r->prefix = strdup("mcp-chain:");
	opt_int_at(c, v, "/redis", "timeoutMs", 1, 60000, &tmo);
	opt_int_at(c, v, "/redis", "connectTimeoutMs", 1, 60000, &ctmo);
	r->timeout = tmo / 1000.0;
	r->connect_timeout = ctmo / 1000.0;
}

/* ---- "telemetry": traces over OTLP/HTTP ---- */

static const char *const telemetry_keys[] = {
	"enabled", "endpoint", "headers", "serviceName", "sampling", "batchSize", "queueSize",
	"exportIntervalMs", "exportTimeoutMs", NULL
};

/* Reads "telemetry" (V, may be NULL) into CFG->telemetry. */
static void load_telemetry(struct ctx *c, struct cfg *cfg, json_t *v)
{
	struct cfg_telemetry *t = &cfg->telemetry;
	double batch = 512, queue = 4096, interval = 1000, tmo = 5000;
	bool enabled = true;
	if (!v)
		return;
	if (!json_is_object(v)) {
		bad(c, "/telemetry", "must be an object: {\"endpoint\": "
		    "\"http://HOST:4318/v1/traces\", ...}");
		return;
	}
	check_keys(c, v, "/telemetry", telemetry_keys);
	if (json_object_get(v, "enabled"))
		opt_bool(c, json_object_get(v, "enabled"), "/telemetry/enabled", &enabled);
	t->endpoint = opt_string(c, json_object_get(v, "endpoint"), "/telemetry/endpoint");
	if (!t->endpoint)
		bad(c, "/telemetry/endpoint", "is required: the OTLP/HTTP traces URL, as "
		    "http://127.0.0.1:4318/v1/traces");
	else if (strncmp(t->endpoint, "http://", 7) && strncmp(t->endpoint, "https://", 8))
		bad(c, "/telemetry/endpoint", "must be an http:// or https:// URL");
	json_t *h = json_object_get(v, "headers");
	if (h && !json_is_object(h)) {
		bad(c, "/telemetry/headers", "must be an object of strings");
	} else if (h) {
		t->headers = calloc(json_object_size(h) + 1, sizeof *t->headers);
		const char *k;
		json_t *hv;
		size_t i = 0;
		json_object_foreach(h, k, hv) {
			char p[300];
			snprintf(p, sizeof p, "/telemetry/headers/%s", k);
			if (!json_is_string(hv) || strpbrk(k, ": \t\r\n") || !k[0]) {
				bad(c, p, "must be a string, under a header name");
				continue;
			}
			char *val = expand_at(c, p, json_string_value(hv));
			if (val && strpbrk(val, "\r\n"))
				bad(c, p, "must not hold a line break");
			else if (val && t->headers) {
				size_t n = strlen(k) + strlen(val) + 3;
				t->headers[i] = malloc(n);
				if (t->headers[i])
					snprintf(t->headers[i++], n, "%s: %s", k, val);
			}
			if (val)
				OPENSSL_cleanse(val, strlen(val));
			free(val);
		}
	}
	t->service_name = opt_string(c, json_object_get(v, "serviceName"),
				     "/telemetry/serviceName");
	if (!t->service_name)
		t->service_name = strdup("mcp-chain");
	t->sampling = 1;
	json_t *s = json_object_get(v, "sampling");
	if (s && (!json_is_number(s) || json_number_value(s) < 0 || json_number_value(s) > 1))
		bad(c, "/telemetry/sampling", "must be a number from 0 to 1");
	else if (s)
		t->sampling = json_number_value(s);
	opt_int_at(c, v, "/telemetry", "batchSize", 1, 65536, &batch);
	opt_int_at(c, v, "/telemetry", "queueSize", 1, 1048576, &queue);
	opt_int_at(c, v, "/telemetry", "exportIntervalMs", 10, 3600000, &interval);
	opt_int_at(c, v, "/telemetry", "exportTimeoutMs", 100, 600000, &tmo);
	if (batch > queue)
		bad(c, "/telemetry/batchSize", "must not be more than queueSize");
	t->batch_size = (unsigned)batch;
	t->queue_size = (unsigned)queue;
	t->export_interval = interval / 1000.0;
	t->export_timeout = tmo / 1000.0;
	t->set = enabled;
}

/* ---- "flow": the MCP-Flow front ---- */

static void free_strv(char **v);

static const char *const flow_keys[] = {
	"address", "port", "path", "certificate", "key", "allowedOrigins",
	"maxConcurrentStreams", "streamThresholdBytes", "datagrams", "datagramsPerSecond",
	"idleTimeoutMs", "maxConnections", NULL
};

/* Reads "flow" (V, may be NULL) into CFG->flow; the defaults when absent. */
static void load_flow(struct ctx *c, struct cfg *cfg, json_t *v)
{
	struct cfg_flow *f = &cfg->flow;
	double port = CFG_DEFAULT_FLOW_PORT, streams = 16, threshold = 65536, rate = 200;
	double idle = 30000, conns = 256;
	f->address = strdup(CFG_DEFAULT_LISTEN_ADDRESS);
	f->path = strdup("/mcp-flow");
	f->datagrams = true;
	if (v && !json_is_object(v)) {
		bad(c, "/flow", "must be an object: {\"certificate\": PEM, \"key\": PEM, ...}");
		v = NULL;
	}
	if (v) {
		f->set = true;
		check_keys(c, v, "/flow", flow_keys);
		json_t *a = json_object_get(v, "address");
		if (a && (!json_is_string(a) || !numeric_address(json_string_value(a)))) {
			bad(c, "/flow/address", "must be a numeric IPv4 or IPv6 address");
		} else if (a) {
			free(f->address);
			f->address = strdup(json_string_value(a));
		}
		json_t *p = json_object_get(v, "path");
		if (p && (!json_is_string(p) || json_string_value(p)[0] != '/' ||
			  strpbrk(json_string_value(p), "?# \t\r\n"))) {
			bad(c, "/flow/path", "must be a path beginning with /");
		} else if (p) {
			free(f->path);
			f->path = strdup(json_string_value(p));
		}
		f->cert_file = opt_string(c, json_object_get(v, "certificate"), "/flow/certificate");
		f->key_file = opt_string(c, json_object_get(v, "key"), "/flow/key");
		if (!f->cert_file != !f->key_file)
			bad(c, f->cert_file ? "/flow/key" : "/flow/certificate",
			    "is needed with %s (or leave both out: a self-signed certificate "
			    "valid 10 days is made at start)", f->cert_file ? "certificate" : "key");
		if (f->cert_file && access(f->cert_file, R_OK) != 0)
			bad(c, "/flow/certificate", "cannot be read: %s", strerror(errno));
		if (f->key_file && access(f->key_file, R_OK) != 0)
			bad(c, "/flow/key", "cannot be read: %s", strerror(errno));
		f->origins = opt_strv(c, json_object_get(v, "allowedOrigins"),
				      "/flow/allowedOrigins");
		opt_int_at(c, v, "/flow", "port", 0, 65535, &port);
		opt_int_at(c, v, "/flow", "maxConcurrentStreams", 1, 1024, &streams);
		opt_int_at(c, v, "/flow", "streamThresholdBytes", 1024, 1073741824.0, &threshold);
		opt_int_at(c, v, "/flow", "datagramsPerSecond", 1, 100000, &rate);
		opt_int_at(c, v, "/flow", "idleTimeoutMs", 1000, 86400000, &idle);
		opt_int_at(c, v, "/flow", "maxConnections", 1, 65536, &conns);
		if (json_object_get(v, "datagrams"))
			opt_bool(c, json_object_get(v, "datagrams"), "/flow/datagrams",
				 &f->datagrams);
	}
	f->port = (unsigned)port;
	f->max_streams = (unsigned)streams;
	f->stream_threshold = (size_t)threshold;
	f->datagram_rate = (unsigned)rate;
	f->idle_timeout = idle / 1000.0;
	f->max_connections = (unsigned)conns;
}

/* Frees what "flow" holds. */
static void flow_release(struct cfg_flow *f)
{
	free(f->address);
	free(f->path);
	free(f->cert_file);
	free(f->key_file);
	free_strv(f->origins);
}

/* Frees what "telemetry" holds (header values wiped). */
static void telemetry_release(struct cfg_telemetry *t)
{
	free(t->endpoint);
	for (char **h = t->headers; h && *h; h++) {
		OPENSSL_cleanse(*h, strlen(*h));
		free(*h);
	}
	free(t->headers);
	free(t->service_name);
}

/* Frees what "redis" holds (the password wiped). */
static void redis_release(struct cfg_redis *r)
{
	free(r->host);
	if (r->password)
		OPENSSL_cleanse(r->password, strlen(r->password));
	free(r->password);
	free(r->prefix);
}

/* True when two strings, either NULL, are the same. */
static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

bool cfg_telemetry_equal(const struct cfg_telemetry *a, const struct cfg_telemetry *b)
{
	size_t i = 0;
	for (; a->headers && b->headers && a->headers[i] && b->headers[i]; i++)
		if (strcmp(a->headers[i], b->headers[i]))
			return false;
	if ((a->headers && a->headers[i]) || (b->headers && b->headers[i]))
		return false;
	return a->set == b->set && same_str(a->endpoint, b->endpoint) &&
	       same_str(a->service_name, b->service_name) && a->sampling == b->sampling &&
	       a->batch_size == b->batch_size && a->queue_size == b->queue_size &&
	       a->export_interval == b->export_interval &&
	       a->export_timeout == b->export_timeout;
}

bool cfg_redis_equal(const struct cfg_redis *a, const struct cfg_redis *b)
{
	return a->set == b->set && same_str(a->host, b->host) && a->port == b->port &&
	       same_str(a->password, b->password) && a->db == b->db &&
	       same_str(a->prefix, b->prefix) && a->timeout == b->timeout &&
	       a->connect_timeout == b->connect_timeout;
}

/* Reads the top-level options. */
static void load_top(struct ctx *c, struct cfg *cfg)
{
	json_t *root = cfg->root;
	if (!json_is_object(root)) {
		bad(c, "", "the configuration must be a JSON object");
		return;
	}
	check_keys(c, root, "", top_keys);
	load_redis(c, cfg, json_object_get(root, "redis"));   /* before the pipelines */
	load_telemetry(c, cfg, json_object_get(root, "telemetry"));
	load_flow(c, cfg, json_object_get(root, "flow"));
	json_t *schema = json_object_get(root, "$schema");
	if (schema && !json_is_string(schema))
		bad(c, "/$schema", "must be a string: the JSON Schema this file follows "
		    "(mcp-chain schema prints it)");
	load_servers(c, cfg, json_object_get(root, "mcpServers"));
	double max = (double)CFG_DEFAULT_MAX_MESSAGE, grace = CFG_DEFAULT_GRACE * 1000;
	double init = CFG_DEFAULT_INIT_TIMEOUT * 1000, join = CFG_DEFAULT_INIT_JOIN * 1000;
	double open = CFG_DEFAULT_MAX_OPEN, stall = CFG_DEFAULT_CLIENT_STALL * 1000;
	opt_uint(c, root, "maxMessageBytes", 4096, 4294967296.0, &max);
	opt_uint(c, root, "maxOpenRequests", 1, 1000000, &open);
	cfg->max_open = (size_t)open;
	opt_uint(c, root, "shutdownGraceMs", 0, 600000, &grace);
	opt_uint(c, root, "initTimeoutMs", 100, 3600000, &init);
	opt_uint(c, root, "initJoinMs", 0, 3600000, &join);
	opt_uint(c, root, "clientStallMs", 0, 86400000, &stall);
	cfg->client_stall = stall / 1000.0;
	double input_ttl = CFG_DEFAULT_INPUT_TTL * 1000;
	opt_uint(c, root, "inputTimeoutMs", 1000, 86400000, &input_ttl);
	cfg->input_ttl = input_ttl / 1000.0;
	cfg->max_message = (size_t)max;
	cfg->grace = grace / 1000.0;
	cfg->init_timeout = init / 1000.0;
	cfg->init_join = join / 1000.0;
	json_t *sep = json_object_get(root, "separator");
	if (sep && (!json_is_string(sep) || !json_string_length(sep) ||
		    json_string_length(sep) > 8 || !valid_prefix(json_string_value(sep))))
		bad(c, "/separator", "must be 1 to 8 characters of A-Z a-z 0-9 _ -");
	cfg->separator = strdup(json_is_string(sep) ? json_string_value(sep) : "__");
	json_t *st = json_object_get(root, "status");
	if (st) {
		opt_bool(c, st, "/status", &cfg->status);
		cfg->status_set = true;
	}
	json_t *eras = json_object_get(root, "eras");
	if (eras && !(json_is_string(eras) && (strcmp(json_string_value(eras), "follow") == 0 ||
					       strcmp(json_string_value(eras), "both") == 0)))
		bad(c, "/eras", "must be \"follow\" (a client is offered the eras the backends "
		    "speak) or \"both\" (2026-07-28 and the handshake era, whatever is behind)");
	else
		cfg->offer_stateless = eras && strcmp(json_string_value(eras), "both") == 0;
	json_t *lvl = json_object_get(root, "logLevel");
	if (lvl) {
		if (!json_is_string(lvl) || log_parse_level(json_string_value(lvl), &cfg->log_level) < 0)
			bad(c, "/logLevel", "must be one of \"error\", \"warn\", \"info\", \"debug\"");
		else
			cfg->has_log_level = true;
	}
	load_listen(c, &cfg->listen, json_object_get(root, "listen"));
	load_token_store(c, cfg, json_object_get(root, "tokenStore"));
	load_cluster(c, cfg, json_object_get(root, "cluster"));
	cfg->middleware = json_object_get(root, "middleware");
	if (cfg->middleware && !json_is_array(cfg->middleware))
		bad(c, "/middleware", "must be an array of modules");
	else
		build_pipeline(c, cfg->middleware, "/middleware", &cfg->pipeline);
}

/* Validates a parsed document. */
static struct cfg *finish(json_t *root, const char *name, struct cfg_errors *errs)
{
	struct ctx c = { .file = name, .errs = errs };
	struct cfg *cfg = calloc(1, sizeof *cfg);
	if (!cfg) {
		json_decref(root);
		return NULL;
	}
	cfg->root = root;
	cfg->path = strdup(name);
	load_top(&c, cfg);
	if (c.nerr) {
		cfg_free(cfg);
		return NULL;
	}
	return cfg;
}

/* Loads a file. */
struct cfg *cfg_load(const char *path, struct cfg_errors *errs)
{
	json_error_t e;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
	if (!root) {
		if (e.line <= 0)
			cfg_error(errs, "%s: %s", path, e.text);
		else
			cfg_error(errs, "%s:%d:%d: %s", path, e.line, e.column, e.text);
		return NULL;
	}
	return finish(root, path, errs);
}

/* Loads from memory. */
struct cfg *cfg_load_string(const char *text, const char *name, struct cfg_errors *errs)
{
	json_error_t e;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &e);
	if (!root) {
		cfg_error(errs, "%s:%d:%d: %s", name, e.line, e.column, e.text);
		return NULL;
	}
	return finish(root, name, errs);
}

/* Frees a NULL-terminated string vector. */
static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Frees everything. */
void cfg_free(struct cfg *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nservers; i++) {
		struct cfg_server *s = &c->servers[i];
		free(s->name);
		free(s->command);
		free_strv(s->argv);
		free_strv(s->env);
		free(s->cwd);
		free(s->prefix);
		free(s->url);
		free(s->ca_file);
		free_strv(s->headers);
		if (s->oauth) {
			free(s->oauth->client_id);
			free(s->oauth->client_secret);
			free(s->oauth->client_metadata_url);
			free_strv(s->oauth->scopes);
			free(s->oauth->resource_url);
			free(s->oauth);
		}
		pipeline_unref(s->pipeline);
	}
	pipeline_unref(c->pipeline);
	free(c->listen.address);
	free(c->listen.path);
	free(c->listen.sse_path);
	free(c->listen.messages_path);
	free_strv(c->listen.origins);
	free_strv(c->listen.hosts);
	free(c->listen.public_url);
	free(c->token_key_file);
	redis_release(&c->redis);
	telemetry_release(&c->telemetry);
	flow_release(&c->flow);
	OPENSSL_cleanse(c->token_key, sizeof c->token_key);
	free(c->cluster.instance);
	free(c->cluster.key_file);
	OPENSSL_cleanse(c->cluster.keys, sizeof c->cluster.keys);
	free_strv(c->cluster.peer_tags);
	free_strv(c->cluster.peer_urls);
	free(c->servers);
	free(c->separator);
	free(c->path);
	json_decref(c->root);
	free(c);
}

bool cfg_has_per_principal(const struct cfg *c)
{
	for (size_t i = 0; i < c->nservers; i++)
		if (c->servers[i].enabled && c->servers[i].oauth && c->servers[i].oauth->per_principal)
			return true;
	return false;
}

/* True when an enabled entry of C is session-scoped. */
bool cfg_has_session_scope(const struct cfg *c)
{
	for (size_t i = 0; i < c->nservers; i++)
		if (c->servers[i].enabled && c->servers[i].scope == CFG_SCOPE_SESSION)
			return true;
	return false;
}
