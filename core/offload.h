/*
 * CPU-heavy work (argon2id, large hashes) on libuv's thread pool, bound to a request. work runs
 * on a pool thread and must touch only `data`; done runs on the loop afterwards, and only while
 * the client is still there. Keep `data` in the request arena: it lives as long as the request.
 */
#pragma once
#include "core/http.h"

typedef void (*offload_work_fn)(void *data);
typedef void (*offload_done_fn)(http_req_t *req, void *data);

void offload_run(http_req_t *req, offload_work_fn work, offload_done_fn done, void *data);
