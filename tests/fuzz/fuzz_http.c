/*
 * The HTTP request path as the loop sees it: core/http.c (llhttp callbacks, head and body
 * limits, chunked bodies and trailers, pipelining, Expect: 100-continue, streamed bodies,
 * lingering close, 413/415/431), core/router.c and core/json.c, on a real libuv loop.
 *
 * The server listens on 127.0.0.1 (an ephemeral port) inside this process; each input is sent
 * over one fresh TCP connection, in pieces (the first byte picks the piece size, so a head or a
 * chunk header split across reads is exercised), with the loop run between pieces. Then the
 * client half-closes and the loop runs until the server has closed the connection. Oracles:
 * the sanitizers; every connection is closed in the end (no connection is held forever once the
 * client is gone), and with it every per-IP count. The client plays a trusted proxy
 * (TRUSTED_PROXIES=127.0.0.1), so X-Forwarded-For is read and each request is counted under
 * its forwarded client.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/http.h"
#include "core/json.h"
#include "core/log.h"
#include "core/router.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t *loop;
static int port;

/* ---- routes ---- */

static void h_echo(http_req_t *req)
{
    const char *q = http_req_query(req, "a");
    const char *c = http_req_cookie(req, "sid");
    const char *h = http_req_header(req, "x-organization-id");
    char *body = arena_printf(&req->arena, "{\"x\":\"%s\",\"a\":\"%s\",\"c\":\"%s\",\"h\":\"%s\"}",
                              req->params[0], q ? q : "", c ? c : "", h ? h : "");
    http_reply_json(req, 200, body);
}

static void h_json(http_req_t *req)
{
    json_t *b;
    if (!json_body_ok_or_reply(req, &b)) return;
    const char *e = json_get_str(b, "email");
    if (json_has(b, "fail")) {
        http_reply_error(req, 400, "VALIDATION_ERROR", "fail");
        return;
    }
    http_res_header(req, "X-Email", e ? e : "");
    http_reply_json(req, 200, "{\"ok\":true}");
}

typedef struct deferred {
    uv_timer_t t;
    http_req_t *req;
} deferred_t;

static void on_deferred_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_deferred(uv_timer_t *t)
{
    deferred_t *d = t->data;
    if (!http_req_gone(d->req)) http_reply_json(d->req, 202, "{\"later\":true}");
    http_req_unref(d->req);
    uv_close((uv_handle_t *)&d->t, on_deferred_closed);
}

static void on_gone_noop(http_req_t *req)
{
    (void)req;
}

/* Replies on a later turn of the loop, like a handler waiting for the database. */
static void h_later(http_req_t *req)
{
    deferred_t *d = calloc(1, sizeof(*d));
    d->req = req;
    http_req_ref(req);
    req->on_gone = on_gone_noop;
    uv_timer_init(loop, &d->t);
    d->t.data = d;
    uv_timer_start(&d->t, on_deferred, 0, 0);
}

static int on_chunk(http_req_t *req, const char *data, size_t len)
{
    size_t *n = req->data;
    *n += len;
    /* A body starting with "STOP" is refused midway: the handler replies early. */
    if (*n == len && len >= 4 && memcmp(data, "STOP", 4) == 0) {
        http_reply_error(req, 422, "VALIDATION_ERROR", "refused");
        return -1;
    }
    return 0;
}

static void on_upload_end(http_req_t *req)
{
    size_t *n = req->data;
    char *body = arena_printf(&req->arena, "{\"bytes\":%zu}", *n);
    http_reply_json(req, 201, body);
}

static void h_upload(http_req_t *req)
{
    req->data = arena_calloc(&req->arena, sizeof(size_t));
    http_req_read_body(req, on_chunk, on_upload_end);
}

static void h_sse(http_req_t *req)
{
    http_stream_open(req, 200, "text/event-stream");
    sbuf_t *b = sbuf_new("id: 1\nevent: tick\ndata: {}\n\n", 28);
    (void)http_stream_write(req, b, 1 << 20);
    sbuf_unref(b);
    http_stream_close(req);
}

/* A stream left open until the client goes. */
static void h_sse_open(http_req_t *req)
{
    http_req_ref(req);
    req->on_gone = (http_req_cb)http_req_unref;
    http_stream_open(req, 200, "text/event-stream");
}

static void h_empty(http_req_t *req)
{
    http_reply_empty(req, 204);
}

static const route_t routes[] = {
    {HTTP_M_GET, "/echo/:x", h_echo, 0, 0, 0, 0},
    {HTTP_M_POST, "/json", h_json, 0, 0, 0, 0},
    {HTTP_M_PATCH, "/json/:id", h_json, 0, 0, 0, 0},
    {HTTP_M_POST, "/small", h_json, 0, 0, 0, 64},
    {HTTP_M_GET, "/later", h_later, 0, 0, 0, 0},
    {HTTP_M_POST, "/later", h_later, 0, 0, 0, 0},
    {HTTP_M_POST, "/upload", h_upload, 0, 0, ROUTE_STREAM_BODY, 1024 * 1024},
    {HTTP_M_PUT, "/upload/:name", h_upload, 0, 0, ROUTE_STREAM_BODY, 4096},
    {HTTP_M_GET, "/sse", h_sse, 0, 0, 0, 0},
    {HTTP_M_GET, "/sse-open", h_sse_open, 0, 0, 0, 0},
    {HTTP_M_DELETE, "/items/:a/sub/:b", h_empty, 0, 0, 0, 0},
};

/* ---- client side ---- */

static size_t drain(int fd)
{
    static char scratch[1 << 16];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, scratch, sizeof(scratch));
        if (r <= 0) return r == 0 ? total + 1 : total; /* EOF counts as progress */
        total += (size_t)r;
    }
}

static void turn(int fd)
{
    uv_run(loop, UV_RUN_NOWAIT);
    drain(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* As coachd's main() does: a write to a connection the client already closed must be an
     * EPIPE for the server to handle, not a SIGPIPE that kills the process. */
    signal(SIGPIPE, SIG_IGN);
    setenv("TRUSTED_ORIGINS", "http://trusted.example", 1);
    setenv("LOG_LEVEL", "error", 1);
    setenv("TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8", 1);
    config_load();
    log_set_level(LOG_ERROR);
    loop = uv_default_loop();
    router_add(routes, sizeof(routes) / sizeof(routes[0]));
    int fd;
    if (http_listen_socket("127.0.0.1", 0, &fd) != 0) abort();
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &alen);
    port = ntohs(a.sin_port);
    if (http_server_start_fd(loop, fd) != 0) abort();
    return 0;
}

/* One client connection to the server, made without blocking. A blocking connect() can wait a
 * second or more (a SYN that meets a connection of the same ports still in TIME_WAIT is answered
 * and retried after the kernel's retransmission delay), and libFuzzer's SIGALRM, which checks
 * the -timeout every second or so, then ends it with EINTR: a fresh CI machine lost the target
 * to that abort. So the connect is non-blocking and waited for with poll(), which is simply
 * repeated when a signal interrupts it. A thousand connections a second can also use up the
 * machine's ephemeral ports for a moment (EADDRNOTAVAIL): that is the host, not the server, so
 * wait for one to come free. Any other failure is named before the abort (a bare abort() shows
 * only as "deadly signal"). */
static int client_connect(const struct sockaddr_in *a)
{
    for (int tries = 0;; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        int err = fd < 0 ? errno : 0;
        if (fd >= 0 && connect(fd, (const struct sockaddr *)a, sizeof(*a)) != 0) {
            err = errno;
            if (err == EINPROGRESS || err == EINTR) {
                /* Done when writable; SO_ERROR says how. At most 8 s (libFuzzer's -timeout
                 * is 10 s), with the loop run meanwhile so the server keeps accepting. */
                err = ETIMEDOUT;
                for (int waited = 0; waited < 800; waited++) {
                    uv_run(loop, UV_RUN_NOWAIT);
                    struct pollfd p = {.fd = fd, .events = POLLOUT};
                    int n = poll(&p, 1, 10);
                    if (n < 0 && errno == EINTR) continue;
                    if (n != 0) {
                        socklen_t len = sizeof(err);
                        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
                        break;
                    }
                }
            }
        }
        if (fd >= 0 && err == 0) {
            /* Closed with a reset once the test is over (the server has closed its side by
             * then): no TIME_WAIT left on either side to collide with a later connection. */
            struct linger l = {.l_onoff = 1, .l_linger = 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
            return fd;
        }
        if (fd >= 0) close(fd);
        if (err != EADDRNOTAVAIL || tries >= 3000) {
            fprintf(stderr, "fuzz_http: connect to the server: %s\n", strerror(err));
            abort();
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t piece = (data[0] & 0x80) ? size : 1 + (size_t)(data[0] & 0x7f) * 8;
    data++;
    size--;

    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = client_connect(&a);
    uv_run(loop, UV_RUN_NOWAIT); /* accept */

    size_t off = 0;
    int stuck = 0;
    while (off < size) {
        size_t k = size - off < piece ? size - off : piece;
        ssize_t w = send(fd, data + off, k, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            stuck = 0;
        } else if (w < 0 && errno != EAGAIN) {
            break; /* the server closed (an error answer): the rest is not sent */
        } else if (++stuck > 1000) {
            break; /* the server stopped reading (backpressure) */
        }
        turn(fd);
    }
    /* Let the server answer what it has, including replies deferred to later turns. */
    for (int quiet = 0, i = 0; quiet < 3 && i < 200; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        quiet = drain(fd) ? 0 : quiet + 1;
    }
    /* The client is done: after its EOF the server must close the connection by itself. */
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 100000 && http_server_conn_count() > 0; i++)
        turn(fd);
    close(fd);
    FUZZ_CHECK(http_server_conn_count() == 0);
    FUZZ_CHECK(http_server_ip_entries() == 0);
    return 0;
}
