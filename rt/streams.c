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
 * expiry, which the 100 ms tick pops. The per-user cap lives in Redis (STREAMS_KEY): each
 * stream adds itself with its opening time; the script that adds the 21st removes the oldest and
 * publishes stream-evicted for it on the user's control channel, so whichever worker holds it
 * closes it.
 */
#include "rt/streams.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/random.h"
#include "core/sbuf.h"
#include "core/sse.h"
#include "rt/events.h"
#include "rt/presence.h"
#include "rt/redis.h"

/* Pings: a 100 ms tick walks a wheel of one slot per tick of the ping interval
 * (cfg.stream_ping_seconds: 250 slots for 25 s). A new stream takes the emptiest slot whose first
 * visit is at most 1.5 s (a quarter of a short interval) early, so streams opened together (a
 * reconnect storm: 19,900 in 4 s) are spread over many ticks instead of being pinged in one go.
 * With 1-second slots a tick pinged 5,000 streams at once here, holding every event behind it for
 * up to 100 ms. */
#define WHEEL_TICK_MS 100
#define WHEEL_SPREAD_MAX 15 /* candidate slots: the first ping 1.5 s early at most */
#define SUBS_PER_STREAM 2
/* Redis sorted set of a user's open streams (member: stream id, score: opening time in ms). */
#define STREAMS_KEY "streams:%s"
/* The set outlives the longest session, so entries of a crashed worker go away with it. */
#define STREAMS_KEY_TTL (8 * 24 * 3600)
#define ORG_ID_MAX 40

typedef struct channel channel_t;
typedef struct stream stream_t;

/* A Redis stream entry id, "<ms>-<seq>". */
typedef struct event_id {
    uint64_t ms, seq;
} event_id_t;

/* An event message of rt/events.c, with or without its leading "id": the event name, the
 * organization (before "data"; so a key inside the payload is never taken for it) and the data,
 * which runs to the closing brace. */
typedef struct parsed {
    const char *event, *org, *data;
    size_t evlen, orglen, dlen;
    bool has_org;
} parsed_t;

typedef struct page page_t;

typedef struct held {
    sbuf_t *sb; /* NULL: filtered out, only moves the position */
    event_id_t id;
} held_t;

/* One stream's membership in one channel's list. */
typedef struct sub {
    struct sub *prev, *next;
    channel_t *chan;
    stream_t *stream;
} sub_t;

/* An event on its way to a channel's streams. It is written to at most cfg.stream_fanout_slice
 * streams per loop turn (100 by default), so one event to tens of thousands of streams does not
 * hold the worker, and every other connection on it, for the whole fan-out (about 100 ms for
 * 10,000 streams here: a request arriving meanwhile waited up to that long; now one slice, a
 * few ms). A channel's events go out one after the other, in the order they arrived. */
typedef struct fan_event {
    struct fan_event *next;
    sbuf_t *sb; /* encoded once, shared by every stream */
    bool in_history;
    event_id_t id;
    parsed_t m; /* points into msg */
    char *msg;
    uint64_t t0; /* arrival (uv_hrtime), for coachd_stream_fanout_seconds */
    uint64_t sent;
} fan_event_t;

struct channel {
    channel_t *hnext; /* hash chain */
    sub_t *head;
    size_t count;
    fan_event_t *fq_head, *fq_tail; /* events being written, oldest first */
    size_t fq_len;                  /* their number, at most FANOUT_QUEUE_MAX + 1 */
    sub_t *cursor;                  /* the next stream fq_head goes to */
    bool started;                   /* fq_head's walk has begun (cursor is meaningful) */
    bool walking;                   /* a slice runs: the channel stays allocated */
    bool active;                    /* in the list of channels with events left to write */
    channel_t *aprev, *anext;
    page_t *pages; /* history pages its streams are reading (see "history") */
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
    /* Position on the event channel: the id of the last event passed (or filtered out) on this
     * stream. Pings carry it, so a reconnect resumes from it. */
    bool pos_known;
    event_id_t pos;
    /* History sync (replay or catch-up; "history" below). */
    bool in_sync;          /* a sync runs: live events are held */
    uint8_t phase;         /* its step (replay_phase_t) */
    bool sync_again;       /* the channel was (re)subscribed meanwhile: sync again after */
    bool fresh;            /* no history read has finished yet */
    bool resume;           /* opened with a Last-Event-ID */
    bool degraded;         /* a history read failed: events may have been missed since */
    bool reread;           /* held events were dropped: the history gives them, read it again */
    bool queued;           /* in replay_queue */
    bool blocked;          /* there, waiting for memory */
    bool drain_wait;       /* waits for its write queue to drain (http_stream_on_drain) */
    bool end_last_set;     /* no position: take end_last once the held events are written */
    const char *bad_id;    /* Last-Event-ID was unusable: the first read sends this reset */
    const char *end_reset; /* a reset to send once the held events are written */
    event_id_t end_last;
    uint64_t since;              /* page_seq when the sync began: later reads may end it */
    page_t *page;                /* the page being written, or being read for it */
    size_t idx;                  /* the page's next entry */
    stream_t *pw_prev, *pw_next; /* the page's waiters while it is read */
    stream_t *rq_prev, *rq_next; /* replay_queue */
    held_t *held;                /* live events that arrived during the sync */
    size_t nheld, held_cap, held_next, held_bytes;
};

static uv_loop_t *loop_ref;
static uv_timer_t tick_timer;
static bool timer_running;
static uint64_t tick;         /* 100 ms ticks since start */
static stream_t **wheel;      /* wheel_slots lists */
static size_t *wheel_count;   /* streams per slot */
static size_t wheel_slots;    /* cfg.stream_ping_seconds of ticks */
static unsigned wheel_spread; /* WHEEL_SPREAD_MAX, or a quarter of a short wheel */
static size_t nstreams;

static streams_fanout_stats_t fanout;

static stream_t **heap; /* min-heap on expires_ms */
static size_t heap_len, heap_cap;

static channel_t **table;
static size_t table_size; /* power of two */
static size_t nchannels;

static void stream_close(stream_t *s);

/* ---- channel table ---- */

static channel_t *channel_find(const char *name, size_t n)
{
    if (!table) return NULL;
    for (channel_t *c = table[fnv1a_n(name, n) & (table_size - 1)]; c; c = c->hnext)
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
            size_t b = fnv1a_n(c->name, strlen(c->name)) & (size - 1);
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
    size_t b = fnv1a_n(name, n) & (table_size - 1);
    c->hnext = table[b];
    table[b] = c;
    nchannels++;
    redis_subscribe(name);
    return c;
}

static void fan_drop(channel_t *c);

static void pages_orphan(channel_t *c);

static void channel_release(channel_t *c)
{
    if (c->count > 0 || c->walking) return;
    fan_drop(c);
    pages_orphan(c);
    size_t b = fnv1a_n(c->name, strlen(c->name)) & (table_size - 1);
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
    if (c->cursor == sub) c->cursor = sub->next;
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
    /* The slot visited wheel_slots - 1 ticks from now comes one ping interval from now; of it
     * and the wheel_spread slots before it, the emptiest (the latest on a tie). */
    size_t best = (size_t)((tick + wheel_slots - 1) % wheel_slots);
    for (unsigned d = 1; d <= wheel_spread; d++) {
        size_t k = (size_t)((tick + wheel_slots - 1 - d) % wheel_slots);
        if (wheel_count[k] < wheel_count[best]) best = k;
    }
    s->slot = (int)best;
    wheel_count[best]++;
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
    wheel_count[s->slot]--;
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

/* Queues on one stream; a stream over max_pending unflushed bytes is closed. Returns false when
 * it was closed. */
static bool stream_send_cap(stream_t *s, sbuf_t *sb, size_t max_pending)
{
    if (http_stream_write(s->req, sb, max_pending) != 0) {
        log_info("stream: closing slow or gone client user=%s id=%s", s->user_id, s->req->id);
        stream_close(s);
        return false;
    }
    return true;
}

static bool stream_send(stream_t *s, sbuf_t *sb)
{
    return stream_send_cap(s, sb, STREAM_MAX_PENDING);
}

/* ---- event ids ---- */

static bool parse_u64(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 20) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* "<ms>-<seq>", both decimal; anything else (and the old "<ms>-<pid>-<n>" ids) is unusable. */
static bool event_id_parse(const char *p, size_t n, event_id_t *id)
{
    const char *dash = memchr(p, '-', n);
    if (!dash) return false;
    size_t a = (size_t)(dash - p);
    return parse_u64(p, a, &id->ms) && parse_u64(dash + 1, n - a - 1, &id->seq);
}

static int event_id_cmp(event_id_t a, event_id_t b)
{
    if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
    if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
    return 0;
}

static int event_id_fmt(char *out, size_t n, event_id_t id)
{
    return snprintf(out, n, "%llu-%llu", (unsigned long long)id.ms, (unsigned long long)id.seq);
}

/* The id just before id: a position from which id is new. */
static event_id_t event_id_before(event_id_t id)
{
    if (id.seq > 0) return (event_id_t){id.ms, id.seq - 1};
    return (event_id_t){id.ms > 0 ? id.ms - 1 : 0, id.ms > 0 ? UINT64_MAX : 0};
}

/* True when the event with this id is new for the stream (past its position). */
static bool stream_is_new(const stream_t *s, event_id_t id)
{
    return !s->pos_known || event_id_cmp(id, s->pos) > 0;
}

static void stream_advance(stream_t *s, event_id_t id)
{
    s->pos = id;
    s->pos_known = true;
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

static bool parse_message(const char *msg, size_t len, parsed_t *m)
{
    const char *d = len > 0 ? memmem(msg, len, "\"data\":", 7) : NULL;
    if (!d || msg[len - 1] != '}' ||
        !json_str_field(msg, (size_t)(d - msg), "event", &m->event, &m->evlen))
        return false;
    m->has_org = json_str_field(msg, (size_t)(d - msg), "organizationId", &m->org, &m->orglen);
    m->data = d + 7;
    m->dlen = (size_t)(msg + len - 1 - m->data);
    return true;
}

/* A user stream carries an organization's events only while the user's membership there is
 * active. Every event of the product names its organization (events_publish requires it); one
 * that names none is not organization-scoped and passes. */
static bool stream_passes(const stream_t *s, const parsed_t *m)
{
    return s->kind != STREAM_USER || s->all_orgs || !m->has_org || org_listed(s, m->org, m->orglen);
}

/* ---- history: replay and catch-up ---- */

/*
 * A stream that resumes (Last-Event-ID) or catches up (the subscriber connection came back)
 * writes the channel's history after its position before any live event. What the client has
 * not taken yet stays in this process, so what a worker holds for replays is bounded:
 *
 * - Shared pages. One history read (a page: at most REPLAY_PAGE entries and about
 *   REPLAY_PAGE_BYTES) is encoded once into refcounted buffers, and the page belongs to its
 *   channel while any stream uses it. A stream that needs the history after its position P takes
 *   a page of its channel that covers P (read from P or before, with entries after P) or one
 *   being read from exactly P, and reads Redis itself only when there is none. Streams resuming
 *   from the same id (a user's tabs and devices reconnecting together, a reconnect storm after a
 *   deploy) share one read and one copy of each entry: their write queues hold references to
 *   the same buffers. Before, each stream encoded its own copy of every entry.
 * - Per stream: a replay writes while the stream's unflushed bytes are below REPLAY_HIGH_WATER,
 *   then waits for them to fall to REPLAY_LOW_WATER (http_stream_on_drain); it holds one page at
 *   a time. Before, one stream could queue 16 MiB of history at once.
 * - Per worker: every entry's buffer counts in replay_bytes until its last reference goes
 *   (sbuf_count: the page or a write queue, whichever lets go last), and a read in flight
 *   reserves REPLAY_PAGE_BYTES until its reply is encoded. A read is issued only while
 *   replay_bytes, the reservations and one more page stay within REPLAY_MEMORY_MAX; otherwise
 *   the stream waits in replay_queue, first come first served (a read that must wait holds back
 *   the reads queued behind it, so none starves), until pages are let go or write queues drain.
 *   Taking a page that exists costs nothing. A client that never reads keeps its share until
 *   core/http's write deadline closes its stream.
 *
 * Live events arriving meanwhile are held (the fan-out's own buffers, shared with the channel's
 * other streams): at most HELD_MAX events and HELD_MAX_BYTES per stream, REPLAY_MEMORY_MAX per
 * worker. Past that the stream drops what it holds and reads the history once more after the
 * read in progress: a held event always has a history id, so the history has it (or answers
 * `reset` when it was trimmed meanwhile).
 *
 * A sync ends on a read that found nothing more and was issued after the sync began: an event
 * the read did not see was published after it, so it arrives live while the stream holds. A
 * shared page read before that gives entries, never the end.
 */
#define REPLAY_PAGE 256
#define REPLAY_PAGE_BYTES (256 * 1024)
/* What the read script adds to each entry's message length when it fills a page: the SSE framing
 * (the id, field names and line ends: under 64 bytes beyond the message) and the entry's record
 * (page_entry_t), so a page's buffers and records stay within its reservation. The largest event
 * of the product, a chat message of 4,000 characters, is a tenth of a page; a larger one would
 * still go, as a page of its own. */
#define REPLAY_ENTRY_OVERHEAD 160
#define REPLAY_HIGH_WATER (1024 * 1024)
#define REPLAY_LOW_WATER (256 * 1024)
/* A stream's write cap while it syncs: the high water, the entry that crosses it, a ping. */
#define REPLAY_MAX_PENDING (REPLAY_HIGH_WATER + 2 * REPLAY_PAGE_BYTES)
/* Live events go out again capped at STREAM_MAX_PENDING: a sync ends once the stream's queue is
 * down to half of that, so the first live event after a replay cannot close a reading client. */
#define LIVE_LOW_WATER (STREAM_MAX_PENDING / 2)
#define HELD_MAX 20000
#define HELD_MAX_BYTES (1024 * 1024)

typedef enum replay_phase {
    RP_NONE,  /* no sync */
    RP_READ,  /* waits for a page: in replay_queue, or a waiter of a page being read */
    RP_PAGE,  /* writes its page */
    RP_HELD,  /* writes the live events held meanwhile */
    RP_DRAIN, /* waits for its queue to fall to LIVE_LOW_WATER */
} replay_phase_t;

typedef struct page_entry {
    event_id_t id;
    sbuf_t *sb;    /* NULL: malformed, only moves the position */
    size_t orglen; /* SIZE_MAX: no organization; ORG_ID_MAX: one no stream lists */
    char org[ORG_ID_MAX];
} page_entry_t;

enum { PAGE_OK, PAGE_RESET, PAGE_FAILED };

struct page {
    page_t *prev, *next; /* the channel's pages */
    channel_t *chan;     /* NULL once the channel went away (a read still in flight) */
    int refs;            /* the read in flight, and each stream on the page */
    bool loading;
    bool after_known; /* read after `after`; false: a stream without a position, no entries */
    bool more;        /* the history goes on after the last entry */
    int status;
    uint64_t seq; /* page_seq when issued */
    event_id_t after, last;
    char reason[16]; /* PAGE_RESET */
    page_entry_t *e;
    size_t n, ecap;
    size_t reserved;   /* of replay_reserved, until the reply */
    stream_t *waiters; /* streams waiting for the reply */
};

static size_t replay_bytes;    /* entries' buffers and records alive (pages, write queues) */
static size_t replay_reserved; /* reads in flight */
static size_t held_total;      /* bytes held by syncing streams (shared buffers, per stream) */
static uint64_t page_seq;
static stream_t *rq_head, *rq_tail; /* replay_queue: streams waiting to read, oldest first */
static size_t rq_blocked;           /* streams in it waiting for memory */
#define RQ_SCAN_WAITING 256
static uv_idle_t rq_idle;
static bool rq_idle_ready;

static size_t replay_cap(void)
{
    return cfg.replay_memory_max > 0 ? (size_t)cfg.replay_memory_max : (size_t)64 << 20;
}

/* KEYS[1] the channel's stream; ARGV: the position ('' unknown), page size, key TTL in ms, page
 * bytes, bytes added per entry. Returns {'ok', last id, entries after the position, more} or
 * {'reset', last id, reason}: entries up to the page size and (beyond the first) the page bytes,
 * counting each entry's field values plus ARGV[5]; more is 1 when the history goes on. The
 * history is complete after the position when no entry after it was trimmed: rt/events.c
 * records what trimming removed in the stream's max-deleted-entry-id. A channel without a stream
 * had no event for EVENTS_KEY_TTL: a position newer than that missed nothing. Without one, the
 * position becomes "just before now", so every later event is new. */
static const char SYNC_SCRIPT[] =
    "local function split(id) "
    "  local a, b = string.match(id, '^(%d+)-(%d+)$') "
    "  return tonumber(a), tonumber(b) "
    "end "
    "local function less(x, y) "
    "  local xm, xs = split(x) "
    "  local ym, ys = split(y) "
    "  return xm < ym or (xm == ym and xs < ys) "
    "end "
    "local pos = ARGV[1] "
    "if redis.call('EXISTS', KEYS[1]) == 0 then "
    "  local t = redis.call('TIME') "
    "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "  local here = string.format('%.0f', now - 1) .. '-18446744073709551615' "
    "  if pos == '' then return {'ok', here} end "
    "  local pm = split(pos) "
    "  if pm < now and pm + tonumber(ARGV[3]) > now then return {'ok', pos} end "
    "  return {'reset', here, pm < now and 'too-old' or 'unknown-id'} "
    "end "
    "local info = redis.call('XINFO', 'STREAM', KEYS[1]) "
    "local last, maxdel = '0-0', '0-0' "
    "for i = 1, #info, 2 do "
    "  if info[i] == 'last-generated-id' then last = info[i + 1] end "
    "  if info[i] == 'max-deleted-entry-id' then maxdel = info[i + 1] end "
    "end "
    "if pos == '' then return {'ok', last} end "
    "if less(last, pos) then return {'reset', last, 'unknown-id'} end "
    "if less(pos, maxdel) then return {'reset', last, 'too-old'} end "
    "local max, budget, extra = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]) "
    "local out, used, more, from = {}, 0, 0, '(' .. pos "
    "while more == 0 do "
    "  local r = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 32) "
    "  for i = 1, #r do "
    "    local size, f = extra, r[i][2] "
    "    for j = 2, #f, 2 do size = size + #f[j] end "
    "    if #out == max or (#out > 0 and used + size > budget) then "
    "      more = 1 "
    "      break "
    "    end "
    "    used = used + size "
    "    out[#out + 1] = r[i] "
    "  end "
    "  if #r < 32 then break end "
    "  from = '(' .. r[#r][1] "
    "end "
    "return {'ok', last, out, more}";

static void replay_step(stream_t *s);
static void rq_kick(void);

/* The `reset` event: what the client holds may miss events (history too short, the id unknown,
 * or Redis unavailable); it refetches, as after any reconnect (docs/api.md). Its id is the
 * stream's position, so the next reconnect resumes from here. */
static bool send_reset(stream_t *s, const char *reason)
{
    char id[48] = "", data[64];
    size_t idlen = s->pos_known ? (size_t)event_id_fmt(id, sizeof(id), s->pos) : 0;
    int n = snprintf(data, sizeof(data), "{\"reason\":\"%s\"}", reason);
    log_info("stream: reset (%s) user=%s", reason, s->user_id);
    sbuf_t *sb = sse_encode_event(id, idlen, "reset", 5, data, (size_t)n);
    bool ok = stream_send_cap(s, sb, REPLAY_MAX_PENDING);
    sbuf_unref(sb);
    return ok;
}

/* The cap of a write to s: a syncing stream's queue may hold a replay's high water. */
static size_t stream_cap(const stream_t *s)
{
    return s->in_sync ? REPLAY_MAX_PENDING : STREAM_MAX_PENDING;
}

/* ---- held live events ---- */

static void held_drop(stream_t *s)
{
    for (size_t i = 0; i < s->nheld; i++)
        if (s->held[i].sb) sbuf_unref(s->held[i].sb);
    free(s->held);
    s->held = NULL;
    held_total -= s->held_bytes;
    s->held_bytes = 0;
    s->nheld = s->held_cap = s->held_next = 0;
}

/* Keeps a live event (sb NULL: filtered out) until the sync has written the history. Past the
 * bounds the stream lets go of all it holds and reads the history again afterwards. */
static void hold(stream_t *s, sbuf_t *sb, event_id_t id)
{
    size_t len = sb ? sb->len : 0;
    if (s->nheld == HELD_MAX || s->held_bytes + len > HELD_MAX_BYTES ||
        held_total + len > replay_cap()) {
        if (!s->reread)
            log_info("stream: too many events during a replay, reading the history again user=%s",
                     s->user_id);
        /* A stream without a position (its first read in flight) would start at the newest id:
         * it resumes from just before the first event it drops instead. */
        if (!s->pos_known) stream_advance(s, event_id_before(s->nheld > 0 ? s->held[0].id : id));
        held_drop(s);
        s->reread = true;
        return;
    }
    if (s->nheld == s->held_cap) {
        s->held_cap = s->held_cap ? s->held_cap * 2 : 16;
        s->held = xrealloc(s->held, s->held_cap * sizeof(*s->held));
    }
    s->held[s->nheld].sb = sb ? sbuf_ref(sb) : NULL;
    s->held[s->nheld].id = id;
    s->nheld++;
    s->held_bytes += len;
    held_total += len;
}

/* ---- pages ---- */

static void page_unref(page_t *p)
{
    if (--p->refs > 0) return;
    if (p->chan) {
        if (p->prev)
            p->prev->next = p->next;
        else
            p->chan->pages = p->next;
        if (p->next) p->next->prev = p->prev;
    }
    for (size_t i = 0; i < p->n; i++)
        sbuf_unref(p->e[i].sb);
    replay_bytes -= p->ecap * sizeof(*p->e);
    free(p->e);
    free(p);
    rq_kick(); /* memory may be free for a read waiting */
}

/* The channel goes away: a read still in flight finds no channel. */
static void pages_orphan(channel_t *c)
{
    page_t *p = c->pages;
    while (p) {
        page_t *next = p->next;
        p->chan = NULL;
        p->prev = p->next = NULL;
        p = next;
    }
    c->pages = NULL;
}

static void waiter_remove(page_t *p, stream_t *s)
{
    if (s->pw_prev)
        s->pw_prev->pw_next = s->pw_next;
    else
        p->waiters = s->pw_next;
    if (s->pw_next) s->pw_next->pw_prev = s->pw_prev;
    s->pw_prev = s->pw_next = NULL;
}

/* s lets go of its page (written, or s goes away). */
static void page_leave(stream_t *s)
{
    page_t *p = s->page;
    if (!p) return;
    s->page = NULL;
    if (p->loading) waiter_remove(p, s);
    page_unref(p);
}

/* s takes p: it writes it now, or once it is read. */
static void page_join(stream_t *s, page_t *p)
{
    p->refs++;
    s->page = p;
    if (p->loading) {
        s->pw_prev = NULL;
        s->pw_next = p->waiters;
        if (p->waiters) p->waiters->pw_prev = s;
        p->waiters = s;
        return;
    }
    s->idx = 0; /* entries up to the position are skipped */
    s->phase = RP_PAGE;
    replay_step(s);
}

/* A page of s's channel that gives the history after s's position: one being read from exactly
 * there, one read from there or before with entries after it, or one read from exactly there
 * since s's sync began (the end of the history). */
static page_t *page_find(const stream_t *s)
{
    for (page_t *p = s->subs[0].chan->pages; p; p = p->next) {
        if (!p->after_known) continue;
        int cmp = event_id_cmp(p->after, s->pos);
        if (p->loading) {
            if (cmp == 0) return p;
            continue;
        }
        if (p->status != PAGE_OK || cmp > 0) continue;
        /* Entries after the position, or the end of the history if read since s began. */
        if ((p->n > 0 && event_id_cmp(s->pos, p->e[p->n - 1].id) < 0) ||
            (cmp == 0 && p->seq > s->since))
            return p;
    }
    return NULL;
}

/* Encodes a reply into p: status, and each entry ([id, [field, value, ...]]) once. */
static void page_fill(page_t *p, const redisReply *r)
{
    event_id_t last;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        !event_id_parse(r->element[1]->str, r->element[1]->len, &last)) {
        if (r && r->type == REDIS_REPLY_ERROR) log_warn("stream: history read: %s", r->str);
        p->status = PAGE_FAILED;
        return;
    }
    p->last = last;
    if (strcmp(r->element[0]->str, "reset") == 0) {
        const redisReply *why = r->elements > 2 ? r->element[2] : NULL;
        p->status = PAGE_RESET;
        snprintf(p->reason, sizeof(p->reason), "%s",
                 why && why->type == REDIS_REPLY_STRING ? why->str : "too-old");
        return;
    }
    p->status = PAGE_OK;
    p->more = r->elements > 3 && r->element[3]->type == REDIS_REPLY_INTEGER &&
              r->element[3]->integer != 0;
    const redisReply *list = r->elements > 2 ? r->element[2] : NULL;
    if (!list || list->type != REDIS_REPLY_ARRAY || list->elements == 0) return;
    p->ecap = list->elements;
    p->e = xcalloc(p->ecap, sizeof(*p->e));
    replay_bytes += p->ecap * sizeof(*p->e);
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *e = list->element[i];
        event_id_t id;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[0]->type != REDIS_REPLY_STRING ||
            !event_id_parse(e->element[0]->str, e->element[0]->len, &id))
            continue;
        const redisReply *f = e->element[1];
        const char *msg = NULL;
        size_t len = 0;
        for (size_t j = 0; f->type == REDIS_REPLY_ARRAY && j + 1 < f->elements; j += 2) {
            if (f->element[j]->type == REDIS_REPLY_STRING && strcmp(f->element[j]->str, "m") == 0 &&
                f->element[j + 1]->type == REDIS_REPLY_STRING) {
                msg = f->element[j + 1]->str;
                len = f->element[j + 1]->len;
            }
        }
        page_entry_t *pe = &p->e[p->n++];
        pe->id = id;
        pe->orglen = SIZE_MAX;
        parsed_t m;
        if (!msg || !parse_message(msg, len, &m)) {
            log_warn("stream: malformed history entry on %s", p->chan ? p->chan->name : "-");
            continue;
        }
        if (m.has_org) {
            pe->orglen = m.orglen < ORG_ID_MAX ? m.orglen : ORG_ID_MAX;
            if (m.orglen < ORG_ID_MAX) memcpy(pe->org, m.org, m.orglen);
        }
        pe->sb = sse_encode_event(e->element[0]->str, e->element[0]->len, m.event, m.evlen, m.data,
                                  m.dlen);
        sbuf_count(pe->sb, &replay_bytes);
    }
}

static bool entry_passes(const stream_t *s, const page_entry_t *e)
{
    return s->kind != STREAM_USER || s->all_orgs || e->orglen == SIZE_MAX ||
           org_listed(s, e->org, e->orglen);
}

/* ---- a stream's sync ---- */

static void on_page(redisReply *r, void *data);

/* Reads the history after s's position (none: only the channel's newest id) into a new page of
 * its channel, s its first waiter. */
static void page_read(stream_t *s, size_t reserve)
{
    channel_t *c = s->subs[0].chan;
    page_t *p = xcalloc(1, sizeof(*p));
    p->refs = 1; /* the read; page_join adds s */
    p->loading = true;
    p->seq = ++page_seq;
    p->after_known = s->pos_known;
    p->after = s->pos;
    p->reserved = reserve;
    replay_reserved += reserve;
    p->chan = c;
    p->next = c->pages;
    if (c->pages) c->pages->prev = p;
    c->pages = p;
    page_join(s, p);
    char key[128], pos[48] = "", count[16], ttl[24], bytes[24], extra[16];
    snprintf(key, sizeof(key), EVENTS_KEY_PREFIX "%s", c->name);
    if (s->pos_known) event_id_fmt(pos, sizeof(pos), s->pos);
    snprintf(count, sizeof(count), "%d", REPLAY_PAGE);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)EVENTS_KEY_TTL_SECONDS * 1000);
    snprintf(bytes, sizeof(bytes), "%d", REPLAY_PAGE_BYTES);
    snprintf(extra, sizeof(extra), "%d", REPLAY_ENTRY_OVERHEAD);
    const char *argv[9] = {"EVAL", SYNC_SCRIPT, "1", key, pos, count, ttl, bytes, extra};
    size_t lens[9];
    for (int i = 0; i < 9; i++)
        lens[i] = strlen(argv[i]);
    redis_command_argv(on_page, p, 9, argv, lens);
}

static void rq_remove(stream_t *s)
{
    if (!s->queued) return;
    if (s->rq_prev)
        s->rq_prev->rq_next = s->rq_next;
    else
        rq_head = s->rq_next;
    if (s->rq_next)
        s->rq_next->rq_prev = s->rq_prev;
    else
        rq_tail = s->rq_prev;
    s->rq_prev = s->rq_next = NULL;
    s->queued = false;
    if (s->blocked) rq_blocked--;
    s->blocked = false;
}

/* s needs its next page: from the queue's runner, on a later loop turn (never inside a walk
 * over a channel's streams). */
static void rq_push(stream_t *s)
{
    s->phase = RP_READ;
    if (s->queued) return;
    s->queued = true;
    s->rq_next = NULL;
    s->rq_prev = rq_tail;
    if (rq_tail)
        rq_tail->rq_next = s;
    else
        rq_head = s;
    rq_tail = s;
    rq_kick();
}

/* Gives s a page: one its channel has, or a read of its own when the worker's memory allows.
 * False when s must wait for memory (blocked is set: the reads queued behind wait too). */
static bool replay_fetch(stream_t *s, bool *blocked)
{
    page_t *p = s->pos_known ? page_find(s) : NULL;
    if (p) {
        rq_remove(s);
        page_join(s, p);
        return true;
    }
    /* Without a position the read returns no entries. */
    size_t reserve = s->pos_known ? REPLAY_PAGE_BYTES : 0;
    if (reserve && (*blocked || replay_bytes + replay_reserved + reserve > replay_cap())) {
        *blocked = true;
        if (!s->blocked) rq_blocked++;
        s->blocked = true;
        return false;
    }
    rq_remove(s);
    page_read(s, reserve);
    return true;
}

/* The queue's runner: each stream queued when it starts, in order. It stops when nothing can go
 * on; freed memory (a page let go, a write queue drained, a stream closed, the 100 ms tick)
 * starts it again. */
static void on_rq_idle(uv_idle_t *h)
{
    uv_idle_stop(h);
    bool blocked = false;
    size_t after_blocked = 0;
    stream_t *s = rq_head, *stop = rq_tail;
    /* Past the first read that waits, only pages that exist can be taken: a look at the next
     * RQ_SCAN_WAITING streams is enough (a reconnect storm may queue thousands, and the runner
     * goes again whenever memory is freed). */
    while (s && after_blocked < RQ_SCAN_WAITING) {
        stream_t *next = s->rq_next; /* writing to s may close s, never another stream */
        bool last = s == stop;
        replay_fetch(s, &blocked);
        if (blocked) after_blocked++;
        if (last) break;
        s = next;
    }
}

static void rq_kick(void)
{
    if (rq_head && rq_idle_ready) uv_idle_start(&rq_idle, on_rq_idle);
}

static void on_drained(http_req_t *req)
{
    stream_t *s = req->data;
    if (!s || !s->drain_wait) return;
    s->drain_wait = false;
    replay_step(s);
    rq_kick(); /* its queue drained: memory may be free for a read waiting */
}

static void wait_drain(stream_t *s, size_t low_water)
{
    s->drain_wait = true;
    http_stream_on_drain(s->req, low_water, on_drained);
}

static void stream_sync(stream_t *s);

/* The sync is over: live events go straight to the client again. */
static void sync_done(stream_t *s)
{
    held_drop(s);
    s->in_sync = false;
    s->phase = RP_NONE;
    s->fresh = false;
    s->end_last_set = false;
    s->end_reset = NULL;
    if (s->sync_again) {
        s->sync_again = false;
        stream_sync(s);
    }
}

/* Writes what the sync has for s until its queue is at the high water (then it waits for the
 * drain) or the sync is over: the page's entries, the next page, the held live events (dropping
 * those the history already gave: the seam has no duplicate), the queue's drain. May close s. */
static void replay_step(stream_t *s)
{
    if (s->phase == RP_PAGE) {
        page_t *p = s->page;
        while (s->idx < p->n) {
            if (http_stream_pending(s->req) >= REPLAY_HIGH_WATER) {
                wait_drain(s, REPLAY_LOW_WATER);
                return;
            }
            const page_entry_t *e = &p->e[s->idx++];
            if (!stream_is_new(s, e->id)) continue;
            stream_advance(s, e->id);
            if (!e->sb || !entry_passes(s, e)) continue;
            if (!stream_send_cap(s, e->sb, REPLAY_MAX_PENDING)) return;
        }
        bool end = !p->more && p->seq > s->since;
        page_leave(s);
        if (!end) {
            rq_push(s);
            return;
        }
        s->phase = RP_HELD;
    }
    for (;;) {
        if (s->phase == RP_HELD) {
            if (s->reread) { /* what it held is in the history: read on from the position */
                s->reread = false;
                s->since = page_seq;
                rq_push(s);
                return;
            }
            while (s->held_next < s->nheld) {
                if (http_stream_pending(s->req) >= REPLAY_HIGH_WATER) {
                    wait_drain(s, REPLAY_LOW_WATER);
                    return;
                }
                const held_t *h = &s->held[s->held_next++];
                if (!stream_is_new(s, h->id)) continue;
                stream_advance(s, h->id);
                if (h->sb && !stream_send_cap(s, h->sb, REPLAY_MAX_PENDING)) return;
            }
            if (s->end_last_set) {
                s->end_last_set = false;
                if (!s->pos_known || event_id_cmp(s->end_last, s->pos) > 0)
                    stream_advance(s, s->end_last);
            }
            if (s->end_reset) {
                const char *why = s->end_reset;
                s->end_reset = NULL;
                if (!send_reset(s, why)) return;
            }
            s->phase = RP_DRAIN;
        }
        if (s->phase != RP_DRAIN) return;
        if (s->reread || s->held_next < s->nheld) {
            s->phase = RP_HELD;
            continue;
        }
        if (http_stream_pending(s->req) > LIVE_LOW_WATER) {
            wait_drain(s, LIVE_LOW_WATER);
            return;
        }
        sync_done(s);
        return;
    }
}

/* Redis did not answer: no replay. The client is told to refetch (once until a read works),
 * unless it is a new stream that asked for no history; live events go on. */
static void sync_failed(stream_t *s)
{
    bool told = s->degraded;
    s->degraded = true;
    /* Held events it dropped (reread) are lost now: told again. */
    if (((!told && (s->resume || !s->fresh)) || s->reread) && !send_reset(s, "unavailable")) return;
    s->sync_again = false; /* the next (re)subscription reads again */
    s->reread = false;
    s->phase = RP_HELD;
    replay_step(s);
}

/* The read of s's page answered. */
static void page_deliver(stream_t *s)
{
    page_t *p = s->page;
    if (p->status == PAGE_FAILED) {
        page_leave(s);
        sync_failed(s);
        return;
    }
    bool was_degraded = s->degraded;
    s->degraded = false;
    if (p->status == PAGE_RESET) {
        char why[sizeof(p->reason)];
        memcpy(why, p->reason, sizeof(why));
        event_id_t last = p->last;
        page_leave(s);
        stream_advance(s, last);
        s->bad_id = NULL;
        if (!send_reset(s, why)) return;
        s->phase = RP_HELD;
        replay_step(s);
        return;
    }
    if (!p->after_known) {
        /* No position: a new stream starts at the channel's newest event. Every event held
         * meanwhile was published after the SUBSCRIBE, so all of them are new, also those
         * older than the newest id the read saw: they are written first, then the position
         * moves to that id. One that had a position once but lost it (bad Last-Event-ID, Redis
         * down) is told to refetch. */
        s->end_last = p->last;
        s->end_last_set = true;
        if (s->bad_id || was_degraded) s->end_reset = s->bad_id ? s->bad_id : "unavailable";
        s->bad_id = NULL;
        page_leave(s);
        s->phase = RP_HELD;
        replay_step(s);
        return;
    }
    s->idx = 0;
    s->phase = RP_PAGE;
    replay_step(s);
}

static void on_page(redisReply *r, void *data)
{
    page_t *p = data;
    replay_reserved -= p->reserved;
    p->reserved = 0;
    p->loading = false;
    if (p->waiters) page_fill(p, r);
    stream_t *w = p->waiters;
    p->waiters = NULL;
    while (w) {
        stream_t *next = w->pw_next; /* writing to w may close w, never another waiter */
        w->pw_prev = w->pw_next = NULL;
        page_deliver(w);
        w = next;
    }
    page_unref(p); /* the read's reference: the page lives on while streams write it */
    rq_kick();
}

/* Starts a sync: the replay of a reconnect, the catch-up after the subscriber connection came
 * back, or (no position) reading the channel's newest id. Live events are held meanwhile. Runs
 * only once the channel's SUBSCRIBE is confirmed, so an event is either in what a read issued
 * from now on returns or arrives live afterwards. Writes nothing now (the read is issued from
 * the queue's runner). */
static void stream_sync(stream_t *s)
{
    if (s->in_sync) {
        s->sync_again = true;
        return;
    }
    s->in_sync = true;
    s->since = page_seq;
    rq_push(s);
}

/* A channel's SUBSCRIBE was confirmed (first stream, or again after the subscriber connection
 * was lost): every stream on it reads what it may have missed. */
static void on_subscribed(const char *channel, void *data)
{
    (void)data;
    size_t clen = strlen(channel);
    if (clen > 8 && strcmp(channel + clen - 8, ":control") == 0) return;
    channel_t *c = channel_find(channel, clen);
    if (!c) return;
    for (sub_t *sub = c->head; sub; sub = sub->next)
        stream_sync(sub->stream); /* sends nothing now: the walk is safe */
}

/* Bytes of history being replayed this worker holds, for /metrics. */
streams_replay_stats_t streams_replay_stats(void)
{
    streams_replay_stats_t st = {replay_bytes, replay_reserved, held_total, rq_blocked};
    return st;
}

/* ---- fan-out in slices ---- */

/* Events a channel may hold waiting for its streams before it is written without slices. */
#define FANOUT_QUEUE_MAX 1024

static uv_idle_t fan_idle; /* runs the slices left while any channel has events to write */
static bool fan_idle_ready;
static channel_t *active_head, *active_tail;

static void fan_activate(channel_t *c)
{
    if (c->active) return;
    c->active = true;
    c->anext = NULL;
    c->aprev = active_tail;
    if (active_tail)
        active_tail->anext = c;
    else
        active_head = c;
    active_tail = c;
}

static void fan_deactivate(channel_t *c)
{
    if (!c->active) return;
    c->active = false;
    if (c->aprev)
        c->aprev->anext = c->anext;
    else
        active_head = c->anext;
    if (c->anext)
        c->anext->aprev = c->aprev;
    else
        active_tail = c->aprev;
    c->aprev = c->anext = NULL;
}

static void fan_event_free(fan_event_t *ev)
{
    sbuf_unref(ev->sb);
    free(ev->msg);
    free(ev);
}

/* The channel goes away (its last stream left): its events have nobody left to reach. */
static void fan_drop(channel_t *c)
{
    fan_deactivate(c);
    while (c->fq_head) {
        fan_event_t *ev = c->fq_head;
        c->fq_head = ev->next;
        fan_event_free(ev);
    }
    c->fq_tail = NULL;
    c->fq_len = 0;
    c->cursor = NULL;
    c->started = false;
}

/* One stream's share of an event: written, held while the stream reads history, or skipped
 * when the stream is already past it. Writing may close the stream. */
static void fan_deliver(stream_t *st, fan_event_t *ev)
{
    bool pass = stream_passes(st, &ev->m);
    if (!ev->in_history) {
        if (pass) {
            stream_send_cap(st, ev->sb, stream_cap(st));
            ev->sent++;
        }
    } else if (st->in_sync)
        hold(st, pass ? ev->sb : NULL, ev->id);
    else if (stream_is_new(st, ev->id)) {
        stream_advance(st, ev->id);
        if (pass) {
            stream_send(st, ev->sb);
            ev->sent++;
        }
    }
}

static void on_fan_idle(uv_idle_t *h);

/* Writes the channel's events to at most cfg.stream_fanout_slice streams, oldest event first.
 * Streams that join meanwhile go to the head of the list, behind the walk: they start after
 * these events (their position is read from the history, which already holds them). A stream
 * that leaves moves the walk past itself (sub_detach). With work left the channel waits in the
 * active list for the next loop turn. False when the channel went away (its last stream left). */
static bool fan_slice(channel_t *c)
{
    size_t budget = (size_t)cfg.stream_fanout_slice;
    c->walking = true;
    while (c->fq_head && budget > 0) {
        fan_event_t *ev = c->fq_head;
        if (!c->started) {
            c->cursor = c->head;
            c->started = true;
        }
        while (c->cursor && budget > 0) {
            sub_t *sub = c->cursor;
            c->cursor = sub->next;
            fan_deliver(sub->stream, ev);
            budget--;
        }
        if (c->cursor) break;
        double secs = (double)(uv_hrtime() - ev->t0) / 1e9;
        fanout.events++;
        fanout.deliveries += ev->sent;
        fanout.seconds_sum += secs;
        if (secs > fanout.seconds_max) fanout.seconds_max = secs;
        c->fq_head = ev->next;
        if (!c->fq_head) c->fq_tail = NULL;
        c->fq_len--;
        c->started = false;
        fan_event_free(ev);
    }
    c->walking = false;
    if (c->count == 0) {
        channel_release(c); /* its last stream left during the slice */
        return false;
    }
    if (!c->fq_head) {
        fan_deactivate(c);
        return true;
    }
    fan_activate(c);
    uv_idle_start(&fan_idle, on_fan_idle); /* nothing when it runs already */
    return true;
}

/* One slice for each channel that had events left when this turn began, in turn. */
static void on_fan_idle(uv_idle_t *h)
{
    (void)h;
    size_t n = 0;
    for (channel_t *c = active_head; c; c = c->anext)
        n++;
    while (n-- > 0 && active_head) {
        channel_t *c = active_head;
        fan_deactivate(c); /* fan_slice puts it back at the tail when work is left */
        fan_slice(c);
    }
    if (!active_head) {
        uv_idle_stop(&fan_idle);
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
    const char *idstr;
    size_t idlen;
    parsed_t m;
    if (!json_str_field(msg, len, "id", &idstr, &idlen) || !parse_message(msg, len, &m)) {
        log_warn("stream: malformed event on %s", channel);
        return;
    }
    /* An id that is no history id comes from a coachd without history (a rolling upgrade):
     * passed live as it is, outside the position and the replay. */
    fan_event_t *ev = xcalloc(1, sizeof(*ev));
    ev->in_history = event_id_parse(idstr, idlen, &ev->id);
    ev->t0 = uv_hrtime();
    /* Encoded once, shared by every stream of the channel on this worker. */
    ev->sb = sse_encode_event(idstr, idlen, m.event, m.evlen, m.data, m.dlen);
    /* The parsed fields point into the message, which the Redis reader reuses: keep a copy. */
    ev->msg = xmalloc(len);
    memcpy(ev->msg, msg, len);
    parse_message(ev->msg, len, &ev->m);
    if (c->fq_tail)
        c->fq_tail->next = ev;
    else
        c->fq_head = ev;
    c->fq_tail = ev;
    c->fq_len++;
    /* A channel already writing waits its turn (the order of its events); otherwise the first
     * slice goes now, which for most channels is all of it. */
    if (!c->active) {
        fan_slice(c);
        return;
    }
    /* Events arriving faster than the channel's streams take them: past FANOUT_QUEUE_MAX the
     * channel is written here and now, until half the queue is left, as before slices existed.
     * The worker then stops reading Redis meanwhile, which pushes back on it (Redis drops a
     * subscriber too far behind; the streams catch up from the history after the reconnect),
     * instead of queueing without bound in this process. */
    if (c->fq_len <= FANOUT_QUEUE_MAX) return;
    while (c->fq_len > FANOUT_QUEUE_MAX / 2)
        if (!fan_slice(c)) return; /* the channel went away with its last stream */
}

/* ---- lifecycle ---- */

static void stream_unregister(stream_t *s)
{
    /* Its page first: the page may be its channel's, which may go below. */
    rq_remove(s);
    page_leave(s);
    held_drop(s);
    s->in_sync = false;
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
    rq_kick(); /* write queues drain without telling: a read waiting for memory tries again */
    stream_t *s = wheel[tick % wheel_slots];
    while (s) {
        stream_t *next = s->wnext;
        char user[32];
        memcpy(user, s->user_id, sizeof(user));
        /* A ping's id is the stream's position, so it never moves the client's Last-Event-ID
         * past an event it has not received. Without a position yet (Redis unavailable since
         * the stream opened) it has no id line, which keeps the client's. */
        char frame[96];
        int n;
        if (s->pos_known) {
            char id[48];
            event_id_fmt(id, sizeof(id), s->pos);
            n = snprintf(frame, sizeof(frame), "id: %s\nevent: ping\ndata: \n\n", id);
        } else {
            n = snprintf(frame, sizeof(frame), "event: ping\ndata: \n\n");
        }
        sbuf_t *ping = sbuf_new(frame, (size_t)n);
        if (stream_send_cap(s, ping, stream_cap(s))) presence_touch(user);
        sbuf_unref(ping);
        s = next;
    }
}

void streams_init(uv_loop_t *loop)
{
    loop_ref = loop;
    wheel_slots = (size_t)cfg.stream_ping_seconds * 1000 / WHEEL_TICK_MS;
    wheel_spread =
        wheel_slots / 4 < WHEEL_SPREAD_MAX ? (unsigned)(wheel_slots / 4) : WHEEL_SPREAD_MAX;
    wheel = xcalloc(wheel_slots, sizeof(*wheel));
    wheel_count = xcalloc(wheel_slots, sizeof(*wheel_count));
    redis_set_message_handler(on_message, NULL);
    redis_set_subscribed_handler(on_subscribed, NULL);
    uv_idle_init(loop, &fan_idle);
    uv_unref((uv_handle_t *)&fan_idle);
    fan_idle_ready = true;
    uv_idle_init(loop, &rq_idle);
    uv_unref((uv_handle_t *)&rq_idle);
    rq_idle_ready = true;
    uv_timer_init(loop, &tick_timer);
    uv_timer_start(&tick_timer, on_tick, WHEEL_TICK_MS, WHEEL_TICK_MS);
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
    for (size_t i = 0; wheel && i < wheel_slots; i++)
        while (wheel[i])
            stream_close(wheel[i]);
    free(wheel);
    free(wheel_count);
    wheel = NULL;
    wheel_count = NULL;
    /* Closing every stream released every channel and with it the events left to write. */
    if (fan_idle_ready) {
        uv_idle_stop(&fan_idle);
        uv_close((uv_handle_t *)&fan_idle, NULL);
        fan_idle_ready = false;
    }
    if (rq_idle_ready) {
        uv_idle_stop(&rq_idle);
        uv_close((uv_handle_t *)&rq_idle, NULL);
        rq_idle_ready = false;
    }
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

streams_fanout_stats_t streams_fanout_stats(void)
{
    return fanout;
}

static void copy_id(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void streams_open(http_req_t *req, stream_kind_t kind, const char *user_id,
                  const stream_auth_t *auth, const char *mentorship_id, const char *organization_id,
                  const char *last_event_id)
{
    http_res_header(req, "Cache-Control", "no-cache");
    http_res_header(req, "X-Accel-Buffering", "no");
    http_stream_open(req, 200, "text/event-stream");
    if (http_req_gone(req)) return;
    http_stream_sndbuf(req, STREAM_SNDBUF);
    /* Everything the stream needs is copied below: the request's head and arena go once this
     * callback returns (they were half of a stream's memory). */
    http_stream_release_head(req);
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
    s->fresh = true;
    if (last_event_id) {
        s->resume = true;
        if (event_id_parse(last_event_id, strlen(last_event_id), &s->pos))
            s->pos_known = true;
        else
            s->bad_id = "unknown-id";
    }
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
    if (!stream_send(s, hello)) return;
    presence_heartbeat(user_id);
    /* The history is read once the channel is subscribed (on_subscribed), so nothing published
     * in between is lost; with Redis down the read fails at once (a resuming client gets a
     * reset). */
    if (redis_channel_active(s->subs[0].chan->name) || !redis_connected()) stream_sync(s);
}
