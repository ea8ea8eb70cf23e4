/*
 * Chat of a mentorship (INTERFACE.md "Chat", DECISIONS.md "Chat details"):
 *
 *   GET    /api/chat/conversations                            mentorships with a live message
 *   POST   /api/mentorships/:id/chat/token                    AccessToken2 RTM token, 1 hour
 *   GET    /api/mentorships/:id/chat/messages                 history (keyset) or search (q)
 *   POST   /api/mentorships/:id/chat/messages                 idempotent by clientMessageId
 *   PATCH  /api/mentorships/:id/chat/messages/:msgId          sender, within 15 minutes
 *   DELETE /api/mentorships/:id/chat/messages/:msgId          sender, or an administrator
 *   POST   /api/mentorships/:id/chat/messages/:msgId/reactions
 *   DELETE /api/mentorships/:id/chat/messages/:msgId/reactions/:emoji
 *   PATCH  /api/mentorships/:id/chat/read-receipt
 *   GET    /api/mentorships/:id/chat/unread
 *
 * Who: the mentorship's coach and teacher and the organization's Managers and
 * OrganizationAdmins (with an active membership, which the caller context guarantees) are the
 * participants; PlatformAdmin and Owner read (history, search, token) and delete, but do not
 * post, react or keep receipts. A mentorship of another organization answers 403.
 *
 * Every request first reads the mentorship (and what else it needs) in one statement, decides
 * in C, then writes in one atomic statement whose WHERE repeats the conditions that a
 * concurrent request could change (a message deleted meanwhile matches nothing). History and
 * search pages are written as JSON in C from plain rows; single messages (a post, an edit) are
 * rendered by PostgreSQL (chat_message_json, migration 0010) in the statement of the write. Events
 * go out after the write committed, on the mentorship's channel and the user channels of the coach,
 * the teacher and the organization's Managers and OrganizationAdmins. A new message is pushed
 * (through the outbox, in the statement that inserts it) to the coach and the teacher other than
 * the sender.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "domain/accesstoken2.h"
#include "domain/ids.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/page_cache.h"
#include "routes/perm.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/outbox.h"
#include "rt/storage.h"

#define CHAT_TOKEN_SECONDS 3600
#define CHAT_BODY_MAX 4000
#define CHAT_ATTACHMENTS_MAX 5
#define CHAT_LIMIT_DEFAULT 20
#define CHAT_LIMIT_MAX 100
#define CHAT_SEARCH_MAX 50
#define CHAT_SEARCH_TERM_MAX 200
#define CHAT_EMOJI_MAX 8
#define CHAT_URL_SECONDS (15 * 60)
/* How an avatar storage reference starts (rt/storage.h). */
#define STORAGE_REF_PREFIX "storage:"

static void conversations(http_req_t *req);
static void chat_token(http_req_t *req);
static void list_messages(http_req_t *req);
static void post_message(http_req_t *req);
static void edit_message(http_req_t *req);
static void delete_message(http_req_t *req);
static void add_reaction(http_req_t *req);
static void remove_reaction(http_req_t *req);
static void read_receipt(http_req_t *req);
static void unread(http_req_t *req);

/* ---- access ---- */

/* Columns 0..3 of every access read: organization, coach, teacher, and the organization's
 * active Managers and OrganizationAdmins as a comma-separated list (the event recipients). */
#define SQL_ACCESS_COLS                                                                            \
    "m.organization_id, m.coach_id, m.teacher_id,"                                                 \
    " (SELECT string_agg(om.user_id, ',') FROM organization_memberships om"                        \
    "   WHERE om.organization_id = m.organization_id AND om.membership_status = 'active'"          \
    "   AND om.role_in_organization IN ('Manager', 'OrganizationAdmin'))"
#define ACCESS_NCOLS 4

/* What the access read found, copied into the arena. */
typedef struct chat_ctx {
    const char *mentorship_id, *coach_id, *teacher_id, *admins;
    bool participant;
} chat_ctx_t;

/* Replies 404 / 403 and returns false when the caller may not do what `need` says
 * (perm_chat_access()); fills x from the access read otherwise. */
static bool access_or_replied(http_req_t *req, const db_result_t *r, perm_chat_need_t need,
                              chat_ctx_t *x)
{
    perm_actor_t a = perm_actor(context_caller(req));
    bool found = db_nrows(r) > 0;
    if (!perm_allowed_or_replied(req,
                                 perm_chat_access(&a, need, found ? db_get(r, 0, 0) : NULL,
                                                  found ? db_get(r, 0, 1) : NULL,
                                                  found ? db_get(r, 0, 2) : NULL, &x->participant)))
        return false;
    x->coach_id = arena_strdup(&req->arena, db_get(r, 0, 1));
    x->teacher_id = arena_strdup(&req->arena, db_get(r, 0, 2));
    x->admins = db_isnull(r, 0, 3) ? "" : arena_strdup(&req->arena, db_get(r, 0, 3));
    return true;
}

/* Publishes after commit on the mentorship's channel and the user channels of the coach, the
 * teacher, the organization's administrators and the caller. */
static void publish(http_req_t *req, const chat_ctx_t *x, const char *event, const char *data)
{
    caller_t *c = context_caller(req);
    const char *users[64];
    size_t n = 0;
    users[n++] = x->coach_id;
    users[n++] = x->teacher_id;
    users[n++] = c->user_id;
    char *list = arena_strdup(&req->arena, x->admins ? x->admins : "");
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == sizeof(users) / sizeof(users[0])) {
            events_publish_to(c->org_id, NULL, users, n, event, data);
            n = 0;
        }
        users[n++] = t;
    }
    events_publish_to(c->org_id, x->mentorship_id, users, n, event, data);
}

/* ---- ids and fields ---- */

/* Path parameter i as a lower-case UUID, else 400. */

static bool is_uuid_v4(const char *s)
{
    return ids_is_uuid(s) && s[14] == '4' && strchr("89abAB", s[19]) != NULL;
}

/* An optional UUID field (lower-cased); NULL when absent or invalid (failure recorded). */
static const char *field_uuid(http_req_t *req, json_t *body, const char *key, verr_t *v, bool v4)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, false, 1, 64, false);
    if (!s || v->n != before) return NULL;
    if (v4 ? !is_uuid_v4(s) : !ids_is_uuid(s)) {
        verr_add(v, key, v4 ? "must be a UUID v4" : "must be a UUID");
        return NULL;
    }
    return lower_ascii(req, s);
}

/* attachmentIds: absent, null or an array of at most 5 distinct UUIDs. Returns a PostgreSQL
 * array literal ("{}" when none) and the count. */
static const char *field_attachments(http_req_t *req, json_t *body, verr_t *v, int *count)
{
    json_t *a = json_object_get(body, "attachmentIds");
    *count = 0;
    if (!a || json_is_null(a)) return "{}";
    if (!json_is_array(a)) {
        verr_add(v, "attachmentIds", "must be an array of file ids");
        return NULL;
    }
    size_t n = json_array_size(a);
    if (n > CHAT_ATTACHMENTS_MAX) {
        verr_add(v, "attachmentIds", "must hold at most 5 file ids");
        return NULL;
    }
    buf_t b = BUF_INIT;
    buf_putc(&b, '{');
    const char *ids[CHAT_ATTACHMENTS_MAX];
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_string(e) || !ids_is_uuid(json_string_value(e))) {
            verr_add(v, "attachmentIds", "must be an array of file ids (UUIDs)");
            buf_free(&b);
            return NULL;
        }
        ids[i] = lower_ascii(req, json_string_value(e));
        for (size_t j = 0; j < i; j++)
            if (strcmp(ids[j], ids[i]) == 0) {
                verr_add(v, "attachmentIds", "must not repeat a file id");
                buf_free(&b);
                return NULL;
            }
        if (i) buf_putc(&b, ',');
        buf_puts(&b, ids[i]);
    }
    buf_putc(&b, '}');
    *count = (int)n;
    const char *out = arena_strndup(&req->arena, b.data, b.len);
    buf_free(&b);
    return out;
}

/* A reaction emoji: 1..8 code points of valid UTF-8, no white space or control characters. */
static bool emoji_ok(const char *s, size_t n)
{
    if (n == 0 || memchr(s, '\0', n) || !text_utf8_valid(s, n) || text_has_control(s, n))
        return false;
    size_t off, len;
    text_trim(s, n, &off, &len);
    if (off != 0 || len != n) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ') return false;
    size_t cp = text_cp_count(s, n);
    return cp >= 1 && cp <= CHAT_EMOJI_MAX;
}

/* ---- attachment urls ---- */

/* A presigned GET url (15 minutes) for a stored object, or NULL when storage cannot sign. */
static char *presign_url(http_req_t *req, const char *key, const char *filename,
                         const char *mime_type)
{
    if (!key || !filename || !mime_type) return NULL;
    return storage_presign_get(&req->arena, key, filename, mime_type, CHAT_URL_SECONDS);
}

/* An avatar that is an uploaded image holds a storage reference (rt/storage.h); it is shown
 * as a fresh presigned url, here too, so that events carry urls as the answers do. */
static json_t *avatar_url(http_req_t *req, const char *ref)
{
    char *url = storage_ref_render(&req->arena, ref, strlen(ref), CHAT_URL_SECONDS);
    return url ? json_string(url) : json_string(ref);
}

/* Replaces every "_key" member (the storage key, chat_attachments_json) by "url", and avatar
 * storage references by urls. */
static void urls_walk(http_req_t *req, json_t *j)
{
    if (json_is_array(j)) {
        size_t i;
        json_t *e;
        json_array_foreach(j, i, e) urls_walk(req, e);
        return;
    }
    if (!json_is_object(j)) return;
    json_t *key = json_object_get(j, "_key");
    if (key) {
        const char *k = json_string_value(key);
        char *url = presign_url(req, k, json_string_value(json_object_get(j, "filename")),
                                json_string_value(json_object_get(j, "mimeType")));
        json_object_set_new(j, "url", url ? json_string(url) : json_null());
        json_object_del(j, "_key");
        return;
    }
    const char *avatar = json_string_value(json_object_get(j, "avatar"));
    if (avatar && strncmp(avatar, STORAGE_REF_PREFIX, strlen(STORAGE_REF_PREFIX)) == 0)
        json_object_set_new(j, "avatar", avatar_url(req, avatar));
    const char *name;
    json_t *v;
    json_object_foreach(j, name, v) urls_walk(req, v);
}

/* The JSON text with attachment and avatar urls filled in (arena); the text itself when it
 * has none. */
static const char *with_urls(http_req_t *req, const char *json, size_t len)
{
    if (!json) return NULL;
    if (!memmem(json, len, "\"_key\"", 6) &&
        !memmem(json, len, "\"" STORAGE_REF_PREFIX, strlen(STORAGE_REF_PREFIX) + 1))
        return arena_strndup(&req->arena, json, len);
    json_error_t err;
    json_t *j = json_loadb(json, len, 0, &err);
    if (!j) {
        log_error("req %s: chat JSON could not be parsed: %s", req->id, err.text);
        return arena_strndup(&req->arena, json, len);
    }
    urls_walk(req, j);
    char *text = json_dumps(j, JSON_COMPACT);
    const char *out = arena_strdup(&req->arena, text);
    free(text);
    json_decref(j);
    return out;
}

static void reply_data(http_req_t *req, int status, const char *obj)
{
    http_reply_json(req, status, arena_printf(&req->arena, "{\"data\":%s}", obj));
}

/* ---- history and search ---- */

/* The page's messages as plain rows, written as JSON in C (json_build_object per message, its
 * sender and its reply preview was most of the cost of a page). Every row repeats the access
 * columns (read once, in a materialized CTE: the administrators' list is a subquery); a
 * mentorship without messages gives one row whose message columns are NULL. Attachments and
 * reactions stay JSON from SQL (few messages have any), aggregated once for the whole page
 * (the shapes of chat_attachments_json and chat_reactions_json, migration 0010): calling those
 * functions per message cost as much as the rest of the statement. Columns after the access
 * ones: H_*. */
#define SQL_PAGE_SELECT                                                                            \
    ", att AS (SELECT a.message_id, json_agg(json_build_object('id', a.id, 'fileId', a.file_id,"   \
    "   'filename', f.filename, 'mimeType', f.mime_type, 'sizeBytes', f.size_bytes,"               \
    "   '_key', f.storage_key) ORDER BY a.position) AS j"                                          \
    "   FROM chat_message_attachments a LEFT JOIN files f ON f.id = a.file_id"                     \
    "   WHERE a.message_id IN (SELECT id FROM page) GROUP BY a.message_id),"                       \
    " rx AS (SELECT r.message_id, json_agg(json_build_object('emoji', r.emoji, 'count', r.n,"      \
    "   'userIds', r.users) ORDER BY r.first_at, r.emoji) AS j"                                    \
    "   FROM (SELECT message_id, emoji, count(*) AS n,"                                            \
    "     json_agg(user_id ORDER BY created_at, user_id) AS users, min(created_at) AS first_at"    \
    "     FROM chat_reactions WHERE message_id IN (SELECT id FROM page) GROUP BY 1, 2) r"          \
    "   GROUP BY 1)"                                                                               \
    " SELECT acc.*, p.id, p.sender_id, p.body, p.client_message_id, chat_iso(p.created_at),"       \
    "   chat_iso(p.edited_at), chat_iso(p.deleted_at), p.reply_to_message_id, rp.id,"              \
    "   rp.sender_id, user_display_name(ru.first_name, ru.last_name),"                             \
    "   CASE WHEN rp.deleted_at IS NULL THEN left(rp.body, 120) END, su.id, su.first_name,"        \
    "   su.last_name, su.email, su.avatar_url, att.j, rx.j"                                        \
    "   , ver.v"                                                                                   \
    " FROM acc CROSS JOIN ver LEFT JOIN page p ON true"                                            \
    " LEFT JOIN att ON att.message_id = p.id LEFT JOIN rx ON rx.message_id = p.id"                 \
    " LEFT JOIN chat_messages rp ON rp.id = p.reply_to_message_id"                                 \
    " LEFT JOIN users ru ON ru.id = rp.sender_id"                                                  \
    " LEFT JOIN users su ON su.id = p.sender_id"                                                   \
    " ORDER BY p.created_at DESC"

/* $1 mentorship, $2 before (or NULL), $3 limit. One row more than the limit tells hasMore.
 * H_VERSION: the mentorship's chat history version (migration 0011), read in the same snapshot
 * as the page, for the cache of first pages. */
static const char SQL_HISTORY[] =
    "WITH acc AS MATERIALIZED (SELECT " SQL_ACCESS_COLS " FROM mentorships m"
    "   WHERE m.id = $1::uuid),"
    " ver AS (SELECT (SELECT version FROM chat_history_versions WHERE mentorship_id = $1::uuid)"
    "   AS v),"
    " page AS (SELECT c.* FROM chat_messages c"
    "   WHERE c.mentorship_id = $1::uuid AND c.deleted_at IS NULL"
    "   AND c.created_at < COALESCE($2::timestamptz, 'infinity')"
    "   ORDER BY c.created_at DESC LIMIT $3::int + 1)" SQL_PAGE_SELECT;

/* $1 mentorship, $2 before (or NULL), $3 limit, $4 the search term (chat_search_page,
 * migration 0010, chooses between reading the newest messages in order and the GIN index). */
static const char SQL_SEARCH[] =
    "WITH acc AS MATERIALIZED (SELECT " SQL_ACCESS_COLS " FROM mentorships m"
    "   WHERE m.id = $1::uuid),"
    " ver AS (SELECT NULL::bigint AS v),"
    " page AS MATERIALIZED (SELECT * FROM chat_search_page($1::uuid,"
    "   COALESCE($2::timestamptz, 'infinity'), $3::int, chat_search_query($4)))" SQL_PAGE_SELECT;

enum {
    H_ID = ACCESS_NCOLS,
    H_SENDER_ID,
    H_BODY,
    H_CLIENT_ID,
    H_CREATED,
    H_EDITED,
    H_DELETED,
    H_REPLY_TO_ID,
    H_REPLY_ID,
    H_REPLY_SENDER,
    H_REPLY_NAME,
    H_REPLY_BODY,
    H_USER_ID,
    H_USER_FIRST,
    H_USER_LAST,
    H_USER_EMAIL,
    H_USER_AVATAR,
    H_ATTACHMENTS,
    H_REACTIONS,
    H_VERSION,
};

/* Rendered first history pages (no cursor, no search term) of this worker, keyed by mentorship
 * and limit, at the mentorship's chat history version (routes/page_cache.h). The page is the
 * same for every caller who may read it; attachment and avatar urls are not part of it: they
 * are presigned when a page is sent (with_urls). A request finding a page runs one query, the
 * mentorship's access columns and current version, instead of the page statement. */
static page_cache_t history_pages;

/* $1 mentorship: the access columns (without the administrators, which only events need) and
 * the current chat history version. */
static const char SQL_HISTORY_VERSION[] =
    "SELECT m.organization_id, m.coach_id, m.teacher_id, NULL::text,"
    "   (SELECT version FROM chat_history_versions WHERE mentorship_id = m.id)"
    " FROM mentorships m WHERE m.id = $1::uuid";

static void member(buf_t *b, const char *key, const db_result_t *r, int row, int col)
{
    buf_puts(b, key);
    buf_json_str(b, db_get(r, row, col)); /* null for SQL NULL */
}

/* One ChatMessage (the shape of chat_message_obj, migration 0010) from row i of a page. */
static void message_row(buf_t *b, const db_result_t *r, int i, const char *mentorship_id)
{
    member(b, "{\"id\":", r, i, H_ID);
    buf_puts(b, ",\"mentorshipId\":");
    buf_json_str(b, mentorship_id);
    member(b, ",\"senderId\":", r, i, H_SENDER_ID);
    member(b, ",\"body\":", r, i, H_BODY);
    member(b, ",\"clientMessageId\":", r, i, H_CLIENT_ID);
    member(b, ",\"createdAt\":", r, i, H_CREATED);
    member(b, ",\"editedAt\":", r, i, H_EDITED);
    member(b, ",\"deletedAt\":", r, i, H_DELETED);
    member(b, ",\"replyToMessageId\":", r, i, H_REPLY_TO_ID);
    if (db_isnull(r, i, H_REPLY_ID)) {
        buf_puts(b, ",\"replyTo\":null");
    } else {
        member(b, ",\"replyTo\":{\"id\":", r, i, H_REPLY_ID);
        member(b, ",\"senderId\":", r, i, H_REPLY_SENDER);
        member(b, ",\"senderName\":", r, i, H_REPLY_NAME);
        member(b, ",\"body\":", r, i, H_REPLY_BODY);
        buf_putc(b, '}');
    }
    buf_puts(b, ",\"attachments\":");
    buf_puts(b, db_isnull(r, i, H_ATTACHMENTS) ? "[]" : db_get(r, i, H_ATTACHMENTS));
    buf_puts(b, ",\"reactions\":");
    buf_puts(b, db_isnull(r, i, H_REACTIONS) ? "[]" : db_get(r, i, H_REACTIONS));
    if (db_isnull(r, i, H_USER_ID)) {
        buf_puts(b, ",\"sender\":null}");
    } else {
        member(b, ",\"sender\":{\"id\":", r, i, H_USER_ID);
        member(b, ",\"firstName\":", r, i, H_USER_FIRST);
        member(b, ",\"lastName\":", r, i, H_USER_LAST);
        member(b, ",\"email\":", r, i, H_USER_EMAIL);
        member(b, ",\"avatar\":", r, i, H_USER_AVATAR);
        buf_puts(b, "}}");
    }
}

/* What history_on_page needs of the request. */
typedef struct page_req {
    int limit;
    bool search;
    const char *key; /* first history page: its key in history_pages */
} page_req_t;

/* Whether a rendered page holds storage keys or references that need urls. */
static bool needs_urls(const char *json, size_t len)
{
    return memmem(json, len, "\"_key\"", 6) ||
           memmem(json, len, "\"" STORAGE_REF_PREFIX, strlen(STORAGE_REF_PREFIX) + 1);
}

/* Sends a rendered page (and frees it), with attachment and avatar urls presigned now. */
static void reply_page(http_req_t *req, buf_t *b)
{
    if (!needs_urls(b->data, b->len)) {
        http_reply_buf(req, 200, "application/json; charset=utf-8", b);
        return;
    }
    const char *json = with_urls(req, b->data, b->len);
    buf_free(b);
    http_reply_json(req, 200, json);
}

static void history_on_page(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_READ, &x)) return;
    const page_req_t *pr = req->data;
    int n = db_isnull(r, 0, H_ID) ? 0 : db_nrows(r);
    bool more = n > pr->limit;
    if (more) n = pr->limit;
    const char *mid = lower_ascii(req, http_req_param(req, 0));
    buf_t b = BUF_INIT;
    buf_reserve(&b, 128 + (size_t)n * 1024);
    buf_puts(&b, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        if (i) buf_putc(&b, ',');
        message_row(&b, r, i, mid);
    }
    buf_puts(&b, "],\"meta\":{\"nextCursor\":");
    /* Search results are one page: no cursor. */
    buf_json_str(&b, n && !pr->search ? db_get(r, n - 1, H_CREATED) : NULL);
    buf_puts(&b, more ? ",\"hasMore\":true}}" : ",\"hasMore\":false}}");
    if (pr->key)
        page_cache_put(&history_pages, pr->key, page_row_version(r, H_VERSION), b.data, b.len);
    reply_page(req, &b);
}

/* A cached first page was found: reuse it when the version is still current, else read. */
static void history_on_version(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_READ, &x)) return;
    const page_req_t *pr = req->data;
    const page_entry_t *e = page_cache_get(&history_pages, pr->key, page_row_version(r, 4));
    if (e && !needs_urls(e->body, e->len)) {
        http_reply_jsonn(req, 200, e->body, e->len);
        return;
    }
    if (e) {
        http_reply_json(req, 200, with_urls(req, e->body, e->len));
        return;
    }
    const char *mid = lower_ascii(req, http_req_param(req, 0));
    const char *params[] = {mid, NULL, arena_printf(&req->arena, "%d", pr->limit)};
    db_req_query(req, SQL_HISTORY, 3, params, history_on_page);
}

static void list_messages(http_req_t *req)
{
    const char *mid;
    if (!path_uuid_ok_or_reply(req, 0, &mid, "The mentorship id must be a UUID")) return;
    verr_t v = {0};
    const char *q = http_req_query(req, "q");
    const char *ls = http_req_query(req, "limit");
    const char *before = http_req_query(req, "before");
    const char *term = NULL;
    if (q) {
        size_t n = strlen(q), off, len;
        if (!text_utf8_valid(q, n)) {
            verr_add(&v, "q", "must be valid UTF-8 text");
        } else {
            text_trim(q, n, &off, &len);
            if (text_cp_count(q + off, len) > CHAT_SEARCH_TERM_MAX)
                verr_add(&v, "q", "must be at most 200 characters");
            else if (len > 0)
                term = arena_strndup(&req->arena, q + off, len);
        }
    }
    int limit = term ? CHAT_SEARCH_MAX : CHAT_LIMIT_DEFAULT;
    if (ls && validate_int(ls, 1, CHAT_LIMIT_MAX, &limit) != 0)
        verr_add(&v, "limit", "must be an integer from 1 to 100");
    int64_t ms;
    if (before && timefmt_parse(before, &ms) != 0)
        verr_add(&v, "before", "must be an ISO 8601 date-time (a nextCursor)");
    if (verr_reply(req, &v)) return;
    if (term && limit > CHAT_SEARCH_MAX) limit = CHAT_SEARCH_MAX;
    const char *lim = arena_printf(&req->arena, "%d", limit);
    page_req_t *pr = arena_calloc(&req->arena, sizeof(*pr));
    pr->limit = limit;
    pr->search = term != NULL;
    req->data = pr;
    if (term) {
        const char *params[] = {mid, before, lim, term};
        db_req_query(req, SQL_SEARCH, 4, params, history_on_page);
    } else if (!before) {
        const char *fields[] = {mid, lim};
        pr->key = page_cache_key(req, 2, fields);
        const char *params[] = {mid, NULL, lim};
        if (page_cache_has(&history_pages, pr->key))
            db_req_query(req, SQL_HISTORY_VERSION, 1, params, history_on_version);
        else
            db_req_query(req, SQL_HISTORY, 3, params, history_on_page);
    } else {
        const char *params[] = {mid, before, lim};
        db_req_query(req, SQL_HISTORY, 3, params, history_on_page);
    }
}

/* ---- post ---- */

typedef struct post_state {
    chat_ctx_t x;
    char id[IDS_UUID_LEN + 1];
    const char *body, *client_id, *reply_to, *attachments;
    int nattachments;
    http_req_t *req;         /* while queued or in a batch (holding a reference) */
    struct post_state *next; /* in its lane's queue */
} post_state_t;

/* $1 mentorship, $2 caller, $3 clientMessageId, $4 replyToMessageId, $5 attachment ids.
 * Columns after the access ones: reply target in this mentorship (NULL: no such message),
 * attachment files found, of those uploaded by the caller, the existing message of this
 * clientMessageId. A post without attachments uses SQL_POST_LOAD_PLAIN (no $5): with the file
 * counts in it, PostgreSQL's estimate for the generic plan stayed above that of the custom
 * plans, so it planned the statement (inlining chat_message_json) on every post, several times
 * the cost of running it. For the same reason an absent reply target or clientMessageId is the
 * nil UUID (no message has it: ids are v4) rather than NULL, which let a custom plan drop the
 * probe and look cheaper than the generic one. */
#define NIL_UUID "'00000000-0000-0000-0000-000000000000'::uuid"
#define SQL_POST_LOAD_(FILES)                                                                      \
    "SELECT " SQL_ACCESS_COLS ","                                                                  \
    "   (SELECT c.mentorship_id = m.id FROM chat_messages c"                                       \
    "     WHERE c.id = COALESCE($4::uuid, " NIL_UUID "))," FILES ","                               \
    "   (SELECT chat_message_json(c) FROM chat_messages c WHERE c.mentorship_id = m.id"            \
    "     AND c.sender_id = $2 AND c.client_message_id = COALESCE($3::uuid, " NIL_UUID "))"        \
    " FROM mentorships m WHERE m.id = $1::uuid"
static const char SQL_POST_LOAD[] = SQL_POST_LOAD_(
    "   (SELECT count(*) FROM files f WHERE f.id = ANY($5::uuid[])),"
    "   (SELECT count(*) FROM files f WHERE f.id = ANY($5::uuid[]) AND f.uploader_id = $2)");
static const char SQL_POST_LOAD_PLAIN[] = SQL_POST_LOAD_(" 0, 0");

/* $1 id, $2 mentorship, $3 sender, $4 body, $5 clientMessageId, $6 replyTo, $7 attachment ids,
 * $8 push title (the sender's display name). One row (the new message, the push rows queued)
 * or none when a message with this clientMessageId already exists. */
static const char SQL_POST_INSERT[] =
    "WITH clk AS (INSERT INTO chat_clocks AS k (mentorship_id, last_at)"
    "   VALUES ($2::uuid, clock_timestamp()) ON CONFLICT (mentorship_id) DO UPDATE"
    "   SET last_at = GREATEST(clock_timestamp(), k.last_at + interval '1 microsecond')"
    "   RETURNING last_at),"
    " ins AS (INSERT INTO chat_messages (id, mentorship_id, sender_id, body, client_message_id,"
    "   reply_to_message_id, created_at)"
    "   SELECT $1::uuid, $2::uuid, $3, $4, $5::uuid, $6::uuid, clk.last_at FROM clk"
    "   ON CONFLICT (mentorship_id, sender_id, client_message_id) DO NOTHING RETURNING *),"
    " att AS (INSERT INTO chat_message_attachments (id, message_id, file_id, position)"
    "   SELECT gen_random_uuid(), ins.id, a.fid, a.ord FROM ins,"
    "     unnest($7::uuid[]) WITH ORDINALITY a(fid, ord) RETURNING *),"
    " push AS (INSERT INTO outbox (kind, payload)"
    "   SELECT 'push', jsonb_build_object('to', jsonb_agg(pt.token ORDER BY pt.token),"
    "     'title', $8::text, 'body', left(ins.body, 200), 'data', jsonb_build_object("
    "       'type', 'chat-message', 'mentorshipId', ins.mentorship_id, 'messageId', ins.id))"
    "   FROM ins JOIN mentorships m ON m.id = ins.mentorship_id"
    "   JOIN push_tokens pt ON pt.user_id IN (m.coach_id, m.teacher_id)"
    "     AND pt.user_id <> ins.sender_id"
    "   GROUP BY ins.id, ins.body, ins.mentorship_id, pt.user_id RETURNING 1)"
    " SELECT chat_message_obj(ins::chat_messages, (SELECT COALESCE(json_agg(json_build_object("
    "     'id', a.id, 'fileId', a.file_id, 'filename', f.filename, 'mimeType', f.mime_type,"
    "     'sizeBytes', f.size_bytes, '_key', f.storage_key) ORDER BY a.position), '[]')"
    "     FROM att a LEFT JOIN files f ON f.id = a.file_id), '[]'::json),"
    "   (SELECT count(*) FROM push)"
    " FROM ins";

static const char SQL_POST_EXISTING[] =
    "SELECT chat_message_json(c) FROM chat_messages c WHERE c.mentorship_id = $1::uuid"
    " AND c.sender_id = $2 AND c.client_message_id = $3::uuid";

static void post_on_existing(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        /* The message that won the race was rolled back after all: the client may retry. */
        http_reply_error(req, 409, "CONFLICT", "A message with this clientMessageId is in flight");
        return;
    }
    reply_data(req, 200, with_urls(req, db_get(r, 0, 0), db_getlen(r, 0, 0)));
}

/* The post committed (json: the new message, pushes: push rows queued), or (json NULL) another
 * request with the same clientMessageId committed first. */
static void post_finish(http_req_t *req, const char *json, size_t len, long long pushes)
{
    post_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!json) {
        const char *params[] = {st->x.mentorship_id, c->user_id, st->client_id};
        db_req_query(req, SQL_POST_EXISTING, 3, params, post_on_existing);
        return;
    }
    const char *msg = with_urls(req, json, len);
    if (pushes > 0) outbox_kick();
    publish(req, &st->x, "chat-message", msg);
    reply_data(req, 201, msg);
}

static void post_on_inserted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        post_finish(req, NULL, 0, 0);
        return;
    }
    post_finish(req, db_get(r, 0, 0), db_getlen(r, 0, 0), db_getll(r, 0, 1, 0));
}

/* ---- posts of one mentorship, batched ----
 *
 * Posts of a mentorship take its chat clock row's lock until they commit (SQL_POST_INSERT), so
 * one commit at a time: with many concurrent posts in one mentorship the post rate was one
 * statement plus one commit (WAL flush) per message. Each worker therefore sends at most
 * POST_INFLIGHT_MAX inserts per mentorship at a time; posts that arrive meanwhile wait in the
 * mentorship's lane and go together in the next statement (SQL_POST_BATCH), up to
 * POST_BATCH_MAX. One statement and one commit then cover the batch: consecutive clock ticks,
 * one upsert of the clock, of the counts and of the conversation row. createdAt stays unique and
 * posts still commit in createdAt order (a batch is one transaction, batches queue on the clock
 * row). Two in flight, not one: the second waits on the clock row inside PostgreSQL and starts
 * the moment the first commits, instead of after its answer has come back and been handled. A
 * lone post goes at once, so it waits for nothing. Posts
 * with attachments keep the single statement; if a batch fails (a reply target or a sender
 * removed meanwhile), each of its posts is sent again alone and gets its own answer. */
#define POST_BATCH_MAX 64
#define POST_INFLIGHT_MAX 2
#define POST_LANES 64

typedef struct post_lane {
    char mentorship[IDS_UUID_LEN + 1]; /* "" while free */
    int inflight;                      /* statements of this lane in flight */
    post_state_t *head, *tail;         /* waiting posts, oldest first */
} post_lane_t;

static post_lane_t lanes[POST_LANES];

typedef struct post_batch {
    post_lane_t *lane;
    int n;
    post_state_t *items[POST_BATCH_MAX];
} post_batch_t;

/* $1 mentorship, $2 count, then one array element per post: $3 ids, $4 senders, $5 bodies,
 * $6 clientMessageIds, $7 replyToMessageIds, $8 push titles. Post k (1-based) takes the clock's
 * tick k of n. One row per new message: id, the message as chat_message_json renders it, and the
 * push rows queued for the whole batch. */
static const char SQL_POST_BATCH[] =
    "WITH clk AS (INSERT INTO chat_clocks AS k (mentorship_id, last_at)"
    "   VALUES ($1::uuid, clock_timestamp() + ($2::int - 1) * interval '1 microsecond')"
    "   ON CONFLICT (mentorship_id) DO UPDATE"
    "   SET last_at = GREATEST(clock_timestamp(), k.last_at + interval '1 microsecond')"
    "     + ($2::int - 1) * interval '1 microsecond'"
    "   RETURNING last_at),"
    " src AS (SELECT * FROM unnest($3::uuid[], $4::text[], $5::text[], $6::uuid[], $7::uuid[],"
    "   $8::text[]) WITH ORDINALITY AS s(id, sender, body, cid, reply, title, ord)),"
    " ins AS (INSERT INTO chat_messages (id, mentorship_id, sender_id, body, client_message_id,"
    "   reply_to_message_id, created_at)"
    "   SELECT s.id, $1::uuid, s.sender, s.body, s.cid, s.reply,"
    "     clk.last_at - ($2::int - s.ord) * interval '1 microsecond'"
    "   FROM src s, clk ORDER BY s.ord"
    "   ON CONFLICT (mentorship_id, sender_id, client_message_id) DO NOTHING RETURNING *),"
    " push AS (INSERT INTO outbox (kind, payload)"
    "   SELECT 'push', jsonb_build_object('to', jsonb_agg(pt.token ORDER BY pt.token),"
    "     'title', s.title, 'body', left(ins.body, 200), 'data', jsonb_build_object("
    "       'type', 'chat-message', 'mentorshipId', ins.mentorship_id, 'messageId', ins.id))"
    "   FROM ins JOIN src s ON s.id = ins.id JOIN mentorships m ON m.id = $1::uuid"
    "   JOIN push_tokens pt ON pt.user_id IN (m.coach_id, m.teacher_id)"
    "     AND pt.user_id <> ins.sender_id"
    "   GROUP BY ins.id, ins.body, ins.mentorship_id, s.title, pt.user_id RETURNING 1)"
    " SELECT ins.id, chat_message_obj(ins::chat_messages, '[]'::json, '[]'::json),"
    "   (SELECT count(*) FROM push)"
    " FROM ins";

/* Appends one element of a PostgreSQL array literal: NULL, or the text double-quoted. */
static void array_elem(buf_t *b, const char *s)
{
    if (b->len > 1) buf_putc(b, ',');
    if (!s) {
        buf_puts(b, "NULL");
        return;
    }
    buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') buf_putc(b, '\\');
        buf_putc(b, *s);
    }
    buf_putc(b, '"');
}

static post_lane_t *lane_of(const char *mentorship_id)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)mentorship_id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return &lanes[h % POST_LANES];
}

static void post_batch_send(post_lane_t *lane);

/* The post alone, through SQL_POST_INSERT. */
static void post_send_one(http_req_t *req)
{
    post_state_t *st = req->data;
    caller_t *c = context_caller(req);
    const char *params[] = {st->id,        st->x.mentorship_id, c->user_id,      st->body,
                            st->client_id, st->reply_to,        st->attachments, c->display_name};
    db_req_query(req, SQL_POST_INSERT, 8, params, post_on_inserted);
}

static void post_on_batch(db_result_t *r, void *data)
{
    post_batch_t *bt = data;
    for (int i = 0; i < bt->n; i++) {
        post_state_t *st = bt->items[i];
        http_req_t *req = st->req;
        st->req = NULL;
        if (http_req_gone(req)) {
            /* The client left: as for a single post, the result is dropped. */
        } else if (!r->ok && !r->conn_lost) {
            post_send_one(req);
        } else if (db_ok_or_reply(req, r)) {
            int row = -1;
            for (int k = 0; k < db_nrows(r) && row < 0; k++)
                if (strcmp(db_get(r, k, 0), st->id) == 0) row = k;
            if (row < 0)
                post_finish(req, NULL, 0, 0);
            else
                post_finish(req, db_get(r, row, 1), db_getlen(r, row, 1), db_getll(r, 0, 2, 0));
        }
        http_req_unref(req);
    }
    post_lane_t *lane = bt->lane;
    free(bt);
    lane->inflight--;
    if (lane->head)
        post_batch_send(lane);
    else if (lane->inflight == 0)
        lane->mentorship[0] = '\0';
}

/* Sends the lane's waiting posts (up to POST_BATCH_MAX) as one statement. */
static void post_batch_send(post_lane_t *lane)
{
    post_batch_t *bt = xcalloc(1, sizeof(*bt));
    bt->lane = lane;
    buf_t ids = BUF_INIT, senders = BUF_INIT, bodies = BUF_INIT, cids = BUF_INIT,
          replies = BUF_INIT, titles = BUF_INIT;
    buf_t *arrays[] = {&ids, &senders, &bodies, &cids, &replies, &titles};
    for (size_t i = 0; i < 6; i++)
        buf_putc(arrays[i], '{');
    while (lane->head && bt->n < POST_BATCH_MAX) {
        post_state_t *st = lane->head;
        lane->head = st->next;
        st->next = NULL;
        if (http_req_gone(st->req)) { /* the client left while it waited: not posted */
            http_req_t *gone = st->req;
            st->req = NULL; /* st lives in the request's arena: done with it before the unref */
            http_req_unref(gone);
            continue;
        }
        bt->items[bt->n++] = st;
        caller_t *c = context_caller(st->req);
        array_elem(&ids, st->id);
        array_elem(&senders, c->user_id);
        array_elem(&bodies, st->body);
        array_elem(&cids, st->client_id);
        array_elem(&replies, st->reply_to);
        array_elem(&titles, c->display_name);
    }
    if (!lane->head) lane->tail = NULL;
    for (size_t i = 0; i < 6; i++)
        buf_putc(arrays[i], '}');
    if (bt->n == 0) {
        for (size_t i = 0; i < 6; i++)
            buf_free(arrays[i]);
        free(bt);
        if (lane->inflight == 0) lane->mentorship[0] = '\0';
        return;
    }
    char count[16];
    snprintf(count, sizeof(count), "%d", bt->n);
    const char *params[] = {lane->mentorship, count,     ids.data,     senders.data,
                            bodies.data,      cids.data, replies.data, titles.data};
    lane->inflight++;
    db_query(SQL_POST_BATCH, 8, params, post_on_batch, bt);
    for (size_t i = 0; i < 6; i++)
        buf_free(arrays[i]);
}

/* Queues a checked post in its mentorship's lane; sends it at once when the lane is idle. */
static void post_enqueue(http_req_t *req)
{
    post_state_t *st = req->data;
    post_lane_t *lane = lane_of(st->x.mentorship_id);
    if (st->nattachments > 0 ||
        (lane->mentorship[0] && strcmp(lane->mentorship, st->x.mentorship_id) != 0)) {
        post_send_one(req); /* attachments, or the lane is another mentorship's just now */
        return;
    }
    if (!lane->mentorship[0])
        snprintf(lane->mentorship, sizeof(lane->mentorship), "%s", st->x.mentorship_id);
    http_req_ref(req);
    st->req = req;
    if (lane->tail)
        lane->tail->next = st;
    else
        lane->head = st;
    lane->tail = st;
    if (lane->inflight < POST_INFLIGHT_MAX) post_batch_send(lane);
}

static void post_on_loaded(http_req_t *req, db_result_t *r)
{
    post_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_PARTICIPATE, &st->x)) return;
    const int col = ACCESS_NCOLS;
    if (!db_isnull(r, 0, col + 3)) {
        reply_data(req, 200, with_urls(req, db_get(r, 0, col + 3), db_getlen(r, 0, col + 3)));
        return;
    }
    if (st->reply_to && (db_isnull(r, 0, col) || db_get(r, 0, col)[0] != 't')) {
        http_reply_error(req, 422, "UNPROCESSABLE",
                         "replyToMessageId is not a message of this mentorship");
        return;
    }
    if (db_getll(r, 0, col + 1, 0) < st->nattachments) {
        http_reply_error(req, 404, "NOT_FOUND", "An attached file does not exist");
        return;
    }
    if (db_getll(r, 0, col + 2, 0) < st->nattachments) {
        http_reply_error(req, 403, "FORBIDDEN", "Only files you uploaded can be attached");
        return;
    }
    post_enqueue(req);
}

static void post_message(http_req_t *req)
{
    caller_t *c = context_caller(req);
    post_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (!path_uuid_ok_or_reply(req, 0, &st->x.mentorship_id, "The mentorship id must be a UUID"))
        return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    st->body = field_str(req, body, "body", &v, true, 1, CHAT_BODY_MAX, true);
    st->client_id = field_uuid(req, body, "clientMessageId", &v, true);
    st->reply_to = field_uuid(req, body, "replyToMessageId", &v, false);
    st->attachments = field_attachments(req, body, &v, &st->nattachments);
    if (verr_reply(req, &v)) return;
    new_uuid(st->id);
    req->data = st;
    const char *params[] = {st->x.mentorship_id, c->user_id, st->client_id, st->reply_to,
                            st->attachments};
    if (st->nattachments > 0)
        db_req_query(req, SQL_POST_LOAD, 5, params, post_on_loaded);
    else
        db_req_query(req, SQL_POST_LOAD_PLAIN, 4, params, post_on_loaded);
}

/* ---- one message: edit, delete, reactions ---- */

/* $1 mentorship, $2 message. Columns after the access ones (NULL when the message is not one
 * of this mentorship): sender, deleted, within the edit window. */
static const char SQL_MSG_LOAD[] =
    "SELECT " SQL_ACCESS_COLS ", c.sender_id, c.deleted_at IS NOT NULL,"
    "   c.created_at > now() - interval '15 minutes'"
    " FROM mentorships m LEFT JOIN chat_messages c ON c.id = $2::uuid AND c.mentorship_id = m.id"
    " WHERE m.id = $1::uuid";

typedef enum msg_op { OP_EDIT, OP_DELETE, OP_REACT, OP_UNREACT } msg_op_t;

typedef struct msg_state {
    chat_ctx_t x;
    msg_op_t op;
    const char *msg_id;
    const char *body;  /* edit */
    const char *emoji; /* reactions */
} msg_state_t;

/* $1 mentorship, $2 message, $3 body, $4 sender. */
static const char SQL_EDIT[] =
    "WITH u AS (UPDATE chat_messages SET body = $3, edited_at = now()"
    "   WHERE id = $2::uuid AND mentorship_id = $1::uuid AND deleted_at IS NULL"
    "   AND sender_id = $4 AND created_at > now() - interval '15 minutes' RETURNING *)"
    " SELECT chat_message_json(u::chat_messages) FROM u";

/* $1 mentorship, $2 message, $3 caller. */
static const char SQL_DELETE[] =
    "UPDATE chat_messages SET deleted_at = now(), deleted_by = $3"
    " WHERE id = $2::uuid AND mentorship_id = $1::uuid AND deleted_at IS NULL RETURNING id";

/* $1 message, $2 emoji, $3 caller. Column 0: whether the reaction is new; 1: whether the
 * message is still live. */
static const char SQL_REACT[] =
    "WITH live AS (SELECT id FROM chat_messages WHERE id = $1::uuid AND deleted_at IS NULL),"
    " ins AS (INSERT INTO chat_reactions (message_id, emoji, user_id)"
    "   SELECT id, $2, $3 FROM live ON CONFLICT DO NOTHING RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM ins), EXISTS (SELECT 1 FROM live)";

static const char SQL_UNREACT[] =
    "WITH live AS (SELECT id FROM chat_messages WHERE id = $1::uuid AND deleted_at IS NULL),"
    " del AS (DELETE FROM chat_reactions WHERE message_id IN (SELECT id FROM live)"
    "   AND emoji = $2 AND user_id = $3 RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM del), EXISTS (SELECT 1 FROM live)";

static const char SQL_REACTIONS[] = "SELECT chat_reactions_json($1::uuid)";

static void msg_not_found(http_req_t *req)
{
    http_reply_error(req, 404, "NOT_FOUND", "Message not found");
}

static void edit_on_updated(http_req_t *req, db_result_t *r)
{
    msg_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        msg_not_found(req);
        return;
    }
    const char *msg = with_urls(req, db_get(r, 0, 0), db_getlen(r, 0, 0));
    publish(req, &st->x, "chat-message-updated", msg);
    reply_data(req, 200, msg);
}

static void delete_on_done(http_req_t *req, db_result_t *r)
{
    msg_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        msg_not_found(req);
        return;
    }
    buf_t d = BUF_INIT;
    buf_puts(&d, "{\"id\":");
    buf_json_str(&d, st->msg_id);
    buf_puts(&d, ",\"mentorshipId\":");
    buf_json_str(&d, st->x.mentorship_id);
    buf_putc(&d, '}');
    publish(req, &st->x, "chat-message-deleted", d.data);
    buf_free(&d);
    http_reply_empty(req, 204);
}

typedef struct react_state {
    msg_state_t m;
    bool changed;
} react_state_t;

static void react_on_reactions(http_req_t *req, db_result_t *r)
{
    react_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    const char *reactions = db_get(r, 0, 0);
    buf_t d = BUF_INIT;
    buf_puts(&d, "{\"messageId\":");
    buf_json_str(&d, st->m.msg_id);
    if (st->changed) {
        buf_puts(&d, ",\"userId\":");
        buf_json_str(&d, c->user_id);
        buf_puts(&d, ",\"emoji\":");
        buf_json_str(&d, st->m.emoji);
        buf_puts(&d, ",\"reactions\":");
        buf_puts(&d, reactions);
        buf_putc(&d, '}');
        publish(req, &st->m.x,
                st->m.op == OP_REACT ? "chat-reaction-added" : "chat-reaction-removed", d.data);
        buf_free(&d);
        buf_puts(&d, "{\"messageId\":");
        buf_json_str(&d, st->m.msg_id);
    }
    buf_puts(&d, ",\"reactions\":");
    buf_puts(&d, reactions);
    buf_putc(&d, '}');
    reply_data(req, 200, arena_strndup(&req->arena, d.data, d.len));
    buf_free(&d);
}

static void react_on_written(http_req_t *req, db_result_t *r)
{
    react_state_t *st = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (db_get(r, 0, 1)[0] != 't') {
        msg_not_found(req);
        return;
    }
    st->changed = db_get(r, 0, 0)[0] == 't';
    const char *params[] = {st->m.msg_id};
    db_req_query(req, SQL_REACTIONS, 1, params, react_on_reactions);
}

static void msg_on_loaded(http_req_t *req, db_result_t *r)
{
    msg_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    perm_chat_need_t need = st->op == OP_DELETE ? PERM_CHAT_READ : PERM_CHAT_PARTICIPATE;
    if (!access_or_replied(req, r, need, &st->x)) return;
    const int col = ACCESS_NCOLS;
    if (db_isnull(r, 0, col) || db_get(r, 0, col + 1)[0] == 't') {
        msg_not_found(req);
        return;
    }
    bool own = strcmp(db_get(r, 0, col), c->user_id) == 0;
    switch (st->op) {
    case OP_EDIT: {
        if (!perm_allowed_or_replied(req, perm_chat_edit(own))) return;
        if (db_get(r, 0, col + 2)[0] != 't') {
            http_reply_error(req, 422, "EDIT_WINDOW_EXPIRED",
                             "A message can be edited for 15 minutes after it was sent");
            return;
        }
        const char *params[] = {st->x.mentorship_id, st->msg_id, st->body, c->user_id};
        db_req_query(req, SQL_EDIT, 4, params, edit_on_updated);
        return;
    }
    case OP_DELETE: {
        /* The sender, the organization's Managers and OrganizationAdmins, PlatformAdmin, Owner. */
        perm_actor_t a = perm_actor(c);
        if (!perm_allowed_or_replied(req, perm_chat_delete(&a, own))) return;
        const char *params[] = {st->x.mentorship_id, st->msg_id, c->user_id};
        db_req_query(req, SQL_DELETE, 3, params, delete_on_done);
        return;
    }
    case OP_REACT:
    case OP_UNREACT: {
        const char *params[] = {st->msg_id, st->emoji, c->user_id};
        db_req_query(req, st->op == OP_REACT ? SQL_REACT : SQL_UNREACT, 3, params,
                     react_on_written);
        return;
    }
    }
}

/* Parses the two path ids into a fresh state of `size` bytes and loads the message. */
static msg_state_t *msg_begin(http_req_t *req, msg_op_t op, size_t size)
{
    msg_state_t *st = arena_calloc(&req->arena, size);
    st->op = op;
    if (!path_uuid_ok_or_reply(req, 0, &st->x.mentorship_id, "The mentorship id must be a UUID"))
        return NULL;
    if (!path_uuid_ok_or_reply(req, 1, &st->msg_id, "The message id must be a UUID")) return NULL;
    return st;
}

static void msg_load(http_req_t *req, msg_state_t *st)
{
    req->data = st;
    const char *params[] = {st->x.mentorship_id, st->msg_id};
    db_req_query(req, SQL_MSG_LOAD, 2, params, msg_on_loaded);
}

static void edit_message(http_req_t *req)
{
    msg_state_t *st = msg_begin(req, OP_EDIT, sizeof(*st));
    if (!st) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    st->body = field_str(req, body, "body", &v, true, 1, CHAT_BODY_MAX, true);
    if (verr_reply(req, &v)) return;
    msg_load(req, st);
}

static void delete_message(http_req_t *req)
{
    msg_state_t *st = msg_begin(req, OP_DELETE, sizeof(*st));
    if (!st) return;
    msg_load(req, st);
}

static void add_reaction(http_req_t *req)
{
    msg_state_t *st = msg_begin(req, OP_REACT, sizeof(react_state_t));
    if (!st) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    json_t *e = json_object_get(body, "emoji");
    if (!e || json_is_null(e))
        verr_add(&v, "emoji", "is required");
    else if (!json_is_string(e) || !emoji_ok(json_string_value(e), json_string_length(e)))
        verr_add(&v, "emoji", "must be 1 to 8 characters without spaces");
    else
        st->emoji = arena_strdup(&req->arena, json_string_value(e));
    if (verr_reply(req, &v)) return;
    msg_load(req, st);
}

static void remove_reaction(http_req_t *req)
{
    msg_state_t *st = msg_begin(req, OP_UNREACT, sizeof(react_state_t));
    if (!st) return;
    const char *e = http_req_param(req, 2);
    if (!e || !emoji_ok(e, strlen(e))) {
        http_reply_error(req, 400, "VALIDATION_ERROR",
                         "The emoji must be 1 to 8 characters without spaces");
        return;
    }
    st->emoji = e;
    msg_load(req, st);
}

/* ---- read receipts and unread counts ---- */

/* $1 mentorship, $2 message, $3 caller. Columns after the access ones: whether the message is
 * one of this mentorship's. The receipt moves only forward. */
static const char SQL_RECEIPT_LOAD[] =
    "SELECT " SQL_ACCESS_COLS ","
    "   EXISTS (SELECT 1 FROM chat_messages c WHERE c.id = $2::uuid AND c.mentorship_id = m.id)"
    " FROM mentorships m WHERE m.id = $1::uuid";

static const char SQL_RECEIPT[] =
    "INSERT INTO chat_read_receipts AS r (mentorship_id, user_id, last_read_message_id,"
    "   last_read_at)"
    " SELECT c.mentorship_id, $3, c.id, c.created_at FROM chat_messages c"
    "   WHERE c.id = $2::uuid AND c.mentorship_id = $1::uuid"
    " ON CONFLICT (mentorship_id, user_id) DO UPDATE SET"
    "   last_read_message_id = EXCLUDED.last_read_message_id,"
    "   last_read_at = EXCLUDED.last_read_at, updated_at = now()"
    " WHERE r.last_read_at < EXCLUDED.last_read_at";

typedef struct receipt_state {
    chat_ctx_t x;
    const char *msg_id;
} receipt_state_t;

static void receipt_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    http_reply_empty(req, 204);
}

static void receipt_on_loaded(http_req_t *req, db_result_t *r)
{
    receipt_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_PARTICIPATE, &st->x)) return;
    if (db_get(r, 0, ACCESS_NCOLS)[0] != 't') {
        msg_not_found(req);
        return;
    }
    const char *params[] = {st->x.mentorship_id, st->msg_id, c->user_id};
    db_req_query(req, SQL_RECEIPT, 3, params, receipt_on_done);
}

static void read_receipt(http_req_t *req)
{
    receipt_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (!path_uuid_ok_or_reply(req, 0, &st->x.mentorship_id, "The mentorship id must be a UUID"))
        return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    json_t *j = json_object_get(body, "lastReadMessageId");
    if (!j || json_is_null(j))
        verr_add(&v, "lastReadMessageId", "is required");
    else
        st->msg_id = field_uuid(req, body, "lastReadMessageId", &v, false);
    if (verr_reply(req, &v)) return;
    req->data = st;
    const char *params[] = {st->x.mentorship_id, st->msg_id};
    db_req_query(req, SQL_RECEIPT_LOAD, 2, params, receipt_on_loaded);
}

/* Messages of others, not deleted, after the caller's receipt. $1 mentorship, $2 caller. */
static const char SQL_UNREAD[] =
    "SELECT " SQL_ACCESS_COLS ","
    "   chat_unread(m.id, $2, (SELECT r.last_read_at FROM chat_read_receipts r"
    "     WHERE r.mentorship_id = m.id AND r.user_id = $2))"
    " FROM mentorships m WHERE m.id = $1::uuid";

static void unread_on_loaded(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_PARTICIPATE, &x)) return;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"mentorshipId\":");
    buf_json_str(&b, lower_ascii(req, http_req_param(req, 0)));
    buf_printf(&b, ",\"unreadCount\":%lld}}", db_getll(r, 0, ACCESS_NCOLS, 0));
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void unread(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *mid;
    if (!path_uuid_ok_or_reply(req, 0, &mid, "The mentorship id must be a UUID")) return;
    const char *params[] = {mid, c->user_id};
    db_req_query(req, SQL_UNREAD, 2, params, unread_on_loaded);
}

/* ---- conversations ---- */

/* $1 organization, $2 caller, $3 every mentorship of the organization (else the caller's
 * own), $4 whether the caller has unread counts (participants). Newest last message first;
 * the last message is the stored one of chat_conversations (migration 0010), not a probe of
 * every mentorship's messages. The unread count is chat_unread written out: as a function
 * call per row (not inlined, for its CASE of subqueries) it cost more than the rest.
 * Plain rows (CONV_*), written as JSON in C: building 2,000 objects with json_build_object cost
 * more than the rest of the statement. */
static const char SQL_CONVERSATIONS[] =
    "SELECT m.id, m.title, m.status, ou.id, ou.first_name, ou.last_name, ou.email,"
    "   ou.avatar_url, v.last_message_id, v.last_body, v.last_sender_id, chat_iso(v.last_at),"
    "   CASE WHEN NOT $4::boolean THEN 0 WHEN rr.last_read_at IS NULL THEN"
    "     (SELECT COALESCE(sum(k.n), 0) FROM chat_counts k WHERE k.mentorship_id = m.id"
    "      AND k.sender_id <> $2)"
    "   ELSE (SELECT count(*) FROM chat_messages c WHERE c.mentorship_id = m.id"
    "     AND c.deleted_at IS NULL AND c.sender_id <> $2 AND c.created_at > rr.last_read_at) END"
    " FROM mentorships m"
    " JOIN chat_conversations v ON v.mentorship_id = m.id AND v.last_message_id IS NOT NULL"
    " LEFT JOIN chat_read_receipts rr ON rr.mentorship_id = m.id AND rr.user_id = $2"
    " JOIN users ou ON ou.id = CASE WHEN m.teacher_id = $2 THEN m.coach_id ELSE m.teacher_id END"
    " WHERE m.organization_id = $1::uuid AND ($3::boolean OR $2 IN (m.coach_id, m.teacher_id))"
    " ORDER BY v.last_at DESC, m.id";

enum {
    CONV_ID,
    CONV_TITLE,
    CONV_STATUS,
    CONV_USER_ID,
    CONV_USER_FIRST,
    CONV_USER_LAST,
    CONV_USER_EMAIL,
    CONV_USER_AVATAR,
    CONV_MSG_ID,
    CONV_MSG_BODY,
    CONV_MSG_SENDER,
    CONV_MSG_CREATED,
    CONV_UNREAD,
};

static void conversations_on_rows(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    int n = db_nrows(r);
    buf_t b = BUF_INIT;
    buf_reserve(&b, 64 + (size_t)n * 600);
    buf_puts(&b, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        member(&b, i ? ",{\"mentorshipId\":" : "{\"mentorshipId\":", r, i, CONV_ID);
        member(&b, ",\"mentorshipTitle\":", r, i, CONV_TITLE);
        member(&b, ",\"mentorshipStatus\":", r, i, CONV_STATUS);
        member(&b, ",\"otherUser\":{\"id\":", r, i, CONV_USER_ID);
        member(&b, ",\"firstName\":", r, i, CONV_USER_FIRST);
        member(&b, ",\"lastName\":", r, i, CONV_USER_LAST);
        member(&b, ",\"email\":", r, i, CONV_USER_EMAIL);
        member(&b, ",\"avatar\":", r, i, CONV_USER_AVATAR);
        member(&b, "},\"lastMessage\":{\"id\":", r, i, CONV_MSG_ID);
        member(&b, ",\"body\":", r, i, CONV_MSG_BODY);
        member(&b, ",\"senderId\":", r, i, CONV_MSG_SENDER);
        member(&b, ",\"createdAt\":", r, i, CONV_MSG_CREATED);
        buf_printf(&b, "},\"unreadCount\":%lld}", db_getll(r, i, CONV_UNREAD, 0));
    }
    buf_puts(&b, "]}");
    if (!memmem(b.data, b.len, "\"" STORAGE_REF_PREFIX, strlen(STORAGE_REF_PREFIX) + 1)) {
        http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
        return;
    }
    const char *json = with_urls(req, b.data, b.len);
    buf_free(&b);
    http_reply_json(req, 200, json);
}

static void conversations(http_req_t *req)
{
    caller_t *c = context_caller(req);
    perm_actor_t a = perm_actor(c);
    bool all, counts;
    perm_chat_conversations(&a, &all, &counts);
    const char *params[] = {c->org_id, c->user_id, all ? "true" : "false",
                            counts ? "true" : "false"};
    db_req_query(req, SQL_CONVERSATIONS, 4, params, conversations_on_rows);
}

/* ---- chat token ---- */

static const char SQL_ACCESS[] =
    "SELECT " SQL_ACCESS_COLS " FROM mentorships m WHERE m.id = $1::uuid";

static void token_on_loaded(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_READ, &x)) return;
    if (!cfg.video_app_id || !*cfg.video_app_id || !cfg.video_app_certificate ||
        !*cfg.video_app_certificate) {
        http_reply_error(req, 503, "UNAVAILABLE", "Chat tokens are not configured");
        return;
    }
    uint32_t rnd;
    random_bytes(&rnd, sizeof(rnd));
    uint32_t salt = rnd % 99999999u + 1u;
    uint32_t issue = (uint32_t)time(NULL);
    char *token = NULL;
    if (accesstoken2_rtm(cfg.video_app_id, cfg.video_app_certificate, c->user_id, issue, salt,
                         CHAT_TOKEN_SECONDS, &token) != 0) {
        log_error("req %s: chat token could not be built", req->id);
        http_reply_error(req, 500, "INTERNAL", "internal error");
        return;
    }
    char expires[TIMEFMT_LEN + 1];
    timefmt_format(((int64_t)issue + CHAT_TOKEN_SECONDS) * 1000, expires);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"appId\":");
    buf_json_str(&b, cfg.video_app_id);
    buf_puts(&b, ",\"token\":");
    buf_json_str(&b, token);
    buf_puts(&b, ",\"userId\":");
    buf_json_str(&b, c->user_id);
    buf_puts(&b, ",\"expiresAt\":");
    buf_json_str(&b, expires);
    buf_puts(&b, "}}");
    free(token);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void chat_token(http_req_t *req)
{
    const char *mid;
    if (!path_uuid_ok_or_reply(req, 0, &mid, "The mentorship id must be a UUID")) return;
    const char *params[] = {mid};
    db_req_query(req, SQL_ACCESS, 1, params, token_on_loaded);
}

static const route_t chat_routes[] = {
    {HTTP_M_GET, "/api/chat/conversations", conversations, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_POST, "/api/mentorships/:id/chat/token", chat_token, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_GET, "/api/mentorships/:id/chat/messages", list_messages, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_POST, "/api/mentorships/:id/chat/messages", post_message, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_PATCH, "/api/mentorships/:id/chat/messages/:msgId", edit_message, AUTH_ORG,
     ROLE_TEACHER, 0, 0},
    {HTTP_M_DELETE, "/api/mentorships/:id/chat/messages/:msgId", delete_message, AUTH_ORG,
     ROLE_TEACHER, 0, 0},
    {HTTP_M_POST, "/api/mentorships/:id/chat/messages/:msgId/reactions", add_reaction, AUTH_ORG,
     ROLE_TEACHER, 0, 0},
    {HTTP_M_DELETE, "/api/mentorships/:id/chat/messages/:msgId/reactions/:emoji", remove_reaction,
     AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_PATCH, "/api/mentorships/:id/chat/read-receipt", read_receipt, AUTH_ORG, ROLE_TEACHER,
     0, 0},
    {HTTP_M_GET, "/api/mentorships/:id/chat/unread", unread, AUTH_ORG, ROLE_TEACHER, 0, 0},
};

void routes_chat_register(void)
{
    router_add(chat_routes, sizeof(chat_routes) / sizeof(chat_routes[0]));
}
