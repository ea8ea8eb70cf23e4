/*
 * SSE stream hub (see streams.h).
 *
 * Ownership: a stream_t holds one reference on its request for as long as it is registered; it
 * is freed when the request goes away (on_gone) or when the hub closes it. Channels are freed when
 * their last subscriber leaves. Event buffers (sbuf_t) are shared by every stream they are queued
 * on and freed by the last write that completes.
 */
#include "rt/streams.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/sbuf.h"
#include "rt/events.h"
#include "rt/presence.h"
#include "rt/redis.h"

#define WHEEL_SLOTS STREAM_PING_SECONDS
#define SUBS_PER_STREAM 2

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
    stream_t *wprev, *wnext; /* wheel slot list */
};

static uv_loop_t *loop_ref;
static uv_timer_t tick_timer;
static bool timer_running;
static unsigned tick;
static stream_t *wheel[WHEEL_SLOTS];
static size_t nstreams;

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

/* ---- writing ---- */

static sbuf_t *encode_event(const char *id, size_t idlen, const char *event, size_t evlen,
                            const char *data, size_t dlen)
{
    buf_t b = BUF_INIT;
    buf_reserve(&b, idlen + evlen + dlen + 32);
    buf_puts(&b, "id: ");
    buf_append(&b, id, idlen);
    buf_puts(&b, "\nevent: ");
    buf_append(&b, event, evlen);
    /* One data line per line of the payload (JSON from PostgreSQL or jansson has none, but a
     * stray newline must not end the event early). */
    buf_puts(&b, "\ndata: ");
    for (size_t i = 0; i < dlen; i++) {
        if (data[i] == '\n')
            buf_puts(&b, "\ndata: ");
        else if (data[i] != '\r')
            buf_putc(&b, data[i]);
    }
    buf_puts(&b, "\n\n");
    sbuf_t *sb = sbuf_new(b.data, b.len);
    buf_free(&b);
    return sb;
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
    if (session_ended) json_str_field(msg, len, "sessionId", &arg, &alen);
    if (membership) json_str_field(msg, len, "organizationId", &arg, &alen);
    sub_t *sub = c->head;
    while (sub) {
        sub_t *next = sub->next;
        stream_t *s = sub->stream;
        bool close = inactive;
        if (session_ended && arg)
            close = strlen(s->session_id) == alen && memcmp(s->session_id, arg, alen) == 0;
        if (membership && arg)
            close = s->org_id[0] == '\0' ||
                    (strlen(s->org_id) == alen && memcmp(s->org_id, arg, alen) == 0);
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
    d += 7;
    size_t dlen = (size_t)(msg + len - 1 - d);
    sbuf_t *sb = encode_event(id, idlen, event, evlen, d, dlen);
    sub_t *sub = c->head;
    while (sub) {
        /* Closing a stream may free this channel when it was the last subscriber. */
        sub_t *next = sub->next;
        bool last = next == NULL;
        stream_send(sub->stream, sb);
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
}

size_t streams_count(void)
{
    return nstreams;
}

static void copy_id(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void streams_open(http_req_t *req, stream_kind_t kind, const char *user_id, const char *session_id,
                  const char *mentorship_id, const char *organization_id)
{
    http_res_header(req, "Cache-Control", "no-cache");
    http_res_header(req, "X-Accel-Buffering", "no");
    http_stream_open(req, 200, "text/event-stream");
    if (http_req_gone(req)) return;
    stream_t *s = xcalloc(1, sizeof(*s));
    s->req = req;
    s->kind = kind;
    copy_id(s->user_id, sizeof(s->user_id), user_id);
    copy_id(s->session_id, sizeof(s->session_id), session_id);
    copy_id(s->org_id, sizeof(s->org_id), organization_id);
    http_req_ref(req);
    req->data = s;
    req->on_gone = on_gone;
    nstreams++;
    wheel_add(s);
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
