/*
 * Request counters and latency histograms (core/metrics.h). One worker owns its numbers: the
 * loop is single-threaded, so no locking. Series live in a small open table that grows only
 * with new (method, pattern, status) triples, of which the route table allows a few hundred.
 */
#include "core/metrics.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/mem.h"

static const double BUCKETS[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof(BUCKETS) / sizeof(BUCKETS[0]))

typedef struct series {
    const char *method;  /* static strings from the parser and the route table */
    const char *pattern; /* "unmatched" for paths no route knows */
    int status;
    uint64_t count;
} series_t;

typedef struct hist {
    const char *method, *pattern;
    uint64_t buckets[NBUCKETS]; /* cumulative at render time, per-bucket here */
    uint64_t count;
    double sum;
} hist_t;

unsigned long metrics_worker_restarts;

static series_t *series;
static size_t nseries, capseries;
static hist_t *hists;
static size_t nhists, caphists;

static bool same(const char *a, const char *b)
{
    return a == b || strcmp(a, b) == 0;
}

void metrics_observe(const char *method, const char *pattern, int status, double seconds)
{
    if (!method) method = "-";
    if (!pattern) pattern = "unmatched";
    series_t *s = NULL;
    for (size_t i = 0; i < nseries; i++) {
        if (series[i].status == status && same(series[i].pattern, pattern) &&
            same(series[i].method, method)) {
            s = &series[i];
            break;
        }
    }
    if (!s) {
        if (nseries == capseries) {
            capseries = capseries ? capseries * 2 : 64;
            series = xrealloc(series, capseries * sizeof(*series));
        }
        s = &series[nseries++];
        *s = (series_t){method, pattern, status, 0};
    }
    s->count++;

    hist_t *h = NULL;
    for (size_t i = 0; i < nhists; i++) {
        if (same(hists[i].pattern, pattern) && same(hists[i].method, method)) {
            h = &hists[i];
            break;
        }
    }
    if (!h) {
        if (nhists == caphists) {
            caphists = caphists ? caphists * 2 : 64;
            hists = xrealloc(hists, caphists * sizeof(*hists));
        }
        h = &hists[nhists++];
        memset(h, 0, sizeof(*h));
        h->method = method;
        h->pattern = pattern;
    }
    for (size_t i = 0; i < NBUCKETS; i++) {
        if (seconds <= BUCKETS[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum += seconds;
}

void metrics_label(buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            buf_puts(b, "\\\\");
        else if (*s == '"')
            buf_puts(b, "\\\"");
        else if (*s == '\n')
            buf_puts(b, "\\n");
        else
            buf_putc(b, *s);
    }
}

static void labels(buf_t *b, const char *method, const char *pattern)
{
    buf_puts(b, "method=\"");
    metrics_label(b, method);
    buf_puts(b, "\",route=\"");
    metrics_label(b, pattern);
    buf_putc(b, '"');
}

void metrics_render_requests(buf_t *b)
{
    buf_puts(b, "# HELP coachd_http_requests_total HTTP requests answered, by method, route "
                "pattern and status.\n# TYPE coachd_http_requests_total counter\n");
    for (size_t i = 0; i < nseries; i++) {
        buf_puts(b, "coachd_http_requests_total{");
        labels(b, series[i].method, series[i].pattern);
        buf_printf(b, ",status=\"%d\"} %llu\n", series[i].status,
                   (unsigned long long)series[i].count);
    }
    buf_puts(b, "# HELP coachd_http_request_duration_seconds Time from the request's start to its "
                "reply (streams: to their headers).\n"
                "# TYPE coachd_http_request_duration_seconds histogram\n");
    for (size_t i = 0; i < nhists; i++) {
        hist_t *h = &hists[i];
        uint64_t cum = 0;
        for (size_t k = 0; k < NBUCKETS; k++) {
            cum += h->buckets[k];
            buf_puts(b, "coachd_http_request_duration_seconds_bucket{");
            labels(b, h->method, h->pattern);
            buf_printf(b, ",le=\"%g\"} %llu\n", BUCKETS[k], (unsigned long long)cum);
        }
        buf_puts(b, "coachd_http_request_duration_seconds_bucket{");
        labels(b, h->method, h->pattern);
        buf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
        buf_puts(b, "coachd_http_request_duration_seconds_sum{");
        labels(b, h->method, h->pattern);
        buf_printf(b, "} %.6f\n", h->sum);
        buf_puts(b, "coachd_http_request_duration_seconds_count{");
        labels(b, h->method, h->pattern);
        buf_printf(b, "} %llu\n", (unsigned long long)h->count);
    }
}
