/*
 * config.h - the configuration file: JSON in the shape of Claude's
 * "mcpServers" configuration, plus mcp-chain's own top-level options.
 *
 *   { "mcpServers": { "NAME": { "command": "...", "args": [...],
 *                               "env": {...}, "cwd": "..." } },
 *     "maxMessageBytes": 134217728, "shutdownGraceMs": 2000,
 *     "clientStallMs": 60000, "logLevel": "info", "middleware": [ ... ],
 *     "listen": { "address": "127.0.0.1", "port": 8080, "path": "/mcp",
 *                 "allowedOrigins": [...], "allowedHosts": [...],
 *                 "maxConnections": 256, "connectionTimeoutMs": 60000,
 *                 "sessionIdleMs": 1800000, "streamBufferBytes": 8388608,
 *                 "resumeGraceMs": 5000,
 *                 "maxScopedSessions": 32, "maxProcesses": 64,
 *                 "maxStartsPerSecond": 8 } }
 *
 * Every error is reported, not just the first: a syntax error as
 * FILE:LINE:COLUMN, any other as FILE: /json/pointer/to/key: message.
 */
#ifndef MCPC_CONFIG_H
#define MCPC_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfg_errors.h"
#include "log.h"
#include "middleware.h"

enum cfg_transport { CFG_STDIO, CFG_HTTP, CFG_SSE, CFG_FLOW };

/* Which protocol era mcp-chain speaks to a backend ("protocol"). */
enum cfg_protocol {
	CFG_PROTO_AUTO,       /* find out: stdio tries initialize first, HTTP
			       * probes with server/discover first */
	CFG_PROTO_HANDSHAKE,  /* initialize only; never a server/discover */
	CFG_PROTO_STATELESS,  /* 2026-07-28 only: server/discover, no initialize */
};

/*
 * Who a backend serves on the HTTP front ("scope"): one instance per client
 * session, started at its initialize with that client's parameters and
 * stopped when the session ends, or one instance for every session. On
 * stdio there is one session and the two are the same.
 */
enum cfg_scope {
	CFG_SCOPE_SESSION,    /* default for a child process ("command") */
	CFG_SCOPE_SHARED,     /* default for an HTTP upstream ("url") */
};

/*
 * "oauth" of an HTTP upstream: mcp-chain is an OAuth 2.1 client of it (the
 * MCP authorization spec; docs/oauth-upstreams.md). `true` is an object with
 * every member left out: discover everything, register dynamically.
 */
struct cfg_oauth {
	char *client_id;            /* "clientId": pre-registered; NULL: none */
	char *client_secret;        /* "clientSecret" (after ${VAR}); NULL: a public client */
	char *client_metadata_url;  /* "clientMetadataUrl": a Client ID Metadata Document */
	char **scopes;              /* "scopes": asked for; NULL: from the server */
	bool resource;              /* "resource": false leaves RFC 8707's parameter out */
	char *resource_url;         /* "resource": "URL" sends that instead of the url */
	unsigned callback_port;     /* "callbackPort": the login's loopback port; 0: any */
	bool per_principal;         /* "perPrincipal": one set of tokens per principal of
				     * the HTTP front (--listen, "scope": "session"),
				     * kept sealed with tokenStore's key, obtained through
				     * the front's /oauth/login (docs/oauth-upstreams.md) */
};

/* A backend entry. All strings are owned by the config. */
struct cfg_server {
	char *name;
	enum cfg_transport transport;
	char *url;          /* CFG_HTTP (Streamable HTTP), CFG_SSE (HTTP+SSE), CFG_FLOW */
	unsigned char cert_hash[32]; /* CFG_FLOW "certificateHash": SHA-256 of the
				      * server certificate's DER, when has_cert_hash */
	bool has_cert_hash;
	char *ca_file;      /* CFG_FLOW "caFile": PEM CAs; NULL: the system's */
	char **headers;     /* NULL-terminated "Name: value", after expansion */
	struct cfg_oauth *oauth;  /* HTTP: "oauth" given (not false); NULL: none */
	char *command;      /* after ${VAR} expansion */
	char **argv;        /* NULL-terminated; argv[0] == command */
	char **env;         /* NULL-terminated "KEY=VALUE" added to ours */
	char *cwd;          /* NULL: inherit */
	char *prefix;       /* namespace for its tools and prompts; NULL: name */
	double timeout;     /* seconds per request; 0: none */
	enum cfg_protocol protocol;
	enum cfg_scope scope;
	bool restart;       /* restart after an unexpected exit */
	double restart_delay;     /* first backoff, seconds */
	double restart_max_delay; /* backoff ceiling, seconds */
	unsigned restart_limit;   /* restarts within restart_window before giving up */
	double restart_window;    /* seconds */
	bool enabled;
	json_t *middleware; /* borrowed from root: the entry's modules, or NULL */
	struct pipeline *pipeline; /* owned: built from middleware (never NULL
				    * in a loaded config), not started */
};

/*
 * The "listen" section: the Streamable HTTP front (used with --listen, or
 * when the section is given). Strings owned by the config.
 */
struct cfg_listen {
	bool set;                 /* the section was given */
	char *address;            /* numeric IPv4 or IPv6; default 127.0.0.1 */
	unsigned port;            /* default 8080; 0: any free port */
	char *path;               /* the MCP endpoint; default /mcp */
	char *sse_path;           /* legacy HTTP+SSE (2024-11-05): the GET stream;
				   * default /sse; NULL: that transport is off */
	char *messages_path;      /* ... and its POST endpoint; default /messages */
	char **origins;           /* extra allowed Origin values, NULL-terminated */
	char **hosts;             /* extra allowed Host names, NULL-terminated */
	unsigned max_connections; /* default 256 */
	double conn_timeout;      /* seconds a connection may idle, a request's head
				   * may take to arrive whole, or a body or an
				   * answer may make no progress; default 60 */
	uint64_t body_budget;     /* bytes of request bodies being received at
				   * once, all connections; 0: twice maxMessageBytes */
	unsigned max_sessions;    /* sessions open at once; default 4096 */
	unsigned max_sessions_per_client;    /* ... from one client address; default 1024 */
	unsigned max_sessions_per_principal; /* ... with one bearer token; default 256 */
	double session_idle;      /* seconds before an idle session expires; default 1800 */
	size_t stream_buffer;     /* bytes held for a slow reader or a closed
				   * GET stream; default 8 MiB */
	double resume_grace;      /* seconds a POST stream whose connection broke
				   * waits for its client to resume it (GET with
				   * Last-Event-ID) before its requests are
				   * cancelled; 0: cancelled at once; default 5 */
	/* bounds on session-scoped backends (see enum cfg_scope) */
	unsigned max_scoped_sessions; /* sessions with backends of their own; default 32 */
	unsigned max_processes;   /* child processes of all backends at once; default 64 */
	unsigned max_starts;      /* child processes started per second; default 8 */
	double drain_delay;       /* "drainDelayMs": seconds between the first
				   * SIGTERM (/readyz answers 503 at once) and
				   * the listening socket's close, for a load
				   * balancer to notice; default 0 */
	char *public_url;         /* "publicUrl": the base of the links mcp-chain
				   * gives (/oauth/login); NULL: http://ADDRESS:PORT */
	bool ui;                  /* "ui": the live page at /ui; default true */
};

/*
 * "cluster": several instances as one service (docs: README "Running
 * several instances"). Session ids are sealed with KEYS[0] (AES-256-GCM)
 * and opened with any of KEYS, so that every instance holding the key file
 * continues a session another issued; they begin with INSTANCE and a dot,
 * which a load balancer may route on.
 */
#define CFG_CLUSTER_MAX_KEYS 8
struct cfg_cluster {
	bool set;                 /* the section was given */
	char *instance;           /* "instance": this one's tag, [A-Za-z0-9_-]{1,32} */
	char *key_file;           /* "keyFile" */
	unsigned char keys[CFG_CLUSTER_MAX_KEYS][32];
	size_t nkeys;
	double session_max_age;   /* "sessionMaxAgeMs": seconds a sealed id is
				   * honoured after it was issued; default a day */
	char **peer_tags;         /* "instances": {TAG: URL}: where a 2026-07-28
				   * call held by another instance is forwarded;
				   * NULL-terminated, parallel to PEER_URLS */
	char **peer_urls;
	bool sessions_closed;     /* "onStoreDown" "closed" (or {"sessions":
				   * "closed"}): a moved session is refused while
				   * Redis cannot say what it holds; "open"
				   * (default): it is served without its
				   * subscriptions and log level */
	bool rs_closed;           /* ... {"requestState": "closed"}: a 2026-07-28
				   * retry is refused (503) while Redis cannot
				   * record its requestState's single use; "open"
				   * (default): accepted unrecorded */
};

/*
 * "flow": the MCP-Flow front (MCP over WebTransport: HTTP/3 over QUIC),
 * served with --flow ADDR:PORT ("-": this section's address and port).
 */
#define CFG_DEFAULT_FLOW_PORT 4433
struct cfg_flow {
	bool set;                 /* the section was given */
	char *address;            /* numeric; default 127.0.0.1 */
	unsigned port;            /* UDP; default 4433; 0: any free port */
	char *path;               /* the CONNECT's :path; default /mcp-flow */
	char *cert_file;          /* "certificate": PEM chain; NULL: a self-signed
				   * one made at start (selfcert.h) */
	char *key_file;           /* "key": its PEM private key (with it) */
	char **origins;           /* "allowedOrigins": Origin values accepted beside
				   * loopback pages'; NULL-terminated */
	unsigned max_streams;     /* "maxConcurrentStreams": execution streams open
				   * at once per session; default 16 */
	size_t stream_threshold;  /* "streamThresholdBytes": a result larger than
				   * this leaves the control stream; default 64 KiB */
	bool datagrams;           /* "datagrams": progress and logs as datagrams to
				   * clients that take them; default true */
	unsigned datagram_rate;   /* "datagramsPerSecond" per session; beyond it
				   * they go on the control stream; default 200 */
	double idle_timeout;      /* seconds ("idleTimeoutMs", default 30000) */
	unsigned max_connections; /* "maxConnections"; default 256 */
};

/*
 * The top-level "telemetry" section: OpenTelemetry traces exported over
 * OTLP/HTTP (JSON) to ENDPOINT (trace.h). Off when the section is absent or
 * "enabled" is false.
 */
struct cfg_telemetry {
	bool set;                 /* the section is there and enabled */
	char *endpoint;           /* "endpoint": the OTLP/HTTP traces URL, as
				   * http://collector:4318/v1/traces */
	char **headers;           /* "headers": {name: value} (${VAR} expanded) as
				   * "Name: value" lines, NULL-terminated */
	char *service_name;       /* "serviceName"; default "mcp-chain" */
	double sampling;          /* "sampling": the ratio of traces started here
				   * that are recorded, 0 to 1; default 1. A
				   * caller's sampled flag is followed. */
	unsigned batch_size;      /* "batchSize": spans per export; default 512 */
	unsigned queue_size;      /* "queueSize": spans held for export at most
				   * (more are dropped, counted); default 4096 */
	double export_interval;   /* seconds ("exportIntervalMs", default 1000) */
	double export_timeout;    /* seconds ("exportTimeoutMs", default 5000) */
};

/* The top-level "redis" section: the shared store (redis.h). */
struct cfg_redis {
	bool set;                 /* the section is there */
	char *host;               /* default 127.0.0.1 */
	unsigned port;            /* default 6379 */
	char *password;           /* ${VAR} expanded; NULL: none */
	unsigned db;              /* default 0 */
	char *prefix;             /* default "mcp-chain:" */
	double timeout;           /* seconds ("timeoutMs", default 250) */
	double connect_timeout;   /* seconds ("connectTimeoutMs", default 1000) */
};

struct cfg {
	char *path;
	json_t *root;             /* owned: the parsed document */
	struct cfg_server *servers;
	size_t nservers;
	size_t max_message;       /* bytes */
	size_t max_open;          /* requests one peer may have open at once */
	double grace;             /* seconds between shutdown steps */
	double init_timeout;      /* seconds a backend may take to initialize */
	double init_join;         /* several backends: seconds the client's
				   * initialize waits for the slow ones (the
				   * earlier of this and init_timeout) */
	double input_ttl;         /* seconds a call of a 2026-07-28 client waits
				   * for its retry after input_required */
	double client_stall;      /* seconds the stdio client may leave a full
				   * stdout unread before its session ends;
				   * 0: wait forever */
	bool offer_stateless;     /* "eras": "both": 2026-07-28 is offered to
				   * every client, the backends' era whatever;
				   * "follow" (default): only when they speak it */
	char *separator;          /* between prefix and name (default "__") */
	bool status;              /* expose the mcp-chain://status resource */
	bool status_set;          /* "status" given explicitly */
	bool has_log_level;
	enum log_level log_level;
	json_t *middleware;       /* borrowed from root: top-level modules, or NULL */
	struct pipeline *pipeline; /* owned: the global pipeline, not started */
	struct cfg_listen listen;
	struct cfg_cluster cluster;
	/* "tokenStore" (needed when an upstream is perPrincipal) */
	char *token_key_file;     /* "keyFile", or NULL */
	unsigned char token_key[32];  /* its key (seal.h), read at load */
	bool has_token_key;
	struct cfg_redis redis;   /* "redis": the shared store */
	struct cfg_telemetry telemetry; /* "telemetry": traces */
	struct cfg_flow flow;     /* "flow": MCP over WebTransport */
};

/* True when A and B export the same way (a reload keeps the exporter). */
bool cfg_telemetry_equal(const struct cfg_telemetry *a, const struct cfg_telemetry *b);

/* True when A and B name the same store the same way (a reload that
 * changes it needs a restart). */
bool cfg_redis_equal(const struct cfg_redis *a, const struct cfg_redis *b);

/* True when an enabled entry of C has "oauth": {"perPrincipal": true}. */
bool cfg_has_per_principal(const struct cfg *c);

/*
 * Parses SPEC, "HOST:PORT", "[V6]:PORT" or "PORT", into L's address and
 * port (replacing them); returns 0, or -1 when it is malformed.
 */
int cfg_listen_parse(struct cfg_listen *l, const char *spec);

/* The same for --flow into F's address and port. */
int cfg_flow_parse(struct cfg_flow *f, const char *spec);

/* True when an enabled entry of C is session-scoped. */
bool cfg_has_session_scope(const struct cfg *c);

/*
 * Loads and validates PATH. Returns a new config (free with cfg_free), or
 * NULL with every problem appended to ERRS.
 */
struct cfg *cfg_load(const char *path, struct cfg_errors *errs);

/* Same from a string (NAME is used in messages). */
struct cfg *cfg_load_string(const char *text, const char *name, struct cfg_errors *errs);

/* Frees a config and everything it owns. */
void cfg_free(struct cfg *c);

/*
 * Expands ${VAR} and ${VAR:-default} in S from the environment, and
 * ${file:PATH} with the contents of PATH (trailing newlines dropped; for
 * secrets kept in files). Returns a
 * new string (caller frees), or NULL with a message in ERR (of ERRLEN)
 * when a variable is unset and has no default, or the syntax is bad.
 */
char *cfg_expand(const char *s, char *err, size_t errlen);

#define CFG_DEFAULT_MAX_MESSAGE ((size_t)128 << 20)
#define CFG_DEFAULT_MAX_OPEN 10000
#define CFG_DEFAULT_GRACE 2.0
#define CFG_DEFAULT_INIT_TIMEOUT 60.0
#define CFG_DEFAULT_INIT_JOIN 5.0
#define CFG_DEFAULT_CLIENT_STALL 60.0
#define CFG_DEFAULT_INPUT_TTL 300.0     /* seconds a 2026-07-28 call waits for the client's retry */
#define CFG_DEFAULT_LISTEN_ADDRESS "127.0.0.1"
#define CFG_DEFAULT_LISTEN_PORT 8080
#define CFG_DEFAULT_LISTEN_PATH "/mcp"
#define CFG_DEFAULT_SSE_PATH "/sse"
#define CFG_DEFAULT_MESSAGES_PATH "/messages"
#define CFG_DEFAULT_MAX_SCOPED_SESSIONS 32
#define CFG_DEFAULT_RESUME_GRACE_MS 5000
#define CFG_DEFAULT_MAX_PROCESSES 64
#define CFG_DEFAULT_MAX_STARTS 8

#endif
