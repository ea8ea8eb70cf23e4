/* Caller-context cache (see ctx_cache.h). */
#include "routes/ctx_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/config.h"
#include "core/http.h"
#include "core/mem.h"
#include "domain/token.h"
#include "rt/redis.h"

/* Direct-mapped: a colliding session evicts the other, which only costs it one query. */
#define SLOTS 4096
#define KEY_MAX (TOKEN_HASH_LEN + 1 + 40)

typedef struct entry {
    char key[KEY_MAX];  /* "" when the slot is free */
    uint64_t stored_ms; /* loop time */
    int64_t expires_ms; /* session expiry, epoch ms */
    char *blob;         /* every value of the row, NUL-terminated one after the other */
    ctx_row_t row;      /* pointers into blob */
} entry_t;

static entry_t *slots;
static size_t nused;
static unsigned gen;
static unsigned seen_epoch;

static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void make_key(char out[KEY_MAX], const char *hash, const char *org)
{
    snprintf(out, KEY_MAX, "%s|%s", hash, org ? org : "");
}

static void entry_free(entry_t *e)
{
    if (!e->key[0]) return;
    free(e->blob);
    memset(e, 0, sizeof(*e));
    nused--;
}

static void flush_all(void)
{
    for (size_t i = 0; slots && nused > 0 && i < SLOTS; i++)
        entry_free(&slots[i]);
    gen++;
}

/* Whether the cache may be used now; empties it when messages may have been missed. */
static bool usable(void)
{
    if (cfg.context_cache_ttl_ms <= 0 || !slots) return false;
    unsigned epoch = redis_sub_epoch();
    if (epoch != seen_epoch) {
        seen_epoch = epoch;
        flush_all();
    }
    if (!redis_channel_active(CTX_CHANNEL)) {
        if (nused > 0) flush_all();
        gen++; /* no lookup running now may store its row */
        return false;
    }
    return true;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

unsigned ctx_cache_gen(void)
{
    usable();
    return gen;
}

bool ctx_cache_get(const char *hash, const char *org, ctx_row_t *out)
{
    if (!slots) return false;
    /* Invalidations already on the subscriber socket are applied before an entry is trusted, even
     * when the loop has not polled that socket yet (one recv() per lookup, EAGAIN when idle). */
    redis_sub_drain();
    if (!usable()) return false;
    char key[KEY_MAX];
    make_key(key, hash, org);
    entry_t *e = &slots[fnv(key) % SLOTS];
    if (!e->key[0] || strcmp(e->key, key) != 0) return false;
    if (uv_now(http_loop()) - e->stored_ms >= (uint64_t)cfg.context_cache_ttl_ms ||
        e->expires_ms <= wall_ms()) {
        entry_free(e);
        return false;
    }
    *out = e->row;
    return true;
}

void ctx_cache_put(const char *hash, const char *org, unsigned at_gen, const ctx_row_t *row)
{
    if (!usable() || at_gen != gen) return;
    const char *exp = row->v[CONTEXT_CALLER_SESSION_EXPIRES_MS];
    if (!exp) return;
    size_t total = 0;
    for (int i = 0; i < CONTEXT_CALLER_NCOLS; i++)
        if (row->v[i]) total += (size_t)row->len[i] + 1; /* bounded by the row's own size */
    char key[KEY_MAX];
    make_key(key, hash, org);
    entry_t *e = &slots[fnv(key) % SLOTS];
    entry_free(e);
    e->blob = xmalloc(total ? total : 1);
    char *p = e->blob;
    for (int i = 0; i < CONTEXT_CALLER_NCOLS; i++) {
        if (!row->v[i]) {
            e->row.v[i] = NULL;
            e->row.len[i] = 0;
            continue;
        }
        memcpy(p, row->v[i], (size_t)row->len[i]);
        p[row->len[i]] = '\0';
        e->row.v[i] = p;
        e->row.len[i] = row->len[i];
        p += row->len[i] + 1;
    }
    memcpy(e->key, key, sizeof(key));
    e->stored_ms = uv_now(http_loop());
    e->expires_ms = strtoll(exp, NULL, 10);
    nused++;
}

/* Drops the entries whose column `col` (or `col2`, when >= 0) equals `value`. */
static void drop_matching(int col, int col2, const char *value, bool nocase)
{
    gen++;
    for (size_t i = 0; slots && nused > 0 && i < SLOTS; i++) {
        entry_t *e = &slots[i];
        if (!e->key[0]) continue;
        const char *a = e->row.v[col], *b = col2 >= 0 ? e->row.v[col2] : NULL;
        bool hit = nocase ? (a && strcasecmp(a, value) == 0)
                          : ((a && strcmp(a, value) == 0) || (b && strcmp(b, value) == 0));
        if (hit) entry_free(e);
    }
}

/* Columns of SQL_CALLER that identify what an invalidation names. */
enum { COL_SESSION = 0, COL_CURRENT_ORG = 12, COL_USER = 3, COL_EMAIL = 4, COL_ORG = 18 };

static void apply(const char *msg, size_t len)
{
    if (len < 2 || msg[1] != ':') {
        flush_all();
        return;
    }
    char v[256];
    if (len - 2 >= sizeof(v)) {
        flush_all();
        return;
    }
    memcpy(v, msg + 2, len - 2);
    v[len - 2] = '\0';
    switch (msg[0]) {
    case 's':
        drop_matching(COL_SESSION, -1, v, false);
        break;
    case 'u':
        drop_matching(COL_USER, -1, v, false);
        break;
    case 'e':
        drop_matching(COL_EMAIL, -1, v, true);
        break;
    case 'o':
        drop_matching(COL_ORG, COL_CURRENT_ORG, v, false);
        break;
    default:
        flush_all();
        break;
    }
}

static void on_message(const char *channel, const char *msg, size_t len, void *data)
{
    (void)channel;
    (void)data;
    apply(msg, len);
}

static void invalidate(char kind, const char *value)
{
    if (!value || !*value) return;
    char msg[300];
    int n = snprintf(msg, sizeof(msg), "%c:%s", kind, value);
    if (n < 0 || (size_t)n >= sizeof(msg)) {
        n = snprintf(msg, sizeof(msg), "*");
    }
    /* This worker at once (the caller replies right after), the others through Redis. */
    apply(msg, (size_t)n);
    redis_publish(CTX_CHANNEL, msg, (size_t)n);
    /* Before the writer's HTTP reply: a client that goes on to another worker must find the
     * message there first (it reaches that worker's socket ahead of the client's request). */
    redis_flush();
}

void ctx_invalidate_session(const char *session_id)
{
    invalidate('s', session_id);
}

typedef struct then_state {
    http_req_t *req;
    void (*done)(http_req_t *req);
    int status;
    const char *body; /* in the request's arena */
    size_t len;
    char msg[300];
} then_state_t;

static void on_published(redisReply *reply, void *data)
{
    then_state_t *t = data;
    /* Redis has handed the message to every subscriber before this reply. Without a reply the
     * message goes on the retried queue, and the TTL bounds the rest. */
    if (!reply) redis_publish(CTX_CHANNEL, t->msg, strlen(t->msg));
    if (!http_req_gone(t->req)) {
        if (t->done)
            t->done(t->req);
        else
            http_reply_jsonn(t->req, t->status, t->body, t->len);
    }
    http_req_unref(t->req);
    free(t);
}

static void invalidate_then(http_req_t *req, char kind, const char *value, then_state_t *t)
{
    int n = snprintf(t->msg, sizeof(t->msg), "%c:%s", kind, value ? value : "");
    if (n < 0 || (size_t)n >= sizeof(t->msg) || !value || !*value)
        snprintf(t->msg, sizeof(t->msg), "*");
    apply(t->msg, strlen(t->msg));
    t->req = req;
    http_req_ref(req);
    redis_command(on_published, t, "PUBLISH %s %s", CTX_CHANNEL, t->msg);
    redis_flush();
}

void ctx_invalidate_session_then(http_req_t *req, const char *session_id,
                                 void (*done)(http_req_t *req))
{
    then_state_t *t = xcalloc(1, sizeof(*t));
    t->done = done;
    invalidate_then(req, 's', session_id, t);
}

void ctx_invalidate_then_reply(http_req_t *req, char kind, const char *value, int status,
                               const char *json, size_t len)
{
    if (!json) {
        invalidate(kind, value); /* the write has committed all the same */
        http_reply_error(req, 500, "INTERNAL", "Internal error");
        return;
    }
    then_state_t *t = xcalloc(1, sizeof(*t));
    t->status = status;
    t->body = arena_strndup(&req->arena, json, len);
    t->len = len;
    invalidate_then(req, kind, value, t);
}

void ctx_invalidate_user(const char *user_id)
{
    invalidate('u', user_id);
}

void ctx_invalidate_email(const char *email)
{
    invalidate('e', email);
}

void ctx_invalidate_org(const char *org_id)
{
    invalidate('o', org_id);
}

void ctx_cache_drop_session_local(const char *session_id)
{
    if (session_id) drop_matching(COL_SESSION, -1, session_id, false);
}

void ctx_cache_init(void)
{
    if (cfg.context_cache_ttl_ms <= 0) return;
    slots = xcalloc(SLOTS, sizeof(*slots));
    seen_epoch = redis_sub_epoch();
    redis_set_channel_handler(CTX_CHANNEL, on_message, NULL);
    redis_subscribe(CTX_CHANNEL);
}
