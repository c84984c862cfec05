/*
 * observe.c - the events of a running mcp-chain (observe.h): told to the
 * listeners as they happen, the latest kept in a ring of copies.
 */
#include "observe.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A kept event: its strings copied into one allocation. */
struct kept {
	struct obs_event e;
	char *strings;   /* owned: the copies E's strings point into */
};

struct listener {
	observe_fn fn;
	void *arg;
};

static struct kept ring[OBSERVE_KEEP];
static size_t ring_head, ring_count;   /* the oldest, and how many */
static struct listener *listeners;
static size_t nlisteners, listeners_cap;
static uint64_t serial;
static unsigned depth;                  /* 1 while listeners are being told */

/* The bytes of S with its NUL, or 0 for NULL. */
static size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

/* Copies S to *AT, advancing it; NULL stays NULL. */
static const char *put(char **at, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	memcpy(*at, s, n);
	const char *r = *at;
	*at += n;
	return r;
}

/* Keeps a copy of E in the ring, dropping the oldest when it is full. */
static void keep(const struct obs_event *e)
{
	const char *s[] = { e->what, e->source, e->method, e->name, e->client, e->backend,
			    e->detail };
	size_t n = 0;
	for (size_t i = 0; i < sizeof s / sizeof *s; i++)
		n += str_size(s[i]);
	char *copy = malloc(n ? n : 1);
	if (!copy)
		return;
	struct kept *k;
	if (ring_count == OBSERVE_KEEP) {
		k = &ring[ring_head];
		free(k->strings);
		ring_head = (ring_head + 1) % OBSERVE_KEEP;
	} else {
		k = &ring[(ring_head + ring_count++) % OBSERVE_KEEP];
	}
	char *at = copy;
	k->strings = copy;
	k->e = *e;
	k->e.ex = NULL;   /* the exchange ends; the copy outlives it */
	k->e.what = put(&at, e->what);
	k->e.source = put(&at, e->source);
	k->e.method = put(&at, e->method);
	k->e.name = put(&at, e->name);
	k->e.client = put(&at, e->client);
	k->e.backend = put(&at, e->backend);
	k->e.detail = put(&at, e->detail);
}

/* Tells E to every listener (by index: one may listen or unlisten while told). */
static void tell(const struct obs_event *e)
{
	for (size_t i = 0; i < nlisteners; i++)
		if (listeners[i].fn)
			listeners[i].fn(listeners[i].arg, e);
}

/* The kept event numbered SERIAL, or NULL when it left the ring. */
static const struct obs_event *kept_event(uint64_t n)
{
	for (size_t i = ring_count; i-- > 0;) {
		const struct obs_event *e = &ring[(ring_head + i) % OBSERVE_KEEP].e;
		if (e->serial == n)
			return e;
		if (e->serial < n)
			break;
	}
	return NULL;
}

void observe_note(const struct obs_event *e)
{
	struct obs_event ev = *e;
	if (ev.time == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ev.time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	}
	ev.serial = ++serial;
	keep(&ev);
	if (depth)
		return;   /* told by the outermost call, once the event in hand is */
	depth++;
	tell(&ev);
	/* events told from inside a listener, in order, from their kept copies */
	for (uint64_t n = ev.serial + 1; n <= serial; n++) {
		const struct obs_event *k = kept_event(n);
		if (k) {
			struct obs_event copy = *k;
			tell(&copy);
		}
	}
	depth--;
	size_t j = 0;
	for (size_t i = 0; i < nlisteners; i++)
		if (listeners[i].fn)
			listeners[j++] = listeners[i];
	nlisteners = j;
}

int observe_listen(observe_fn fn, void *arg)
{
	if (nlisteners == listeners_cap) {
		size_t cap = listeners_cap ? listeners_cap * 2 : 4;
		struct listener *l = realloc(listeners, cap * sizeof *l);
		if (!l)
			return -1;
		listeners = l;
		listeners_cap = cap;
	}
	listeners[nlisteners++] = (struct listener){ fn, arg };
	return 0;
}

void observe_unlisten(observe_fn fn, void *arg)
{
	for (size_t i = 0; i < nlisteners; i++)
		if (listeners[i].fn == fn && listeners[i].arg == arg) {
			if (depth) {
				listeners[i].fn = NULL;   /* swept when the telling ends */
			} else {
				memmove(&listeners[i], &listeners[i + 1],
					(nlisteners - i - 1) * sizeof *listeners);
				nlisteners--;
			}
			return;
		}
}

void observe_each(observe_fn fn, void *arg)
{
	for (size_t i = 0; i < ring_count; i++)
		fn(arg, &ring[(ring_head + i) % OBSERVE_KEEP].e);
}

void observe_reset(void)
{
	for (size_t i = 0; i < ring_count; i++)
		free(ring[(ring_head + i) % OBSERVE_KEEP].strings);
	ring_head = ring_count = 0;
	free(listeners);
	listeners = NULL;
	nlisteners = listeners_cap = 0;
}
