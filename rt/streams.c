/*
 * SSE stream hub (see streams.h).
 *
 * Ownership: a stream_t holds one reference on its request for as long as it is registered; it
 * is freed when the request goes away (on_gone) or when the hub closes it. Channels are freed when
 * their last subscriber leaves. Event buffers (sbuf_t) are shared by every stream they are queued
 * on and freed by the last write that completes.
 *
 * Session end: control messages close the streams of an ended session on every worker; session
 * expiry needs no message, so registered streams also sit in a min-heap on their session's
 * expiry, which the 1-second tick pops. The per-user cap lives in Redis (STREAMS_KEY): each
 * stream adds itself with its opening time; the script that adds the 21st removes the oldest and
 * publishes stream-evicted for it on the user's control channel, so whichever worker holds it
 * closes it.
 */
#include "rt/streams.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/random.h"
#include "core/sbuf.h"
#include "core/sse.h"
#include "rt/events.h"
#include "rt/presence.h"
#include "rt/redis.h"

#define WHEEL_SLOTS STREAM_PING_SECONDS
#define SUBS_PER_STREAM 2
/* Redis sorted set of a user's open streams (member: stream id, score: opening time in ms). */
#define STREAMS_KEY "streams:%s"
/* The set outlives the longest session, so entries of a crashed worker go away with it. */
#define STREAMS_KEY_TTL (8 * 24 * 3600)
#define ORG_ID_MAX 40

typedef struct channel channel_t;
typedef struct stream stream_t;

/* One stream's membership in one channel's list. */
typedef struct sub {
    struct sub *prev, *next;
    channel_t *chan;
    stream_t *stream;
} sub_t;

struct channel {
    channel_t *hnext; /* hash chain */
    sub_t *head;
    size_t count;
    char name[];
};

struct stream {
    http_req_t *req;
    stream_kind_t kind;
    char user_id[32];
    char session_id[40];
    char org_id[40];
    sub_t subs[SUBS_PER_STREAM];
    int nsubs;
    int slot;
    stream_t *wprev, *wnext;  /* wheel slot list */
    char stream_id[33];       /* random, names the stream in the per-user Redis set */
    int64_t expires_ms;       /* session expiry (epoch ms), 0: none */
    size_t hidx;              /* position in the expiry heap, SIZE_MAX when not in it */
    bool all_orgs;            /* USER streams: pass every organization's events */
    char (*orgs)[ORG_ID_MAX]; /* USER streams: organizations whose events pass */
    int norgs, orgs_cap;
};

static uv_loop_t *loop_ref;
static uv_timer_t tick_timer;
static bool timer_running;
static unsigned tick;
static stream_t *wheel[WHEEL_SLOTS];
static size_t nstreams;

static stream_t **heap; /* min-heap on expires_ms */
static size_t heap_len, heap_cap;

static channel_t **table;
static size_t table_size; /* power of two */
static size_t nchannels;

static void stream_close(stream_t *s);

/* ---- channel table ---- */

static uint32_t hash_str(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static channel_t *channel_find(const char *name, size_t n)
{
    if (!table) return NULL;
    for (channel_t *c = table[hash_str(name, n) & (table_size - 1)]; c; c = c->hnext)
        if (strlen(c->name) == n && memcmp(c->name, name, n) == 0) return c;
    return NULL;
}

static void table_grow(void)
{
    size_t size = table_size ? table_size * 2 : 1024;
    channel_t **t = xcalloc(size, sizeof(*t));
    for (size_t i = 0; i < table_size; i++) {
        channel_t *c = table[i];
        while (c) {
            channel_t *next = c->hnext;
            size_t b = hash_str(c->name, strlen(c->name)) & (size - 1);
            c->hnext = t[b];
            t[b] = c;
            c = next;
        }
    }
    free(table);
    table = t;
    table_size = size;
}

static channel_t *channel_get(const char *name)
{
    size_t n = strlen(name);
    channel_t *c = channel_find(name, n);
    if (c) return c;
    if (nchannels + 1 > table_size * 3 / 4) table_grow();
    c = xcalloc(1, sizeof(*c) + n + 1);
    memcpy(c->name, name, n + 1);
    size_t b = hash_str(name, n) & (table_size - 1);
    c->hnext = table[b];
    table[b] = c;
    nchannels++;
    redis_subscribe(name);
    return c;
}

static void channel_release(channel_t *c)
{
    if (c->count > 0) return;
    size_t b = hash_str(c->name, strlen(c->name)) & (table_size - 1);
    for (channel_t **pp = &table[b]; *pp; pp = &(*pp)->hnext) {
        if (*pp == c) {
            *pp = c->hnext;
            break;
        }
    }
    nchannels--;
    redis_unsubscribe(c->name);
    free(c);
}

static void sub_attach(stream_t *s, const char *name)
{
    sub_t *sub = &s->subs[s->nsubs++];
    channel_t *c = channel_get(name);
    sub->chan = c;
    sub->stream = s;
    sub->prev = NULL;
    sub->next = c->head;
    if (c->head) c->head->prev = sub;
    c->head = sub;
    c->count++;
}

static void sub_detach(sub_t *sub)
{
    channel_t *c = sub->chan;
    if (sub->prev)
        sub->prev->next = sub->next;
    else
        c->head = sub->next;
    if (sub->next) sub->next->prev = sub->prev;
    c->count--;
    sub->chan = NULL;
    channel_release(c);
}

/* ---- wheel ---- */

static void wheel_add(stream_t *s)
{
    /* The slot just behind the current tick: the first ping comes ~25 s from now. */
    s->slot = (int)((tick + WHEEL_SLOTS - 1) % WHEEL_SLOTS);
    s->wprev = NULL;
    s->wnext = wheel[s->slot];
    if (s->wnext) s->wnext->wprev = s;
    wheel[s->slot] = s;
}

static void wheel_remove(stream_t *s)
{
    if (s->wprev)
        s->wprev->wnext = s->wnext;
    else
        wheel[s->slot] = s->wnext;
    if (s->wnext) s->wnext->wprev = s->wprev;
    s->wprev = s->wnext = NULL;
}

/* ---- session expiry heap ---- */

static void heap_set(size_t i, stream_t *s)
{
    heap[i] = s;
    s->hidx = i;
}

static void heap_sift_up(size_t i)
{
    stream_t *s = heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (heap[parent]->expires_ms <= s->expires_ms) break;
        heap_set(i, heap[parent]);
        i = parent;
    }
    heap_set(i, s);
}

static void heap_sift_down(size_t i)
{
    stream_t *s = heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        int64_t best = s->expires_ms;
        if (l < heap_len && heap[l]->expires_ms < best) {
            m = l;
            best = heap[l]->expires_ms;
        }
        if (l + 1 < heap_len && heap[l + 1]->expires_ms < best) m = l + 1;
        if (m == i) break;
        heap_set(i, heap[m]);
        i = m;
    }
    heap_set(i, s);
}

static void heap_add(stream_t *s)
{
    s->hidx = SIZE_MAX;
    if (s->expires_ms <= 0) return;
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? heap_cap * 2 : 256;
        heap = xrealloc(heap, heap_cap * sizeof(*heap));
    }
    heap_set(heap_len++, s);
    heap_sift_up(heap_len - 1);
}

static void heap_remove(stream_t *s)
{
    size_t i = s->hidx;
    if (i == SIZE_MAX) return;
    s->hidx = SIZE_MAX;
    stream_t *last = heap[--heap_len];
    if (i == heap_len) return;
    heap_set(i, last);
    heap_sift_up(i);
    heap_sift_down(last->hidx);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Closes every stream whose session has expired. */
static void expire_streams(void)
{
    int64_t now = wall_ms();
    while (heap_len > 0 && heap[0]->expires_ms <= now) {
        log_info("stream: session expired user=%s", heap[0]->user_id);
        stream_close(heap[0]);
    }
}

/* ---- organizations of a user stream ---- */

static bool org_listed(const stream_t *s, const char *org, size_t n)
{
    for (int i = 0; i < s->norgs; i++)
        if (strlen(s->orgs[i]) == n && memcmp(s->orgs[i], org, n) == 0) return true;
    return false;
}

static void org_add(stream_t *s, const char *org, size_t n)
{
    if (n == 0 || n >= ORG_ID_MAX || org_listed(s, org, n)) return;
    if (s->norgs == s->orgs_cap) {
        s->orgs_cap = s->orgs_cap ? s->orgs_cap * 2 : 4;
        s->orgs = xrealloc(s->orgs, (size_t)s->orgs_cap * sizeof(*s->orgs));
    }
    memcpy(s->orgs[s->norgs], org, n);
    s->orgs[s->norgs][n] = '\0';
    s->norgs++;
}

static void org_remove(stream_t *s, const char *org, size_t n)
{
    for (int i = 0; i < s->norgs; i++) {
        if (strlen(s->orgs[i]) == n && memcmp(s->orgs[i], org, n) == 0) {
            memmove(s->orgs[i], s->orgs[--s->norgs], ORG_ID_MAX);
            return;
        }
    }
}

/* ---- per-user cap (Redis) ---- */

/* KEYS[1] the user's set, KEYS[2] the user's control channel; ARGV: opening time, stream id,
 * key TTL, cap. Adds the stream, then evicts the oldest beyond the cap. */
static const char REGISTER_SCRIPT[] =
    "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) "
    "redis.call('EXPIRE', KEYS[1], ARGV[3]) "
    "local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4]) "
    "if over <= 0 then return 0 end "
    "local old = redis.call('ZRANGE', KEYS[1], 0, over - 1) "
    "for _, id in ipairs(old) do "
    "  redis.call('ZREM', KEYS[1], id) "
    "  redis.call('PUBLISH', KEYS[2], '{\"type\":\"stream-evicted\",\"streamId\":\"' .. id .. "
    "'\"}') "
    "end "
    "return #old";

static void on_registered(redisReply *r, void *data)
{
    (void)data;
    if (!r) log_warn("stream: could not register in the per-user set");
}

static void registry_add(stream_t *s)
{
    char key[64], chan[64], now[24], ttl[16], max[16];
    snprintf(key, sizeof(key), STREAMS_KEY, s->user_id);
    snprintf(chan, sizeof(chan), "user:%s:control", s->user_id);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    snprintf(ttl, sizeof(ttl), "%d", STREAMS_KEY_TTL);
    snprintf(max, sizeof(max), "%d", STREAM_MAX_PER_USER);
    redis_command(on_registered, NULL, "EVAL %s 2 %s %s %s %s %s %s", REGISTER_SCRIPT, key, chan,
                  now, s->stream_id, ttl, max);
}

static void registry_remove(stream_t *s)
{
    char key[64];
    snprintf(key, sizeof(key), STREAMS_KEY, s->user_id);
    redis_command(NULL, NULL, "ZREM %s %s", key, s->stream_id);
}

/* ---- writing ---- */

static sbuf_t *encode_event(const char *id, size_t idlen, const char *event, size_t evlen,
                            const char *data, size_t dlen)
{
    return sse_encode_event(id, idlen, event, evlen, data, dlen);
}

/* Queues on one stream; a stream over its cap is closed. Returns false when it was closed. */
static bool stream_send(stream_t *s, sbuf_t *sb)
{
    if (http_stream_write(s->req, sb, STREAM_MAX_PENDING) != 0) {
        log_info("stream: closing slow or gone client user=%s id=%s", s->user_id, s->req->id);
        stream_close(s);
        return false;
    }
    return true;
}

/* ---- Redis messages ---- */

/* Finds "key":"value" in a flat JSON object we produced ourselves (rt/events.c). */
static bool json_str_field(const char *msg, size_t len, const char *key, const char **val,
                           size_t *vlen)
{
    char pat[32];
    int pn = snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    const char *p = memmem(msg, len, pat, (size_t)pn);
    if (!p) return false;
    p += pn;
    const char *end = memchr(p, '"', len - (size_t)(p - msg));
    if (!end) return false;
    *val = p;
    *vlen = (size_t)(end - p);
    return true;
}

static void on_control(channel_t *c, const char *msg, size_t len)
{
    const char *type, *arg = NULL;
    size_t tlen, alen = 0;
    if (!json_str_field(msg, len, "type", &type, &tlen)) return;
    bool session_ended = tlen == 13 && memcmp(type, "session-ended", 13) == 0;
    bool membership = tlen == 19 && memcmp(type, "membership-disabled", 19) == 0;
    bool inactive = tlen == 13 && memcmp(type, "user-inactive", 13) == 0;
    bool sessions_ended = tlen == 14 && memcmp(type, "sessions-ended", 14) == 0;
    bool evicted = tlen == 14 && memcmp(type, "stream-evicted", 14) == 0;
    bool enabled = tlen == 18 && memcmp(type, "membership-enabled", 18) == 0;
    if (session_ended) json_str_field(msg, len, "sessionId", &arg, &alen);
    if (membership || enabled) json_str_field(msg, len, "organizationId", &arg, &alen);
    if (sessions_ended) json_str_field(msg, len, "keepSessionId", &arg, &alen);
    if (evicted) json_str_field(msg, len, "streamId", &arg, &alen);
    sub_t *sub = c->head;
    while (sub) {
        sub_t *next = sub->next;
        stream_t *s = sub->stream;
        bool close = inactive;
        if (session_ended && arg)
            close = strlen(s->session_id) == alen && memcmp(s->session_id, arg, alen) == 0;
        if (membership && arg) {
            close = s->org_id[0] == '\0' ||
                    (strlen(s->org_id) == alen && memcmp(s->org_id, arg, alen) == 0);
            org_remove(s, arg, alen);
        }
        /* Every session but keepSessionId (none: all of them) ended. */
        if (sessions_ended)
            close = !arg || strlen(s->session_id) != alen || memcmp(s->session_id, arg, alen) != 0;
        if (evicted && arg)
            close = strlen(s->stream_id) == alen && memcmp(s->stream_id, arg, alen) == 0;
        if (enabled && arg && s->kind == STREAM_USER) org_add(s, arg, alen);
        if (close) {
            /* next may belong to this same stream (a stream has one sub per channel, so no). */
            stream_close(s);
        }
        sub = next;
    }
}

static void on_message(const char *channel, const char *msg, size_t len, void *data)
{
    (void)data;
    channel_t *c = channel_find(channel, strlen(channel));
    if (!c || !c->head) return;
    size_t clen = strlen(channel);
    if (clen > 8 && strcmp(channel + clen - 8, ":control") == 0) {
        on_control(c, msg, len);
        return;
    }
    const char *id, *event;
    size_t idlen, evlen;
    const char *d = memmem(msg, len, "\"data\":", 7);
    if (!json_str_field(msg, len, "id", &id, &idlen) ||
        !json_str_field(msg, len, "event", &event, &evlen) || !d || msg[len - 1] != '}') {
        log_warn("stream: malformed event on %s", channel);
        return;
    }
    /* The organization precedes "data" (rt/events.c), so a key inside the payload is never
     * taken for it. */
    const char *org = NULL;
    size_t orglen = 0;
    bool has_org = json_str_field(msg, (size_t)(d - msg), "organizationId", &org, &orglen);
    d += 7;
    size_t dlen = (size_t)(msg + len - 1 - d);
    sbuf_t *sb = encode_event(id, idlen, event, evlen, d, dlen);
    sub_t *sub = c->head;
    while (sub) {
        /* Closing a stream may free this channel when it was the last subscriber. */
        sub_t *next = sub->next;
        bool last = next == NULL;
        stream_t *st = sub->stream;
        /* A user stream carries an organization's events only while the user's membership
         * there is active. Every event of the product names its organization (events_publish
         * requires it); one that names none is not organization-scoped and passes. */
        bool pass =
            st->kind != STREAM_USER || st->all_orgs || !has_org || org_listed(st, org, orglen);
        if (pass) stream_send(st, sb);
        if (last) break;
        sub = next;
    }
    sbuf_unref(sb);
}

/* ---- lifecycle ---- */

static void stream_unregister(stream_t *s)
{
    for (int i = 0; i < s->nsubs; i++)
        if (s->subs[i].chan) sub_detach(&s->subs[i]);
    s->nsubs = 0;
    wheel_remove(s);
    heap_remove(s);
    registry_remove(s);
    free(s->orgs);
    s->orgs = NULL;
    s->norgs = s->orgs_cap = 0;
    nstreams--;
}

static void on_gone(http_req_t *req)
{
    stream_t *s = req->data;
    req->data = NULL;
    if (!s) return;
    stream_unregister(s);
    free(s);
    http_req_unref(req);
}

static void stream_close(stream_t *s)
{
    http_req_t *req = s->req;
    req->data = NULL;
    stream_unregister(s);
    free(s);
    http_stream_close(req);
    http_req_unref(req);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    tick++;
    expire_streams();
    stream_t *s = wheel[tick % WHEEL_SLOTS];
    if (!s) return;
    char id[48];
    events_make_id(id);
    char frame[96];
    int n = snprintf(frame, sizeof(frame), "id: %s\nevent: ping\ndata: \n\n", id);
    sbuf_t *ping = sbuf_new(frame, (size_t)n);
    while (s) {
        stream_t *next = s->wnext;
        char user[32];
        memcpy(user, s->user_id, sizeof(user));
        if (stream_send(s, ping)) presence_touch(user);
        s = next;
    }
    sbuf_unref(ping);
}

void streams_init(uv_loop_t *loop)
{
    loop_ref = loop;
    redis_set_message_handler(on_message, NULL);
    uv_timer_init(loop, &tick_timer);
    uv_timer_start(&tick_timer, on_tick, 1000, 1000);
    uv_unref((uv_handle_t *)&tick_timer);
    timer_running = true;
}

void streams_shutdown(void)
{
    if (timer_running) {
        uv_timer_stop(&tick_timer);
        uv_close((uv_handle_t *)&tick_timer, NULL);
        timer_running = false;
    }
    for (int i = 0; i < WHEEL_SLOTS; i++)
        while (wheel[i])
            stream_close(wheel[i]);
    free(table);
    table = NULL;
    table_size = 0;
    free(heap);
    heap = NULL;
    heap_len = heap_cap = 0;
}

size_t streams_count(void)
{
    return nstreams;
}

static void copy_id(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void streams_open(http_req_t *req, stream_kind_t kind, const char *user_id,
                  const stream_auth_t *auth, const char *mentorship_id, const char *organization_id)
{
    http_res_header(req, "Cache-Control", "no-cache");
    http_res_header(req, "X-Accel-Buffering", "no");
    http_stream_open(req, 200, "text/event-stream");
    if (http_req_gone(req)) return;
    http_stream_sndbuf(req, STREAM_SNDBUF);
    stream_t *s = xcalloc(1, sizeof(*s));
    s->req = req;
    s->kind = kind;
    copy_id(s->user_id, sizeof(s->user_id), user_id);
    copy_id(s->session_id, sizeof(s->session_id), auth->session_id);
    copy_id(s->org_id, sizeof(s->org_id), organization_id);
    uint8_t rnd[16];
    random_bytes(rnd, sizeof(rnd));
    for (int i = 0; i < 16; i++)
        snprintf(s->stream_id + 2 * i, 3, "%02x", rnd[i]);
    s->expires_ms = auth->session_expires_ms;
    s->all_orgs = kind != STREAM_USER || auth->all_orgs;
    for (int i = 0; i < auth->norgs; i++)
        org_add(s, auth->orgs[i], strlen(auth->orgs[i]));
    http_req_ref(req);
    req->data = s;
    req->on_gone = on_gone;
    nstreams++;
    wheel_add(s);
    heap_add(s);
    registry_add(s);
    char chan[96];
    if (kind == STREAM_MENTORSHIP)
        snprintf(chan, sizeof(chan), "mentorship:%s", mentorship_id);
    else
        snprintf(chan, sizeof(chan), "user:%s", user_id);
    sub_attach(s, chan);
    snprintf(chan, sizeof(chan), "user:%s:control", user_id);
    sub_attach(s, chan);
    static sbuf_t *hello;
    if (!hello) hello = sbuf_new("retry: 3000\n\n", 13);
    stream_send(s, hello);
    presence_heartbeat(user_id);
}
