/*
 * Files (docs/api.md "Files"):
 *
 *   POST   /api/files/presign                             any: a presigned PUT URL and its key
 *   POST   /api/files/register                            any: the uploaded key becomes a file
 *   POST   /api/files/upload                              any: multipart upload (files_upload.c)
 *   GET    /api/files/:fileId                             readers of the file
 *   POST   /api/files/:fileId/attach                      Coach (own mentorships), Manager+
 *   DELETE /api/files/:fileId/attach/:objectType/:objectId  as attach
 *   GET    /api/files/mentorship/:mentorshipId/attachments  readers of the mentorship
 *   PUT    /api/files/local?...                           local driver's upload (files_local.c)
 *   GET    /api/files/local?...                           local driver's download (files_local.c)
 *
 * Who reads a file: PlatformAdmin and Owner any; the uploader their own; in the file's
 * organization, Manager and OrganizationAdmin any, a coach or teacher the files attached to
 * their mentorships. Another organization's file is 403.
 *
 * A file's record goes when its last reference does (file_referenced() in 0009: attachments,
 * avatars, logos, chat attachments); the stored object is deleted after the commit through an
 * outbox row, so neither a crash nor a rollback ever separates a record from its object.
 */
#include "routes/files.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_files.h"
#include "domain/ids.h"
#include "domain/text.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/mentoring.h"
#include "routes/routes.h"
#include "routes/txreq.h"
#include "rt/outbox.h"
#include "rt/storage.h"

#define MIB (1024ULL * 1024ULL)

static void presign_file(http_req_t *req);
static void register_file(http_req_t *req);
static void get_file(http_req_t *req);
static void attach_file(http_req_t *req);
static void detach_file(http_req_t *req);
static void list_attachments(http_req_t *req);

/* ---- shared rules ---- */

uint64_t files_mime_limit(const char *mime)
{
    if (strncmp(mime, "image/", 6) == 0 || strncmp(mime, "text/", 5) == 0) return 100 * MIB;
    if (strncmp(mime, "video/", 6) == 0) return 500 * MIB;
    if (strcmp(mime, "application/pdf") == 0 || strcmp(mime, "application/zip") == 0 ||
        strcmp(mime, "application/x-zip-compressed") == 0)
        return 100 * MIB;
    return 0;
}

const char *files_limit_message(http_req_t *req, const char *mime, uint64_t limit)
{
    char size[HTTP_SIZE_TEXT_MAX];
    http_size_text(limit, size, sizeof(size));
    return arena_printf(&req->arena, "Files of type %s may be at most %s", mime, size);
}

static bool token_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$&-^_.+", c) != NULL);
}

const char *files_mime_normalize(arena_t *a, const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    if (n == 0 || n > 127) return NULL;
    char *out = arena_strndup(a, s, n);
    int slashes = 0;
    for (size_t i = 0; i < n; i++) {
        char c = out[i];
        if (c >= 'A' && c <= 'Z') c = out[i] = (char)(c - 'A' + 'a');
        if (c == '/') {
            if (i == 0 || i == n - 1 || ++slashes > 1) return NULL;
        } else if (!token_char(c)) {
            return NULL;
        }
    }
    return slashes == 1 ? out : NULL;
}

bool files_prefix_valid(const char *p)
{
    size_t n = strlen(p);
    if (n < 1 || n > 64 || p[0] == '/' || p[n - 1] == '/' || strstr(p, "..") || strstr(p, "//"))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '/'))
            return false;
    }
    return true;
}

bool files_filename_valid(const char *s)
{
    size_t n = strlen(s);
    size_t cp = text_cp_count(s, n);
    return n > 0 && cp >= 1 && cp <= 255 && text_utf8_valid(s, n) && !text_has_control(s, n);
}

bool files_can_read(const caller_t *c, const char *org_id, const char *uploader_id,
                    bool participant)
{
    perm_actor_t a = perm_actor(c);
    return perm_file_readable(&a, org_id, uploader_id, participant);
}

/* Takes a reference on req for an asynchronous storage call; the callback uses
 * storage_back() to drop it and learn whether the client is still there. */
static void storage_hold(http_req_t *req)
{
    http_req_ref(req);
}

static bool storage_back(http_req_t *req)
{
    bool gone = http_req_gone(req);
    http_req_unref(req);
    return !gone;
}

/* sizeBytes: a non-negative integer; recorded in v otherwise. */
static bool size_field(json_t *body, verr_t *v, uint64_t *out)
{
    json_t *j = json_object_get(body, "sizeBytes");
    if (!j || json_is_null(j)) {
        verr_add(v, "sizeBytes", "is required");
        return false;
    }
    if (!json_is_integer(j) || json_integer_value(j) < 0) {
        verr_add(v, "sizeBytes", "must be a non-negative integer");
        return false;
    }
    *out = (uint64_t)json_integer_value(j);
    return true;
}

/* filename and mimeType of a body; false after replying 400 / 413. */
static bool file_fields_or_reply(http_req_t *req, json_t *body, verr_t *v, const char **filename,
                                 const char **mime, uint64_t *size)
{
    *filename = field_str(req, body, "filename", v, true, 1, 255, false);
    if (*filename && text_has_control(*filename, strlen(*filename))) {
        verr_add(v, "filename", "must not contain control characters");
        *filename = NULL;
    }
    const char *m = field_str(req, body, "mimeType", v, true, 1, 127, true);
    *mime = NULL;
    if (m && !(*mime = files_mime_normalize(&req->arena, m)))
        verr_add(v, "mimeType", "must be a MIME type such as image/png");
    bool size_ok = size_field(body, v, size);
    if (verr_reply(req, v)) return false;
    uint64_t limit = files_mime_limit(*mime);
    if (!limit) {
        reply_field_invalid(req, "mimeType",
                            arena_printf(&req->arena, "Unsupported MIME type %s", *mime));
        return false;
    }
    if (size_ok && *size > limit) {
        http_reply_error(req, 413, "PAYLOAD_TOO_LARGE", files_limit_message(req, *mime, limit));
        return false;
    }
    return true;
}

/* ---- presign ---- */

typedef struct presign_state {
    const char *url, *key, *mime;
} presign_state_t;

static void on_presigned(http_req_t *req, db_result_t *r)
{
    presign_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"presignedUrl\":");
    buf_json_str(&b, st->url);
    buf_puts(&b, ",\"storageKey\":");
    buf_json_str(&b, st->key);
    buf_puts(&b, ",\"expiresIn\":");
    buf_printf(&b, "%d", STORAGE_URL_TTL);
    /* The headers the URL is bound to (rt/storage.h storage_presign_put), so a client need not
     * know the driver: S3 refuses a PUT without the signed If-None-Match. */
    buf_puts(&b, ",\"uploadHeaders\":{\"Content-Type\":");
    buf_json_str(&b, st->mime);
    if (!storage_is_local()) buf_puts(&b, ",\"If-None-Match\":\"*\"");
    buf_puts(&b, "}}}");
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void presign_file(http_req_t *req)
{
    caller_t *c = context_caller(req);
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    const char *prefix = field_str(req, body, "prefix", &v, false, 1, 64, false);
    if (prefix && !files_prefix_valid(prefix))
        verr_add(&v, "prefix",
                 "must be 1-64 characters of a-z 0-9 _ - / without '..' or "
                 "leading or trailing '/'");
    const char *filename, *mime;
    uint64_t size = 0;
    if (!file_fields_or_reply(req, body, &v, &filename, &mime, &size)) return;
    if (!storage_ready()) {
        http_reply_error(req, 503, "UNAVAILABLE", storage_unconfigured_message());
        return;
    }
    char id[IDS_UUID_LEN + 1];
    new_uuid(id);
    presign_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->key = storage_key_make(&req->arena, prefix ? prefix : "uploads", id, filename);
    st->mime = mime;
    st->url = storage_presign_put(&req->arena, st->key, mime, size, STORAGE_URL_TTL);
    if (!st->url) {
        http_reply_error(req, 503, "UNAVAILABLE", storage_unconfigured_message());
        return;
    }
    req->data = st;
    char sz[24];
    snprintf(sz, sizeof sz, "%llu", (unsigned long long)size);
    const char *params[] = {st->key, c->user_id, c->org_id, filename, mime, sz};
    db_req_query(req, SQL_FILES_PRESIGNED, 6, params, on_presigned);
}

/* ---- register ---- */

typedef struct reg_state {
    const char *key, *filename, *mime;
    uint64_t size;
    char id[IDS_UUID_LEN + 1];
    const char *hash;
} reg_state_t;

static void reg_on_inserted(http_req_t *req, db_result_t *r)
{
    reg_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 409, "CONFLICT", "This storage key is already registered");
        return;
    }
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"fileId\":");
    buf_json_str(&b, st->id);
    buf_puts(&b, ",\"storageKey\":");
    buf_json_str(&b, st->key);
    buf_puts(&b, ",\"sha256Hash\":");
    buf_json_str(&b, st->hash);
    buf_puts(&b, ",\"mimeType\":");
    buf_json_str(&b, st->mime);
    buf_printf(&b, ",\"sizeBytes\":%llu}}", (unsigned long long)st->size);
    http_reply_buf(req, 201, "application/json; charset=utf-8", &b);
}

static void reg_on_hash(int rc, uint64_t size, const char *hex, void *data)
{
    http_req_t *req = data;
    if (!storage_back(req)) return;
    reg_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (rc == STORAGE_ENOENT) {
        reply_field_invalid(req, "storageKey", "Nothing was uploaded under storageKey");
        return;
    }
    if (rc != 0) {
        http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        return;
    }
    if (size != st->size) {
        reply_field_invalid(req, "sizeBytes", "The stored object does not have the stated size");
        return;
    }
    st->hash = arena_strdup(&req->arena, hex);
    new_uuid(st->id);
    char sz[24];
    snprintf(sz, sizeof sz, "%llu", (unsigned long long)st->size);
    const char *params[] = {st->id,   c->org_id, c->user_id, st->filename,
                            st->mime, sz,        st->hash,   st->key};
    db_req_query(req, SQL_FILES_REG_INSERT, 8, params, reg_on_inserted);
}

static void reg_on_stat(int rc, uint64_t size, void *data)
{
    http_req_t *req = data;
    if (!storage_back(req)) return;
    reg_state_t *st = req->data;
    if (rc == STORAGE_ENOENT) {
        reply_field_invalid(req, "storageKey", "Nothing was uploaded under storageKey");
        return;
    }
    if (rc != 0) {
        http_reply_error(req, 503, "UNAVAILABLE", "Storage is unavailable");
        return;
    }
    if (size != st->size) {
        reply_field_invalid(req, "sizeBytes", "The stored object does not have the stated size");
        return;
    }
    storage_hold(req);
    storage_hash(st->key, reg_on_hash, req);
}

static void reg_on_check(http_req_t *req, db_result_t *r)
{
    reg_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0 || strcmp(db_get(r, 0, FILES_REG_CHECK_USER_ID), c->user_id) != 0) {
        http_reply_error(req, 403, "FORBIDDEN", "This storage key was not presigned for you");
        return;
    }
    if (db_get(r, 0, FILES_REG_CHECK_REGISTERED)[0] == 't') {
        http_reply_error(req, 409, "CONFLICT", "This storage key is already registered");
        return;
    }
    if (strcmp(db_get(r, 0, FILES_REG_CHECK_MIME_TYPE), st->mime) != 0) {
        reply_field_invalid(req, "mimeType",
                            "mimeType differs from the one the key was presigned for");
        return;
    }
    storage_hold(req);
    storage_stat(st->key, reg_on_stat, req);
}

static void register_file(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    reg_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->key = field_str(req, body, "storageKey", &v, true, 1, 400, false);
    if (st->key && !storage_key_valid(st->key)) verr_add(&v, "storageKey", "is not a storage key");
    if (!file_fields_or_reply(req, body, &v, &st->filename, &st->mime, &st->size)) return;
    req->data = st;
    const char *params[] = {st->key};
    db_req_query(req, SQL_FILES_REG_CHECK, 1, params, reg_on_check);
}

/* ---- get ---- */

/* 404 / 403 for a files_get row; false after replying. */
static bool file_readable_or_replied(http_req_t *req, const db_result_t *r)
{
    perm_actor_t a = perm_actor(context_caller(req));
    bool found = db_nrows(r) > 0;
    return perm_allowed_or_replied(
        req, perm_file_read(&a, found, found ? db_get(r, 0, FILES_GET_ORGANIZATION_ID) : NULL,
                            found ? db_get(r, 0, FILES_GET_UPLOADER_ID) : NULL,
                            found && db_get(r, 0, FILES_GET_PARTICIPANT)[0] == 't'));
}

static void on_file(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (!file_readable_or_replied(req, r)) return;
    const char *name = db_get(r, 0, FILES_GET_FILENAME), *mime = db_get(r, 0, FILES_GET_MIME_TYPE),
               *key = db_get(r, 0, FILES_GET_STORAGE_KEY);
    const char *url = storage_presign_get(&req->arena, key, name, mime, STORAGE_URL_TTL);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"id\":");
    buf_json_str(&b, db_get(r, 0, FILES_GET_ID));
    buf_puts(&b, ",\"filename\":");
    buf_json_str(&b, name);
    buf_puts(&b, ",\"mimeType\":");
    buf_json_str(&b, mime);
    buf_printf(&b, ",\"sizeBytes\":%lld,\"sha256Hash\":", db_getll(r, 0, FILES_GET_SIZE_BYTES, 0));
    if (db_isnull(r, 0, FILES_GET_SHA256_HASH))
        buf_puts(&b, "null");
    else
        buf_json_str(&b, db_get(r, 0, FILES_GET_SHA256_HASH));
    buf_puts(&b, ",\"storageKey\":");
    buf_json_str(&b, key);
    buf_puts(&b, ",\"presignedUrl\":");
    if (url)
        buf_json_str(&b, url);
    else
        buf_puts(&b, "null");
    buf_puts(&b, ",\"createdAt\":");
    buf_json_str(&b, db_get(r, 0, FILES_GET_CREATED_AT));
    buf_puts(&b, "}}");
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void get_file(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[] = {id, context_caller(req)->user_id};
    db_req_query(req, SQL_FILES_GET, 2, params, on_file);
}

/* ---- attach / detach ---- */

typedef struct attach_state {
    const char *file_id, *object_id;
    char id[IDS_UUID_LEN + 1];
} attach_state_t;

static void on_attached(http_req_t *req, db_result_t *r)
{
    attach_state_t *st = req->data;
    if (!r->ok && r->sqlstate && strcmp(r->sqlstate, "23503") == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "File not found");
        return;
    }
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 409, "CONFLICT", "The file is already attached to this mentorship");
        return;
    }
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"attachmentId\":");
    buf_json_str(&b, st->id);
    buf_puts(&b, ",\"fileId\":");
    buf_json_str(&b, st->file_id);
    buf_puts(&b, ",\"objectType\":\"mentorship\",\"objectId\":");
    buf_json_str(&b, st->object_id);
    buf_puts(&b, "}}");
    http_reply_buf(req, 201, "application/json; charset=utf-8", &b);
}

static void on_attach_check(http_req_t *req, db_result_t *r)
{
    attach_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (db_isnull(r, 0, FILES_ATTACH_CHECK_ID)) {
        http_reply_error(req, 404, "NOT_FOUND", "File not found");
        return;
    }
    perm_actor_t a = perm_actor(context_caller(req));
    if (!perm_allowed_or_replied(
            req, perm_file_attach(&a, db_get(r, 0, FILES_ATTACH_CHECK_M_ORGANIZATION_ID),
                                  db_get(r, 0, FILES_ATTACH_CHECK_M_COACH_ID),
                                  db_get(r, 0, FILES_ATTACH_CHECK_ORGANIZATION_ID),
                                  db_get(r, 0, FILES_ATTACH_CHECK_UPLOADER_ID),
                                  db_get(r, 0, FILES_ATTACH_CHECK_PARTICIPANT)[0] == 't')))
        return;
    new_uuid(st->id);
    const char *params[] = {st->id, st->file_id, st->object_id, context_caller(req)->user_id};
    db_req_query(req, SQL_FILES_ATTACH, 4, params, on_attached);
}

static bool object_type_or_reply(http_req_t *req, int i)
{
    const char *t = http_req_param(req, i);
    if (!t || strcmp(t, "mentorship") != 0) {
        path_param_reply_invalid(req, i, "must be mentorship");
        return false;
    }
    return true;
}

static void attach_file(http_req_t *req)
{
    attach_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (!path_uuid_ok_or_reply(req, 0, &st->file_id)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    const char *type = field_str(req, body, "objectType", &v, true, 1, 32, false);
    const char *obj = field_str(req, body, "objectId", &v, true, 1, 64, true);
    if (type && strcmp(type, "mentorship") != 0) verr_add(&v, "objectType", "must be mentorship");
    if (obj && !ids_is_uuid(obj)) verr_add(&v, "objectId", "must be a UUID");
    if (verr_reply(req, &v)) return;
    char *low = arena_strdup(&req->arena, obj);
    for (char *p = low; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    st->object_id = low;
    req->data = st;
    const char *params[] = {st->file_id, context_caller(req)->user_id, st->object_id};
    db_req_query(req, SQL_FILES_ATTACH_CHECK, 3, params, on_attach_check);
}

typedef struct detach_state {
    txreq_t tx;
    const char *file_id, *object_id;
} detach_state_t;

/* Committed: the attachment is gone, and the file too when that was its last reference. */
static void detach_done(http_req_t *req, txreq_t *t, db_result_t *res)
{
    (void)t;
    if (db_getll(&res[1], 0, FILES_GC_QUEUED, 0) > 0) outbox_kick();
    http_reply_empty(req, 204);
}

/* res[0]: the locked file and the mentorship (files_detach_lock); res[1]: whether the file is
 * attached to it, read after the lock. */
static void detach_decide(http_req_t *req, txreq_t *t, db_result_t *res)
{
    detach_state_t *st = req->data;
    if (db_isnull(&res[0], 0, FILES_DETACH_LOCK_FILE_ID)) {
        txreq_error(t, 404, "NOT_FOUND", "File not found");
        return;
    }
    perm_actor_t a = perm_actor(context_caller(req));
    if (!perm_allowed_or_rolled_back(
            t, perm_mentorship_change(&a, db_get(&res[0], 0, FILES_DETACH_LOCK_ORGANIZATION_ID),
                                      db_get(&res[0], 0, FILES_DETACH_LOCK_COACH_ID))))
        return;
    if (db_get(&res[1], 0, FILES_DETACH_ATTACHED_ATTACHED)[0] != 't') {
        txreq_error(t, 404, "NOT_FOUND", "The file is not attached to this mentorship");
        return;
    }
    const char *params[] = {st->file_id, st->object_id};
    const txreq_stmt_t writes[] = {{SQL_FILES_DETACH, 2, params}, {SQL_FILES_GC, 1, params}};
    txreq_write(t, writes, 2, detach_done);
}

static void detach_file(http_req_t *req)
{
    detach_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (!path_uuid_ok_or_reply(req, 0, &st->file_id)) return;
    if (!object_type_or_reply(req, 1)) return;
    if (!path_uuid_ok_or_reply(req, 2, &st->object_id)) return;
    req->data = st;
    const char *params[] = {st->file_id, st->object_id};
    const txreq_stmt_t reads[] = {{SQL_FILES_DETACH_LOCK, 2, params},
                                  {SQL_FILES_DETACH_ATTACHED, 2, params}};
    txreq_read(&st->tx, req, reads, 2, detach_decide);
}

/* ---- mentorship attachments ---- */

static void on_attachments(http_req_t *req, db_result_t *r)
{
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    bool found = db_nrows(r) > 0;
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_replied(
            req, perm_attachments_read(
                     &a, found ? db_get(r, 0, FILES_ATTACHMENTS_ORGANIZATION_ID) : NULL,
                     found ? db_get(r, 0, FILES_ATTACHMENTS_COACH_ID) : NULL,
                     found ? db_get(r, 0, FILES_ATTACHMENTS_TEACHER_ID) : NULL)))
        return;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, FILES_ATTACHMENTS_ATTACHMENT_ID)) continue;
        const char *name = db_get(r, i, FILES_ATTACHMENTS_FILENAME),
                   *mime = db_get(r, i, FILES_ATTACHMENTS_MIME_TYPE),
                   *key = db_get(r, i, FILES_ATTACHMENTS_STORAGE_KEY);
        const char *url = storage_presign_get(&req->arena, key, name, mime, STORAGE_URL_TTL);
        buf_puts(&b, items++ ? ",{\"attachmentId\":" : "{\"attachmentId\":");
        buf_json_str(&b, db_get(r, i, FILES_ATTACHMENTS_ATTACHMENT_ID));
        buf_puts(&b, ",\"fileId\":");
        buf_json_str(&b, db_get(r, i, FILES_ATTACHMENTS_FILE_ID));
        buf_puts(&b, ",\"filename\":");
        buf_json_str(&b, name);
        buf_puts(&b, ",\"mimeType\":");
        buf_json_str(&b, mime);
        buf_printf(&b, ",\"sizeBytes\":%lld,\"presignedUrl\":",
                   db_getll(r, i, FILES_ATTACHMENTS_SIZE_BYTES, 0));
        if (url)
            buf_json_str(&b, url);
        else
            buf_puts(&b, "null");
        buf_puts(&b, ",\"createdAt\":");
        buf_json_str(&b, db_get(r, i, FILES_ATTACHMENTS_CREATED_AT));
        buf_putc(&b, '}');
    }
    buf_puts(&b, "]}");
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void list_attachments(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[] = {id};
    db_req_query(req, SQL_FILES_ATTACHMENTS, 1, params, on_attachments);
}

static const route_t file_routes[] = {
    {HTTP_M_POST, "/api/files/presign", presign_file, AUTH_ORG, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/files/register", register_file, AUTH_ORG, ROLE_NONE, 0, 0},
    {HTTP_M_GET, "/api/files/:fileId", get_file, AUTH_ORG, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/files/:fileId/attach", attach_file, AUTH_ORG, ROLE_COACH, 0, 0},
    {HTTP_M_DELETE, "/api/files/:fileId/attach/:objectType/:objectId", detach_file, AUTH_ORG,
     ROLE_COACH, 0, 0},
    {HTTP_M_GET, "/api/files/mentorship/:mentorshipId/attachments", list_attachments, AUTH_ORG,
     ROLE_NONE, 0, 0},
};

void routes_files_register(void)
{
    router_add(file_routes, sizeof(file_routes) / sizeof(file_routes[0]));
}
