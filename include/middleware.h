/*
 * middleware.h - the interface of a middleware module and of the
 * pipeline that runs modules in order.
 *
 * Every message between a client session and a backend passes through a
 * pipeline: requests and notifications in configuration order, responses
 * back through the same modules in reverse order. A module sees the
 * message as a mutable jansson object plus a context, and returns a
 * verdict:
 *   MW_PASS   hand *MSG (possibly changed or replaced) to the next module;
 *   MW_REPLY  *MSG was replaced by a response (result or error) to the
 *             request: it goes back through the modules already passed;
 *   MW_DROP   the message stops here (a request is then answered with an
 *             error, so that nothing ever hangs);
 *   MW_ASYNC  the module keeps the walk and finishes it later with
 *             mw_resume(), without blocking the loop.
 *
 * Ownership: the pipeline owns *MSG; a module that replaces it must
 * json_decref the old one. A module returning MW_ASYNC must call
 * mw_walk_hold() first and give back ownership through mw_resume().
 */
#ifndef MCPC_MIDDLEWARE_H
#define MCPC_MIDDLEWARE_H

#include <jansson.h>
#include <stddef.h>

#include "jscan.h"
#include "method.h"
#include "msg.h"
#include "rpc.h"

struct exchange;

enum mw_verdict { MW_PASS, MW_REPLY, MW_DROP, MW_ASYNC };
enum mw_dir { MW_TO_BACKEND, MW_TO_CLIENT };

/* How a response ended, known to the chain before any module reads it. */
enum mw_outcome {
	MW_OUTCOME_NONE,        /* not a response */
	MW_OUTCOME_OK,          /* a result */
	MW_OUTCOME_TOOL_ERROR,  /* a result with "isError": true */
	MW_OUTCOME_ERROR,       /* a JSON-RPC error */
};

/* What a module knows about the message in hand. Owned by the chain. */
struct mw_ctx {
	enum mw_dir dir;       /* where the message is travelling */
	enum rpc_kind kind;    /* request, notification or response */
	const char *method;    /* for a response: its request's method */
	enum mcp_method method_code; /* ctx->method as a code (method.h): what
				      * a module compares, not the name */
	const char *client;    /* principal, else clientInfo.name; may be NULL */
	const char *backend;   /* backend name; NULL when not yet routed */
	const char *protocol;  /* the client's protocol version (its era:
				* "2026-07-28" is the stateless one); may be NULL */
	const char *name;      /* tool or prompt name, or resource URI, that a
				* request (and its response) is about; NULL
				* for other methods */
	double start;          /* loop time the exchange began */
	json_t *scratch;       /* per-exchange object for modules (lazily made
				* by mw_scratch), read by the response hook */
	struct mw_walk *walk;  /* the walk in progress (for mw_walk_hold) */
	size_t request_bytes;  /* wire size of the request as received */
	size_t response_bytes; /* wire size of the response as received (0 if
				* it was made by mcp-chain or a module) */
	struct exchange *ex;   /* the chain's exchange (opaque: the core's), for
				* mw_ask_client and mw_abort; NULL for
				* notifications */
	const struct msg_val *id_text; /* the requester's id as its JSON
				* text (borrowed from the chain); NULL or
				* empty for notifications and for
				* mcp-chain's own requests. mw_id() gives
				* it as a jansson value */
	json_t *id;            /* mw_id()'s value once made (owned by the
				* chain): read it through mw_id() */
	json_t *roles;         /* roles of ctx->client when a module (auth) set
				* it: borrowed from that module, which outlives
				* the exchange; else NULL */
	enum mw_outcome outcome; /* for a response: how it ended */
	const char *credential;  /* the secret the client presented on its
				  * transport (HTTP "Authorization: Bearer"),
				  * CREDENTIAL_LEN bytes, borrowed for the hook
				  * only; NULL when none. For an authentication
				  * module to check (constant time); it is no
				  * part of any message, so nothing forwards
				  * it, and nothing may log it. */
	size_t credential_len;
	const unsigned char *credential_hash; /* its SHA-256 (32 bytes, made once
				  * per credential), or NULL with it */
};

/*
 * The requester's id as a jansson value (borrowed: CTX keeps it until the
 * exchange ends), made on first use from ctx->id_text; NULL for
 * notifications, for mcp-chain's own requests, and when out of memory.
 */
json_t *mw_id(struct mw_ctx *ctx);

/*
 * Tells what the module whose hook runs decided about the message in hand
 * (observe.h: the live page's events, a span event in traces): WHAT is
 * "denied", "limited", "rewritten", ... (a static string), CODE the error
 * code a refusal answers with (else 0), DETAIL (borrowed, may be NULL) the
 * reason, which must hold no secret. A module that replies or drops
 * without telling gets "denied" (an error), "answered" or "dropped" told
 * for it; a question to the client (mw_ask_client) is told as "asked".
 */
void mw_note(struct mw_ctx *ctx, const char *what, int code, const char *detail);

/*
 * True unless the message in hand certainly has no member KEY in
 * params._meta. While the message travels unparsed this looks at its
 * bytes, so a module's reads() hook can tell cheaply whether it must see
 * the message.
 */
bool mw_meta_has(const struct mw_ctx *ctx, const char *key);

/*
 * Sends a request of a module's own (e.g. "elicitation/create") to the
 * client of the exchange CTX belongs to; steals PARAMS. CB gets the
 * client's response, or an error response if there is no such client or
 * it goes away (borrowed), exactly once. Returns 0 or -1.
 */
int mw_ask_client(struct mw_ctx *ctx, const char *method, json_t *params,
		  void (*cb)(json_t *response, void *arg), void *arg);

/*
 * Withdraws the question a module asked with mw_ask_client for ARG (the
 * same ARG it passed) about the request of CTX, e.g. because the request it was about was
 * cancelled: the client is sent notifications/cancelled for it (with
 * REASON), and the module's callback gets an error response now -- its one
 * call. Returns 0, or -1 when no question for ARG is open.
 */
int mw_ask_withdraw(struct mw_ctx *ctx, void *arg, const char *reason);

/*
 * Ends CTX's request now with an error (CODE, MESSAGE) sent to the
 * requester through the modules it passed, and cancels it at the
 * responder. For use from a timer or callback once the request has been
 * forwarded (not from inside a hook). Returns 0, or -1 when the request is
 * no longer open.
 */
int mw_abort(struct mw_ctx *ctx, int code, const char *message);

/*
 * Parses the message in hand for a module whose reads() hook said it
 * would not need it (e.g. mw_list_edit could not do the job): *MSG (the
 * hook's argument) gets it, owned by the walk as usual. Returns 0, or -1
 * when it does not parse: a response is then replaced by an internal
 * error in *MSG (nothing unread goes on), a request keeps *MSG NULL. A
 * no-op when *MSG is set.
 */
int mw_read(struct mw_ctx *ctx, json_t **msg);

/* One entry of a list being edited with mw_list_edit. */
struct mw_entry {
	const char *text;  /* the entry's JSON text, not NUL-terminated */
	size_t len;
	const char *key;   /* its string member FIELD, decoded and
			    * NUL-terminated; NULL when absent or not a
			    * string. Both borrowed for the call only. */
};

enum mw_entry_verdict { MW_ENTRY_KEEP, MW_ENTRY_DROP, MW_ENTRY_REPLACE };

/* Decides for entry E; with MW_ENTRY_REPLACE, *REPLACE (stolen) takes its place. */
typedef enum mw_entry_verdict (*mw_entry_fn)(void *arg, const struct mw_entry *e,
					     json_t **replace);

/*
 * Edits the list result[KEY] of the response in hand while it travels as
 * bytes (*msg == NULL in on_response), without parsing it: FN is called
 * for each entry, and only entries it replaces are serialized. A list of
 * 500 tools costs what scanning it costs, not a jansson tree. Returns the
 * number of entries dropped or replaced, or -1 when the message is parsed
 * already, has no such list, or is unusual (escaped keys): the module then
 * reads it with mw_read and edits the tree.
 */
int mw_list_edit(struct mw_ctx *ctx, const char *key, const char *field,
		 mw_entry_fn fn, void *arg);

struct mw_module;
struct mw_walk;

/* What a transport's credential check answers (check_credential). */
enum mw_cred_result {
	MW_CRED_NONE,        /* no module checks credentials */
	MW_CRED_OK,          /* accepted */
	MW_CRED_INVALID,     /* missing, unknown, expired, not for us: 401 */
	MW_CRED_SCOPE,       /* valid, but without the scope the request needs: 403 */
	MW_CRED_UNAVAILABLE, /* cannot be checked now (the issuer's keys are out of reach): 503 */
	MW_CRED_PENDING,     /* being found out: ask again when the wait is ready */
};

/* One credential check: the question (in) and the answer (out). */
struct mw_cred_check {
	const char *token;       /* in: the bearer token, LEN bytes (NULL: none);
				  * borrowed for the call, never logged */
	size_t len;
	const char *resource;    /* in: the URL the client reached (scheme, host,
				  * path of the endpoint), or NULL */
	const char *method;      /* in: the request's method, or NULL (the
				  * transport's head, before any message) */
	const char *tool;        /* in: a tools/call's tool name, or NULL */
	enum mw_cred_result result;  /* out: the worst answer of the modules */
	const char *error;       /* out: the OAuth error code (RFC 6750:
				  * "invalid_token", "insufficient_scope"), or
				  * NULL when none was presented */
	char why[240];           /* out: for the client and the log; no secret */
	char scope[256];         /* out: the scopes to ask for (space separated),
				  * or empty */
	unsigned char subject[32]; /* out (MW_CRED_OK): who the token stands
				  * for (a hash: the same person with a new
				  * token has the same subject) */
	bool has_subject;
	bool per_request;        /* out: the answer may differ by method or tool
				  * (ask again for each request message) */
};

/*
 * A front's wait for a MW_CRED_PENDING answer, embedded in the front's
 * request; a module links it into its own list. READY is called once,
 * from the loop (the wait is unlinked by then).
 */
struct mw_cred_wait {
	void (*ready)(struct mw_cred_wait *w);
	struct mw_cred_wait *next, **prevp;   /* the module's list */
};

/* Links W into the list at *HEAD (a module's waiters). */
void mw_cred_wait_add(struct mw_cred_wait **head, struct mw_cred_wait *w);

/* Unlinks W if linked (a front whose request went away). */
void mw_cred_wait_cancel(struct mw_cred_wait *w);

/* Calls READY of every wait in the list at *HEAD, emptying it first. */
void mw_cred_wait_wake(struct mw_cred_wait **head);

struct mw_module_ops {
	const char *name;
	/*
	 * Optional: whether the next hook (on_message, or on_response for a
	 * response) needs the message itself, for the message CTX describes.
	 * A module without it reads every message. While every module on a
	 * message's way answers false, the message is never parsed: it
	 * travels as the bytes it came in (ids spliced), which is what keeps
	 * a pipeline nearly as cheap as none. The hook is then called with
	 * *MSG == NULL; it may pass (MW_PASS, or MW_ASYNC keeping NULL to
	 * resume with), or put a reply of its own in *MSG (MW_REPLY, MW_DROP).
	 */
	bool (*reads)(struct mw_module *m, const struct mw_ctx *ctx);
	/* A request or notification travelling in ctx->dir. */
	enum mw_verdict (*on_message)(struct mw_module *m, struct mw_ctx *ctx,
				      json_t **msg);
	/* A response travelling back; MW_REPLY and MW_DROP act as MW_PASS. */
	enum mw_verdict (*on_response)(struct mw_module *m, struct mw_ctx *ctx,
				       json_t **msg);
	/*
	 * Optional: the request this module passed on ends without a response
	 * coming back (cancelled by the requester, or its requester went
	 * away). Called once, in reverse order, for each module the request
	 * reached, so per-exchange state can be released; ctx->scratch is
	 * still there. *MSG-free: there is no message.
	 */
	void (*on_abandon)(struct mw_module *m, struct mw_ctx *ctx);
	/*
	 * Optional: the request whose walk this module holds (it returned
	 * MW_ASYNC from on_message) was cancelled, or its requester went
	 * away. The module must forget the walk at once (never mw_resume it)
	 * and free the message it kept; the chain then ends the request.
	 * Without it, the chain waits for the module to resume the walk and
	 * drops the request then.
	 */
	void (*on_cancel)(struct mw_module *m, struct mw_ctx *ctx);
	/*
	 * Optional: whether this module accepts the transport credential in
	 * CHK (see struct mw_cred_check: the token, the URL the client
	 * reached, the request if known), answered in CHK's out members. A
	 * front whose transport carries credentials (HTTP) asks before it
	 * hands a request over and answers as told (401, 403, 503). When
	 * the answer needs I/O (an issuer's keys, an introspection), the
	 * module answers MW_CRED_PENDING, keeps WAIT (borrowed until it
	 * calls WAIT->ready or the front cancels it with mw_cred_wait_cancel)
	 * and calls WAIT->ready from the loop when asking again will tell.
	 * Never logs the token.
	 */
	void (*check_credential)(struct mw_module *m, struct mw_cred_check *chk,
				 struct mw_cred_wait *wait);
	/*
	 * Optional: what this module adds to the front's OAuth Protected
	 * Resource Metadata (RFC 9728): a new object with
	 * "authorization_servers", "scopes_supported", and "resource" when
	 * the module's configuration names the canonical URL; NULL when the
	 * module does not validate OAuth tokens.
	 */
	json_t *(*resource_metadata)(struct mw_module *m);
	/*
	 * Optional: goes live (opens files, starts processes). create() only
	 * validates and allocates, so "mcp-chain check" has no side effects.
	 * Returns 0 or -1 (logged).
	 */
	int (*start)(struct mw_module *m);
	/* Frees the module. */
	void (*destroy)(struct mw_module *m);
};

/* Concrete modules embed this as their first member. */
struct mw_module {
	const struct mw_module_ops *ops;
};

/* Where a module being created reports errors about its options. */
struct cfg_errors;
struct mw_build {
	const char *file;         /* configuration file, for messages */
	const char *path;         /* JSON pointer of the module entry */
	struct cfg_errors *errs;
	int nerr;
	bool store;               /* the configuration has a "redis" section: a
				   * module may keep state there (redis.h) */
};

/*
 * Reports a problem with the option at KEY (a pointer relative to the
 * module entry, e.g. "/rules/0/allow", or "" for the entry itself).
 */
void mw_error(struct mw_build *b, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Reports every member of OPTS not in KEYS (NULL-terminated; "use" is
 * always allowed). Returns the number of unknown keys.
 */
int mw_check_keys(struct mw_build *b, json_t *opts, const char *const *keys);

/*
 * Reports every member of the object OBJ found at KEY (a pointer relative
 * to the module entry, e.g. "/rules/0") that is not in KEYS.
 */
void mw_check_keys_at(struct mw_build *b, const char *key, json_t *obj,
		      const char *const *keys);

/*
 * Creates a module from its entry OPTS (borrowed; "use" names the module).
 * Returns NULL after at least one mw_error when the options are wrong.
 */
typedef struct mw_module *(*mw_create_fn)(json_t *opts, struct mw_build *b);

struct mw_def {
	const char *name;
	mw_create_fn create;
};

/* The module named NAME in the table given to mw_use_registry, or NULL. */
const struct mw_def *mw_find(const char *name);

/*
 * Sets the table of modules pipeline_build knows (borrowed for the
 * process's life; NULL: none). The core knows no module: main.c hands it
 * the registry of src/middleware/ at start-up.
 */
void mw_use_registry(const struct mw_def *defs);

/* The modules of src/middleware/, terminated by an entry with a NULL name. */
extern const struct mw_def mw_registry[];

/* Returns ctx->scratch, creating it on first use (borrowed). */
json_t *mw_scratch(struct mw_ctx *ctx);

/* An ordered, reference-counted list of modules. */
struct pipeline;

/* New empty pipeline with one reference. */
struct pipeline *pipeline_new(void);

/* Appends M (the pipeline takes ownership); returns 0 or -1. */
int pipeline_add(struct pipeline *pl, struct mw_module *m);

/*
 * Builds a pipeline from the array ARR (borrowed; NULL gives an empty
 * pipeline) found at PATH in FILE. Returns it, or NULL with every problem
 * appended to ERRS. Modules are created, not started.
 */
struct pipeline *pipeline_build(json_t *arr, const char *file, const char *path,
				struct cfg_errors *errs);

/* pipeline_build, telling the modules (mw_build.store) whether the
 * configuration has the shared store (a "redis" section). */
struct pipeline *pipeline_build_store(json_t *arr, const char *file, const char *path,
				      struct cfg_errors *errs, bool store);

/* Starts every module; returns 0, or -1 if one failed. */
int pipeline_start(struct pipeline *pl);

/* Number of modules. */
size_t pipeline_size(const struct pipeline *pl);

/*
 * Asks every module with a check_credential hook about CHK (its in
 * members set, its out members cleared here): the first that does not
 * accept answers; MW_CRED_NONE when none checks credentials. WAIT as for
 * the hook.
 */
void pipeline_check_credential(const struct pipeline *pl, struct mw_cred_check *chk,
			       struct mw_cred_wait *wait);

/* The modules' contribution to the Protected Resource Metadata (the
 * first module's that has one; new reference), or NULL. */
json_t *pipeline_resource_metadata(const struct pipeline *pl);

struct pipeline *pipeline_ref(struct pipeline *pl);
void pipeline_unref(struct pipeline *pl);

/*
 * A walk of one message through up to two pipelines (the global one, then
 * the backend's own). The chain embeds it in its per-message state.
 */
struct mw_walk;
typedef void (*mw_done_fn)(struct mw_walk *w, enum mw_verdict v);

struct mw_walk {
	struct pipeline *stage[2];  /* borrowed; NULL for none */
	struct mw_ctx *ctx;
	/*
	 * The message (borrowed from the walk's owner). Hooks get &M->tree:
	 * NULL while no module has read it (it is then M's bytes, see msg.h).
	 * A module holding the walk (mw_walk_hold) makes M keep a copy of
	 * borrowed bytes.
	 */
	struct msg *m;
	size_t pos;                 /* next module index (forward) */
	size_t reached;             /* modules a request passed through */
	int response;               /* walking back in reverse */
	int held;                   /* an async module holds the walk */
	json_t *hold_tree;          /* the tree the holder was given (not owned) */
	mw_done_fn done;
	const char *cur;            /* the module whose hook runs (its name) */
	int noted;                  /* it told its decision (mw_note) */
};

/*
 * Walks *W->m forward from W->pos. Calls W->done exactly once, now or
 * after an MW_ASYNC module resumes, with the final verdict (MW_PASS at the
 * end, MW_REPLY with the response in *W->m, MW_DROP).
 */
void mw_walk_forward(struct mw_walk *w);

/* Tells the first W->reached modules, reversed, that no response will come. */
void mw_walk_abandon(struct mw_walk *w);

/*
 * The request W carries ends while a module holds its walk: the holder is
 * told with on_cancel and the modules before it with on_abandon. Returns
 * true when done (W may be freed now), false when the holder has no
 * on_cancel (the owner must wait for it to resume the walk).
 */
bool mw_walk_cancel(struct mw_walk *w);

/* Walks a response back through the first W->reached modules, reversed. */
void mw_walk_back(struct mw_walk *w);

/* Marks W held by an async module (call before returning MW_ASYNC). */
struct mw_walk *mw_walk_hold(struct mw_ctx *ctx);

/* Finishes an async step: continues the walk with V and MSG (stolen). */
void mw_resume(struct mw_walk *w, enum mw_verdict v, json_t *msg);

#endif
