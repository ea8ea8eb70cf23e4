/*
 * Request metrics for the whole process group: counts by method, route pattern and status, and
 * a latency histogram by method and route pattern, of every worker. Route patterns (not paths)
 * are the labels, so the number of series is bounded by the route table.
 *
 * Each worker counts in its own memory (metrics_observe, on its loop) and publishes a snapshot
 * of its counts, plus a row of figures its caller chooses (routes/metrics.c: pool, streams,
 * connections ...), into its slot of a shared mapping the supervisor made before forking
 * (metrics_shm_init). Whichever worker answers a scrape reads every slot (metrics_collect) and
 * renders the sums, so a scraper's keep-alive connection, which always reaches one worker, still
 * sees them all.
 *
 * Snapshots are double-buffered, each buffer with a sequence number (a seqlock with one
 * writer): a reader never sees a torn snapshot and never waits, and a worker killed in the
 * middle of a write leaves its previous snapshot whole. Nothing is locked, so a dead worker
 * cannot block anyone.
 *
 * A replacement worker continues its slot's counts (metrics_adopt_slot): the sums never go
 * backwards when a worker dies, which Prometheus would take for a reset of the whole sum. What
 * the dead worker counted after its last publish (at most METRICS_PUBLISH_MS) is lost.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"

/* Workers the supervisor (main.c) had replaced, because one died, before this worker was forked:
 * the supervisor counts in this variable and the fork hands each new worker its value. The
 * newest worker's value is the supervisor's count (routes/metrics.c renders the largest one as
 * coachd_worker_restarts_total), so a scrape shows that a worker crashed even though the port
 * never went away. */
extern unsigned long metrics_worker_restarts;

/* Figures per worker beyond the request series (their meaning is the caller's). */
#define METRICS_MAX_VALUES 48
/* How often a worker publishes when nobody scrapes it (routes/metrics.c's timer). */
#define METRICS_PUBLISH_MS 1000
/* A slot not published for this long (a worker dead, stuck or not yet started) is not
 * reporting: its gauges are left out, its counts stay in the sums. */
#define METRICS_STALE_MS 5000
/* Worker slots at most (WORKERS' upper bound in core/config.c). */
#define METRICS_MAX_SLOTS 256

/* Supervisor, before forking: the shared mapping with one slot per worker. 0, or -1 (logged). */
int metrics_shm_init(int nslots);
/* Worker, right after the fork: takes slot `slot` and continues the counts (and the values the
 * caller reads with metrics_base_values) its previous owner last published there. Without a
 * call (tests, no supervisor), the first publish makes a private one-slot mapping. */
void metrics_adopt_slot(int slot);
/* The values the slot's previous owner last published (zeros for a first start); a caller adds
 * them to the figures it publishes that are counters. */
const double *metrics_base_values(void);

/* Called once per request when its status is known; pattern NULL for unmatched paths. */
void metrics_observe(const char *method, const char *pattern, int status, double seconds);
/* Writes this worker's counts and values[0..n) into its slot (on the loop). */
void metrics_publish(const double *values, int n);

typedef struct metrics_worker {
    int slot;
    long pid;          /* 0: the slot never published */
    bool reporting;    /* published within METRICS_STALE_MS and the process is alive */
    uint64_t requests; /* requests the slot's workers answered, one after the other */
    int nvalues;
    double values[METRICS_MAX_VALUES];
} metrics_worker_t;

typedef struct metrics_view {
    int nworkers; /* the slots, reporting or not */
    metrics_worker_t *workers;
    uint64_t overflow; /* requests no series could take (bounded tables), all workers */
    struct metrics_merged *merged;
} metrics_view_t;

/* Reads every slot and sums the request series. Touches only the shared mapping, so it may run
 * on the thread pool. Never NULL; free with metrics_view_free. */
metrics_view_t *metrics_collect(void);
void metrics_view_free(metrics_view_t *v);
/* Appends the summed request series (with # HELP / # TYPE) to b. */
void metrics_render_requests(buf_t *b, const metrics_view_t *v);
/* Appends s with the escapes of a Prometheus label value. */
void metrics_label(buf_t *b, const char *s);
