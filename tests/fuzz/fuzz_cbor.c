/*
 * fuzz_cbor.c - libFuzzer target for src/core/cbor_json.c: any bytes
 * cbor_to_json accepts must encode back (cbor_from_json) and decode to the
 * same value, types and the sign of zero included; that encoding is a
 * fixed point (encoding the value decoded from it gives the same bytes);
 * and the value written as JSON text and read back encodes the same too.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "cbor_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_cbor: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* A and B equal with the same types throughout and zeros of the same sign. */
static int same(const json_t *a, const json_t *b)
{
	if (json_typeof(a) != json_typeof(b))
		return 0;
	if (json_is_real(a))
		return json_real_value(a) == json_real_value(b) &&
		       !signbit(json_real_value(a)) == !signbit(json_real_value(b));
	if (json_is_array(a)) {
		if (json_array_size(a) != json_array_size(b))
			return 0;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!same(json_array_get(a, i), json_array_get(b, i)))
				return 0;
		return 1;
	}
	if (json_is_object(a)) {
		const char *k;
		size_t klen;
		json_t *m;
		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_keylen_foreach((json_t *)a, k, klen, m) {
			json_t *o = json_object_getn(b, k, klen);
			if (!o || !same(m, o))
				return 0;
		}
		return 1;
	}
	return json_equal(a, b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[160];
	why[0] = 0;
	json_t *v = cbor_to_json(data, size, why, sizeof why);
	if (!v) {
		CHECK(why[0] != 0);
		return 0;
	}
	struct buf b = BUF_INIT, b2 = BUF_INIT, b3 = BUF_INIT;
	CHECK(cbor_from_json(v, &b, why, sizeof why) == 0);
	json_t *back = cbor_to_json((const uint8_t *)b.data, b.len, why, sizeof why);
	CHECK(back != NULL);
	CHECK(same(v, back));
	CHECK(cbor_from_json(back, &b2, why, sizeof why) == 0);
	CHECK(b2.len == b.len && memcmp(b.data, b2.data, b.len) == 0);
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	CHECK(text != NULL);
	json_error_t err;
	json_t *reread = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	/* jansson's parser refuses a NUL in a key (its values take one) */
	CHECK(reread != NULL || strstr(text, "\\u0000"));
	if (reread) {
		CHECK(cbor_from_json(reread, &b3, why, sizeof why) == 0);
		CHECK(b3.len == b.len && memcmp(b.data, b3.data, b.len) == 0);
		json_decref(reread);
	}
	free(text);
	json_decref(back);
	json_decref(v);
	buf_release(&b);
	buf_release(&b2);
	buf_release(&b3);
	return 0;
}
