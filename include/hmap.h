/*
 * hmap.h - a small chained hash map from byte-string keys to pointers.
 * The map copies keys and owns its entries; it never owns the values.
 */
#ifndef MCPC_HMAP_H
#define MCPC_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap_entry;

struct hmap {
	struct hmap_entry **slots;
	size_t nslots;
	size_t count;
	struct hmap_entry *spare;  /* removed entries kept for reuse */
	size_t nspare;
};

#define HMAP_INIT { NULL, 0, 0, NULL, 0 }

/* Frees the entries (not the values). */
void hmap_release(struct hmap *m);

/* Stores VALUE under KEY, replacing any previous value; returns 0 or -1. */
int hmap_put(struct hmap *m, const void *key, size_t klen, void *value);

/*
 * Stores VALUE under KEY unless KEY is there already: returns 0 (stored),
 * 1 (present; the map is unchanged) or -1 (out of memory).
 */
int hmap_add(struct hmap *m, const void *key, size_t klen, void *value);

/* Returns the value under KEY, or NULL. */
void *hmap_get(const struct hmap *m, const void *key, size_t klen);

/* Removes KEY and returns its value, or NULL when absent. */
void *hmap_del(struct hmap *m, const void *key, size_t klen);

/* Calls FN for each value; FN must not change the map. */
void hmap_each(const struct hmap *m, void (*fn)(void *value, void *arg), void *arg);

/* Moves every value into a new array (caller frees it) and empties the map. */
void **hmap_drain(struct hmap *m, size_t *count);

#endif
