/*
 * Request metrics of this worker process: counts by method, route pattern and status, and a
 * latency histogram by method and route pattern. Route patterns (not paths) are the labels, so
 * the number of series is bounded by the route table. Rendered in the Prometheus text format by
 * routes/metrics.c.
 */
#pragma once
#include "core/buf.h"

/* Workers the supervisor (main.c) had replaced, because one died, before this worker was forked:
 * the supervisor counts in this variable and the fork hands each new worker its value. Rendered
 * as coachd_worker_restarts_total, so a scrape shows that a worker crashed even though the port
 * never went away. */
extern unsigned long metrics_worker_restarts;

/* Called once per request when its status is known; pattern NULL for unmatched paths. */
void metrics_observe(const char *method, const char *pattern, int status, double seconds);
/* Appends the request series (with # HELP / # TYPE) to b. */
void metrics_render_requests(buf_t *b);
/* Appends s with the escapes of a Prometheus label value. */
void metrics_label(buf_t *b, const char *s);
