/*
 * http_stats.c - the label values of the HTTP front's request metrics
 * (see http_stats.h): the methods /metrics names, the latency buckets.
 */
#include "http_stats.h"

#include <string.h>

const char *const http_stats_methods[HTTP_STATS_NMETHODS] = {
	"initialize", "ping", "tools/list", "tools/call", "resources/list",
	"resources/templates/list", "resources/read", "resources/subscribe",
	"resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
	"logging/setLevel", "tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
	"server/discover", "subscriptions/listen", "other",
};

unsigned http_stats_method_index(const char *method)
{
	for (unsigned i = 0; method && i < HTTP_STATS_NMETHODS - 1; i++)
		if (strcmp(method, http_stats_methods[i]) == 0)
			return i;
	return HTTP_STATS_NMETHODS - 1;
}

const double http_stats_latency_bounds[HTTP_STATS_NBUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30,
};

unsigned http_stats_latency_bucket(double seconds)
{
	unsigned i = 0;
	while (i < HTTP_STATS_NBUCKETS && seconds > http_stats_latency_bounds[i])
		i++;
	return i;
}
