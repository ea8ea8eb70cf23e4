/*
 * rt/redis against a real redis-server: COACHD_TEST_REDIS_URL (redis://127.0.0.1:PORT[/db])
 * must be set; the run fails when it is missing. The test includes rt/redis.c to reach the
 * client's sockets (to kill exactly its own connections with CLIENT KILL ADDR).
 */
#include "rt/redis.c"

#include <sys/socket.h>

#include "tests/unit/rt/helpers.h"

static const char *redis_url;
static char key_prefix[64];

typedef struct reply_box {
    bool done;
    bool null_reply;
    int calls;
    int in_call; /* set while the issuing call is on the stack */
    bool was_sync;
    int type;
    long long integer;
    char str[256];
    size_t len;
} reply_box_t;

static int in_call;

static void on_reply(redisReply *r, void *data)
{
    reply_box_t *b = data;

    b->calls++;
    b->done = true;
    b->was_sync = in_call > 0;
    b->null_reply = r == NULL;
    if (!r) return;
    b->type = r->type;
    b->integer = r->integer;
    if (r->str) {
        b->len = r->len < sizeof(b->str) - 1 ? r->len : sizeof(b->str) - 1;
        memcpy(b->str, r->str, b->len);
        b->str[b->len] = '\0';
    }
}

static void wait_connected(void)
{
    int i;

    for (i = 0; i < 100 && !(redis_connected() && R.sub.state == REDIS_STATE_CONNECTED); i++)
        run_for(50);
    assert_true(redis_connected());
    assert_int_equal(R.sub.state, REDIS_STATE_CONNECTED);
}

/* Runs one command to completion and returns its reply box. */
static reply_box_t cmd(const char *fmt, ...)
{
    reply_box_t b;
    va_list ap;

    memset(&b, 0, sizeof(b));
    in_call++;
    va_start(ap, fmt);
    vcommand(REDIS_COMMAND_TIMEOUT_MS, on_reply, &b, fmt, ap);
    va_end(ap);
    in_call--;
    assert_true(run_until(&b.done, 5000));
    assert_false(b.was_sync);
    assert_int_equal(b.calls, 1);
    return b;
}

/* PUBSUB NUMSUB gives an array; read the count through a dedicated callback. */
typedef struct numsub_box {
    bool done;
    long long n;
} numsub_box_t;

static void on_numsub(redisReply *r, void *data)
{
    numsub_box_t *b = data;

    b->done = true;
    b->n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        b->n = r->element[1]->integer;
}

static long long numsub_count(const char *channel)
{
    numsub_box_t b = {false, -1};

    redis_command(on_numsub, &b, "PUBSUB NUMSUB %s", channel);
    assert_true(run_until(&b.done, 5000));
    return b.n;
}

static void wait_numsub(const char *channel, long long want)
{
    int i;

    for (i = 0; i < 100 && numsub_count(channel) != want; i++)
        run_for(30);
    assert_int_equal(numsub_count(channel), want);
}

typedef struct msg_box {
    int count;
    char channel[128];
    char msg[256];
    size_t len;
} msg_box_t;

static void on_message(const char *channel, const char *msg, size_t len, void *data)
{
    msg_box_t *b = data;

    b->count++;
    snprintf(b->channel, sizeof(b->channel), "%s", channel);
    b->len = len < sizeof(b->msg) ? len : sizeof(b->msg);
    memcpy(b->msg, msg, b->len);
}

static int local_port(redisAsyncContext *ac)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    assert_non_null(ac);
    assert_int_equal(getsockname(ac->c.fd, (struct sockaddr *)&ss, &sl), 0);
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void start(const char *url)
{
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(redis_init(&loop, url), 0);
}

static void stop(void)
{
    redis_shutdown();
    loop_finish();
}

/* ---------------------------------------------------------------------------------------- */

static void test_url_parse(void **state)
{
    (void)state;
    assert_int_equal(parse_url("redis://:s3cr%40t@10.0.0.5:6380/3"), 0);
    assert_string_equal(R.host, "10.0.0.5");
    assert_int_equal(R.port, 6380);
    assert_int_equal(R.db, 3);
    assert_null(R.user);
    assert_string_equal(R.pass, "s3cr@t");
    free(R.host);
    free(R.pass);
    R.host = R.pass = NULL;
    assert_int_equal(parse_url("redis://app:pw@[::1]"), 0);
    assert_string_equal(R.host, "::1");
    assert_int_equal(R.port, 6379);
    assert_int_equal(R.db, 0);
    assert_string_equal(R.user, "app");
    assert_string_equal(R.pass, "pw");
    free(R.host);
    free(R.user);
    free(R.pass);
    R.host = R.user = R.pass = NULL;
    assert_int_equal(parse_url("redis://localhost:99999"), -1);
    free(R.host);
    R.host = NULL;
    assert_int_equal(parse_url("http://localhost"), -1);
    assert_int_not_equal(redis_init(NULL, "nope://"), 0);
}

static void test_round_trip(void **state)
{
    reply_box_t b;
    char key[128], bin[5] = {'a', '\0', 'b', '\r', '\n'};
    const char *argv[3];
    size_t lens[3];

    (void)state;
    start(redis_url);
    wait_connected();
    snprintf(key, sizeof(key), "%s:k", key_prefix);
    b = cmd("SET %s %s", key, "héllo");
    assert_int_equal(b.type, REDIS_REPLY_STATUS);
    assert_string_equal(b.str, "OK");
    b = cmd("GET %s", key);
    assert_int_equal(b.type, REDIS_REPLY_STRING);
    assert_string_equal(b.str, "héllo");
    /* binary-safe argv */
    argv[0] = "SET";
    argv[1] = key;
    argv[2] = bin;
    lens[0] = 3;
    lens[1] = strlen(key);
    lens[2] = sizeof(bin);
    memset(&b, 0, sizeof(b));
    in_call++;
    redis_command_argv(on_reply, &b, 3, argv, lens);
    in_call--;
    assert_true(run_until(&b.done, 5000));
    assert_false(b.was_sync);
    b = cmd("GET %s", key);
    assert_int_equal(b.len, sizeof(bin));
    assert_memory_equal(b.str, bin, sizeof(bin));
    b = cmd("DEL %s", key);
    assert_int_equal(b.integer, 1);
    b = cmd("NOSUCHCOMMAND");
    assert_int_equal(b.type, REDIS_REPLY_ERROR);
    stop();
}

static void on_ping(bool ok, void *data)
{
    int *v = data;

    *v = ok ? 1 : 0;
}

static void test_ping(void **state)
{
    int v = -1;
    bool done = false;
    int i;

    (void)state;
    start(redis_url);
    wait_connected();
    redis_ping(on_ping, &v);
    for (i = 0; i < 100 && v < 0; i++)
        run_for(20);
    assert_int_equal(v, 1);
    (void)done;
    stop();
}

static void test_pubsub(void **state)
{
    msg_box_t m;
    char chan[128], other[128];
    int i;

    (void)state;
    memset(&m, 0, sizeof(m));
    snprintf(chan, sizeof(chan), "%s:chan", key_prefix);
    snprintf(other, sizeof(other), "%s:other", key_prefix);
    redis_set_message_handler(on_message, &m);
    redis_subscribe(chan); /* before init: sent once connected */
    start(redis_url);
    wait_connected();
    wait_numsub(chan, 1);
    redis_publish(chan, "hello\0world", 11);
    for (i = 0; i < 100 && m.count < 1; i++)
        run_for(20);
    assert_int_equal(m.count, 1);
    assert_string_equal(m.channel, chan);
    assert_int_equal(m.len, 11);
    assert_memory_equal(m.msg, "hello\0world", 11);

    /* refcounted: two subscribers, one leaves, messages still flow */
    redis_subscribe(chan);
    redis_unsubscribe(chan);
    run_for(100);
    wait_numsub(chan, 1);
    redis_publish(chan, "two", 3);
    for (i = 0; i < 100 && m.count < 2; i++)
        run_for(20);
    assert_int_equal(m.count, 2);

    /* last one leaves: UNSUBSCRIBE; a quick re-subscribe while it is in flight still works */
    redis_unsubscribe(chan);
    redis_subscribe(other);
    redis_subscribe(chan);
    run_for(100);
    wait_numsub(chan, 1);
    wait_numsub(other, 1);
    redis_unsubscribe(chan);
    wait_numsub(chan, 0);
    redis_publish(chan, "nobody", 6);
    redis_publish(other, "three", 5);
    for (i = 0; i < 100 && m.count < 3; i++)
        run_for(20);
    assert_int_equal(m.count, 3);
    assert_string_equal(m.channel, other);
    redis_unsubscribe(other);
    wait_numsub(other, 0);
    redis_unsubscribe(other); /* one too many: warns, no crash */
    stop();
    redis_set_message_handler(NULL, NULL);
}

/* Kills the client's own connections and checks that it comes back: commands fail cleanly
 * while down, subscriptions are re-issued, queued publishes are flushed. */
static void test_reconnect(void **state)
{
    msg_box_t m;
    char chan[128];
    reply_box_t b, lost;
    int i;

    (void)state;
    memset(&m, 0, sizeof(m));
    snprintf(chan, sizeof(chan), "%s:re", key_prefix);
    redis_set_message_handler(on_message, &m);
    start(redis_url);
    redis_subscribe(chan);
    wait_connected();
    wait_numsub(chan, 1);

    /* the subscriber connection */
    b = cmd("CLIENT KILL ADDR 127.0.0.1:%d", local_port(R.sub.ac));
    assert_int_equal(b.type, REDIS_REPLY_INTEGER);
    assert_int_equal(b.integer, 1);
    run_for(50);
    wait_connected();
    wait_numsub(chan, 1);
    redis_publish(chan, "after-sub-kill", 14);
    for (i = 0; i < 100 && m.count < 1; i++)
        run_for(20);
    assert_int_equal(m.count, 1);

    /* the command connection, killed by itself: the in-flight command gets NULL once */
    memset(&lost, 0, sizeof(lost));
    redis_command(on_reply, &lost, "CLIENT KILL ADDR 127.0.0.1:%d SKIPME no", local_port(R.cmd.ac));
    assert_true(run_until(&lost.done, 5000));
    run_for(50);
    assert_int_equal(lost.calls, 1);
    assert_false(redis_connected());
    redis_publish(chan, "queued-while-down", 17);
    memset(&b, 0, sizeof(b));
    redis_command(on_reply, &b, "PING");
    assert_true(run_until(&b.done, 5000));
    assert_true(b.null_reply); /* fails at once while down */
    wait_connected();
    for (i = 0; i < 100 && m.count < 2; i++)
        run_for(20);
    assert_int_equal(m.count, 2);
    assert_memory_equal(m.msg, "queued-while-down", 17);
    b = cmd("PING");
    assert_string_equal(b.str, "PONG");
    stop();
    redis_set_message_handler(NULL, NULL);
}

/* A silent server: accepts connections, reads and never answers. */
static uv_tcp_t mute_server;
static int mute_conns;

static void on_mute_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    static char scratch[4096];

    (void)h;
    (void)size;
    *buf = uv_buf_init(scratch, sizeof(scratch));
}

static void on_mute_closed(uv_handle_t *h)
{
    free(h);
}

static void on_mute_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    if (n < 0) uv_close((uv_handle_t *)s, on_mute_closed);
}

static void on_mute_conn(uv_stream_t *srv, int status)
{
    uv_tcp_t *c = malloc(sizeof(*c));

    assert_int_equal(status, 0);
    uv_tcp_init(&loop, c);
    assert_int_equal(uv_accept(srv, (uv_stream_t *)c), 0);
    uv_read_start((uv_stream_t *)c, on_mute_alloc, on_mute_read);
    mute_conns++;
}

static void close_mute_clients(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type == UV_TCP && h != (uv_handle_t *)&mute_server && !uv_is_closing(h))
        uv_close(h, on_mute_closed);
}

/* A command that gets no answer for 2 s fails exactly once, and a connection that answers
 * nothing at all is replaced. */
static void test_timeout(void **state)
{
    reply_box_t slow;
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound), port;
    char url[64];
    uint64_t t0;

    (void)state;
    assert_int_equal(loop_begin(), 0);
    uv_tcp_init(&loop, &mute_server);
    uv_ip4_addr("127.0.0.1", 0, &addr);
    assert_int_equal(uv_tcp_bind(&mute_server, (const struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&mute_server, 16, on_mute_conn), 0);
    uv_tcp_getsockname(&mute_server, (struct sockaddr *)&bound, &len);
    port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    mute_conns = 0;
    assert_int_equal(redis_init(&loop, url), 0);
    for (int i = 0; i < 100 && !redis_connected(); i++)
        run_for(20);
    assert_true(redis_connected()); /* no AUTH/SELECT: connected once TCP is up */
    memset(&slow, 0, sizeof(slow));
    uv_update_time(&loop);
    t0 = uv_now(&loop);
    redis_command(on_reply, &slow, "PING");
    assert_true(run_until(&slow.done, 3000));
    assert_true(slow.null_reply);
    assert_true(uv_now(&loop) - t0 >= REDIS_COMMAND_TIMEOUT_MS);
    assert_true(uv_now(&loop) - t0 < REDIS_COMMAND_TIMEOUT_MS + 500);
    run_for(1000);
    assert_int_equal(slow.calls, 1);
    assert_true(mute_conns >= 3); /* command + subscriber, then the command one again */
    redis_shutdown();
    uv_close((uv_handle_t *)&mute_server, NULL);
    uv_walk(&loop, close_mute_clients, NULL);
    loop_finish();
}

/* Nothing listens on the port: every callback gets NULL, from the loop, exactly once. */
static void test_closed_port(void **state)
{
    reply_box_t b;
    int v = -1, i;

    (void)state;
    start("redis://127.0.0.1:1/2");
    memset(&b, 0, sizeof(b));
    in_call++;
    redis_command(on_reply, &b, "GET x");
    in_call--;
    assert_false(b.done);
    assert_true(run_until(&b.done, 2000));
    assert_false(b.was_sync);
    assert_true(b.null_reply);
    redis_ping(on_ping, &v);
    for (i = 0; i < 50 && v < 0; i++)
        run_for(20);
    assert_int_equal(v, 0);
    redis_publish("x", "queued", 6);
    redis_subscribe("x");
    run_for(400); /* a few reconnect attempts */
    assert_false(redis_connected());
    assert_int_equal(b.calls, 1);
    stop();
}

/* Shutdown with commands in flight: each gets NULL, the loop closes cleanly. */
static void test_shutdown_pending(void **state)
{
    reply_box_t a, c;

    (void)state;
    start(redis_url);
    wait_connected();
    memset(&a, 0, sizeof(a));
    memset(&c, 0, sizeof(c));
    redis_command(on_reply, &a, "PING");
    redis_command(on_reply, &c, "PING");
    redis_shutdown();
    assert_true(a.done && a.null_reply);
    assert_true(c.done && c.null_reply);
    assert_int_equal(a.calls, 1);
    loop_finish();
    assert_int_equal(a.calls, 1);
    assert_int_equal(c.calls, 1);
}

/* Shutdown while the first connection attempt is still resolving. */
static void test_shutdown_early(void **state)
{
    (void)state;
    start(redis_url);
    stop();
    start("redis://localhost:1");
    stop();
}

/* After a failed assertion: stop the client and close whatever is left on the loop. */
static int teardown(void **state)
{
    (void)state;
    redis_shutdown();
    redis_set_message_handler(NULL, NULL);
    if (!loop_is_open) return 0;
    uv_walk(&loop, close_any, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_url_parse, teardown),
        cmocka_unit_test_teardown(test_round_trip, teardown),
        cmocka_unit_test_teardown(test_ping, teardown),
        cmocka_unit_test_teardown(test_pubsub, teardown),
        cmocka_unit_test_teardown(test_reconnect, teardown),
        cmocka_unit_test_teardown(test_closed_port, teardown),
        cmocka_unit_test_teardown(test_shutdown_pending, teardown),
        cmocka_unit_test_teardown(test_shutdown_early, teardown),
        cmocka_unit_test_teardown(test_timeout, teardown),
    };

    redis_url = getenv("COACHD_TEST_REDIS_URL");
    if (!redis_url || !*redis_url) {
        fprintf(stderr, "COACHD_TEST_REDIS_URL is not set (redis://127.0.0.1:PORT)\n");
        return 1;
    }
    snprintf(key_prefix, sizeof(key_prefix), "coachd-test:rt:%d", (int)getpid());
    return cmocka_run_group_tests_name("rt_redis", tests, NULL, NULL);
}
