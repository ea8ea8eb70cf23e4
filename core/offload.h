/*
 * CPU-heavy work (argon2id, large hashes, large renders) on libuv's thread pool, bound to a
 * request. work runs on a pool thread and must touch only `data`; done runs on the loop afterwards,
 * and only while the client is still there. Keep `data` in the request arena: it lives as long as
 * the request.
 */
#pragma once
#include "core/http.h"

typedef void (*offload_work_fn)(void *data);
typedef void (*offload_done_fn)(http_req_t *req, void *data);

/* Kinds of work, each with its own FIFO lane and its own bound (offload.c): a flood of one kind
 * (first-run, sign-up) fills only its lane, and lanes take turns for the pool threads, so it
 * neither gets the others 503 nor makes them wait behind it. */
typedef enum offload_kind {
    OFFLOAD_OTHER,
    OFFLOAD_SIGN_IN,
    OFFLOAD_SIGN_UP,
    OFFLOAD_PASSWORD, /* change, reset */
    OFFLOAD_ACCOUNT,  /* accounts made by staff or through an invite */
    OFFLOAD_FIRST_RUN,
    OFFLOAD_CALENDAR, /* calendar feeds rendered (routes/calendar.c) */
    OFFLOAD_KIND_COUNT,
} offload_kind_t;

/* offload_run_kind with OFFLOAD_OTHER. */
void offload_run(http_req_t *req, offload_work_fn work, offload_done_fn done, void *data);
void offload_run_kind(http_req_t *req, offload_kind_t kind, offload_work_fn work,
                      offload_done_fn done, void *data);
/* Jobs on the thread pool now and jobs waiting in the lanes (for /metrics). */
void offload_stats(int *running, int *queued);
