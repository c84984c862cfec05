/*
 * hmap.c - chained hash map, hashed a word at a time, doubling at load
 * factor 1.
 */
#include "hmap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct hmap_entry {
	struct hmap_entry *next;
	uint64_t hash;
	void *value;
	size_t klen;
	unsigned char key[];
};

/*
 * Entries are made with room for a key of at least SMALL_KEY bytes, and up
 * to SPARE_MAX removed ones are kept for reuse, so that a map whose keys
 * come and go (the chain's request ids) stops calling malloc. A kept
 * entry is poisoned for AddressSanitizer but for its link.
 */
#define SMALL_KEY 16
#define SPARE_MAX 64
#define ENTRY_TAIL (sizeof(struct hmap_entry) + SMALL_KEY - sizeof(struct hmap_entry *))

/* A new entry with room for KLEN key bytes, reused when it can be. */
static struct hmap_entry *entry_new(struct hmap *m, size_t klen)
{
	struct hmap_entry *e = m->spare;
	if (e && klen <= SMALL_KEY) {
		m->spare = e->next;
		m->nspare--;
		POOL_UNPOISON(&e->hash, ENTRY_TAIL);
		return e;
	}
	return malloc(sizeof *e + (klen > SMALL_KEY ? klen : SMALL_KEY));
}

/* Frees entry E, or keeps it for reuse when its key room is the small one. */
static void entry_free(struct hmap *m, struct hmap_entry *e)
{
	if (e->klen <= SMALL_KEY && m->nspare < SPARE_MAX) {
		e->next = m->spare;
		m->spare = e;
		m->nspare++;
		POOL_POISON(&e->hash, ENTRY_TAIL);
		return;
	}
	free(e);
}

/*
 * Hashes the key a word at a time, each step multiplied and folded.
 * Inlined into each operation (four per request, mostly on 8- or 9-byte
 * keys): as a call it was a fifth of the map's cost.
 */
#define HOT static inline __attribute__((always_inline))
HOT uint64_t hash_bytes(const void *key, size_t n)
{
	const unsigned char *p = key;
	uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, v;
	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&v, p, 8);
		h = (h ^ v) * 0xBF58476D1CE4E5B9ULL;
		h ^= h >> 31;
	}
	v = 0;
	for (unsigned i = 0; i < n; i++)   /* as memcpy on little-endian, without a call */
		v |= (uint64_t)p[i] << (8 * i);
	h = (h ^ v) * 0x94D049BB133111EBULL;
	return h ^ (h >> 29);   /* the slot is taken from the low bits */
}

/* Frees every entry. */
void hmap_release(struct hmap *m)
{
	for (size_t i = 0; i < m->nslots; i++) {
		struct hmap_entry *e = m->slots[i], *next;
		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(m->slots);
	m->slots = NULL;
	m->nslots = m->count = 0;
	while (m->spare) {
		struct hmap_entry *e = m->spare;
		m->spare = e->next;
		POOL_UNPOISON(&e->hash, ENTRY_TAIL);
		free(e);
	}
	m->nspare = 0;
}

/* Rehashes into twice as many slots. */
static int grow(struct hmap *m)
{
	size_t n = m->nslots ? m->nslots * 2 : 16;
	struct hmap_entry **slots = calloc(n, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < m->nslots; i++) {
		struct hmap_entry *e = m->slots[i], *next;
		for (; e; e = next) {
			next = e->next;
			size_t s = e->hash & (n - 1);
			e->next = slots[s];
			slots[s] = e;
		}
	}
	free(m->slots);
	m->slots = slots;
	m->nslots = n;
	return 0;
}

/* True when the N bytes at A and B are equal; short keys compared inline. */
static inline bool key_eq(const unsigned char *a, const unsigned char *b, size_t n)
{
	uint64_t x, y;
	if (n > 16)
		return memcmp(a, b, n) == 0;
	for (; n >= 8; a += 8, b += 8, n -= 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return false;
	}
	for (; n > 0; n--)
		if (*a++ != *b++)
			return false;
	return true;
}

/* Finds the link pointing at KEY's entry (or at the chain's end). */
HOT struct hmap_entry **find(const struct hmap *m, const void *key,
				size_t klen, uint64_t h)
{
	struct hmap_entry **pp = &m->slots[h & (m->nslots - 1)];
	for (; *pp; pp = &(*pp)->next) {
		struct hmap_entry *e = *pp;
		if (e->hash == h && e->klen == klen && key_eq(e->key, key, klen))
			break;
	}
	return pp;
}

/* Inserts, or replaces when REPLACE; returns 0, 1 (present, kept) or -1. */
HOT int put(struct hmap *m, const void *key, size_t klen, void *value, bool replace)
{
	if (m->count >= m->nslots && grow(m) < 0)
		return -1;
	uint64_t h = hash_bytes(key, klen);
	struct hmap_entry **pp = find(m, key, klen, h);
	if (*pp) {
		if (!replace)
			return 1;
		(*pp)->value = value;
		return 0;
	}
	struct hmap_entry *e = entry_new(m, klen);
	if (!e)
		return -1;
	e->next = NULL;
	e->hash = h;
	e->value = value;
	e->klen = klen;
	if (klen <= SMALL_KEY) {   /* ids: a word or two, without a call */
		const unsigned char *from = key;
		size_t i = 0;
		for (; i + 8 <= klen; i += 8)
			memcpy(e->key + i, from + i, 8);
		for (; i < klen; i++)
			e->key[i] = from[i];
	} else {
		memcpy(e->key, key, klen);
	}
	*pp = e;
	m->count++;
	return 0;
}

/*
 * The chain's keys are 8 bytes (our ids at a peer) or 9 (a peer's integer
 * id, rpc_id_key_int): the operations below are compiled for those two
 * lengths as constants too (hashing, comparing and copying unrolled), and
 * KEYLEN picks the copy. The results are the same for every length.
 */
#define KEYLEN(call, klen) \
	((klen) == 8 ? call(8) : (klen) == 9 ? call(9) : call(klen))

/* Inserts or replaces. */
int hmap_put(struct hmap *m, const void *key, size_t klen, void *value)
{
#define PUT(n) put(m, key, n, value, true)
	return KEYLEN(PUT, klen);
#undef PUT
}

/* Inserts unless present. */
int hmap_add(struct hmap *m, const void *key, size_t klen, void *value)
{
#define ADD(n) put(m, key, n, value, false)
	return KEYLEN(ADD, klen);
#undef ADD
}

/* Looks up. */
HOT void *get(const struct hmap *m, const void *key, size_t klen)
{
	if (!m->nslots)
		return NULL;
	struct hmap_entry **pp = find(m, key, klen, hash_bytes(key, klen));
	return *pp ? (*pp)->value : NULL;
}

void *hmap_get(const struct hmap *m, const void *key, size_t klen)
{
#define GET(n) get(m, key, n)
	return KEYLEN(GET, klen);
#undef GET
}

/* Removes. */
HOT void *del(struct hmap *m, const void *key, size_t klen)
{
	if (!m->nslots)
		return NULL;
	struct hmap_entry **pp = find(m, key, klen, hash_bytes(key, klen));
	struct hmap_entry *e = *pp;
	if (!e)
		return NULL;
	void *v = e->value;
	*pp = e->next;
	entry_free(m, e);
	m->count--;
	return v;
}

void *hmap_del(struct hmap *m, const void *key, size_t klen)
{
#define DEL(n) del(m, key, n)
	return KEYLEN(DEL, klen);
#undef DEL
}

/* Visits every value. */
void hmap_each(const struct hmap *m, void (*fn)(void *value, void *arg), void *arg)
{
	for (size_t i = 0; i < m->nslots; i++)
		for (struct hmap_entry *e = m->slots[i]; e; e = e->next)
			fn(e->value, arg);
}

/* Empties the map, handing its values to the caller. */
void **hmap_drain(struct hmap *m, size_t *count)
{
	void **v = malloc((m->count ? m->count : 1) * sizeof *v);
	size_t n = 0;
	if (!v) {
		*count = 0;
		return NULL;
	}
	for (size_t i = 0; i < m->nslots; i++)
		for (struct hmap_entry *e = m->slots[i]; e; e = e->next)
			v[n++] = e->value;
	hmap_release(m);
	*count = n;
	return v;
}
