/*
 * Object storage: one interface over two drivers (STORAGE_DRIVER).
 *
 *   local  objects are files under STORAGE_DIR/<key>. Presigned URLs point at coachd itself
 *          (PUBLIC_URL/api/files/local?...), HMAC-SHA256-signed with a server secret, expiring,
 *          bound to the key, the method, the Content-Type and (PUT) the size or (GET) the
 *          download filename. Every file operation runs on libuv's thread pool.
 *   s3     AWS SigV4: presigned query-string URLs for the client's PUT and GET; HEAD, GET,
 *          PUT and DELETE of the server itself are header-signed requests over libcurl multi.
 *          Path-style or virtual-hosted (S3_FORCE_PATH_STYLE), any S3_ENDPOINT.
 *
 * Keys are "<prefix>/<uuid>/<sanitized filename>" (storage_key_make), so they never hold "..",
 * control characters or a leading '/'.
 *
 * Asynchronous calls take a callback that fires exactly once, from the loop, never from inside
 * the call. They are not bound to a request: a route that waits for one holds a reference on
 * its request and checks http_req_gone() in the callback.
 *
 * The secret (local URL signatures, storage references) is STORAGE_SECRET when set, else a random
 * secret kept in the database (server_secrets, created by migration 0009) and loaded at start, so
 * every worker and host signs alike and URLs survive restarts.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/arena.h"
#include "core/http.h"

#define STORAGE_URL_TTL 900 /* presigned upload and download URLs live 15 minutes */

enum storage_err {
    STORAGE_EIO = -1,     /* storage failed or is unreachable */
    STORAGE_ENOENT = -2,  /* no such object */
    STORAGE_ECONFIG = -3, /* storage is not configured (or the secret is not loaded yet) */
    STORAGE_EEXIST = -4,  /* local writer: the key already holds an object (never replaced) */
};

/* Reads the driver settings, loads the local secret and sweeps orphaned temporary files. 0 or a
 * negative uv error. Objects presigned but never registered are rt/janitor.c's: it forgets
 * their keys after 24 h and queues their deletion in the outbox, whose storage_delete rows
 * call storage_delete (so storage depends on neither). */
int storage_init(uv_loop_t *loop);
void storage_shutdown(void);
/* True when presigning works (s3 fully configured, or local with its secret loaded). */
bool storage_ready(void);
/* The message of a 503 while storage is not ready, naming what to set: the S3_ variables that
 * are missing (s3), or STORAGE_SECRET (local, while the database's secret is not loaded). */
const char *storage_unconfigured_message(void);
/* False while the local driver's database secret has not been loaded yet (a worker waits for
 * it before it serves, main.c); s3 loads nothing. */
bool storage_loaded(void);
bool storage_is_local(void);

/* Presigned GET URL for `key`, valid ttl_seconds, served with Content-Disposition attachment
 * (filename) and the content type; allocated in `a`. NULL when storage is not configured. */
char *storage_presign_get(arena_t *a, const char *key, const char *filename, const char *mime_type,
                          int ttl_seconds);
/* Presigned PUT URL: the upload must carry Content-Type mime_type and exactly size bytes, and
 * on s3 also If-None-Match: * (S3 then refuses to overwrite the object). NULL when storage is
 * not configured. */
char *storage_presign_put(arena_t *a, const char *key, const char *mime_type, uint64_t size,
                          int ttl_seconds);

/* "<prefix>/<uuid>/<filename reduced to [A-Za-z0-9._-], at most 100 bytes>" in `a`. */
char *storage_key_make(arena_t *a, const char *prefix, const char *uuid, const char *filename);
/* True for keys storage_key_make can produce (checked again before any file path is built). */
bool storage_key_valid(const char *key);
/* Content-Disposition value: attachment; filename="ascii"; filename*=UTF-8''pct (RFC 6266). */
char *storage_content_disposition(arena_t *a, const char *filename);

/* A reference to a stored image kept in users.avatar_url / organizations.logo_url:
 * "storage:<mime>:<key>:<tag>", the tag an HMAC with the server secret, so that no text a client
 * chose (a name, organization settings) can pass for one. NULL while the secret is not loaded. */
char *storage_ref_make(arena_t *a, const char *mime, const char *key);
/* A fresh presigned GET URL (ttl_seconds) for reference text s[0..n); NULL when s is not a
 * valid reference. */
char *storage_ref_render(arena_t *a, const char *s, size_t n, int ttl_seconds);

/* A local-driver URL, checked (local driver only). */
typedef struct storage_grant {
    const char *key;
    const char *mime_type;
    const char *filename; /* GET */
    uint64_t size;        /* PUT */
} storage_grant_t;
/* Checks the query of a /api/files/local request for `method` (HTTP_M_GET or HTTP_M_PUT):
 * signature, expiry and key. 0 and *g filled, or -1 (the route answers 403). */
int storage_local_verify(http_req_t *req, int method, storage_grant_t *g);
/* STORAGE_DIR/<key> in `a` (local driver). */
char *storage_local_path(arena_t *a, const char *key);

typedef void (*storage_done_cb)(int rc, void *data);
typedef void (*storage_stat_cb)(int rc, uint64_t size, void *data);
typedef void (*storage_hash_cb)(int rc, uint64_t size, const char *sha256_hex, void *data);

/* Size of an object (local stat / S3 HEAD). rc 0, STORAGE_ENOENT or STORAGE_EIO. */
void storage_stat(const char *key, storage_stat_cb cb, void *data);
/* SHA-256 (lower-case hex) and size of the stored bytes: local on the thread pool, S3 through
 * a streamed GET. */
void storage_hash(const char *key, storage_hash_cb cb, void *data);
/* Deletes an object; a missing object counts as deleted (rc 0). cb may be NULL. */
void storage_delete(const char *key, storage_done_cb cb, void *data);
/* Health probe: local writes and removes a probe file under STORAGE_DIR; s3 HEADs the bucket. */
void storage_check(storage_done_cb cb, void *data);

/*
 * Streaming writer: bytes arrive in any pieces, are written to a temporary file under
 * STORAGE_DIR/.tmp and hashed (SHA-256) on the thread pool as they come, with at most two
 * buffers of STORAGE_WRITER_CHUNK held in memory, so memory stays bounded whatever the size.
 * finish moves the file into place (local: a rename that never replaces an existing object,
 * STORAGE_EEXIST then; s3: PUT of the file, then the temporary file is removed). abort removes
 * everything written so far.
 *
 * Temporary files are named "<host>-<pid>-<random>.part", so the sweep (at start-up and with
 * every storage janitor run, storage_sweep_tmp) removes those of workers of this host that are
 * no longer running (a crash), and any older than STORAGE_TMP_MAX_AGE (another host's crash on
 * a shared folder).
 */
#define STORAGE_TMP_MAX_AGE (6 * 3600)
#define STORAGE_WRITER_CHUNK (256 * 1024)
typedef struct storage_writer storage_writer_t;
/* Starts a sweep of STORAGE_DIR/.tmp on the thread pool, unless one is running (or storage is
 * not started). */
void storage_sweep_tmp(void);
/* on_drain(data) fires when a writer that asked the caller to pause can take more. */
storage_writer_t *storage_writer_new(void (*on_drain)(void *data), void *data);
/* Copies len bytes in. Returns true when the caller should pause its source until on_drain
 * (bytes given while paused are still taken). */
bool storage_writer_write(storage_writer_t *w, const void *buf, size_t len);
uint64_t storage_writer_size(const storage_writer_t *w);
/* Flushes, closes and stores the bytes under `key` with Content-Type mime_type; cb fires once
 * with the size and hash, after which the writer is freed. */
void storage_writer_finish(storage_writer_t *w, const char *key, const char *mime_type,
                           storage_hash_cb cb, void *data);
/* Discards the writer: the temporary file is removed once no job is running, and no callback
 * fires any more. */
void storage_writer_abort(storage_writer_t *w);
