/*
 * The local storage driver's presigned URLs, served by coachd itself:
 *
 *   PUT /api/files/local?...   the upload a presign granted: exactly the signed size and
 *                              Content-Type, streamed into a storage writer
 *   GET /api/files/local?...   the download: the file streamed from disk
 *
 * Both stream, so both have one owner of their teardown (core/http.h): on_gone runs once
 * whatever ends the request early (the client leaving at any byte, a malformed chunk, a
 * deadline), and everything that outlives a callback holds its own reference on the request.
 *
 * A stored key's content never changes (docs/api.md "Files"): a PUT to a key that already holds
 * an object is refused with 403, also when two connections race on one URL (the writer's final
 * rename refuses to replace, rt/storage.c).
 *
 * Also here: files_body_*, the storage writer behind a streamed request body, shared with the
 * multipart upload (files_upload.c).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/router.h"
#include "routes/common.h"
#include "routes/files.h"
#include "routes/routes.h"
#include "rt/storage.h"

#define MIB (1024ULL * 1024ULL)
#define LOCAL_PUT_LIMIT (512 * MIB)
/* A download reads the next piece once the socket holds at most DOWNLOAD_LOW_WATER unflushed
 * bytes, so a client holds at most that plus one piece (STORAGE_WRITER_CHUNK) of this worker's
 * memory; one that stops reading is closed by the stream write deadline (core/http.h). */
#define DOWNLOAD_LOW_WATER (512 * 1024)

/* ---- the storage writer behind a streamed body ---- */

static void body_on_drain(void *data)
{
    http_req_t *req = data;
    /* Parsing what is buffered may end the request (on_gone): the last thing done here. */
    if (!http_req_gone(req)) http_req_resume_body(req);
}

void files_body_open(files_body_t *b, http_req_t *req)
{
    b->req = req;
    http_req_ref(req); /* the writer's drain callback names req */
    b->w = storage_writer_new(body_on_drain, req);
}

void files_body_write(files_body_t *b, const char *data, size_t len)
{
    if (b->w && storage_writer_write(b->w, data, len)) http_req_pause_body(b->req);
}

void files_body_abort(files_body_t *b)
{
    if (!b->w) return;
    storage_writer_abort(b->w); /* no callback fires after this */
    b->w = NULL;
    http_req_unref(b->req);
}

void files_body_finish(files_body_t *b, const char *key, const char *mime, storage_hash_cb cb)
{
    storage_writer_t *w = b->w;
    b->w = NULL;
    /* The writer's reference passes to cb, which drops it (after its last use of the request). */
    storage_writer_finish(w, key, mime, cb, b->req);
}

/* ---- PUT ---- */

typedef struct lput_state {
    storage_grant_t g;
    files_body_t body;
    uint64_t got;
} lput_state_t;

static void lput_on_gone(http_req_t *req)
{
    lput_state_t *st = req->data;
    files_body_abort(&st->body);
}

static int lput_on_chunk(http_req_t *req, const char *data, size_t len)
{
    lput_state_t *st = req->data;
    st->got += len; /* at most the body limit: core/http counts a streamed body */
    if (st->got > st->g.size) {
        files_body_abort(&st->body);
        http_reply_error(req, 403, "FORBIDDEN", "The body is larger than the signed size");
        return -1;
    }
    files_body_write(&st->body, data, len);
    return 0;
}

static void lput_on_stored(int rc, uint64_t size, const char *hex, void *data)
{
    http_req_t *req = data;
    (void)size;
    (void)hex;
    if (!http_req_gone(req)) {
        if (rc == STORAGE_EEXIST)
            http_reply_error(req, 403, "FORBIDDEN",
                             "An object is already stored under this key; it cannot be replaced");
        else if (rc != 0)
            http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        else
            http_reply_empty(req, 200);
    }
    http_req_unref(req);
}

static void lput_on_end(http_req_t *req)
{
    lput_state_t *st = req->data;
    if (st->got != st->g.size) {
        files_body_abort(&st->body);
        http_reply_error(req, 403, "FORBIDDEN", "The body is smaller than the signed size");
        return;
    }
    /* Finishing: lput_on_stored owns what is left, whatever happens to the client. */
    req->on_gone = NULL;
    files_body_finish(&st->body, st->g.key, st->g.mime_type, lput_on_stored);
}

static void local_put(http_req_t *req)
{
    lput_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (storage_local_verify(req, HTTP_M_PUT, &st->g) != 0) {
        http_reply_error(req, 403, "FORBIDDEN", "The upload URL is invalid or has expired");
        return;
    }
    const char *ct = http_req_header(req, "Content-Type");
    if (!ct || strcasecmp(ct, st->g.mime_type) != 0) {
        http_reply_error(req, 403, "FORBIDDEN", "Content-Type differs from the signed one");
        return;
    }
    if (!req->has_content_length || req->content_length != st->g.size) {
        http_reply_error(req, 403, "FORBIDDEN", "Content-Length differs from the signed size");
        return;
    }
    req->data = st;
    files_body_open(&st->body, req);
    req->on_gone = lput_on_gone;
    if (st->g.size == 0) {
        lput_on_end(req);
        return;
    }
    http_req_read_body(req, lput_on_chunk, lput_on_end);
}

/* ---- GET ---- */

typedef struct lget_state {
    uv_fs_t fs;
    storage_grant_t g;
    http_req_t *req; /* one reference, dropped in lget_free */
    uv_file fd;
    char *buf;
    int64_t off, size;
    bool busy;  /* a uv_fs request is in flight on fs: its callback finishes the teardown */
    bool ended; /* nothing more is sent */
} lget_state_t;

static void lget_free(lget_state_t *st)
{
    http_req_unref(st->req);
    free(st->buf);
    free(st);
}

static void lget_on_closed(uv_fs_t *fs)
{
    lget_state_t *st = container_of(fs, lget_state_t, fs);
    uv_fs_req_cleanup(fs);
    lget_free(st);
}

/* Ends the download once no file operation is in flight: the file is closed on the pool, then
 * the state goes. */
static void lget_finish(lget_state_t *st)
{
    st->ended = true;
    if (st->busy) return; /* the callback in flight comes back here */
    if (st->fd >= 0) {
        uv_file fd = st->fd;
        st->fd = -1;
        st->busy = true;
        if (uv_fs_close(http_loop(), &st->fs, fd, lget_on_closed) == 0) return;
        st->busy = false;
    }
    lget_free(st);
}

/* The download is over (done, failed or refused): the stream, if open, closes now. */
static void lget_end(lget_state_t *st)
{
    http_req_t *req = st->req;
    req->on_gone = NULL; /* ending here: on_gone must not run too */
    if (!st->ended && !http_req_gone(req) && req->streaming) http_stream_close(req);
    lget_finish(st);
}

/* The client went away, or a deadline closed the stream (from the loop). */
static void lget_on_gone(http_req_t *req)
{
    lget_finish(req->data);
}

static void lget_pump(lget_state_t *st);

static void lget_on_drain(http_req_t *req)
{
    lget_pump(req->data);
}

/* The last piece is queued: close once the client has all of it (closing drops what the socket
 * has not taken yet). */
static void lget_on_flushed(http_req_t *req)
{
    lget_end(req->data);
}

static void lget_on_read(uv_fs_t *fs)
{
    lget_state_t *st = container_of(fs, lget_state_t, fs);
    ssize_t n = fs->result;
    uv_fs_req_cleanup(fs);
    st->busy = false;
    if (st->ended || http_req_gone(st->req) || n <= 0) {
        if (n < 0 && !st->ended) log_warn("files: download read failed: %s", uv_strerror((int)n));
        lget_end(st);
        return;
    }
    sbuf_t *b = sbuf_new(st->buf, (size_t)n);
    int rc = http_stream_write(st->req, b, SIZE_MAX);
    sbuf_unref(b);
    st->off += n;
    if (rc != 0) {
        lget_end(st);
        return;
    }
    if (st->off >= st->size) {
        http_stream_on_drain(st->req, 0, lget_on_flushed);
        return;
    }
    lget_pump(st);
}

/* Reads the next piece, or waits until the socket has taken most of what is queued. */
static void lget_pump(lget_state_t *st)
{
    if (st->ended || http_req_gone(st->req)) {
        lget_end(st);
        return;
    }
    if (http_stream_pending(st->req) > DOWNLOAD_LOW_WATER) {
        http_stream_on_drain(st->req, DOWNLOAD_LOW_WATER, lget_on_drain);
        return;
    }
    uv_buf_t b = uv_buf_init(st->buf, STORAGE_WRITER_CHUNK);
    st->busy = true;
    if (uv_fs_read(http_loop(), &st->fs, st->fd, &b, 1, st->off, lget_on_read) != 0) {
        st->busy = false;
        lget_end(st);
    }
}

static void lget_on_stat(uv_fs_t *fs)
{
    lget_state_t *st = container_of(fs, lget_state_t, fs);
    int rc = (int)fs->result;
    st->size = (int64_t)fs->statbuf.st_size;
    uv_fs_req_cleanup(fs);
    st->busy = false;
    http_req_t *req = st->req;
    if (st->ended || http_req_gone(req)) {
        lget_end(st);
        return;
    }
    if (rc != 0) {
        http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        lget_end(st);
        return;
    }
    http_res_header(req, "Content-Disposition",
                    storage_content_disposition(&req->arena, st->g.filename));
    http_res_header(req, "Cache-Control", "private, max-age=900");
    if (req->head_only) {
        /* The GET's head, its length included: a HEAD tells the size without the bytes. */
        http_reply_head(req, 200, st->g.mime_type, st->size > 0 ? (uint64_t)st->size : 0);
        lget_end(st);
        return;
    }
    if (st->size == 0) {
        http_reply(req, 200, st->g.mime_type, "", 0);
        lget_end(st);
        return;
    }
    /* The stream head has no length of its own; the file's size is known. */
    http_res_header(req, "Content-Length", arena_printf(&req->arena, "%lld", (long long)st->size));
    http_stream_open(req, 200, st->g.mime_type);
    lget_pump(st);
}

static void lget_on_open(uv_fs_t *fs)
{
    lget_state_t *st = container_of(fs, lget_state_t, fs);
    int fd = (int)fs->result;
    uv_fs_req_cleanup(fs);
    st->busy = false;
    http_req_t *req = st->req;
    if (fd >= 0) st->fd = fd;
    if (st->ended || http_req_gone(req)) {
        lget_end(st);
        return;
    }
    if (fd < 0) {
        if (fd == UV_ENOENT)
            http_reply_error(req, 404, "NOT_FOUND", "File not found");
        else
            http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        lget_end(st);
        return;
    }
    st->busy = true;
    if (uv_fs_fstat(http_loop(), &st->fs, fd, lget_on_stat) != 0) {
        st->busy = false;
        http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        lget_end(st);
    }
}

static void local_get(http_req_t *req)
{
    storage_grant_t g;
    if (storage_local_verify(req, HTTP_M_GET, &g) != 0) {
        http_reply_error(req, 403, "FORBIDDEN", "The download URL is invalid or has expired");
        return;
    }
    lget_state_t *st = xcalloc(1, sizeof(*st));
    st->g = g; /* its strings live in the request's arena, which st's reference keeps */
    st->req = req;
    st->fd = -1;
    st->buf = xmalloc(STORAGE_WRITER_CHUNK);
    http_req_ref(req);
    req->data = st;
    req->on_gone = lget_on_gone;
    st->busy = true;
    if (uv_fs_open(http_loop(), &st->fs, storage_local_path(&req->arena, g.key),
                   O_RDONLY | O_CLOEXEC, 0, lget_on_open) != 0) {
        st->busy = false;
        http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        lget_end(st);
    }
}

static const route_t local_routes[] = {
    {HTTP_M_PUT, "/api/files/local", local_put, AUTH_PUBLIC, ROLE_NONE, ROUTE_STREAM_BODY,
     LOCAL_PUT_LIMIT},
    {HTTP_M_GET, "/api/files/local", local_get, AUTH_PUBLIC, ROLE_NONE, 0, 0},
};

void routes_files_local_register(void)
{
    router_add(local_routes, sizeof(local_routes) / sizeof(local_routes[0]));
}
