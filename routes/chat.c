/*
 * Chat of a mentorship (docs/api.md "Chat"):
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
 * search pages, and new posts, are written as JSON in C from plain rows; an edited message, and a
 * post found again by its clientMessageId, are rendered by PostgreSQL (chat_message_json,
 * migration 0010) in the statement that reads or writes them. Events
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
#include "db/coalesce.h"
#include "db/db.h"
#include "db/queries.h"
#include "db/q_chat.h"
#include "domain/accesstoken2.h"
#include "domain/ids.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/file_urls.h"
#include "routes/context.h"
#include "routes/page_cache.h"
#include "routes/perm.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/outbox.h"

#define CHAT_TOKEN_SECONDS 3600
#define CHAT_BODY_MAX 4000
#define CHAT_ATTACHMENTS_MAX 5
#define CHAT_LIMIT_DEFAULT 20
#define CHAT_LIMIT_MAX 100
#define CHAT_SEARCH_MAX 50
#define CHAT_SEARCH_TERM_MAX 200
#define CHAT_EMOJI_MAX 8
/* What a message carries that becomes a URL: attachment keys and avatar references. */
#define CHAT_URLS (FILE_URLS_KEYS | FILE_URLS_REFS)

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

/* Every access read starts with the columns of chat_access (db/queries/chat.sql): organization,
 * coach, teacher, and the organization's active Managers and OrganizationAdmins as a
 * comma-separated list (the event recipients). access_or_replied reads them with chat_access's
 * enum; each statement's own enum must agree. */
#define SAME_ACCESS_COLS(S)                                                                        \
    DB_SAME_COLUMN(S, CHAT_ACCESS, ORGANIZATION_ID);                                               \
    DB_SAME_COLUMN(S, CHAT_ACCESS, COACH_ID);                                                      \
    DB_SAME_COLUMN(S, CHAT_ACCESS, TEACHER_ID);                                                    \
    DB_SAME_COLUMN(S, CHAT_ACCESS, ADMINS)
SAME_ACCESS_COLS(CHAT_HISTORY);
SAME_ACCESS_COLS(CHAT_HISTORY_VERSION);
SAME_ACCESS_COLS(CHAT_POST_LOAD);
SAME_ACCESS_COLS(CHAT_MSG_LOAD);
SAME_ACCESS_COLS(CHAT_RECEIPT_LOAD);
/* A batch of posts comes back in the layout of a history page, and message_row() writes both. */
#define SAME_MESSAGE_COLS(S)                                                                       \
    DB_SAME_COLUMN(S, CHAT_HISTORY, ID);                                                           \
    DB_SAME_COLUMN(S, CHAT_HISTORY, SENDER_ID);                                                    \
    DB_SAME_COLUMN(S, CHAT_HISTORY, BODY);                                                         \
    DB_SAME_COLUMN(S, CHAT_HISTORY, CLIENT_MESSAGE_ID);                                            \
    DB_SAME_COLUMN(S, CHAT_HISTORY, CREATED_AT);                                                   \
    DB_SAME_COLUMN(S, CHAT_HISTORY, EDITED_AT);                                                    \
    DB_SAME_COLUMN(S, CHAT_HISTORY, DELETED_AT);                                                   \
    DB_SAME_COLUMN(S, CHAT_HISTORY, REPLY_TO_MESSAGE_ID);                                          \
    DB_SAME_COLUMN(S, CHAT_HISTORY, REPLY_ID);                                                     \
    DB_SAME_COLUMN(S, CHAT_HISTORY, REPLY_SENDER_ID);                                              \
    DB_SAME_COLUMN(S, CHAT_HISTORY, REPLY_SENDER_NAME);                                            \
    DB_SAME_COLUMN(S, CHAT_HISTORY, REPLY_BODY);                                                   \
    DB_SAME_COLUMN(S, CHAT_HISTORY, USER_ID);                                                      \
    DB_SAME_COLUMN(S, CHAT_HISTORY, USER_FIRST_NAME);                                              \
    DB_SAME_COLUMN(S, CHAT_HISTORY, USER_LAST_NAME);                                               \
    DB_SAME_COLUMN(S, CHAT_HISTORY, USER_EMAIL);                                                   \
    DB_SAME_COLUMN(S, CHAT_HISTORY, USER_AVATAR_URL);                                              \
    DB_SAME_COLUMN(S, CHAT_HISTORY, ATTACHMENTS);                                                  \
    DB_SAME_COLUMN(S, CHAT_HISTORY, REACTIONS)
SAME_MESSAGE_COLS(CHAT_POST_INSERT);
SAME_ACCESS_COLS(CHAT_UNREAD);

/* What the access read found, copied into the arena. */
typedef struct chat_ctx {
    const char *mentorship_id, *coach_id, *teacher_id, *admins;
    bool participant;
} chat_ctx_t;

/* Replies 404 / 403 and returns false when the caller may not do what `need` says
 * (perm_chat_access()); fills x from row `row` of the access read otherwise (-1 or past the
 * last row: not found). */
static bool access_row_or_replied(http_req_t *req, const db_result_t *r, int row,
                                  perm_chat_need_t need, chat_ctx_t *x)
{
    perm_actor_t a = perm_actor(context_caller(req));
    bool found = row >= 0 && db_nrows(r) > row;
    if (!perm_allowed_or_replied(
            req, perm_chat_access(
                     &a, need, found ? db_get(r, row, CHAT_ACCESS_ORGANIZATION_ID) : NULL,
                     found ? db_get(r, row, CHAT_ACCESS_COACH_ID) : NULL,
                     found ? db_get(r, row, CHAT_ACCESS_TEACHER_ID) : NULL, &x->participant)))
        return false;
    x->coach_id = arena_strdup(&req->arena, db_get(r, row, CHAT_ACCESS_COACH_ID));
    x->teacher_id = arena_strdup(&req->arena, db_get(r, row, CHAT_ACCESS_TEACHER_ID));
    x->admins = db_isnull(r, row, CHAT_ACCESS_ADMINS)
                    ? ""
                    : arena_strdup(&req->arena, db_get(r, row, CHAT_ACCESS_ADMINS));
    return true;
}

static bool access_or_replied(http_req_t *req, const db_result_t *r, perm_chat_need_t need,
                              chat_ctx_t *x)
{
    return access_row_or_replied(req, r, 0, need, x);
}

/* Publishes after commit on the mentorship's channel and the user channels of the coach, the
 * teacher, the organization's administrators and the caller: one event, so it has one id on
 * every channel (rt/events.c), however many administrators there are. */
static void publish(http_req_t *req, const chat_ctx_t *x, const char *event, const char *data)
{
    caller_t *c = context_caller(req);
    char *list = arena_strdup(&req->arena, x->admins ? x->admins : "");
    size_t cap = 4; /* coach, teacher, caller, and one more administrator than commas */
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    const char **users = arena_alloc(&req->arena, cap * sizeof(*users));
    size_t n = 0;
    users[n++] = x->coach_id;
    users[n++] = x->teacher_id;
    users[n++] = c->user_id;
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        users[n++] = t;
    events_publish_to(c->org_id, x->mentorship_id, users, n, event, data);
}

/* ---- ids and fields ---- */

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

/* The JSON text with attachment and avatar urls filled in (routes/file_urls.h), in the arena:
 * answers and events alike. */
static const char *with_urls(http_req_t *req, const char *json, size_t len)
{
    if (!json) return NULL;
    size_t n;
    const char *out = file_urls_render(req, json, len, CHAT_URLS, &n);
    return out == json ? arena_strndup(&req->arena, json, len) : out;
}

static void reply_data(http_req_t *req, int status, const char *obj)
{
    http_reply_json(req, status, arena_printf(&req->arena, "{\"data\":%s}", obj));
}

/* ---- history and search ---- */

/* Rendered first history pages (no cursor, no search term) of this worker, keyed by mentorship
 * and limit, at the mentorship's chat history version (routes/page_cache.h). The page is the
 * same for every caller who may read it; attachment and avatar urls are not part of it: they
 * are presigned when a page is sent (with_urls). A request finding a page runs one query, the
 * mentorship's access columns and current version, instead of the page statement. */
static page_cache_t history_pages;

/* One ChatMessage (the shape of chat_message_obj, migration 0010) from row i of a page. */
static void message_row(buf_t *b, const db_result_t *r, int i, const char *mentorship_id)
{
    json_member(b, "{\"id\":", r, i, CHAT_HISTORY_ID);
    buf_puts(b, ",\"mentorshipId\":");
    buf_json_str(b, mentorship_id);
    json_member(b, ",\"senderId\":", r, i, CHAT_HISTORY_SENDER_ID);
    json_member(b, ",\"body\":", r, i, CHAT_HISTORY_BODY);
    json_member(b, ",\"clientMessageId\":", r, i, CHAT_HISTORY_CLIENT_MESSAGE_ID);
    json_member(b, ",\"createdAt\":", r, i, CHAT_HISTORY_CREATED_AT);
    json_member(b, ",\"editedAt\":", r, i, CHAT_HISTORY_EDITED_AT);
    json_member(b, ",\"deletedAt\":", r, i, CHAT_HISTORY_DELETED_AT);
    json_member(b, ",\"replyToMessageId\":", r, i, CHAT_HISTORY_REPLY_TO_MESSAGE_ID);
    if (db_isnull(r, i, CHAT_HISTORY_REPLY_ID)) {
        buf_puts(b, ",\"replyTo\":null");
    } else {
        json_member(b, ",\"replyTo\":{\"id\":", r, i, CHAT_HISTORY_REPLY_ID);
        json_member(b, ",\"senderId\":", r, i, CHAT_HISTORY_REPLY_SENDER_ID);
        json_member(b, ",\"senderName\":", r, i, CHAT_HISTORY_REPLY_SENDER_NAME);
        json_member(b, ",\"body\":", r, i, CHAT_HISTORY_REPLY_BODY);
        buf_putc(b, '}');
    }
    buf_puts(b, ",\"attachments\":");
    buf_puts(b, db_isnull(r, i, CHAT_HISTORY_ATTACHMENTS) ? "[]"
                                                          : db_get(r, i, CHAT_HISTORY_ATTACHMENTS));
    buf_puts(b, ",\"reactions\":");
    buf_puts(b,
             db_isnull(r, i, CHAT_HISTORY_REACTIONS) ? "[]" : db_get(r, i, CHAT_HISTORY_REACTIONS));
    if (db_isnull(r, i, CHAT_HISTORY_USER_ID)) {
        buf_puts(b, ",\"sender\":null}");
    } else {
        json_member(b, ",\"sender\":{\"id\":", r, i, CHAT_HISTORY_USER_ID);
        json_member(b, ",\"firstName\":", r, i, CHAT_HISTORY_USER_FIRST_NAME);
        json_member(b, ",\"lastName\":", r, i, CHAT_HISTORY_USER_LAST_NAME);
        json_member(b, ",\"email\":", r, i, CHAT_HISTORY_USER_EMAIL);
        json_member(b, ",\"avatar\":", r, i, CHAT_HISTORY_USER_AVATAR_URL);
        buf_puts(b, "}}");
    }
}

/* What history_on_page needs of the request. */
typedef struct page_req {
    int limit;
    bool search;
    const char *key; /* first history page: its key in history_pages */
} page_req_t;

/* Sends a rendered page (and frees it), with attachment and avatar urls presigned now. */
static void reply_page(http_req_t *req, buf_t *b)
{
    if (!file_urls_needed(b->data, b->len, CHAT_URLS)) {
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
    int n = db_isnull(r, 0, CHAT_HISTORY_ID) ? 0 : db_nrows(r);
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
    buf_json_str(&b, n && !pr->search ? db_get(r, n - 1, CHAT_HISTORY_CREATED_AT) : NULL);
    buf_puts(&b, more ? ",\"hasMore\":true}}" : ",\"hasMore\":false}}");
    if (pr->key)
        page_cache_put(&history_pages, pr->key, page_row_version(r, CHAT_HISTORY_VERSION), b.data,
                       b.len);
    reply_page(req, &b);
}

/* A cached first page was found: reuse it when the version is still current, else read. */
static void history_on_version(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_READ, &x)) return;
    const page_req_t *pr = req->data;
    const page_entry_t *e =
        page_cache_get(&history_pages, pr->key, page_row_version(r, CHAT_HISTORY_VERSION_VERSION));
    if (e && !file_urls_needed(e->body, e->len, CHAT_URLS)) {
        req->body_compact = true; /* stored compact (page_cache_put) */
        http_reply_jsonn(req, 200, e->body, e->len);
        return;
    }
    if (e) {
        http_reply_json(req, 200, with_urls(req, e->body, e->len));
        return;
    }
    const char *mid = lower_ascii(req, http_req_param(req, 0));
    const char *params[] = {mid, NULL, arena_printf(&req->arena, "%d", pr->limit)};
    db_req_query(req, SQL_CHAT_HISTORY, 3, params, history_on_page);
}

static void list_messages(http_req_t *req)
{
    const char *mid;
    if (!path_uuid_ok_or_reply(req, 0, &mid)) return;
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
    /* PostgreSQL gets the cursor as this server writes it, never as the client spelled it: its
     * own reading differs (a decimal comma, offsets past +-15:59 are errors there, a seventh
     * fraction digit rounds). */
    int64_t us;
    if (before && timefmt_parse_us(before, &us) != 0) {
        verr_add(&v, "before", "must be an ISO 8601 date-time (a nextCursor)");
    } else if (before) {
        char iso[TIMEFMT_US_LEN + 1];
        timefmt_format_us(us, iso);
        before = arena_strdup(&req->arena, iso);
    }
    if (verr_reply(req, &v)) return;
    if (term && limit > CHAT_SEARCH_MAX) limit = CHAT_SEARCH_MAX;
    const char *lim = arena_printf(&req->arena, "%d", limit);
    page_req_t *pr = arena_calloc(&req->arena, sizeof(*pr));
    pr->limit = limit;
    pr->search = term != NULL;
    req->data = pr;
    if (term) {
        const char *params[] = {mid, before, lim, term};
        db_req_query(req, SQL_CHAT_SEARCH, 4, params, history_on_page);
    } else if (!before) {
        const char *fields[] = {mid, lim};
        pr->key = page_cache_key(req, 2, fields);
        const char *params[] = {mid, NULL, lim};
        if (page_cache_has(&history_pages, pr->key))
            db_req_query(req, SQL_CHAT_HISTORY_VERSION, 1, params, history_on_version);
        else
            db_req_query(req, SQL_CHAT_HISTORY, 3, params, history_on_page);
    } else {
        const char *params[] = {mid, before, lim};
        db_req_query(req, SQL_CHAT_HISTORY, 3, params, history_on_page);
    }
}

/* ---- post ----
 *
 * A post goes through two coalescers (db/coalesce.h), so that under load a statement and a
 * commit serve many posts:
 *
 *   - its access read (chat_post_load: the mentorship's access columns, whether its
 *     clientMessageId was seen, whether its reply target is in the mentorship, its attachment
 *     files) joins the other posts read in the same loop turn, of any mentorship: a one-row
 *     statement per post was most of PostgreSQL's CPU per post under a burst. Every post of a
 *     group arrived before its statement was sent, so each sees everything committed before it
 *     arrived.
 *   - its insert (chat_post_insert) joins the posts that wait while POST_INFLIGHT_MAX inserts
 *     are in flight, of any mentorship, up to POST_BATCH_MAX: one statement and one commit (WAL
 *     flush) for the group. A post with attachments takes the same statement. The statement
 *     takes the clock rows of its mentorships in id order, so concurrent inserts (the second of
 *     this worker, those of other workers) that share a mentorship wait for each other and
 *     never deadlock; posts of one mentorship commit in createdAt order. Two in flight, not
 *     one: the second waits on the clock rows inside PostgreSQL and starts the moment the first
 *     commits, instead of after its answer has come back and been handled. The posts whose access
 *     reads came back in one loop turn go together at its end (a lone post waits for nothing
 *     but that turn's other callbacks). When a group fails (a reply target or a sender removed
 *     meanwhile), each of its posts is sent again alone and gets its own answer.
 *
 * The answer (201) and the events leave after the insert committed; the push rows are queued
 * by the insert itself. */
#define POST_BATCH_MAX 64
#define POST_INFLIGHT_MAX 2

typedef struct post_state {
    chat_ctx_t x;
    char id[IDS_UUID_LEN + 1];
    const char *body, *client_id, *reply_to, *attachments;
    int nattachments;
} post_state_t;

static db_coalesce_t *post_loads, *post_inserts;

static void post_on_existing(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        /* The message that won the race was rolled back after all: the client may retry. */
        http_reply_error(req, 409, "CONFLICT", "A message with this clientMessageId is in flight");
        return;
    }
    reply_data(req, 200,
               with_urls(req, db_get(r, 0, CHAT_POST_EXISTING_MESSAGE),
                         db_getlen(r, 0, CHAT_POST_EXISTING_MESSAGE)));
}

/* The post committed (json: the new message, pushes: push rows queued), or (json NULL) another
 * request with the same clientMessageId committed first. */
static void post_finish(http_req_t *req, const char *json, size_t len, long long pushes)
{
    post_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!json) {
        const char *params[] = {st->x.mentorship_id, c->user_id, st->client_id};
        db_req_query(req, SQL_CHAT_POST_EXISTING, 3, params, post_on_existing);
        return;
    }
    const char *msg = with_urls(req, json, len);
    if (pushes > 0) outbox_kick();
    publish(req, &st->x, "chat-message", msg);
    reply_data(req, 201, msg);
}

/* A waiting post whose client left is not sent (db/coalesce.h "gone"). */
static bool post_gone(void *data)
{
    return http_req_gone(data);
}

static void post_on_inserted(db_result_t *r, int row, void *data)
{
    http_req_t *req = data;
    post_state_t *st = req->data;
    if (!r || http_req_gone(req)) {
        /* The client left: as for any request, the result is dropped. */
    } else if (db_ok_or_reply(req, r)) {
        if (row < 0) {
            post_finish(req, NULL, 0, 0);
        } else {
            buf_t b = BUF_INIT;
            message_row(&b, r, row, st->x.mentorship_id);
            post_finish(req, b.data, b.len, db_getll(r, row, CHAT_POST_INSERT_PUSHES, 0));
            buf_free(&b);
        }
    }
    http_req_unref(req);
}

/* The post's checks on its row of the access read, then its insert. */
static void post_on_loaded(db_result_t *r, int row, void *data)
{
    http_req_t *req = data;
    post_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!r || http_req_gone(req) || !db_ok_or_reply(req, r) ||
        !access_row_or_replied(req, r, row, PERM_CHAT_PARTICIPATE, &st->x)) {
        http_req_unref(req);
        return;
    }
    if (!db_isnull(r, row, CHAT_POST_LOAD_EXISTING)) {
        reply_data(req, 200,
                   with_urls(req, db_get(r, row, CHAT_POST_LOAD_EXISTING),
                             db_getlen(r, row, CHAT_POST_LOAD_EXISTING)));
    } else if (st->reply_to && (db_isnull(r, row, CHAT_POST_LOAD_REPLY_HERE) ||
                                db_get(r, row, CHAT_POST_LOAD_REPLY_HERE)[0] != 't')) {
        http_reply_error(req, 422, "UNPROCESSABLE",
                         "replyToMessageId is not a message of this mentorship");
    } else if (db_getll(r, row, CHAT_POST_LOAD_FILES_FOUND, 0) < st->nattachments) {
        http_reply_error(req, 404, "NOT_FOUND", "An attached file does not exist");
    } else if (db_getll(r, row, CHAT_POST_LOAD_FILES_OWN, 0) < st->nattachments) {
        http_reply_error(req, 403, "FORBIDDEN", "Only files you uploaded can be attached");
    } else {
        /* The reference taken for the access read is kept for the insert. */
        const char *params[] = {st->id,          st->x.mentorship_id, c->user_id,
                                st->body,        st->client_id,       st->reply_to,
                                st->attachments, c->display_name};
        db_coalesce_add(post_inserts, "", params, post_on_inserted, req);
        return;
    }
    http_req_unref(req);
}

static void post_message(http_req_t *req)
{
    caller_t *c = context_caller(req);
    post_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (!path_uuid_ok_or_reply(req, 0, &st->x.mentorship_id)) return;
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
    http_req_ref(req); /* held until the post's last coalesced statement answered */
    const char *params[] = {st->x.mentorship_id, c->user_id, st->client_id, st->reply_to,
                            st->attachments};
    db_coalesce_add(post_loads, "", params, post_on_loaded, req);
}

/* ---- one message: edit, delete, reactions ---- */

typedef enum msg_op { OP_EDIT, OP_DELETE, OP_REACT, OP_UNREACT } msg_op_t;

typedef struct msg_state {
    chat_ctx_t x;
    msg_op_t op;
    const char *msg_id;
    const char *body;  /* edit */
    const char *emoji; /* reactions */
} msg_state_t;

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
    const char *msg =
        with_urls(req, db_get(r, 0, CHAT_EDIT_MESSAGE), db_getlen(r, 0, CHAT_EDIT_MESSAGE));
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
    const char *reactions = db_get(r, 0, CHAT_REACTIONS_REACTIONS);
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
    if (db_get(r, 0, CHAT_REACT_LIVE)[0] != 't') {
        msg_not_found(req);
        return;
    }
    st->changed = db_get(r, 0, CHAT_REACT_CHANGED)[0] == 't';
    const char *params[] = {st->m.msg_id};
    db_req_query(req, SQL_CHAT_REACTIONS, 1, params, react_on_reactions);
}

static void msg_on_loaded(http_req_t *req, db_result_t *r)
{
    msg_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    perm_chat_need_t need = st->op == OP_DELETE ? PERM_CHAT_READ : PERM_CHAT_PARTICIPATE;
    if (!access_or_replied(req, r, need, &st->x)) return;
    if (db_isnull(r, 0, CHAT_MSG_LOAD_SENDER_ID) || db_get(r, 0, CHAT_MSG_LOAD_DELETED)[0] == 't') {
        msg_not_found(req);
        return;
    }
    bool own = strcmp(db_get(r, 0, CHAT_MSG_LOAD_SENDER_ID), c->user_id) == 0;
    switch (st->op) {
    case OP_EDIT: {
        if (!perm_allowed_or_replied(req, perm_chat_edit(own))) return;
        if (db_get(r, 0, CHAT_MSG_LOAD_EDITABLE)[0] != 't') {
            http_reply_error(req, 422, "EDIT_WINDOW_EXPIRED",
                             "A message can be edited for 15 minutes after it was sent");
            return;
        }
        const char *params[] = {st->x.mentorship_id, st->msg_id, st->body, c->user_id};
        db_req_query(req, SQL_CHAT_EDIT, 4, params, edit_on_updated);
        return;
    }
    case OP_DELETE: {
        /* The sender, the organization's Managers and OrganizationAdmins, PlatformAdmin, Owner. */
        perm_actor_t a = perm_actor(c);
        if (!perm_allowed_or_replied(req, perm_chat_delete(&a, own))) return;
        const char *params[] = {st->x.mentorship_id, st->msg_id, c->user_id};
        db_req_query(req, SQL_CHAT_DELETE, 3, params, delete_on_done);
        return;
    }
    case OP_REACT:
    case OP_UNREACT: {
        const char *params[] = {st->msg_id, st->emoji, c->user_id};
        db_req_query(req, st->op == OP_REACT ? SQL_CHAT_REACT : SQL_CHAT_UNREACT, 3, params,
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
    if (!path_uuid_ok_or_reply(req, 0, &st->x.mentorship_id)) return NULL;
    if (!path_uuid_ok_or_reply(req, 1, &st->msg_id)) return NULL;
    return st;
}

static void msg_load(http_req_t *req, msg_state_t *st)
{
    req->data = st;
    const char *params[] = {st->x.mentorship_id, st->msg_id};
    db_req_query(req, SQL_CHAT_MSG_LOAD, 2, params, msg_on_loaded);
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
        path_param_reply_invalid(req, 2, "must be 1 to 8 characters without spaces");
        return;
    }
    st->emoji = e;
    msg_load(req, st);
}

/* ---- read receipts and unread counts ---- */

/* A read receipt: the message is checked to be one of the mentorship's (chat_receipt_load),
 * then the receipt moves only forward (chat_receipt). */
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
    if (db_get(r, 0, CHAT_RECEIPT_LOAD_MESSAGE_HERE)[0] != 't') {
        msg_not_found(req);
        return;
    }
    const char *params[] = {st->x.mentorship_id, st->msg_id, c->user_id};
    db_req_query(req, SQL_CHAT_RECEIPT, 3, params, receipt_on_done);
}

static void read_receipt(http_req_t *req)
{
    receipt_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    if (!path_uuid_ok_or_reply(req, 0, &st->x.mentorship_id)) return;
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
    db_req_query(req, SQL_CHAT_RECEIPT_LOAD, 2, params, receipt_on_loaded);
}

static void unread_on_loaded(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_PARTICIPATE, &x)) return;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"mentorshipId\":");
    buf_json_str(&b, lower_ascii(req, http_req_param(req, 0)));
    buf_printf(&b, ",\"unreadCount\":%lld}}", db_getll(r, 0, CHAT_UNREAD_UNREAD_COUNT, 0));
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void unread(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *mid;
    if (!path_uuid_ok_or_reply(req, 0, &mid)) return;
    const char *params[] = {mid, c->user_id};
    db_req_query(req, SQL_CHAT_UNREAD, 2, params, unread_on_loaded);
}

/* ---- conversations ---- */

static void conversations_on_rows(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    int n = db_nrows(r);
    buf_t b = BUF_INIT;
    buf_reserve(&b, 64 + (size_t)n * 600);
    buf_puts(&b, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        json_member(&b, i ? ",{\"mentorshipId\":" : "{\"mentorshipId\":", r, i,
                    CHAT_CONVERSATIONS_MENTORSHIP_ID);
        json_member(&b, ",\"mentorshipTitle\":", r, i, CHAT_CONVERSATIONS_TITLE);
        json_member(&b, ",\"mentorshipStatus\":", r, i, CHAT_CONVERSATIONS_STATUS);
        json_member(&b, ",\"otherUser\":{\"id\":", r, i, CHAT_CONVERSATIONS_USER_ID);
        json_member(&b, ",\"firstName\":", r, i, CHAT_CONVERSATIONS_USER_FIRST_NAME);
        json_member(&b, ",\"lastName\":", r, i, CHAT_CONVERSATIONS_USER_LAST_NAME);
        json_member(&b, ",\"email\":", r, i, CHAT_CONVERSATIONS_USER_EMAIL);
        json_member(&b, ",\"avatar\":", r, i, CHAT_CONVERSATIONS_USER_AVATAR_URL);
        json_member(&b, "},\"lastMessage\":{\"id\":", r, i, CHAT_CONVERSATIONS_LAST_MESSAGE_ID);
        json_member(&b, ",\"body\":", r, i, CHAT_CONVERSATIONS_LAST_BODY);
        json_member(&b, ",\"senderId\":", r, i, CHAT_CONVERSATIONS_LAST_SENDER_ID);
        json_member(&b, ",\"createdAt\":", r, i, CHAT_CONVERSATIONS_LAST_AT);
        buf_printf(&b, "},\"unreadCount\":%lld}",
                   db_getll(r, i, CHAT_CONVERSATIONS_UNREAD_COUNT, 0));
    }
    buf_puts(&b, "]}");
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b); /* avatars: the filter */
}

static void conversations(http_req_t *req)
{
    caller_t *c = context_caller(req);
    perm_actor_t a = perm_actor(c);
    bool all, counts;
    perm_chat_conversations(&a, &all, &counts);
    const char *params[] = {c->org_id, c->user_id, all ? "true" : "false",
                            counts ? "true" : "false"};
    db_req_query(req, SQL_CHAT_CONVERSATIONS, 4, params, conversations_on_rows);
}

/* ---- chat token ---- */

static void token_on_loaded(http_req_t *req, db_result_t *r)
{
    chat_ctx_t x = {0};
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    if (!access_or_replied(req, r, PERM_CHAT_READ, &x)) return;
    if (!cfg.video_app_id || !*cfg.video_app_id || !cfg.video_app_certificate ||
        !*cfg.video_app_certificate) {
        http_reply_error(
            req, 503, "UNAVAILABLE",
            "Chat tokens are not configured: set VIDEO_APP_ID and VIDEO_APP_CERTIFICATE");
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
    if (!path_uuid_ok_or_reply(req, 0, &mid)) return;
    const char *params[] = {mid};
    db_req_query(req, SQL_CHAT_ACCESS, 1, params, token_on_loaded);
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
    post_loads = db_coalesce_new(&(db_coalesce_opts_t){
        .sql = SQL_CHAT_POST_LOAD,
        .nparams = 5,
        .ord_col = CHAT_POST_LOAD_ORD,
        .mode = DB_COALESCE_TURN,
        .batch_max = POST_BATCH_MAX,
        .gone = post_gone,
    });
    post_inserts = db_coalesce_new(&(db_coalesce_opts_t){
        .sql = SQL_CHAT_POST_INSERT,
        .nparams = 8,
        .ord_col = CHAT_POST_INSERT_ORD,
        .mode = DB_COALESCE_INFLIGHT,
        .inflight_max = POST_INFLIGHT_MAX,
        .batch_max = POST_BATCH_MAX,
        .first = true,       /* it takes clock rows other posts wait on */
        .retry_alone = true, /* one post's bad row must not fail the others */
        .gone = post_gone,
        .deliver_begin = events_batch_begin, /* a group's events go to Redis in one call */
        .deliver_end = events_batch_end,
    });
}
