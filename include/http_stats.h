/*
 * http_stats.h - the label values of the HTTP front's request metrics
 * (/metrics): the fixed set of method names a request is counted under,
 * and the buckets of the request latency histogram. Pure, unit tested
 * (tests/unit/front/test_http_stats.c).
 */
#ifndef MCPC_HTTP_STATS_H
#define MCPC_HTTP_STATS_H

/*
 * The request methods /metrics names. A client's method is counted under
 * its name only when it is one of these (the MCP methods a client
 * sends), else as "other": a client cannot grow the set of label values.
 */
#define HTTP_STATS_NMETHODS 20
extern const char *const http_stats_methods[HTTP_STATS_NMETHODS];  /* the last is "other" */
/* The index of METHOD in http_stats_methods ("other" for NULL or unknown). */
unsigned http_stats_method_index(const char *method);

/* The upper bounds (seconds) of the request latency histogram's buckets,
 * 100 us to 30 s; a last bucket, +Inf, is implied. */
#define HTTP_STATS_NBUCKETS 17
extern const double http_stats_latency_bounds[HTTP_STATS_NBUCKETS];
/* The first bucket whose bound is at least SECONDS (HTTP_STATS_NBUCKETS: +Inf). */
unsigned http_stats_latency_bucket(double seconds);

#endif
