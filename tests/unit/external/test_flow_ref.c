/*
 * test_flow_ref.c - unit tests for src/external/flow_ref.c: which items of
 * an answer are ref/stream items, and the MCP content each becomes with
 * its execution stream's bytes (text, image, audio, an embedded resource
 * with a blob, or a resources/read contents item).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "flow_ref.h"

/* A ref item of TAG, MIME and URI (NULL: none); a new reference. */
static json_t *ref(json_t *tag, const char *mime, const char *uri)
{
	json_t *r = json_pack("{s:s, s:o, s:s}", "type", "ref/stream", "streamTag", tag,
			      "mimeType", mime);
	if (uri)
		json_object_set_new(r, "uri", json_string(uri));
	return r;
}

/* JSON text of V (stolen), for comparison; the caller frees it. */
static char *dump(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(v);
	return s;
}

/* Checks that V (stolen) is the JSON WANT. */
static void expect(json_t *v, const char *want)
{
	assert_non_null(v);
	char *got = dump(v), *w = dump(json_loads(want, 0, NULL));
	assert_string_equal(got, w);
	free(got);
	free(w);
}

static void test_items_and_tags(void **state)
{
	(void)state;
	bool contents;
	json_t *m = json_loads("{\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"},"
			       "{\"type\":\"ref/stream\",\"streamTag\":7,\"mimeType\":\"text/plain\"}]}}",
			       0, NULL);
	json_t *items = flow_ref_items(m, &contents);
	assert_non_null(items);
	assert_false(contents);
	uint32_t tag = 0;
	assert_false(flow_ref_tag(json_array_get(items, 0), &tag));
	assert_true(flow_ref_tag(json_array_get(items, 1), &tag));
	assert_int_equal(tag, 7);
	json_decref(m);

	m = json_loads("{\"id\":1,\"result\":{\"contents\":[]}}", 0, NULL);
	assert_non_null(flow_ref_items(m, &contents));
	assert_true(contents);
	json_decref(m);
	m = json_loads("{\"id\":1,\"error\":{\"code\":1,\"message\":\"m\"}}", 0, NULL);
	assert_null(flow_ref_items(m, &contents));
	json_decref(m);

	/* tags outside 0..2^32-1, or not integers, are no refs */
	json_t *bad[] = { ref(json_integer(-1), "text/plain", NULL),
			  ref(json_integer(INT64_C(4294967296)), "text/plain", NULL),
			  ref(json_string("1"), "text/plain", NULL) };
	for (size_t i = 0; i < 3; i++) {
		assert_false(flow_ref_tag(bad[i], &tag));
		json_decref(bad[i]);
	}
}

static void test_content(void **state)
{
	(void)state;
	const uint8_t bytes[] = { 0, 1, 2, 250, 251, 255 };
	json_t *r = ref(json_integer(3), "text/plain; charset=utf-8", NULL);
	expect(flow_ref_content(r, (const uint8_t *)"héllo", 6, false),
	       "{\"type\":\"text\",\"text\":\"h\\u00e9llo\"}");
	/* a text stream that is not UTF-8 cannot be a text item */
	assert_null(flow_ref_content(r, (const uint8_t *)"\xff\xfe", 2, false));
	json_decref(r);

	r = ref(json_integer(4), "image/png", NULL);
	expect(flow_ref_content(r, bytes, sizeof bytes, false),
	       "{\"type\":\"image\",\"data\":\"AAEC+vv/\",\"mimeType\":\"image/png\"}");
	json_decref(r);
	r = ref(json_integer(5), "audio/wav", NULL);
	expect(flow_ref_content(r, bytes, 0, false),
	       "{\"type\":\"audio\",\"data\":\"\",\"mimeType\":\"audio/wav\"}");
	json_decref(r);

	r = ref(json_integer(6), "application/octet-stream", NULL);
	expect(flow_ref_content(r, bytes, sizeof bytes, false),
	       "{\"type\":\"resource\",\"resource\":{\"uri\":\"mcp-flow://stream/6\","
	       "\"mimeType\":\"application/octet-stream\",\"blob\":\"AAEC+vv/\"}}");
	json_decref(r);
	r = ref(json_integer(8), "application/pdf", "file:///a.pdf");
	expect(flow_ref_content(r, bytes, 1, false),
	       "{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///a.pdf\","
	       "\"mimeType\":\"application/pdf\",\"blob\":\"AA==\"}}");
	/* resources/read: a contents item, text or blob */
	expect(flow_ref_content(r, bytes, 2, true),
	       "{\"uri\":\"file:///a.pdf\",\"mimeType\":\"application/pdf\",\"blob\":\"AAE=\"}");
	json_decref(r);
	r = ref(json_integer(9), "text/markdown", "file:///r.md");
	expect(flow_ref_content(r, (const uint8_t *)"# t", 3, true),
	       "{\"uri\":\"file:///r.md\",\"mimeType\":\"text/markdown\",\"text\":\"# t\"}");
	json_decref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_items_and_tags),
		cmocka_unit_test(test_content),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
