/*
 * test_msg.c - unit tests for src/core/msg.c: one message as bytes with
 * spans or as a tree, the same answers and the same changes either way.
 *
 * Most tests take a line twice: as a transport hands it over
 * (msg_init_line: scanned bytes, or a tree when the scanner declines) and
 * parsed up front (msg_init_tree). Every accessor must agree, and after the
 * same changes both must write the same JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "msg.h"
#include "rpc.h"

/* S parsed, failing the test on bad JSON. */
static json_t *J(const char *s)
{
	json_error_t e;
	json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
	if (!v)
		fail_msg("bad test JSON %s: %s", s, e.text);
	return v;
}

/* M as JSON (a new reference), through msg_dump. */
static json_t *dumped(struct msg *m)
{
	char *text;
	ssize_t n = msg_dump(m, &text);
	assert_true(n >= 0);
	json_t *v = json_loadb(text, (size_t)n, 0, NULL);
	if (!v)
		fail_msg("msg_dump wrote invalid JSON: %s", text);
	free(text);
	return v;
}

/* The pieces of msg_iov joined, into OUT. */
static void iov_text(struct msg *m, char *out, size_t n)
{
	struct iovec iov[MSG_IOV_MAX];
	int k = msg_iov(m, iov);
	size_t len = 0;
	assert_true(k > 0);
	for (int i = 0; i < k; i++) {
		assert_true(len + iov[i].iov_len < n);
		memcpy(out + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	out[len] = '\0';
}

/* Lines both forms must agree on. */
static const char *const lines[] = {
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
		"\"arguments\":{},\"_meta\":{\"progressToken\":\"t1\"}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"resources/read\",\"params\":{\"uri\":\"file:///x\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":-7,\"method\":\"prompts/get\",\"params\":{\"name\":\"p\",\"_meta\":{\"progressToken\":9}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"ping\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"tools/list\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":10000000000000000000.5,\"method\":\"tools/list\"}",
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":4,\"progress\":1}}",
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"r-1\",\"reason\":\"x\"}}",
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":12}}",
	"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[],\"isError\":true}}",
	"{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"tools\":[]}}",
	"{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32601,\"message\":\"no\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"completion/complete\",\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"pp\"},"
		"\"argument\":{\"name\":\"a\",\"value\":\"\"}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"caf\\u00e9\"}}",
};

/* Compares what two forms of the same message answer. */
static void expect_same_facts(struct msg *a, struct msg *b, const char *line)
{
	struct rpc_info ia, ib;
	unsigned char ka[RPC_KEY_MAX], kb[RPC_KEY_MAX];
	enum rpc_kind k = msg_classify(a, &ia);
	assert_int_equal(k, msg_classify(b, &ib));
	if ((ia.method == NULL) != (ib.method == NULL) ||
	    (ia.method && strcmp(ia.method, ib.method) != 0))
		fail_msg("methods differ for %s", line);
	size_t na = msg_id_key(a, ka), nb = msg_id_key(b, kb);
	assert_int_equal(na, nb);
	assert_memory_equal(ka, kb, na);
	na = msg_rid_key(a, ka);
	nb = msg_rid_key(b, kb);
	assert_int_equal(na, nb);
	assert_memory_equal(ka, kb, na);
	int64_t va = 0, vb = 0;
	assert_int_equal(msg_id_int(a, &va), msg_id_int(b, &vb));
	assert_int_equal(va, vb);
	va = vb = 0;
	assert_int_equal(msg_token_int(a, &va), msg_token_int(b, &vb));
	assert_int_equal(va, vb);
	struct msg_val ta = { .n = 0 }, tb = { .n = 0 };
	assert_int_equal(msg_token_get(a, &ta), msg_token_get(b, &tb));
	if (ta.n || tb.n) {
		json_t *ja = msg_val_json(&ta), *jb = msg_val_json(&tb);
		assert_true(json_equal(ja, jb));
		json_decref(ja);
		json_decref(jb);
	}
	msg_val_release(&ta);
	msg_val_release(&tb);
	assert_int_equal(msg_outcome(a), msg_outcome(b));
	/* one in a buffer too small for most subjects, one in a roomy one */
	char small[4], roomy[256], *ha, *hb;
	const char *sa = msg_subject(a, small, sizeof small, &ha),
		*sb = msg_subject(b, roomy, sizeof roomy, &hb);
	if ((sa == NULL) != (sb == NULL) || (sa && strcmp(sa, sb) != 0))
		fail_msg("subjects differ for %s: %s / %s", line, sa ? sa : "-", sb ? sb : "-");
	assert_true(!sa || sa == (ha ? ha : small));
	free(ha);
	free(hb);
}

/* Every accessor answers the same for the bytes and for the tree. */
static void test_same_facts_both_forms(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
		struct msg a, b;
		json_t *err = NULL;
		assert_int_equal(msg_init_line(&a, lines[i], strlen(lines[i]), &err), 0);
		msg_init_tree(&b, J(lines[i]));
		expect_same_facts(&a, &b, lines[i]);
		msg_release(&a);
		msg_release(&b);
	}
}

/* Setting the id, the token and a cancelled request's id: the same JSON either way. */
static void test_same_changes_both_forms(void **state)
{
	(void)state;
	struct msg_val id = { .n = 0 }, tok = { .n = 0 };
	msg_val_set_int(&id, 42);
	msg_val_set(&tok, "\"x\\u00e9\"", 9);
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
		struct msg a, b;
		json_t *err = NULL;
		assert_int_equal(msg_init_line(&a, lines[i], strlen(lines[i]), &err), 0);
		msg_init_tree(&b, J(lines[i]));
		assert_int_equal(msg_set_id(&a, &id), msg_set_id(&b, &id));
		assert_int_equal(msg_set_token(&a, &tok), msg_set_token(&b, &tok));
		assert_int_equal(msg_set_rid(&a, &id), msg_set_rid(&b, &id));
		json_t *ja = dumped(&a), *jb = dumped(&b);
		if (!json_equal(ja, jb)) {
			char *ta = json_dumps(ja, 0), *tb = json_dumps(jb, 0);
			fail_msg("after the same changes:\nbytes: %s\ntree:  %s", ta, tb);
		}
		json_t *ta = msg_tree(&a);   /* the tree made later has them too */
		assert_true(json_equal(ta, jb));
		json_decref(ja);
		json_decref(jb);
		msg_release(&a);
		msg_release(&b);
	}
	msg_val_release(&tok);
}

/* A scanned message stays bytes: the changes are spliced, the rest is as it came. */
static void test_bytes_spliced(void **state)
{
	(void)state;
	static const char line[] = "{\"jsonrpc\":\"2.0\", \"id\" : 7,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"e\",\"_meta\":{\"progressToken\" :\"tok\"},\"n\":1.50}}";
	struct msg m;
	json_t *err = NULL;
	char out[512];
	assert_int_equal(msg_init_line(&m, line, strlen(line), &err), 0);
	assert_true(msg_is_raw(&m));
	assert_int_equal(msg_set_id_int(&m, 123), 0);
	iov_text(&m, out, sizeof out);   /* the id alone */
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\", \"id\" : 123,\"method\":\"tools/call\","
			    "\"params\":{\"name\":\"e\",\"_meta\":{\"progressToken\" :\"tok\"},\"n\":1.50}}");
	struct msg_val v = { .n = 0 };
	msg_val_set_int(&v, 123);
	assert_int_equal(msg_set_token(&m, &v), 0);
	iov_text(&m, out, sizeof out);
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\", \"id\" : 123,\"method\":\"tools/call\","
			    "\"params\":{\"name\":\"e\",\"_meta\":{\"progressToken\" :123},\"n\":1.50}}");
	assert_int_equal(msg_set_token_int(&m, -4), 0);
	iov_text(&m, out, sizeof out);
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\", \"id\" : 123,\"method\":\"tools/call\","
			    "\"params\":{\"name\":\"e\",\"_meta\":{\"progressToken\" :-4},\"n\":1.50}}");
	assert_true(msg_is_raw(&m));   /* no tree was made for it */
	msg_release(&m);

	/* a message without a token takes none, in either form */
	static const char plain[] = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}";
	assert_int_equal(msg_init_line(&m, plain, strlen(plain), &err), 0);
	assert_int_equal(msg_set_token_int(&m, 5), -1);
	assert_int_equal(msg_set_id_int(&m, 9), 0);
	iov_text(&m, out, sizeof out);
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}");
	assert_non_null(msg_tree(&m));
	assert_int_equal(msg_set_token_int(&m, 5), -1);
	msg_release(&m);
}

/* A tree made to be read keeps the bytes, which still go out while it is unchanged. */
static void test_read_unchanged_keeps_bytes(void **state)
{
	(void)state;
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"caf\\u00e9\",\"x\":2.5e3}}";
	struct msg m;
	json_t *err = NULL;
	char out[256];
	assert_int_equal(msg_init_line(&m, line, strlen(line), &err), 0);
	struct msg_val v = { .n = 0 };
	msg_val_set(&v, "\"r\"", 3);
	assert_int_equal(msg_set_id(&m, &v), 0);
	json_t *t = msg_tree(&m);
	assert_non_null(t);
	assert_string_equal(json_string_value(json_object_get(t, "id")), "r");
	assert_true(msg_bytes_current(&m));
	iov_text(&m, out, sizeof out);   /* escapes and number forms as they came */
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"result\":{\"t\":\"caf\\u00e9\",\"x\":2.5e3}}");
	/* changed in place: the tree is the message from now on */
	json_object_set_new(json_object_get(t, "result"), "x", json_integer(1));
	assert_false(msg_bytes_current(&m));
	assert_false(msg_bytes_current(&m));
	assert_int_equal(msg_iov(&m, (struct iovec[MSG_IOV_MAX]){ 0 }), -1);
	json_t *d = dumped(&m);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "result"), "x")), 1);
	json_decref(d);
	msg_val_release(&v);
	msg_release(&m);
}

/* Kept bytes outlive the reader's buffer, spans included. */
static void test_keep(void **state)
{
	(void)state;
	char buf[] = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"n\"}}";
	struct msg m, moved;
	json_t *err = NULL;
	char out[256];
	assert_int_equal(msg_init_line(&m, buf, strlen(buf), &err), 0);
	assert_int_equal(msg_set_id_int(&m, 1), 0);
	assert_int_equal(msg_keep(&m), 0);
	memset(buf, 'X', strlen(buf));
	msg_move(&moved, &m);
	assert_true(msg_empty(&m));
	iov_text(&moved, out, sizeof out);
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"n\"}}");
	char sbuf[8], *heap;
	const char *subject = msg_subject(&moved, sbuf, sizeof sbuf, &heap);
	assert_string_equal(subject, "n");
	assert_ptr_equal(subject, sbuf);
	assert_null(heap);
	msg_release(&moved);
	msg_release(&m);   /* releasing an empty message is harmless */
}

/* Bytes that are not JSON, or that jansson refuses, have one fate: -32700. */
static void test_not_json(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"{",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"a\\u0000b\":1}}",
		"[1,",
		"\xff\xfe",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct msg m;
		json_t *err = NULL;
		assert_int_equal(msg_init_line(&m, bad[i], strlen(bad[i]), &err), -1);
		assert_non_null(err);
		assert_int_equal(json_integer_value(json_object_get(json_object_get(err, "error"), "code")),
				 RPC_PARSE_ERROR);
		json_decref(err);
	}
}

/* A batch comes back as a tree array; a declined line as a tree; a scanned one as bytes. */
static void test_forms(void **state)
{
	(void)state;
	struct msg m;
	json_t *err = NULL;
	static const char batch[] = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]";
	assert_int_equal(msg_init_line(&m, batch, strlen(batch), &err), 0);
	assert_true(json_is_array(m.tree));
	msg_release(&m);
	static const char real[] = "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}";
	assert_int_equal(msg_init_line(&m, real, strlen(real), &err), 0);
	assert_false(msg_is_raw(&m));
	assert_non_null(m.tree);
	msg_release(&m);
	static const char plain[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
	assert_int_equal(msg_init_line(&m, plain, strlen(plain), &err), 0);
	assert_true(msg_is_raw(&m));
	msg_release(&m);
}

/* True when white space may go at offset I of the compact JSON S (N bytes). */
static bool ws_place(const char *s, size_t n, size_t i)
{
	size_t quotes = 0;
	for (size_t k = 0; k < i; k++)
		quotes += s[k] == '"' && (k == 0 || s[k - 1] != '\\');
	if (quotes % 2)
		return false;   /* inside a string */
	return i == 0 || i == n || strchr("{}[],:", s[i - 1]) || strchr("{}[],:", s[i]);
}

/* S with BREAK inserted at offset I, malloc'd. */
static char *with_break(const char *s, size_t i, const char *brk)
{
	size_t n = strlen(s), bn = strlen(brk);
	char *t = malloc(n + bn + 1);
	assert_non_null(t);
	memcpy(t, s, i);
	memcpy(t + i, brk, bn);
	memcpy(t + i + bn, s + i, n - i + 1);
	return t;
}

/*
 * A raw CR, LF or CRLF at every place JSON allows white space: the
 * message stays bytes, but its own copy, with spaces there, so that what
 * is written (the id and token spliced) is one line that says what the
 * compact message says; the reader's buffer is neither changed nor
 * needed after. Lines of the stdio framer never hold LF, but HTTP bodies
 * and a line's CR do, and a peer that reads a line at a time would take
 * each piece as a message of its own.
 */
static void test_line_breaks_blanked(void **state)
{
	(void)state;
	static const char *const msgs[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
			"\"_meta\":{\"progressToken\":7},\"arguments\":{\"a\":[1,true,{\"b\":\"x\\ny\"}]}}}",
		"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"result\":{\"content\":[],\"isError\":false}}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":12}}",
	};
	static const char *const breaks[] = { "\n", "\r", "\r\n", "\n\r\n " };
	struct msg_val tok = { .n = 0 };
	msg_val_set(&tok, "\"t-9\"", 5);
	for (size_t k = 0; k < sizeof msgs / sizeof *msgs; k++) {
		size_t n = strlen(msgs[k]);
		struct msg want;
		json_t *err = NULL;
		assert_int_equal(msg_init_line(&want, msgs[k], n, &err), 0);
		assert_true(msg_is_raw(&want));
		assert_null(want.own);   /* a compact line is not copied */
		msg_set_id_int(&want, 77);
		msg_set_token(&want, &tok);
		msg_set_rid(&want, &tok);
		json_t *jw = dumped(&want);
		for (size_t i = 0; i <= n; i++) {
			if (!ws_place(msgs[k], n, i))
				continue;
			for (size_t b = 0; b < sizeof breaks / sizeof *breaks; b++) {
				char *t = with_break(msgs[k], i, breaks[b]), *kept = strdup(t);
				size_t tn = strlen(t);
				char out[512];
				struct msg m;
				assert_int_equal(msg_init_line(&m, t, tn, &err), 0);
				assert_true(msg_is_raw(&m));
				assert_string_equal(t, kept);   /* the reader's bytes are left alone */
				memset(t, 'X', tn);             /* and not needed any more */
				msg_set_id_int(&m, 77);
				msg_set_token(&m, &tok);
				msg_set_rid(&m, &tok);
				iov_text(&m, out, sizeof out);
				if (strpbrk(out, "\r\n"))
					fail_msg("a line break left at %zu of %s: %s", i, kept, out);
				json_t *jo = json_loads(out, 0, NULL);
				if (!json_equal(jo, jw))
					fail_msg("not the same message with a break at %zu: %s", i, out);
				json_decref(jo);
				/* read and not changed, it still leaves as those bytes */
				assert_non_null(msg_tree(&m));
				assert_true(msg_bytes_current(&m));
				msg_release(&m);
				free(t);
				free(kept);
			}
		}
		json_decref(jw);
		msg_release(&want);
	}
	msg_val_release(&tok);
}

/* What the scanner declines is a tree, written compact: no line break survives either. */
static void test_line_breaks_in_trees(void **state)
{
	(void)state;
	static const char *const lines_[] = {
		"[\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},\n{\"jsonrpc\":\"2.0\","
			"\"id\":2,\"method\":\"ping\"}\n]",
		"{\"jsonrpc\":\"2.0\",\n\"id\":1.5,\r\n\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"method\":\"tools/call\",\"params\":{\"a\\u0041\":\n\"x\\ny\"}}",
		"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"error\":{\"code\":-1,\r\n\"message\":\"m\"}}",
	};
	for (size_t i = 0; i < sizeof lines_ / sizeof *lines_; i++) {
		struct msg m;
		json_t *err = NULL;
		char *text;
		assert_int_equal(msg_init_line(&m, lines_[i], strlen(lines_[i]), &err), 0);
		assert_non_null(m.tree);
		ssize_t n = msg_dump(&m, &text);
		assert_true(n > 0);
		if (memchr(text, '\n', (size_t)n) || memchr(text, '\r', (size_t)n))
			fail_msg("a line break left in %s", text);
		json_t *a = json_loads(lines_[i], JSON_DECODE_ANY, NULL), *b = json_loads(text, JSON_DECODE_ANY, NULL);
		assert_true(json_equal(a, b));
		json_decref(a);
		json_decref(b);
		free(text);
		msg_release(&m);
	}
}

/* Two JSON values in one line (or body) are no message: -32700, never forwarded. */
static void test_two_values(void **state)
{
	(void)state;
	static const char *const between[] = { "", " ", "\n", "\r\n", "\r", "\t \n" };
	static const char *const second[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}",
		"[]", "1", "\"s\"",
	};
	for (size_t i = 0; i < sizeof between / sizeof *between; i++) {
		for (size_t j = 0; j < sizeof second / sizeof *second; j++) {
			char line[256];
			struct msg m;
			json_t *err = NULL;
			snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}%s%s",
				 between[i], second[j]);
			assert_int_equal(msg_init_line(&m, line, strlen(line), &err), -1);
			assert_non_null(err);
			assert_int_equal(json_integer_value(json_object_get(json_object_get(err, "error"),
									    "code")),
					 RPC_PARSE_ERROR);
			json_decref(err);
		}
	}
}

/* The _meta question is conservative on bytes and exact on a tree. */
static void test_meta_has(void **state)
{
	(void)state;
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"x\",\"_meta\":{\"io.mcp-chain/token\":\"s\"}}}";
	struct msg m;
	json_t *err = NULL;
	assert_int_equal(msg_init_line(&m, line, strlen(line), &err), 0);
	assert_true(msg_meta_has(&m, "io.mcp-chain/token"));
	assert_false(msg_meta_has(&m, "other"));
	assert_non_null(msg_tree(&m));
	assert_true(msg_meta_has(&m, "io.mcp-chain/token"));
	assert_false(msg_meta_has(&m, "other"));
	msg_release(&m);
}

/* _meta strings read and set: a set makes params and _meta when missing,
 * keeps the id spliced before, and the message is its tree from then on. */
static void test_meta_str_and_set(void **state)
{
	(void)state;
	static const char with[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"x\",\"_meta\":{\"traceparent\":\"tp\",\"n\":1}}}";
	static const char bare[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
	static const char odd[] = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"x\",\"params\":{\"_meta\":7}}";
	struct msg m;
	json_t *err = NULL;
	assert_int_equal(msg_init_line(&m, with, strlen(with), &err), 0);
	assert_null(msg_meta_str(&m, "other"));
	assert_true(msg_is_raw(&m));          /* nothing there: no tree made */
	assert_string_equal(msg_meta_str(&m, "traceparent"), "tp");
	assert_null(msg_meta_str(&m, "n"));   /* not a string */
	assert_int_equal(msg_meta_set(&m, "traceparent", "new"), 0);
	assert_string_equal(msg_meta_str(&m, "traceparent"), "new");
	assert_false(msg_bytes_current(&m));
	msg_release(&m);

	assert_int_equal(msg_init_line(&m, bare, strlen(bare), &err), 0);
	assert_int_equal(msg_set_id_int(&m, 42), 0);
	assert_int_equal(msg_meta_set(&m, "traceparent", "tp2"), 0);
	char *text;
	ssize_t n = msg_dump(&m, &text);
	assert_true(n > 0);
	assert_string_equal(text, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\","
			    "\"params\":{\"_meta\":{\"traceparent\":\"tp2\"}}}");
	free(text);
	msg_release(&m);

	assert_int_equal(msg_init_line(&m, odd, strlen(odd), &err), 0);
	assert_int_equal(msg_meta_set(&m, "traceparent", "tp"), -1);   /* _meta not an object */
	msg_release(&m);

	/* on the bytes: a new _meta after params.name, then a member into it;
	 * the id spliced after the edits still lands */
	static const char call[] = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"echo\",\"arguments\":{\"a\":1}}}";
	assert_int_equal(msg_init_line(&m, call, strlen(call), &err), 0);
	assert_int_equal(msg_meta_set(&m, "traceparent", "tp3"), 0);
	assert_int_equal(msg_meta_set(&m, "tracestate", "k=v"), 0);
	assert_int_equal(msg_set_id_int(&m, 77), 0);
	assert_true(msg_is_raw(&m));
	n = msg_dump(&m, &text);
	assert_true(n > 0);
	assert_string_equal(text, "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\","
			    "\"params\":{\"name\":\"echo\",\"_meta\":{\"tracestate\":\"k=v\","
			    "\"traceparent\":\"tp3\"},\"arguments\":{\"a\":1}}}");
	free(text);
	assert_string_equal(msg_meta_str(&m, "traceparent"), "tp3");
	msg_release(&m);

	/* an empty _meta takes the member without a comma */
	static const char empty[] = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\","
		"\"params\":{\"uri\":\"file:///a\",\"_meta\":{}}}";
	assert_int_equal(msg_init_line(&m, empty, strlen(empty), &err), 0);
	assert_int_equal(msg_meta_set(&m, "traceparent", "tp4"), 0);
	assert_true(msg_is_raw(&m));
	n = msg_dump(&m, &text);
	assert_string_equal(text, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\","
			    "\"params\":{\"uri\":\"file:///a\",\"_meta\":{\"traceparent\":\"tp4\"}}}");
	free(text);
	msg_release(&m);
}

/* Values: short and long texts, integers at the edges, keys as rpc_id_key gives them. */
static void test_values(void **state)
{
	(void)state;
	struct msg_val v = { .n = 0 };
	unsigned char k1[RPC_KEY_MAX], k2[RPC_KEY_MAX];
	static const int64_t ints[] = { 0, -1, 9, 10, 99, 100, 101, 12345, 999999999, -999999999,
		1000000000, 1000000007, -1000000000, 1000000000000000000, 999999999999999999,
		123456789012345678, INT64_MAX, INT64_MIN + 1, INT64_MIN };
	for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
		char want[32];
		msg_val_set_int(&v, ints[i]);
		snprintf(want, sizeof want, "%" PRId64, ints[i]);
		assert_int_equal(v.n, strlen(want));
		assert_memory_equal(msg_val_text(&v), want, v.n);
		json_t *j = msg_val_json(&v);
		if (strlen(want) <= 18 || ints[i] == INT64_MAX || ints[i] == INT64_MIN + 1) {
			size_t a = msg_val_key(&v, k1), b = rpc_id_key(j, k2);
			assert_int_equal(a, b);
			assert_memory_equal(k1, k2, a);
		}
		json_decref(j);
	}
	for (int64_t p = 1; p <= INT64_MAX / 10; p *= 10) {   /* each side of every power of ten */
		for (int64_t d = -1; d <= 1; d++) {
			for (int sign = -1; sign <= 1; sign += 2) {
				char want[32];
				int64_t x = sign * (p + d);
				msg_val_set_int(&v, x);
				snprintf(want, sizeof want, "%" PRId64, x);
				assert_int_equal(v.n, strlen(want));
				assert_memory_equal(msg_val_text(&v), want, v.n);
			}
		}
	}
	char long_text[100];
	memset(long_text, 'a', sizeof long_text);
	long_text[0] = long_text[sizeof long_text - 1] = '"';
	assert_int_equal(msg_val_set(&v, long_text, sizeof long_text), 0);
	assert_non_null(v.heap);
	json_t *j = msg_val_json(&v);
	assert_int_equal(json_string_length(j), sizeof long_text - 2);
	size_t a = msg_val_key(&v, k1), b = rpc_id_key(j, k2);
	assert_int_equal(a, b);
	assert_memory_equal(k1, k2, a);
	json_decref(j);
	msg_val_release(&v);
	assert_null(v.heap);
	assert_int_equal(v.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_facts_both_forms),
		cmocka_unit_test(test_same_changes_both_forms),
		cmocka_unit_test(test_bytes_spliced),
		cmocka_unit_test(test_read_unchanged_keeps_bytes),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_not_json),
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_line_breaks_blanked),
		cmocka_unit_test(test_line_breaks_in_trees),
		cmocka_unit_test(test_two_values),
		cmocka_unit_test(test_meta_has),
		cmocka_unit_test(test_meta_str_and_set),
		cmocka_unit_test(test_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
