/* Caller-context cache (see ctx_cache.h). */
#include "routes/ctx_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/hash.h"
#include "core/http.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/random.h"
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

/* Acknowledged invalidation and the lease (see ctx_cache.h). */
#define LEASE_MS 200                   /* X: a hit needs a heartbeat received at most this old */
#define HEARTBEAT_MS (LEASE_MS / 4)    /* how often a heartbeat is sent */
#define ACK_WAIT_MS (LEASE_MS * 3 / 2) /* W: the longest a writer waits for its acks */
#define ID_LEN 16                      /* hex digits of a worker id */
#define MSG_MAX 320

static char worker_id[ID_LEN + 1];
static char ack_channel[sizeof("coachd:ctx-ack:") + ID_LEN];
static char hb_channel[sizeof("coachd:ctx-hb:") + ID_LEN];
static uint64_t lease_sent_ns; /* uv_hrtime() at the sending of the newest heartbeat received */
static uv_timer_t hb_timer, wait_timer;

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

/* Whether the cache may be used now; empties it when messages may have been missed. A lookup
 * that started before the subscription was (again) active may have read a row that an
 * invalidation published meanwhile, which this worker never got, made stale: the generation moves
 * when the subscription becomes active, so such a lookup does not store its row. */
static bool usable(void)
{
    static bool was_active;
    if (cfg.context_cache_ttl_ms <= 0 || !slots) return false;
    unsigned epoch = redis_sub_epoch();
    if (epoch != seen_epoch) {
        seen_epoch = epoch;
        lease_sent_ns = 0; /* a hit needs a heartbeat through the new connection */
        flush_all();
    }
    if (!redis_channel_active(CTX_CHANNEL)) {
        if (nused > 0) flush_all();
        gen++; /* no lookup running now may store its row */
        was_active = false;
        return false;
    }
    if (!was_active) {
        was_active = true;
        flush_all();
    }
    return true;
}

/* The lease: this worker's own heartbeat came back through its subscriber connection less than
 * LEASE_MS after it was sent, so every invalidation Redis handled LEASE_MS ago or earlier has
 * been applied here. */
static bool lease_held(void)
{
    return lease_sent_ns && uv_hrtime() - lease_sent_ns <= (uint64_t)LEASE_MS * 1000000u;
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
     * when the loop has not polled that socket yet (one recv() per loop turn, EAGAIN when idle). */
    redis_sub_drain();
    if (!usable() || !lease_held()) return false;
    char key[KEY_MAX];
    make_key(key, hash, org);
    entry_t *e = &slots[fnv1a(key) % SLOTS];
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
    entry_t *e = &slots[fnv1a(key) % SLOTS];
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

/* ---- waiting writers ------------------------------------------------------------------------ */

/* A write waiting for the acknowledgements of its invalidation. In PUBLISH order, which is the
 * order of the PUBLISH replies (one connection), so the ones with a deadline are a prefix. */
typedef struct waiter waiter_t;
struct waiter {
    waiter_t *prev, *next;
    uint64_t nonce;
    long long receivers;  /* PUBLISH's reply: subscribers that got the message; -1 until known */
    long long acks;       /* acknowledgements received (this worker's own included) */
    uint64_t deadline_ns; /* uv_hrtime() of the reply + ACK_WAIT_MS; 0 until the reply */
    http_req_t *req;
    void (*done)(http_req_t *req);
    int status;
    const char *body; /* in the request's arena */
    size_t len;
    char msg[MSG_MAX]; /* "k:value" */
};

static waiter_t *wait_head, *wait_tail;
static uint64_t next_nonce = 1;

static waiter_t *waiter_find(uint64_t nonce)
{
    for (waiter_t *w = wait_head; w; w = w->next)
        if (w->nonce == nonce) return w;
    return NULL;
}

static void waiter_finish(waiter_t *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        wait_head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        wait_tail = w->prev;
    if (!http_req_gone(w->req)) {
        if (w->done)
            w->done(w->req);
        else
            http_reply_jsonn(w->req, w->status, w->body, w->len);
    }
    http_req_unref(w->req);
    free(w);
}

static void arm_wait_timer(void);

static void on_wait_timer(uv_timer_t *t)
{
    (void)t;
    uint64_t now = uv_hrtime();
    while (wait_head && wait_head->deadline_ns && wait_head->deadline_ns <= now) {
        waiter_t *w = wait_head;
        log_warn("context cache: %lld of %lld workers acknowledged an invalidation within %d ms",
                 w->acks, w->receivers, ACK_WAIT_MS);
        waiter_finish(w);
    }
    arm_wait_timer();
}

/* The timer follows the oldest deadline; the loop's clock may lag the real one, so a deadline is
 * checked against uv_hrtime() when the timer fires and the timer re-armed if it came early. */
static void arm_wait_timer(void)
{
    if (!wait_head || !wait_head->deadline_ns) {
        uv_timer_stop(&wait_timer);
        return;
    }
    uint64_t now = uv_hrtime();
    uint64_t left = wait_head->deadline_ns > now ? wait_head->deadline_ns - now : 0;
    uv_timer_start(&wait_timer, on_wait_timer, left / 1000000u + 1, 0);
}

static void waiter_check(waiter_t *w)
{
    if (w->receivers >= 0 && w->acks >= w->receivers) {
        bool head = w == wait_head;
        waiter_finish(w);
        if (head) arm_wait_timer();
    }
}

static void on_published(redisReply *reply, void *data)
{
    waiter_t *w = data;
    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        /* Not handed to anyone (Redis unreachable from here): sent again once it is back, and
         * the TTL bounds the rest (ctx_cache.h, "What is not covered"). */
        if (!reply) redis_publish(CTX_CHANNEL, w->msg, strlen(w->msg));
        bool head = w == wait_head;
        waiter_finish(w);
        if (head) arm_wait_timer();
        return;
    }
    w->receivers = reply->integer;
    w->deadline_ns = uv_hrtime() + (uint64_t)ACK_WAIT_MS * 1000000u;
    if (w == wait_head && !uv_is_active((uv_handle_t *)&wait_timer)) arm_wait_timer();
    waiter_check(w);
}

/* ---- messages ---------------------------------------------------------------------------------
 */

/* "<writer id> <nonce> <k:value>" on CTX_CHANNEL: applied, then acknowledged to the writer (a
 * nonce 0 asks for no acknowledgement). Anything else empties the cache. */
static void on_invalidation(const char *channel, const char *msg, size_t len, void *data)
{
    (void)channel;
    (void)data;
    char buf[MSG_MAX + ID_LEN + 24];
    if (len >= sizeof(buf)) {
        flush_all();
        return;
    }
    memcpy(buf, msg, len);
    buf[len] = '\0';
    char *sp1 = strchr(buf, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || sp1 - buf != ID_LEN) {
        flush_all();
        return;
    }
    *sp1 = *sp2 = '\0';
    uint64_t nonce = strtoull(sp1 + 1, NULL, 10);
    apply(sp2 + 1, strlen(sp2 + 1));
    if (nonce == 0) return;
    if (strcmp(buf, worker_id) == 0) {
        waiter_t *w = waiter_find(nonce);
        if (w) {
            w->acks++;
            waiter_check(w);
        }
        return;
    }
    char ch[sizeof(ack_channel)];
    memcpy(ch, "coachd:ctx-ack:", sizeof("coachd:ctx-ack:") - 1);
    memcpy(ch + sizeof("coachd:ctx-ack:") - 1, buf, ID_LEN + 1); /* buf is ID_LEN long */
    /* No retry: an acknowledgement that is lost costs the writer ACK_WAIT_MS, and the lease
     * covers this worker meanwhile. */
    redis_command(NULL, NULL, "PUBLISH %s %s", ch, sp1 + 1);
    redis_flush();
}

/* The decimal number a message of this module's own channels carries (a nonce, a send time);
 * false when it is not one. */
static bool msg_u64(const char *msg, size_t len, uint64_t *out)
{
    char buf[24];
    if (len == 0 || len >= sizeof(buf)) return false;
    memcpy(buf, msg, len);
    buf[len] = '\0';
    *out = strtoull(buf, NULL, 10);
    return true;
}

static void on_ack(const char *channel, const char *msg, size_t len, void *data)
{
    (void)channel;
    (void)data;
    uint64_t nonce;
    if (!msg_u64(msg, len, &nonce)) return;
    waiter_t *w = waiter_find(nonce);
    if (w) {
        w->acks++;
        waiter_check(w);
    }
}

static void on_heartbeat(const char *channel, const char *msg, size_t len, void *data)
{
    (void)channel;
    (void)data;
    uint64_t sent;
    if (msg_u64(msg, len, &sent) && sent > lease_sent_ns) lease_sent_ns = sent;
}

/* The send time is taken before the PUBLISH is written, so it is never later than the moment
 * Redis handles it: the lease errs on the short side. */
static void on_hb_timer(uv_timer_t *t)
{
    (void)t;
    if (!redis_channel_active(hb_channel)) return;
    char v[24];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)uv_hrtime());
    redis_command(NULL, NULL, "PUBLISH %s %s", hb_channel, v);
}

/* ---- invalidating ------------------------------------------------------------------------------
 */

static void format_msg(char out[MSG_MAX], char kind, const char *value)
{
    int n = snprintf(out, MSG_MAX, "%c:%s", kind, value ? value : "");
    if (n < 0 || n >= MSG_MAX || !value || !*value) snprintf(out, MSG_MAX, "*");
}

int ctx_invalidation_message(char *out, size_t cap, char kind, const char *value)
{
    char msg[MSG_MAX];
    format_msg(msg, kind, value);
    /* A sender id of ID_LEN zeros: well-formed for on_invalidation, and nonce 0 is never
     * acknowledged. */
    int n = snprintf(out, cap, "%0*d 0 %s", ID_LEN, 0, msg);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Without waiting (a failed write's reply, where nothing may have changed). */
static void invalidate(char kind, const char *value)
{
    if (!value || !*value) return;
    char msg[MSG_MAX], wire[MSG_MAX + ID_LEN + 24];
    format_msg(msg, kind, value);
    apply(msg, strlen(msg));
    int n = snprintf(wire, sizeof(wire), "%s 0 %s", worker_id, msg);
    redis_publish(CTX_CHANNEL, wire, (size_t)n);
    redis_flush();
}

static void invalidate_then(http_req_t *req, char kind, const char *value, waiter_t *w)
{
    format_msg(w->msg, kind, value);
    /* This worker at once; a lookup of it that is running now will not store its row. */
    apply(w->msg, strlen(w->msg));
    w->req = req;
    http_req_ref(req);
    w->nonce = next_nonce++;
    w->receivers = -1;
    w->prev = wait_tail;
    if (wait_tail)
        wait_tail->next = w;
    else
        wait_head = w;
    wait_tail = w;
    char wire[MSG_MAX + ID_LEN + 24];
    snprintf(wire, sizeof(wire), "%s %llu %s", worker_id, (unsigned long long)w->nonce, w->msg);
    redis_command(on_published, w, "PUBLISH %s %s", CTX_CHANNEL, wire);
    redis_flush();
}

void ctx_invalidate_then(http_req_t *req, char kind, const char *value,
                         void (*done)(http_req_t *req))
{
    waiter_t *w = xcalloc(1, sizeof(*w));
    w->done = done;
    invalidate_then(req, kind, value, w);
}

void ctx_invalidate_then_reply(http_req_t *req, char kind, const char *value, int status,
                               const char *json, size_t len)
{
    if (!json) {
        invalidate(kind, value); /* the write has committed all the same */
        http_reply_error(req, 500, "INTERNAL", "Internal error");
        return;
    }
    waiter_t *w = xcalloc(1, sizeof(*w));
    w->status = status;
    w->body = arena_strndup(&req->arena, json, len);
    w->len = len;
    invalidate_then(req, kind, value, w);
}

void ctx_cache_drop_session_local(const char *session_id)
{
    if (session_id) drop_matching(COL_SESSION, -1, session_id, false);
}

void ctx_cache_init(uv_loop_t *loop)
{
    /* Without a cache of its own a worker still acknowledges the others' invalidations (the
     * writers count it among the subscribers). */
    if (cfg.context_cache_ttl_ms > 0) slots = xcalloc(SLOTS, sizeof(*slots));
    seen_epoch = redis_sub_epoch();
    unsigned char rnd[ID_LEN / 2];
    random_bytes(rnd, sizeof(rnd));
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(worker_id + 2 * i, 3, "%02x", rnd[i]);
    snprintf(ack_channel, sizeof(ack_channel), "coachd:ctx-ack:%s", worker_id);
    snprintf(hb_channel, sizeof(hb_channel), "coachd:ctx-hb:%s", worker_id);
    redis_set_channel_handler(CTX_CHANNEL, on_invalidation, NULL);
    redis_set_channel_handler(ack_channel, on_ack, NULL);
    redis_set_channel_handler(hb_channel, on_heartbeat, NULL);
    redis_subscribe(CTX_CHANNEL);
    redis_subscribe(ack_channel);
    redis_subscribe(hb_channel);
    uv_timer_init(loop, &wait_timer);
    uv_timer_init(loop, &hb_timer);
    uv_timer_start(&hb_timer, on_hb_timer, HEARTBEAT_MS, HEARTBEAT_MS);
    uv_unref((uv_handle_t *)&hb_timer);
}
