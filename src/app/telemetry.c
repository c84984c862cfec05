/*
 * telemetry.c - the running mcp-chain's tracer (trace.h): made from the
 * configuration's "telemetry" at start, kept or replaced on reload, its
 * queue flushed at the stop within a bounded wait.
 */
#include "app.h"

#include <ev.h>

#include "log.h"
#include "trace.h"

/* The longest the stop waits for the last spans to leave (seconds). */
#define FLUSH_WAIT_MAX 3.0

/* A tracer for T, in use from now on; NULL when T is off or unusable. */
static struct tracer *tracer_for(const struct cfg_telemetry *t)
{
	char why[200];
	if (!t->set)
		return NULL;
	struct tracer *tr = tracer_new(t, why, sizeof why);
	if (!tr)
		log_error("%s: traces are off", why);
	return tr;
}

void app_telemetry_start(struct app *a)
{
	a->tracer = tracer_for(&a->cfg->telemetry);
	trace_use(a->tracer);
	if (a->tracer)
		log_info("telemetry: traces go to %s (sampling %g)", a->cfg->telemetry.endpoint,
			 a->cfg->telemetry.sampling);
}

void app_telemetry_reload(struct app *a, const struct cfg *n)
{
	if (cfg_telemetry_equal(&n->telemetry, &a->cfg->telemetry))
		return;
	tracer_free(a->tracer);   /* what it still held is dropped: a new endpoint */
	a->tracer = tracer_for(&n->telemetry);
	trace_use(a->tracer);
	log_info("reload: traces %s", a->tracer ? "go to the new endpoint" : "are off");
}

void app_telemetry_stop(struct app *a)
{
	if (!a->tracer)
		return;
	double wait = a->cfg->telemetry.export_timeout;
	ev_prepare_stop(EV_DEFAULT, &a->step);   /* it breaks the loop at once: the flush runs it */
	tracer_flush(a->tracer, wait > 0 && wait < FLUSH_WAIT_MAX ? wait : FLUSH_WAIT_MAX);
}

void app_telemetry_free(struct app *a)
{
	tracer_free(a->tracer);
	a->tracer = NULL;
}
