/*
 * HTTP/1.1 server on the libuv loop (llhttp parser).
 *
 * Ownership: a connection owns at most one live request at a time (pipelined requests wait in
 * the read buffer and are answered in order). A request is refcounted: the connection holds one
 * reference until the response is written; every async operation started for the request
 * (query, thread-pool job, curl job) takes one more with http_req_ref() and drops it with
 * http_req_unref() when it completes. When the client goes away first, req->conn becomes NULL
 * (http_req_gone() is true) and replies become no-ops, so a late completion finds the request
 * cancelled, never freed. The arena and everything in it are freed when the last reference
 * drops.
 *
 * Disconnects and failed writes: on_gone runs only from the loop (a read error or EOF, a failed
 * write completing, a timeout, shutdown), never inside a call the request's owner makes, with
 * one exception below. A write that fails synchronously inside http_reply* or http_stream_write
 * only marks the connection broken; it is closed (and on_gone runs) on the next turn of the
 * loop. So during any http_* call the request, its conn and the owner's state stay valid, and
 * the owner learns of the failure from the return value (http_stream_write: -1) or from
 * http_req_gone() later. on_gone does not run for a request that its owner answered and that is
 * not streaming.
 *
 * One owner of the teardown: on_gone is the owner's abort path, and it runs exactly once for
 * every request that ends without the owner's own answer: the client left (FIN or RST at any
 * byte), a deadline passed (408, or a stream's write deadline), the parser refused the rest of a
 * streamed body (400 malformed chunk, 413 over the limit), or shutdown. When core/http answers
 * such a request itself, on_gone runs first. Because a streamed body is parsed inside
 * http_req_read_body and http_req_resume_body, on_gone may run inside those two calls: make them
 * the last thing a callback does. Whatever holds the request after that (a storage writer, a
 * file read, a database or Redis callback) holds its own reference and checks http_req_gone().
 *
 * Streams: the owner of a stream (rt/streams.c) holds its own reference on the request. Its
 * state is freed by exactly one of two paths, whichever comes first: on_gone (from the loop), or
 * the owner closing it (http_stream_close clears on_gone first, then the owner drops its
 * reference). Each path clears req->data / on_gone so the other cannot run.
 *
 * Handlers reply exactly once with one of the http_reply* calls, or open a stream.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/sbuf.h"

typedef struct http_conn http_conn_t;
typedef struct http_req http_req_t;
typedef struct route route_t;
struct caller;

/* Methods use llhttp's numbering (llhttp_method_t). */
enum {
    HTTP_M_DELETE = 0,
    HTTP_M_GET = 1,
    HTTP_M_HEAD = 2,
    HTTP_M_POST = 3,
    HTTP_M_PUT = 4,
    HTTP_M_OPTIONS = 6,
    HTTP_M_PATCH = 28,
};

#define HTTP_MAX_PARAMS 8
#define HTTP_HEAD_LIMIT (16 * 1024)
#define HTTP_JSON_LIMIT (1024 * 1024)

typedef struct http_header {
    const char *name;
    const char *value;
} http_header_t;

typedef void (*http_req_cb)(http_req_t *req);
/* Longest incoming X-Request-Id kept (longer or unsafe ones are replaced by our own id). */
#define HTTP_REQUEST_ID_MAX 64
/* The signed-in user of a request, for the access log (NULL when none); set by routes/. */
typedef const char *(*http_user_fn)(http_req_t *req);
void http_set_log_user(http_user_fn fn);
/* Streamed request body: return 0 to go on, -1 to stop (the handler then replies). */
typedef int (*http_body_chunk_cb)(http_req_t *req, const char *data, size_t len);

struct http_req {
    arena_t arena;
    http_conn_t *conn;                /* NULL once the client is gone */
    char id[HTTP_REQUEST_ID_MAX + 1]; /* request id: the caller's valid X-Request-Id, else
                                         our own hex; echoed as X-Request-Id */
    int method;
    const char *method_name;
    const char *path;  /* percent-decoded path, no query */
    const char *query; /* raw query string after '?', or NULL */
    http_header_t *headers;
    int nheaders;
    char *body; /* buffered body, NUL-terminated; NULL when absent or streamed */
    size_t body_len;
    const route_t *route;
    const char *params[HTTP_MAX_PARAMS]; /* route :params, percent-decoded, in pattern order */
    int nparams;
    struct caller *caller; /* set by the auth guard (routes/context.h) */
    void *data;            /* handler state */
    char client_ip[48];
    uint64_t start_ns;
    int status; /* response status, once replied */
    bool replied;
    bool streaming;
    /* Set by a handler whose JSON body is known to hold nothing the body filter rewrites (a
     * cached page checked once when stored): the reply skips the filter's scan of it. */
    bool body_plain;
    /* Set by a handler whose JSON body is known to be compact (a cached page, compacted when
     * stored): the reply skips the scan for white space outside strings. */
    bool body_compact;
    /* Called once when the client disconnects while the request is pending or streaming. */
    http_req_cb on_gone;

    /* private to core/http */
    int refs;
    bool head_only;
    bool keep_alive;
    bool want_continue;
    uint64_t content_length;
    bool has_content_length;
    bool body_streamed;
    bool body_done;
    size_t body_cap;
    http_body_chunk_cb on_body_chunk;
    http_req_cb on_body_end;
    http_req_cb on_drain; /* http_stream_on_drain */
    size_t drain_low;
    http_header_t *res_headers;
    int n_res_headers, cap_res_headers;
    buf_t *res_owned; /* heap body handed over by http_reply_buf */
    const char *cur_header_name;
    size_t cur_header_name_len;
    buf_t hbuf; /* header name/value/url accumulation */
    char *url_raw;
    bool release_head;     /* http_stream_release_head asked; done on the next loop iteration */
    char *kept;            /* after the release: path, then the log user, in one allocation */
    const char *kept_user; /* after the release: the user the access log names, or NULL */
    struct http_req *next_free;
};

/* Starts listening (SO_REUSEPORT, so WORKERS processes share the port). 0 or negative uv error. */
int http_server_start(uv_loop_t *loop, const char *host, int port);
/* The two halves of http_server_start: a bound, listening SO_REUSEPORT socket (blocking-free,
 * close-on-exec), and serving on one. The supervisor (main.c) makes the sockets and keeps them
 * open across worker restarts, so the port never goes away while a worker is replaced:
 * connections wait in the backlog for the new worker. */
int http_listen_socket(const char *host, int port, int *fd_out);
int http_server_start_fd(uv_loop_t *loop, int fd);
/* The same socket without SO_REUSEPORT, for one socket every worker shares: a second process
 * (another coachd on the same port by mistake) cannot bind it too and take half its
 * connections. */
int http_listen_socket_exclusive(const char *host, int port, int *fd_out);
/* Serves a second listening socket (after http_server_start_fd) on which only the route with
 * this pattern exists: every other path, OPTIONS included, answers 404. The supervisor's
 * METRICS_PORT socket: /metrics without the token, nothing else. */
int http_server_listen_only(uv_loop_t *loop, int fd, const char *pattern);
/* True when the request came in on that listener. */
bool http_req_side_listener(const http_req_t *req);
/* Graceful stop: stop accepting, let in-flight requests finish (streams whose head declares a
 * Content-Length, file downloads, included), end the other streams (event streams) at once,
 * and those that open during the drain as they open; calls done when every connection is
 * closed. */
void http_server_shutdown(void (*done)(void));
/* The end of the shutdown grace: every connection still open is closed at once, each request
 * still running getting its on_gone (a streamed upload removes its temporary file), and the
 * shutdown's done follows as the handles close. Returns the number of requests cut. */
size_t http_server_abort_all(void);
/* Number of open connections (for stats). */
size_t http_server_conn_count(void);
/* Client addresses holding a count of MAX_CONNECTIONS_PER_IP (a connection, or a request a
 * trusted proxy forwarded); 0 once every connection is closed. */
size_t http_server_ip_entries(void);

void http_req_ref(http_req_t *req);
void http_req_unref(http_req_t *req);
static inline bool http_req_gone(const http_req_t *req)
{
    return req->conn == NULL;
}

/* Case-insensitive header lookup; NULL when absent. */
const char *http_req_header(const http_req_t *req, const char *name);
/* Percent-decoded query parameter (arena); NULL when absent. present is set when the key
 * appears at all. */
const char *http_req_query(http_req_t *req, const char *name);
/* Cookie value (arena); NULL when absent. */
const char *http_req_cookie(http_req_t *req, const char *name);
/* Route parameter by position. */
static inline const char *http_req_param(const http_req_t *req, int i)
{
    return i < req->nparams ? req->params[i] : NULL;
}

/* Adds a response header; name and value are copied into the arena. A Cache-Control set here
 * replaces the default "Cache-Control: no-store" of every non-streamed answer. */
void http_res_header(http_req_t *req, const char *name, const char *value);

/* Replies. body must stay valid until the request is freed (arena, static or owned), except for
 * http_reply, which writes what the socket takes and copies the rest before it returns: its
 * caller may free a large body right after (routes/calendar.c does). */
void http_reply(http_req_t *req, int status, const char *content_type, const char *body,
                size_t len);
/* Takes ownership of a heap buffer (freed after the write). */
void http_reply_buf(http_req_t *req, int status, const char *content_type, buf_t *body);
/* JSON body, copied into the arena. */
void http_reply_json(http_req_t *req, int status, const char *json);
void http_reply_jsonn(http_req_t *req, int status, const char *json, size_t len);
void http_reply_empty(http_req_t *req, int status);
/* For a HEAD request: the head the GET would send with a body of `length` bytes that the handler
 * does not hold (a file it would stream), Content-Length included (RFC 9110 8.6). */
void http_reply_head(http_req_t *req, int status, const char *ctype, uint64_t length);
/* A byte count in binary units, exactly: the largest of GiB, MiB, KiB that divides it ("500 MiB",
 * "64 KiB"), else "N bytes". Limits in 413 messages are written this way. */
#define HTTP_SIZE_TEXT_MAX 32
void http_size_text(uint64_t bytes, char *out, size_t cap);

/* The error shape of docs/api.md: {"error":{"code","message"}}. */
void http_reply_error(http_req_t *req, int status, const char *code, const char *message);
/* details_json: a JSON array text for "details" (validation failures), or NULL. */
void http_reply_error_details(http_req_t *req, int status, const char *code, const char *message,
                              const char *details_json);
/* 429 with Retry-After and top-level retryAfterSeconds. */
void http_reply_rate_limited(http_req_t *req, const char *code, const char *message,
                             int retry_after);
void http_reply_redirect(http_req_t *req, int status, const char *location);

/* Optional rewrite of JSON response bodies, set once at start: returns the body to send (body
 * itself when unchanged, else text in req's arena) and its length in *out_len. The files area
 * uses it to render stored avatar and logo references as fresh presigned URLs. */
typedef const char *(*http_body_filter_fn)(http_req_t *req, const char *body, size_t len,
                                           size_t *out_len);
void http_set_body_filter(http_body_filter_fn fn);

/* Streamed request body (routes flagged ROUTE_STREAM_BODY): the handler runs once the head is
 * parsed and the guard passed; it calls this to start receiving chunks. on_end runs after the
 * last chunk; the handler replies from there (or earlier on error). */
void http_req_read_body(http_req_t *req, http_body_chunk_cb on_chunk, http_req_cb on_end);
/* Backpressure for streamed bodies: stop and restart reading from the socket. */
void http_req_pause_body(http_req_t *req);
void http_req_resume_body(http_req_t *req);

/* Streamed response (SSE): writes the head without Content-Length; the connection closes when
 * the stream ends. Extra headers come from http_res_header() before the call; one of them a
 * Content-Length (a file download) makes the stream a request that a shutdown lets finish. */
void http_stream_open(http_req_t *req, int status, const char *content_type);
/* Queues a shared buffer (takes a reference). Returns -1 when the request is gone, the write
 * failed or its queue is over max_pending bytes: the caller should then close the stream with
 * http_stream_close. Never frees anything and never runs on_gone (see the top of this file). */
int http_stream_write(http_req_t *req, sbuf_t *b, size_t max_pending);
/* Fixes the socket's kernel send buffer of an open stream at `bytes` (Linux doubles it) and so
 * turns off its autotuning: what a client that does not read can make the kernel hold. */
void http_stream_sndbuf(http_req_t *req, int bytes);
/* The stream's owner is done with the request's head: once the callbacks running now have
 * returned (next loop iteration), the request's arena is freed, with the headers, query, route
 * params, caller and everything else allocated on it, and what reads them finds nothing. The
 * path and the user the access log names are kept. A long-lived stream otherwise holds its
 * arena (2 KiB at least) for hours. Nothing on the arena may be used after this call returns to
 * the loop. */
void http_stream_release_head(http_req_t *req);
/* Bytes written to the stream but not yet flushed to the socket. */
size_t http_stream_pending(const http_req_t *req);
/* Calls cb(req) once, from the loop, when the stream's unflushed bytes have fallen to low_water
 * or below: after a write completes, or on the next loop turn when they already have. One-shot:
 * set it again to wait again; cb NULL cancels. Never runs once the stream is closed or its
 * client gone (on_gone runs instead). Producers that can outrun the client (a file download, a
 * history replay) wait on it instead of polling.
 *
 * Write deadline: a stream whose unflushed bytes make no progress for STREAM_WRITE_TIMEOUT_SECONDS
 * (60) is closed from the loop and its on_gone runs, so a client that reads nothing holds
 * nothing for long. */
void http_stream_on_drain(http_req_t *req, size_t low_water, http_req_cb cb);
/* Ends the stream and closes the connection. on_gone is not called. Bytes still queued in the
 * server (http_stream_pending) are dropped: an owner that must deliver them all (a download)
 * waits for http_stream_on_drain(req, 0, ...) first. */
void http_stream_close(http_req_t *req);

/* Monotonic clock in ns, and the loop the server runs on. */
uint64_t http_now_ns(void);
uv_loop_t *http_loop(void);
