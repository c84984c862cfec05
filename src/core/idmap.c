/*
 * idmap.c - a ring of slots for the ids that count up, a hash map for the
 * few that find their slot taken.
 */
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

/* The slot ID would take. */
static inline struct idmap_slot *slot_of(const struct idmap *m, int64_t id)
{
	return &m->ring[(uint64_t)id & (IDMAP_RING - 1)];
}

void idmap_release(struct idmap *m)
{
	free(m->ring);
	m->ring = NULL;
	m->count = 0;
	hmap_release(&m->spill);
}

int idmap_put(struct idmap *m, int64_t id, void *value)
{
	if (!m->ring && !(m->ring = calloc(IDMAP_RING, sizeof *m->ring)))
		return -1;
	struct idmap_slot *s = slot_of(m, id);
	if (s->value && s->id == id) {
		s->value = value;
		return 0;
	}
	if (m->spill.count && hmap_get(&m->spill, &id, sizeof id))
		return hmap_put(&m->spill, &id, sizeof id, value);   /* replaced: no new one */
	if (!s->value) {
		s->id = id;
		s->value = value;
	} else if (hmap_put(&m->spill, &id, sizeof id, value) < 0) {
		return -1;
	}
	m->count++;
	return 0;
}

void *idmap_get(const struct idmap *m, int64_t id)
{
	if (!m->ring)
		return NULL;
	const struct idmap_slot *s = slot_of(m, id);
	if (s->value && s->id == id)
		return s->value;
	return m->spill.count ? hmap_get(&m->spill, &id, sizeof id) : NULL;
}

void *idmap_del(struct idmap *m, int64_t id)
{
	if (!m->ring)
		return NULL;
	struct idmap_slot *s = slot_of(m, id);
	void *v = NULL;
	if (s->value && s->id == id) {
		v = s->value;
		s->value = NULL;
	} else if (m->spill.count) {
		v = hmap_del(&m->spill, &id, sizeof id);
	}
	if (v)
		m->count--;
	return v;
}

void idmap_each(const struct idmap *m, void (*fn)(void *value, void *arg), void *arg)
{
	if (!m->count)
		return;
	for (size_t i = 0; i < IDMAP_RING; i++)
		if (m->ring[i].value)
			fn(m->ring[i].value, arg);
	hmap_each(&m->spill, fn, arg);
}

void **idmap_drain(struct idmap *m, size_t *count)
{
	size_t n = 0, spilled = 0;
	void **out = malloc((m->count ? m->count : 1) * sizeof *out);
	if (!out) {
		*count = 0;
		return NULL;
	}
	for (size_t i = 0; m->ring && i < IDMAP_RING; i++) {
		if (m->ring[i].value) {
			out[n++] = m->ring[i].value;
			m->ring[i].value = NULL;
		}
	}
	void **rest = hmap_drain(&m->spill, &spilled);
	if (spilled)
		memcpy(out + n, rest, spilled * sizeof *out);
	free(rest);
	*count = n + spilled;
	m->count = 0;
	return out;
}
