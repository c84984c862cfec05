/*
 * fuzz_framer.c - libFuzzer target for src/core/framer.c against a
 * reference model: the input is cut in chunks (sizes taken from its
 * first bytes), fed through framer_reserve/commit or framer_push, and
 * the frames that come out must be the model's: the input split at '\n',
 * one trailing '\r' dropped, blank lines (spaces and tabs) skipped, a
 * line longer than the bound reported once as oversize with its length
 * and a prefix of it; what is left is the last partial line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_framer: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

struct model {
	const char *p, *e;   /* input not yet matched by a frame */
};

/* The next frame the model expects; false when only a partial line is left. */
static bool model_next(struct model *m, size_t max, const char **line, size_t *len,
		       size_t *raw, bool *over)
{
	for (;;) {
		const char *nl = memchr(m->p, '\n', (size_t)(m->e - m->p));
		if (!nl)
			return false;
		size_t l = (size_t)(nl - m->p);
		*line = m->p;
		*raw = l;
		m->p = nl + 1;
		if (l && (*line)[l - 1] == '\r')
			l--;
		*len = l;
		*over = l > max;
		if (*over)
			return true;
		for (size_t i = 0; i < l; i++)
			if ((*line)[i] != ' ' && (*line)[i] != '\t')
				return true;
	}
}

/* Takes every frame the framer has and checks each against the model. */
static void drain(struct framer *f, struct model *m, size_t max)
{
	const char *line, *want;
	size_t len, total, wlen, raw;
	bool over;
	enum frame_kind k;
	while ((k = framer_next(f, &line, &len, &total)) != FRAME_NONE) {
		CHECK(model_next(m, max, &want, &wlen, &raw, &over));
		CHECK(over == (k == FRAME_OVERSIZE));
		CHECK(total == wlen);
		if (k == FRAME_LINE) {
			CHECK(len == wlen && memcmp(line, want, len) == 0);
		} else {
			size_t least = max + 1 < FRAMER_PREFIX ? max + 1 : FRAMER_PREFIX;
			CHECK(len >= least && len <= FRAMER_PREFIX && len <= raw);
			CHECK(memcmp(line, want, len) == 0);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	/* byte 0: the bound (small ones reach the oversize paths); byte 1: the seed of the cuts */
	size_t max = data[0] < 0xF0 ? data[0] % 64 : (size_t)(data[0] - 0xEF) * 1000;
	unsigned seed = data[1];
	data += 2;
	size -= 2;
	struct framer f;
	struct model m = { (const char *)data, (const char *)data + size };
	framer_init(&f, max);
	for (size_t off = 0; off < size;) {
		seed = seed * 1103515245u + 12345u;
		size_t n = 1 + (seed >> 16) % 97;
		if (n > size - off)
			n = size - off;
		if (seed & 0x8000) {
			CHECK(framer_push(&f, (const char *)data + off, n) == 0);
		} else {
			size_t avail;
			char *dst = framer_reserve(&f, &avail);
			CHECK(dst && avail > 0);
			if (n > avail)
				n = avail;
			memcpy(dst, data + off, n);
			framer_commit(&f, n);
		}
		off += n;
		drain(&f, &m, max);
	}
	/* what is left is the last partial line, counted in full */
	const char *line;
	size_t len, raw;
	bool over;
	CHECK(!model_next(&m, max, &line, &len, &raw, &over));
	CHECK(framer_pending(&f) == (size_t)(m.e - m.p));
	framer_release(&f);
	return 0;
}
