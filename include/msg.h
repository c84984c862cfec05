/*
 * msg.h - one JSON-RPC message, whatever its representation.
 *
 * A message arrives as bytes. The scanner (jscan) checks them and records
 * where the members routing needs are; as long as nothing needs to read
 * the message, it stays those bytes, and what the chain changes (the id,
 * a progress token, a cancelled request's id) is recorded as replacements
 * spliced in when it is written. The first reader makes a jansson tree
 * (msg_tree), with the replacements applied; from then on the tree is the
 * message, and the bytes are kept beside it: when it is written, a tree
 * that still says what the bytes say (a module read it and changed
 * nothing) leaves as the bytes, so reading never changes what goes on the
 * wire (msg_bytes_current). Bytes the scanner declines are parsed at once,
 * so every input has one fate whatever reads it.
 *
 * Whatever the form, a message is written as one line: JSON may hold raw
 * CR and LF in its white space, and a peer framed by lines (stdio) would
 * read what follows one as further messages that nothing here saw. So
 * bytes that have them are copied with spaces in their place when the
 * message is made (the same length: every span holds), and a tree is
 * written compact. A message's bytes never hold a raw CR or LF.
 *
 * This file and msg.c are the only code that knows both forms: the chain,
 * the pipeline and the fronts ask for facts and set values through it.
 *
 * Ownership: a struct msg is a value owned by whoever embeds it. Its bytes
 * are borrowed from the reader's buffer (valid until the caller returns)
 * unless msg_keep() copied them; its tree is owned.
 */
#ifndef MCPC_MSG_H
#define MCPC_MSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "jscan.h"
#include "rpc.h"

/* Spans of the bytes that the chain and modules need again (m->span[]). */
enum msg_span {
	MSG_SPAN_ID = JSCAN_ID,              /* "id" value */
	MSG_SPAN_TOKEN = JSCAN_TOKEN,        /* the progress token (see jscan.h) */
	MSG_SPAN_RID = JSCAN_REQUEST_ID,     /* params.requestId of a cancellation */
	MSG_SPAN_META = JSCAN_META,          /* params._meta object */
	MSG_SPAN_RESULT = JSCAN_RESULT,      /* result object */
	MSG_SPANS = JSCAN_SPANS
};

/* A short JSON text kept as it came: an id or a progress token. */
struct msg_val {
	char *heap;      /* owned, when longer than buf */
	uint32_t n;      /* 0: none */
	char buf[20];    /* any int64 in decimal fits */
};

/* The text of V (not NUL-terminated). */
static inline const char *msg_val_text(const struct msg_val *v)
{
	return v->heap ? v->heap : v->buf;
}

/* Sets V to the N bytes at P (copied); 0 or -1. */
int msg_val_set(struct msg_val *v, const char *p, size_t n);

/* Sets V to the decimal text of X. */
void msg_val_set_int(struct msg_val *v, int64_t x);

/* V as a new jansson value, or NULL. */
json_t *msg_val_json(const struct msg_val *v);

/* Frees what V owns; V is then empty. */
void msg_val_release(struct msg_val *v);

/* The map key (rpc_id_key's encoding) of the id whose text V holds; 0 if none. */
size_t msg_val_key(const struct msg_val *v, unsigned char *key);

struct msg {
	json_t *tree;              /* owned; when set it is the message */
	const char *raw;           /* the bytes as received (with SET spliced
				    * in), kept beside a tree made from them */
	size_t raw_len;
	char *own;                 /* owned copy RAW points into, or NULL */
	/*
	 * What the scanner found in RAW, written there by jscan_message
	 * itself (no copy): js.span[MSG_SPAN_*],
	 * js.name and js.uri (params.name / params.uri of requests), js.id_int
	 * (the id when it is an integer), js.is_error (result.isError true),
	 * js.subject_escaped. These follow the bytes when they move
	 * (msg_keep, msg_take_bytes); js.method does not (the method is
	 * METHOD), nor do the scan's other facts: read only these.
	 */
	struct jscan js;
	struct msg_val set[3];     /* replacements for ID, TOKEN, RID */
	enum rpc_kind kind;
	bool id_is_int;            /* the id is an integer (bytes): js.id_int */
	char method[64];           /* the method (bytes); longer ones are parsed */
};

/*
 * Takes the line [LINE, LINE+LEN) (borrowed): scanned, or parsed when the
 * scanner declines. Returns 0, or -1 with *ERR a ready -32700 response
 * (new reference) when it is not JSON (two values are not). A batch
 * (array) comes back as a tree with kind RPC_INVALID; check
 * json_is_array(m->tree). Bytes with raw CR or LF in them are copied
 * (owned) with spaces there: release M whatever it holds.
 */
int msg_init_line(struct msg *m, const char *line, size_t len, json_t **err);

/*
 * Takes a response mcp-chain built itself as the line [LINE, LINE+LEN)
 * (borrowed, valid compact JSON by construction, so not scanned again and
 * free of raw line breaks): ID is the
 * span of its integer id ID_INT, RESULT the span of its result object.
 */
void msg_init_own(struct msg *m, const char *line, size_t len, struct jspan id,
		  int64_t id_int, struct jspan result);

/* Makes M empty (an uninitialized struct too). */
void msg_init_empty(struct msg *m);

/* Takes the tree TREE (stolen). */
void msg_init_tree(struct msg *m, json_t *tree);

/* Moves SRC into DST (DST uninitialized); SRC is left empty. */
void msg_move(struct msg *dst, struct msg *src);

/* True when M is empty (released, or never set). */
static inline bool msg_empty(const struct msg *m)
{
	return !m->tree && !m->raw;
}

void msg_release_(struct msg *m);

/*
 * Frees what M owns; M is then empty. An empty M costs no call: the chain
 * releases an exchange's empty slot on every response.
 */
static inline void msg_release(struct msg *m)
{
	if (!msg_empty(m))
		msg_release_(m);
}

/*
 * Classifies M: a tree is checked with rpc_classify (INFO filled as it
 * says); bytes the scanner accepted are valid by construction and
 * INFO->method points into M, INFO->id is NULL (use msg_id_*).
 */
enum rpc_kind msg_classify(struct msg *m, struct rpc_info *info);

/* The method, or NULL (a response). Valid while M is unchanged. */
const char *msg_method(struct msg *m);

/* The id map key of M's id; 0 when there is none or it cannot be keyed. */
size_t msg_id_key(struct msg *m, unsigned char *key);

/* M's id as an integer: true and *V when it is one. */
bool msg_id_int(struct msg *m, int64_t *v);

/* M's id text into OUT; 0, or -1 when it has none. */
int msg_id_get(struct msg *m, struct msg_val *out);

/* The progress token's text into OUT; 1, 0 when there is none, -1 on error. */
int msg_token_get(struct msg *m, struct msg_val *out);

/* The progress token as an integer: true and *V when it is one. */
bool msg_token_int(struct msg *m, int64_t *v);

/* The key of a cancellation's params.requestId; 0 when none. */
size_t msg_rid_key(struct msg *m, unsigned char *key);

/* Sets the id, or the progress token (only where there is one), to the integer V. */
int msg_set_id_int(struct msg *m, int64_t v);
int msg_set_token_int(struct msg *m, int64_t v);

/* Sets the id, the progress token or a cancellation's requestId to the JSON text V. */
int msg_set_id(struct msg *m, const struct msg_val *v);
int msg_set_token(struct msg *m, const struct msg_val *v);
int msg_set_rid(struct msg *m, const struct msg_val *v);

/*
 * The tree (borrowed), made from the bytes with every replacement applied
 * on first use; NULL when the bytes do not parse (cannot happen for bytes
 * the scanner accepted and jansson agrees with).
 */
json_t *msg_tree(struct msg *m);

/* Makes M the tree T (stolen), dropping its bytes. */
void msg_set_tree(struct msg *m, json_t *t);

/*
 * True when M has bytes that say what its tree says (no tree, or a tree
 * json_equal to the bytes with their replacements): write the bytes then.
 * False drops the bytes of a changed tree for good.
 */
bool msg_bytes_current(struct msg *m);

/* Copies borrowed bytes so that M outlives the reader's buffer. */
int msg_keep(struct msg *m);

/* True while M is bytes (no tree made). */
static inline bool msg_is_raw(const struct msg *m)
{
	return !m->tree && m->raw;
}

/*
 * The pieces of M's line (no "\n") with the replacements spliced, into
 * IOV (at least MSG_IOV_MAX); returns how many, or -1 when M has no bytes.
 * With a tree, ask msg_bytes_current first.
 */
#define MSG_IOV_MAX 7
int msg_iov(const struct msg *m, struct iovec *iov);

/*
 * M as one compact line (no "\n"), malloc'd into *OUT; returns the
 * length, or -1. Works for both forms.
 */
ssize_t msg_dump(struct msg *m, char **out);

/*
 * The name a request is about (tool or prompt, resource URI), or NULL if
 * none: written into BUF (N bytes) when it fits there, else a new string
 * put in *HEAP for the caller to free (*HEAP is NULL otherwise).
 */
const char *msg_subject(struct msg *m, char *buf, size_t n, char **heap);

/* How a response ended (see mw_outcome): 1 error, 2 tool error, 0 result. */
int msg_outcome(struct msg *m);

/* True unless M certainly has no params._meta[KEY]. */
bool msg_meta_has(struct msg *m, const char *key);

/* The string params._meta[KEY] of M (borrowed from its tree, made only when
 * the bytes may hold it), or NULL. */
const char *msg_meta_str(struct msg *m, const char *key);

/*
 * Sets params._meta[KEY] of M to the string VALUE (copied), making params
 * and _meta when missing. On bytes whose _meta lacks KEY, or that have no
 * _meta but a params.name or params.uri, the member is spliced into the
 * bytes (no tree); otherwise M becomes its tree. 0, or -1 (params or _meta
 * is not an object, no memory).
 */
int msg_meta_set(struct msg *m, const char *key, const char *value);

/*
 * Replaces the bytes [FROM, TO) of M's raw line by the text DATA holds in
 * its place (DATA is the whole new line, LEN bytes, malloc'd: stolen).
 * Spans before the edit stay, spans after move, a span around it (the
 * result) grows or shrinks; spans inside are dropped.
 */
void msg_take_bytes(struct msg *m, char *data, size_t len, size_t from, size_t to);

#endif
