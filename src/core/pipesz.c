/*
 * pipesz.c - growing a pipe to fit what is about to cross it.
 */
#include "pipesz.h"

#include <fcntl.h>
#include <stdbool.h>

/* Grows FD to hold WANT bytes when it is a smaller pipe. */
bool pipesz_fit(int fd, size_t want, size_t *cap)
{
	if (*cap >= PIPESZ_MAX || (*cap && want <= *cap))
		return false;
	if (*cap == 0) {
		int now = fcntl(fd, F_GETPIPE_SZ);
		if (now <= 0) {          /* no pipe */
			*cap = PIPESZ_MAX;
			return false;
		}
		*cap = (size_t)now;
		if (want <= *cap)
			return false;
	}
	size_t size = *cap;
	while (size < want && size < PIPESZ_MAX)
		size <<= 1;
	int got = fcntl(fd, F_SETPIPE_SZ, (int)size);
	if (got > 0 && (size_t)got >= size) {
		*cap = (size_t)got;
		return true;
	}
	*cap = PIPESZ_MAX;   /* refused (EPERM past the user's limit): not asked again */
	return false;
}
