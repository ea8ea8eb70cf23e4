/*
 * Redis client on the libuv loop (hiredis 0.14 async API + its libuv adapter). See rt/redis.h.
 *
 * Two connections, each an rclient_t with its own state machine:
 *
 *   CLOSED -> RESOLVING (uv_getaddrinfo, off the loop) -> CONNECTING (non-blocking connect to
 *   the numeric address) -> HANDSHAKE (AUTH, SELECT) -> CONNECTED
 *
 * Any failure goes back to CLOSED and the client's timer retries after a backoff of 100 ms
 * doubling to 5 s; the same timer bounds RESOLVING..HANDSHAKE to 5 s.
 *
 * Commands: hiredis 0.14 has no async command timeout, so every command callback goes through
 * an rcmd_t on the `pending` list. A 100 ms sweep fails overdue commands (callback with NULL)
 * exactly once and marks them fired; hiredis still owns the rcmd_t and hands it back later
 * with the late reply (or NULL when the context is freed), which is then ignored. A timeout
 * while no reply at all arrived for the whole timeout window means the connection is stuck: it
 * is dropped and reconnected. Commands issued while not connected fail from a 0 ms timer,
 * never inside the call.
 *
 * Subscriptions: channels are refcounted in a hash table. Each channel has a server-side state
 * (NONE, SUBSCRIBING, ACTIVE, UNSUBSCRIBING) so that SUBSCRIBE and UNSUBSCRIBE for one channel
 * are never in flight together: hiredis 0.14 drops its per-channel callback on every
 * unsubscribe confirmation, which would silently lose a re-subscription sent meanwhile. The
 * subscriber connection also keeps one anchor channel subscribed for its whole life: when the
 * server's subscription count drops to 0 hiredis leaves subscribe mode, and a subscribe
 * confirmation arriving after that trips an assertion inside hiredis.
 *
 * The libuv glue is our own rather than hiredis's adapters/libuv.h: in 0.14 that adapter ignores
 * poll callbacks with an error status, and libuv reports a socket error (a refused connect, a
 * reset connection) exactly that way and stops the poll, so the context never learned that its
 * connection was gone. Here an error status is handed to hiredis as the events it waits for,
 * and its read or write call finds the error itself.
 *
 * hiredis rules kept here: a context is never freed inside its connect callback (hiredis goes
 * on using it); redisAsyncFree inside a reply callback is deferred by hiredis itself; pending
 * callbacks get a NULL reply when a context dies, before the disconnect callback.
 */
#include "rt/redis.h"

#include <ctype.h>
#include <hiredis/async.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/url.h"

#define REDIS_COMMAND_TIMEOUT_MS 2000
#define REDIS_PING_TIMEOUT_MS 1000
#define REDIS_CONNECT_TIMEOUT_MS 5000
#define REDIS_BACKOFF_MIN_MS 100
#define REDIS_BACKOFF_MAX_MS 5000
#define REDIS_SWEEP_MS 100
#define REDIS_PUBLISH_QUEUE_MAX 1000
#define REDIS_ANCHOR_CHANNEL "coachd:subscriber-anchor"

enum rclient_state {
    REDIS_STATE_CLOSED,     /* no context; timer armed for the next attempt (unless stopping) */
    REDIS_STATE_RESOLVING,  /* gai in flight */
    REDIS_STATE_CONNECTING, /* ac set, TCP connect in progress */
    REDIS_STATE_HANDSHAKE,  /* ac set, AUTH/SELECT replies outstanding */
    REDIS_STATE_CONNECTED,  /* ac set, usable */
};

enum rchan_state {
    CHAN_NONE,          /* not subscribed on the server */
    CHAN_SUBSCRIBING,   /* SUBSCRIBE sent, confirmation outstanding */
    CHAN_ACTIVE,        /* subscribed */
    CHAN_UNSUBSCRIBING, /* UNSUBSCRIBE sent, confirmation outstanding */
};

typedef struct rclient {
    const char *name;
    bool is_sub;
    int state; /* enum rclient_state */
    redisAsyncContext *ac;
    uv_timer_t timer; /* reconnect backoff, or the connect deadline */
    uv_getaddrinfo_t gai;
    bool gai_busy;
    unsigned backoff_ms;
    int handshake_left;
    bool tried; /* the first connection attempt has ended, either way */
} rclient_t;

typedef struct rcmd rcmd_t;
struct rcmd {
    rcmd_t *prev, *next; /* R.pending while armed, R.failq while waiting to fail */
    redis_reply_cb cb;
    void *data;
    uint64_t deadline;
    uint64_t replies_before; /* R.replies when issued */
    bool fired; /* the user callback ran; hiredis still owns this until it calls back */
};

typedef struct rpub rpub_t;
/* A command sent at least once (PUBLISH, the event publishing script): kept and sent again
 * after a reconnect when the connection was down or went away with it in flight. */
struct rpub {
    rpub_t *next; /* R.pubq */
    int argc;
    char **argv;
    size_t *lens;
    const char *label; /* for the log: the channel, or the first key */
};

typedef struct rchan rchan_t;
struct rchan {
    rchan_t *next; /* bucket chain */
    int refs;
    int state; /* enum rchan_state */
    size_t len;
    char name[];
};

/* hiredis event hooks on one uv_poll_t (see the file comment). */
typedef struct rpoll {
    uv_poll_t handle;
    redisAsyncContext *ac; /* NULL once hiredis let go of the context */
    int events;
} rpoll_t;

typedef struct ping_req {
    void (*cb)(bool ok, void *data);
    void *data;
} ping_req_t;

static struct {
    uv_loop_t *loop;
    bool running, stopping;
    char *host, *user, *pass;
    int port, db;
    rclient_t cmd, sub;
    uv_timer_t sweep;  /* command timeouts, runs while `pending` is not empty */
    uv_timer_t defer;  /* fails commands issued while disconnected */
    uv_prepare_t turn; /* before each poll: redis_sub_drain may read again */
    bool drained;      /* redis_sub_drain read the subscriber socket in this loop turn */
    rcmd_t *pending_head, *pending_tail;
    rcmd_t *failq_head, *failq_tail;
    rpub_t *pubq_head, *pubq_tail;
    size_t pubq_len;
    uint64_t replies; /* replies received on the command connection */
    rchan_t **buckets;
    size_t nbuckets, nchans;
} R;

/* Kept outside R: the SSE hub may register before redis_init. */
static redis_message_cb message_cb;
static void *message_data;
/* Channels with their own handler (not the SSE hub's): internal broadcasts such as cache
 * invalidation. */
#define CHANNEL_HANDLERS_MAX 4
static struct {
    const char *name;
    redis_message_cb cb;
    void *data;
} channel_handlers[CHANNEL_HANDLERS_MAX];
static int nchannel_handlers;
/* Moves on every loss of the subscriber connection (messages may have been missed). */
static unsigned sub_epoch;
/* Inside a message handler (redis_sub_drain does not read then). */
static int sub_dispatching;
/* Told when a channel's subscription is confirmed (first subscribe, or re-subscribe after the
 * subscriber connection came back). */
static void (*subscribed_cb)(const char *channel, void *data);
static void *subscribed_data;

static int parse_url(const char *url);
#define client_log(cl, ...)                                                                        \
    log_msg((cl)->backoff_ms == REDIS_BACKOFF_MIN_MS ? LOG_WARN : LOG_DEBUG, __VA_ARGS__)

static void client_init(rclient_t *cl, const char *name, bool is_sub);
static void client_start(rclient_t *cl);
static void client_retry(rclient_t *cl);
static void client_drop(rclient_t *cl);
static void client_ready(rclient_t *cl);
static void on_client_timer(uv_timer_t *t);
static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res);
static void on_connect(const redisAsyncContext *cac, int status);
static void on_disconnect(const redisAsyncContext *cac, int status);
static void on_handshake(redisAsyncContext *ac, void *reply, void *priv);
static rcmd_t *cmd_new(redis_reply_cb cb, void *data, unsigned timeout_ms);
static void cmd_link(rcmd_t **head, rcmd_t **tail, rcmd_t *c);
static void cmd_unlink(rcmd_t **head, rcmd_t **tail, rcmd_t *c);
static void cmd_armed(rcmd_t *c);
static void cmd_fail_later(rcmd_t *c);
static void on_cmd_reply(redisAsyncContext *ac, void *reply, void *priv);
static void on_sweep(uv_timer_t *t);
static void on_defer(uv_timer_t *t);
static void vcommand(unsigned timeout_ms, redis_reply_cb cb, void *data, const char *fmt,
                     va_list ap);
static void argv_command(unsigned timeout_ms, redis_reply_cb cb, void *data, int argc,
                         const char **argv, const size_t *lens);
static void pub_send(rpub_t *p);
static void pub_enqueue(rpub_t *p);
static void pub_free(rpub_t *p);
static void on_pub_reply(redisReply *reply, void *data);
static void on_ping_reply(redisReply *reply, void *data);
static uint64_t chan_hash(const char *s, size_t n);
static rchan_t *chan_find(const char *name, size_t len);
static rchan_t *chan_add(const char *name, size_t len);
static void chan_remove(rchan_t *ch);
static void chans_reset(void);
static void chans_free(void);
static int chan_send(rchan_t *ch, const char *verb);
static void on_sub_reply(redisAsyncContext *ac, void *reply, void *priv);
static int rpoll_attach(redisAsyncContext *ac);
static void rpoll_update(rpoll_t *p, int events);
static void on_rpoll(uv_poll_t *h, int status, int events);
static void on_rpoll_closed(uv_handle_t *h);
static void rpoll_add_read(void *priv);
static void rpoll_del_read(void *priv);
static void rpoll_add_write(void *priv);
static void rpoll_del_write(void *priv);
static void rpoll_cleanup(void *priv);

/* ---------------------------------------------------------------------------------------- */
/* Setup                                                                                     */

/* redis://[[user]:password@]host[:port][/db]; host may be [v6] (core/url.h). */
static int parse_url(const char *url)
{
    url_parts_t u;
    if (url_parse(url, "redis", &u) != 0) return -1;
    R.user = u.user;
    R.pass = u.pass;
    R.host = u.host;
    R.port = u.port ? u.port : 6379;
    R.db = 0;
    if (*u.path == '/' && u.path[1]) {
        char *end;
        long db = strtol(u.path + 1, &end, 10);
        if (*end != '\0' || db < 0 || db > 1000000) return -1;
        R.db = (int)db;
    }
    if (!R.host[0]) {
        free(R.host);
        R.host = xstrdup("localhost");
    }
    return 0;
}

static void client_init(rclient_t *cl, const char *name, bool is_sub)
{
    memset(cl, 0, sizeof(*cl));
    cl->name = name;
    cl->is_sub = is_sub;
    cl->state = REDIS_STATE_CLOSED;
    cl->backoff_ms = REDIS_BACKOFF_MIN_MS;
    uv_timer_init(R.loop, &cl->timer);
}

static void on_turn(uv_prepare_t *h)
{
    (void)h;
    R.drained = false;
}

int redis_init(uv_loop_t *loop, const char *url)
{
    if (R.running) return 0;
    R.loop = loop;
    R.stopping = false;
    R.host = R.user = R.pass = NULL;
    if (!url || parse_url(url) != 0) {
        log_error("redis: invalid REDIS_URL (expected redis://[:password@]host:port[/db])");
        free(R.host);
        free(R.user);
        free(R.pass);
        R.host = R.user = R.pass = NULL;
        return -1;
    }
    R.pending_head = R.pending_tail = NULL;
    R.failq_head = R.failq_tail = NULL;
    R.pubq_head = R.pubq_tail = NULL;
    R.pubq_len = 0;
    if (!R.buckets) {
        R.nbuckets = 64;
        R.buckets = xcalloc(R.nbuckets, sizeof(*R.buckets));
        R.nchans = 0;
    }
    uv_timer_init(loop, &R.sweep);
    uv_timer_init(loop, &R.defer);
    uv_prepare_init(loop, &R.turn);
    uv_prepare_start(&R.turn, on_turn);
    uv_unref((uv_handle_t *)&R.turn);
    R.drained = false;
    client_init(&R.cmd, "redis", false);
    client_init(&R.sub, "redis subscriber", true);
    R.running = true;
    client_start(&R.cmd);
    client_start(&R.sub);
    return 0;
}

void redis_shutdown(void)
{
    rcmd_t *c;
    rpub_t *p;
    rclient_t *cls[2] = {&R.cmd, &R.sub};
    int i;

    if (!R.running) return;
    R.stopping = true;
    for (i = 0; i < 2; i++) {
        rclient_t *cl = cls[i];

        uv_timer_stop(&cl->timer);
        if (cl->gai_busy) uv_cancel((uv_req_t *)&cl->gai); /* its callback still runs */
        client_drop(cl);                                   /* pending callbacks get NULL now */
        uv_close((uv_handle_t *)&cl->timer, NULL);
    }
    /* Commands still armed belong to contexts already freed, so none are left; be safe. */
    while ((c = R.pending_head) != NULL) {
        cmd_unlink(&R.pending_head, &R.pending_tail, c);
        c->fired = true;
        if (c->cb) c->cb(NULL, c->data);
    }
    while ((c = R.failq_head) != NULL) {
        cmd_unlink(&R.failq_head, &R.failq_tail, c);
        if (c->cb) c->cb(NULL, c->data);
        free(c);
    }
    while ((p = R.pubq_head) != NULL) {
        R.pubq_head = p->next;
        pub_free(p);
    }
    R.pubq_tail = NULL;
    R.pubq_len = 0;
    chans_free();
    uv_close((uv_handle_t *)&R.sweep, NULL);
    uv_close((uv_handle_t *)&R.defer, NULL);
    uv_close((uv_handle_t *)&R.turn, NULL);
    free(R.host);
    free(R.user);
    free(R.pass);
    R.host = R.user = R.pass = NULL;
    R.running = false;
}

bool redis_connected(void)
{
    return R.running && R.cmd.state == REDIS_STATE_CONNECTED;
}

bool redis_first_attempt_done(void)
{
    return !R.running || R.cmd.tried;
}

/* ---------------------------------------------------------------------------------------- */
/* Connection state machine                                                                  */

static void client_start(rclient_t *cl)
{
    struct addrinfo hints;
    char port[8];

    if (R.stopping) return;
    if (cl->gai_busy) { /* an abandoned lookup is still running: try again later */
        client_retry(cl);
        return;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", R.port);
    cl->state = REDIS_STATE_RESOLVING;
    if (uv_getaddrinfo(R.loop, &cl->gai, on_resolved, R.host, port, &hints) != 0) {
        client_retry(cl);
        return;
    }
    cl->gai_busy = true;
    uv_timer_start(&cl->timer, on_client_timer, REDIS_CONNECT_TIMEOUT_MS, 0);
}

/* Back to CLOSED; the timer starts the next attempt. */
static void client_retry(rclient_t *cl)
{
    cl->state = REDIS_STATE_CLOSED;
    cl->tried = true;
    if (R.stopping) return;
    uv_timer_start(&cl->timer, on_client_timer, cl->backoff_ms, 0);
    cl->backoff_ms *= 2;
    if (cl->backoff_ms > REDIS_BACKOFF_MAX_MS) cl->backoff_ms = REDIS_BACKOFF_MAX_MS;
}

/* Frees our context (pending callbacks get NULL; the disconnect callback finds cl->ac already
 * cleared and does nothing). The caller decides what comes next. */
static void client_drop(rclient_t *cl)
{
    redisAsyncContext *ac = cl->ac;
    bool was_sub = cl->is_sub && ac != NULL;

    cl->ac = NULL;
    cl->state = REDIS_STATE_CLOSED;
    if (ac) redisAsyncFree(ac);
    if (was_sub) chans_reset();
}

static void on_client_timer(uv_timer_t *t)
{
    rclient_t *cl = container_of(t, rclient_t, timer);

    switch (cl->state) {
    case REDIS_STATE_CLOSED:
        client_start(cl);
        break;
    case REDIS_STATE_RESOLVING:
    case REDIS_STATE_CONNECTING:
    case REDIS_STATE_HANDSHAKE:
        client_log(cl, "%s: connect to %s:%d timed out", cl->name, R.host, R.port);
        /* A context in CONNECTING is outside any hiredis callback here, so freeing is safe. */
        client_drop(cl);
        client_retry(cl);
        break;
    default:
        break;
    }
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    rclient_t *cl = container_of(req, rclient_t, gai);
    struct addrinfo *ai, *pick = NULL;
    char ip[64];
    redisAsyncContext *ac;

    cl->gai_busy = false;
    if (R.stopping || !R.running || cl->state != REDIS_STATE_RESOLVING) goto done;
    if (status < 0) {
        client_log(cl, "%s: cannot resolve %s: %s", cl->name, R.host, uv_strerror(status));
        client_retry(cl);
        goto done;
    }
    for (ai = res; ai; ai = ai->ai_next) /* prefer IPv4, as redis-server often binds only it */
        if (ai->ai_family == AF_INET && !pick) pick = ai;
    if (!pick) pick = res;
    if (pick->ai_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)pick->ai_addr, ip, sizeof(ip));
    else
        uv_ip6_name((const struct sockaddr_in6 *)pick->ai_addr, ip, sizeof(ip));
    /* A numeric address: hiredis's own getaddrinfo call returns at once. */
    ac = redisAsyncConnect(ip, R.port);
    if (!ac || ac->err) {
        client_log(cl, "%s: connect to %s:%d: %s", cl->name, ip, R.port,
                   ac ? ac->errstr : "no memory");
        if (ac) redisAsyncFree(ac);
        client_retry(cl);
        goto done;
    }
    ac->data = cl;
    if (rpoll_attach(ac) != 0) {
        redisAsyncFree(ac);
        client_retry(cl);
        goto done;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    cl->ac = ac;
    cl->state = REDIS_STATE_CONNECTING;
done:
    uv_freeaddrinfo(res);
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    rclient_t *cl = ac->data;

    if (cl->ac != ac) return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback */
        client_log(cl, "%s: connect to %s:%d failed: %s (retrying with backoff)", cl->name, R.host,
                   R.port, ac->errstr);
        cl->ac = NULL;
        client_retry(cl);
        return;
    }
    redisEnableKeepAlive(&ac->c); /* a silently dead peer is noticed within minutes */
    cl->state = REDIS_STATE_HANDSHAKE;
    cl->handshake_left = 0;
    if (R.pass) {
        int rc = R.user ? redisAsyncCommand(ac, on_handshake, cl, "AUTH %s %s", R.user, R.pass)
                        : redisAsyncCommand(ac, on_handshake, cl, "AUTH %s", R.pass);
        if (rc == REDIS_OK) cl->handshake_left++;
    }
    if (!cl->is_sub && R.db > 0 &&
        redisAsyncCommand(ac, on_handshake, cl, "SELECT %d", R.db) == REDIS_OK)
        cl->handshake_left++;
    if (cl->handshake_left == 0) client_ready(cl);
}

static void on_handshake(redisAsyncContext *ac, void *reply, void *priv)
{
    rclient_t *cl = priv;
    redisReply *r = reply;

    if (!r || cl->ac != ac) return; /* the context is going away; on_disconnect handles it */
    if (r->type == REDIS_REPLY_ERROR) {
        log_error("%s: handshake failed: %s", cl->name, r->str);
        client_drop(cl); /* inside a reply callback: hiredis frees after we return */
        client_retry(cl);
        return;
    }
    if (--cl->handshake_left == 0) client_ready(cl);
}

static void client_ready(rclient_t *cl)
{
    uv_timer_stop(&cl->timer);
    cl->state = REDIS_STATE_CONNECTED;
    cl->tried = true;
    cl->backoff_ms = REDIS_BACKOFF_MIN_MS;
    log_info("%s: connected to %s:%d", cl->name, R.host, R.port);
    if (!cl->is_sub) {
        rpub_t *p, *q = R.pubq_head;

        R.pubq_head = R.pubq_tail = NULL;
        R.pubq_len = 0;
        while ((p = q) != NULL) {
            q = p->next;
            pub_send(p);
        }
    } else {
        size_t i;

        redisAsyncCommand(cl->ac, on_sub_reply, NULL, "SUBSCRIBE %s", REDIS_ANCHOR_CHANNEL);
        for (i = 0; i < R.nbuckets; i++) {
            rchan_t *ch;

            for (ch = R.buckets[i]; ch; ch = ch->next)
                if (ch->refs > 0 && ch->state == CHAN_NONE) chan_send(ch, "SUBSCRIBE");
        }
    }
}

static void on_disconnect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    rclient_t *cl = ac->data;

    (void)status;
    if (cl->ac != ac) return; /* we dropped it ourselves */
    log_warn("%s: connection lost: %s", cl->name, ac->errstr[0] ? ac->errstr : "closed");
    cl->ac = NULL;
    if (cl->is_sub) chans_reset();
    client_retry(cl);
}

/* ---------------------------------------------------------------------------------------- */
/* hiredis event hooks                                                                        */

static int rpoll_attach(redisAsyncContext *ac)
{
    rpoll_t *p;

    if (ac->ev.data != NULL) return -1;
    p = xcalloc(1, sizeof(*p));
    if (uv_poll_init(R.loop, &p->handle, ac->c.fd) != 0) {
        free(p);
        return -1;
    }
    p->handle.data = p;
    p->ac = ac;
    ac->ev.data = p;
    ac->ev.addRead = rpoll_add_read;
    ac->ev.delRead = rpoll_del_read;
    ac->ev.addWrite = rpoll_add_write;
    ac->ev.delWrite = rpoll_del_write;
    ac->ev.cleanup = rpoll_cleanup;
    return 0;
}

static void rpoll_update(rpoll_t *p, int events)
{
    /* hiredis re-adds the read event after every read: restarting a poll that already waits for
     * the same events would remove the socket from epoll and add it back (two syscalls). */
    if (events == p->events && events && uv_is_active((uv_handle_t *)&p->handle)) return;
    p->events = events;
    if (events)
        uv_poll_start(&p->handle, events, on_rpoll);
    else
        uv_poll_stop(&p->handle);
}

static void rpoll_add_read(void *priv)
{
    rpoll_t *p = priv;

    rpoll_update(p, p->events | UV_READABLE);
}

static void rpoll_del_read(void *priv)
{
    rpoll_t *p = priv;

    rpoll_update(p, p->events & ~UV_READABLE);
}

static void rpoll_add_write(void *priv)
{
    rpoll_t *p = priv;

    rpoll_update(p, p->events | UV_WRITABLE);
}

static void rpoll_del_write(void *priv)
{
    rpoll_t *p = priv;

    rpoll_update(p, p->events & ~UV_WRITABLE);
}

/* hiredis is done with the context (it may be freeing it right now). */
static void rpoll_cleanup(void *priv)
{
    rpoll_t *p = priv;

    p->ac = NULL;
    uv_poll_stop(&p->handle);
    uv_close((uv_handle_t *)&p->handle, on_rpoll_closed);
}

static void on_rpoll_closed(uv_handle_t *h)
{
    free(container_of((uv_poll_t *)h, rpoll_t, handle));
}

static void on_rpoll(uv_poll_t *h, int status, int events)
{
    rpoll_t *p = h->data;
    /* On an error libuv has stopped the poll: let hiredis run into the error itself. */
    int ev = status < 0 ? p->events : events;

    if (p->ac && (ev & UV_READABLE)) redisAsyncHandleRead(p->ac);
    if (p->ac && (ev & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
    if (status < 0 && p->ac && p->events) uv_poll_start(&p->handle, p->events, on_rpoll);
}

/* ---------------------------------------------------------------------------------------- */
/* Commands                                                                                  */

static void cmd_link(rcmd_t **head, rcmd_t **tail, rcmd_t *c)
{
    c->next = NULL;
    c->prev = *tail;
    if (*tail)
        (*tail)->next = c;
    else
        *head = c;
    *tail = c;
}

static void cmd_unlink(rcmd_t **head, rcmd_t **tail, rcmd_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        *tail = c->prev;
    c->prev = c->next = NULL;
}

static rcmd_t *cmd_new(redis_reply_cb cb, void *data, unsigned timeout_ms)
{
    rcmd_t *c = xcalloc(1, sizeof(*c));

    c->cb = cb;
    c->data = data;
    c->deadline = (R.loop ? uv_now(R.loop) : 0) + timeout_ms;
    c->replies_before = R.replies;
    return c;
}

/* hiredis accepted the command: watch its deadline. */
static void cmd_armed(rcmd_t *c)
{
    cmd_link(&R.pending_head, &R.pending_tail, c);
    if (!uv_is_active((uv_handle_t *)&R.sweep))
        uv_timer_start(&R.sweep, on_sweep, REDIS_SWEEP_MS, REDIS_SWEEP_MS);
}

static void cmd_fail_later(rcmd_t *c)
{
    if (!R.running) { /* no loop to defer to */
        if (c->cb) c->cb(NULL, c->data);
        free(c);
        return;
    }
    cmd_link(&R.failq_head, &R.failq_tail, c);
    uv_timer_start(&R.defer, on_defer, 0, 0);
}

static void on_defer(uv_timer_t *t)
{
    rcmd_t *c;

    (void)t;
    while ((c = R.failq_head) != NULL) {
        cmd_unlink(&R.failq_head, &R.failq_tail, c);
        if (c->cb) c->cb(NULL, c->data);
        free(c);
    }
}

static void on_cmd_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    rcmd_t *c = priv;

    (void)ac;
    if (reply) R.replies++;
    if (!c->fired) {
        cmd_unlink(&R.pending_head, &R.pending_tail, c);
        c->fired = true;
        if (c->cb) c->cb(reply, c->data);
    }
    free(c);
}

static void on_sweep(uv_timer_t *t)
{
    uint64_t now = uv_now(R.loop);
    rcmd_t *c, *next, *due_head = NULL, *due_tail = NULL;
    bool stuck = false;

    (void)t;
    for (c = R.pending_head; c; c = next) {
        next = c->next;
        if (c->deadline > now) continue;
        cmd_unlink(&R.pending_head, &R.pending_tail, c);
        c->fired = true; /* hiredis keeps it and frees it when the reply finally comes */
        cmd_link(&due_head, &due_tail, c);
        if (R.replies == c->replies_before) stuck = true; /* nothing came back since */
    }
    /* Fire after the scan: callbacks may issue new commands. */
    while ((c = due_head) != NULL) {
        cmd_unlink(&due_head, &due_tail, c);
        c->next = c->prev = NULL;
        log_warn("redis: command timed out");
        if (c->cb) c->cb(NULL, c->data);
    }
    if (stuck && R.cmd.state == REDIS_STATE_CONNECTED) {
        log_warn("redis: connection stalled, reconnecting");
        client_drop(&R.cmd);
        client_retry(&R.cmd);
    }
    if (!R.pending_head) uv_timer_stop(&R.sweep);
}

static void vcommand(unsigned timeout_ms, redis_reply_cb cb, void *data, const char *fmt,
                     va_list ap)
{
    rcmd_t *c = cmd_new(cb, data, timeout_ms);

    if (!R.running || R.cmd.state != REDIS_STATE_CONNECTED ||
        redisvAsyncCommand(R.cmd.ac, on_cmd_reply, c, fmt, ap) != REDIS_OK) {
        cmd_fail_later(c);
        return;
    }
    cmd_armed(c);
}

void redis_command(redis_reply_cb cb, void *data, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vcommand(REDIS_COMMAND_TIMEOUT_MS, cb, data, fmt, ap);
    va_end(ap);
}

static void argv_command(unsigned timeout_ms, redis_reply_cb cb, void *data, int argc,
                         const char **argv, const size_t *lens)
{
    rcmd_t *c = cmd_new(cb, data, timeout_ms);

    if (!R.running || R.cmd.state != REDIS_STATE_CONNECTED ||
        redisAsyncCommandArgv(R.cmd.ac, on_cmd_reply, c, argc, argv, lens) != REDIS_OK) {
        cmd_fail_later(c);
        return;
    }
    cmd_armed(c);
}

void redis_command_argv(redis_reply_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens)
{
    argv_command(REDIS_COMMAND_TIMEOUT_MS, cb, data, argc, argv, lens);
}

static void on_ping_reply(redisReply *reply, void *data)
{
    ping_req_t *p = data;
    bool ok = reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "PONG") == 0;

    p->cb(ok, p->data);
    free(p);
}

void redis_ping(void (*cb)(bool ok, void *data), void *data)
{
    ping_req_t *p = xmalloc(sizeof(*p));
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};

    p->cb = cb;
    p->data = data;
    argv_command(REDIS_PING_TIMEOUT_MS, on_ping_reply, p, 1, argv, lens);
}

/* ---------------------------------------------------------------------------------------- */
/* Publish                                                                                   */

static void pub_free(rpub_t *p)
{
    for (int i = 0; i < p->argc; i++)
        free(p->argv[i]);
    free(p->argv);
    free(p->lens);
    free(p);
}

static void pub_enqueue(rpub_t *p)
{
    p->next = NULL;
    if (R.pubq_len >= REDIS_PUBLISH_QUEUE_MAX) {
        rpub_t *old = R.pubq_head;

        log_warn("redis: publish queue full, dropping a message for %s", old->label);
        R.pubq_head = old->next;
        if (!R.pubq_head) R.pubq_tail = NULL;
        R.pubq_len--;
        pub_free(old);
    }
    if (R.pubq_tail)
        R.pubq_tail->next = p;
    else
        R.pubq_head = p;
    R.pubq_tail = p;
    R.pubq_len++;
}

static void pub_send(rpub_t *p)
{
    if (R.cmd.state != REDIS_STATE_CONNECTED) {
        pub_enqueue(p);
        return;
    }
    redis_command_argv(on_pub_reply, p, p->argc, (const char **)p->argv, p->lens);
}

/* A NULL reply means the connection went away (or stalled, which drops it too): the command
 * goes back on the queue and is sent again after the reconnect. */
static void on_pub_reply(redisReply *reply, void *data)
{
    rpub_t *p = data;

    if (!reply && R.running && !R.stopping) {
        pub_enqueue(p);
        return;
    }
    if (reply && reply->type == REDIS_REPLY_ERROR)
        log_warn("redis: %s %s: %s", p->argv[0], p->label, reply->str);
    pub_free(p);
}

void redis_command_retry(int argc, const char **argv, const size_t *lens, int label_arg)
{
    rpub_t *p;

    if (!R.running) {
        log_warn("redis: not running, dropping a message for %s", argv[label_arg]);
        return;
    }
    p = xcalloc(1, sizeof(*p));
    p->argc = argc;
    p->argv = xcalloc((size_t)argc, sizeof(*p->argv));
    p->lens = xcalloc((size_t)argc, sizeof(*p->lens));
    for (int i = 0; i < argc; i++) {
        p->argv[i] = xmalloc(lens[i] + 1);
        memcpy(p->argv[i], argv[i], lens[i]);
        p->argv[i][lens[i]] = '\0';
        p->lens[i] = lens[i];
    }
    p->label = p->argv[label_arg];
    pub_send(p);
}

void redis_publish(const char *channel, const char *msg, size_t len)
{
    const char *argv[3] = {"PUBLISH", channel, msg};
    size_t lens[3] = {7, strlen(channel), len};

    redis_command_retry(3, argv, lens, 1);
}

/* ---------------------------------------------------------------------------------------- */
/* Subscriptions                                                                             */

static uint64_t chan_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    size_t i;

    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static rchan_t *chan_find(const char *name, size_t len)
{
    rchan_t *ch;

    if (!R.buckets) return NULL;
    for (ch = R.buckets[chan_hash(name, len) & (R.nbuckets - 1)]; ch; ch = ch->next)
        if (ch->len == len && memcmp(ch->name, name, len) == 0) return ch;
    return NULL;
}

static rchan_t *chan_add(const char *name, size_t len)
{
    rchan_t *ch = xcalloc(1, sizeof(*ch) + len + 1);
    size_t b;

    if (!R.buckets) {
        R.nbuckets = 64;
        R.buckets = xcalloc(R.nbuckets, sizeof(*R.buckets));
    }
    if (R.nchans >= R.nbuckets) { /* grow: keep chains short */
        size_t nb = R.nbuckets * 2, i;
        rchan_t **nbk = xcalloc(nb, sizeof(*nbk));

        for (i = 0; i < R.nbuckets; i++) {
            rchan_t *c, *next;

            for (c = R.buckets[i]; c; c = next) {
                next = c->next;
                b = chan_hash(c->name, c->len) & (nb - 1);
                c->next = nbk[b];
                nbk[b] = c;
            }
        }
        free(R.buckets);
        R.buckets = nbk;
        R.nbuckets = nb;
    }
    memcpy(ch->name, name, len);
    ch->len = len;
    ch->state = CHAN_NONE;
    b = chan_hash(name, len) & (R.nbuckets - 1);
    ch->next = R.buckets[b];
    R.buckets[b] = ch;
    R.nchans++;
    return ch;
}

static void chan_remove(rchan_t *ch)
{
    rchan_t **pp = &R.buckets[chan_hash(ch->name, ch->len) & (R.nbuckets - 1)];

    while (*pp != ch)
        pp = &(*pp)->next;
    *pp = ch->next;
    R.nchans--;
    free(ch);
}

/* The subscriber connection is gone: nothing is subscribed on the server any more. */
static void chans_reset(void)
{
    size_t i;

    sub_epoch++;

    for (i = 0; i < R.nbuckets; i++) {
        rchan_t *ch, *next;

        for (ch = R.buckets[i]; ch; ch = next) {
            next = ch->next;
            if (ch->refs == 0)
                chan_remove(ch);
            else
                ch->state = CHAN_NONE;
        }
    }
}

static void chans_free(void)
{
    size_t i;

    for (i = 0; i < R.nbuckets; i++) {
        rchan_t *ch, *next;

        for (ch = R.buckets[i]; ch; ch = next) {
            next = ch->next;
            free(ch);
        }
    }
    free(R.buckets);
    R.buckets = NULL;
    R.nbuckets = R.nchans = 0;
}

/* SUBSCRIBE or UNSUBSCRIBE one channel; moves it to the matching in-flight state. */
static int chan_send(rchan_t *ch, const char *verb)
{
    const char *argv[2] = {verb, ch->name};
    size_t lens[2] = {strlen(verb), ch->len};
    bool sub = verb[0] == 'S';

    if (R.sub.state != REDIS_STATE_CONNECTED ||
        redisAsyncCommandArgv(R.sub.ac, on_sub_reply, NULL, 2, argv, lens) != REDIS_OK)
        return -1;
    ch->state = sub ? CHAN_SUBSCRIBING : CHAN_UNSUBSCRIBING;
    return 0;
}

void redis_set_message_handler(redis_message_cb cb, void *data)
{
    message_cb = cb;
    message_data = data;
}

void redis_set_channel_handler(const char *channel, redis_message_cb cb, void *data)
{
    if (nchannel_handlers == CHANNEL_HANDLERS_MAX) {
        log_error("redis: too many channel handlers (%s)", channel);
        return;
    }
    channel_handlers[nchannel_handlers].name = channel;
    channel_handlers[nchannel_handlers].cb = cb;
    channel_handlers[nchannel_handlers].data = data;
    nchannel_handlers++;
}

void redis_set_subscribed_handler(void (*cb)(const char *channel, void *data), void *data)
{
    subscribed_cb = cb;
    subscribed_data = data;
}

void redis_flush(void)
{
    if (R.running && R.cmd.state == REDIS_STATE_CONNECTED && R.cmd.ac)
        redisAsyncHandleWrite(R.cmd.ac);
}

void redis_sub_drain(void)
{
    /* A read with nothing waiting is what a spurious wake-up does: hiredis gets EAGAIN. Not from
     * inside a message handler (a reply it sends may start the next pipelined request, whose
     * lookup drains): hiredis's read is not reentrant, and the read in progress goes on with the
     * waiting messages anyway. */
    if (sub_dispatching == 0 && !R.drained && R.running && R.sub.state == REDIS_STATE_CONNECTED &&
        R.sub.ac) {
        R.drained = true;
        redisAsyncHandleRead(R.sub.ac);
    }
}

unsigned redis_sub_epoch(void)
{
    return sub_epoch;
}

bool redis_channel_active(const char *channel)
{
    rchan_t *ch = chan_find(channel, strlen(channel));

    return ch && ch->refs > 0 && ch->state == CHAN_ACTIVE && R.sub.state == REDIS_STATE_CONNECTED;
}

void redis_subscribe(const char *channel)
{
    size_t len = strlen(channel);
    rchan_t *ch = chan_find(channel, len);

    if (!ch) ch = chan_add(channel, len);
    if (++ch->refs == 1 && ch->state == CHAN_NONE) chan_send(ch, "SUBSCRIBE");
}

void redis_unsubscribe(const char *channel)
{
    rchan_t *ch = chan_find(channel, strlen(channel));

    if (!ch || ch->refs == 0) {
        log_warn("redis: unsubscribe from %s without a subscription", channel);
        return;
    }
    if (--ch->refs > 0) return;
    if (ch->state == CHAN_ACTIVE) {
        if (chan_send(ch, "UNSUBSCRIBE") != 0) ch->state = CHAN_ACTIVE;
    } else if (ch->state == CHAN_NONE) {
        chan_remove(ch);
    }
    /* SUBSCRIBING / UNSUBSCRIBING: the confirmation handler finishes the job */
}

/* Every reply on the subscriber connection: messages and (un)subscribe confirmations. */
static void on_sub_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *r = reply;
    const char *kind;
    rchan_t *ch;

    (void)priv;
    if (!r || ac != R.sub.ac || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = r->element[0]->str;
    ch = chan_find(r->element[1]->str, r->element[1]->len);
    if (!ch) return; /* the anchor channel, or one already forgotten */
    if (strcmp(kind, "message") == 0) {
        sub_dispatching++;
        bool handled = false;
        for (int i = 0; i < nchannel_handlers && !handled; i++) {
            if (strcmp(channel_handlers[i].name, ch->name) == 0) {
                if (ch->refs > 0 && r->element[2]->type == REDIS_REPLY_STRING)
                    channel_handlers[i].cb(ch->name, r->element[2]->str, r->element[2]->len,
                                           channel_handlers[i].data);
                handled = true;
            }
        }
        if (!handled && ch->refs > 0 && message_cb && r->element[2]->type == REDIS_REPLY_STRING)
            message_cb(ch->name, r->element[2]->str, r->element[2]->len, message_data);
        sub_dispatching--;
    } else if (strcmp(kind, "subscribe") == 0) {
        ch->state = CHAN_ACTIVE;
        if (ch->refs == 0 && chan_send(ch, "UNSUBSCRIBE") != 0) ch->state = CHAN_ACTIVE;
        if (ch->refs > 0 && subscribed_cb) subscribed_cb(ch->name, subscribed_data);
    } else if (strcmp(kind, "unsubscribe") == 0) {
        ch->state = CHAN_NONE;
        if (ch->refs > 0) {
            if (chan_send(ch, "SUBSCRIBE") != 0) ch->state = CHAN_NONE;
        } else {
            chan_remove(ch);
        }
    }
}
