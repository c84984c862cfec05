/*
 * wiretap.c - the tap every message crossing a peer's edge passes (wiretap.h).
 */
#include "wiretap.h"

#include <stdlib.h>
#include <string.h>

wiretap_fn wiretap_hook;
static void *wiretap_arg;

/* Sets the tap. */
void wiretap_set(wiretap_fn fn, void *arg)
{
	wiretap_hook = fn;
	wiretap_arg = arg;
}

/* A line. */
void wiretap_line_(const struct peer *p, enum wiretap_dir dir, const char *line, size_t len)
{
	wiretap_hook(wiretap_arg, p, dir, line, len);
}

/* The pieces of a line, joined. */
void wiretap_iov_(const struct peer *p, enum wiretap_dir dir, const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	char *line = malloc(len + 1);
	if (!line)
		return;
	char *q = line;
	for (int i = 0; i < n; i++) {
		memcpy(q, iov[i].iov_base, iov[i].iov_len);
		q += iov[i].iov_len;
	}
	wiretap_hook(wiretap_arg, p, dir, line, len);
	free(line);
}

/* A tree, as the transports write it. */
void wiretap_json_(const struct peer *p, enum wiretap_dir dir, json_t *msg)
{
	char *line = json_dumps(msg, JSON_COMPACT);
	if (!line)
		return;
	wiretap_hook(wiretap_arg, p, dir, line, strlen(line));
	free(line);
}
