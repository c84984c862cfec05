/*
 * fuzz_param.c - libFuzzer target for src/core/param_headers.c (the
 * 2026-07-28 x-mcp-header marks). The input is a tools/list "tools" array
 * and a call's arguments, both JSON, split at the first NUL byte; the
 * bytes after a second NUL are a value to encode. Checked:
 *   - learning with and without dropping finds the same invalid tools; a
 *     server's list is left as it was, a client's loses exactly those;
 *   - every header a call carries has a token name and a header-safe value;
 *   - what the client side sends, the server side accepts (param_check
 *     on the decoded headers agrees), for every tool the list kept;
 *   - param_encode gives a header-safe value that decodes to its input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "log.h"
#include "param_headers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The tools left out are logged as warnings: not on every run. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_ERROR);
	return 0;
}

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_param: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

#define MAX_HDRS 64

struct hdrs {
	char *name[MAX_HDRS], *value[MAX_HDRS];
	int n;
};

/* A header value a client may send: visible ASCII, space and tab, no
 * white space at either end. */
static bool header_safe(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 0x20 && v[i] <= 0x7e) || v[i] == '\t'))
			return false;
	return true;
}

/* V decoded from its Base64 form (malloc'd; *LEN set), or a copy. */
static char *decode(const char *v, size_t *len)
{
	size_t n = strlen(v);
	if (n < 11 || strncmp(v, "=?base64?", 9) != 0 || strcmp(v + n - 2, "?=") != 0) {
		*len = n;
		return strdup(v);
	}
	size_t b = n - 11;
	CHECK(b % 4 == 0);
	unsigned char *out = malloc(b / 4 * 3 + 1);
	CHECK(out);
	int got = EVP_DecodeBlock(out, (const unsigned char *)v + 9, (int)b);
	CHECK(got >= 0);
	for (size_t i = b; i > 0 && v[9 + i - 1] == '=' && got > 0; i--)
		got--;   /* padding decodes to zeros */
	out[got] = '\0';
	*len = (size_t)got;
	return (char *)out;
}

static int add(void *arg, const char *name, const char *value)
{
	struct hdrs *h = arg;
	CHECK(strncmp(name, "Mcp-Param-", 10) == 0 && name[10]);
	for (const char *p = name; *p; p++)
		CHECK(*p > 0x20 && *p < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", *p));
	CHECK(header_safe(value));
	if (h->n < MAX_HDRS) {
		h->name[h->n] = strdup(name);
		h->value[h->n] = strdup(value);
		h->n++;
	}
	return 0;
}

static char *get(void *arg, const char *name, bool *bad)
{
	struct hdrs *h = arg;
	*bad = false;
	for (int i = 0; i < h->n; i++)
		if (strcasecmp(h->name[i], name) == 0) {
			size_t len;
			char *v = decode(h->value[i], &len);
			if (strlen(v) != len) {   /* a NUL inside: no C string can carry it */
				free(v);
				*bad = true;
				return NULL;
			}
			return v;
		}
	return NULL;
}

static bool has_nul_string(json_t *v)
{
	if (json_is_string(v))
		return strlen(json_string_value(v)) != json_string_length(v);
	size_t i;
	const char *k;
	json_t *e;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (has_nul_string(e))
				return true;
	} else if (json_is_object(v)) {
		json_object_foreach(v, k, e)
			if (has_nul_string(e))
				return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	const char *nul = memchr(p, '\0', size);
	const char *nul2 = nul ? memchr(nul + 1, '\0', (size_t)(end - nul - 1)) : NULL;
	json_t *tools = json_loadb(p, nul ? (size_t)(nul - p) : size, JSON_ALLOW_NUL, NULL);
	json_t *args = nul ? json_loadb(nul + 1, (size_t)((nul2 ? nul2 : end) - nul - 1),
					JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL) : NULL;
	if (nul2) {   /* any bytes: encoded, safe, decoded back */
		size_t n = (size_t)(end - nul2 - 1), len;
		char *e = param_encode(nul2 + 1, n);
		CHECK(e && header_safe(e));
		char *d = decode(e, &len);
		CHECK(len == n && memcmp(d, nul2 + 1, n) == 0);
		free(d);
		free(e);
	}
	if (json_is_array(tools)) {
		struct param_table server = PARAM_TABLE_INIT, client = PARAM_TABLE_INIT;
		json_t *as_server = json_deep_copy(tools), *as_client = json_deep_copy(tools);
		size_t bad_s = param_learn(&server, as_server, "fuzz", false);
		size_t bad_c = param_learn(&client, as_client, "fuzz", true);
		CHECK(bad_s == bad_c);
		CHECK(json_equal(as_server, tools));
		CHECK(json_array_size(as_client) + bad_c == json_array_size(tools));
		size_t i;
		json_t *tool;
		json_array_foreach(as_client, i, tool) {
			const char *name = json_string_value(json_object_get(tool, "name"));
			struct hdrs h = { .n = 0 };
			CHECK(param_headers(&client, name, args, add, &h) == 0);
			char why[200];
			/* a value with a NUL cannot go in a header, nor compare as a C
			 * string: the round trip holds for the rest */
			if (h.n < MAX_HDRS && !has_nul_string(args))
				CHECK(param_check(&server, name, args, get, &h, why, sizeof why) == NULL);
			for (int k = 0; k < h.n; k++) {
				free(h.name[k]);
				free(h.value[k]);
			}
		}
		json_decref(as_server);
		json_decref(as_client);
		param_table_release(&server);
		param_table_release(&client);
	}
	json_decref(tools);
	json_decref(args);
	return 0;
}
