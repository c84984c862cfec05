/*
 * b64.c - base64 decoding for the binary contents `read` writes out
 * (resource blobs come base64-encoded in JSON).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* The value of base64 digit C, or -1. */
static int digit(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' || c == '-' ? 62 : c == '/' || c == '_' ? 63 : -1;
}

unsigned char *cli_b64_decode(const char *in, size_t *outlen)
{
	size_t n = strlen(in), len = 0;
	unsigned char *out = malloc(n / 4 * 3 + 3);
	unsigned acc = 0;
	int bits = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == '=' || c == '\n' || c == '\r' || c == ' ')
			continue;  /* padding and line breaks carry nothing */
		int d = digit(c);
		if (d < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	*outlen = len;
	return out;
}
