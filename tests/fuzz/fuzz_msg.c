/*
 * fuzz_msg.c - libFuzzer target for src/core/msg.c: every input has one
 * fate whatever its form. A line taken as a transport hands it over
 * (msg_init_line: scanned bytes, or a tree when the scanner declines) and
 * the same line parsed up front (msg_init_tree) must:
 *   - both be refused, or both be taken (msg_init_line fails exactly when
 *     jansson, with rpc_parse's flags, refuses the text);
 *   - answer the same: kind, method, id key, a cancellation's request id
 *     key, integer id and token, the progress token, outcome, subject;
 *   - after the same changes (id, progress token, request id) write the
 *     same JSON, and a tree made afterwards from the bytes equal it;
 *   - a tree made from bytes and left alone still says what the bytes say
 *     (msg_bytes_current), so reading never changes the wire;
 *   - leave as one line: no raw CR or LF in what is written, whatever
 *     white space came in (a stdio peer would read several messages).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "msg.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_msg: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* True when two optional strings are equal. */
static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* M's JSON (new reference) through msg_dump. */
static json_t *dumped(struct msg *m)
{
	char *text;
	ssize_t n = msg_dump(m, &text);
	CHECK(n >= 0);
	json_t *v = json_loadb(text, (size_t)n, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
	CHECK(v);
	free(text);
	return v;
}

/* The same facts from both forms. */
static void same_facts(struct msg *a, struct msg *b)
{
	struct rpc_info ia, ib;
	unsigned char ka[RPC_KEY_MAX], kb[RPC_KEY_MAX];
	CHECK(msg_classify(a, &ia) == msg_classify(b, &ib));
	CHECK(same_str(ia.method, ib.method));
	CHECK(same_str(msg_method(a), msg_method(b)));
	size_t na = msg_id_key(a, ka), nb = msg_id_key(b, kb);
	CHECK(na == nb && memcmp(ka, kb, na) == 0);
	na = msg_rid_key(a, ka);
	nb = msg_rid_key(b, kb);
	CHECK(na == nb && memcmp(ka, kb, na) == 0);
	int64_t va = 0, vb = 0;
	CHECK(msg_id_int(a, &va) == msg_id_int(b, &vb) && va == vb);
	va = vb = 0;
	CHECK(msg_token_int(a, &va) == msg_token_int(b, &vb) && va == vb);
	struct msg_val ta = { .n = 0 }, tb = { .n = 0 };
	CHECK(msg_token_get(a, &ta) == msg_token_get(b, &tb));
	if (ta.n || tb.n) {
		json_t *ja = msg_val_json(&ta), *jb = msg_val_json(&tb);
		CHECK(ja && jb && json_equal(ja, jb));
		json_decref(ja);
		json_decref(jb);
	}
	msg_val_release(&ta);
	msg_val_release(&tb);
	CHECK(msg_outcome(a) == msg_outcome(b));
	char small[4], roomy[256], *ha, *hb;   /* a subject on the heap, one in place */
	const char *sa = msg_subject(a, small, sizeof small, &ha),
		*sb = msg_subject(b, roomy, sizeof roomy, &hb);
	CHECK(same_str(sa, sb));
	free(ha);
	free(hb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *line = (const char *)data;
	struct msg a, b;
	json_t *err = NULL;
	json_t *t = json_loadb(line, size, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
	int ra = msg_init_line(&a, line, size, &err);
	if (ra < 0) {   /* not JSON on either way */
		CHECK(!t && err);
		json_decref(err);
		return 0;
	}
	CHECK(t);
	if (json_is_array(t) || !json_is_object(t)) {   /* a batch or not an object: a tree */
		CHECK(a.tree && !msg_is_raw(&a));
		json_decref(t);
		msg_release(&a);
		return 0;
	}
	bool was_raw = msg_is_raw(&a);
	msg_init_tree(&b, t);
	same_facts(&a, &b);

	/* the same changes, the same message */
	struct msg_val id = { .n = 0 }, tok = { .n = 0 };
	msg_val_set_int(&id, 7);
	msg_val_set(&tok, "\"t\\u00e9\"", 9);
	CHECK(msg_set_id(&a, &id) == msg_set_id(&b, &id));
	CHECK(msg_set_token(&a, &tok) == msg_set_token(&b, &tok));
	CHECK(msg_set_rid(&a, &id) == msg_set_rid(&b, &id));
	char *text;
	ssize_t n = msg_dump(&a, &text);
	CHECK(n >= 0 && !memchr(text, '\n', (size_t)n) && !memchr(text, '\r', (size_t)n));
	free(text);
	json_t *ja = dumped(&a), *jb = dumped(&b);
	CHECK(json_equal(ja, jb));
	json_decref(ja);
	json_decref(jb);
	same_facts(&a, &b);

	/* a tree made from the bytes now: the same, and the bytes still say it */
	json_t *ta = msg_tree(&a);
	CHECK(ta && json_equal(ta, b.tree));
	if (was_raw)
		CHECK(msg_bytes_current(&a));
	msg_val_release(&id);
	msg_val_release(&tok);
	msg_release(&a);
	msg_release(&b);
	return 0;
}
