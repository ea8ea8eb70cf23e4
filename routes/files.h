/*
 * Files area (routes/files.c, routes/files_upload.c): rules shared by the presign, register and
 * multipart upload paths and by the avatar and logo updates of the users and organizations
 * areas.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/http.h"
#include "routes/context.h"
#include "rt/storage.h"

/* The size limit of an allowed MIME type (docs/api.md "Limits"), 0 when the type is not
 * allowed. mime must be normalized (files_mime_normalize). */
uint64_t files_mime_limit(const char *mime);
/* The 413 text for a file over its type's limit, the limit in binary units as it is set
 * ("Files of type video/mp4 may be at most 500 MiB"), in the arena. */
const char *files_limit_message(http_req_t *req, const char *mime, uint64_t limit);
/* "type/subtype" of RFC 6838 token characters, lower-cased into `a`; NULL when malformed or
 * when it carries parameters. */
const char *files_mime_normalize(arena_t *a, const char *s);
/* docs/api.md prefix rule: 1-64 of [a-z0-9_-/], no "..", no leading or trailing '/'. */
bool files_prefix_valid(const char *p);
/* 1-255 code points of valid UTF-8 without control characters. */
bool files_filename_valid(const char *s);
/* Read access to a file of organization org_id uploaded by uploader_id; participant: the caller
 * is coach or teacher of a mentorship the file is attached to. */
bool files_can_read(const caller_t *c, const char *org_id, const char *uploader_id,
                    bool participant);

typedef void (*files_ref_done_cb)(http_req_t *req, bool ok);
enum files_ref_kind { FILES_REF_AVATAR, FILES_REF_LOGO };
/* Makes file_id (NULL: none) the avatar of user target_id or the logo of organization
 * target_id: the file must be an image the caller may read (400 / 403 / 404 otherwise), the
 * column and its rendered reference (avatar_url / logo_url) are updated and the previous file
 * is deleted when nothing else refers to it. done(req, ok) runs afterwards with req->data as it
 * was; when ok is false a reply has been sent. */
void files_ref_set(http_req_t *req, int kind, const char *target_id, const char *file_id,
                   files_ref_done_cb done);

/* The storage writer behind a streamed request body (multipart upload, local presigned PUT). It
 * holds a reference on req while it may call back (it pauses and resumes the body as the disk
 * keeps up). Exactly one of files_body_abort (idempotent; the route's on_gone and error paths)
 * and files_body_finish ends it. */
typedef struct files_body {
    storage_writer_t *w; /* NULL once aborted or finishing */
    http_req_t *req;
} files_body_t;
void files_body_open(files_body_t *b, http_req_t *req);
/* Copies the bytes in; pauses the body while the writer is behind. */
void files_body_write(files_body_t *b, const char *data, size_t len);
void files_body_abort(files_body_t *b);
/* Stores the bytes under key; cb(rc, size, sha256 hex, req) fires once and must drop the
 * writer's reference on req (http_req_unref) after its last use of the request. rc is 0,
 * STORAGE_EIO, or STORAGE_EEXIST (local driver: the key already holds an object). */
void files_body_finish(files_body_t *b, const char *key, const char *mime, storage_hash_cb cb);
