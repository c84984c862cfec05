/*
 * log_syslog.c - the syslog sink of the log module. A file of its own
 * because <syslog.h> and mcp-chain's log.h both define LOG_INFO and
 * LOG_DEBUG.
 */
#include "log_int.h"

#include <string.h>
#include <syslog.h>

static const struct {
	const char *name;
	int code;
} facilities[] = {
	{ "user", LOG_USER }, { "daemon", LOG_DAEMON }, { "auth", LOG_AUTH },
	{ "authpriv", LOG_AUTHPRIV }, { "local0", LOG_LOCAL0 },
	{ "local1", LOG_LOCAL1 }, { "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 },
	{ "local4", LOG_LOCAL4 }, { "local5", LOG_LOCAL5 }, { "local6", LOG_LOCAL6 },
	{ "local7", LOG_LOCAL7 },
};

const char log_syslog_names[] =
	"user, daemon, auth, authpriv, local0 ... local7";

/* Looks a facility up by name. */
int log_syslog_facility(const char *name)
{
	for (size_t i = 0; i < sizeof facilities / sizeof facilities[0]; i++)
		if (strcmp(facilities[i].name, name) == 0)
			return facilities[i].code;
	return -1;
}

/* Names our lines "mcp-chain[PID]"; the connection opens with the first. */
void log_syslog_open(void)
{
	openlog("mcp-chain", LOG_PID, LOG_USER);
}

/* Sends one audit line. */
void log_syslog_write(int facility, const char *text)
{
	syslog(facility | LOG_INFO, "%s", text);
}
