/*
 * libcurl multi on the libuv loop: curl's socket callback maps to uv_poll_t and its timer to a
 * uv_timer_t (a zero timeout is deferred, never re-entering the multi handle). Jobs are bound to
 * a callback, never to a request.
 */
#pragma once
#include <curl/curl.h>
#include <uv.h>

typedef void (*curlm_done_cb)(CURL *easy, CURLcode code, long http_status, void *data);

int curlm_init(uv_loop_t *loop);
void curlm_shutdown(void);
/* Adds a configured easy handle. done fires once, after which the caller cleans up the handle. */
void curlm_add(CURL *easy, curlm_done_cb done, void *data);
/* Completes a job without running it: done(easy, code, 0, data) fires once, from the loop (for
 * callers that find a request invalid but must not call back from inside their own call). */
void curlm_fail(CURL *easy, CURLcode code, curlm_done_cb done, void *data);
