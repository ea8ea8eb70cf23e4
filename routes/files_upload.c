/*
 * POST /api/files/upload (multipart/form-data), avatars and organization logos.
 *
 * The body is parsed as it arrives (core/multipart.h) and the part named "file" streams into a
 * storage writer (rt/storage.h): a temporary file hashed on the thread pool, moved into place
 * (local) or PUT to the bucket (s3) once the body is complete. The MIME limit is checked on
 * every piece: past it the writer is discarded and 413 goes out at once. Reading pauses while
 * the writer is two buffers behind, so memory stays bounded whatever the size.
 *
 * Endings: up_on_gone is the one teardown of a request that ends before its answer (the client
 * leaving at any byte, a malformed chunk, a deadline; core/http.h): it discards the writer,
 * which removes its temporary file. Once the writer is finishing, up_on_stored owns the rest
 * and deletes the stored object when the client is gone by then.
 *
 * Fields may come before or after the file: prefix (default "uploads"), target ("avatar" for
 * the caller's avatar, "orgLogo" with organizationId for an organization logo; OrganizationAdmin
 * of that organization, PlatformAdmin or Owner).
 *
 * Avatars and logos: users.avatar_file_id / organizations.logo_file_id name the file and
 * avatar_url / logo_url keep a signed storage reference (storage_ref_make) that every JSON
 * response renders as a fresh 15-minute URL (routes/file_urls.h), so list caches and responses
 * rendered by PostgreSQL never carry an expired link.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/log.h"
#include "core/multipart.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_files.h"
#include "domain/ids.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/files.h"
#include "routes/routes.h"
#include "rt/outbox.h"
#include "rt/storage.h"

#define MIB (1024ULL * 1024ULL)
/* The largest file (video, 500 MiB) plus room for the other fields and the part headers. */
#define UPLOAD_BODY_LIMIT (500 * MIB + 64 * 1024)

enum { STOP = 1 }; /* a multipart callback replied and stops the parser */

typedef struct upload_state {
    multipart_t mp;
    files_body_t body;
    bool have_file, file_done, failed;
    const char *filename, *mime;
    uint64_t limit, got;
    const char *prefix, *target, *org_id;
    const char *key;
    char id[IDS_UUID_LEN + 1];
    const char *hash;
} upload_state_t;

static void upload_fail(http_req_t *req, int status, const char *code, const char *msg)
{
    upload_state_t *st = req->data;
    files_body_abort(&st->body);
    st->failed = true;
    http_reply_error(req, status, code, msg);
}

/* A failure of the `file` part (one 400 with details on "file"). */
static void upload_fail_file(http_req_t *req, const char *msg)
{
    upload_state_t *st = req->data;
    files_body_abort(&st->body);
    st->failed = true;
    reply_field_invalid(req, "file", msg);
}

static void up_on_gone(http_req_t *req)
{
    upload_state_t *st = req->data;
    files_body_abort(&st->body);
}

static int up_on_field(void *ud, const char *name, const char *value, size_t len)
{
    http_req_t *req = ud;
    upload_state_t *st = req->data;
    if (!name) return 0;
    char *v = arena_strndup(&req->arena, value, len);
    if (strcmp(name, "prefix") == 0)
        st->prefix = v;
    else if (strcmp(name, "target") == 0)
        st->target = v;
    else if (strcmp(name, "organizationId") == 0)
        st->org_id = v;
    return 0;
}

static int up_on_file_begin(void *ud, const multipart_part_t *p)
{
    http_req_t *req = ud;
    upload_state_t *st = req->data;
    if (!p->name || strcmp(p->name, "file") != 0) return 0; /* other file inputs are skipped */
    if (st->have_file) {
        upload_fail_file(req, "Only one file per upload");
        return STOP;
    }
    st->have_file = true;
    if (!p->filename[0] || !files_filename_valid(p->filename)) {
        upload_fail_file(req, "file needs a filename of 1-255 characters");
        return STOP;
    }
    /* The part's Content-Type without parameters ("text/plain; charset=utf-8"). */
    const char *ct = p->content_type ? p->content_type : "application/octet-stream";
    size_t n = strcspn(ct, "; \t");
    const char *mime = files_mime_normalize(&req->arena, arena_strndup(&req->arena, ct, n));
    st->limit = mime ? files_mime_limit(mime) : 0;
    if (!st->limit) {
        upload_fail_file(req,
                         arena_printf(&req->arena, "Unsupported MIME type %s", mime ? mime : ct));
        return STOP;
    }
    st->mime = mime;
    st->filename = arena_strdup(&req->arena, p->filename);
    files_body_open(&st->body, req);
    return 0;
}

static int up_on_file_data(void *ud, const char *data, size_t len)
{
    http_req_t *req = ud;
    upload_state_t *st = req->data;
    if (!st->body.w) return 0;
    st->got += len;
    if (st->got > st->limit) {
        upload_fail(req, 413, "PAYLOAD_TOO_LARGE", files_limit_message(req, st->mime, st->limit));
        return STOP;
    }
    files_body_write(&st->body, data, len);
    return 0;
}

static int up_on_file_end(void *ud)
{
    http_req_t *req = ud;
    upload_state_t *st = req->data;
    if (st->body.w) st->file_done = true;
    return 0;
}

static const multipart_handler_t up_handler = {up_on_field, up_on_file_begin, up_on_file_data,
                                               up_on_file_end};

static int up_on_chunk(http_req_t *req, const char *data, size_t len)
{
    upload_state_t *st = req->data;
    if (st->failed) return -1;
    int rc = multipart_feed(&st->mp, data, len);
    if (rc == 0) return 0;
    if (rc == MULTIPART_EHEADER || rc == MULTIPART_EFIELD)
        upload_fail(req, 413, "PAYLOAD_TOO_LARGE", "A form field or part header is too large");
    else if (rc == MULTIPART_EOUTSIDE)
        upload_fail(req, 413, "PAYLOAD_TOO_LARGE", "Too much data outside the form's parts");
    else if (rc < 0)
        upload_fail(req, 400, "VALIDATION_ERROR", "Malformed multipart body");
    return -1;
}

/* ---- after the body ---- */

static void up_reply(http_req_t *req)
{
    upload_state_t *st = req->data;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"fileId\":");
    buf_json_str(&b, st->id);
    buf_puts(&b, ",\"sha256Hash\":");
    buf_json_str(&b, st->hash);
    buf_puts(&b, ",\"storageKey\":");
    buf_json_str(&b, st->key);
    buf_puts(&b, ",\"mimeType\":");
    buf_json_str(&b, st->mime);
    buf_printf(&b, ",\"sizeBytes\":%llu,\"filename\":", (unsigned long long)st->got);
    buf_json_str(&b, st->filename);
    buf_puts(&b, "}}");
    http_reply_buf(req, 201, "application/json; charset=utf-8", &b);
}

static void up_on_ref(http_req_t *req, bool ok)
{
    if (ok) up_reply(req);
}

static void up_on_inserted(http_req_t *req, db_result_t *r)
{
    upload_state_t *st = req->data;
    if (!r->ok) {
        /* No record: the stored object must not stay behind. */
        storage_delete(st->key, NULL, NULL);
        db_ok_or_reply(req, r); /* replies: r failed */
        return;
    }
    if (!st->target) {
        up_reply(req);
        return;
    }
    bool avatar = strcmp(st->target, "avatar") == 0;
    files_ref_set(req, avatar ? FILES_REF_AVATAR : FILES_REF_LOGO,
                  avatar ? context_caller(req)->user_id : st->org_id, st->id, up_on_ref);
}

/* The writer is done; the reference it held on req is dropped here, after the last use of the
 * request and of its arena (st, st->key). */
static void up_on_stored(int rc, uint64_t size, const char *hex, void *data)
{
    http_req_t *req = data;
    upload_state_t *st = req->data;
    (void)size;
    if (http_req_gone(req)) {
        /* No answer can tell the client the file's id: the object must not stay behind. */
        if (rc == 0) storage_delete(st->key, NULL, NULL);
    } else if (rc != 0) {
        http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
    } else {
        caller_t *c = context_caller(req);
        st->hash = arena_strdup(&req->arena, hex);
        char sz[24];
        snprintf(sz, sizeof sz, "%llu", (unsigned long long)st->got);
        const char *params[] = {st->id,   c->org_id, c->user_id, st->filename,
                                st->mime, sz,        st->hash,   st->key};
        db_req_query(req, SQL_FILES_UP_INSERT, 8, params, up_on_inserted);
    }
    http_req_unref(req);
}

static void up_store(http_req_t *req)
{
    upload_state_t *st = req->data;
    new_uuid(st->id);
    st->key =
        storage_key_make(&req->arena, st->prefix ? st->prefix : "uploads", st->id, st->filename);
    /* Finishing: up_on_stored owns what is left, and req->data changes hands later (the avatar
     * and logo steps), so nothing may read it as upload state from on_gone any more. */
    req->on_gone = NULL;
    files_body_finish(&st->body, st->key, st->mime, up_on_stored);
}

static void up_on_logo_admin(http_req_t *req, db_result_t *r)
{
    upload_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) {
        files_body_abort(&st->body);
        return;
    }
    if (db_get(r, 0, FILES_LOGO_ADMIN_ORG_EXISTS)[0] != 't') {
        upload_fail(req, 404, "NOT_FOUND", "Organization not found");
        return;
    }
    perm_actor_t a = perm_actor(context_caller(req));
    perm_t p = perm_org_logo(&a, db_get(r, 0, FILES_LOGO_ADMIN_ORG_ADMIN)[0] == 't');
    if (!perm_allowed(p)) {
        char buf[PERM_MESSAGE_MAX];
        upload_fail(req, p.status, p.code, perm_message(p, buf, sizeof buf));
        return;
    }
    up_store(req);
}

static void up_on_end(http_req_t *req)
{
    upload_state_t *st = req->data;
    if (st->failed) return;
    int rc = multipart_finish(&st->mp);
    if (rc != 0) {
        upload_fail(req, 400, "VALIDATION_ERROR", "Malformed or incomplete multipart body");
        return;
    }
    verr_t v = {0};
    if (!st->have_file) verr_add(&v, "file", "is required");
    if (st->prefix && !files_prefix_valid(st->prefix))
        verr_add(&v, "prefix",
                 "must be 1-64 characters of a-z 0-9 _ - / without '..' or "
                 "leading or trailing '/'");
    if (st->target && *st->target == '\0') st->target = NULL;
    if (st->target && strcmp(st->target, "avatar") != 0 && strcmp(st->target, "orgLogo") != 0)
        verr_add(&v, "target", "must be avatar or orgLogo");
    bool logo = st->target && strcmp(st->target, "orgLogo") == 0;
    if (logo && (!st->org_id || !ids_is_uuid(st->org_id)))
        verr_add(&v, "organizationId", "is required (a UUID) when target is orgLogo");
    if (st->target && st->mime && strncmp(st->mime, "image/", 6) != 0)
        verr_add(&v, "file", "must be an image for an avatar or a logo");
    if (v.n) {
        files_body_abort(&st->body);
        verr_reply(req, &v);
        return;
    }
    if (!st->file_done || !st->body.w) {
        upload_fail(req, 400, "VALIDATION_ERROR", "Malformed or incomplete multipart body");
        return;
    }
    if (logo) {
        char *low = arena_strdup(&req->arena, st->org_id);
        for (char *p = low; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        st->org_id = low;
        const char *params[] = {st->org_id, context_caller(req)->user_id};
        db_req_query(req, SQL_FILES_LOGO_ADMIN, 2, params, up_on_logo_admin);
        return;
    }
    up_store(req);
}

static void upload_file(http_req_t *req)
{
    upload_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    req->data = st;
    if (multipart_init(&st->mp, http_req_header(req, "Content-Type"), &up_handler, req) != 0) {
        st->failed = true;
        http_reply_error(req, 415, "UNSUPPORTED_MEDIA_TYPE",
                         "The body must be multipart/form-data with a boundary");
        return;
    }
    if (!storage_ready()) {
        st->failed = true;
        http_reply_error(req, 503, "UNAVAILABLE", storage_unconfigured_message());
        return;
    }
    req->on_gone = up_on_gone;
    if (req->body_done) { /* no body at all */
        up_on_end(req);
        return;
    }
    http_req_read_body(req, up_on_chunk, up_on_end);
}

/* ---- avatars and logos ---- */

typedef struct ref_state {
    void *saved_data;
    files_ref_done_cb done;
    int kind;
    const char *target_id, *file_id, *ref;
    const char *old_file_id; /* the image the write replaced, to be collected */
} ref_state_t;

static void ref_finish(http_req_t *req, bool ok)
{
    ref_state_t *rs = req->data;
    req->data = rs->saved_data;
    rs->done(req, ok);
}

static void ref_on_gc(http_req_t *req, db_result_t *r)
{
    /* The new reference is committed; a failed cleanup only leaves an unused file behind. */
    if (!r->ok) log_warn("files: unused previous image not deleted: %s", r->error ? r->error : "");
    if (r->ok && db_getll(r, 0, FILES_GC_QUEUED, 0) > 0) outbox_kick();
    ref_finish(req, true);
}

/* Queues the previous image, if any, for deletion. */
static void ref_collect(http_req_t *req)
{
    ref_state_t *rs = req->data;
    if (!rs->old_file_id) {
        ref_finish(req, true);
        return;
    }
    const char *params[] = {rs->old_file_id};
    db_req_query(req, SQL_FILES_GC, 1, params, ref_on_gc);
}

static void ref_on_set(http_req_t *req, db_result_t *r)
{
    ref_state_t *rs = req->data;
    if (!r->ok && r->sqlstate && strcmp(r->sqlstate, "23503") == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "File not found");
        ref_finish(req, false);
        return;
    }
    if (!db_ok_or_reply(req, r)) {
        ref_finish(req, false);
        return;
    }
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND",
                         rs->kind == FILES_REF_AVATAR ? "User not found"
                                                      : "Organization not found");
        ref_finish(req, false);
        return;
    }
    const char *old = db_get(r, 0, FILES_SET_AVATAR_OLD_FILE_ID);
    if (!old || (rs->file_id && strcmp(old, rs->file_id) == 0)) {
        rs->old_file_id = NULL;
    } else {
        rs->old_file_id = arena_strdup(&req->arena, old);
    }
    /* The caller context carries the avatar url: the reply waits for the invalidation. */
    if (rs->kind == FILES_REF_AVATAR)
        ctx_invalidate_then(req, 'u', rs->target_id, ref_collect);
    else
        ref_collect(req);
}

static void ref_write(http_req_t *req)
{
    ref_state_t *rs = req->data;
    const char *params[] = {rs->target_id, rs->file_id, rs->ref};
    db_req_query(req, rs->kind == FILES_REF_AVATAR ? SQL_FILES_SET_AVATAR : SQL_FILES_SET_LOGO, 3,
                 params, ref_on_set);
}

static void ref_on_file(http_req_t *req, db_result_t *r)
{
    ref_state_t *rs = req->data;
    if (!db_ok_or_reply(req, r)) {
        ref_finish(req, false);
        return;
    }
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "File not found");
        ref_finish(req, false);
        return;
    }
    if (!files_can_read(context_caller(req), db_get(r, 0, FILES_REF_FILE_ORGANIZATION_ID),
                        db_get(r, 0, FILES_REF_FILE_UPLOADER_ID),
                        db_get(r, 0, FILES_REF_FILE_PARTICIPANT)[0] == 't')) {
        http_reply_error(req, 403, "FORBIDDEN", "You may not use this file");
        ref_finish(req, false);
        return;
    }
    const char *mime = db_get(r, 0, FILES_REF_FILE_MIME_TYPE);
    if (strncmp(mime, "image/", 6) != 0) {
        http_reply_error_details(req, 400, "VALIDATION_ERROR", "Validation failed",
                                 rs->kind == FILES_REF_AVATAR
                                     ? "[{\"field\":\"avatar\",\"message\":\"must be an image\"}]"
                                     : "[{\"field\":\"file\",\"message\":\"must be an image\"}]");
        ref_finish(req, false);
        return;
    }
    rs->ref = storage_ref_make(&req->arena, mime, db_get(r, 0, FILES_REF_FILE_STORAGE_KEY));
    if (!rs->ref) {
        http_reply_error(req, 503, "UNAVAILABLE", storage_unconfigured_message());
        ref_finish(req, false);
        return;
    }
    ref_write(req);
}

void files_ref_set(http_req_t *req, int kind, const char *target_id, const char *file_id,
                   files_ref_done_cb done)
{
    ref_state_t *rs = arena_calloc(&req->arena, sizeof(*rs));
    rs->saved_data = req->data;
    rs->done = done;
    rs->kind = kind;
    rs->target_id = target_id;
    rs->file_id = file_id;
    req->data = rs;
    if (!file_id) {
        ref_write(req);
        return;
    }
    const char *params[] = {file_id, context_caller(req)->user_id};
    db_req_query(req, SQL_FILES_REF_FILE, 2, params, ref_on_file);
}

static const route_t upload_routes[] = {
    {HTTP_M_POST, "/api/files/upload", upload_file, AUTH_ORG, ROLE_NONE, ROUTE_STREAM_BODY,
     UPLOAD_BODY_LIMIT},
};

void routes_files_upload_register(void)
{
    router_add(upload_routes, sizeof(upload_routes) / sizeof(upload_routes[0]));
}
