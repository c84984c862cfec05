/*
 * http_sid.c - the HTTP front's session ids (see http_sid.h): made from
 * getrandom(2), checked for their shape.
 */
#include "http_sid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* A new session id from getrandom(2). */
int http_sid_new(char out[HTTP_SID_LEN + 1])
{
	unsigned char r[HTTP_SID_LEN / 2];
	size_t got = 0;
	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	out[HTTP_SID_LEN] = '\0';
	return 0;
}

/* True for HTTP_SID_LEN lowercase hex digits. */
bool http_sid_valid(const char *s)
{
	if (!s || strlen(s) != HTTP_SID_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}
